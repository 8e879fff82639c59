"""Index arithmetic of the view ops: which operand element a result element reads.

``operand_index(op, index)`` maps a result index (affine expressions) to the
operand index, for broadcast_to, transpose, slice and reshape. Lowering composes
these into loads, and fusion into its cost model, so no view ever copies data.
"""

from __future__ import annotations

from kiln.dialects import tensor as T
from kiln.dialects.affine_expr import Const, Dim, divide_in_range, substitute
from kiln.dialects.types import MemRefType


def operand_index(op, index) -> tuple:
    """The operand index read for result `index` (one expression per result dim)."""
    return tuple(substitute(e, list(index)) for e in _identity_map(op))


def _identity_map(op) -> tuple:
    """operand_index for the identity result index d0, d1, ..."""
    if isinstance(op, T.BroadcastToOp):
        source, target = op.operand.type.shape, op.result.type.shape
        lead = len(target) - len(source)
        return tuple(Dim(lead + k) if s == target[lead + k] else Const(0) for k, s in enumerate(source))
    if isinstance(op, T.TransposeOp):
        perm = op.permutation
        return tuple(Dim(perm.index(k)) for k in range(len(perm)))
    if isinstance(op, T.SliceOp):
        return tuple(Dim(k) * s + a for k, (a, s) in enumerate(zip(op.start, op.step)))
    if isinstance(op, T.ReshapeOp):
        return _reshape_map(op.operand.type, op.result.type)
    raise TypeError(f"{op.name} is not a view")


def _reshape_map(source, target) -> tuple:
    if source.size == 0:
        # No element is ever read: a loop over a zero-length result dimension never runs. The
        # index of the source's zero-length axis names those dimensions, so a load lands inside
        # such a loop (one hoisted above it would read the empty buffer); and zero-length shapes
        # leave no strides to divide by.
        empty = sum((Dim(k) for k, n in enumerate(target.shape) if n == 0), Const(0))
        axis = source.shape.index(0)
        return tuple(empty if k == axis else Const(0) for k in range(len(source.shape)))
    linear = Const(0)
    for k, stride in enumerate(MemRefType(target.shape, target.element).strides):
        if target.shape[k] != 1:
            linear = linear + Dim(k) * stride
    exprs = []
    for size, stride in zip(source.shape, MemRefType(source.shape, source.element).strides):
        if size == 1:
            exprs.append(Const(0))
            continue
        quotient, _ = divide_in_range(linear, stride, target.shape)
        _, index = divide_in_range(quotient, size, target.shape)
        exprs.append(index)
    return tuple(exprs)
