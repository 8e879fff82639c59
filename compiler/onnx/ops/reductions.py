"""ONNX reductions (Reduce*, ArgMax/ArgMin), scans (CumSum, CumProd) and TopK.

Every result keeps the input's dtype, as the spec's T -> T says, where numpy would widen
(np.sum of int32 is int64): the numpy calls pass ``dtype=`` or cast back. Shapes are
static, so an empty input is known at import time and gives the spec's constant (the
reduction's identity) without tracing anything.
"""

from __future__ import annotations

import numpy as np

from kiln.frontend.nn import top_k
from kiln.onnx.registry import constant, op

_REDUCE_ATTRIBUTES = ("axes", "keepdims", "noop_with_empty_axes")


def _same(x, result):
    """`result` in `x`'s dtype (ONNX's T -> T)."""
    return result if result.dtype == x.dtype else result.astype(x.dtype)


def _reduce_axes(node, data, axes, axes_input_since: int):
    """The axes to reduce as a tuple of non-negative ints; ``()`` reduces nothing.

    Axes are an attribute before `axes_input_since` and an optional input from then on;
    none given (or an empty list) means every axis, unless ``noop_with_empty_axes``.
    """
    if node.opset < axes_input_since:
        axes = node.ints("axes", None)
    else:
        axes = constant(node, axes, "axes")
        axes = None if axes is None else [int(a) for a in axes.reshape(-1)]
    if not axes:
        return () if node.attr("noop_with_empty_axes", 0) else tuple(range(data.ndim))
    normalized = []
    for axis in axes:
        if not -data.ndim <= axis < data.ndim:
            raise node.error(f"axis {axis} is out of range for an input of rank {data.ndim}")
        normalized.append(axis % data.ndim)
    return tuple(sorted(set(normalized)))


def _reduced_shape(shape, axes, keepdims: bool):
    if keepdims:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    return tuple(n for k, n in enumerate(shape) if k not in axes)


def _reduction(reduce, empty_value, axes_input_since: int = 18):
    """A Reduce* handler: `reduce(data, axes, keepdims)` in numpy, and for an input of no
    elements the constant `empty_value(dtype)` the spec's reference gives (the identity)."""

    def handler(node, data, axes=None):
        axes = _reduce_axes(node, data, axes, axes_input_since)
        keepdims = bool(node.attr("keepdims", 1))
        if data.size == 0:
            shape = _reduced_shape(data.shape, axes, keepdims)
            return np.full(shape, empty_value(data.dtype), dtype=data.dtype)
        return _same(data, reduce(data, axes, keepdims))

    return handler


def _lowest(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _highest(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).max if dtype.kind in "iu" else np.inf


def _sum(data, axes, keepdims):
    return np.sum(data, axis=axes, keepdims=keepdims, dtype=data.dtype)


def _mean(data, axes, keepdims):
    # The reference averages in the input's dtype, so integers truncate.
    count = int(np.prod([data.shape[a] for a in axes], dtype=np.int64))
    total = _sum(data, axes, keepdims)
    if data.dtype.kind in "iu":
        # C's division, truncating toward zero, as the reference's np.mean(dtype=int) does.
        quotient = np.floor_divide(total, count)
        if data.dtype.kind == "i":
            quotient = quotient + ((total < 0) & (np.remainder(total, count) != 0)).astype(data.dtype)
        return quotient
    return total / np.asarray(count, data.dtype)


def _max(data, axes, keepdims):
    return np.max(data, axis=axes, keepdims=keepdims)


def _min(data, axes, keepdims):
    return np.min(data, axis=axes, keepdims=keepdims)


def _prod(data, axes, keepdims):
    return np.prod(data, axis=axes, keepdims=keepdims, dtype=data.dtype)


def _l1(data, axes, keepdims):
    return _sum(np.abs(data), axes, keepdims)


def _sum_square(data, axes, keepdims):
    return _sum(data * data, axes, keepdims)


def _l2(data, axes, keepdims):
    squares = _sum_square(data, axes, keepdims)
    if data.dtype.kind in "iu":
        # The reference takes the root in float64 and truncates it back to the integer type.
        return np.sqrt(squares.astype(np.float64)).astype(data.dtype)
    return np.sqrt(squares)


def _in_float64(reduce):
    """`reduce` computed in float64 for integer data (opsets before 28 allow integers in the
    log reductions; the result is truncated back to the integer type, as ReduceL2's)."""

    def wrapped(data, axes, keepdims):
        if data.dtype.kind in "iu":
            return reduce(data.astype(np.float64), axes, keepdims).astype(data.dtype)
        return reduce(data, axes, keepdims)

    return wrapped


@_in_float64
def _log_sum(data, axes, keepdims):
    return np.log(_sum(data, axes, keepdims))


@_in_float64
def _log_sum_exp(data, axes, keepdims):
    # exp of (x - max) cannot overflow; an infinite max is left out of the shift so that
    # inf - inf does not make a NaN (the sum is then inf or 0 and the log gives +-inf).
    finite = np.where(np.isinf(data), np.asarray(-np.inf, data.dtype), data)
    shift = np.max(finite, axis=axes, keepdims=True)
    shift = np.where(np.isinf(shift), np.zeros_like(shift), shift)
    total = np.sum(np.exp(data - shift), axis=axes, keepdims=True, dtype=data.dtype)
    result = np.log(total) + shift
    if not keepdims:
        result = np.squeeze(result, axis=axes)
    return result


def _zero(dtype):
    return 0


def _nan(dtype):
    return np.nan if np.dtype(dtype).kind == "f" else 0


def _minus_inf(dtype):
    return np.iinfo(dtype).min if np.dtype(dtype).kind in "iu" else -np.inf


def _one(dtype):
    return 1


op("ReduceSum", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_sum, _zero, axes_input_since=13))
op("ReduceMean", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_mean, _nan))
op("ReduceMax", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_max, _lowest))
op("ReduceMin", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_min, _highest))
op("ReduceProd", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_prod, _one))
op("ReduceL1", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_l1, _zero))
op("ReduceL2", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_l2, _zero))
op("ReduceSumSquare", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_sum_square, _zero))
op("ReduceLogSum", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_log_sum, _minus_inf))
op("ReduceLogSumExp", attributes=_REDUCE_ATTRIBUTES, since=1)(_reduction(_log_sum_exp, _minus_inf))


