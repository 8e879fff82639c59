"""numpy's reductions beyond sum/max/min, its scans, and the ufunc methods ``reduce`` and
``accumulate``.

Each is composed from the tensor ops the tracer already has (reductions, selects, slices,
concatenates), so it lowers, fuses and differentiates like any other traced code. Scans
(cumsum, cumprod, their nan forms, cumulative_sum/prod, ufunc.accumulate) are one
``kiln.scan`` each (traced_ops.scan): numpy's sequential loop, a running value carried along
the axis, so their results are numpy's bits in every dtype (float16 rounds every step).
"""

from __future__ import annotations

import numpy as np

from kiln.errors import ArgumentError, OutOfBoundsError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES, UFUNC_METHODS
from kiln.frontend.tracing import current_context, user_location

# ufunc.reduce as the reduction it is: np.add.reduce(x, axis=1) is np.sum(x, axis=1).
_REDUCE_METHODS = {
    np.add: np.sum,
    np.multiply: np.prod,
    np.maximum: np.max,
    np.minimum: np.min,
    np.logical_and: np.all,
    np.logical_or: np.any,
}


def _numpy_dtype(ufunc, method, dtype, given):
    """The dtype numpy's ufunc.reduce / accumulate gives for an operand of dtype `dtype`, asked
    of numpy itself on one element (add on int32 accumulates in int64, maximum keeps int32)."""
    try:
        return getattr(ufunc, method)(np.ones(1, dtype), dtype=given).dtype
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"np.{ufunc.__name__}.{method} of {dtype}: {exc}", user_location()) from None


def ufunc_reduce(ufunc, inputs, kwargs):
    """np.<ufunc>.reduce(array, axis=0, dtype=None, out=None, keepdims=False, initial, where)."""
    name = f"np.{ufunc.__name__}.reduce"
    if ufunc not in _REDUCE_METHODS:
        raise UnsupportedError(
            f"{name} is not supported by kiln (it reduces with add, multiply, maximum, "
            "minimum, logical_and and logical_or)",
            user_location(),
        )
    if len(inputs) != 1:
        raise ArgumentError(f"{name} takes one array", user_location())
    x = ops.as_tracer(inputs[0])
    kwargs = dict(kwargs)
    axis = kwargs.pop("axis", 0 if x.ndim else None)
    dtype = _numpy_dtype(ufunc, "reduce", x.dtype, kwargs.pop("dtype", None))
    reduction = _REDUCE_METHODS[ufunc]
    # np.any and np.all take no initial; for the logical ufuncs it is one more operand.
    initial = kwargs.pop("initial", None) if reduction in (np.any, np.all) else None
    if reduction in (np.sum, np.prod):
        kwargs["dtype"] = dtype
    elif dtype != (np.bool_ if reduction in (np.any, np.all) else x.dtype):
        x = ops.cast(x, dtype)
    result = reduction(x, axis=axis, **kwargs)
    if initial is not None:
        result = ufunc(result, initial)
    return ops.astype(result, dtype)


def _reduceat_arguments(array, indices, axis=0, dtype=None):
    return array, indices, axis, dtype


def ufunc_reduceat(ufunc, inputs, kwargs):
    """np.<ufunc>.reduceat(array, indices, axis=0, dtype=None) with `indices` known while
    tracing (a 1-d list or array of ints): result k along `axis` is the reduction of
    array[indices[k]:indices[k + 1]] (to the end for the last), or array[indices[k]] alone
    where indices[k] >= indices[k + 1], numpy's rule. OutOfBoundsError (an IndexError) with
    numpy's message for an index outside [0, n); traced indices are an UnsupportedError."""
    name = f"np.{ufunc.__name__}.reduceat"
    if ufunc not in _REDUCE_METHODS:
        raise UnsupportedError(
            f"{name} is not supported by kiln (it reduces with add, multiply, maximum, "
            "minimum, logical_and and logical_or)",
            user_location(),
        )
    kwargs = dict(kwargs)
    if len(inputs) == 2:
        kwargs.pop("indices", None)  # numpy passes indices= both among the inputs and as itself
    try:
        array, indices, axis, given = _reduceat_arguments(*inputs, **kwargs)
    except TypeError as exc:
        raise ArgumentError(f"{name} takes (array, indices, axis=0, dtype=None): {exc}", user_location()) from None
    if isinstance(indices, ops.Tracer):
        raise UnsupportedError(
            f"{name} with traced indices is not supported: pass them as a constant list or array "
            "(or compute the reductions with slices and np.add.reduce)",
            user_location(),
        )
    x = ops.as_tracer(array)
    if x.ndim == 0:
        raise ArgumentError("cannot reduceat on a scalar", user_location())
    starts = np.asarray(indices)
    if starts.ndim != 1:
        raise ShapeError(f"{name}: indices must be one-dimensional, got shape {starts.shape}", user_location())
    starts = starts.astype(np.intp)
    axis = ops.normalize_axis(0 if axis is None else axis, x.ndim)
    length = x.shape[axis]
    for start in starts:
        if not 0 <= start < length:
            raise OutOfBoundsError(
                f"index {start} out-of-bounds in {ufunc.__name__}.reduceat [0, {length})", user_location()
            )
    try:
        dtype = ufunc.reduceat(np.ones(1, x.dtype), [0], dtype=given).dtype
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{name} of {x.dtype}: {exc}", user_location()) from None
    parts = []
    for k, start in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else length
        where = (slice(None),) * axis + (slice(int(start), int(max(stop, start + 1))),)
        parts.append(ufunc.reduce(x[where], axis=axis, dtype=dtype, keepdims=True))
    if not parts:
        return ops.full_like(x, 0, dtype, x.shape[:axis] + (0,) + x.shape[axis + 1 :])
    return ops.concatenate(parts, axis)


