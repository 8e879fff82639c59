"""numpy's array editing functions: append, insert, delete, resize, block, the in-place writers
(put_along_axis, fill_diagonal, place), choose, ediff1d, vander, pad's ramp and statistic modes
and the apply_along_axis / apply_over_axes loops.

Every result has a static shape once the index and size arguments are known, so each function
is a static gather (numpy_shapes.take_static), a concatenation, a select or a scatter of the
traced operands. The in-place writers compute the written array functionally and write it
back as item assignment does (views.assign), so the write reaches the argument's views.
"""

from __future__ import annotations

import math

import numpy as np

from kiln.errors import ArgumentError, DTypeError, OutOfBoundsError, ShapeError, UnsupportedError
from kiln.frontend import numpy_joining as joining
from kiln.frontend import numpy_shapes as shapes
from kiln.frontend import traced_ops as ops
from kiln.frontend import views
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.numpy_indexing import updated
from kiln.frontend.numpy_indexing_routines import put, written_argument
from kiln.frontend.numpy_keys import slice_indices
from kiln.frontend.numpy_shapes import along, as_array, take_static
from kiln.frontend.tracing import Tracer, current_context, user_location


# -- operands ----------------------------------------------------------------------------
def _constant(value, what: str):
    """`value` as numpy sees it while tracing; a traced value is an ArgumentError naming `what`
    (it would decide the result's shape or which elements are written)."""
    if isinstance(value, Tracer):
        raise ArgumentError(
            f"{what} must be known while tracing (it decides the result's shape), got a traced value; "
            "pass a Python int, list or numpy array, or make it a static argument (kiln.compile(fn, "
            "static_argnames=...))",
            user_location(),
        )
    return value


def _flat_axis(arr: Tracer, axis):
    """numpy's axis=None convention: the array flattened, axis 0."""
    if axis is None:
        return ops.reshape(arr, (-1,)), 0
    return arr, ops.normalize_axis(_constant(axis, "the axis"), arr.ndim)


def _index_array(obj, name: str) -> np.ndarray:
    """obj as numpy's index array: an empty list is intp, other non-integers are an IndexError."""
    indices = np.asarray(_constant(obj, f"{name}'s indices"))
    if indices.size == 0 and indices.dtype.kind == "f" and not isinstance(obj, np.ndarray):
        return indices.astype(np.intp)
    if indices.dtype.kind not in "iub":
        raise OutOfBoundsError("arrays used as indices must be of integer (or boolean) type", user_location())
    return indices


# -- append, insert, delete, resize, block ----------------------------------------------------
def append(arr, values, axis=None):
    """np.append: concatenate((arr, values), axis), both flattened when axis is None. The
    result has numpy's promoted dtype; shapes other than along `axis` must match (ShapeError)."""
    arr, values = as_array(arr), as_array(values)
    if axis is None:
        return ops.concatenate([ops.reshape(arr, (-1,)), ops.reshape(values, (-1,))], 0)
    return ops.concatenate([arr, values], _constant(axis, "np.append's axis"))


def _numpy_line(edit, n: int, *args) -> np.ndarray:
    """numpy's own `edit` (np.insert, np.delete) of the positions 0..n-1 of one axis: which old
    element (or new value, numbered from n) lands where, with numpy's bookkeeping of repeated,
    negative and wrapping positions and its errors (IndexError, ValueError) as kiln's."""
    try:
        return edit(np.arange(n), *args)
    except IndexError as exc:
        raise OutOfBoundsError(str(exc), user_location()) from None
    except ValueError as exc:
        raise ShapeError(str(exc), user_location()) from None


