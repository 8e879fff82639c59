"""numpy semantics on traced values: promotion, broadcasting, axes, layout (indexing is in numpy_indexing).

Each function takes Tracers (and numpy arrays or Python scalars mixed in),
makes numpy's implicit rules explicit in the IR (``kiln.convert``,
``kiln.broadcast_to``), and emits the tensor ops that compute the result.
Errors are raised at the user's line.
"""

from __future__ import annotations

import warnings

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects import tensor_sort as TS
from kiln.dialects.types import SUPPORTED_DTYPES, dtype_fix_hint, tensor_type
from kiln.errors import ArgumentError, DTypeError, IntegerOverflowError, ShapeError, UnsupportedError
from kiln.frontend import python_ints, views
from kiln.frontend.tracing import NUMPY_PROTOCOL, Tracer, current_context, user_location

_DTYPE_NAMES = ", ".join(str(d) for d in SUPPORTED_DTYPES)


# -- operands: Tracers, constants and weak Python scalars ---------------------------
def context_of(values):
    """The trace being recorded (operands from enclosing traces are captured by it)."""
    assert any(isinstance(v, Tracer) for v in values), "no traced value among the operands"
    return current_context()


def check_dtype(dtype, what: str) -> np.dtype:
    if isinstance(dtype, Tracer):
        raise DTypeError(f"{what}: a traced value is not a dtype", user_location())
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{what}: {dtype!r} is not a dtype", user_location()) from None
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeError(
            f"{what} has dtype {dtype}, which kiln does not support (it supports {_DTYPE_NAMES})"
            + dtype_fix_hint(dtype),
            user_location(),
        )
    return dtype


def is_python_scalar(x) -> bool:
    """A Python int or float (not a bool, and not numpy's float64, which subclasses float)."""
    return isinstance(x, (int, float)) and not isinstance(x, (bool, np.generic))


def is_weak(x) -> bool:
    return is_python_scalar(x) or isinstance(x, Tracer) and x.weak


def strong(x: Tracer) -> Tracer:
    """`x` as an array value: what numpy functions return, even from Python scalars."""
    return Tracer(x.value, x.ctx) if x.weak else x


def check_operand(x):
    """Accept a Tracer, a numpy array or scalar, or a Python scalar; reject anything else."""
    if isinstance(x, (Tracer, bool, int, float, np.ndarray, np.generic)):
        if isinstance(x, (complex, np.complexfloating)) or (isinstance(x, np.ndarray) and x.dtype.kind == "c"):
            raise DTypeError("complex numbers are not supported", user_location())
        return x
    if isinstance(x, complex):
        raise DTypeError("complex numbers are not supported", user_location())
    raise UnsupportedError(
        f"cannot use a {type(x).__name__} in a traced computation (only arrays and numbers)", user_location()
    )


def promotion_key(x):
    """What numpy's type resolution sees: a dtype, or a Python type for a weak scalar."""
    if isinstance(x, Tracer):
        if x.weak:
            return {"f": float, "i": int, "u": int}.get(x.dtype.kind, x.dtype)  # uint64: from 2**63 on
        return x.dtype
    if is_python_scalar(x):
        return int if isinstance(x, int) else float
    return np.asarray(x).dtype


def array_dtype(x) -> np.dtype:
    """The dtype of np.asarray(x): what functions that make arrays of their operands first
    (np.concatenate, np.stack) promote, so Python scalars are strong there."""
    return x.dtype if isinstance(x, Tracer) else np.asarray(x).dtype


def promotion_sample(x):
    """Like promotion_key, for np.result_type (which wants weak scalars as values)."""
    key = promotion_key(x)
    return key(0) if key is int or key is float else key


def lift(ctx, x, dtype) -> Tracer:
    """`x` as a Tracer of `dtype`: a cast for Tracers, a constant otherwise."""
    dtype = np.dtype(dtype)
    if isinstance(x, Tracer):
        return cast(x, dtype)
    try:
        array = np.asarray(x, dtype=dtype) if not isinstance(x, (np.ndarray, np.generic)) else np.asarray(x)
    except OverflowError:
        # numpy 2 refuses to convert a Python int its array's dtype cannot hold (NEP 50)
        raise IntegerOverflowError(f"Python integer {x} out of bounds for {dtype}", user_location()) from None
    check_dtype(array.dtype, "a constant")
    return cast(ctx.constant(array, weak=is_weak(x)), dtype)


