"""numpy's joining, splitting, grid and creation functions on traced values: the stacks,
split/array_split and their h/v/d forms, ravel, broadcast_arrays, meshgrid, linspace,
logspace, empty_like and copyto. Each is concatenations, slices, reshapes and broadcasts,
so it lowers, fuses and differentiates like any other traced code (the flips, pads and
diagonals are numpy_shapes').
"""

from __future__ import annotations

import numpy as np

from kiln.errors import ArgumentError, DTypeError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.numpy_shapes import along, as_array, static_int, static_ints
from kiln.frontend.tracing import Tracer, current_context, user_location


# -- joining and splitting ---------------------------------------------------------------------
def _arrays(tup, name) -> list:
    if isinstance(tup, Tracer) or not isinstance(tup, (list, tuple)):
        raise ArgumentError(f"np.{name} takes a list or tuple of arrays, got {type(tup).__name__}", user_location())
    return [as_array(a) for a in tup]


def _join(name, arrays, axis, dtype=None, casting="same_kind"):
    if not arrays:
        raise ShapeError(f"np.{name}: need at least one array to concatenate", user_location())
    if dtype is not None:
        dtype = ops.check_dtype(dtype, f"np.{name}(dtype=...)")
        for a in arrays:
            if not np.can_cast(a.dtype, dtype, casting):
                raise DTypeError(
                    f"np.{name}: cannot cast {a.dtype} to {dtype} according to the rule {casting!r}", user_location()
                )
    return ops.concatenate(arrays, axis, dtype)


def atleast_1d(*arys):
    out = tuple(ops.reshape(a, (1,)) if a.ndim == 0 else a for a in map(as_array, arys))
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    out = tuple(ops.reshape(a, (1,) * (2 - a.ndim) + a.shape) if a.ndim < 2 else a for a in map(as_array, arys))
    return out[0] if len(out) == 1 else out


def _to_3d(a: Tracer) -> Tracer:
    shape = {0: (1, 1, 1), 1: (1,) + a.shape + (1,), 2: a.shape + (1,)}.get(a.ndim, a.shape)
    return ops.reshape(a, shape)


def atleast_3d(*arys):
    out = tuple(_to_3d(a) for a in map(as_array, arys))
    return out[0] if len(out) == 1 else out


def hstack(tup, *, dtype=None, casting="same_kind"):
    arrays = [atleast_1d(a) for a in _arrays(tup, "hstack")]
    return _join("hstack", arrays, 0 if arrays and arrays[0].ndim == 1 else 1, dtype, casting)


def vstack(tup, *, dtype=None, casting="same_kind"):
    return _join("vstack", [atleast_2d(a) for a in _arrays(tup, "vstack")], 0, dtype, casting)


def dstack(tup):
    return _join("dstack", [_to_3d(a) for a in _arrays(tup, "dstack")], 2)


def column_stack(tup):
    # numpy makes each array of rank < 2 a column: (n,) -> (n, 1), a 0-d one (1, 1)
    arrays = [ops.reshape(a, (a.size, 1)) if a.ndim < 2 else a for a in _arrays(tup, "column_stack")]
    return _join("column_stack", arrays, 1)


def _split(ary, indices_or_sections, axis, name, equal):
    ary = as_array(ary)
    axis = ops.normalize_axis(axis, ary.ndim)
    n = ary.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer, Tracer)) and not isinstance(indices_or_sections, bool):
        sections = static_int(indices_or_sections, f"np.{name}'s sections")
        if sections <= 0:
            raise ShapeError(f"np.{name}: number sections must be larger than 0, got {sections}", user_location())
        if equal and n % sections:
            raise ShapeError(
                f"np.{name}: an axis of length {n} does not split into {sections} equal sections "
                "(np.array_split allows unequal ones)",
                user_location(),
            )
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        points = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    else:
        points = [0, *static_ints(indices_or_sections, f"np.{name}'s indices"), n]
    # numpy cuts with Python slices: negative points count from the end, and a
    # point before the previous one gives an empty piece
    return [along(ary, axis, slice(start, stop)) for start, stop in zip(points[:-1], points[1:])]


def split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "split", equal=True)


def array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "array_split", equal=False)


def _split_at_least(name, ary, indices_or_sections, rank, axis):
    ary = as_array(ary)
    if ary.ndim < rank:
        raise ShapeError(f"np.{name} only works on arrays of {rank} or more dimensions", user_location())
    return _split(ary, indices_or_sections, axis(ary), name, equal=True)


def hsplit(ary, indices_or_sections):
    return _split_at_least("hsplit", ary, indices_or_sections, 1, lambda a: 1 if a.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    return _split_at_least("vsplit", ary, indices_or_sections, 2, lambda a: 0)


def dsplit(ary, indices_or_sections):
    return _split_at_least("dsplit", ary, indices_or_sections, 3, lambda a: 2)


def ravel(a, order="C"):
    """np.ravel and ndarray.flatten in C or Fortran order. 'A' and 'K' follow the array's
    memory layout, which a traced array does not have."""
    a = as_array(a)
    if order in ("C", None):
        return ops.reshape(a, (-1,))
    if order == "F":
        return ops.reshape(ops.transpose(a), (-1,))
    if order in ("A", "K"):
        raise UnsupportedError(
            f"ravel/flatten order={order!r} follows the array's memory layout, which a traced array does "
            "not have; use order='C' or order='F'",
            user_location(),
        )
    raise ArgumentError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})", user_location())


