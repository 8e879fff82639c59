"""numpy's comparison and lookup functions: isclose, allclose, select, isin, searchsorted, digitize.

Each is written as numpy's own Python source computes it (numpy/_core/numeric.py,
numpy/lib/_function_base_impl.py), on traced values, so the dtypes, NaN and infinity rules
are numpy's. searchsorted and digitize are a binary search of a fixed number of steps
(O(len(values) * log len(array))); isin compares every value with every test element
(O(len(values) * len(tests))). Static shapes, no data-dependent loops.
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.errors import ArgumentError, DTypeError, InvalidValueError, ShapeError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.tracing import Tracer, current_context, user_location


def _array(x):
    """A Tracer or number as it is; a list or tuple as numpy makes an array of it."""
    return x if isinstance(x, Tracer) or np.ndim(x) == 0 and not isinstance(x, (list, tuple)) else np.asarray(x)


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy 2's isclose: |a - b| <= atol + rtol * |b| where b is finite, or a == b (equal
    infinities); b computes in at least float (result_type(b, 1.0))."""
    x, y = (v if isinstance(v, Tracer) or ops.is_python_scalar(v) else np.asanyarray(v) for v in (a, b))
    y_dtype = np.result_type(ops.promotion_sample(y), 1.0)
    y = y.astype(y_dtype) if isinstance(y, Tracer) else np.asanyarray(y, dtype=y_dtype)
    close = np.logical_or(
        np.logical_and(np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)), np.isfinite(y)), np.equal(x, y)
    )
    if equal_nan:
        close = np.logical_or(close, np.logical_and(np.isnan(x), np.isnan(y)))
    return close


def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return np.all(_isclose(a, b, rtol, atol, equal_nan))


def _select(condlist, choicelist, default=0):
    """np.select: the first choice whose condition holds, else `default` (numpy checks that
    conditions are bool and that the lists have one length)."""
    condlist, choicelist, default = [_array(c) for c in condlist], [_array(c) for c in choicelist], _array(default)
    if len(condlist) != len(choicelist):
        raise ShapeError("np.select: list of cases must be same length as list of conditions", user_location())
    if not condlist:
        raise ShapeError("np.select: select with an empty condition list is not possible", user_location())
    for i, condition in enumerate(condlist):
        dtype = condition.dtype if isinstance(condition, Tracer) else np.asarray(condition).dtype
        if dtype != np.bool_:
            raise DTypeError(f"np.select: invalid entry {i} in condlist: should be boolean ndarray", user_location())
    target = np.result_type(*(ops.promotion_sample(ops.check_operand(c)) for c in [*choicelist, default]))
    shape = ops.broadcast_shapes(*(np.shape(v) for v in [*condlist, *choicelist, default]))
    ctx = ops.context_of([*condlist, *choicelist, default])
    result = ops.broadcast_to(ops.lift(ctx, default, target), shape)
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = np.where(condition, ops.lift(ctx, choice, target), result)
    return ops.strong(result)


def _flat(ctx, x):
    return ops.reshape(x if isinstance(x, Tracer) else ops.lift(ctx, x, np.asarray(x).dtype), (-1,))


def _isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """np.isin: whether each element equals any of test_elements (NaN equals nothing)."""
    element, test_elements = _array(element), _array(test_elements)
    ctx = ops.context_of([element, test_elements])
    tests = _flat(ctx, test_elements)
    x = element if isinstance(element, Tracer) else ops.lift(ctx, element, np.asarray(element).dtype)
    if tests.size == 0:
        return ops.full_like(x, invert, np.bool_)
    common = _exact_common_dtype(x.dtype, tests.dtype)
    if tests.size <= _COMPARED_TESTS or common is None:
        hits = np.any(np.equal(np.expand_dims(x, -1), tests), axis=-1)
    else:  # sort the tests once, then a binary search per element: O((n + m) log m)
        ordered = ops.sort(ops.lift(ctx, tests, common), with_index=False)[0]
        x = ops.lift(ctx, x, common)
        position = np.minimum(binary_search(ordered, x, "left"), np.int64(tests.size - 1))
        hits = np.equal(gather_in_bounds(ordered, position), x)  # NaN equals nothing, -0.0 equals 0.0
    return np.logical_not(hits) if invert else ops.strong(hits)


