"""numpy's indexing routines on traced arrays: np.take and np.take_along_axis (gathers),
np.put and np.putmask (writes into their argument), and the ufunc method ``at`` (scatters
that accumulate every repeated index), built on numpy_indexing's keys, gathers and writes.

Their index rules are numpy's: np.take's modes 'raise' (a traced index is checked when the
function runs, as indexing checks it), 'wrap' and 'clip'; ``np.add.at(y, i, v)`` applies
once per occurrence of an index, where ``y[i] += v`` applies once per distinct index.

Example (x float32 (5, 3), i int64 (4,) traced)::

    np.take(x, i, axis=0)           # (4, 3), as x[i]
    np.take(x, i, mode="wrap")      # flat indices modulo 15
    y = x.copy(); np.add.at(y, i, 1.0)
"""

from __future__ import annotations

import math

import numpy as np

from kiln.dialects import tensor_indexed as TI
from kiln.errors import DTypeError, InvalidValueError, OutOfBoundsError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend import views
from kiln.frontend.numpy_api import FUNCTION_RULES, UFUNC_METHODS
from kiln.frontend.numpy_indexing import (
    advanced_parts,
    assigned_value,
    basic_getitem,
    checked_index,
    fill_value,
    getitem,
    placed_axes,
    updated,
    write_region,
)
from kiln.frontend.numpy_keys import broadcast_indices, check_index_dtype, entry_free, parse_key
from kiln.frontend.tracing import Tracer, current_context, user_location


# -- np.take, np.take_along_axis -----------------------------------------------------------------------
def _mode_index(indices, size: int, mode: str):
    """Indices under np.take's mode: 'raise' as indexing, 'wrap' modulo the size, 'clip' into the
    axis (negative ones to 0)."""
    if mode not in ("raise", "wrap", "clip"):
        raise InvalidValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})", user_location())
    if not isinstance(indices, Tracer):
        indices = np.asarray(indices)
        if indices.size == 0 and indices.dtype == np.float64:
            indices = indices.astype(np.int64)
    if indices.dtype.kind not in "iu":
        raise OutOfBoundsError(f"np.take needs integer indices, got {indices.dtype}", user_location())
    if mode == "raise" or np.size(indices) == 0:
        return indices
    if size == 0:
        raise OutOfBoundsError("cannot do a non-empty take from an empty axes.", user_location())
    if not isinstance(indices, Tracer):
        return indices.astype(np.int64) % size if mode == "wrap" else np.clip(indices.astype(np.int64), 0, size - 1)
    indices = ops.cast(indices, np.int64)
    if mode == "wrap":
        return np.remainder(indices, np.int64(size))
    return np.minimum(np.maximum(indices, np.int64(0)), np.int64(size - 1))


def _traced(a) -> Tracer:
    """`a` as a traced array: a numpy array (a lookup table the function captures) becomes a constant."""
    if isinstance(a, Tracer):
        return a
    return ops.lift(current_context(), ops.check_operand(a), np.asarray(a).dtype)


def take(a, indices, axis=None, out=None, mode="raise"):
    """np.take: a gather along `axis` (of the flattened array when None); the result has shape
    a.shape[:axis] + indices.shape + a.shape[axis + 1:] and a's dtype. Costs as getitem's
    gather. mode='raise' (numpy's default) treats an index as indexing does: out of range
    it is an OutOfBoundsError, while tracing (a constant) or when the function runs (traced).
    np.take(x, [[0, 2]], axis=1) of a (4, 3) x is (4, 1, 2)."""
    if out is not None:
        raise UnsupportedError("np.take(..., out=...) is not supported; use the returned value", user_location())
    a = _traced(a)
    if axis is None:
        a, axis = ops.reshape(a, (-1,)), 0
    axis = ops.normalize_axis(axis, a.ndim)
    indices = _mode_index(indices, a.shape[axis], mode)
    return getitem(a, (slice(None),) * axis + (indices,))


