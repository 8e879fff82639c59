"""kiln's IR: the core (ops, values, blocks, regions, types), printer, parser,
verifier, and one module per dialect. Nothing here imports the rest of kiln."""

from . import affine, arith, builtin, cf, func, gpu, math, memref, tensor, tensor_indexed, tensor_sort, vector
from .builder import Builder
from .diagnostics import DTypeError, KilnError, ParseError, ShapeError, VerificationError
from .ir import OP_REGISTRY, Block, BlockArgument, Operation, OpResult, Region, Value
from .location import Location
from .parser import parse_ir
from .printer import print_ir
from .types import FunctionType, ScalarType, TensorType, Type, scalar_type_of, tensor_type
from .verifier import verify

__all__ = [
    "affine",
    "arith",
    "builtin",
    "cf",
    "func",
    "gpu",
    "math",
    "memref",
    "tensor",
    "tensor_indexed",
    "tensor_sort",
    "vector",
    "Builder",
    "DTypeError",
    "KilnError",
    "ParseError",
    "ShapeError",
    "VerificationError",
    "OP_REGISTRY",
    "Block",
    "BlockArgument",
    "Operation",
    "OpResult",
    "Region",
    "Value",
    "Location",
    "parse_ir",
    "print_ir",
    "FunctionType",
    "ScalarType",
    "TensorType",
    "Type",
    "scalar_type_of",
    "tensor_type",
    "verify",
]