# ufunc.accumulate on associative ufuncs: the kiln.scan kind that runs the ufunc each step.
_ACCUMULATE = {
    np.add: "add",
    np.multiply: "mul",
    np.maximum: "max",
    np.minimum: "min",
    np.logical_and: "and",
    np.logical_or: "or",
    np.bitwise_and: "bitwise_and",
    np.bitwise_or: "bitwise_or",
    np.bitwise_xor: "bitwise_xor",
}


def ufunc_accumulate(ufunc, inputs, kwargs):
    """np.<ufunc>.accumulate(array, axis=0, dtype=None): the running reduction along `axis`."""
    name = f"np.{ufunc.__name__}.accumulate"
    if ufunc not in _ACCUMULATE:
        raise UnsupportedError(
            f"{name} is not supported by kiln (it accumulates {', '.join(u.__name__ for u in _ACCUMULATE)})",
            user_location(),
        )
    if len(inputs) != 1:
        raise ArgumentError(f"{name} takes one array", user_location())
    kwargs = dict(kwargs)
    axis, given = kwargs.pop("axis", 0), kwargs.pop("dtype", None)
    if kwargs:
        raise UnsupportedError(f"{name}: keyword(s) {', '.join(sorted(kwargs))} are not supported", user_location())
    x = ops.as_tracer(inputs[0])
    if x.ndim == 0:
        raise ShapeError(f"{name} of a 0-d array: numpy accumulates along an axis", user_location())
    dtype = _numpy_dtype(ufunc, "accumulate", x.dtype, given)
    if axis is None:
        raise ArgumentError(f"{name}: axis=None is not valid (numpy accumulates along one axis)", user_location())
    # numpy's loop runs in the result dtype: np.add.accumulate of bool counts in int64
    return _scan(ufunc, ops.cast(x, dtype), axis)


# On bool, numpy's add and maximum are logical or, multiply and minimum logical and.
_BOOL_KINDS = {"add": "or", "max": "or", "bitwise_or": "or", "mul": "and", "min": "and", "bitwise_and": "and"}


def _scan(ufunc, x, axis):
    kind = _ACCUMULATE[ufunc]
    if x.dtype == np.bool_ and kind not in ("and", "or"):
        if kind not in _BOOL_KINDS:
            raise UnsupportedError(f"np.{ufunc.__name__}.accumulate of bool is not supported by kiln", user_location())
        kind = _BOOL_KINDS[kind]
    return ops.scan(kind, x, axis)


def _cumulative(name, ufunc, a, axis, dtype, nan_fill=None):
    x = ops.as_tracer(a)
    if nan_fill is not None and x.dtype.kind == "f":
        x = np.where(np.not_equal(x, x), np.asarray(nan_fill, x.dtype), x)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    if dtype is None:
        dtype = ops.sum_dtype(x.dtype)
    x = ops.cast(x, ops.check_dtype(dtype, f"{name}(dtype=...)"))
    if x.dtype == np.bool_:
        raise ArgumentError(f"{name} in bool is a logical scan; use np.logical_or.accumulate", user_location())
    return _scan(ufunc, x, ops.normalize_axis(axis, x.ndim))


def _cumsum(a, axis=None, dtype=None, out=None):
    _no_out("np.cumsum", out)
    return _cumulative("np.cumsum", np.add, a, axis, dtype)


def _cumprod(a, axis=None, dtype=None, out=None):
    _no_out("np.cumprod", out)
    return _cumulative("np.cumprod", np.multiply, a, axis, dtype)


