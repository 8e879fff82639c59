"""Sorting along an axis (sort, argsort, partition, argpartition) and what builds on it
(median, quantile, percentile); the functions whose result size depends on the data
(unique, nonzero, ...) are refused with the static alternative.

Sorting is ``kiln.sort`` (traced_ops.sort): a merge sort of each row, O(n log n), stable,
NaN last, -0.0 and 0.0 in index order, as numpy sorts.
"""

from __future__ import annotations

import numpy as np

from kiln.errors import ArgumentError, OutOfBoundsError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.tracing import current_context, user_location

_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _check_kind(name, kind, order, stable=None):
    if order is not None:
        raise UnsupportedError(f"{name}(order=...) sorts structured arrays, which kiln does not have", user_location())
    if kind not in _KINDS:
        raise ArgumentError(
            f"{name}: sort kind must be one of {', '.join(map(str, _KINDS[1:]))}, got {kind!r}", user_location()
        )
    if stable is not None and kind is not None:
        raise ArgumentError(
            f"{name}: `kind` and `stable` parameters can't be provided at the same time", user_location()
        )


def _flat_or(a, axis):
    x = ops.as_tracer(a)
    return (ops.reshape(x, (-1,)), 0) if axis is None else (x, axis)


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """np.sort: every kind is the same stable sort; NaN last, -0.0 and 0.0 kept in order."""
    _check_kind("np.sort", kind, order, stable)
    return ops.sort(*_flat_or(a, axis), with_index=False)[0]


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """np.argsort: stable (equal keys keep their index order) whatever the kind; int64."""
    _check_kind("np.argsort", kind, order, stable)
    return ops.sort(*_flat_or(a, axis), with_values=False)[1]


def _check_kth(name, x, kth, axis):
    n = x.shape[ops.normalize_axis(axis, x.ndim)] if x.ndim else 0
    for k in np.atleast_1d(kth):
        if isinstance(k, ops.Tracer) or np.asarray(k).dtype.kind not in "iu":
            raise ArgumentError(f"{name}: kth must be Python ints, got {kth!r}", user_location())
        if n and not -n <= int(k) < n:  # numpy partitions an empty axis whatever kth is
            raise ShapeError(f"{name}: kth(={int(k)}) out of bounds ({n})", user_location())


def _partition(a, kth, axis=-1, kind="introselect", order=None):
    """np.partition: returns the fully sorted array, which has numpy's partition property for
    every kth (numpy's own order of the other elements is unspecified)."""
    _check_kind("np.partition", None if kind == "introselect" else kind, order)
    x, axis = _flat_or(a, axis)
    _check_kth("np.partition", x, kth, axis)
    return ops.sort(x, axis, with_index=False)[0]


def _argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """np.argpartition: the indices of the stable sort (a valid partition for every kth)."""
    _check_kind("np.argpartition", None if kind == "introselect" else kind, order)
    x, axis = _flat_or(a, axis)
    _check_kth("np.argpartition", x, kth, axis)
    return ops.sort(x, axis, with_values=False)[1]


def _axes_last(a, axis):
    """`a` with the axes in `axis` (None: all) moved last and merged into one, and the shape a
    keepdims result takes."""
    x = ops.as_tracer(a)
    axes = ops.normalize_axes(axis, x.ndim)
    kept = [d for d in range(x.ndim) if d not in axes]
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    if 1 < len(axes) < x.ndim and x.size == 0 and 0 in (x.shape[d] for d in kept):
        # numpy merges several axes with reshape(kept + (-1,)), which an empty kept axis makes
        # ambiguous: it raises there (np.median(np.zeros((2, 0, 2)), axis=(0, 2))), and so does kiln
        raise ShapeError(
            f"cannot reshape array of size 0 into shape {tuple(x.shape[d] for d in kept)} + (-1,) "
            f"(numpy's reduction over the axes {axes} of shape {x.shape})",
            user_location(),
        )
    moved = ops.reshape(ops.transpose(x, kept + list(axes)), tuple(x.shape[d] for d in kept) + (count,))
    kept_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    return moved, kept_shape