def cast(x: Tracer, dtype) -> Tracer:
    dtype = check_dtype(dtype, "the cast target")
    if x.dtype == dtype:
        return x
    return current_context().emit(T.ConvertOp, [x], result_type=tensor_type(x.shape, dtype), weak=x.weak)


def astype(x: Tracer, dtype, casting="unsafe") -> Tracer:
    dtype = check_dtype(dtype, "the cast target")
    if not np.can_cast(x.dtype, dtype, casting):
        raise DTypeError(f"cannot cast {x.dtype} to {dtype} under the rule {casting!r}", user_location())
    return strong(cast(x, dtype))


def broadcast_shapes(*shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " and ".join(str(tuple(s)) for s in shapes)
        raise ShapeError(f"shapes {listed} do not broadcast", user_location()) from None


def broadcast_to(x: Tracer, shape) -> Tracer:
    shape = tuple(shape)
    if x.shape == shape:
        return x
    broadcast_shapes(x.shape, shape)  # the error message names both shapes
    if len(x.shape) > len(shape) or broadcast_shapes(x.shape, shape) != shape:
        raise ShapeError(f"cannot broadcast {x.shape} to {shape}", user_location())
    result = current_context().emit(T.BroadcastToOp, [x], result_type=tensor_type(shape, x.dtype), weak=x.weak)
    lead = len(shape) - x.ndim
    strides = (0,) * lead + tuple(0 if d != n else s for d, n, s in zip(x.shape, shape[lead:], views.strides_of(x)))
    return views.mark(result, x, lambda b: broadcast_to(b, shape), views.read_only("np.broadcast_to"), strides)


def elementwise(op_class, operands, dtypes, attributes=None) -> Tracer:
    """Cast each operand to its dtype, broadcast all to one shape, emit one op."""
    ctx = context_of(operands)
    tracers = [lift(ctx, x, d) for x, d in zip(operands, dtypes)]
    shape = broadcast_shapes(*(t.shape for t in tracers))
    tracers = [broadcast_to(t, shape) for t in tracers]
    return ctx.emit(op_class, tracers, attributes, weak=all(is_weak(x) for x in operands))


# -- axes ----------------------------------------------------------------------------
def normalize_axis(axis, ndim: int) -> int:
    if isinstance(axis, Tracer) or not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShapeError(f"axis must be a Python int, got {axis!r}", user_location())
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of range for an array of rank {ndim}", user_location())
    return int(axis) % ndim


def normalize_axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = [normalize_axis(a, ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"repeated axis in {axis!r}", user_location())
    return tuple(sorted(axes))


def reduction_axes(axis, ndim: int) -> tuple:
    """normalize_axes for numpy's ufunc-style reductions (sum, prod, max, min, any, all, argmax,
    squeeze): on a 0-d array they also take a plain int axis 0 or -1 and reduce nothing, as
    numpy does (np.sum(np.array(2.0), axis=0) is 2.0); a tuple of axes is still out of range,
    and np.mean and np.var reject both."""
    if ndim == 0 and isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) and axis in (0, -1):
        return ()
    return normalize_axes(axis, ndim)


# -- reductions ------------------------------------------------------------------------
_REDUCE_OPS = {"sum": T.ReduceSumOp, "max": T.ReduceMaxOp, "min": T.ReduceMinOp}


def sum_dtype(dtype) -> np.dtype:
    """The dtype np.sum, np.prod, np.cumsum and np.cumprod accumulate `dtype` in: bool and
    integers narrower than the default integer widen to it (int64), unsigned ones to uint64
    (numpy's ``add.reduce`` docs: "the default platform integer ... for small integers")."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_ or (dtype.kind == "i" and dtype.itemsize < 8):
        return np.dtype(np.int64)
    if dtype.kind == "u" and dtype.itemsize < 8:
        return np.dtype(np.uint64)
    return dtype


def reduce(kind: str, x, axis=None, keepdims=False, dtype=None) -> Tracer:
    x = as_tracer(x)
    axes = reduction_axes(axis, x.ndim)
    if dtype is not None:
        x = cast(x, check_dtype(dtype, f"np.{kind}(dtype=...)"))
    elif kind == "sum":
        x = cast(x, sum_dtype(x.dtype))
    if kind != "sum" and any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"np.{kind} of an empty axis has no identity (shape {x.shape}, axis {axis})", user_location())
    return current_context().emit(_REDUCE_OPS[kind], [x], {"axes": axes, "keepdims": bool(keepdims)})


def prod(x, axis=None, keepdims=False, dtype=None) -> Tracer:
    """The product over `axis`, as a tree of multiplies of halves (log2 n slices and
    multiplies). numpy multiplies in order, so a float product may round differently in the
    last place, and where partial products overflow or underflow the two orders can disagree
    (float32 1e30, 1e30, 1e-30, 1e-30: numpy's order overflows to inf, the tree's pairs give 1).
    Integer products wrap around identically in any order.

    A float16 product is taken in float32 and rounded to float16 once, as numpy's
    ``HALF_multiply`` reduce loop does along a contiguous axis (numpy/_core/src/umath/
    loops.c.src): rounding each multiply would lose about an ulp of float16 per level
    (1000 x float16(1.001): 2.617 instead of numpy's 2.654)."""
    x = as_tracer(x)
    axes = reduction_axes(axis, x.ndim)
    if dtype is None:
        dtype = sum_dtype(x.dtype)
    x = cast(x, check_dtype(dtype, "np.prod(dtype=...)"))
    if x.dtype == np.float16:
        return cast(prod(cast(x, np.float32), axis, keepdims), np.float16)
    kept = [a for a in range(x.ndim) if a not in axes]
    count = reduced_count(x, axes)
    rows = reshape(transpose(x, kept + list(axes)), tuple(x.shape[a] for a in kept) + (count,))
    if count == 0:
        rows = broadcast_to(lift(current_context(), np.ones((), x.dtype), x.dtype), rows.shape[:-1] + (1,))
    while rows.shape[-1] > 1:
        half = rows.shape[-1] // 2
        product = np.multiply(rows[..., :half], rows[..., half : 2 * half])
        rows = product if rows.shape[-1] % 2 == 0 else concatenate([product, rows[..., 2 * half :]], -1)
    shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape)) if keepdims else rows.shape[:-1]
    return strong(reshape(rows, shape))


