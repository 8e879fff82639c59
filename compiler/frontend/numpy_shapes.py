"""numpy's shape and layout functions and array creation, composed from kiln's layout ops.

flip, roll, tile, pad, triu/tril, diff, the stacks, splits, meshgrid, linspace, ...:
each is slices, concatenations, reshapes, broadcasts and selects of the traced operands,
so it lowers, fuses and differentiates like any other traced code. Where numpy gathers
by a static index list (roll, pad's copying modes, repeat with counts), the list is cut
into runs of equal stride, each one strided slice or one broadcast.

Array creation with plain Python arguments (np.arange(5), np.eye(3)) never reaches kiln:
numpy returns an array, which the trace captures as a constant.
"""

from __future__ import annotations

import numpy as np

from kiln.errors import ArgumentError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.tracing import Tracer, current_context, user_location

_NO_VALUE = object()  # an argument not given (numpy's own sentinel is private)


# -- operands ----------------------------------------------------------------------------
def as_array(x) -> Tracer:
    """`x` as a strong traced array: Tracers as they are, anything numpy would make an array
    of (numbers, lists, numpy arrays) as a constant of numpy's dtype for it."""
    if isinstance(x, Tracer):
        return ops.strong(x)
    try:
        array = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"cannot make an array of {type(x).__name__}: {exc}", user_location()) from None
    return ops.lift(current_context(), ops.check_operand(array), array.dtype)


def static_int(value, what: str) -> int:
    """A Python int known while tracing (numpy's operator.index), or an error naming `what`."""
    if isinstance(value, Tracer):
        raise UnsupportedError(
            f"{what} must be known while tracing (it decides the result's shape), got a traced value; "
            "pass a Python int or make it a static argument (kiln.compile(fn, static_argnames=...))",
            user_location(),
        )
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{what} must be an integer, got {value!r}", user_location())
    return int(value)


def static_ints(values, what: str) -> tuple:
    """A sequence (or one) of static ints, as numpy's index sequences."""
    if isinstance(values, Tracer):
        static_int(values, what)
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "iu" and values.size:
            raise ArgumentError(f"{what} must be integers, got an array of {values.dtype}", user_location())
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return tuple(static_int(v, what) for v in values)
    return (static_int(values, what),)


def along(x: Tracer, axis: int, key) -> Tracer:
    """x[..., key, ...] with `key` (a slice) on `axis`."""
    return x[(slice(None),) * axis + (key,)]


def take_static(x: Tracer, indices, axis: int) -> Tracer:
    """x gathered along `axis` at static indices (all in range): each run of indices with one
    stride is one strided slice, and each run of one index repeated is one broadcast."""
    indices = [int(i) for i in indices]
    pieces, start = [], 0
    while start < len(indices):
        stop = start + 1
        stride = indices[stop] - indices[start] if stop < len(indices) else 1
        while stop < len(indices) and indices[stop] - indices[stop - 1] == stride:
            stop += 1
        first, count = indices[start], stop - start
        if stride == 0:
            one = along(x, axis, slice(first, first + 1))
            pieces.append(ops.broadcast_to(one, one.shape[:axis] + (count,) + one.shape[axis + 1 :]))
        else:
            end = first + stride * count
            pieces.append(along(x, axis, slice(first, end if end >= 0 else None, stride)))
        start = stop
    if not pieces:
        return along(x, axis, slice(0, 0))
    return ops.concatenate(pieces, axis)


# -- flips, rolls, tiles, repeats ---------------------------------------------------------------
def flip(m, axis=None):
    m = as_array(m)
    axes = ops.normalize_axes(axis, m.ndim)
    return m[tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(m.ndim))]


def fliplr(m):
    m = as_array(m)
    if m.ndim < 2:
        raise ShapeError(f"np.fliplr needs an array of rank 2 or more, got shape {m.shape}", user_location())
    return m[:, ::-1]


def flipud(m):
    m = as_array(m)
    if m.ndim < 1:
        raise ShapeError("np.flipud needs an array of rank 1 or more, got a 0-d array", user_location())
    return m[::-1]


