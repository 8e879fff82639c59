"""Indexing with arrays and masks (gathers) and item assignment (scatters), composed from
kiln's tensor ops; numpy's indexing routines built on them (np.take, np.put, ufunc.at, ...)
are in numpy_indexing_routines.

A gather by a traced index (or a long constant one) is a ``kiln.gather`` along the last
axis of the array with the indexed axes moved last and merged (views: no data moves); it
lowers to one loop over the result that loads through the index (passes/lower_indexed.py),
O(len(idx)) per remaining element, NaN, infinities and -0.0 kept bit for bit. Its gradient
is a ``kiln.scatter_at`` that adds the cotangents (a repeated index gets the sum of its
gradients), O(len(idx)) again. A constant index that is a slice in disguise (0, 2, 4, ...;
a repeated one broadcasts) is that slice, and a short constant index is a concatenation of
one-element slices.

Assignment ``x[k] = v`` rebinds the Tracer ``x`` to a new value (``Tracer.assign``): a
``kiln.insert_slice`` for basic indices, a ``kiln.scatter_at`` of kind store for index
arrays (the updates stored one by one in C order, so the last of repeated indices wins,
numpy's practical rule; O(len(idx)) per remaining element, never O(len(idx) * axis)), and a
select for a traced mask (O(x.size), which a mask costs anyway). ``x[k] += v`` is numpy's
gather, add and assign, so a repeated index is added once; ``np.add.at`` accumulates every
repeat. Aliasing follows numpy's views (frontend/views.py), and the caller's arrays are never
written.

Out-of-range indices raise as numpy's do: a constant one raises OutOfBoundsError while
tracing; a traced one (an argument, or computed in the function) passes through a
``kiln.check_index`` at the user's line, and the compiled function raises OutOfBoundsError
("index is out of bounds for axis 0 with size 5", at that line) when it runs with a value
outside [-n, n). The check is always on: one comparison per index element. Negative indices then count from the end. This holds for
``x[idx]``, ``x[idx] = v``, ``x[idx] += v``, ``np.take`` (mode='raise'; 'wrap' and 'clip'
bring the index into the axis first), ``np.take_along_axis``, ``np.put`` and ``ufunc.at``.
Native code computes only what the results need: the check of a gather that no result uses
(removed as dead code), or of one with no elements, does not run there.

Example (x float32 (5, 3), i int64 (4,) traced)::

    y = x.copy()        # a new array: x stays as it is
    y[i] += 1.0         # once per distinct index, as numpy's buffered update
    np.add.at(y, i, 1)  # once per occurrence
    row = y[0]          # a view: row[:] = 0 would write y
    return y[i, ::-1]   # (4, 3): a gather, then a slice
"""

from __future__ import annotations

import math

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.errors import IntegerOverflowError, InvalidValueError, OutOfBoundsError, ShapeError, UnsupportedError
from kiln.frontend import python_ints, views
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import VIEW_FUNCTIONS, write_out
from kiln.frontend.numpy_keys import (
    MASK_ALTERNATIVE,
    Advanced,
    Key,
    broadcast_indices,
    entry,
    entry_free,
    parse_key,
    slice_indices,
)
from kiln.frontend.tracing import NUMPY_PROTOCOL, Tracer, current_context, user_location

# Constant indices up to this long gather by concatenating one-element slices.
_SLICED_GATHER_LIMIT = 16


# -- basic indexing ---------------------------------------------------------------------------------
def _basic_plan(x: Tracer, entries):
    """kiln.slice's start, stop and step for the basic entries (no arrays), the slice's
    shape, and the result's (ints drop their axis, None adds one)."""
    start, stop, step, sliced, shape = [], [], [], [], []
    dim = 0
    for k in entries:
        if k is None:
            shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            a, b, s = slice_indices(k, size)
            n = len(range(a, b, s))
            start.append(a), stop.append(b), step.append(s), sliced.append(n), shape.append(n)
        else:
            start.append(int(k)), stop.append(int(k) + 1), step.append(1), sliced.append(1)
        dim += 1
    return (tuple(start), tuple(stop), tuple(step)), tuple(sliced), tuple(shape)


