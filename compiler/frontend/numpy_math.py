"""numpy's numerical helpers from its "Mathematical functions" and related sections: interp,
convolve, correlate, trapezoid, polyval, sinc, i0, unwrap, angle (of real input), lexsort,
array_equal, array_equiv and piecewise.

Each is numpy's own definition (numpy/lib/_function_base_impl.py, numpy/_core/numeric.py,
numpy/_core/src/multiarray/compiled_base.c for interp) written on traced values, mostly by
calling the numpy functions kiln already traces, so dtypes, NaN and infinity rules, lowering
and gradients come from those. Every result has a static shape.
"""

from __future__ import annotations

import numpy as np

from kiln.errors import ArgumentError, DTypeError, OutOfBoundsError, ShapeError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.numpy_compare import gather_in_bounds
from kiln.frontend.tracing import Tracer, current_context, user_location


def _array(x):
    """A Tracer as it is, anything else as numpy makes an array of it."""
    return x if isinstance(x, Tracer) else np.asarray(ops.check_operand(x) if np.ndim(x) == 0 else x)


def _traced(ctx, x, dtype=None):
    """`x` as a Tracer (of `dtype` when given): numpy's asarray(x, dtype) on traced values."""
    x = _array(x)
    return ops.lift(ctx, x, x.dtype if dtype is None else dtype)