def any_all(kind: str, x, axis=None, keepdims=False) -> Tracer:
    """np.any / np.all: a max / min over the truth values (NaN is true, as in numpy)."""
    x = cast(as_tracer(x), np.bool_)
    axes = reduction_axes(axis, x.ndim)
    if any(x.shape[a] == 0 for a in axes):  # the empty any is False, the empty all is True
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape) if keepdims or a not in axes)
        return broadcast_to(lift(current_context(), np.array(kind == "all"), np.bool_), shape)
    return reduce("max" if kind == "any" else "min", x, axes, keepdims)


def arg_extreme(kind: str, x, axis=None, keepdims=False) -> Tracer:
    """np.argmax / np.argmin: the least index where x equals its max (min), or holds a NaN,
    which wins as in numpy; as int64 (numpy's intp here)."""
    x = as_tracer(x)
    kept_shape = None
    if x.ndim == 0:  # numpy takes a 0-d array as 1-d here: axis None, 0 or -1
        reduction_axes(axis, 0)
        axis = None
    if axis is None:  # over the flattened array; keepdims keeps a 1 for each axis of x
        kept_shape, x, axis = (1,) * x.ndim, reshape(x, (-1,)), 0
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if n == 0:
        raise ShapeError(f"np.arg{kind} of an empty axis has no answer (shape {x.shape})", user_location())
    extreme = reduce(kind, x, axis, keepdims=True)
    hit = np.logical_or(np.equal(x, extreme), np.not_equal(x, x))
    index = np.arange(n, dtype=np.int64).reshape((n,) + (1,) * (x.ndim - axis - 1))
    first = reduce("min", np.where(hit, index, n), axis, keepdims=keepdims)
    return strong(first if kept_shape is None or not keepdims else reshape(first, kept_shape))


def repeat(x, repeats, axis=None) -> Tracer:
    """np.repeat with one count for every element: a broadcast along a new axis, merged."""
    x = as_tracer(x)
    if isinstance(repeats, Tracer) or not isinstance(repeats, (int, np.integer)) or repeats < 0:
        raise UnsupportedError(f"np.repeat needs one non-negative Python int count, got {repeats!r}", user_location())
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axis(axis, x.ndim)
    spread = broadcast_to(expand_dims(x, axis + 1), x.shape[: axis + 1] + (int(repeats),) + x.shape[axis + 1 :])
    return strong(reshape(spread, x.shape[:axis] + (x.shape[axis] * int(repeats),) + x.shape[axis + 1 :]))


def reduced_count(x, axis) -> int:
    return int(np.prod([x.shape[a] for a in normalize_axes(axis, x.ndim)], dtype=np.int64))


