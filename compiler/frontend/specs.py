"""Input specs: ``kiln.f32[64, 784]`` stands for a float32 array of that shape.

Specs let a function be lowered without data (``predict.lower(kiln.f32[8, 4])``)
and give the command line its input types through parameter annotations.
The examples assume ``import numpy as np, kiln``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TensorSpec:
    """An array's shape (non-negative ints) and dtype, standing in for the array when a function
    is lowered or compiled ahead of time. Written ``kiln.f32[64, 784]``; ``TensorSpec.of(a)``
    describes an existing array. A negative dimension raises ``ValueError``.

    >>> kiln.f32[64, 784]
    kiln.f32[64, 784]
    >>> kiln.TensorSpec.of(np.zeros((2, 3), np.int64))
    kiln.i64[2, 3]
    """

    shape: tuple
    dtype: np.dtype

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if any(d < 0 for d in self.shape):
            raise ValueError(f"a spec's dimensions must be >= 0, got {self.shape}")

    def __repr__(self) -> str:
        return f"kiln.{_SPEC_NAMES[self.dtype]}[{', '.join(map(str, self.shape))}]"

    @classmethod
    def of(cls, array) -> "TensorSpec":
        array = np.asarray(array)
        return cls(array.shape, array.dtype)


class DTypeSpecBuilder:
    """``kiln.f32`` itself: index it with a shape to get a TensorSpec. One per dtype kiln
    compiles: ``f16``, ``f32``, ``f64``, ``i8``, ``i16``, ``i32``, ``i64``, ``u8``, ``u16``,
    ``u32``, ``u64`` and ``bool_``."""

    def __init__(self, dtype, name: str):
        self.dtype = np.dtype(dtype)
        self.name = name

    def __getitem__(self, shape) -> TensorSpec:
        if not isinstance(shape, tuple):
            shape = (shape,)
        for d in shape:
            if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
                raise TypeError(f"kiln.{self.name}[...] takes integer dimensions, got {d!r}")
        return TensorSpec(shape, self.dtype)

    def __repr__(self) -> str:
        return f"kiln.{self.name}"


f16 = DTypeSpecBuilder(np.float16, "f16")
f32 = DTypeSpecBuilder(np.float32, "f32")
f64 = DTypeSpecBuilder(np.float64, "f64")
i8 = DTypeSpecBuilder(np.int8, "i8")
i16 = DTypeSpecBuilder(np.int16, "i16")
i32 = DTypeSpecBuilder(np.int32, "i32")
i64 = DTypeSpecBuilder(np.int64, "i64")
u8 = DTypeSpecBuilder(np.uint8, "u8")
u16 = DTypeSpecBuilder(np.uint16, "u16")
u32 = DTypeSpecBuilder(np.uint32, "u32")
u64 = DTypeSpecBuilder(np.uint64, "u64")
bool_ = DTypeSpecBuilder(np.bool_, "bool_")
_SPEC_NAMES = {b.dtype: b.name for b in (f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool_)}