def rot90(m, k=1, axes=(0, 1)):
    m = as_array(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ShapeError(f"np.rot90: len(axes) must be 2, got {axes!r}", user_location())
    first, second = (ops.normalize_axis(a, m.ndim) for a in axes)
    if first == second:
        raise ShapeError(f"np.rot90: the axes must differ, got {axes!r}", user_location())
    k = static_int(k, "np.rot90's k") % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, first), second)
    perm = list(range(m.ndim))
    perm[first], perm[second] = perm[second], perm[first]
    return ops.transpose(flip(m, second), perm) if k == 1 else flip(ops.transpose(m, perm), second)


def roll(a, shift, axis=None):
    a = as_array(a)
    if axis is None:
        return ops.reshape(roll(ops.reshape(a, (-1,)), shift, 0), a.shape)
    shifts, axes = static_ints(shift, "np.roll's shift"), static_ints(axis, "np.roll's axis")
    try:
        pairs = np.broadcast(np.array(shifts), np.array(axes))
    except ValueError:
        raise ShapeError(f"np.roll: shift {shift!r} and axis {axis!r} do not broadcast", user_location()) from None
    total = {}
    for s, ax in pairs:
        ax = ops.normalize_axis(int(ax), a.ndim)
        total[ax] = total.get(ax, 0) + int(s)
    for ax, s in total.items():
        n = a.shape[ax]
        if n and s % n:
            a = ops.concatenate([along(a, ax, slice(n - s % n, n)), along(a, ax, slice(0, n - s % n))], ax)
    return a


def tile(A, reps):
    A = as_array(A)
    reps = static_ints(reps, "np.tile's reps")
    if any(r < 0 for r in reps):
        raise ShapeError(f"np.tile: negative repetitions {reps}", user_location())
    ndim = max(len(reps), A.ndim)
    shape, reps = (1,) * (ndim - A.ndim) + A.shape, (1,) * (ndim - len(reps)) + reps
    # A as (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then merged pairwise
    spaced = ops.reshape(A, tuple(d for s in shape for d in (1, s)))
    spread = ops.broadcast_to(spaced, tuple(d for r, s in zip(reps, shape) for d in (r, s)))
    return ops.reshape(spread, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a, repeats, axis=None):
    """np.repeat; `repeats` one count or one per element along the axis, known while tracing
    (the counts decide the result's shape). A run of elements with one count is one
    broadcast along a new axis, merged."""
    if isinstance(repeats, Tracer):
        raise UnsupportedError(
            "np.repeat with traced counts has a result size known only at run time; "
            "pass the counts as a Python int, list or numpy array",
            user_location(),
        )
    counts = np.asarray(repeats)
    if counts.size and counts.dtype.kind not in "iub":
        raise ArgumentError(f"np.repeat: the counts must be integers, got {counts.dtype}", user_location())
    if (counts < 0).any():
        raise ShapeError(f"np.repeat: the counts may not be negative, got {repeats!r}", user_location())
    if counts.ndim > 1:
        raise ShapeError(
            f"np.repeat: the counts must be one number or a 1-d list, got shape {counts.shape}", user_location()
        )
    a = as_array(a)
    if counts.size == 1:
        return ops.repeat(a, int(counts.reshape(-1)[0]), axis)
    if axis is None:
        a, axis = ops.reshape(a, (-1,)), 0
    axis = ops.normalize_axis(axis, a.ndim)
    n = a.shape[axis]
    if counts.size != n:
        raise ShapeError(
            f"np.repeat: {counts.size} counts for an axis of length {n} (they must match, or be one count)",
            user_location(),
        )
    pieces, start = [], 0
    while start < n:
        stop = start + 1
        while stop < n and counts[stop] == counts[start]:
            stop += 1
        count = int(counts[start])
        if count:
            run = ops.expand_dims(along(a, axis, slice(start, stop)), axis + 1)
            run = ops.broadcast_to(run, run.shape[: axis + 1] + (count,) + run.shape[axis + 2 :])
            pieces.append(ops.reshape(run, a.shape[:axis] + ((stop - start) * count,) + a.shape[axis + 1 :]))
        start = stop
    return ops.concatenate(pieces, axis) if pieces else along(a, axis, slice(0, 0))