def mean(x, axis=None, dtype=None, keepdims=False) -> Tracer:
    """np.mean. A float16 mean is numpy's (numpy/_core/_methods.py ``_mean``): the sum taken
    in float32, the quotient rounded to float32 and then once more to float16, so a mean
    whose sum passes 65504 stays finite and no float16 rounding of the sum comes first."""
    x = as_tracer(x)
    if dtype is None and x.dtype == np.float16:
        return cast(_sum_over_count(x, axis, np.float32, keepdims), np.float16)
    return _sum_over_count(x, axis, dtype, keepdims)


def _sum_over_count(x, axis, dtype, keepdims) -> Tracer:
    """The sum of `x` in `dtype` (x's own if a float, else float64) over its count. np.var
    takes its mean this way for every dtype, float16 too: numpy's ``_var`` sums float16 in
    float16 (no float32 mean as ``_mean`` takes)."""
    if dtype is None:
        dtype = x.dtype if x.dtype.kind == "f" else np.float64  # numpy means ints in float64
    total = _reduce_kind("sum", x, axis, keepdims, dtype)
    return _per_count(total, reduced_count(x, axis))


def var(x, axis=None, dtype=None, ddof=0, keepdims=False) -> Tracer:
    x = as_tracer(x)
    centered = x - _sum_over_count(x, axis, dtype, keepdims=True)
    squares = _reduce_kind("sum", centered * centered, axis, keepdims, dtype)
    return _per_count(squares, max(reduced_count(x, axis) - ddof, 0))


def _per_count(total: Tracer, count: int) -> Tracer:
    """total / count as numpy's mean and var compute it: numpy divides by an intp count, so the
    quotient is taken in float64 and rounded once to the sum's dtype (truncated for integer
    dtypes, np.mean(a, dtype=np.int64)). Multiplying by a rounded 1/count instead would add a
    rounding. 0/0 is nan and x/0 inf: an empty mean, or a variance with ddof >= n, as numpy
    gives them; numpy warns there, and so does kiln."""
    if count == 0:
        loc = user_location()
        warnings.warn_explicit(
            "kiln: a mean or variance over no elements (or with ddof >= n) is nan",
            RuntimeWarning,
            loc.file if loc else "<kiln>",
            loc.line if loc else 0,
        )
    wide = total if total.dtype == np.float64 else astype(total, np.float64)
    return astype(np.true_divide(wide, np.float64(count)), total.dtype)


# -- linear algebra ----------------------------------------------------------------------
def matmul(a, b) -> Tracer:
    ctx = context_of((a, b))
    a, b = check_operand(a), check_operand(b)
    a_dtype, b_dtype, _ = np.matmul.resolve_dtypes((promotion_key(a), promotion_key(b), None))
    a, b = lift(ctx, a, a_dtype), lift(ctx, b, b_dtype)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul does not take 0-d arrays (use * to scale)", user_location())
    vector_a, vector_b = a.ndim == 1, b.ndim == 1
    if vector_a:
        a = reshape(a, (1,) + a.shape)
    if vector_b:
        b = reshape(b, b.shape + (1,))
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: contracted dimensions differ: {a.shape} @ {b.shape} ({a.shape[-1]} != {b.shape[-2]})",
            user_location(),
        )
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = broadcast_to(a, batch + a.shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:])
    result = ctx.emit(T.MatmulOp, [a, b])
    if vector_a or vector_b:
        shape = batch + (() if vector_a else a.shape[-2:-1]) + (() if vector_b else b.shape[-1:])
        result = reshape(result, shape)
    return result


def dot(a, b) -> Tracer:
    # np.dot makes arrays of its operands first, so Python scalars are strong here.
    a, b = (strong(v) if isinstance(v, Tracer) else np.asarray(check_operand(v)) for v in (a, b))
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise UnsupportedError(
            "np.dot of arrays with more than 2 dimensions is not supported; use np.matmul "
            "(or @), whose batching rules differ",
            user_location(),
        )
    return matmul(a, b)


# -- layout ---------------------------------------------------------------------------------
def as_tracer(x) -> Tracer:
    if not isinstance(x, Tracer):
        raise UnsupportedError(f"expected a traced array, got {type(x).__name__}", user_location())
    return x


