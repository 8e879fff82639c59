"""The ``math`` dialect: transcendental and power functions, as in upstream MLIR.

%e = math.exp %x : f32
%p = math.ipowi %a, %b : i32
"""

from __future__ import annotations

from .arith import FLOATS, same_typed_op
from .types import SCALAR_TYPES

_INTS = (SCALAR_TYPES["i32"], SCALAR_TYPES["i64"])

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