# -- pad -------------------------------------------------------------------------------------
def pad_pairs(x, ndim: int, as_index: bool, what: str) -> list:
    """numpy's pad arguments as one (before, after) pair per axis: one value, one pair, or a
    pair per axis."""
    if isinstance(x, Tracer):
        if as_index:
            static_int(x, what)
        if x.size != 1:
            raise UnsupportedError(f"{what}: a traced value must be one number", user_location())
        return [(ops.reshape(x, ()),) * 2] * ndim
    x = np.array(x)
    if as_index:
        if x.dtype.kind not in "iufb":
            raise ArgumentError(f"{what} must be integers, got {x.dtype}", user_location())
        x = np.round(x).astype(np.intp)
    if x.ndim < 3 and x.size == 1:
        pairs = [(x.reshape(-1)[0],) * 2] * ndim
    elif x.ndim < 3 and x.size == 2 and x.shape != (2, 1):
        pairs = [tuple(x.reshape(-1))] * ndim
    else:
        try:
            pairs = [tuple(p) for p in np.broadcast_to(x, (ndim, 2))]
        except ValueError:
            raise ShapeError(
                f"{what} of shape {x.shape} does not give a (before, after) pair for each of {ndim} axes",
                user_location(),
            ) from None
    if as_index and any(v < 0 for p in pairs for v in p):
        raise ShapeError(f"{what} can't contain negative values, got {x.tolist()}", user_location())
    return [tuple(int(v) for v in p) for p in pairs] if as_index else pairs


def _fill(x: Tracer, axis: int, width: int, value) -> Tracer:
    """`width` elements of `value` (cast to x's dtype as numpy assigns it) along `axis`."""
    shape = x.shape[:axis] + (width,) + x.shape[axis + 1 :]
    if isinstance(value, Tracer):
        return ops.broadcast_to(ops.cast(value, x.dtype), shape)
    return ops.broadcast_to(ops.lift(current_context(), np.array(value).astype(x.dtype), x.dtype), shape)


def _reflect_odd(x: Tracer, axis: int, before: int, after: int, include_edge: bool) -> Tracer:
    """pad's reflect_type='odd' as numpy computes it: chunks reflected about the current edge
    (2 * edge - chunk), repeated outwards while the pad is wider than the array, each chunk a
    whole number of the original's periods (numpy's _set_reflect_both)."""
    n, offset = x.shape[axis], int(include_edge)
    reverse = (slice(None),) * axis + (slice(None, None, -1),)
    while before > 0 or after > 0:
        length = x.shape[axis]
        usable = length // n * n if include_edge else (length - 1) // (n - 1) * (n - 1)
        if before > 0:
            chunk = min(usable, before)
            mirrored = along(x, axis, slice(1 - offset, chunk + 1 - offset))[reverse]
            x = ops.concatenate([ops.cast(2 * along(x, axis, slice(0, 1)) - mirrored, x.dtype), x], axis)
            before -= chunk
        if after > 0:
            chunk, length = min(usable, after), x.shape[axis]
            mirrored = along(x, axis, slice(length - 1 + offset - chunk, length - 1 + offset))[reverse]
            edge = along(x, axis, slice(length - 1, length))
            x = ops.concatenate([x, ops.cast(2 * edge - mirrored, x.dtype)], axis)
            after -= chunk
    return x


_PAD_KEYWORDS = {
    "constant": ("constant_values",),
    "edge": (),
    "wrap": (),
    "reflect": ("reflect_type",),
    "symmetric": ("reflect_type",),
    "empty": (),
}


def pad(array, pad_width, mode="constant", **kwargs):
    """np.pad's copying modes constant, edge, reflect, symmetric, wrap and empty (as zeros): axis
    by axis, each padding the array as the previous axes left it, as numpy does. np.pad itself
    is numpy_editing.pad, which adds the ramp and statistic modes."""
    x = as_array(array)
    if callable(mode):
        raise UnsupportedError("np.pad with a function as the mode is not supported", user_location())
    if mode not in _PAD_KEYWORDS:
        raise ArgumentError(f"np.pad: mode {mode!r} is not supported by numpy", user_location())
    extra = sorted(set(kwargs) - set(_PAD_KEYWORDS[mode]))
    if extra:
        raise ArgumentError(f"np.pad: keyword(s) {', '.join(extra)} do not apply to mode {mode!r}", user_location())
    widths = pad_pairs(pad_width, x.ndim, True, "np.pad's pad_width")
    method = kwargs.get("reflect_type", "even")
    if method not in ("even", "odd"):
        raise ArgumentError(f"np.pad: reflect_type must be 'even' or 'odd', got {method!r}", user_location())
    if mode in ("constant", "empty"):
        values = pad_pairs(kwargs.get("constant_values", 0), x.ndim, False, "np.pad's constant_values")
        for axis, ((before, after), (low, high)) in enumerate(zip(widths, values)):
            if before or after:
                x = ops.concatenate([_fill(x, axis, before, low), x, _fill(x, axis, after, high)], axis)
        return x
    for axis, (before, after) in enumerate(widths):
        n = x.shape[axis]
        if not (before or after):
            continue
        if n == 0:
            raise ShapeError(
                f"np.pad: can't extend empty axis {axis} using modes other than 'constant' or 'empty'",
                user_location(),
            )
        if method == "odd" and mode in ("reflect", "symmetric") and n > 1:
            x = _reflect_odd(x, axis, before, after, mode == "symmetric")
        else:
            # numpy pads a length-1 axis by its edge in the reflecting modes
            copy_mode = "edge" if mode in ("reflect", "symmetric") and n == 1 else mode
            x = take_static(x, np.pad(np.arange(n), (before, after), mode=copy_mode), axis)
    return x