# Up to this many test elements, isin compares each element with every one (one fused loop);
# past it, the tests are sorted and searched.
_COMPARED_TESTS = 16


def _exact_common_dtype(a: np.dtype, b: np.dtype):
    """The dtype both compare in exactly, for the sorted search: numpy's promotion where it
    keeps every value (floats with floats, ints of one signedness, bools), else None (int64
    with uint64 or with a float, where numpy's comparison is exact but no common dtype is)."""
    kinds = {a.kind, b.kind}
    if a == b or kinds <= {"f"} or kinds <= {"i"} or kinds <= {"u"}:
        return np.result_type(a, b)
    if "b" in kinds and kinds <= {"b", "i", "u"}:
        return np.result_type(a, b)
    return None


def _searchsorted(a, v, side="left", sorter=None):
    """np.searchsorted on a sorted 1-d `a`: for each v, how many elements of `a` are < v
    (side='left') or <= v (side='right'), with NaN sorting last as numpy's order has it."""
    if side not in ("left", "right"):
        raise ArgumentError(f"np.searchsorted: side must be 'left' or 'right', got {side!r}", user_location())
    a, v, sorter = _array(a), _array(v), None if sorter is None else _array(sorter)
    ctx = ops.context_of([a, v, sorter])
    if np.ndim(a) != 1:
        raise ShapeError(f"np.searchsorted: a must be 1-d, got shape {np.shape(a)}", user_location())
    if sorter is not None:
        sorter = _checked_sorter(sorter, np.shape(a)[0])
        if isinstance(sorter, Tracer):
            a = gather_in_bounds(a if isinstance(a, Tracer) else ops.lift(ctx, a, np.asarray(a).dtype), sorter)
        else:
            a = np.take(a, sorter) if isinstance(a, Tracer) else np.asarray(a)[sorter]
    dtype = np.result_type(ops.promotion_sample(ops.check_operand(a)), ops.promotion_sample(ops.check_operand(v)))
    return ops.strong(binary_search(ops.lift(ctx, a, dtype), ops.lift(ctx, v, dtype), side))


def _checked_sorter(sorter, size: int):
    """numpy's checks of searchsorted's `sorter`, with numpy's exception types: a 1-d array
    (TypeError) of integers (TypeError for bool or float; ValueError for uint64, which does
    not cast safely to intp) of a's length (ValueError), and for a constant, every index
    inside 0..size-1 (ValueError, "Sorter index out of range"; a traced sorter's values are
    checked when the compiled function runs, by np.take)."""
    sorter = _array(sorter)
    dtype = sorter.dtype if isinstance(sorter, Tracer) else np.asarray(sorter).dtype
    if dtype.kind not in "iu":
        raise DTypeError(f"np.searchsorted: sorter must only contain integers, got dtype {dtype}", user_location())
    if not np.can_cast(dtype, np.intp, "safe"):
        raise InvalidValueError(
            f"np.searchsorted: could not parse sorter argument: dtype {dtype} does not cast safely to int64",
            user_location(),
        )
    if np.ndim(sorter) != 1:
        raise ArgumentError(
            f"np.searchsorted: could not parse sorter argument: it must be 1-d, got shape {np.shape(sorter)}",
            user_location(),
        )
    if np.shape(sorter)[0] != size:
        raise ShapeError(
            f"np.searchsorted: sorter.size must equal a.size, got sorter.size {np.shape(sorter)[0]} and a.size {size}",
            user_location(),
        )
    if isinstance(sorter, Tracer):
        # checked when the function runs; numpy refuses a negative entry (np.take would count
        # it from the end), which as uint64 lies past every size, so the check refuses it too
        checked = current_context().emit(T.CheckIndexOp, [ops.cast(sorter, np.uint64)], {"size": size, "axis": 0})
        return ops.cast(checked, np.int64)
    sorter = np.asarray(sorter)
    bad = (sorter < 0) | (sorter >= size)
    if bad.any():
        raise InvalidValueError(
            f"np.searchsorted: Sorter index out of range: sorter holds {sorter[bad][0]}, a.size is {size}",
            user_location(),
        )
    return sorter


