"""The types of kiln's IR, written as MLIR writes them.

``f16``, ``f32``, ``f64``, ``i1``, ``i8``, ``i16``, ``i32``, ``i64``, ``ui8``, ``ui16``,
``ui32``, ``ui64`` and ``index`` are scalar types;
``tensor<4x8xf32>`` is a value-semantics tensor of static shape;
``(tensor<4xf32>) -> tensor<f32>`` is a function type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Type:
    """Base class of all IR types; subclasses are frozen dataclasses."""


@dataclass(frozen=True)
class ScalarType(Type):
    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def dtype(self) -> np.dtype:
        if self.name not in _TO_NUMPY:
            raise TypeError(f"{self.name} has no numpy dtype")
        return np.dtype(_TO_NUMPY[self.name])

    @property
    def is_float(self) -> bool:
        return self.name in ("f16", "f32", "f64")

    @property
    def is_int(self) -> bool:
        return self.name in _INTEGER_NAMES

    @property
    def is_unsigned(self) -> bool:
        return self.name.startswith("ui")

    @property
    def signless(self) -> "ScalarType":
        """The type the loop level computes in: MLIR's arith takes signless integers only
        (``ui8`` is ``i8`` there, and its ops say which are unsigned: ``divui``, ``cmpi ult``)."""
        return SCALAR_TYPES[self.name[1:]] if self.is_unsigned else self

    @property
    def is_bool(self) -> bool:
        return self.name == "i1"


f32 = ScalarType("f32")
f64 = ScalarType("f64")
i1 = ScalarType("i1")
i32 = ScalarType("i32")
i64 = ScalarType("i64")
index = ScalarType("index")
i8 = ScalarType("i8")  # also the memory arena's bytes
i16 = ScalarType("i16")
ui8, ui16, ui32, ui64 = (ScalarType(f"ui{bits}") for bits in (8, 16, 32, 64))
f16 = ScalarType("f16")  # numpy's float16: stored as such, computed in f32 (see passes/scalar_rules.py)

SCALAR_TYPES = {t.name: t for t in (f16, f32, f64, i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64, index)}
_INTEGER_NAMES = ("i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64")
_TO_NUMPY = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "ui8": np.uint8,
    "ui16": np.uint16,
    "ui32": np.uint32,
    "ui64": np.uint64,
}
_FROM_NUMPY = {np.dtype(v): SCALAR_TYPES[k] for k, v in _TO_NUMPY.items()}

SUPPORTED_DTYPES = tuple(_FROM_NUMPY)


def dtype_fix_hint(dtype) -> str:
    """A hint for an unsupported dtype that kiln supports in another byte order: numpy
    arrays of a non-native byte order (np.dtype('>f4') on a little-endian machine) convert
    with .astype('=f4'); "" for any other dtype."""
    dtype = np.dtype(dtype)
    native = dtype.newbyteorder("=")
    if dtype.byteorder not in ("=", "|") and not dtype.isnative and native in SUPPORTED_DTYPES:
        code = f"{native.kind}{native.itemsize}"
        return f"; its byte order is not the machine's: convert it to native byte order first, .astype('={code}')"
    return ""


def scalar_type_of(dtype) -> ScalarType:
    """The IR element type of a numpy dtype; KeyError if kiln has none."""
    return _FROM_NUMPY[np.dtype(dtype)]


@dataclass(frozen=True)
class ShapedType(Type):
    """A static shape of elements: what tensors and memrefs have in common."""

    shape: tuple
    element: ScalarType
    keyword = ""  # "tensor" or "memref", as printed

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"{self.keyword}<{dims}{self.element}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return self.element.dtype


@dataclass(frozen=True)
class TensorType(ShapedType):
    keyword = "tensor"

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.element)

    def with_element(self, element: ScalarType) -> "TensorType":
        return TensorType(self.shape, element)


def tensor_type(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), scalar_type_of(dtype))


@dataclass(frozen=True)
class FunctionType(Type):
    inputs: tuple
    results: tuple

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        if len(self.results) == 1 and not isinstance(self.results[0], FunctionType):
            return f"({ins}) -> {self.results[0]}"
        return f"({ins}) -> ({', '.join(map(str, self.results))})"


MEMORY_SPACES = ("workgroup",)  # beside the default: a GPU block's shared memory


@dataclass(frozen=True)
class MemRefType(ShapedType):
    """``memref<4x8xf32>``: a buffer of static shape in row-major (identity) layout.

    ``memory_space`` is where the buffer lives: "" for ordinary memory, ``"workgroup"``
    for a GPU block's shared memory, printed as MLIR's GPU dialect prints it:
    ``memref<64x16xf32, #gpu.address_space<workgroup>>``."""

    memory_space: str = ""
    keyword = "memref"

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text[:-1]}, #gpu.address_space<{self.memory_space}>>" if self.memory_space else text

    @property
    def strides(self) -> tuple:
        """Row-major strides in elements."""
        strides, step = [], 1
        for d in reversed(self.shape):
            strides.append(step)
            step *= d
        return tuple(reversed(strides))


def memref_of(t: TensorType) -> MemRefType:
    """The buffer of a tensor: the same shape, its element type signless (``ui8`` -> ``i8``)."""
    return MemRefType(t.shape, t.element.signless)


@dataclass(frozen=True)
class VectorType(Type):
    """``vector<16xf32>``: a fixed number of lanes, what a SIMD register holds."""

    lanes: int
    element: ScalarType

    def __str__(self) -> str:
        return f"vector<{self.lanes}x{self.element}>"

    @property
    def dtype(self) -> np.dtype:
        return self.element.dtype

    @property
    def is_float(self) -> bool:
        return self.element.is_float

    @property
    def is_int(self) -> bool:
        return self.element.is_int

    @property
    def is_bool(self) -> bool:
        return self.element.is_bool


def element_of(t) -> ScalarType:
    """The scalar type of a scalar or a vector."""
    return t.element if isinstance(t, VectorType) else t


def like(t, element: ScalarType):
    """`element`, as a vector if `t` is one."""
    return VectorType(t.lanes, element) if isinstance(t, VectorType) else element