def _nancumsum(a, axis=None, dtype=None, out=None):
    _no_out("np.nancumsum", out)
    return _cumulative("np.nancumsum", np.add, a, axis, dtype, nan_fill=0)


def _nancumprod(a, axis=None, dtype=None, out=None):
    _no_out("np.nancumprod", out)
    return _cumulative("np.nancumprod", np.multiply, a, axis, dtype, nan_fill=1)


def _cumulative_array_api(name, ufunc, identity, x, axis, dtype, out, include_initial):
    """numpy 2's np.cumulative_sum / np.cumulative_prod (the array API's): like cumsum and
    cumprod, but `axis` is required for more than one dimension (a 0-d array counts as 1-d),
    and include_initial=True starts each scan with the identity, one longer along `axis`."""
    _no_out(name, out)
    x = ops.as_tracer(x)
    if x.ndim == 0:
        x = ops.reshape(x, (1,))
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(
                "For arrays which have more than one dimension ``axis`` argument is required.", user_location()
            )
        axis = 0
    axis = ops.normalize_axis(axis, x.ndim)
    result = _cumulative(name, ufunc, x, axis, dtype)
    if not include_initial:
        return result
    first = ops.full_like(result, identity, result.dtype, x.shape[:axis] + (1,) + x.shape[axis + 1 :])
    return ops.concatenate([first, result], axis)


def _cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative_array_api("np.cumulative_sum", np.add, 0, x, axis, dtype, out, include_initial)


def _cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative_array_api("np.cumulative_prod", np.multiply, 1, x, axis, dtype, out, include_initial)


def _no_out(name, out):
    if out is not None:
        raise UnsupportedError(
            f"{name}(..., out=...) is not supported inside a compiled function; use the returned value "
            "(out[...] = result writes it into a traced array)",
            user_location(),
        )


# -- reductions ------------------------------------------------------------------------------
def _ptp(a, axis=None, out=None, keepdims=False):
    _no_out("np.ptp", out)
    return np.subtract(np.max(a, axis=axis, keepdims=keepdims), np.min(a, axis=axis, keepdims=keepdims))


def _count_nonzero(a, axis=None, *, keepdims=False):
    x = ops.as_tracer(a)
    return ops.reduce("sum", ops.cast(x, np.bool_), axis, keepdims, np.int64)


def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """np.average. Weights that sum to zero give inf or nan where numpy raises
    ZeroDivisionError: the sum is known only when the compiled function runs."""
    x = ops.as_tracer(a)
    axes = ops.normalize_axes(axis, x.ndim)
    if weights is None:
        avg = ops.mean(x, axes, None, keepdims)
        scale = ops.full_like(avg, x.size / avg.size if avg.size else 0)
    else:
        w = (
            weights
            if isinstance(weights, ops.Tracer)
            else ops.lift(current_context(), np.asarray(weights), np.asarray(weights).dtype)
        )
        if w.shape != x.shape:
            # numpy 2's rule: weights shaped like a's axes, in the order `axis` names them
            if axis is None:
                raise ArgumentError(
                    "np.average: axis must be specified when shapes of a and weights differ", user_location()
                )
            named = [ops.normalize_axis(d, x.ndim) for d in (axis if isinstance(axis, (tuple, list)) else (axis,))]
            if w.shape != tuple(x.shape[d] for d in named):
                raise ShapeError(
                    f"np.average: shape of weights {w.shape} must be consistent with shape of a {x.shape} along "
                    f"the axis {axis}",
                    user_location(),
                )
            w = ops.transpose(w, [int(k) for k in np.argsort(named)])
            w = ops.broadcast_to(ops.reshape(w, tuple(n if d in axes else 1 for d, n in enumerate(x.shape))), x.shape)
        extra = ("f8",) if x.dtype.kind in "biu" else ()
        dtype = np.result_type(x.dtype, w.dtype, *extra)
        scale = ops.reduce("sum", w, axes, keepdims, dtype)
        total = ops.reduce("sum", np.multiply(ops.cast(x, dtype), ops.cast(w, dtype)), axes, keepdims, dtype)
        avg = np.true_divide(total, scale)
    if returned:
        return avg, ops.strong(ops.broadcast_to(scale, avg.shape))
    return avg


def _nan_to(x, fill):
    return np.where(np.not_equal(x, x), np.asarray(fill, x.dtype), x) if x.dtype.kind == "f" else x


def _nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("np.nansum", out)
    return ops.reduce_where("sum", _nan_to(ops.as_tracer(a), 0), axis, keepdims, dtype, initial, where)


def _nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("np.nanprod", out)
    return ops.reduce_where("prod", _nan_to(ops.as_tracer(a), 1), axis, keepdims, dtype, initial, where)


