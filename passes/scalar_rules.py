"""What one element of each elementwise tensor op computes, in arith and math ops.

A rule takes the builder, the tensor op, the operands' element type and the
loaded scalars, and returns the scalar result. Integer and bool variants
follow numpy: wrapping integer arithmetic, NaN-propagating maximum/minimum,
``!=`` true for NaN. Float maximum and minimum are numpy's exactly, signed
zeros included: ``np.maximum(a, b)`` is ``a`` where ``a`` wins or is NaN and
``b`` otherwise, so ``np.maximum(0.0, -0.0)`` is ``-0.0`` (IEEE's maximum,
``arith.maximumf``, would say ``0.0``).
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import arith as AR
from kiln.dialects import math as M
from kiln.dialects import tensor as T
from kiln.dialects.types import i1


def by_kind(float_op, int_op, bool_op=None):
    def rule(b, op, t, *xs):
        cls = float_op if t.is_float else (bool_op if t.is_bool and bool_op else int_op)
        return b.op(cls, *xs)

    return rule


def constant(b, value, t):
    return b.op(AR.ConstantOp, result_type=t, value=value)


def _neg(b, op, t, x):
    return b.op(AR.NegFOp, x) if t.is_float else b.op(AR.SubIOp, constant(b, 0, t), x)


def _not(b, op, t, x):
    return b.op(AR.XOrIOp, x, constant(b, True, i1))


_FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_SIGNED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_UNSIGNED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def _cmp(b, op, t, x, y):
    if t.is_float:
        return b.op(AR.CmpFOp, x, y, predicate=_FLOAT_PREDICATES[op.predicate])
    table = _UNSIGNED if t.is_bool else _SIGNED  # False < True, as numpy orders bools
    return b.op(AR.CmpIOp, x, y, predicate=table[op.predicate])


def _pick(float_predicate, int_op):
    def rule(b, op, t, x, y):
        if not t.is_float:
            return b.op(int_op, x, y)
        wins = b.op(
            AR.OrIOp, b.op(AR.CmpFOp, x, y, predicate=float_predicate), b.op(AR.CmpFOp, x, x, predicate="une")
        )  # x != x: x is NaN
        return b.op(AR.SelectOp, wins, x, y)

    return rule


def _select(b, op, t, c, x, y):
    return b.op(AR.SelectOp, c, x, y)


def convert(b, x, src, dst):
    """numpy's astype for one element."""
    if src == dst:
        return x
    if dst.is_bool:  # truthiness: nonzero (and NaN) is True
        if src.is_float:
            return b.op(AR.CmpFOp, x, constant(b, 0.0, src), predicate="une")
        return b.op(AR.CmpIOp, x, constant(b, 0, src), predicate="ne")
    if src.is_float and dst.is_float:
        cls = AR.ExtFOp if dst.dtype.itemsize > src.dtype.itemsize else AR.TruncFOp
    elif dst.is_float:
        cls = AR.UIToFPOp if src.is_bool else AR.SIToFPOp
    elif src.is_float:
        cls = AR.FPToSIOp
    elif dst.dtype.itemsize > np.dtype(src.dtype).itemsize:
        cls = AR.ExtUIOp if src.is_bool else AR.ExtSIOp
    else:
        cls = AR.TruncIOp
    return b.op(cls, x, result_type=dst)


def _cast(b, op, t, x):
    return convert(b, x, t, op.result.type.element)


SCALAR_RULES = {
    T.AddOp: by_kind(AR.AddFOp, AR.AddIOp),
    T.SubOp: by_kind(AR.SubFOp, AR.SubIOp),
    T.MulOp: by_kind(AR.MulFOp, AR.MulIOp),
    T.DivOp: by_kind(AR.DivFOp, None),
    T.MaximumOp: _pick("ogt", AR.MaxSIOp),
    T.MinimumOp: _pick("olt", AR.MinSIOp),
    T.PowOp: by_kind(M.PowFOp, M.IPowIOp),
    T.AndOp: by_kind(None, AR.AndIOp),
    T.OrOp: by_kind(None, AR.OrIOp),
    T.NegOp: _neg,
    T.AbsOp: by_kind(M.AbsFOp, M.AbsIOp),
    T.ExpOp: by_kind(M.ExpOp, None),
    T.LogOp: by_kind(M.LogOp, None),
    T.SqrtOp: by_kind(M.SqrtOp, None),
    T.TanhOp: by_kind(M.TanhOp, None),
    T.SinOp: by_kind(M.SinOp, None),
    T.CosOp: by_kind(M.CosOp, None),
    T.NotOp: _not,
    T.CmpOp: _cmp,
    T.SelectOp: _select,
    T.ConvertOp: _cast,
}


def reduction_identity(kind, t):
    """The value a sum, max or min starts from."""
    if kind is T.ReduceSumOp:
        return False if t.is_bool else (0.0 if t.is_float else 0)
    if t.is_bool:
        return kind is T.ReduceMinOp
    if t.is_float:
        return -np.inf if kind is T.ReduceMaxOp else np.inf
    info = np.iinfo(t.dtype)
    return int(info.min) if kind is T.ReduceMaxOp else int(info.max)


REDUCTION_COMBINE = {
    T.ReduceSumOp: by_kind(AR.AddFOp, AR.AddIOp),
    T.ReduceMaxOp: by_kind(AR.MaximumFOp, AR.MaxSIOp, AR.OrIOp),
    T.ReduceMinOp: by_kind(AR.MinimumFOp, AR.MinSIOp, AR.AndIOp),
}