def _slice(x: Tracer, where) -> Tracer:
    start, stop, step = where
    if (start, stop, step) == ((0,) * x.ndim, x.shape, (1,) * x.ndim):
        return x
    attributes = {"start": start, "stop": stop, "step": step}
    return current_context().emit(T.SliceOp, [x], attributes, weak=x.weak)


def _insert(x: Tracer, where, source: Tracer) -> Tracer:
    """`x` with its strided slice `where` replaced by `source` (of the slice's shape)."""
    if where == ((0,) * x.ndim, x.shape, (1,) * x.ndim) or source.size == 0 and x.size == 0:
        return ops.reshape(source, x.shape) if source.shape != x.shape else source
    if source.size == 0:
        return x
    attributes = {"start": where[0], "stop": where[1], "step": where[2]}
    return current_context().emit(T.InsertSliceOp, [source, x], attributes)


def basic_getitem(x: Tracer, entries) -> Tracer:
    """x[entries] for basic entries: a view of x, as numpy's."""
    where, _, shape = _basic_plan(x, entries)
    result = ops.reshape(_slice(x, where), shape)
    if result is x:
        return x
    result.view_of = None  # a view of x, not of the slice it is reshaped from
    return views.mark(
        result,
        x,
        lambda b: ops.reshape(_slice(b, where), shape),
        lambda b, v: _insert(b, where, ops.reshape(v, _basic_plan(b, entries)[1])),
        _view_strides(x, entries),
    )


def _view_strides(x: Tracer, entries) -> list:
    """The strides of x[entries] as a view (ints and traced scalars drop their axis)."""
    strides, dim, base = [], 0, views.strides_of(x)
    for k in entries:
        if k is None:
            strides.append(0)
            continue
        if isinstance(k, slice):
            strides.append(base[dim] * slice_indices(k, x.shape[dim])[2])
        dim += 1
    return strides


# -- gathers ----------------------------------------------------------------------------------------
def _progression(flat: np.ndarray):
    """(start, step) if the constant index counts up or down evenly (a slice in disguise), else None."""
    if flat.size == 0:
        return 0, 1
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if np.array_equal(flat, flat[0] + step * np.arange(flat.size)):
        return int(flat[0]), step
    return None


