"""Lower ``kiln.sort`` (dialects/tensor_sort.py) to one loop nest: a bottom-up merge sort of
each row, O(n log n). The outer loop runs over groups of rows (ROW_GROUP of them where the
row count allows, else 2 or 1; a 1-d sort is one group of one row, so a sort is always one
nest). Inside, a copy of the rows into a scratch buffer (with the identity permutation
beside them), then ceil(log2 n) passes, pass p merging the sorted runs of width w = 2**p
pairwise into the other buffer; the last pass writes the result. A pass is one sequential
loop over the n output positions carrying, for each row of the group, the two read
positions (i in the left run, j in the right) as iter_args; at the first position of each
pair of runs they restart at the runs' starts. The right element is taken only when it
sorts strictly before the left one (``less`` below), which keeps the sort stable. The runs
are read through ``memref.load`` at the carried positions, clamped into the row so that an
exhausted run's read stays inside the buffer (its value is then not taken). The rows of a
group are independent chains of dependent steps, which the processor overlaps; float keys
move as their integer bits (see _BITS). Before::

    %0 = kiln.sort %x {order = "ascending", returns = "values"} : (tensor<5xf32>) -> tensor<5xf32>

After (pass 0 of 3 shown; ``%lo`` is ``(k floordiv 2) * 2``, the start of k's pair of runs)::

    affine.for %k0.i = 0 to 1 {
      affine.for %k0.c = 0 to 5 { ... the bits of %x (arith.bitcast) into scratch %keys0 ... }
      %r:2 = affine.for %k0.p0 = 0 to 5 iter_args(%i = %c0, %j = %c0) -> (index, index) {
        %lo = affine.apply affine_map<(d0) -> ((d0 floordiv 2) * 2)>(%k0.p0)
        ...                                    // mid = min(lo + 1, 5), hi = min(lo + 2, 5)
        %a = memref.load %keys0[%ic] : memref<5xi32>
        %b = memref.load %keys0[%jc] : memref<5xi32>
        %right = ...                           // j < hi and (i >= mid or b before a as f32)
        %v = arith.select %right, %b, %a : i32
        affine.store %v, %keys1[%k0.p0] : memref<5xi32>
        affine.yield %i2, %j2 : index, index
      }
      ...
    }

Every pass carries values that are read besides its yield, so the schedules leave it
sequential (as a scan's loop: no vectorize, parallel or bind); the loop over row groups is
free (parallel on the CPU, a thread per group on a GPU).
"""

from __future__ import annotations

import math

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import Const, Dim
from kiln.dialects.types import MemRefType, i1, i32, i64, index

from .affine_builder import access
from .lower_indexed import indexed_address

ROW_GROUP = 4  # rows merged side by side in one pass loop, when the row count allows


def _index(b, value: int):
    return b.op(AR.ConstantOp, result_type=index, value=value)


def _cmpi(b, predicate, x, y):
    return b.op(AR.CmpIOp, x, y, predicate=predicate)


# Float keys move as their bits: x86 has no conditional move of a float register, so LLVM
# makes a float select a branch, mispredicted half the time on unsorted data; an integer
# select is a cmov. The compare reads the bits as the float again.
_BITS = {"f32": i32, "f64": i64}  # (float16 is sorted widened: passes/emulate_floats.py)


def _bits_type(element):
    return _BITS.get(element.name, element.signless)