def reshape(x, shape, order="C") -> Tracer:
    x = as_tracer(x)
    if order == "F":
        # Column-major order is row-major order of the reversed axes: numpy's
        # x.reshape(s, order="F") is x.T.reshape(s[::-1]).T
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return transpose(reshape(transpose(x), shape[::-1]))
    if order != "C":
        raise UnsupportedError(
            f"reshape order={order!r} is not supported (only 'C' and 'F': a traced array has no memory layout)",
            user_location(),
        )
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(isinstance(d, Tracer) or not isinstance(d, (int, np.integer)) for d in shape):
        raise ShapeError(f"reshape needs a shape of Python ints, got {shape!r}", user_location())
    shape = tuple(int(d) for d in shape)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise ShapeError(f"invalid shape {shape} for reshape", user_location())
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise ShapeError(f"cannot reshape an array of size {x.size} into shape {shape}", user_location())
        shape = tuple(x.size // known if d == -1 else d for d in shape)
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ShapeError(
            f"cannot reshape an array of size {x.size} (shape {x.shape}) into shape {shape}", user_location()
        )
    if shape == x.shape:
        return x
    result = current_context().emit(T.ReshapeOp, [x], result_type=tensor_type(shape, x.dtype), weak=x.weak)
    strides = views.reshape_strides(x.shape, views.strides_of(x), shape)
    if strides is None:  # numpy copies here
        return result
    return views.mark(result, x, lambda b: reshape(b, shape), lambda b, v: reshape(v, b.shape), strides)


def transpose(x, axes=None) -> Tracer:
    x = as_tracer(x)
    axes = (axes,) if isinstance(axes, (int, np.integer)) else axes
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(normalize_axis(a, x.ndim) for a in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise ShapeError(f"axes {tuple(axes)} are not a permutation of the {x.ndim} axes", user_location())
    if perm == tuple(range(x.ndim)):
        return x
    result = current_context().emit(T.TransposeOp, [x], {"permutation": perm}, weak=x.weak)
    strides = [views.strides_of(x)[a] for a in perm]
    inverse = tuple(int(a) for a in np.argsort(perm))
    return views.mark(result, x, lambda b: transpose(b, perm), lambda b, v: transpose(v, inverse), strides)


def swapaxes(x, axis1, axis2) -> Tracer:
    x = as_tracer(x)
    perm = list(range(x.ndim))
    i, j = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def moveaxis(x, source, destination) -> Tracer:
    x = as_tracer(x)
    src = normalize_axis(source, x.ndim)
    dst = normalize_axis(destination, x.ndim)
    order = [a for a in range(x.ndim) if a != src]
    order.insert(dst, src)
    return transpose(x, order)


def expand_dims(x, axis) -> Tracer:
    x = as_tracer(x)
    axes = normalize_axes(axis, x.ndim + len(axis if isinstance(axis, (tuple, list)) else (axis,)))
    shape = iter(x.shape)
    return reshape(x, tuple(1 if i in axes else next(shape) for i in range(x.ndim + len(axes))))


def squeeze(x, axis=None) -> Tracer:
    x = as_tracer(x)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else reduction_axes(axis, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            raise ShapeError(f"cannot squeeze axis {a} of size {x.shape[a]} (shape {x.shape})", user_location())
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def diagonal(x, offset=0, axis1=0, axis2=1) -> Tracer:
    """np.diagonal: the two axes moved last and flattened together, where the diagonal is a
    slice with step columns + 1; it comes out as the last axis, as numpy puts it."""
    x = as_tracer(x)
    first, second = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    if first == second:
        raise ShapeError(f"np.diagonal: axis1 and axis2 are the same axis ({axis1}, {axis2})", user_location())
    if isinstance(offset, (bool, Tracer)) or not isinstance(offset, (int, np.integer)):
        raise ShapeError(f"np.diagonal: the offset must be a Python int, got {offset!r}", user_location())
    x = transpose(x, [a for a in range(x.ndim) if a not in (first, second)] + [first, second])
    rows, cols = x.shape[-2:]
    offset = int(offset)
    count = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    start = offset if offset >= 0 else -offset * cols
    flat = reshape(x, x.shape[:-2] + (rows * cols,))
    return strong(flat[..., start : start + count * (cols + 1) : cols + 1])


def concatenate(arrays, axis=0, dtype=None) -> Tracer:
    arrays = [check_operand(a) for a in arrays]
    if not arrays:
        raise ShapeError("need at least one array to concatenate", user_location())
    ctx = context_of(arrays)
    target = check_dtype(dtype or np.result_type(*(array_dtype(a) for a in arrays)), "np.concatenate")
    tracers = [lift(ctx, a, target) for a in arrays]
    if axis is None:
        tracers, axis = [reshape(t, (-1,)) for t in tracers], 0
    if any(t.ndim == 0 for t in tracers):
        raise ShapeError("zero-dimensional arrays cannot be concatenated", user_location())
    axis = normalize_axis(axis, tracers[0].ndim)
    for t in tracers[1:]:
        if t.ndim != tracers[0].ndim or any(
            a != b for i, (a, b) in enumerate(zip(t.shape, tracers[0].shape)) if i != axis
        ):
            raise ShapeError(
                f"cannot concatenate shapes {tracers[0].shape} and {t.shape} along axis {axis}", user_location()
            )
    if len(tracers) == 1:
        return tracers[0]
    return ctx.emit(T.ConcatOp, tracers, {"axis": axis})


def stack(arrays, axis=0) -> Tracer:
    arrays = [check_operand(a) for a in arrays]
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ShapeError(f"all input arrays must have the same shape to stack, got {sorted(shapes)}", user_location())
    ctx = context_of(arrays)
    ndim = len(shapes.pop()) + 1
    axis = normalize_axis(axis, ndim)
    target = np.result_type(*(array_dtype(a) for a in arrays))
    return concatenate([expand_dims(lift(ctx, a, target), axis) for a in arrays], axis)


def where(condition, x, y) -> Tracer:
    operands = [check_operand(v) for v in (condition, x, y)]
    ctx = context_of(operands)
    cond = operands[0]
    # numpy's where tests truthiness, which is exactly a cast to bool.
    cond = cast(cond, np.bool_) if isinstance(cond, Tracer) else lift(ctx, np.asarray(cond).astype(bool), np.bool_)
    target = check_dtype(np.result_type(*(promotion_sample(v) for v in operands[1:])), "np.where")
    # numpy's where converts a Python int to the integer dtype by an unsafe cast, so one out of
    # its range wraps (np.where(c, int32_array, 2**40) holds 0 where c is False), as a Python
    # int argument's conversion does in the compiled code.
    choices = [_where_choice(v, target) for v in operands[1:]]
    return elementwise(T.SelectOp, [cond, *choices], [np.bool_, target, target])


def _where_choice(x, target: np.dtype):
    if type(x) is not int or target.kind not in "iu":
        return x
    if not np.iinfo(np.int64).min <= x <= np.iinfo(np.uint64).max:
        raise IntegerOverflowError(f"Python integer {x} out of bounds for int64 and uint64", user_location())
    return np.asarray(x).astype(target)


def full_like(x, fill_value, dtype=None, shape=None) -> Tracer:
    """An array like `x` (its dtype unless given, its shape unless given) full of `fill_value`:
    strong, as numpy's."""
    x = as_tracer(x)
    check_operand(fill_value)
    dtype = check_dtype(dtype or x.dtype, "the fill dtype")
    if shape is None:
        shape = x.shape
    else:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if any(isinstance(d, (Tracer, bool)) or not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
            raise ShapeError(f"shape= must be non-negative Python ints, got {shape!r}", user_location())
        shape = tuple(int(d) for d in shape)
    ctx = current_context()
    if dtype.kind in "iu" and not isinstance(fill_value, Tracer) and np.asarray(fill_value).dtype.kind == "f":
        # numpy fills by an unsafe cast, so a float fill follows the float-to-int rule
        # (NaN, infinities and out-of-range values give the type's minimum) rather than failing.
        return strong(broadcast_to(cast(lift(ctx, np.float64(fill_value), np.float64), dtype), shape))
    python_ints.check_conversion(fill_value, dtype)  # numpy's OverflowError for 300 into uint8
    return strong(broadcast_to(lift(ctx, fill_value, dtype), shape))


def conv2d(x, w, stride=1, padding=0) -> Tracer:
    ctx = context_of((x, w))
    x, w = check_operand(x), check_operand(w)
    dtype = np.result_type(promotion_sample(x), promotion_sample(w))
    x, w = lift(ctx, x, dtype), lift(ctx, w, dtype)
    pair = lambda v: (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(e) for e in v)  # noqa: E731
    return ctx.emit(T.Conv2DOp, [x, w], {"stride": pair(stride), "padding": pair(padding)})


NUMPY_PROTOCOL.update(astype=astype)  # indexing: numpy_indexing


# -- scans and sorts ------------------------------------------------------------------------------
def scan(kind: str, x, axis) -> Tracer:
    """The inclusive scan of `x` along `axis` under the combiner `kind` (a row of
    kiln.dialects.tensor.SCAN_KINDS: "add" for np.cumsum, "mul" for np.cumprod, ...): one
    ``kiln.scan``, which runs numpy's sequential loop, so every dtype gives numpy's bits
    (float16 rounds each step, once emulate_floats widens it). Same shape and dtype out."""
    x = as_tracer(x)
    axis = normalize_axis(axis, x.ndim)
    element = tensor_type((), x.dtype).element
    return strong(current_context().emit(T.ScanOp, [x], {"axis": axis, "kind": kind, "rounding": element}))


def sort(x, axis=-1, descending=False, with_index=True, with_values=True):
    """(sorted values, int64 indices into `x`) along `axis`, stable, NaN last and -0.0 equal to
    0.0 as numpy sorts (descending: NaN first, then from the largest, ties in index order, as
    torch.topk): ``kiln.sort`` (dialects/tensor_sort.py, a merge sort, O(n log n)) of the
    axis moved last (a view). The values are differentiable (the cotangent is scattered back
    through the permutation); indices are None without `with_index`, values None without
    `with_values`."""
    x = as_tracer(x)
    axis = normalize_axis(axis, x.ndim)
    moved = moveaxis(x, axis, -1)
    ctx = current_context()
    order = "descending" if descending else "ascending"
    results = []
    for wanted, returns in ((with_values, "values"), (with_index, "indices")):
        result = ctx.emit(TS.SortOp, [moved], {"order": order, "returns": returns}) if wanted else None
        results.append(None if result is None else strong(moveaxis(result, -1, axis)))
    return tuple(results)


# -- reductions with numpy's initial= and where= ----------------------------------------------
_IDENTITIES = {"sum": 0, "prod": 1, "any": False, "all": True}
_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def half_rounding_steps(shape, axes):
    """How numpy's float16 sum or product of a C-ordered array of `shape` over `axes` rounds:
    None when it rounds once (float32 throughout), else the reduced axes whose every step
    rounds to float16, in C order. numpy's iterator drops size-1 axes and runs the last axis
    of size > 1 as its inner loop. When that axis is kept, the inner loop is the elementwise
    float16 add of one slice into the result, rounded: every reduced axis steps in float16
    (3000 ones along axis 0 of a (3000, 2) array give 2048). When it is reduced, the inner
    loop is HALF_add's (HALF_multiply's) reduce loop over the trailing run of reduced axes,
    accumulating in float32 into the result and rounding once per call: the reduced axes
    before that run step in float16. From numpy/_core/src/umath/loops.c.src and the
    iterator's axis order; see docs/numpy.md, "float16 accumulation"."""
    sized = [a for a, d in enumerate(shape) if d != 1]
    if not sized or not any(shape[a] > 1 for a in axes):
        return None
    inner = []
    for a in reversed(sized):
        if a not in axes:
            break
        inner.append(a)
    steps = [a for a in sized if a in axes and a not in inner]
    return steps or None


def _half_sequential(kind, x, axes, steps, keepdims):
    """The float16 sum or product of `x` over `axes`, rounded after each step along `steps`
    (the rest reduced first, in float32): the last step of a kiln.scan over those steps,
    moved to the front, running in f32 and rounding every step to f16."""
    inner = tuple(a for a in axes if a not in steps)
    wide = cast(x, np.float32)
    if inner:
        wide = reduce("sum", wide, inner, True) if kind == "sum" else prod(wide, inner, True)
    kept = [a for a in range(x.ndim) if a not in steps]
    count = reduced_count(x, steps)
    moved = reshape(transpose(wide, list(steps) + kept), (count,) + tuple(wide.shape[a] for a in kept))
    attributes = {"axis": 0, "kind": "add" if kind == "sum" else "mul", "rounding": tensor_type((), np.float16).element}
    last = cast(current_context().emit(T.ScanOp, [moved], attributes)[count - 1], np.float16)
    shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape) if keepdims or a not in axes)
    return strong(reshape(last, shape))


def _reduce_kind(kind, x, axis, keepdims, dtype):
    if kind in ("sum", "prod") and x.dtype == np.float16 and dtype in (None, np.float16):
        axes = reduction_axes(axis, x.ndim)
        steps = half_rounding_steps(x.shape, axes)
        if steps:
            return _half_sequential(kind, x, axes, steps, keepdims)
    if kind == "prod":
        return prod(x, axis, keepdims, dtype)
    if kind in ("any", "all"):
        return any_all(kind, x, axis, keepdims)
    return reduce(kind, x, axis, keepdims, dtype)


def reduce_where(kind: str, x, axis=None, keepdims=False, dtype=None, initial=None, where=None) -> Tracer:
    """np.sum, prod, max, min, any or all (`kind`) with numpy's `initial` (a value every
    reduction starts from: the result of an empty one) and `where` (a bool mask broadcast
    against `x`: the elements taken; the others count as the identity, or as `initial` for
    max and min, which have none and so need it, as in numpy)."""
    x = as_tracer(x)
    axes = reduction_axes(axis, x.ndim)
    if where is not None:
        mask = where if isinstance(where, Tracer) else lift(current_context(), where, np.asarray(where).dtype)
        if mask.dtype != np.bool_:
            raise DTypeError(f"np.{kind}(where=...) takes a bool mask, got {mask.dtype}", user_location())
        if broadcast_shapes(mask.shape, x.shape) != x.shape:
            raise ShapeError(
                f"np.{kind}: the where= mask {mask.shape} does not broadcast to {x.shape}", user_location()
            )
        if kind in ("max", "min") and initial is None:
            raise ArgumentError(
                f"np.{kind} has no identity, so a where= mask needs initial= (the value of a reduction "
                "with no element taken), as in numpy",
                user_location(),
            )
        fill = initial if kind in ("max", "min") else _IDENTITIES[kind]
        x = strong(np.where(mask, x, lift(current_context(), fill, x.dtype)))
    if initial is None:
        return _reduce_kind(kind, x, axes, keepdims, dtype)
    if kind in ("max", "min") and any(x.shape[a] == 0 for a in axes):
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape) if keepdims or a not in axes)
        return strong(broadcast_to(lift(current_context(), initial, x.dtype), shape))
    result = _reduce_kind(kind, x, axes, keepdims, dtype)
    start = lift(current_context(), initial, result.dtype)
    return strong(cast(_COMBINE[kind](result, start), result.dtype))