def _nan_last(sorted_values, result):
    """numpy's median and quantile are NaN where the slice holds a NaN (sorted last)."""
    if sorted_values.dtype.kind != "f" or sorted_values.shape[-1] == 0:
        return result
    last = sorted_values[..., -1]
    return np.where(np.not_equal(last, last), last, result)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.median: the middle element of the sorted axis, or the mean of the two middle ones."""
    if out is not None:
        raise UnsupportedError("np.median(..., out=...) is not supported inside a compiled function", user_location())
    rows, kept_shape = _axes_last(a, axis)
    n = rows.shape[-1]
    ordered = ops.sort(rows, -1, with_index=False)[0]
    middle = ordered[..., (n - 1) // 2 : n // 2 + 1] if n else ordered
    result = _nan_last(ordered, ops.mean(middle, -1))
    return ops.reshape(result, kept_shape) if keepdims else result


def _lerp(low, high, t):
    """numpy's _lerp: low + (high - low) t, or high - (high - low)(1 - t) when t >= 0.5 (t a
    known scalar here: a weak Python float, or a numpy float that takes part in promotion)."""
    diff = high - low
    if t >= 0.5:
        return np.subtract(high, diff * (1 - t))
    return np.add(low, diff * t)


def _quantile_of(name, a, q, axis, out, method, keepdims, weights, scale):
    if out is not None:
        raise UnsupportedError(f"{name}(..., out=...) is not supported inside a compiled function", user_location())
    if weights is not None or method != "linear":
        raise UnsupportedError(f"{name}: only method='linear' without weights is supported", user_location())
    if isinstance(q, ops.Tracer):
        raise UnsupportedError(
            f"{name} with a traced q is not supported: the positions it reads depend on its value; pass q "
            "as a constant (a Python number, list or numpy array)",
            user_location(),
        )
    weak = type(q) in (int, float)  # numpy promotes the result with q weakly then
    qs = np.true_divide(q, 100) if scale else np.asanyarray(q)
    if qs.ndim > 1 or not (np.all(qs >= 0) and np.all(qs <= 1)):
        bound = "[0, 100]" if scale else "[0, 1]"
        raise ArgumentError(f"{name}: q must be a scalar or 1-d, in the range {bound}, got {q!r}", user_location())
    rows, kept_shape = _axes_last(a, axis)
    n = rows.shape[-1]
    if n == 0:  # numpy indexes the empty sorted axis, an IndexError
        raise OutOfBoundsError(
            f"{name} of an empty axis has no value (shape {ops.as_tracer(a).shape})", user_location()
        )
    # numpy's own promotion, asked of numpy: q as it reaches np.quantile (weak if a Python number)
    dtype = np.quantile(np.zeros(1, rows.dtype), (q / 100 if weak else qs) if scale else q).dtype
    ordered = ops.sort(rows, -1, with_index=False)[0]
    results = []
    for value in qs.ravel():
        # numpy's 'linear' computes the position as (n - 1) * q (_QuantileMethods), not through
        # the general alpha/beta form, which rounds differently (0.1 of 3 elements: 0.2 vs 0.2000...02)
        virtual = (n - 1) * value
        if np.asarray(virtual).dtype.kind in "iu":  # an integer q (0 or 1) reads an element
            results.append(ordered[..., int(virtual)])
            continue
        low = int(np.floor(virtual)) if virtual < n - 1 else n - 1
        t = virtual - np.floor(virtual)
        results.append(_lerp(ordered[..., low], ordered[..., min(low + 1, n - 1)], float(t) if weak else t))
    if not qs.shape:
        result = results[0]
    elif results:
        result = ops.reshape(ops.stack([ops.cast(r, dtype) for r in results], 0), qs.shape + rows.shape[:-1])
    else:
        result = ops.broadcast_to(ops.lift(current_context(), np.zeros((), dtype), dtype), qs.shape + rows.shape[:-1])
    result = _nan_last(ordered, result)
    if keepdims:
        result = ops.reshape(result, qs.shape + kept_shape)
    return ops.strong(ops.cast(result, dtype))


def _quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """np.quantile, method 'linear' (numpy's default), q a constant scalar or 1-d array."""
    return _quantile_of("np.quantile", a, q, axis, out, method, keepdims, weights, scale=False)


def _percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """np.percentile: np.quantile of q / 100."""
    return _quantile_of("np.percentile", a, q, axis, out, method, keepdims, weights, scale=True)


def _pick(ordered, index):
    """ordered[..., index] for a traced int64 `index` of shape ordered.shape[:-1]: the one element
    an index compare selects, taken with a max over the others set to the lowest value (a sum
    would turn -0.0 into 0.0)."""
    n = ordered.shape[-1]
    hit = np.equal(np.arange(n, dtype=np.int64), np.expand_dims(index, -1))
    return np.max(np.where(hit, ordered, np.array(-np.inf, ordered.dtype)), axis=-1)


def _nan_quantile_of(name, a, q, axis, out, method, keepdims, weights, scale, median=False):
    """np.nanmedian / nanquantile / nanpercentile: the median or quantile of the numbers that are
    not NaN, which sort first; their count is known only when the function runs, so the two
    elements read are picked by an index compare. A slice of only NaN gives NaN (numpy warns)."""
    x = ops.as_tracer(a)
    if x.dtype.kind != "f" or median and ops.reduced_count(x, axis) == 0:
        if median:
            return _median(a, axis, out, False, keepdims)
        return _quantile_of(name, a, q, axis, out, method, keepdims, weights, scale)
    if out is not None or weights is not None or method != "linear":
        raise UnsupportedError(f"{name}: only method='linear' without weights or out is supported", user_location())
    if isinstance(q, ops.Tracer):
        raise UnsupportedError(f"{name} with a traced q is not supported; pass q as a constant", user_location())
    rows, kept_shape = _axes_last(x, axis)
    if rows.shape[-1] == 0:
        raise ShapeError(f"{name} of an empty axis has no value (shape {x.shape})", user_location())
    ordered = ops.sort(rows, -1, with_index=False)[0]
    count = ops.reduce("sum", ops.cast(np.equal(rows, rows), np.int64), -1)
    nan = np.array(np.nan, rows.dtype)
    if median:
        pair = np.add(_pick(ordered, np.floor_divide(count - 1, 2)), _pick(ordered, np.floor_divide(count, 2)))
        result = np.where(np.greater(count, 0), ops.divide_by_count(pair, np.full_like(count, 2)), nan)
        return ops.reshape(result, kept_shape) if keepdims else result
    weak = type(q) in (int, float)
    qs = np.true_divide(q, 100) if scale else np.asanyarray(q)
    if qs.ndim > 1 or not (np.all(qs >= 0) and np.all(qs <= 1)):
        bound = "[0, 100]" if scale else "[0, 1]"
        raise ArgumentError(f"{name}: q must be a scalar or 1-d, in the range {bound}, got {q!r}", user_location())
    dtype = np.quantile(np.zeros(1, rows.dtype), (q / 100 if weak else qs) if scale else q).dtype
    last = count - 1
    results = []
    for value in qs.ravel().astype(np.float64):
        virtual = ops.cast(last, np.float64) * value  # numpy's 'linear': (n - 1) * q
        floor = np.floor(virtual)
        above = np.greater_equal(virtual, ops.cast(last, np.float64))
        low = np.where(above, last, ops.cast(floor, np.int64))
        high = np.where(above, last, ops.cast(floor, np.int64) + 1)
        t = virtual - floor
        a, b = _pick(ordered, low), _pick(ordered, high)
        diff = b - a
        value_at = np.where(np.greater_equal(t, 0.5), b - diff * (1 - t), a + diff * t)
        results.append(ops.cast(np.where(np.greater(count, 0), value_at, nan), dtype))
    if not qs.shape:
        result = results[0]
    else:
        stacked = ops.stack(results, 0) if results else None
        shape = qs.shape + rows.shape[:-1]
        zeros = ops.broadcast_to(ops.lift(current_context(), np.zeros((), dtype), dtype), shape)
        result = ops.reshape(stacked, shape) if stacked is not None else zeros
    if keepdims:
        result = ops.reshape(result, qs.shape + kept_shape)
    return ops.strong(ops.cast(result, dtype))


def _nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.nanmedian: the median of the numbers that are not NaN."""
    return _nan_quantile_of("np.nanmedian", a, 0.5, axis, out, "linear", keepdims, None, False, median=True)


def _nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """np.nanquantile, method 'linear', q a constant scalar or 1-d array."""
    return _nan_quantile_of("np.nanquantile", a, q, axis, out, method, keepdims, weights, scale=False)


def _nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """np.nanpercentile: np.nanquantile of q / 100."""
    return _nan_quantile_of("np.nanpercentile", a, q, axis, out, method, keepdims, weights, scale=True)


def _data_dependent(name, alternative):
    def rule(*args, **kwargs):
        raise UnsupportedError(
            f"{name} is not supported by kiln: the size of its result depends on the data, and a "
            f"compiled function's shapes are fixed when it is traced; {alternative}",
            user_location(),
        )

    return rule


_MASK = "keep the shape with a mask instead (np.where(condition, x, 0), or x * condition)"


def _compress(condition, a, axis=None, out=None):
    """np.compress with a condition known while tracing (a numpy array or list): a gather of the
    positions it selects, so the size is static. A traced condition is refused: the size of
    the result would depend on the data."""
    if isinstance(condition, ops.Tracer):
        _data_dependent("np.compress with a traced condition", _MASK)()
    if out is not None:
        raise UnsupportedError("np.compress(..., out=...) is not supported inside a compiled function", user_location())
    chosen = np.asarray(condition)
    if chosen.ndim != 1:
        raise ShapeError(f"np.compress: condition must be a 1-d array, got shape {chosen.shape}", user_location())
    x, axis = _flat_or(a, axis)
    axis = ops.normalize_axis(axis, x.ndim)
    picks = np.flatnonzero(chosen)
    if picks.size and picks[-1] >= x.shape[axis]:
        raise OutOfBoundsError(  # an IndexError, as numpy's
            f"np.compress: condition selects index {picks[-1]}, out of bounds for axis {axis} with size "
            f"{x.shape[axis]}",
            user_location(),
        )
    return np.take(x, picks, axis=axis)


def _extract(condition, arr):
    """np.extract(condition, arr): np.compress of both flattened (condition known while tracing)."""
    if isinstance(condition, ops.Tracer):
        _data_dependent("np.extract with a traced condition", _MASK)()
    return _compress(np.ravel(condition), arr)


FUNCTION_RULES.update(
    {
        np.sort: _sort,
        np.argsort: _argsort,
        np.partition: _partition,
        np.argpartition: _argpartition,
        np.median: _median,
        np.quantile: _quantile,
        np.percentile: _percentile,
        np.nanmedian: _nanmedian,
        np.nanquantile: _nanquantile,
        np.nanpercentile: _nanpercentile,
        np.unique: _data_dependent("np.unique", "sort instead (np.sort) and compare neighbours (x[1:] != x[:-1])"),
        np.nonzero: _data_dependent("np.nonzero", _MASK),
        np.argwhere: _data_dependent("np.argwhere", _MASK),
        np.flatnonzero: _data_dependent("np.flatnonzero", _MASK),
        np.extract: _extract,
        np.compress: _compress,
    }
)
