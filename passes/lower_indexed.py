"""Lower ``kiln.gather`` and ``kiln.scatter_at`` (dialects/tensor_indexed.py) to loop nests
that read and write through the index: one ``memref.load`` (and, for a scatter, one
``memref.store``) per element, so a gather costs O(output), not O(output * n).

The buffer index of the indexed element is its view's affine expressions (a transpose or
a reshape of the source is index arithmetic, as everywhere in this lowering) with the
axis read from the index tensor: the parts that depend on loop variables alone are
``affine.apply`` ops, which the schedules rewrite as they rewrite accesses; the part that
depends on the loaded index is arith on ``index`` values. Before::

    %0 = kiln.gather %t, %ids : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<5x3xf32>

After (``%t`` a function argument, so its view is the identity)::

    affine.for %k0.i = 0 to 5 {
      affine.for %k0.j = 0 to 3 {
        %0 = affine.load %ids[%k0.j] : memref<3xi64>
        %1 = arith.maxsi %0, %c0 : i64              // 0 and 3 (n - 1): arith.constant
        %2 = arith.minsi %1, %c3 : i64
        %3 = arith.index_cast %2 : i64 to index
        %4 = affine.apply affine_map<(d0) -> (d0)>(%k0.i)
        %5 = memref.load %t[%4, %3] : memref<5x4xf32>
        affine.store %5, %out0[%k0.i, %k0.j] : memref<5x3xf32>
      } {kiln.loop = "k0.j"}
    } {kiln.loop = "k0.i"}

A scatter copies its destination into its result, then runs one sequential nest over
the updates (the schedules keep loops holding a memref.store sequential): load the
element the index names, combine, store. Kind ``store`` (item assignment) loads nothing:
it converts the update to the destination's type and stores it, so the last of repeated
indices stays, as numpy leaves it.
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import memref as MR
from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.dialects.affine_expr import Binary, Const, Dim, dims_of
from kiln.dialects.types import f16, f32, i64, index

from .affine_builder import View, access
from .scalar_rules import SCALAR_RULES, convert

# scatter kind -> the elementwise op whose scalar rule combines an update (numpy's ufunc)
_COMBINE = {"add": T.AddOp, "sub": T.SubOp, "mul": T.MulOp, "max": T.MaximumOp, "min": T.MinimumOp}
# on bool, numpy's add and maximum are or; multiply and minimum are and
_BOOL_COMBINE = {"add": AR.OrIOp, "max": AR.OrIOp, "mul": AR.AndIOp, "min": AR.AndIOp}


def indexed_address(b, view: View, leading, ivs, position, trailing=()) -> list:
    """The buffer indices of `view`'s element (*leading, position, *trailing): `leading` and
    `trailing` affine expressions of the loop variables `ivs`, `position` an ``index`` value
    read from memory."""
    marker = Dim(len(ivs))  # stands for `position` in the view's expressions
    exprs = view.through([*leading, marker, *trailing]).exprs
    return [_index_value(b, e, ivs, position, marker.index) for e in exprs]


def _index_value(b, expr, ivs, position, marker: int):
    if marker not in dims_of(expr):
        operands, amap = access((expr,), ivs)
        return b.op(A.ApplyOp, *operands, map=amap)
    if isinstance(expr, Dim):
        return position
    assert isinstance(expr, Binary)
    lhs = _index_value(b, expr.lhs, ivs, position, marker)
    if expr.kind in ("+", "*"):
        rhs = _index_value(b, expr.rhs, ivs, position, marker)
        return b.op(AR.AddIOp if expr.kind == "+" else AR.MulIOp, lhs, rhs)
    assert isinstance(expr.rhs, Const) and expr.rhs.value > 0  # affine division: by a positive constant
    divisor = b.op(AR.ConstantOp, result_type=index, value=expr.rhs.value)
    if expr.kind == "ceildiv":
        zero = b.op(AR.ConstantOp, result_type=index, value=0)
        negated = b.op(AR.FloorDivSIOp, b.op(AR.SubIOp, zero, lhs), divisor)
        return b.op(AR.SubIOp, zero, negated)
    quotient = b.op(AR.FloorDivSIOp, lhs, divisor)
    if expr.kind == "floordiv":
        return quotient
    return b.op(AR.SubIOp, lhs, b.op(AR.MulIOp, quotient, divisor))  # mod, as the floor division's


def _position(b, view: View, logical, ivs, n: int):
    """The int64 index at `logical`, as an ``index`` value, clamped into 0..n-1. The index
    was checked (kiln.check_index), but a failed check only records its status and the
    code runs on to the end (the caller then raises): the clamp keeps that run's loads and
    stores inside the buffer. In range, it changes nothing."""
    position = b.load(view, logical, ivs)
    position = b.op(AR.MaxSIOp, position, b.op(AR.ConstantOp, result_type=i64, value=0))
    position = b.op(AR.MinSIOp, position, b.op(AR.ConstantOp, result_type=i64, value=max(n - 1, 0)))
    return b.op(AR.IndexCastOp, position, result_type=index)


def lower_gather(L, op) -> None:
    """One nest over the result: read the index, then the source element it names."""
    shape, axis, stop = op.result.type.shape, op.gather_axis, op.gather_axis + op.index.type.rank
    source = L.views[op.source]
    out = L.destination(op.result)
    with L.b.loops(shape) as ivs:
        dims = [Dim(k) for k in range(len(shape))]
        position = _position(L.b, L.views[op.index], dims[axis:stop], ivs, op.source.type.shape[axis])
        where = indexed_address(L.b, source, dims[:axis], ivs, position, dims[stop:])
        L.b.store(L.b.op(MR.LoadOp, source.buffer, *where), out, dims, ivs)


def lower_scatter_at(L, op) -> None:
    """Copy the destination, then apply the updates one by one in the index's C order."""
    shape = op.result.type.shape
    dest = L.views[op.dest]  # read before destination() rebinds anything
    out = L.destination(op.result)
    L.copy(dest, out, shape)
    lead, stop, count = op.scatter_axis, op.scatter_axis + op.index.type.rank, op.scatter_axes
    kept, work = op.dest.type.element, op.source.type.element
    with L.b.loops(op.source.type.shape) as ivs:
        dims = [Dim(k) for k in range(len(ivs))]
        position = _position(L.b, L.views[op.index], dims[lead:stop], ivs, op.merged_shape()[lead])
        where = [_apply(L.b, d, ivs) for d in dims[:lead]]
        where += _unflattened(L.b, position, shape[lead : lead + count])
        where += [_apply(L.b, d, ivs) for d in dims[stop:]]
        update = L.b.load(L.views[op.source], dims, ivs)
        if op.kind != TI.STORE:  # assignment stores the update as it is; the others combine
            update = _combined(L, op, L.b.op(MR.LoadOp, out, *where), update)
        L.b.emit(MR.StoreOp, [convert(L.b, update, work, kept), out, *where], {})