# -- triangles, differences, diagonals -------------------------------------------------------
def _triangle(name, m, k, lower):
    m = as_array(m)
    if m.ndim == 0:
        raise ShapeError(f"np.{name} needs an array of rank 1 or more, got a 0-d array", user_location())
    k = static_int(k, f"np.{name}'s k")
    rows, cols = (m.shape[0],) * 2 if m.ndim == 1 else m.shape[-2:]
    keep = np.tri(rows, cols, k if lower else k - 1, dtype=bool)
    # numpy selects with where(mask, m, zeros(1, m.dtype)): a 1-d m is the row of every line
    return ops.where(keep if lower else ~keep, m, np.zeros(1, m.dtype))


def triu(m, k=0):
    return _triangle("triu", m, k, lower=False)


def tril(m, k=0):
    return _triangle("tril", m, k, lower=True)


def diff(a, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    """np.diff: `n` times the difference of neighbours along `axis` (not_equal for bools), after
    joining `prepend` and `append` (scalars broadcast to one slice of the axis)."""
    n = static_int(n, "np.diff's n")
    if n == 0:
        return as_array(a)
    if n < 0:
        raise ShapeError(f"np.diff: order must be non-negative but got {n}", user_location())
    a = as_array(a)
    if a.ndim == 0:
        raise ShapeError("np.diff requires input that is at least one dimensional", user_location())
    axis = ops.normalize_axis(axis, a.ndim)
    parts = [a]
    for end, value in ((0, prepend), (1, append)):
        if value is not _NO_VALUE:
            value = as_array(value)
            if value.ndim == 0:
                value = ops.broadcast_to(value, a.shape[:axis] + (1,) + a.shape[axis + 1 :])
            parts.insert(len(parts) * end, value)
    a = ops.concatenate(parts, axis)
    difference = np.not_equal if a.dtype == np.bool_ else np.subtract
    for _ in range(n):
        a = difference(along(a, axis, slice(1, None)), along(a, axis, slice(None, -1)))
    return a


def diag(v, k=0):
    """np.diag: the k-th diagonal of a 2-d array, or a square 2-d array with a 1-d `v` on its
    k-th diagonal and zeros elsewhere."""
    v = as_array(v)
    k = static_int(k, "np.diag's k")
    if v.ndim == 2:
        return ops.diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError(f"np.diag needs a 1-d or 2-d array, got shape {v.shape}", user_location())
    size = v.shape[0] + abs(k)
    # row r holds v[r] at column r + k (k >= 0); column c holds v[c] at row c - k (k < 0)
    padded = pad(v, (0, abs(k)))
    lined = ops.reshape(padded, (size, 1) if k >= 0 else (1, size))
    return ops.where(np.eye(size, size, k, dtype=bool), lined, np.zeros(1, v.dtype))


def diagflat(v, k=0):
    return diag(ops.reshape(as_array(v), (-1,)), k)


FUNCTION_RULES.update(
    {
        np.flip: flip,
        np.fliplr: fliplr,
        np.flipud: flipud,
        np.rot90: rot90,
        np.roll: roll,
        np.tile: tile,
        np.repeat: repeat,
        np.triu: triu,
        np.tril: tril,
        np.diff: diff,
        np.diag: diag,
        np.diagflat: diagflat,
    }
)
