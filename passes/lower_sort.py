"""Lower ``kiln.sort`` (dialects/tensor_sort.py) to one loop nest: a bottom-up merge sort of
each row, O(n log n). The rows are the outer loops (a 0-d row set gets one loop of one
trip, so a sort is always one nest). Inside, a copy of the row into a scratch buffer
(with the identity permutation beside it), then ceil(log2 n) passes, pass p merging the
sorted runs of width w = 2**p pairwise into the other buffer; the last pass writes the
result. A pass is one sequential loop over the row's n output positions carrying the two
read positions (i in the left run, j in the right) as iter_args; at the first position
of each pair of runs they restart at the runs' starts. The right element is taken only
when it sorts strictly before the left one (``less`` below), which keeps the sort
stable. The runs are read through ``memref.load`` at the carried positions, clamped into
the row so that an exhausted run's read stays inside the buffer (its value is then not
taken). Before::

    %0 = kiln.sort %x {order = "ascending", returns = "values"} : (tensor<4x5xf32>) -> tensor<4x5xf32>

After (pass 0 of 3 shown; ``%lo`` is ``(k floordiv 2) * 2``, the start of k's pair of runs)::

    affine.for %k0.i = 0 to 4 {
      %row = affine.apply affine_map<(d0) -> (d0)>(%k0.i)
      affine.for %k0.c = 0 to 5 { ... copy %x and the index 0..4 into scratch ... }
      %r:2 = affine.for %k0.p0 = 0 to 5 iter_args(%i = %c0, %j = %c0) -> (index, index) {
        %lo = affine.apply affine_map<(d0) -> ((d0 floordiv 2) * 2)>(%k0.p0)
        ...                                    // mid = min(lo + 1, 5), hi = min(lo + 2, 5)
        %a = memref.load %keys0[%row, %ic] : memref<4x5xf32>
        %b = memref.load %keys0[%row, %jc] : memref<4x5xf32>
        %right = ...                           // j < hi and (i >= mid or b before a)
        %v = arith.select %right, %b, %a : f32
        affine.store %v, %keys1[%k0.i, %k0.p0] : memref<4x5xf32>
        affine.yield %i2, %j2 : index, index
      }
      ...
    }

Every pass carries values that are read besides its yield, so the schedules leave it
sequential (as a scan's loop: no vectorize, parallel or bind); the row loop is free.
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import Dim
from kiln.dialects.types import MemRefType, i1, i64, index

from .affine_builder import access


def _index(b, value: int):
    return b.op(AR.ConstantOp, result_type=index, value=value)


def _cmpi(b, predicate, x, y):
    return b.op(AR.CmpIOp, x, y, predicate=predicate)


def _apply(b, expr, ivs):
    operands, amap = access((expr,), ivs)
    return b.op(A.ApplyOp, *operands, map=amap)


def _min(b, x, y):  # on index values, whose min has no LLVM intrinsic
    return b.op(AR.SelectOp, _cmpi(b, "slt", x, y), x, y)


def less(b, element, x, y, descending: bool):
    """Whether `x` sorts strictly before `y`: numpy's order with NaN last (ascending), or NaN
    first then the largest (descending); -0.0 and 0.0 equal, NaNs equal to each other."""
    if element.is_float:
        before = b.op(AR.CmpFOp, x, y, predicate="ogt" if descending else "olt")
        nan_side, number_side = (x, y) if descending else (y, x)
        nan_first = b.op(
            AR.AndIOp,
            b.op(AR.CmpFOp, nan_side, nan_side, predicate="une"),  # x != x: NaN (as the CUDA printer spells it)
            b.op(AR.CmpFOp, number_side, number_side, predicate="oeq"),
        )
        return b.op(AR.OrIOp, before, nan_first)
    unsigned = element.is_unsigned or element == i1  # False (0) before True (1)
    return _cmpi(b, ("ugt" if descending else "ult") if unsigned else ("sgt" if descending else "slt"), x, y)


def lower_sort(L, op) -> None:
    """One nest for `op` (a ``kiln.sort``) in FunctionLowering `L`."""
    shape = op.operand.type.shape
    lead, n = shape[:-1], shape[-1]
    element = op.operand.type.element
    source = L.views[op.operand]  # read before destination() rebinds anything
    out = L.destination(op.result)
    passes = max(n - 1, 0).bit_length()  # ceil(log2 n)
    with_index = op.returns_kind == "indices"

    def scratch(kind):
        buffer = L.b.op(MR.AllocOp, result_type=MemRefType(shape, kind))
        L.name_buffer(buffer)
        L.allocated.append(buffer)
        return buffer

    # buffers[p % 2] is read by pass p; the last pass (or the copy, for n <= 1) writes `out`.
    keys, indices = [None, None], [None, None] if with_index else None
    (indices if with_index else keys)[passes % 2] = out
    keys = [buffer or scratch(element.signless) for buffer in keys]
    indices = indices and [buffer or scratch(i64) for buffer in indices]

    with L.b.loops(lead or (1,)) as row_ivs:
        # memref.load's row indices: affine.apply of the row loops, which schedules rewrite
        # as they rewrite affine accesses (a loop variable used directly they cannot follow)
        rows = [_apply(L.b, Dim(k), row_ivs) for k in range(len(lead))]
        logical = [Dim(k) for k in range(len(shape))]
        b = L.b

        def store(value, buffer, ivs):  # at (the rows, the loop variable) of a scratch buffer
            operands, amap = access(tuple(logical), ivs)
            b.emit(A.StoreOp, [value, buffer, *operands], {"map": amap})

        copy = A.ForOp.create(0, n, iv_name="c")
        b.block.append(copy)
        saved, b.block = b.block, copy.body
        ivs = row_ivs[: len(lead)] + [copy.induction_variable]
        store(b.load(source, logical, ivs), keys[0], ivs)
        if with_index:
            store(b.op(AR.IndexCastOp, copy.induction_variable, result_type=i64), indices[0], ivs)
        b.emit(A.YieldOp, [], {})
        b.block = saved

        for p in range(passes):
            read, write = p % 2, 1 - p % 2
            index = (indices[read], indices[write]) if with_index else (None, None)
            row = (rows, row_ivs[: len(lead)])
            _merge_pass(b, op, row, 1 << p, (keys[read], keys[write]), index, f"p{p}", store)


def _merge_pass(b, op, row, width, keys, index, name, store):
    """One pass of the loop named `name`: merge the runs of `width` of keys[0] (and index[0])
    pairwise into keys[1] (and index[1]); `index` is (None, None) for a sort of the values
    alone. `row` is (the row's index values for memref.load, the row loops' variables)."""
    (keys, keys_out), (index, index_out), (rows, row_ivs) = keys, index, row
    n, element = op.operand.type.shape[-1], op.operand.type.element
    zero = _index(b, 0)
    loop = A.ForOp.create(0, n, inits=[zero, zero], iv_name=name)
    b.block.append(loop)
    saved, b.block = b.block, loop.body
    k, i, j = loop.body.args
    position = _apply(b, Dim(0), [k])  # k as a value arith may use (see `rows`)
    lo = _apply(b, (Dim(0) // (2 * width)) * (2 * width), [k])
    last = _index(b, n)
    mid = _min(b, b.op(AR.AddIOp, lo, _index(b, width)), last)
    hi = _min(b, b.op(AR.AddIOp, lo, _index(b, 2 * width)), last)
    start = _cmpi(b, "eq", position, lo)
    i = b.op(AR.SelectOp, start, lo, i)
    j = b.op(AR.SelectOp, start, mid, j)
    top = _index(b, n - 1)
    ic, jc = _min(b, i, top), _min(b, j, top)
    left = b.op(MR.LoadOp, keys, *rows, ic)
    right = b.op(MR.LoadOp, keys, *rows, jc)
    left_done = _cmpi(b, "sge", i, mid)
    right_left = _cmpi(b, "slt", j, hi)
    take = b.op(AR.AndIOp, right_left, b.op(AR.OrIOp, left_done, less(b, element, right, left, op.descending)))
    ivs = row_ivs + [k]
    store(b.op(AR.SelectOp, take, right, left), keys_out, ivs)
    if index is not None:
        left_at, right_at = b.op(MR.LoadOp, index, *rows, ic), b.op(MR.LoadOp, index, *rows, jc)
        store(b.op(AR.SelectOp, take, right_at, left_at), index_out, ivs)
    one = _index(b, 1)
    b.emit(
        A.YieldOp,
        [b.op(AR.SelectOp, take, i, b.op(AR.AddIOp, i, one)), b.op(AR.SelectOp, take, b.op(AR.AddIOp, j, one), j)],
        {},
    )
    b.block = saved