def insert(arr, obj, values, axis=None):
    """np.insert: `values` (cast to arr's dtype, broadcast to the inserted block) placed before
    the static positions `obj` (an int, a slice, a 1-d list/array of ints or a boolean mask)
    along `axis` (the flattened array when None); one position inserts all the values it is
    given there, as numpy does. Out-of-range positions are an OutOfBoundsError, as numpy's
    IndexError. A static gather of concatenate((arr, values)), in the order numpy's own
    np.insert puts the positions 0..n-1 of the axis."""
    arr = as_array(arr)
    arr, axis = _flat_axis(arr, axis)
    n = arr.shape[axis]
    if isinstance(obj, slice):
        indices = np.arange(*slice_indices(obj, n), dtype=np.intp)
    else:
        indices = _index_array(obj, "np.insert")
        if indices.dtype == np.bool_:
            if indices.ndim != 1:
                raise ShapeError("boolean array argument obj to insert must be one dimensional", user_location())
            indices = np.flatnonzero(indices)
        elif indices.ndim > 1:
            raise ShapeError("index array argument obj to insert must be one dimensional or scalar", user_location())
    if not isinstance(values, Tracer):  # numpy's np.array(values, dtype=arr.dtype): 300 in int8 raises
        values = np.array(values, dtype=arr.dtype)
    values = ops.astype(as_array(values), arr.dtype)
    values = ops.reshape(values, (1,) * (arr.ndim - values.ndim) + values.shape)
    count = indices.size
    if indices.size == 1:
        # numpy inserts one position's block whole: as many values along `axis` as it has there
        index = int(indices.reshape(-1)[0])
        if not -n <= index <= n:
            raise OutOfBoundsError(f"index {obj} is out of bounds for axis {axis} with size {n}", user_location())
        if indices.ndim == 0:  # a scalar position: numpy moves the values' first axis to `axis`
            values = ops.moveaxis(values, 0, axis)
        count = values.shape[axis]
    source = _numpy_line(np.insert, n, indices, n + np.arange(count))
    block = ops.broadcast_to(values, arr.shape[:axis] + (count,) + arr.shape[axis + 1 :])
    return take_static(ops.concatenate([arr, block], axis), source, axis)


def delete(arr, obj, axis=None):
    """np.delete: `arr` without the static positions `obj` (an int, a slice, a list of ints or
    a boolean mask as long as the axis) along `axis` (the flattened array when None): the
    positions numpy's own np.delete keeps of 0..n-1, gathered."""
    arr = as_array(arr)
    arr, axis = _flat_axis(arr, axis)
    n = arr.shape[axis]
    if not isinstance(obj, slice):
        obj = _index_array(obj, "np.delete") if not isinstance(obj, np.ndarray) else obj
        if np.ndim(obj) == 0 and obj.dtype.kind in "iu" and not -n <= int(obj) < n:
            raise OutOfBoundsError(f"index {int(obj)} is out of bounds for axis {axis} with size {n}", user_location())
    return take_static(arr, _numpy_line(np.delete, n, obj), axis)


