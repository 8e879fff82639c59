"""The ``math`` dialect: transcendental, rounding and power functions, as in upstream MLIR.

%e = math.exp %x : f32
%t = math.atan2 %y, %x : f64
%p = math.ipowi %a, %b : i32

``FLOAT_FUNCTIONS`` is the one table of float math functions added for numpy's ufuncs:
each row names the op, numpy's function (the reference semantics, and the name of the
``kiln.*`` tensor op made from it), the C library's name for the float64 version (the
float32 one adds ``f``: ``tan``, ``tanf``; CUDA's math library has the same names), the
LLVM intrinsic where LLVM has one (else native code calls the C library), and whether
every target computes numpy's value bit for bit (rounding functions do; the
transcendental ones differ by an ulp between libraries, so constants are not folded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .arith import FLOATS, same_typed_op
from .types import SCALAR_TYPES

_INTS = tuple(SCALAR_TYPES[name] for name in ("i8", "i16", "i32", "i64"))

ExpOp = same_typed_op("ExpOp", "math.exp", 1, FLOATS, "e to the x")
LogOp = same_typed_op("LogOp", "math.log", 1, FLOATS, "natural logarithm")
SqrtOp = same_typed_op("SqrtOp", "math.sqrt", 1, FLOATS, "square root")
TanhOp = same_typed_op("TanhOp", "math.tanh", 1, FLOATS, "hyperbolic tangent")
SinOp = same_typed_op("SinOp", "math.sin", 1, FLOATS, "sine")
CosOp = same_typed_op("CosOp", "math.cos", 1, FLOATS, "cosine")
AbsFOp = same_typed_op("AbsFOp", "math.absf", 1, FLOATS, "float absolute value")
AbsIOp = same_typed_op("AbsIOp", "math.absi", 1, _INTS, "integer absolute value (wrapping at the minimum)")
PowFOp = same_typed_op("PowFOp", "math.powf", 2, FLOATS, "float power")
IPowIOp = same_typed_op("IPowIOp", "math.ipowi", 2, _INTS, "integer power (negative exponents are an error)")
for _op in (ExpOp, LogOp, SqrtOp, TanhOp, SinOp, CosOp, AbsFOp, AbsIOp, PowFOp, IPowIOp):
    _op.__module__ = __name__


@dataclass(frozen=True)
class FloatFunction:
    """One row of ``FLOAT_FUNCTIONS``: a float math op and how each target computes it."""

    op: type
    numpy_fn: Callable
    c_name: str
    intrinsic: str | None
    exact: bool


def _function(mlir_name, numpy_fn, arity=1, c_name=None, intrinsic=None, exact=False) -> FloatFunction:
    stem = mlir_name.split(".")[1]
    class_name = "".join(part.capitalize() for part in stem.split("_")) + "Op"
    op = same_typed_op(class_name, mlir_name, arity, FLOATS, f"numpy.{numpy_fn.__name__}, elementwise")
    op.__module__ = __name__
    return FloatFunction(op, numpy_fn, c_name or stem, intrinsic, exact)


FLOAT_FUNCTIONS = (
    _function("math.tan", np.tan, intrinsic="tan"),
    _function("math.sinh", np.sinh, intrinsic="sinh"),
    _function("math.cosh", np.cosh, intrinsic="cosh"),
    _function("math.asin", np.arcsin, intrinsic="asin"),
    _function("math.acos", np.arccos, intrinsic="acos"),
    _function("math.atan", np.arctan, intrinsic="atan"),
    _function("math.asinh", np.arcsinh),
    _function("math.acosh", np.arccosh),
    _function("math.atanh", np.arctanh),
    _function("math.log1p", np.log1p),
    _function("math.expm1", np.expm1),
    _function("math.exp2", np.exp2, intrinsic="exp2"),
    _function("math.log2", np.log2, intrinsic="log2"),
    _function("math.log10", np.log10, intrinsic="log10"),
    _function("math.cbrt", np.cbrt),
    _function("math.floor", np.floor, intrinsic="floor", exact=True),
    _function("math.ceil", np.ceil, intrinsic="ceil", exact=True),
    _function("math.trunc", np.trunc, intrinsic="trunc", exact=True),
    # rint rounds halves to even in the default rounding mode, which kiln never changes
    _function("math.roundeven", np.rint, c_name="rint", intrinsic="roundeven", exact=True),
    _function("math.atan2", np.arctan2, 2, intrinsic="atan2"),
    _function("math.copysign", np.copysign, 2, intrinsic="copysign", exact=True),
)
FUNCTION_OF = {f.op: f for f in FLOAT_FUNCTIONS}
globals().update((f.op.__name__, f.op) for f in FLOAT_FUNCTIONS)