def fill_value(dtype):
    """The value that loses every max: where a gather's comparison fails."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.array(-np.inf, dtype)
    if dtype == np.bool_:
        return np.array(False)
    return np.array(np.iinfo(dtype).min, dtype)


def positions(n: int, ndim: int, axis: int) -> Tracer:
    """0, 1, ..., n-1 along `axis` of a rank-`ndim` array, size 1 elsewhere (as int64)."""
    shape = [1] * ndim
    shape[axis] = n
    return ops.lift(current_context(), np.arange(n, dtype=np.int64).reshape(shape), np.int64)


def gather_last(src: Tracer, index) -> Tracer:
    """src[..., index]: `index` (a constant int64 array or a traced integer array, each value
    in 0..n-1) picks along the last axis of `src` (shape R + (n,)); the result has shape
    R + index.shape. Cost: O(index.size) per element of R for a traced (or long constant)
    index, a kiln.gather; a constant one is a slice, a broadcast, or (short) a
    concatenation of slices."""
    lead, n = src.shape[:-1], src.shape[-1]
    if n == 0 and np.size(index):
        raise OutOfBoundsError("cannot index into an axis of size 0", user_location())
    if n == 0 or np.size(index) == 0:
        fill = ops.lift(current_context(), fill_value(src.dtype), src.dtype)
        return ops.broadcast_to(fill, lead + np.shape(index))
    if not isinstance(index, Tracer):
        flat = index.reshape(-1)
        found = _progression(flat)
        if found is not None:
            first, step = found
            if step == 0:
                picked = ops.broadcast_to(_slice(src, _last_axis(src, first, first + 1, 1)), lead + (flat.size,))
            else:
                stop = first + step * flat.size
                picked = _slice(src, _last_axis(src, first, stop if stop >= 0 else None, step))
            return ops.reshape(picked, lead + index.shape)
        if flat.size <= _SLICED_GATHER_LIMIT:
            pieces = [_slice(src, _last_axis(src, int(i), int(i) + 1, 1)) for i in flat]
            return ops.reshape(ops.concatenate(pieces, -1), lead + index.shape)
        index = ops.lift(current_context(), index, np.int64)
    return current_context().emit(TI.GatherOp, [src, ops.cast(index, np.int64)], {})


def _last_axis(x: Tracer, start, stop, step):
    """kiln.slice bounds taking start:stop:step of the last axis of `x`, all of the others."""
    a, b, s = slice(start, stop, step).indices(x.shape[-1])
    return (0,) * (x.ndim - 1) + (a,), x.shape[:-1] + (b,), (1,) * (x.ndim - 1) + (s,)


def checked_index(index: Tracer, size: int, axis: int) -> Tracer:
    """A traced index checked against its axis (axis `axis` of the array indexed, of `size`
    elements) when the function runs, as numpy checks it: kiln.check_index raises
    OutOfBoundsError for a value outside [-size, size) (for any value, while tracing, when
    the axis is empty). Negative values then count from the end, so the result (int64, of
    the index's shape) lies in 0..size-1."""
    if size == 0 and index.size:
        raise OutOfBoundsError(f"index is out of bounds for axis {axis} with size 0", user_location())
    index = ops.cast(index, np.int64) if index.dtype != np.int64 else index
    index = current_context().emit(T.CheckIndexOp, [index], {"size": size, "axis": axis})
    return np.where(np.less(index, 0), np.add(index, np.int64(size)), index)


def _flat_index(arrays, sizes, axes):
    """The index into the advanced axes (`axes` of the array indexed, of `sizes` elements)
    flattened together (C order), broadcast to one shape; constant if every array is."""
    shape = broadcast_indices([np.shape(a) for a in arrays])
    if all(not isinstance(a, Tracer) for a in arrays):
        flat = np.zeros(shape, np.int64)
        for a, n in zip(arrays, sizes):
            flat = flat * n + np.broadcast_to(a, shape)
        return flat
    flat = None
    for a, n, axis in zip(arrays, sizes, axes):
        part = checked_index(a, n, axis) if isinstance(a, Tracer) else np.broadcast_to(a, shape)
        flat = part if flat is None else np.add(np.multiply(flat, np.int64(n)), part)
    return ops.strong(ops.broadcast_to(ops.lift(current_context(), flat, np.int64), shape))


def advanced_parts(x: Tracer, key: Key):
    """For a key with index arrays: the basic part's result `region` (one axis per entry), the
    advanced axes moved last and merged (`merged`, shape R + (N,)), the flat index into them
    (shape B), and where numpy puts B among R in the result."""
    basic = [slice(None) if isinstance(e, Advanced) else e for e in key.entries]
    where, _, _ = _basic_plan(x, basic)
    region = ops.reshape(_slice(x, where), _basic_plan(x, basic)[2])
    advanced = key.advanced
    rest = [k for k in range(region.ndim) if k not in advanced]
    merged = ops.transpose(region, rest + advanced)
    sizes = [region.shape[k] for k in advanced]
    merged = ops.reshape(merged, merged.shape[: len(rest)] + (math.prod(sizes),))
    # an entry's axis in x, as numpy's messages count it: the entries before it, less the new axes (None)
    axes = [sum(e is not None for e in key.entries[:k]) for k in advanced]
    flat = _flat_index([key.entries[k].index for k in advanced], sizes, axes)
    adjacent = advanced == list(range(advanced[0], advanced[0] + len(advanced)))
    place = advanced[0] if adjacent else 0  # numpy: in place if adjacent, else first
    return where, region, merged, flat, place


def _indexed_shape(x: Tracer, key: Key) -> tuple:
    """The shape of x[key] for a key with index arrays, computed without indexing."""
    region = _basic_plan(x, [slice(None) if isinstance(e, Advanced) else e for e in key.entries])[2]
    advanced = key.advanced
    rest = tuple(d for k, d in enumerate(region) if k not in advanced)
    broadcast = broadcast_indices([np.shape(key.entries[k].index) for k in advanced])
    adjacent = advanced == list(range(advanced[0], advanced[0] + len(advanced)))
    place = advanced[0] if adjacent else 0
    return tuple((rest + broadcast)[a] for a in placed_axes(len(rest), len(broadcast), place))


def placed_axes(n_rest: int, n_broadcast: int, place: int) -> list:
    """The transpose taking R + B (gathered) to numpy's order of the result's axes."""
    rest, broadcast = list(range(n_rest)), list(range(n_rest, n_rest + n_broadcast))
    return rest[:place] + broadcast + rest[place:]


def getitem(x: Tracer, key):
    """x[key] with numpy's rules: basic indices give a view; integer arrays (numpy arrays,
    lists, traced arrays) broadcast together and gather, their axes in place when the array
    indices are adjacent in the key and first otherwise; a constant boolean mask is its
    nonzero positions. A traced mask's result has a data-dependent size: UnsupportedError.
    An element picked by integers alone (x[1, 2], no '...') is a numpy scalar: a copy."""
    if _split_masked(x, key) is not None:  # x[mask, 0] is data-sized, but x[mask, 0] += v is not
        return MaskedSelection(x, key, user_location())
    original, key = key, parse_key(x, key)
    if key.mask is not None:
        return MaskedSelection(x, original, user_location())
    element = not any(k is Ellipsis for k in (original if isinstance(original, tuple) else (original,)))
    if not key.advanced:
        result = basic_getitem(x, key.entries)
        return views.fresh(result) if element and result.ndim == 0 and result is not x else result
    _, region, merged, flat, place = advanced_parts(x, key)
    if len(key.advanced) == 1 and isinstance(flat, Tracer) and region.shape[place]:
        # one index array: np.take along its axis, the result in numpy's order as it is made
        result = views.fresh(current_context().emit(TI.GatherOp, [region, flat], {"axis": place}))
    else:
        gathered = gather_last(merged, flat)
        n_rest = merged.ndim - 1
        result = views.fresh(ops.transpose(gathered, placed_axes(n_rest, gathered.ndim - n_rest, place)))
    scalars = [key.entries[k].index for k in key.advanced]
    if all(isinstance(i, Tracer) and i.ndim == 0 for i in scalars) and not (element and result.ndim == 0):
        # numpy reads a scalar index (np.int64, a Python int) as an int: the result is a view
        return views.mark(
            result,
            x,
            lambda b: getitem(b, original),
            lambda b, v: updated(b, original, v),
            _view_strides(x, key.entries),
        )
    return result


# -- assignment -------------------------------------------------------------------------------------
def assigned_value(dtype, value, shape, what="x[...] = v") -> Tracer:
    """`value` as numpy writes it into an array of `dtype` at a place of `shape`: cast to the
    dtype (as numpy's assignment casts), leading axes of size 1 dropped, broadcast."""
    if isinstance(value, (list, tuple)):
        value = np.asarray(value) if entry_free(value) else np.stack(value)  # numpy makes an array of it
    value = ops.check_operand(value)
    dtype = np.dtype(dtype)
    ctx = current_context()
    if isinstance(value, float) and dtype.kind in "iu" and not np.isfinite(value):
        raise InvalidValueError(f"cannot convert float {value} to integer", user_location())
    if type(value) is int and dtype.kind in "iu" and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
        raise IntegerOverflowError(f"Python integer {value} out of bounds for {dtype}", user_location())
    if isinstance(value, Tracer):
        python_ints.check_conversion(value, dtype)  # a Python int argument, as the constant above
        value = ops.cast(value, dtype)
    else:
        with np.errstate(all="ignore"):  # numpy's assignment casts unsafely, without a warning
            value = ops.lift(ctx, np.asarray(value).astype(dtype), dtype)
    while value.ndim > len(shape) and value.shape[0] == 1:
        value = ops.reshape(value, value.shape[1:])
    if value.ndim > len(shape) or ops.broadcast_shapes(value.shape, shape) != tuple(shape):
        raise ShapeError(
            f"{what}: could not broadcast input array from shape {value.shape} into shape {tuple(shape)}",
            user_location(),
        )
    return ops.broadcast_to(value, tuple(shape))


def _split_masked(x: Tracer, key):
    """(region key, mask key) when `key` mixes one traced mask with ints and slices (`x[mask, 0]`,
    `x[:, mask, 1:3]`, `x[0, mask]`) such that numpy's x[key] = v is x[region key][mask key] = v:
    the ints pick the region and the mask selects in it. numpy places the selected axis where
    the mask and the ints (all advanced indices) are when they are adjacent, and first when a
    slice separates them; the region puts it after the slices before the mask, so a key where
    the two differ is not split. None otherwise."""
    raw = [entry(k) for k in (key if isinstance(key, tuple) else (key,))]
    masks = [i for i, k in enumerate(raw) if isinstance(k, Tracer) and k.dtype == np.bool_ and k.ndim]
    if len(masks) != 1 or sum(k is Ellipsis for k in raw) > 1:
        return None
    at, mask = masks[0], raw[masks[0]]
    consumed = mask.ndim + sum(1 for i, k in enumerate(raw) if i != at and k is not Ellipsis)
    if consumed > x.ndim:
        return None
    if Ellipsis in [k for k in raw if not isinstance(k, Tracer)]:
        where = next(i for i, k in enumerate(raw) if k is Ellipsis)
        raw = raw[:where] + [slice(None)] * (x.ndim - consumed) + raw[where + 1 :]
        at = next(i for i, k in enumerate(raw) if k is mask)
    pre, post = raw[:at], raw[at + 1 :]
    if not all(isinstance(k, (slice, int, np.integer)) and not isinstance(k, bool) for k in pre + post):
        return None
    if all(k == slice(None) for k in pre + post):
        return None  # a mask with whole slices is the plain masked write
    advanced = [i for i, k in enumerate(raw) if not isinstance(k, slice)]
    adjacent = all(not isinstance(k, slice) for k in raw[advanced[0] : advanced[-1] + 1])
    slices_before = sum(isinstance(k, slice) for k in pre)
    if not adjacent and slices_before:
        return None
    return tuple(pre) + (slice(None),) * mask.ndim + tuple(post), (slice(None),) * slices_before + (mask,)


def updated(x: Tracer, key, value) -> Tracer:
    """x with x[key] = value, as a new value (numpy's assignment, functionally)."""
    split = _split_masked(x, key)
    if split is not None:
        region_key, mask_key = split
        region = getitem(x, region_key)
        if isinstance(value, MaskedSelection):  # x[mask, 0] += v: the updates read from x itself
            value = value.moved_to(region, x, key)
        return updated(x, region_key, updated(region, mask_key, value))
    if (
        isinstance(key, np.ndarray)
        and key.dtype == np.bool_
        and key.ndim
        and key.shape == x.shape[: key.ndim]
        and np.size(value) == 1
    ):
        key = ops.lift(current_context(), key, np.bool_)  # a select, cheaper than a scatter
    try:
        key = parse_key(x, key)
    except OutOfBoundsError:
        unchecked = parse_key(x, key, check=False)
        if unchecked.advanced:  # numpy refuses a value that does not fit before an index out of range
            assigned_value(x.dtype, value, _indexed_shape(x, unchecked))
        raise
    if key.mask is not None:
        return _masked(x, key, value)
    if not key.advanced:
        where, sliced, shape = _basic_plan(x, key.entries)
        return _insert(x, where, ops.reshape(assigned_value(x.dtype, value, shape), sliced))
    where, region, merged, flat, place = advanced_parts(x, key)
    advanced = key.advanced
    if isinstance(flat, Tracer) and advanced == list(range(place, place + len(advanced))):
        return _store_along(x, where, region, key, flat, place, value)
    n_rest, b_shape = merged.ndim - 1, np.shape(flat)
    order = placed_axes(n_rest, len(b_shape), place)
    result_shape = tuple((merged.shape[:-1] + b_shape)[a] for a in order)
    source = assigned_value(x.dtype, value, result_shape)
    source = ops.transpose(source, [int(a) for a in np.argsort(order)])  # back to R + B
    source = ops.reshape(source, merged.shape[:-1] + (int(np.prod(b_shape, dtype=np.int64)),))
    written = _scatter_last(merged, np.reshape(flat, (-1,)) if not isinstance(flat, Tracer) else flat, source)
    return write_region(x, where, region, key, written)


def _store_along(x, where, region, key, index: Tracer, axis: int, value) -> Tracer:
    """x[key] = value for a key whose index arrays are adjacent, from `axis` of the basic
    part's result `region` on; `index` (traced, checked) is their flat position. One
    kiln.scatter_at of kind store through those axes, the region's others in place: no
    transpose, and no reshape, so the scatter writes the array itself."""
    count = len(key.advanced)
    shape = region.shape[:axis] + index.shape + region.shape[axis + count :]
    source = assigned_value(x.dtype, value, shape)
    if source.size == 0:
        return x
    attributes = {"kind": TI.STORE, "axis": axis, "axes": count} if count > 1 else {"kind": TI.STORE, "axis": axis}
    written = current_context().emit(
        TI.ScatterAtOp, [region, ops.cast(index, np.int64), ops.strong(source)], attributes
    )
    return _insert(x, where, ops.reshape(written, tuple(n for e, n in zip(key.entries, region.shape) if e is not None)))


def write_region(x, where, region, key, written):
    """x with the basic part of `key` (whose result was `region`) replaced by `written`, the
    region with its advanced axes moved last and merged."""
    advanced = key.advanced
    rest = [k for k in range(region.ndim) if k not in advanced]
    order = rest + advanced
    unmerged = ops.reshape(written, tuple(region.shape[k] for k in order))
    region = ops.transpose(unmerged, [int(a) for a in np.argsort(order)])
    sliced = tuple(n for e, n in zip(key.entries, region.shape) if e is not None)
    return _insert(x, where, ops.reshape(region, sliced))


def _scatter_last(dest: Tracer, flat, source: Tracer) -> Tracer:
    """dest (shape R + (N,)) with dest[..., flat[l]] = source[..., l] for each l in turn (the
    last write to a position wins, as numpy's assignment in practice); every flat index is
    in 0..N-1 (a traced one was checked). A constant index that counts evenly is a slice;
    any other is one kiln.scatter_at of kind store, a sequential loop over the updates:
    O(len(flat)) per element of R, plus the copy of dest."""
    if not isinstance(flat, Tracer):
        found = _progression(flat)
        if found is not None and (found[1] != 0 or flat.size == 1):
            first, step = found
            stop = first + step * flat.size
            return _insert(dest, _last_axis(dest, first, stop if stop >= 0 else None, step), source)
        flat = ops.lift(current_context(), flat, np.int64)
    if not flat.size:
        return dest
    index = ops.cast(ops.reshape(flat, (flat.size,)), np.int64)
    return current_context().emit(TI.ScatterAtOp, [dest, index, ops.strong(source)], {"kind": TI.STORE})


def _masked(x: Tracer, key: Key, value) -> Tracer:
    """x[mask] = value for a traced mask: a select. numpy writes the selected positions in
    order, so value must be the same for each (its shape broadcasts to the axes after the mask's)."""
    at, mask = key.mask
    if isinstance(value, MaskedSelection):
        return value.written(x, key)
    value = assigned_value(x.dtype, _per_selected(x, key, value), x.shape[at + mask.ndim :])
    return ops.where(_spread_mask(x, key), ops.reshape(value, (1,) * (at + mask.ndim) + value.shape), x)


def _per_selected(x: Tracer, key: Key, value):
    """`value` without leading axes of size 1, after checking that it is one value for every
    selected position (of the shape of the axes after the mask's)."""
    if isinstance(value, (bool, int, float)):  # a Python scalar stays weak, as numpy casts it
        return value
    at, mask = key.mask
    trailing = x.shape[at + mask.ndim :]
    shape = np.shape(value)
    while len(shape) > len(trailing) and shape[0] == 1:
        shape = shape[1:]
    last = shape[len(shape) - len(trailing) :] if trailing else ()
    if len(shape) > len(trailing) + 1 or np.broadcast_shapes(last, trailing) != trailing:
        raise ShapeError(
            f"shape mismatch: value array of shape {np.shape(value)} could not be broadcast to the selected "
            f"elements' shape (count,) + {trailing}",
            user_location(),
        )
    if len(shape) > len(trailing):
        raise UnsupportedError(
            f"x[mask] = v with a traced mask and v of shape {np.shape(value)}: which element of v goes where "
            "depends on the mask's values; use np.where(mask, v, x) with v shaped like x",
            user_location(),
        )
    return ops.reshape(value, shape) if isinstance(value, Tracer) else np.reshape(value, shape)


def _spread_mask(x: Tracer, key: Key) -> Tracer:
    at, mask = key.mask
    shape = (1,) * at + mask.shape + (1,) * (x.ndim - at - mask.ndim)
    return ops.broadcast_to(ops.reshape(ops.cast(mask, np.bool_), shape), x.shape)


class MaskedSelection(Tracer):
    """x[mask] for a traced mask. Its size depends on the mask's values, so it serves only as
    the target of in-place operators (x[mask] += v, which numpy runs as a read, an update and
    a write back), recorded here and written back as a select; any other use raises the
    UnsupportedError of x[mask] at its line."""

    __slots__ = ("base", "key", "updates", "loc")

    def __init__(self, base: Tracer, key, loc):
        super().__init__(base.value, base.ctx)
        self.base, self.key, self.updates, self.loc = base, key, [], loc

    def refuse(self):
        raise UnsupportedError(
            f"x[mask] with a traced boolean mask has a size that depends on the mask's values; {MASK_ALTERNATIVE}",
            self.loc,
        )

    @property
    def value(self):
        self.refuse()

    @property
    def shape(self):
        self.refuse()

    def moved_to(self, region: Tracer, x: Tracer, key) -> "MaskedSelection":
        """This selection of x[key] (a traced mask mixed with basic indices) as the selection of
        `region`, the part of x those basic indices pick, by the mask alone."""
        if x is not self.base or key is not self.key:
            self.refuse()
        moved = MaskedSelection(region, None, self.loc)
        moved.updates = self.updates
        return moved

    def written(self, x: Tracer, key: Key) -> Tracer:
        """x with the recorded updates applied where the mask is true (x is the array indexed)."""
        if x is not self.base:
            self.refuse()
        at, mask = key.mask
        current = x
        for ufunc, other in self.updates:
            other = _per_selected(x, key, other)
            other = ops.reshape(other, (1,) * (at + mask.ndim) + np.shape(other)) if np.ndim(other) else other
            current = in_place(ufunc, current.copy(), other)
        return ops.where(_spread_mask(x, key), current, x)


def setitem(x: Tracer, key, value) -> None:
    """Tracer.__setitem__: x rebinds to x with x[key] = value (numpy's in-place write, done as
    a functional update; a view writes its base)."""
    if x.weak:
        raise UnsupportedError("a Python scalar argument cannot be assigned into", user_location())
    views.assign(x, updated(x, key, value))


def in_place(ufunc, x, other):
    """x op= other (x += 1, x[i] *= 2): numpy's ufunc with out=x. The result must keep x's shape
    and cast to its dtype by numpy's 'same_kind' rule; x is then written in place."""
    if isinstance(x, MaskedSelection):
        x.updates.append((ufunc, other))
        return x
    result = NUMPY_PROTOCOL["ufunc"](ufunc, "__call__", (x, other), {}, operator=True)
    if not isinstance(x, Tracer) or x.weak or x.ndim == 0 and x.view_of is None:
        # a Python or numpy scalar (what reductions and x[i, j] give): immutable, so `s += 1`
        # rebinds the name, and another name for the old scalar keeps its value
        return result
    return write_out(ufunc, x, result)


NUMPY_PROTOCOL.update(getitem=getitem, setitem=setitem, in_place=in_place)

# numpy's other functions that return views: composed of kiln's views (slices, reshapes,
# transposes, broadcasts), so writes through their results reach the argument.
VIEW_FUNCTIONS.update(
    {
        np.flip,
        np.fliplr,
        np.flipud,
        np.rot90,
        np.atleast_1d,
        np.atleast_2d,
        np.atleast_3d,
        np.split,
        np.array_split,
        np.hsplit,
        np.vsplit,
        np.dsplit,
        np.broadcast_arrays,
        np.permute_dims,
    }
)