def _bitcast(b, value, target):
    """`value` (a key or its bits) as `target`: the same bits (nothing to do for an integer
    key, or an unsigned one, whose loop-level type is signless)."""
    return value if value.type == target.signless else b.op(AR.BitcastOp, value, result_type=target)


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
    if math.prod(op.result.type.shape) == 0:
        return  # nothing to sort, nothing to write
    if op.count < n:
        _select(L, op, source, out)
        return

    def scratch(kind):
        buffer = L.b.op(MR.AllocOp, result_type=MemRefType(shape, kind))
        L.name_buffer(buffer)
        L.allocated.append(buffer)
        return buffer

    # buffers[p % 2] is read by pass p; the last pass (or the copy, for n <= 1) writes `out`.
    # The keys move between two scratch buffers of their bits (never `out`, whose float loads
    # LLVM would select as floats again); a sort giving values writes its last step's keys to
    # `out` instead (`last_keys`).
    keys = [scratch(_bits_type(element)), scratch(_bits_type(element))]
    indices = [None, None] if with_index else None
    if with_index:
        indices[passes % 2] = out
        indices = [buffer or scratch(i64) for buffer in indices]

    def last_keys(step):  # where step 0 (the copy) or pass step - 1 writes its keys
        return out if step == passes and not with_index else keys[step % 2]

    rows = math.prod(lead)
    group = next(g for g in (ROW_GROUP, 2, 1) if rows % g == 0)
    with L.b.loops((rows // group,)) as (block_iv,):
        b = L.b

        def row_exprs(r):
            return _row_exprs(lead, group, r)

        # memref.load's row indices: affine.apply of the row loop, which schedules rewrite as
        # they rewrite affine accesses (a loop variable used directly they cannot follow)
        group_rows = [[_apply(b, e, [block_iv]) for e in row_exprs(r)] for r in range(group)]

        def store(value, buffer, r, iv):  # element (row r of the group, iv) of a buffer
            operands, amap = access((*row_exprs(r), Dim(1)), [block_iv, iv])
            b.emit(A.StoreOp, [value, buffer, *operands], {"map": amap})

        copy = A.ForOp.create(0, n, iv_name="c")
        b.block.append(copy)
        saved, b.block = b.block, copy.body
        for r in range(group):
            key = b.load(source, [*row_exprs(r), Dim(1)], [block_iv, copy.induction_variable])
            store(_bitcast(b, key, last_keys(0).type.element), last_keys(0), r, copy.induction_variable)
            if with_index:
                store(
                    b.op(AR.IndexCastOp, copy.induction_variable, result_type=i64),
                    indices[0],
                    r,
                    copy.induction_variable,
                )
        b.emit(A.YieldOp, [], {})
        b.block = saved

        for p in range(passes):
            read, write = p % 2, 1 - p % 2
            index = (indices[read], indices[write]) if with_index else (None, None)
            _merge_pass(b, op, group_rows, 1 << p, (keys[read], last_keys(p + 1)), index, f"p{p}", store)


def _row_exprs(lead, group: int, r: int) -> list:
    """The lead indices of row r of a group of `group` rows: affine expressions of the loop
    over groups (Dim(0)), row-major over the `lead` shape."""
    flat, exprs = Dim(0) * group + r, []
    for axis, extent in enumerate(lead):
        quotient = flat // math.prod(lead[axis + 1 :])
        exprs.append(quotient if axis == 0 else quotient % extent)
    return exprs


def _merge_pass(b, op, group_rows, width, keys, index, name, store):
    """One pass of the loop named `name`: merge the runs of `width` of keys[0] (and index[0])
    pairwise into keys[1] (and index[1]), for each row of the group (`group_rows`: each
    row's index values for memref.load); `index` is (None, None) for a sort of the values
    alone. Each row carries its own two positions: the rows' steps are independent, so the
    processor overlaps them (one row's step waits on its previous step's compare)."""
    (keys, keys_out), (index, index_out) = keys, index
    n, element = op.operand.type.shape[-1], op.operand.type.element
    zero = _index(b, 0)
    loop = A.ForOp.create(0, n, inits=[zero, zero] * len(group_rows), iv_name=name)
    b.block.append(loop)
    saved, b.block = b.block, loop.body
    k, carried = loop.body.args[0], loop.body.args[1:]
    position = _apply(b, Dim(0), [k])  # k as a value arith may use (see group_rows)
    lo = _apply(b, (Dim(0) // (2 * width)) * (2 * width), [k])
    last, top, one = _index(b, n), _index(b, n - 1), _index(b, 1)
    mid = _min(b, b.op(AR.AddIOp, lo, _index(b, width)), last)
    hi = _min(b, b.op(AR.AddIOp, lo, _index(b, 2 * width)), last)
    start = _cmpi(b, "eq", position, lo)
    yielded = []
    for r, rows in enumerate(group_rows):
        i = b.op(AR.SelectOp, start, lo, carried[2 * r])
        j = b.op(AR.SelectOp, start, mid, carried[2 * r + 1])
        ic, jc = _min(b, i, top), _min(b, j, top)
        left = _bitcast(b, b.op(MR.LoadOp, keys, *rows, ic), _bits_type(element))
        right = _bitcast(b, b.op(MR.LoadOp, keys, *rows, jc), _bits_type(element))
        left_done = _cmpi(b, "sge", i, mid)
        right_left = _cmpi(b, "slt", j, hi)
        before = less(b, element, _bitcast(b, right, element), _bitcast(b, left, element), op.descending)
        take = b.op(AR.AndIOp, right_left, b.op(AR.OrIOp, left_done, before))
        store(_bitcast(b, b.op(AR.SelectOp, take, right, left), keys_out.type.element), keys_out, r, k)
        if index is not None:
            left_at, right_at = b.op(MR.LoadOp, index, *rows, ic), b.op(MR.LoadOp, index, *rows, jc)
            store(b.op(AR.SelectOp, take, right_at, left_at), index_out, r, k)
        yielded += [
            b.op(AR.SelectOp, take, i, b.op(AR.AddIOp, i, one)),
            b.op(AR.SelectOp, take, b.op(AR.AddIOp, j, one), j),
        ]
    b.emit(A.YieldOp, yielded, {})
    b.block = saved


# An order key: an integer whose plain compare is the sort's order, so a selection step is one
# compare a slot. A float's bits with the sign bit flipped (a positive number) or all bits
# flipped (a negative one) compare as unsigned integers in the float's order (the radix sort's
# trick), after -0.0 becomes 0.0 (x + 0.0) and every NaN one NaN above +inf, as numpy orders
# them. Integers narrower than 64 bits are widened, which leaves the largest key free as the
# mark of an empty slot; a descending order flips every bit (~k: no overflow).
_SIGN = {"f32": (i32, 0x7FC00000, 31), "f64": (i64, 0x7FF8000000000000, 63)}


def _key_form(element, descending: bool):
    """(the key's type, the cmpi predicate of "sorts strictly before", the key that marks an
    empty slot or None where every key value can occur: 64-bit integers, compared as they
    are) of `element`'s order keys."""
    if element.name in _SIGN:
        return _SIGN[element.name][0], "ult", -1
    if element.dtype.itemsize < 8:
        return i64, "slt", (1 << 63) - 1
    unsigned = element.is_unsigned
    return element.signless, ("ugt" if descending else "ult") if unsigned else ("sgt" if descending else "slt"), None


def _order_key(b, element, x, descending: bool):
    """The order key (see _key_form) of a value `x` of `element`."""
    if element.name in _SIGN:
        bits, nan, top = _SIGN[element.name]
        zero = b.op(AR.ConstantOp, result_type=element, value=0.0)
        value = _bitcast(b, b.op(AR.AddFOp, x, zero), bits)
        is_nan = b.op(AR.CmpFOp, x, x, predicate="une")  # x != x: NaN (as the CUDA printer spells it)
        value = b.op(AR.SelectOp, is_nan, b.op(AR.ConstantOp, result_type=bits, value=nan), value)
        sign = b.op(AR.ShRSIOp, value, b.op(AR.ConstantOp, result_type=bits, value=top))
        mask = b.op(AR.OrIOp, sign, b.op(AR.ConstantOp, result_type=bits, value=-(1 << top)))
        key = b.op(AR.XOrIOp, value, mask)
    elif element.dtype.itemsize < 8:
        unsigned = element.is_unsigned or element == i1
        key = b.op(AR.ExtUIOp if unsigned else AR.ExtSIOp, x, result_type=i64)
    else:  # every bit pattern is a key: no transform, the order's own compare
        return _bitcast(b, x, element.signless)
    if descending:
        key = b.op(AR.XOrIOp, key, b.op(AR.ConstantOp, result_type=key.type, value=-1))
    return key


def _select(L, op, source, out) -> None:
    """A sort with ``count = k < n``: a selection of each row's first k in the sort's order,
    O(n k) a row. One sequential loop over the row carries, for each row of the group, the k
    best order keys so far (_order_key) and their positions, in order. Element j goes before
    slot s when its key is strictly smaller (an equal key came earlier and stays first, which
    keeps the selection stable) or the slot is still empty (its key is the empty mark, which
    no element's key reaches; for 64-bit integers, whose keys take every value, its position
    is n). Those slots are a suffix of the k, so the new slot s holds slot s - 1 where
    element j goes before slot s - 1, element j where it goes before slot s only, and its own
    where neither: two selects a slot, no branch. Values are read back from the row at the
    selected positions (the keys lost -0.0 and NaN payloads)."""
    shape, k = op.operand.type.shape, op.count
    lead, n = shape[:-1], shape[-1]
    element = op.operand.type.element
    rows = math.prod(lead)
    # rows side by side (independent chains the processor overlaps) while their slots fit
    # in registers: 2 k values a row
    group = next(g for g in (ROW_GROUP, 2, 1) if rows % g == 0 and (g == 1 or 2 * k * g <= 32))
    b = L.b
    with b.loops((rows // group,)) as (block_iv,):

        def row_exprs(r):
            return _row_exprs(lead, group, r)

        key_type, predicate, empty_key = _key_form(element, op.descending)
        blank = b.op(AR.ConstantOp, result_type=key_type, value=empty_key if empty_key is not None else 0)
        nowhere = b.op(AR.ConstantOp, result_type=i64, value=n)
        loop = A.ForOp.create(0, n, inits=([blank] * k + [nowhere] * k) * group, iv_name="s")
        b.block.append(loop)
        saved, b.block = b.block, loop.body
        j, carried = loop.body.args[0], loop.body.args[1:]
        position = b.op(AR.IndexCastOp, _apply(b, Dim(0), [j]), result_type=i64)
        yielded = []
        for r in range(group):
            keys, places = carried[2 * k * r : 2 * k * r + k], carried[2 * k * r + k : 2 * k * (r + 1)]
            x = b.load(source, [*row_exprs(r), Dim(1)], [block_iv, j])
            key = _order_key(b, element, x, op.descending)
            before = []
            for slot, place in zip(keys, places):
                goes = _cmpi(b, predicate, key, slot)
                if empty_key is None:
                    goes = b.op(AR.OrIOp, goes, _cmpi(b, "eq", place, nowhere))
                before.append(goes)
            new_keys, new_places = [], []
            for s in range(k):
                taken = b.op(AR.SelectOp, before[s], key, keys[s])
                place = b.op(AR.SelectOp, before[s], position, places[s])
                if s:
                    taken = b.op(AR.SelectOp, before[s - 1], keys[s - 1], taken)
                    place = b.op(AR.SelectOp, before[s - 1], places[s - 1], place)
                new_keys.append(taken)
                new_places.append(place)
            yielded += new_keys + new_places
        b.emit(A.YieldOp, yielded, {})
        b.block = saved
        for r in range(group):
            places = loop.results[2 * k * r + k : 2 * k * (r + 1)]
            for s in range(k):
                value = places[s]
                if op.returns_kind == "values":
                    at = b.op(AR.IndexCastOp, value, result_type=index)
                    where = indexed_address(b, source, row_exprs(r), [block_iv], at)
                    value = b.op(MR.LoadOp, source.buffer, *where)
                operands, amap = access((*row_exprs(r), Const(s)), [block_iv])
                b.emit(A.StoreOp, [value, out, *operands], {"map": amap})