def take_along_axis(arr, indices, axis=-1):
    """np.take_along_axis: out[..., i, ...] = arr[..., indices[..., i, ...], ...] along `axis`,
    the other axes of `indices` and `arr` broadcast together. One kiln.gather from arr
    flattened: cost O(indices.shape[axis]) per element of the other axes."""
    arr = _traced(arr)
    if not isinstance(indices, Tracer):
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise OutOfBoundsError("`indices` must be an integer array", user_location())
    else:
        check_index_dtype(indices)
        if indices.dtype == np.bool_:
            raise OutOfBoundsError("`indices` must be an integer array", user_location())
    if axis is None:
        if np.ndim(indices) != 1:
            raise ShapeError("when axis=None, `indices` must have a single dimension.", user_location())
        arr, axis = ops.reshape(arr, (-1,)), 0
    if np.ndim(indices) != arr.ndim:
        raise ShapeError("`indices` and `arr` must have the same number of dimensions", user_location())
    axis = ops.normalize_axis(axis, arr.ndim)
    n = arr.shape[axis]
    spread = broadcast_indices([tuple(1 if k == axis else d for k, d in enumerate(arr.shape)), np.shape(indices)])
    lead = tuple(d for k, d in enumerate(spread) if k != axis)
    m = np.shape(indices)[axis]
    if n == 0 and m and math.prod(lead):
        raise OutOfBoundsError(f"index is out of bounds for axis {axis} with size 0", user_location())
    if n == 0 or m == 0 or math.prod(lead) == 0:
        fill = ops.lift(current_context(), fill_value(arr.dtype), arr.dtype)
        return ops.moveaxis(ops.broadcast_to(fill, lead + (m,)), -1, axis)
    if isinstance(indices, Tracer):
        index = checked_index(ops.moveaxis(indices, axis, -1), n, axis)
    else:
        index = np.moveaxis(indices.astype(np.int64), axis, -1)
        bad = (index < -n) | (index >= n)
        if bad.any():
            raise OutOfBoundsError(
                f"index {int(index[bad].flat[0])} is out of bounds for axis {axis} with size {n}", user_location()
            )
        index = ops.lift(current_context(), np.where(index < 0, index + n, index), np.int64)
    index = ops.broadcast_to(index, lead + (m,))
    src = ops.broadcast_to(ops.moveaxis(arr, axis, -1), lead + (n,))
    # one kiln.gather from src flattened: element (r, j) is src[r, index[r, j]], at r * n + index
    rows = ops.lift(current_context(), np.arange(math.prod(lead), dtype=np.int64).reshape(lead + (1,)) * n, np.int64)
    flat = np.add(ops.broadcast_to(rows, lead + (m,)), index)
    picked = current_context().emit(TI.GatherOp, [ops.reshape(src, (-1,)), ops.strong(flat)], {})
    return ops.moveaxis(picked, -1, axis)


# -- ufunc.at: accumulating scatters ----------------------------------------------------------------
# ufunc -> kiln.scatter_at's kind
_AT_KINDS = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.maximum: "max", np.minimum: "min"}


def ufunc_at(ufunc, inputs, kwargs):
    """np.add.at(a, indices, b) and subtract, multiply, maximum, minimum: a[indices] op= b with
    every repeated index applied (numpy's unbuffered update), written into the traced `a` in
    place. The updates apply one by one in index order, each computed in numpy's result
    dtype and cast to a's before the next reads it (float16 rounded per update), as numpy's
    loop: np.add.at(y=[1e16], [0, 0, 0], [1, 1, -1e16]) leaves 0. With traced indices this
    is one kiln.scatter_at, a sequential loop over the updates, for traced and constant
    indices alike: O(len(indices)) per element of the rest (plus a copy of `a`)."""
    name = f"np.{ufunc.__name__}.at"
    if ufunc not in _AT_KINDS:
        raise UnsupportedError(
            f"{name} is not supported by kiln (add, subtract, multiply, maximum and minimum are)", user_location()
        )
    if kwargs or len(inputs) != 3:
        raise UnsupportedError(f"{name} takes (a, indices, b)", user_location())
    a, key, b = inputs
    if not isinstance(a, Tracer) or a.weak:
        raise UnsupportedError(
            f"{name} writes its first argument, which must be a traced array (a numpy array such as np.zeros(n) "
            "cannot take traced values; make it with np.zeros_like(x, shape=...))",
            user_location(),
        )
    parsed = parse_key(a, key if isinstance(key, tuple) else (key,))
    if parsed.mask is not None:
        raise UnsupportedError(f"{name} with a traced boolean mask: use np.where(mask, ..., a)", user_location())
    ctx = current_context()
    if isinstance(b, (list, tuple)):
        b = np.asarray(b) if entry_free(b) else np.stack(b)
    b = ops.check_operand(b)
    result_dtype = ufunc.resolve_dtypes((a.dtype, ops.promotion_key(b), None))[-1]
    if not np.can_cast(result_dtype, a.dtype, "same_kind"):
        raise DTypeError(
            f"Cannot cast ufunc '{ufunc.__name__}' output from {result_dtype} to {a.dtype} with casting rule "
            "'same_kind'",
            user_location(),
        )
    if not parsed.advanced:
        # basic indices name each element once: an ordinary in-place update
        current = basic_getitem(a, parsed.entries)
        views.assign(a, updated(a, key, ops.cast(ufunc(ops.strong(current).copy(), b), a.dtype)))
        return None
    where, region, merged, flat, place = advanced_parts(a, parsed)
    n_rest, b_shape = merged.ndim - 1, np.shape(flat)
    order = placed_axes(n_rest, len(b_shape), place)
    result_shape = tuple((merged.shape[:-1] + b_shape)[k] for k in order)
    work = np.dtype(result_dtype)
    length = int(np.prod(b_shape, dtype=np.int64))
    source = ops.lift(ctx, b, work) if not isinstance(b, Tracer) else ops.cast(b, work)
    source = assigned_value(work, source, result_shape, name)
    if length == 0:
        return None
    source = ops.transpose(source, [int(k) for k in np.argsort(order)])
    source = ops.reshape(source, merged.shape[:-1] + (length,))
    flat = (
        ops.reshape(flat, (length,)) if isinstance(flat, Tracer) else ops.lift(ctx, np.reshape(flat, (-1,)), np.int64)
    )
    # numpy's loop, one update at a time in index order, rounded to a's dtype each time
    written = ctx.emit(
        TI.ScatterAtOp, [merged, ops.cast(flat, np.int64), ops.strong(source)], {"kind": _AT_KINDS[ufunc]}
    )
    views.assign(a, write_region(a, where, region, parsed, written))
    return None