def _arg_extreme(numpy_function):
    """An ArgMax/ArgMin handler: int64 indices along ``axis``, the first extreme, or the last
    with ``select_last_index`` (found as the first one of the reversed axis)."""

    def handler(node, data):
        axis = node.attr("axis", 0)
        if not -data.ndim <= axis < data.ndim:
            raise node.error(f"axis {axis} is out of range for an input of rank {data.ndim}")
        axis %= data.ndim
        keepdims = bool(node.attr("keepdims", 1))
        n = data.shape[axis]
        if n == 0:
            raise node.error(f"{node.op_type} of an empty axis has no index")
        if node.attr("select_last_index", 0):
            index = np.asarray(n - 1, np.int64) - numpy_function(np.flip(data, axis), axis=axis, keepdims=keepdims)
        else:
            index = numpy_function(data, axis=axis, keepdims=keepdims)
        return index.astype(np.int64)

    return handler


op("ArgMax", attributes=("axis", "keepdims", "select_last_index"))(_arg_extreme(np.argmax))
op("ArgMin", attributes=("axis", "keepdims", "select_last_index"))(_arg_extreme(np.argmin))


def _scan(numpy_function, identity):
    """A CumSum/CumProd handler: the running result along the ``axis`` input, from the end
    with ``reverse``, and with ``exclusive`` each element left out of its own (the first is
    the identity)."""

    def handler(node, x, axis):
        axis = constant(node, axis, "axis")
        if axis.size != 1:
            raise node.error(f"axis must be a scalar, got shape {list(axis.shape)}")
        axis = int(axis.reshape(-1)[0])
        if not -x.ndim <= axis < x.ndim:
            raise node.error(f"axis {axis} is out of range for an input of rank {x.ndim}")
        axis %= x.ndim
        if x.shape[axis] == 0:
            return x
        reverse = bool(node.attr("reverse", 0))
        if reverse:
            x = np.flip(x, axis)
        if node.attr("exclusive", 0):
            head = np.full(x.shape[:axis] + (1,) + x.shape[axis + 1 :], identity, dtype=x.dtype)
            all_but_last = (slice(None),) * axis + (slice(0, x.shape[axis] - 1),)
            body = numpy_function(x[all_but_last], axis=axis, dtype=x.dtype)
            result = np.concatenate([head, body], axis=axis)
        else:
            result = numpy_function(x, axis=axis, dtype=x.dtype)
        if reverse:
            result = np.flip(result, axis)
        return _same(x, result)

    return handler


op("CumSum", attributes=("exclusive", "reverse"), since=11)(_scan(np.cumsum, 0))
op("CumProd", attributes=("exclusive", "reverse"), since=26)(_scan(np.cumprod, 1))


@op("TopK", attributes=("axis", "k", "largest", "sorted"))
def top_k_(node, x, k=None):
    """The k largest (or smallest) elements along ``axis`` and their int64 indices, sorted;
    equal elements in index order. ``sorted=0`` leaves the order to the backend, so sorted
    is conformant."""
    if node.opset < 10:
        k = node.attr("k")
    else:
        k = constant(node, k, "K")
        if k.size != 1:
            raise node.error(f"K must hold one value, got shape {list(k.shape)}")
        k = int(k.reshape(-1)[0])
    axis = node.attr("axis", -1)
    if not -x.ndim <= axis < x.ndim:
        raise node.error(f"axis {axis} is out of range for an input of rank {x.ndim}")
    axis %= x.ndim
    if not 0 <= k <= x.shape[axis]:
        raise node.error(f"K={k} is not in [0, {x.shape[axis]}], the size of axis {axis}")
    if node.attr("largest", 1):
        values, indices = top_k(x, k, axis)
    else:
        # A stable ascending sort: ties in index order and NaN last, as the reference's lexsort.
        cut = (slice(None),) * axis + (slice(0, k),)
        indices = np.argsort(x, axis=axis, kind="stable")[cut].astype(np.int64)
        values = np.take_along_axis(x, indices, axis)
    return _same(x, values), indices.astype(np.int64)