# -- interp ------------------------------------------------------------------------------------
def _interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp: the piecewise-linear interpolant of (xp, fp) at x, float64 of x's shape.

    numpy's C loop (compiled_base.c, arr_interp) for each x: below xp[0] gives `left`
    (default fp[0]), above xp[-1] `right` (default fp[-1]); otherwise j is the last index with
    xp[j] <= x, and x equal to xp[j] (or j the last index) gives fp[j], else the line through
    (xp[j], fp[j]) and (xp[j+1], fp[j+1]), taken from the right end when the left one gives NaN
    (infinite fp), and fp[j] when that is NaN too and fp[j] == fp[j+1]. NaN x gives NaN, except
    with a single sample point, where it gives fp[0]. With `period`, x and xp are taken modulo
    the period and xp is sorted and extended by one point on each side (left/right ignored).
    Raises ShapeError for non-1-d or empty xp, fp of another length, or period 0."""
    ctx = current_context()
    x, xp, fp = (_traced(ctx, v, np.float64) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ShapeError(f"np.interp: xp and fp must be 1-d, got shapes {xp.shape} and {fp.shape}", user_location())
    if period is not None:
        if isinstance(period, Tracer):
            raise ArgumentError("np.interp needs a constant period", user_location())
        if period == 0:
            raise ShapeError("np.interp: period must be a non-zero value", user_location())
        if xp.shape != fp.shape:
            raise ShapeError("np.interp: fp and xp are not of the same length", user_location())
        period, left, right = abs(float(period)), None, None
        x, xp = np.mod(x, period), np.mod(xp, period)
        order = np.argsort(xp)
        xp, fp = np.take(xp, order), np.take(fp, order)
        xp = ops.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = ops.concatenate([fp[-1:], fp, fp[:1]])
    n = xp.shape[0]
    if n == 0:
        raise ShapeError("np.interp: array of sample points is empty", user_location())
    if fp.shape[0] != n:
        raise ShapeError("np.interp: fp and xp are not of the same length", user_location())
    low = fp[0] if left is None else _traced(ctx, left, np.float64)
    high = fp[-1] if right is None else _traced(ctx, right, np.float64)
    outside = [np.less(x, xp[0]), np.greater(x, xp[-1])]
    if n == 1:  # numpy's own branch: NaN x is neither below nor above, so it gets fp[0]
        return np.where(outside[0], low, np.where(outside[1], high, fp[0]))
    j = np.searchsorted(xp, x, side="right") - 1
    # both indices are clipped into the sample points, so their gathers need no check
    here = np.clip(j, 0, n - 1)
    on_point = np.logical_or(np.equal(j, n - 1), np.equal(gather_in_bounds(xp, here), x))
    j = np.clip(j, 0, n - 2)
    x0, x1 = gather_in_bounds(xp, j), gather_in_bounds(xp, j + 1)
    y0, y1 = gather_in_bounds(fp, j), gather_in_bounds(fp, j + 1)
    # x1 > x0 wherever the line is used; the guard keeps 0/0 out of the unused lanes' gradients
    slope = (y1 - y0) / np.where(np.equal(x1, x0), 1.0, x1 - x0)
    line = slope * (x - x0) + y0
    line = np.where(np.isnan(line), slope * (x - x1) + y1, line)
    line = np.where(np.logical_and(np.isnan(line), np.equal(y0, y1)), y0, line)
    inside = np.where(np.isnan(x), x, np.where(on_point, gather_in_bounds(fp, here), line))
    return np.where(outside[0], low, np.where(outside[1], high, inside))


# -- convolve and correlate ---------------------------------------------------------------------
_MODES = ("valid", "same", "full")


def _mode(mode) -> str:
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):
        if mode not in (0, 1, 2):
            raise ShapeError("integer convolve/correlate mode must be 0, 1, or 2", user_location())
        return _MODES[mode]
    if mode not in _MODES:
        raise ShapeError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})", user_location())
    return mode


def _vectors(name, a, v):
    """a and v as 1-d Tracers of their common dtype (numpy makes arrays of scalars, so Python
    numbers are strong here)."""
    ctx = current_context()
    dtype = np.result_type(ops.array_dtype(_array(a)), ops.array_dtype(_array(v)))
    a, v = _traced(ctx, a, dtype), _traced(ctx, v, dtype)
    a, v = (ops.reshape(t, (1,)) if t.ndim == 0 else t for t in (a, v))
    if a.ndim != 1 or v.ndim != 1:
        raise ShapeError(f"{name}: object too deep for desired array (shapes {a.shape}, {v.shape})", user_location())
    return a, v


# Above this many taps a sum of shifted slices (a few IR ops per tap) costs more to compile
# than the windows gathered into one matmul (an (outputs, taps) table) cost to run.
_MAX_TAPS = 128


def _windows_matmul(a, v, left, right, length):
    """The correlation through a gathered (length, m) table of a's windows times v: O(length *
    m) memory, kept for many taps (bool: any of and, as numpy's bool dot)."""
    m = v.shape[0]
    zeros = ops.lift(current_context(), np.zeros(1, a.dtype), a.dtype)
    padded = ops.concatenate([ops.broadcast_to(zeros, (left,)), a, ops.broadcast_to(zeros, (right,))])
    windows = np.take(padded, np.arange(length)[:, None] + np.arange(m))
    if a.dtype == np.bool_:
        return np.any(np.logical_and(windows, v), axis=-1)
    return np.matmul(windows, v)


def _tap_sum(a, v, left, start, stop):
    """Outputs start..stop-1 of the correlation: sum_j a[k + j - left] v[j] over the taps j =
    0..m-1 in order, each tap adding a slice of `a` times v[j] where it overlaps `a` (no
    product with the zero padding, so an infinite tap gives numpy's result at the ends)."""
    n, m = a.shape[0], v.shape[0]
    bool_ = a.dtype == np.bool_
    # numpy's float16 dot multiplies and adds in float32 and rounds once at the end
    work = np.float32 if a.dtype == np.float16 else a.dtype
    a, v = ops.cast(a, work), ops.cast(v, work)
    total = ops.full_like(a, 0, work, shape=(stop - start,))
    for j in range(m):
        lo, hi = max(start, left - j), min(stop, left - j + n)
        if hi <= lo:
            continue
        part = a[lo + j - left : hi + j - left]
        part = np.logical_and(part, v[j]) if bool_ else part * v[j]
        if (lo, hi) != (start, stop):
            zeros = ops.full_like(part, 0, work, shape=(1,))
            part = ops.concatenate(
                [ops.broadcast_to(zeros, (lo - start,)), part, ops.broadcast_to(zeros, (stop - hi,))]
            )
        total = np.logical_or(total, part) if bool_ else total + part
    return total


def _correlate_core(a, v, mode):
    """numpy's _pyarray_correlate for len(a) >= len(v): out[k] = sum_j a_padded[k + j] v[j],
    with a padded by len(v) - 1 zeros on each side ('full'), len(v) // 2 on the left and the
    rest on the right ('same') or none ('valid'). Each output is m multiply-adds, the taps
    summed in order j = 0..m-1 (numpy's own order where its dot is a loop: integers, bool,
    float16 in float32; for float32/64 numpy calls BLAS's dot, whose order may differ by an
    ulp or so): the outputs where every tap overlaps `a` as a sum of m shifted slices of it,
    the up to m - 1 outputs at each end apart. O(len(a) * m) work and no (outputs, taps)
    table, up to _MAX_TAPS taps."""
    n, m = a.shape[0], v.shape[0]
    left = {"valid": 0, "same": m // 2, "full": m - 1}[mode]
    right = {"valid": 0, "same": m - m // 2 - 1, "full": m - 1}[mode]
    length = n + left + right - m + 1
    if m > _MAX_TAPS:
        return _windows_matmul(a, v, left, right, length)
    pieces = [(0, left), (left, left + n - m + 1), (left + n - m + 1, length)]
    out = ops.concatenate([_tap_sum(a, v, left, start, stop) for start, stop in pieces if stop > start])
    return ops.cast(out, a.dtype)


def _correlate(a, v, mode="valid"):
    """np.correlate of two 1-d arrays (scalars count as length 1): out[k] = sum_n a[n + k] v[n],
    of length max(M, N) - min(M, N) + 1 ('valid'), max(M, N) ('same') or M + N - 1 ('full'),
    in result_type(a, v). When v is the longer numpy correlates the swapped pair and reverses
    the result; kiln does the same. Raises ShapeError for empty or multi-dimensional inputs
    and unknown modes (numpy's messages)."""
    mode = _mode(mode)
    a, v = _vectors("np.correlate", a, v)
    if a.shape[0] == 0:
        raise ShapeError("np.correlate: first array argument cannot be empty", user_location())
    if v.shape[0] == 0:
        raise ShapeError("np.correlate: second array argument cannot be empty", user_location())
    if v.shape[0] > a.shape[0]:
        return _correlate_core(v, a, mode)[::-1]
    return _correlate_core(a, v, mode)


def _convolve(a, v, mode="full"):
    """np.convolve: numpy's definition, the correlation of the longer operand with the shorter
    one reversed (shapes and dtype as np.correlate). Raises ShapeError for an empty operand."""
    mode = _mode(mode)
    a, v = _vectors("np.convolve", a, v)
    if a.shape[0] == 0:
        raise ShapeError("np.convolve: a cannot be empty", user_location())
    if v.shape[0] == 0:
        raise ShapeError("np.convolve: v cannot be empty", user_location())
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _correlate_core(a, v[::-1], mode)


# -- trapezoid, polyval, sinc, i0, unwrap, angle ------------------------------------------------
def _trapezoid(y, x=None, dx=1.0, axis=-1):
    """np.trapezoid: sum(d * (y[1:] + y[:-1]) / 2.0) along `axis`, d = dx or diff(x) (a 1-d x
    runs along `axis`), so the dtypes are numpy's (float y keeps its dtype, integer y with the
    default dx gives float64). Raises ShapeError where the pieces do not broadcast."""
    y = _array(y)
    ctx = current_context()
    y = _traced(ctx, y)
    axis = ops.normalize_axis(axis, y.ndim)
    if x is None:
        d = dx
    else:
        x = _array(x)
        if np.ndim(x) == 1:
            d = np.diff(x)
            shape = [1] * y.ndim
            shape[axis] = d.shape[0]
            d = np.reshape(d, shape)
        else:
            d = np.diff(x, axis=axis)
    upper = y[(slice(None),) * axis + (slice(1, None),)]
    lower = y[(slice(None),) * axis + (slice(None, -1),)]
    return np.sum(d * (upper + lower) / 2.0, axis=axis)


def _polyval(p, x):
    """np.polyval: Horner's rule y = y * x + p[i] from y = zeros_like(x), as numpy runs it, so
    the result has x's shape and numpy's dtype (p's elements are strong numpy scalars). p
    constant or traced, iterated along its first axis. Raises ArgumentError for a 0-d p."""
    p, x = _array(p), _array(x)
    if np.ndim(p) == 0:
        raise ArgumentError("np.polyval: iteration over a 0-d array (p must be a sequence)", user_location())
    y = np.zeros_like(x)
    for i in range(np.shape(p)[0]):
        y = y * x + p[i]
    return y


def _sinc(x):
    """np.sinc: sin(y) / y for y = pi * x, with y = 0 replaced by the dtype's eps (1e-20 for
    integers, whose pi * x is float64), numpy's definition; float dtypes are kept."""
    x = np.pi * _traced(current_context(), x)
    eps = np.finfo(x.dtype).eps if x.dtype.kind == "f" else 1e-20
    y = np.where(x, x, eps)
    return np.sin(y) / y


# numpy's Chebyshev coefficients for I0 on [0, 8] (A) and (8, inf) (B), from Cephes
_I0_A = [
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16,
    1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14,
    -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11,
    9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07,
    1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05,
    -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824,
    0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
    -0.02373741480589947, 0.04930528423967071, -0.09490109704804764,
    0.17162090152220877, -0.3046826723431984, 0.6767952744094761,
]  # fmt: skip
_I0_B = [
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
]  # fmt: skip


def _chbevl(x, coefficients):
    """numpy's _chbevl: Clenshaw's recurrence for a Chebyshev series, Python floats weak."""
    b0, b1, b2 = coefficients[0], 0.0, 0.0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _i0(x):
    """np.i0: the modified Bessel function of the first kind, order 0, by numpy's Chebyshev
    series (numpy/lib/_function_base_impl.py): exp(x) chbevl(x/2 - 2, A) for |x| <= 8, else
    exp(x) chbevl(32/x - 2, B) / sqrt(x). Float dtypes are kept, others become float64. Each
    branch sees its own lanes only (the others get a harmless 8.0), so neither its values nor
    its gradient can leak inf or NaN into the selected result."""
    x = _traced(current_context(), x)
    if x.dtype.kind != "f":
        x = ops.astype(x, np.float64)
    x = np.abs(x)
    small = np.less_equal(x, 8.0)
    near, far = np.where(small, x, 8.0), np.where(small, 16.0, x)
    below = np.exp(near) * _chbevl(near / 2.0 - 2, _I0_A)
    above = np.exp(far) * _chbevl(32.0 / far - 2.0, _I0_B) / np.sqrt(far)
    return np.where(small, below, above)


def _unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """np.unwrap: numpy's algorithm on traced values. Jumps between neighbours along `axis`
    larger than max(discont, period / 2) are reduced modulo `period` (a jump of exactly half a
    period keeps its sign); the corrections are accumulated (cumsum) and added. Result dtype
    result_type(diff(p), period): integer p with an integer period stays integer."""
    p = _traced(current_context(), p)
    axis = ops.normalize_axis(axis, p.ndim)
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(ops.promotion_sample(dd), ops.promotion_sample(ops.check_operand(period)))
    if np.issubdtype(dtype, np.integer):
        high, rem = divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = np.mod(dd - low, period) + low
    if ambiguous:
        ddmod = np.where(np.logical_and(np.equal(ddmod, low), np.greater(dd, 0)), high, ddmod).astype(dtype)
    correct = np.where(np.less(np.abs(dd), discont), 0, ddmod - dd).astype(dtype)
    tail = (slice(None),) * axis + (slice(1, None),)
    head = (slice(None),) * axis + (slice(None, 1),)
    rest = (p[tail] + np.cumsum(correct, axis=axis)).astype(dtype)
    return ops.concatenate([p[head].astype(dtype), rest], axis)


def _angle(z, deg=False):
    """np.angle of a real array: arctan2(0, z), so 0 for z >= +0.0, pi for z < 0 and -0.0,
    NaN for NaN, in degrees with deg=True; float64 for integer and bool z (numpy's arctan2)."""
    angle = np.arctan2(0, _traced(current_context(), z))
    return angle * (180 / np.pi) if deg else angle


# -- lexsort and comparisons of whole arrays ------------------------------------------------------
def _lexsort(keys, axis=-1):
    """np.lexsort: the int64 indices that sort by the last key, ties by the one before, and so
    on; stable. A stable sort by each key in turn, first key first, of the order found so far
    (each a kiln.sort, traced_ops.sort: NaN last, -0.0 equal to 0.0, as numpy).
    Keys: a sequence of equal-shape arrays or the rows of one array. Raises ArgumentError for
    no keys and ShapeError for keys of different shapes."""
    ctx = current_context()
    keys = [_traced(ctx, k) for k in (keys if isinstance(keys, (list, tuple)) else _array(keys))]
    if not keys:
        raise ArgumentError("np.lexsort: need sequence of keys with len > 0 in lexsort", user_location())
    if len({k.shape for k in keys}) > 1:
        raise ShapeError("np.lexsort: all keys need to be the same shape", user_location())
    axis = ops.normalize_axis(axis, keys[0].ndim)
    order = None
    for key in keys:
        if order is not None:
            key = np.take_along_axis(key, order, axis=axis)
        _, index = ops.sort(key, axis, with_values=False)
        order = index if order is None else np.take_along_axis(order, index, axis=axis)
    return order


def _array_equal(a1, a2, equal_nan=False):
    """np.array_equal as a 0-d bool: False when the shapes differ (decided while tracing),
    else whether all elements are equal, NaN equal to NaN with equal_nan=True."""
    ctx = current_context()
    a1, a2 = _traced(ctx, a1), _traced(ctx, a2)
    if a1.shape != a2.shape:
        return ops.lift(ctx, np.False_, np.bool_)
    same = np.equal(a1, a2)
    if equal_nan and (a1.dtype.kind == "f" or a2.dtype.kind == "f"):
        both_nan = np.logical_and(np.isnan(a1), np.isnan(a2))
        same = np.logical_or(same, both_nan)
    return np.all(same)


def _array_equiv(a1, a2):
    """np.array_equiv as a 0-d bool: False when the shapes do not broadcast, else whether all
    broadcast elements are equal."""
    ctx = current_context()
    a1, a2 = _traced(ctx, a1), _traced(ctx, a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return ops.lift(ctx, np.False_, np.bool_)
    return np.all(np.equal(a1, a2))


def _piecewise(x, condlist, funclist, *args, **kw):
    """np.piecewise: y = zeros_like(x), then for each condition in order y[cond] = func(x[cond])
    (or the scalar func), later conditions winning; a function more than there are conditions
    is the "otherwise" case (where no condition holds). Each callable is
    called on the whole of x and its result selected where its condition holds: for an
    elementwise func, func(x)[cond] equals numpy's func(x[cond]) lane by lane, and selection
    keeps the shape static. Results cast to x's dtype as numpy's item assignment does. Raises
    ShapeError for a wrong number of functions, OutOfBoundsError for conditions whose shape
    is not x's (numpy's boolean index error)."""
    ctx = current_context()
    x = _traced(ctx, x)
    arrays = (Tracer, np.ndarray, list)
    if np.isscalar(condlist) or isinstance(condlist, Tracer) and condlist.ndim < 2 and x.ndim != 0:
        condlist = [condlist]
    elif not isinstance(condlist, Tracer) and not isinstance(condlist[0], arrays) and x.ndim != 0:
        condlist = [condlist]
    conditions = [ops.cast(_traced(ctx, c), np.bool_) for c in condlist]
    n = len(conditions)
    if n == len(funclist) - 1:
        taken = np.any(ops.stack(conditions), axis=0) if conditions else ops.full_like(x, False, np.bool_)
        conditions.append(np.logical_not(taken))
    elif n != len(funclist):
        raise ShapeError(
            f"np.piecewise: with {n} condition(s), either {n} or {n + 1} functions are expected", user_location()
        )
    y = np.zeros_like(x)
    for condition, func in zip(conditions, funclist):
        if condition.shape != x.shape:
            raise OutOfBoundsError(
                f"np.piecewise: boolean index did not match indexed array: condition shape {condition.shape}, "
                f"x shape {x.shape}",
                user_location(),
            )
        value = func(x, *args, **kw) if callable(func) else func
        if not isinstance(value, Tracer) and np.asarray(value).dtype.kind == "c":
            raise DTypeError("np.piecewise: complex values are not supported", user_location())
        y = np.where(condition, ops.cast(_traced(ctx, value), x.dtype), y)
    return y


FUNCTION_RULES.update(
    {
        np.interp: _interp,
        np.convolve: _convolve,
        np.correlate: _correlate,
        np.trapezoid: _trapezoid,
        np.polyval: _polyval,
        np.sinc: _sinc,
        np.i0: _i0,
        np.unwrap: _unwrap,
        np.angle: _angle,
        np.lexsort: _lexsort,
        np.array_equal: _array_equal,
        np.array_equiv: _array_equiv,
        np.piecewise: _piecewise,
    }
)