# -- np.put, np.putmask --------------------------------------------------------------------------------
def written_argument(name: str, a) -> Tracer:
    """`a`, the array numpy function `name` writes in place, which must be a traced array."""
    if not isinstance(a, Tracer) or a.weak:
        raise UnsupportedError(
            f"{name} writes its first argument, which must be a traced array (a numpy array such as np.zeros(n) "
            "cannot take traced values; make it with np.zeros_like(x, shape=...))",
            user_location(),
        )
    return a


def _cycled(name: str, values, count: int) -> Tracer:
    """The values, flattened and repeated to `count` elements, as np.put and np.putmask use them."""
    if isinstance(values, (list, tuple)):
        values = np.asarray(values) if entry_free(values) else np.stack(values)
    values = ops.check_operand(values)
    if not isinstance(values, Tracer):
        values = ops.lift(current_context(), np.asarray(values), np.asarray(values).dtype)
    values = ops.reshape(values, (-1,))
    if values.size == 0:
        raise UnsupportedError(f"{name} needs at least one value", user_location())
    repeats = -(-count // values.size)
    return ops.reshape(ops.repeat(ops.reshape(values, (1, -1)), repeats, 0), (-1,))[:count]


def put(a, ind, v, mode="raise"):
    """np.put(a, ind, v, mode): a.flat[ind] = v, with v repeated to the length of ind, written
    into the traced `a` in place (the last of repeated indices wins). Costs as item assignment:
    a traced `ind` is one kiln.scatter_at of kind store through all of a's axes (their flat
    position is what np.put counts), O(len(ind)) after the copy."""
    a = written_argument("np.put", a)
    ind = _mode_index(ind, a.size, mode)
    count = int(np.size(ind))
    if not count or not np.size(v):  # numpy writes nothing when there are no values
        return
    if isinstance(ind, Tracer) and a.ndim:
        index = checked_index(ops.reshape(ind, (count,)), a.size, 0)
        values = assigned_value(a.dtype, _cycled("np.put", v, count), (count,))
        attributes = {"kind": TI.STORE, "axis": 0, "axes": a.ndim}
        views.assign(a, current_context().emit(TI.ScatterAtOp, [a, index, ops.strong(values)], attributes))
        return
    ind = ops.reshape(ind, (count,)) if isinstance(ind, Tracer) else np.reshape(ind, (count,))
    flat = updated(ops.reshape(a.copy(), (-1,)), (ind,), _cycled("np.put", v, count))
    views.assign(a, ops.reshape(flat, a.shape))


def putmask(a, mask, values):
    """np.putmask(a, mask, values): a.flat[n] = values[n % len(values)] where mask.flat[n],
    written into the traced `a` in place: a select, so the mask may be traced."""
    a = written_argument("np.putmask", a)
    if np.shape(mask) != a.shape:
        raise ShapeError(f"np.putmask: the mask has shape {np.shape(mask)}, the array {a.shape}", user_location())
    if np.size(values) == 0:  # numpy writes nothing when there are no values
        return
    full = ops.reshape(assigned_value(a.dtype, _cycled("np.putmask", values, a.size), (a.size,)), a.shape)
    views.assign(a, ops.where(mask, full, a))


UFUNC_METHODS.update(at=ufunc_at)
FUNCTION_RULES.update({np.take: take, np.take_along_axis: take_along_axis, np.put: put, np.putmask: putmask})