def gather_in_bounds(table: Tracer, index: Tracer) -> Tracer:
    """table[index] for a 1-d table and an int64 index already inside 0..len(table)-1 by
    construction (clipped, or a binary search's count): one kiln.gather, without the run-time
    check that np.take adds for an index that could be anything."""
    return current_context().emit(TI.GatherOp, [table, ops.strong(index)], {})


def binary_search(sorted_a: Tracer, values: Tracer, side: str) -> Tracer:
    """For each element of `values` (any shape, `sorted_a`'s dtype), the number of elements of
    the sorted 1-d `sorted_a` (length m) that come before it: < v (side='left') or <= v
    (side='right') in numpy's order, where NaN sorts after every number and NaN equals NaN.
    int64 of values' shape.

    A branch-free binary search of ceil(log2(m + 1)) steps: `count` starts at 0 and each step
    tries to move it by the next lower power of two, reading sorted_a[count + step - 1] with
    one kiln.gather and keeping the move where that element comes before v (a select). The
    predicate holds on a prefix of a sorted array, so the steps find its length: O(len(values)
    * log m) work and no loop over sorted_a (which a comparison with every element costs)."""
    m = sorted_a.shape[0]
    count = ops.full_like(values, 0, np.int64)
    if m == 0:
        return count
    nan_v = np.isnan(values) if sorted_a.dtype.kind == "f" else None
    step = 1 << (m.bit_length() - 1)  # the highest power of two <= m: m.bit_length() steps
    while step:
        candidate = np.add(count, np.int64(step))
        # lanes whose candidate passes the end read the last element; their move is refused below
        position = np.minimum(candidate, np.int64(m)) - np.int64(1)
        element = gather_in_bounds(sorted_a, position)
        if nan_v is None:
            before = np.less(element, values) if side == "left" else np.less_equal(element, values)
        elif side == "left":  # numpy orders NaN after every number, and NaN with NaN as equal
            before = np.less(element, values) | (nan_v & ~np.isnan(element))
        else:
            before = np.less_equal(element, values) | nan_v
        count = np.where(np.logical_and(before, np.less_equal(candidate, np.int64(m))), candidate, count)
        step >>= 1
    return count


def _digitize(x, bins, right=False):
    """np.digitize: the index of the bin each x falls in, for monotonically increasing or
    decreasing constant bins (numpy's own definition through searchsorted)."""
    if isinstance(bins, Tracer):
        raise ArgumentError(
            "np.digitize needs constant bins: whether they increase or decrease decides the answer", user_location()
        )
    bins = np.asarray(bins)
    if bins.ndim != 1:
        raise ShapeError("np.digitize: bins must be 1-dimensional", user_location())
    delta = np.diff(bins)
    if np.all(delta >= 0):
        return _searchsorted(bins, x, side="left" if right else "right")
    if np.all(delta <= 0):  # numpy reverses the bins and counts from the end, same side
        return bins.size - _searchsorted(bins[::-1], x, side="left" if right else "right")
    raise ArgumentError("np.digitize: bins must be monotonically increasing or decreasing", user_location())


FUNCTION_RULES.update(
    {
        np.isclose: _isclose,
        np.allclose: _allclose,
        np.select: _select,
        np.isin: _isin,
        np.searchsorted: _searchsorted,
        np.digitize: _digitize,
    }
)