def count_where(x, axis, keepdims, where) -> Tracer:
    """How many elements of `x` each reduction over `axis` takes under the mask `where`, as int64."""
    mask = where if isinstance(where, Tracer) else lift(current_context(), np.asarray(where), np.bool_)
    mask = broadcast_to(cast(mask, np.bool_), broadcast_shapes(mask.shape, x.shape))
    return reduce("sum", cast(mask, np.int64), axis, keepdims)


def divide_by_count(total: Tracer, count: Tracer) -> Tracer:
    """total / count as numpy's mean divides by a count array: in float64, rounded once to the
    total's dtype (0 / 0 is nan)."""
    wide = total if total.dtype == np.float64 else cast(total, np.float64)
    return strong(cast(np.true_divide(wide, cast(count, np.float64)), total.dtype))


def mean_where(x, axis=None, dtype=None, keepdims=False, where=None) -> Tracer:
    """np.mean(x, where=mask): the sum of the elements taken over their count."""
    x = as_tracer(x)
    if where is None:
        return mean(x, axis, dtype, keepdims)
    if dtype is None:
        dtype = x.dtype if x.dtype.kind == "f" else np.float64
    total = reduce_where("sum", x, axis, keepdims, dtype, where=where)
    return divide_by_count(total, count_where(x, axis, keepdims, where))


