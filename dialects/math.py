"""The ``math`` dialect: transcendental and power functions, as in upstream MLIR.

    %e = math.exp %x : f32
    %p = math.ipowi %a, %b : i32
"""
from __future__ import annotations

from .arith import FLOATS, _same
from .types import SCALAR_TYPES

_INTS = (SCALAR_TYPES["i32"], SCALAR_TYPES["i64"])

ExpOp = _same("ExpOp", "math.exp", 1, FLOATS, "e to the x")
LogOp = _same("LogOp", "math.log", 1, FLOATS, "natural logarithm")
SqrtOp = _same("SqrtOp", "math.sqrt", 1, FLOATS, "square root")
TanhOp = _same("TanhOp", "math.tanh", 1, FLOATS, "hyperbolic tangent")
SinOp = _same("SinOp", "math.sin", 1, FLOATS, "sine")
CosOp = _same("CosOp", "math.cos", 1, FLOATS, "cosine")
AbsFOp = _same("AbsFOp", "math.absf", 1, FLOATS, "float absolute value")
AbsIOp = _same("AbsIOp", "math.absi", 1, _INTS, "integer absolute value (wrapping at the minimum)")
PowFOp = _same("PowFOp", "math.powf", 2, FLOATS, "float power")
IPowIOp = _same("IPowIOp", "math.ipowi", 2, _INTS, "integer power (negative exponents are an error)")
for _op in (ExpOp, LogOp, SqrtOp, TanhOp, SinOp, CosOp, AbsFOp, AbsIOp, PowFOp, IPowIOp):
    _op.__module__ = __name__