# -- grids and broadcasting --------------------------------------------------------------------
def broadcast_arrays(*args, subok=False):
    arrays = [as_array(a) for a in args]
    shape = ops.broadcast_shapes(*(a.shape for a in arrays))
    return tuple(ops.broadcast_to(a, shape) for a in arrays)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ArgumentError(
            f"np.meshgrid: valid values for indexing are 'xy' and 'ij', got {indexing!r}", user_location()
        )
    ndim = len(xi)
    shapes = [[1] * ndim for _ in xi]
    for i, shape in enumerate(shapes):
        shape[i] = -1
    if indexing == "xy" and ndim > 1:  # the first two axes swapped: x varies along columns
        shapes[0][:2], shapes[1][:2] = [1, -1], [-1, 1]
    output = tuple(ops.reshape(ops.reshape(as_array(x), (-1,)), tuple(s)) for x, s in zip(xi, shapes))
    if not sparse:
        return broadcast_arrays(*output)
    return output if copy else list(output)  # numpy's sparse grid without copy is its list


# -- array creation from traced values -----------------------------------------------------------
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """np.linspace with traced endpoints, computed as numpy does: arange(num) times the step
    (or divided by the count and times the difference where a step is zero), plus start,
    with stop written last when `endpoint`."""
    if device not in (None, "cpu"):
        raise ArgumentError(f"np.linspace: device must be 'cpu' or None, got {device!r}", user_location())
    num = static_int(num, "np.linspace's num")
    if num < 0:
        raise ShapeError(f"np.linspace: number of samples, {num}, must be non-negative", user_location())
    start, stop = (ops.check_operand(v) for v in (start, stop))
    inexact = np.result_type(*(ops.promotion_sample(v) for v in (start, stop)), 0.0)
    dt = ops.check_dtype(inexact, "np.linspace")
    start, stop = (ops.lift(current_context(), v, dt) for v in (start, stop))
    div = num - 1 if endpoint else num
    delta = stop - start
    y = np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * delta.ndim)
    if div > 0:
        step = delta / dt.type(div)
        # numpy's test is over all the steps at once (any zero step: all computed this way)
        y = np.where(np.any(step == 0), y / dt.type(div) * delta, y * step)
    else:
        step = np.nan
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y = ops.concatenate([y[:-1], ops.reshape(ops.broadcast_to(stop, y.shape[1:]), (1,) + y.shape[1:])], 0)
    y = ops.moveaxis(y, 0, axis)
    if dtype is not None:
        dtype = ops.check_dtype(dtype, "np.linspace(dtype=...)")
        y = ops.astype(np.floor(y) if dtype.kind in "iu" else y, dtype)
    y = ops.strong(y)
    return (y, step) if retstep else y


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """np.logspace with traced endpoints or base: base ** linspace(start, stop), an array base
    broadcast along the samples' axis, as numpy does."""
    if not isinstance(base, (float, int)) and np.ndim(base):
        start, stop, base = (as_array(v) for v in (start, stop, base))
        rank = len(ops.broadcast_shapes(start.shape, stop.shape, base.shape))
        start, stop, base = (ops.reshape(v, (1,) * (rank - v.ndim) + v.shape) for v in (start, stop, base))
        base = ops.expand_dims(base, axis)
    result = np.power(base, linspace(start, stop, num, endpoint, axis=axis))
    return result if dtype is None else ops.astype(result, dtype)


def empty_like(prototype, /, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """np.empty_like as zeros: its values are unspecified in numpy, and zeros are one choice."""
    return FUNCTION_RULES[np.zeros_like](prototype, dtype, order, subok, shape, device=device)


def copyto(dst, src, casting="same_kind", where=True):
    """np.copyto into a traced array: dst[...] = src (broadcast, cast by `casting`), where
    `where` holds. Into a numpy array (what np.full(shape, traced) does) it cannot be traced."""
    if not isinstance(dst, Tracer) or dst.weak:
        raise UnsupportedError(
            "np.copyto (and np.full with a traced fill value, which calls it) would write a traced value into "
            "a numpy array; use np.full_like(x, value), np.broadcast_to(value, shape) or np.where",
            user_location(),
        )
    src = ops.check_operand(src)
    source_dtype = ops.array_dtype(src) if not ops.is_python_scalar(src) else np.result_type(src, dst.dtype)
    if not np.can_cast(source_dtype, dst.dtype, casting):
        raise DTypeError(
            f"Cannot cast array data from {source_dtype} to {dst.dtype} according to the rule {casting!r}",
            user_location(),
        )
    dst[...] = np.where(where, src, dst) if where is not True else src


FUNCTION_RULES.update(
    {
        np.hstack: hstack,
        np.vstack: vstack,
        np.dstack: dstack,
        np.column_stack: column_stack,
        np.atleast_1d: atleast_1d,
        np.atleast_2d: atleast_2d,
        np.atleast_3d: atleast_3d,
        np.split: split,
        np.array_split: array_split,
        np.hsplit: hsplit,
        np.vsplit: vsplit,
        np.dsplit: dsplit,
        np.ravel: ravel,
        np.broadcast_arrays: broadcast_arrays,
        np.meshgrid: meshgrid,
        np.linspace: linspace,
        np.logspace: logspace,
        np.empty_like: empty_like,
        np.copyto: copyto,
    }
)