def _apply(b, expr, ivs):
    operands, amap = access((expr,), ivs)
    return b.op(A.ApplyOp, *operands, map=amap)


def _unflattened(b, position, sizes) -> list:
    """The per-axis ``index`` values of `position`, a flat C-order position over axes of
    `sizes` (in range: clamped by _position): quotients and remainders by their strides."""
    where, stride = [], int(np.prod(sizes, dtype=np.int64))
    for k, n in enumerate(sizes):
        stride //= max(n, 1)
        part = position
        if k:  # the remainder by the previous axes' stride: what is left for this one and after
            outer = b.op(AR.ConstantOp, result_type=index, value=stride * n)
            part = b.op(AR.SubIOp, part, b.op(AR.MulIOp, b.op(AR.FloorDivSIOp, part, outer), outer))
        if stride != 1:
            part = b.op(AR.FloorDivSIOp, part, b.op(AR.ConstantOp, result_type=index, value=stride))
        where.append(part)
    return where


def _combined(L, op, current, update):
    """The update combined with the element it lands on (`current`, of dest's type), in the
    update's type: float16 computed in f32 and rounded to f16 first, as numpy's loop does."""
    kept, work = op.dest.type.element, op.source.type.element
    compute = f32 if work == f16 else work
    current, update = convert(L.b, current, kept, compute), convert(L.b, update, work, compute)
    if compute.is_bool:
        combined = L.b.op(_BOOL_COMBINE[op.kind], current, update)
    else:
        combined = SCALAR_RULES[_COMBINE[op.kind]](L.b, op, compute, current, update)
    return convert(L.b, combined, compute, work) if compute != work else combined


LOWERINGS = {TI.GatherOp: lower_gather, TI.ScatterAtOp: lower_scatter_at}