def _nan_extreme(kind, a, axis, out, keepdims, initial, where):
    """np.nanmax / nanmin: NaNs skipped; a slice with nothing but NaN gives NaN (numpy also warns
    there, which a compiled function cannot: its values are known only when it runs)."""
    _no_out(f"np.nan{kind}", out)
    x = ops.as_tracer(a)
    if x.dtype.kind != "f":
        return ops.reduce_where(kind, x, axis, keepdims, None, initial, where)
    nan = np.not_equal(x, x)
    skipped = np.where(nan, np.asarray(-np.inf if kind == "max" else np.inf, x.dtype), x)
    result = ops.reduce_where(kind, skipped, axis, keepdims, None, initial, where)
    taken = np.logical_not(nan) if where is None else np.logical_and(np.logical_not(nan), where)
    if initial is not None:
        return result
    return np.where(ops.reduce_where("any", taken, axis, keepdims), result, np.asarray(np.nan, x.dtype))


def _nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nan_extreme("max", a, axis, out, keepdims, initial, where)


def _nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nan_extreme("min", a, axis, out, keepdims, initial, where)


def _nan_arg_extreme(kind, a, axis, out, keepdims):
    """np.nanargmax / nanargmin as numpy computes them: NaN replaced by -inf (+inf), then
    argmax (argmin), so a NaN ties with an infinity it precedes. numpy raises ValueError for a
    slice of only NaN; a compiled function's values are known only when it runs, so such a
    slice gives -1 there (int64, numpy's intp)."""
    _no_out(f"np.nanarg{kind}", out)
    x = ops.as_tracer(a)
    if x.dtype.kind != "f":
        return ops.arg_extreme(kind, x, axis, keepdims)
    nan = np.not_equal(x, x)
    filled = np.where(nan, np.asarray(-np.inf if kind == "max" else np.inf, x.dtype), x)
    index = ops.arg_extreme(kind, filled, axis, keepdims)
    all_nan = np.all(nan, axis=axis, keepdims=keepdims) if x.ndim else nan
    return np.where(all_nan, np.int64(-1), index)


def _nanargmax(a, axis=None, out=None, *, keepdims=False):
    return _nan_arg_extreme("max", a, axis, out, keepdims)


def _nanargmin(a, axis=None, out=None, *, keepdims=False):
    return _nan_arg_extreme("min", a, axis, out, keepdims)


def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """np.nanmean: the mean of the elements that are not NaN (a slice of only NaN gives NaN)."""
    _no_out("np.nanmean", out)
    x = ops.as_tracer(a)
    if x.dtype.kind != "f":
        return ops.mean_where(x, axis, dtype, keepdims, where)
    taken = np.equal(x, x)
    taken = taken if where is None else np.logical_and(taken, where)
    total = ops.reduce_where("sum", _nan_to(x, 0), axis, keepdims, dtype, where=where)
    return ops.divide_by_count(total, ops.count_where(x, axis, keepdims, taken))


def _nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    """np.nanvar: the variance of the elements that are not NaN; nan where fewer than ddof + 1."""
    _no_out("np.nanvar", out)
    x = ops.as_tracer(a)
    if correction is not None:
        ddof = correction
    if x.dtype.kind != "f":
        return ops.var_where(x, axis, dtype, ddof, keepdims, where, mean)
    taken = np.equal(x, x)
    taken = taken if where is None else np.logical_and(taken, where)
    result = ops.var_where(_nan_to(x, 0), axis, dtype, ddof, keepdims, taken, mean)
    enough = np.greater(ops.count_where(x, axis, keepdims, taken), ddof)
    return np.where(enough, result, np.asarray(np.nan, result.dtype))


def _nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    result = np.sqrt(_nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction))
    return result if dtype is None else ops.astype(result, dtype)


UFUNC_METHODS.update(reduce=ufunc_reduce, accumulate=ufunc_accumulate, reduceat=ufunc_reduceat)
FUNCTION_RULES.update(
    {
        np.cumsum: _cumsum,
        np.cumprod: _cumprod,
        np.nancumsum: _nancumsum,
        np.nancumprod: _nancumprod,
        np.ptp: _ptp,
        np.count_nonzero: _count_nonzero,
        np.average: _average,
        np.nansum: _nansum,
        np.nanprod: _nanprod,
        np.nanmax: _nanmax,
        np.nanmin: _nanmin,
        np.nanmean: _nanmean,
        np.nanvar: _nanvar,
        np.nanstd: _nanstd,
        np.nanargmax: _nanargmax,
        np.nanargmin: _nanargmin,
        np.cumulative_sum: _cumulative_sum,
        np.cumulative_prod: _cumulative_prod,
    }
)