def resize(a, new_shape):
    """np.resize: `a` flattened, repeated cyclically to fill `new_shape` (zeros when either is
    empty), in a's dtype."""
    a = as_array(a)
    new_shape = shapes.static_ints(_constant(new_shape, "np.resize's new_shape"), "np.resize's new_shape")
    if any(d < 0 for d in new_shape):
        raise ShapeError("all elements of `new_shape` must be non-negative", user_location())
    size = math.prod(new_shape)
    if a.size == 0 or size == 0:
        return ops.full_like(a, 0, shape=new_shape)
    flat = ops.reshape(a, (1, -1))
    repeated = ops.reshape(ops.broadcast_to(flat, (-(-size // a.size), a.size)), (-1,))
    return ops.reshape(repeated[:size], new_shape)


def _block_depth(arrays, index: str) -> int:
    """How deeply `arrays` nests lists, checked equal everywhere as numpy's _block_check_depths_match."""
    if isinstance(arrays, tuple):
        raise ArgumentError(
            f"arrays{index} is a tuple. Only lists can be used to arrange blocks, and np.block does not allow "
            "implicit conversion from tuple to ndarray.",
            user_location(),
        )
    if not isinstance(arrays, list):
        return 0
    if not arrays:
        raise ShapeError(f"List at arrays{index} cannot be empty", user_location())
    depths = [_block_depth(item, f"{index}[{i}]") for i, item in enumerate(arrays)]
    if len(set(depths)) > 1:
        raise ShapeError(
            f"List depths are mismatched. The nesting at arrays{index} has depths {depths}", user_location()
        )
    return depths[0] + 1


def _block_leaves(arrays) -> list:
    return [leaf for item in arrays for leaf in _block_leaves(item)] if isinstance(arrays, list) else [arrays]


def block(arrays):
    """np.block: nested lists of arrays joined innermost-first along the last axes; every
    array is first given leading length-1 axes up to the result's rank, max(list depth, the
    arrays' ranks). Tuples are an ArgumentError, mismatched or empty lists a ShapeError."""
    depth = _block_depth(arrays, "")
    leaves = [as_array(leaf) for leaf in _block_leaves(arrays)]
    rank = max([depth] + [leaf.ndim for leaf in leaves])
    dtype = np.result_type(*(leaf.dtype for leaf in leaves))
    stream = iter(leaves)

    def assemble(item, level):
        if not isinstance(item, list):
            leaf = next(stream)
            return ops.cast(ops.reshape(leaf, (1,) * (rank - leaf.ndim) + leaf.shape), dtype)
        return ops.concatenate([assemble(part, level + 1) for part in item], level - depth)

    return assemble(arrays, 0)


# -- in-place writers ----------------------------------------------------------------------------
def _fancy_write_checks(shape: tuple, key: tuple, values, axis) -> int:
    """numpy's checks of arr[key] = values, in its order: the index arrays broadcast together
    (IndexError), the values broadcast to the index result (ValueError), then constant indices
    in range along `axis` (IndexError) where anything is selected. Returns how many are."""
    try:
        spread = ops.broadcast_shapes(*(np.shape(k) for k in key))
    except ShapeError:
        raise OutOfBoundsError(
            f"shape mismatch: indexing arrays could not be broadcast together with shapes "
            f"{' '.join(str(np.shape(k)) for k in key)}",
            user_location(),
        ) from None
    try:
        fits = np.broadcast_shapes(np.shape(values), spread) == spread
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(
            f"shape mismatch: value array of shape {np.shape(values)} could not be broadcast to indexing result "
            f"of shape {spread}",
            user_location(),
        )
    indices, n = key[axis], shape[axis]
    if not isinstance(indices, Tracer) and math.prod(spread):
        bad = (indices < -n) | (indices >= n)
        if bad.any():
            raise OutOfBoundsError(
                f"index {int(indices[bad].reshape(-1)[0])} is out of bounds for axis {axis} with size {n}",
                user_location(),
            )
    return math.prod(spread)


def put_along_axis(arr, indices, values, axis):
    """np.put_along_axis: arr[..., indices[..., i, ...], ...] = values along `axis`, written
    into the traced `arr` and its views as item assignment is; `values` broadcasts to the
    indices' shape (broadcast with arr's other axes). With axis=None numpy writes through
    arr.flat, which is a view only of a C-contiguous array (otherwise its read-only copy is a
    ShapeError, numpy's ValueError). `indices` may be traced (checked against the axis when the function runs)."""
    arr = written_argument("np.put_along_axis", arr)
    if not isinstance(indices, Tracer):
        indices = np.asarray(indices)
    if indices.dtype.kind not in "iu":
        raise OutOfBoundsError("`indices` must be an integer array", user_location())
    if axis is None:
        if np.ndim(indices) != 1:
            raise ShapeError("when axis=None, `indices` must have a single dimension.", user_location())
        if not views.is_c_contiguous(arr.shape, views.strides_of(arr)):
            raise ShapeError("assignment destination is read-only", user_location())
        if not _fancy_write_checks((arr.size,), (indices,), values, 0):
            return
        flat = updated(ops.reshape(arr.copy(), (-1,)), (indices,), values)
        views.assign(arr, ops.reshape(flat, arr.shape))
        return
    axis = ops.normalize_axis(_constant(axis, "np.put_along_axis's axis"), arr.ndim)
    if np.ndim(indices) != arr.ndim:
        raise ShapeError("`indices` and `arr` must have the same number of dimensions", user_location())
    # numpy's _make_along_axis_idx: `indices` on `axis`, a range broadcast along each other axis
    key = tuple(
        indices if k == axis else np.arange(d).reshape((1,) * k + (d,) + (1,) * (arr.ndim - k - 1))
        for k, d in enumerate(arr.shape)
    )
    if _fancy_write_checks(arr.shape, key, values, axis):
        arr[key] = values


def fill_diagonal(a, val, wrap=False):
    """np.fill_diagonal: a's main diagonal (a.flat[::a.shape[1] + 1] for 2-d, every axis equal
    beyond) set to `val`, cycled as numpy's flat assignment does, in place. With wrap=True a tall
    2-d array's diagonal restarts below every square block."""
    a = written_argument("np.fill_diagonal", a)
    if a.ndim < 2:
        raise ShapeError("array must be at least 2-d", user_location())
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else min(a.size, a.shape[1] * a.shape[1])
    else:
        if len(set(a.shape)) != 1:
            raise ShapeError("All dimensions of input must be of equal length", user_location())
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = a.size
    if np.size(val):  # numpy's flat assignment of no values writes nothing
        put(a, np.arange(0, end, step), val)


def place(arr, mask, vals):
    """np.place: the positions where `mask` (arr's size) is True take `vals` cycled in order,
    in place. A traced mask is a select: a True at flat position k takes
    vals[(the Trues before k) % len(vals)], a cumsum then a gather."""
    arr = written_argument("np.place", arr)
    if np.size(mask) != arr.size:
        raise ShapeError("place: mask and data must be the same size", user_location())
    # numpy converts a list or scalar to arr's dtype, but casts an array only by the 'safe' rule
    if isinstance(vals, (Tracer, np.ndarray)) and not np.can_cast(vals.dtype, arr.dtype, "safe"):
        raise DTypeError(
            f"Cannot cast array data from {vals.dtype!r} to {arr.dtype!r} according to the rule 'safe'",
            user_location(),
        )
    if not isinstance(vals, Tracer):
        vals = np.asarray(vals)
    if not isinstance(mask, Tracer):
        where = np.flatnonzero(np.asarray(mask))
        if where.size and np.size(vals) == 0:
            raise ShapeError("Cannot insert from an empty array!", user_location())
        if where.size:
            put(arr, where, vals)
        return
    if np.size(vals) == 0:
        raise ShapeError(
            "Cannot insert from an empty array! (numpy raises when any mask entry is True, which a traced mask "
            "decides only at run time)",
            user_location(),
        )
    flags = ops.reshape(ops.cast(mask, np.bool_), (-1,))
    before = np.cumsum(ops.cast(flags, np.int64)) - np.int64(1)
    flat_vals = ops.reshape(as_array(vals), (-1,))
    picked = flat_vals[np.remainder(np.maximum(before, np.int64(0)), np.int64(flat_vals.size))]
    new = np.where(flags, ops.cast(picked, arr.dtype), ops.reshape(arr, (-1,)))
    views.assign(arr, ops.reshape(ops.cast(new, arr.dtype), arr.shape))


# -- choose, ediff1d, vander ----------------------------------------------------------------------
def choose(a, choices, out=None, mode="raise"):
    """np.choose: choices[a][i] at each i of a, choices, and a broadcast together, in the
    choices' promoted dtype. mode 'wrap' takes a modulo the count, 'clip' clips it; 'raise'
    checks a constant `a` (ValueError) and clips a traced one (run-time values are unchecked)."""
    if out is not None:
        raise UnsupportedError("np.choose(..., out=...) is not supported; use the returned value", user_location())
    if mode not in ("raise", "wrap", "clip"):
        raise ArgumentError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})", user_location())
    # Python scalars among the choices stay weak, as in numpy's common dtype of them
    choices = [ops.check_operand(c) for c in choices] if isinstance(choices, (list, tuple)) else list(as_array(choices))
    known = None if isinstance(a, Tracer) else np.asarray(a)
    a = as_array(a)
    if not np.can_cast(a.dtype, np.intp, "safe"):
        raise DTypeError(
            f"np.choose: Cannot cast array data from {a.dtype} to int64 according to the rule 'safe'", user_location()
        )
    if not choices:
        raise ShapeError("0-length sequence.", user_location())
    count = len(choices)
    if mode == "raise" and known is not None and ((known < 0) | (known >= count)).any():
        raise ShapeError("invalid entry in choice array", user_location())
    index = ops.cast(a, np.int64)
    if mode == "wrap":
        index = np.remainder(index, np.int64(count))
    else:
        index = np.minimum(np.maximum(index, np.int64(0)), np.int64(count - 1))
    dtype = ops.check_dtype(np.result_type(*(ops.promotion_sample(c) for c in choices)), "np.choose")
    choices = [ops.lift(current_context(), c, dtype) for c in choices]
    shape = ops.broadcast_shapes(a.shape, *(c.shape for c in choices))
    result = ops.broadcast_to(ops.strong(choices[-1]), shape)
    for k in range(count - 2, -1, -1):
        result = ops.where(np.equal(index, np.int64(k)), ops.strong(choices[k]), result)
    return ops.broadcast_to(result, shape)


def ediff1d(ary, to_end=None, to_begin=None):
    """np.ediff1d: the differences of neighbours of `ary` flattened, in ary's dtype, with
    `to_begin` and `to_end` (flattened, castable to ary's dtype by 'same_kind', else DTypeError)
    joined at the ends."""
    ary = ops.reshape(as_array(ary), (-1,))
    parts = [ops.cast(np.subtract(ary[1:], ary[:-1]), ary.dtype)]
    for end, extra in ((0, to_begin), (1, to_end)):
        if extra is None:
            continue
        extra = as_array(extra)
        if not np.can_cast(extra.dtype, ary.dtype, "same_kind"):
            name = "to_begin" if end == 0 else "to_end"
            raise DTypeError(
                f"dtype of `{name}` must be compatible with input `ary` under the `same_kind` rule.", user_location()
            )
        parts.insert(len(parts) * end, ops.cast(ops.reshape(extra, (-1,)), ary.dtype))
    return ops.concatenate(parts, 0)


def vander(x, N=None, increasing=False):
    """np.vander: the (len(x), N) matrix of powers x**0 .. x**(N-1) (decreasing unless
    `increasing`), built as numpy does by a running product, in the dtype numpy promotes x with
    int to (float32 -> float64, bool and small ints -> int64)."""
    x = as_array(x)
    if x.ndim != 1:
        raise ShapeError("x must be a one-dimensional array or sequence.", user_location())
    n = len(x) if N is None else shapes.static_int(_constant(N, "np.vander's N"), "np.vander's N")
    if n < 0:
        raise ShapeError(f"negative dimensions are not allowed, got N={n}", user_location())
    dtype = np.promote_types(x.dtype, np.int_)
    columns = [ops.full_like(x, 1, dtype=dtype, shape=(x.shape[0], 1))][:n]
    if n > 1:
        spread = ops.broadcast_to(ops.reshape(ops.cast(x, dtype), (-1, 1)), (x.shape[0], n - 1))
        columns.append(np.cumprod(spread, axis=1))
    if not columns:
        return ops.full_like(x, 0, dtype=dtype, shape=(x.shape[0], 0))
    powers = ops.concatenate(columns, 1)
    return powers if increasing else powers[:, ::-1]


# -- pad's ramp and statistic modes ----------------------------------------------------------------
def _rounded(stat: Tracer, dtype) -> Tracer:
    """numpy's _round_if_needed: a statistic rounded half to even before it is cast to an integer dtype."""
    return ops.cast(np.round(stat) if np.dtype(dtype).kind in "iu" and stat.dtype.kind == "f" else stat, dtype)


_STATISTICS = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}


def _stat_lengths(stat_length, ndim: int) -> list:
    if stat_length is None:
        return [(None, None)] * ndim
    return shapes.pad_pairs(_constant(stat_length, "np.pad's stat_length"), ndim, True, "np.pad's stat_length")


def _pad_statistic(x: Tracer, widths, lengths, mode: str) -> Tracer:
    """Each axis padded by a statistic of the (stat_length) elements nearest each edge, axis by
    axis on the array the previous axes left, as numpy's _get_stats."""
    statistic = _STATISTICS[mode]
    for axis, ((before, after), (left, right)) in enumerate(zip(widths, lengths)):
        n = x.shape[axis]
        if not (before or after):
            continue
        left = n if left is None or left > n else left
        right = n if right is None or right > n else right
        if (left == 0 or right == 0) and mode in ("maximum", "minimum"):
            raise ShapeError("stat_length of 0 yields no value for padding", user_location())
        low = _rounded(statistic(along(x, axis, slice(0, left)), axis=axis, keepdims=True), x.dtype)
        high = low
        if not left == right == n:
            high = _rounded(statistic(along(x, axis, slice(n - right, n)), axis=axis, keepdims=True), x.dtype)
        spread = x.shape[:axis] + (before,) + x.shape[axis + 1 :], x.shape[:axis] + (after,) + x.shape[axis + 1 :]
        x = ops.concatenate([ops.broadcast_to(low, spread[0]), x, ops.broadcast_to(high, spread[1])], axis)
    return x


def _pad_ramp(x: Tracer, widths, end_values) -> Tracer:
    """Each axis padded by linspace(end value, edge, width, endpoint=False) (reversed after), in
    x's dtype, as numpy's _get_linear_ramps."""
    for axis, ((before, after), (first, last)) in enumerate(zip(widths, end_values)):
        n = x.shape[axis]
        if not (before or after):
            continue
        low = ops.squeeze(along(x, axis, slice(0, 1)), axis)
        high = ops.squeeze(along(x, axis, slice(n - 1, n)), axis)
        ramps = [
            joining.linspace(first, low, before, endpoint=False, dtype=x.dtype, axis=axis),
            along(
                joining.linspace(last, high, after, endpoint=False, dtype=x.dtype, axis=axis),
                axis,
                slice(None, None, -1),
            ),
        ]
        x = ops.concatenate([ramps[0], x, ramps[1]], axis)
    return x


_PAD_EXTRA_KEYWORDS = {
    "linear_ramp": ("end_values",),
    "maximum": ("stat_length",),
    "minimum": ("stat_length",),
    "mean": ("stat_length",),
    "median": ("stat_length",),
}


def pad(array, pad_width, mode="constant", **kwargs):
    """np.pad: the copying modes of numpy_shapes.pad, plus 'linear_ramp' (end_values) and the
    statistic modes 'maximum', 'minimum', 'mean', 'median' (stat_length; a mean or median is
    rounded half to even for an integer array, as numpy does)."""
    if callable(mode) or mode not in _PAD_EXTRA_KEYWORDS:
        return shapes.pad(array, pad_width, mode, **kwargs)
    x = as_array(array)
    extra = sorted(set(kwargs) - set(_PAD_EXTRA_KEYWORDS[mode]))
    if extra:
        raise ArgumentError(f"np.pad: keyword(s) {', '.join(extra)} do not apply to mode {mode!r}", user_location())
    widths = shapes.pad_pairs(_constant(pad_width, "np.pad's pad_width"), x.ndim, True, "np.pad's pad_width")
    for axis, pair in enumerate(widths):
        if x.shape[axis] == 0 and any(pair):
            raise ShapeError(
                f"np.pad: can't extend empty axis {axis} using modes other than 'constant' or 'empty'",
                user_location(),
            )
    if x.size == 0:
        return shapes.pad(x, widths, "constant")
    if mode == "linear_ramp":
        end_values = shapes.pad_pairs(kwargs.get("end_values", 0), x.ndim, False, "np.pad's end_values")
        return _pad_ramp(x, widths, end_values)
    return _pad_statistic(x, widths, _stat_lengths(kwargs.get("stat_length"), x.ndim), mode)


# -- apply_along_axis, apply_over_axes ------------------------------------------------------------
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """np.apply_along_axis: func1d called (a Python loop while tracing) on each 1-d slice of
    `arr` along `axis`; the results (scalars or arrays of the first result's shape, cast to its
    dtype) replace that axis, as numpy stacks them. An empty loop is a ShapeError, as numpy's."""
    arr = as_array(arr)
    axis = ops.normalize_axis(_constant(axis, "np.apply_along_axis's axis"), arr.ndim)
    lines = ops.moveaxis(arr, axis, -1)
    outer = lines.shape[:-1]
    if math.prod(outer) == 0:
        raise ShapeError("Cannot apply_along_axis when any iteration dimensions are 0", user_location())
    results = []
    for index in np.ndindex(*outer):
        result = as_array(func1d(lines[index], *args, **kwargs))
        if results:
            result = ops.broadcast_to(ops.cast(result, results[0].dtype), results[0].shape)
        results.append(result)
    rank = results[0].ndim
    buffer = ops.reshape(ops.stack(results, 0), outer + results[0].shape)
    dims = list(range(buffer.ndim))
    permutation = dims[:axis] + dims[buffer.ndim - rank :] + dims[axis : buffer.ndim - rank]
    return ops.transpose(buffer, permutation)


def apply_over_axes(func, a, axes):
    """np.apply_over_axes: a = func(a, axis) for each axis in turn, a result one rank lower
    given its axis back (expand_dims); any other rank is a ShapeError, as numpy's."""
    value = as_array(a)
    axes = _constant(axes, "np.apply_over_axes's axes")
    for axis in (axes,) if np.ndim(axes) == 0 else axes:
        axis = int(axis) + value.ndim if int(axis) < 0 else int(axis)
        result = as_array(func(value, axis))
        if result.ndim != value.ndim:
            result = ops.expand_dims(result, axis)
            if result.ndim != value.ndim:
                raise ShapeError("function is not returning an array of the correct shape", user_location())
        value = result
    return value


FUNCTION_RULES.update(
    {
        np.append: append,
        np.insert: insert,
        np.delete: delete,
        np.resize: resize,
        np.block: block,
        np.put_along_axis: put_along_axis,
        np.fill_diagonal: fill_diagonal,
        np.place: place,
        np.choose: choose,
        np.ediff1d: ediff1d,
        np.vander: vander,
        np.pad: pad,
        np.apply_along_axis: apply_along_axis,
        np.apply_over_axes: apply_over_axes,
    }
)