def var_where(x, axis=None, dtype=None, ddof=0, keepdims=False, where=None, mean=None) -> Tracer:
    """np.var with numpy 2's `mean` (the mean already computed, in keepdims shape, used instead
    of computing it again) and `where` (a mask of the elements taken), as numpy's _var: the
    squared deviations summed and divided by max(count - ddof, 0)."""
    x = as_tracer(x)
    if where is None and mean is None:
        return var(x, axis, dtype, ddof, keepdims)
    if dtype is None and x.dtype.kind != "f":
        dtype = np.float64
    axes = reduction_axes(axis, x.ndim)
    if where is None:
        count = lift(current_context(), np.int64(reduced_count(x, axes)), np.int64)
        count_kept = count
    else:
        count = count_where(x, axes, keepdims, where)
        count_kept = count_where(x, axes, True, where)
    if mean is None:
        mean = divide_by_count(reduce_where("sum", x, axes, True, dtype, where=where), count_kept)
    deviation = np.subtract(x, mean)
    if where is not None:
        # Zeroed rather than only left out of the sum, so that a NaN or inf left out gives no
        # NaN gradient (0 * inf) through the square.
        deviation = np.where(where, deviation, 0)
    squares = _reduce_kind("sum", deviation * deviation, axes, keepdims, dtype)
    return divide_by_count(squares, np.maximum(count - ddof, 0))
