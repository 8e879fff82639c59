"""numpy's ufuncs that are compositions of kiln's tensor ops, and np.round / np.nan_to_num.

Each follows numpy's own C loop step for step (npy_sign, npy_heaviside, npy_logaddexp,
the fmax loop, round's multiply-rint-divide), so values, signed zeros and NaN come out as
numpy's; the lowering, fusion, both code generators and the gradients come with the ops
they are made of. Registered in ``UFUNC_RULES`` and ``FUNCTION_RULES`` at the bottom, like
the other area modules (the rules see operands numpy's type resolution has promoted and
broadcast, as in ``numpy_api.apply_ufunc``).
"""

from __future__ import annotations

import functools

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects.arith import float_to_int
from kiln.dialects.types import tensor_type
from kiln.errors import ArgumentError, DTypeError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend import views
from kiln.frontend.numpy_api import FUNCTION_RULES, UFUNC_RULES
from kiln.frontend.tracing import NUMPY_PROTOCOL, current_context, user_location


def _full(ctx, value, like):
    """`value` in `like`'s dtype, broadcast to its shape."""
    return ops.broadcast_to(ops.lift(ctx, np.array(value, like.dtype), like.dtype), like.shape)


def _select(ctx, condition, a, b):
    return ctx.emit(T.SelectOp, [condition, a, b])


def _cmp(ctx, a, b, predicate):
    return ctx.emit(T.CmpOp, [a, b], {"predicate": predicate})


def _either(ctx, a, b):
    return ctx.emit(T.OrOp, [a, b])


def _reciprocal(ctx, operands):
    (x,) = operands
    if x.dtype.kind == "f":
        return ctx.emit(T.DivOp, [_full(ctx, 1, x), x])
    # numpy computes 1 / x for integers through a float: 1 and -1 are themselves, other
    # values truncate to 0, and 1 / 0 (infinity) converts as every cast does (int32's
    # minimum, 0 in the narrower types: dialects.arith.float_to_int).
    by_zero = float_to_int(np.inf, x.dtype)[()]
    result = _select(ctx, _cmp(ctx, x, _full(ctx, 0, x), "eq"), _full(ctx, by_zero, x), _full(ctx, 0, x))
    for unit in (1, -1) if x.dtype.kind == "i" else (1,):
        result = _select(ctx, _cmp(ctx, x, _full(ctx, unit, x), "eq"), x, result)
    return result


def _on_floats(rule, otherwise=None):
    """`rule(ctx, x, ...)` where numpy computes in a float type; `otherwise` for integers and
    bools (numpy computes the functions without it in a float type whatever the inputs)."""

    def dispatch(ctx, operands):
        return (rule if operands[0].dtype.kind == "f" else otherwise)(ctx, *operands)

    return dispatch


def _float_only(op_class):
    """A float function that numpy also defines on integers and bools as the identity (floor, ...)."""
    return _on_floats(lambda ctx, *xs: ctx.emit(op_class, list(xs)), lambda ctx, x: x)


def _bool_full(ctx, value, like):
    return ops.broadcast_to(ops.lift(ctx, np.bool_(value), np.dtype(bool)), like.shape)


def _isnan(ctx, x):
    return _cmp(ctx, x, x, "ne")


def _isinf(ctx, x):
    return _cmp(ctx, ctx.emit(T.AbsOp, [x]), _full(ctx, np.inf, x), "eq")


def _isfinite(ctx, x):
    return _cmp(ctx, ctx.emit(T.AbsOp, [x]), _full(ctx, np.inf, x), "lt")


def _signbit(ctx, x):
    # copysign reads the sign bit of NaN and -0.0 too, where a comparison cannot
    return _cmp(ctx, ctx.emit(T.CopysignOp, [_full(ctx, 1, x), x]), _full(ctx, 0, x), "lt")


def _sign(ctx, operands):
    """numpy's npy_sign: 1, -1, 0 (+0.0 for -0.0) or NaN."""
    (x,) = operands
    zero = _full(ctx, 0, x)
    result = zero if x.dtype.kind != "f" else _select(ctx, _cmp(ctx, x, zero, "eq"), zero, x)
    if x.dtype.kind != "u":  # an unsigned value is never below 0
        result = _select(ctx, _cmp(ctx, x, zero, "lt"), _full(ctx, -1, x), result)
    return _select(ctx, _cmp(ctx, x, zero, "gt"), _full(ctx, 1, x), result)


def _heaviside(ctx, x, h0):
    """numpy's npy_heaviside: 0 below zero, 1 above, h0 at zero, NaN for NaN."""
    zero = _full(ctx, 0, x)
    result = _select(ctx, _cmp(ctx, x, zero, "eq"), h0, x)
    result = _select(ctx, _cmp(ctx, x, zero, "lt"), zero, result)
    return _select(ctx, _cmp(ctx, x, zero, "gt"), _full(ctx, 1, x), result)


def _nan_ignoring(predicate, int_op, bool_op):
    """np.fmax / np.fmin as numpy's loops compute them: a NaN operand loses to a number, and
    `a` wins only where it is strictly greater (less), so equal operands give `b`."""

    def rule(ctx, operands):
        a, b = operands
        if a.dtype.kind != "f":
            return ctx.emit(bool_op if a.dtype == np.bool_ else int_op, [a, b])
        return _select(ctx, _either(ctx, _cmp(ctx, a, b, predicate), _isnan(ctx, b)), a, b)

    return rule


def _logaddexp(log1p_of_exp, at_equal):
    """numpy's npy_logaddexp (npy_logaddexp2): equal operands (infinities of one sign
    included) give x + log(2) (x + 1); otherwise the larger plus log1p of the exponential
    of minus the difference; NaN if either is NaN."""

    def rule(ctx, x, y):
        difference = ctx.emit(T.SubOp, [x, y])
        zero = _full(ctx, 0, x)
        left = ctx.emit(T.AddOp, [x, log1p_of_exp(ctx, ctx.emit(T.NegOp, [difference]))])
        right = ctx.emit(T.AddOp, [y, log1p_of_exp(ctx, difference)])
        result = _select(ctx, _cmp(ctx, difference, zero, "le"), right, difference)
        result = _select(ctx, _cmp(ctx, difference, zero, "gt"), left, result)
        equal = ctx.emit(T.AddOp, [x, _full(ctx, at_equal, x)])
        return _select(ctx, _cmp(ctx, x, y, "eq"), equal, result)

    return rule


def _log1p_exp(ctx, x):
    return ctx.emit(T.Log1pOp, [ctx.emit(T.ExpOp, [x])])


def _log2_1p_exp2(ctx, x):
    log1p = ctx.emit(T.Log1pOp, [ctx.emit(T.Exp2Op, [x])])
    return ctx.emit(T.MulOp, [log1p, _full(ctx, 1 / np.log(2), x)])


def _hypot(ctx, x, y):
    """sqrt(x**2 + y**2) without overflow or underflow in the squares: the larger magnitude
    times sqrt(1 + ratio**2); an infinity wins over NaN, as in C's hypot."""
    ax, ay = ctx.emit(T.AbsOp, [x]), ctx.emit(T.AbsOp, [y])
    big, small = ctx.emit(T.MaximumOp, [ax, ay]), ctx.emit(T.MinimumOp, [ax, ay])
    zero, one = _full(ctx, 0, x), _full(ctx, 1, x)
    is_zero = _cmp(ctx, big, zero, "eq")
    ratio = ctx.emit(T.DivOp, [small, _select(ctx, is_zero, one, big)])
    root = ctx.emit(T.SqrtOp, [ctx.emit(T.AddOp, [one, ctx.emit(T.MulOp, [ratio, ratio])])])
    result = ctx.emit(T.MulOp, [big, root])
    return _select(ctx, _either(ctx, _isinf(ctx, x), _isinf(ctx, y)), _full(ctx, np.inf, x), result)


def _scale(factor):
    """x times `factor` rounded to x's dtype, as numpy's deg2rad and rad2deg compute it."""

    def rule(ctx, operands):
        (x,) = operands
        return ctx.emit(T.MulOp, [x, _full(ctx, factor(x.dtype.type), x)])

    return rule


def _invert(ctx, operands):
    (x,) = operands
    if x.dtype == np.bool_:
        return ctx.emit(T.NotOp, [x])
    all_ones = np.array(-1).astype(x.dtype) if x.dtype.kind == "u" else -1  # uint8: 255
    return ctx.emit(T.BitwiseXorOp, [x, _full(ctx, all_ones, x)])


def _divmod(ctx, operands):
    return ctx.emit(T.FloorDivideOp, operands), ctx.emit(T.RemainderOp, operands)


def _modf(ctx, operands):
    """(fractional part, integral part), both with x's sign, as C's modf: the fraction of an
    infinity is a signed zero, and of an integral value too (-3.0 gives -0.0)."""
    (x,) = operands
    whole = ctx.emit(T.TruncOp, [x])
    fraction = _select(ctx, _isinf(ctx, x), _full(ctx, 0, x), ctx.emit(T.SubOp, [x, whole]))
    return ctx.emit(T.CopysignOp, [fraction, x]), whole


def _ints_false(ctx, x):
    return _bool_full(ctx, False, x)


def _ints_true(ctx, x):
    return _bool_full(ctx, True, x)


def _round(a, decimals=0, out=None):
    """numpy's rounding to `decimals` (a Python int; negative rounds to tens, hundreds, ...):
    x * 10**decimals rounded half to even, divided back, in x's float type; integers are
    kept for decimals >= 0 and otherwise rounded through float64, as numpy does."""
    if out is not None:
        raise UnsupportedError("np.round(..., out=...) is not supported; use the returned value", user_location())
    x = ops.as_tracer(a)
    if isinstance(decimals, ops.Tracer) or not isinstance(decimals, (int, np.integer)):
        raise ArgumentError(f"np.round: decimals must be a Python int, got {decimals!r}", user_location())
    decimals = int(decimals)
    if x.dtype == np.bool_:  # numpy rounds bools in float16, and only to whole numbers
        if decimals:
            raise DTypeError(
                f"np.round of a bool array to {decimals} decimals: Cannot cast ufunc "
                f"'{'multiply' if decimals > 0 else 'divide'}' output from dtype('float64') to dtype('bool') "
                "with casting rule 'same_kind'",
                user_location(),
            )
        x = ops.astype(x, np.float16)
    if x.dtype.kind != "f" and decimals >= 0:
        return x
    factor = 1.0
    for _ in range(abs(decimals)):  # numpy's power_of_ten: 10.0 multiplied in, not 10.0 ** d
        factor *= 10.0
    y = x if x.dtype.kind == "f" else ops.astype(x, np.float64)
    if decimals >= 0:
        y = np.true_divide(np.rint(y * factor), factor)
    else:
        y = np.multiply(np.rint(y / factor), factor)
    return ops.astype(y, x.dtype)


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to `nan`, infinities to `posinf` / `neginf` (the dtype's largest and smallest
    finite values unless given), each converted to x's dtype; integers and bools unchanged."""
    x = ops.as_tracer(x)
    if x.dtype.kind != "f":
        return x
    info = np.finfo(x.dtype)
    result = x
    for value, default, test in (
        (nan, None, np.isnan(x)),
        (posinf, info.max, x == np.inf),
        (neginf, info.min, x == -np.inf),
    ):
        value = default if value is None else value
        if isinstance(value, ops.Tracer):
            value = ops.astype(value, x.dtype)
        else:
            with np.errstate(over="ignore"):  # numpy's copyto makes 1e300 inf in float32, too
                value = np.asarray(value, x.dtype)[()]
        result = np.where(test, value, result)
    return result


_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def bitcast(x, dtype):
    """x's elements' bits read as `dtype` of the same itemsize (``kiln.bitcast``); bool reads
    as 0 and 1 and is read back as nonzero, the only bytes a bool holds."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if np.bool_ in (x.dtype, dtype):
        return ops.cast(x, dtype)
    return current_context().emit(T.BitcastOp, [x], result_type=tensor_type(x.shape, dtype))


def _split_bytes(x, dtype):
    """Each element of x as len(x's itemsize / dtype's itemsize) elements of `dtype`, lowest
    bytes first (numpy's little-endian view), along a new last axis."""
    wide, narrow = _UINT[x.dtype.itemsize], _UINT[dtype.itemsize]
    bits = bitcast(x, wide)
    parts = [
        bitcast(ops.cast(np.right_shift(bits, wide.type(8 * dtype.itemsize * k)), narrow), dtype)
        for k in range(x.dtype.itemsize // dtype.itemsize)
    ]
    return ops.stack(parts, -1)


def _join_bytes(x, dtype):
    """Groups of len(dtype's itemsize / x's itemsize) elements along x's last axis joined into
    one element of `dtype`, the first lowest."""
    wide, narrow = _UINT[dtype.itemsize], _UINT[x.dtype.itemsize]
    count = dtype.itemsize // x.dtype.itemsize
    groups = ops.reshape(bitcast(x, narrow), x.shape[:-1] + (x.shape[-1] // count, count))
    result = None
    for k in range(count):
        part = np.left_shift(ops.cast(groups[..., k], wide), wide.type(8 * x.dtype.itemsize * k))
        result = part if result is None else np.bitwise_or(result, part)
    return bitcast(result, dtype)


def view(x, dtype=None, type=None):
    """numpy's ``x.view(dtype)``: the same bytes read as `dtype`. Of the same itemsize the
    shape is kept; otherwise the last axis (contiguous, as numpy requires) grows or shrinks
    by the ratio of the itemsizes, bytes read little-endian. The result is a view: writing
    it writes x, and x's writes show in it. ShapeError (a ValueError) with numpy's message
    where numpy refuses (0-d arrays, a last axis not contiguous or not divisible)."""
    if type is not None:
        raise UnsupportedError("ndarray.view(type=...): a traced array has no ndarray subclasses", user_location())
    if dtype is None:
        dtype = x.dtype
    dtype = ops.check_dtype(dtype, "ndarray.view")
    size, old = dtype.itemsize, x.dtype.itemsize
    if size != old:
        if x.ndim == 0:
            raise ShapeError(
                "Changing the dtype of a 0d array is only supported if the itemsize is unchanged", user_location()
            )
        if size > old and (x.shape[-1] * old) % size:
            raise ShapeError(
                "When changing to a larger dtype, its size must be a divisor of the total size in bytes of the "
                "last axis of the array.",
                user_location(),
            )
        if x.shape[-1] != 1 and views.strides_of(x)[-1] != 1:
            raise ShapeError(
                "To change to a dtype of a different size, the last axis must be contiguous", user_location()
            )

    def forward(base):
        if size == old:
            return bitcast(base, dtype)
        if size < old:
            parts = _split_bytes(base, dtype)
            return ops.reshape(parts, base.shape[:-1] + (base.shape[-1] * (old // size),))
        return _join_bytes(base, dtype)

    def backward(base, written):
        return view(written, base.dtype)

    result = ops.strong(forward(x))
    if size == old:
        return views.mark(result, x, forward, backward, views.strides_of(x))
    if views.is_c_contiguous(x.shape, views.strides_of(x)):
        return views.mark(result, x, forward, backward, views.c_strides(result.shape))
    return result  # numpy's view of a strided array: its own array here, written back only through x


def _float_format(dtype):
    """(fraction bits, exponent bias, the unsigned dtype of its bits) of an IEEE float dtype."""
    info = np.finfo(dtype)
    return info.nmant, info.maxexp - 1, _UINT[dtype.itemsize]


def _power_of_two(n, dtype):
    """2.0**n in `dtype` for an integer n of a normal exponent (1 - bias <= n <= bias): a
    constant for a Python int, else made from its bits (exact, where pow or exp2 need not be)."""
    if isinstance(n, int):
        return np.ldexp(dtype.type(1), n)
    fraction_bits, bias, unsigned = _float_format(dtype)
    field = np.left_shift(ops.cast(n + np.int64(bias), np.int64), np.int64(fraction_bits))
    return bitcast(ops.cast(field, unsigned), dtype)


def _smallest_subnormal(dtype):
    return np.array(1, _UINT[dtype.itemsize]).view(dtype)[()]


def _frexp(ctx, operands):
    """numpy's frexp: x = mantissa * 2**exponent with 0.5 <= |mantissa| < 1 and an int32
    exponent; 0, -0.0, infinities and NaN are their own mantissa with exponent 0. The
    exponent is read from the bits (a subnormal first scaled into the normal range by an exact
    power of two); the mantissa is x times 2**-exponent in two exact steps (2**1073 is past
    float64's range), so its gradient is 2**-exponent."""
    (x,) = operands
    fraction_bits, bias, unsigned = _float_format(x.dtype)
    exponent_mask = unsigned.type((1 << (8 * x.dtype.itemsize - 1 - fraction_bits)) - 1)
    lift = fraction_bits + 2
    subnormal = np.equal(
        np.bitwise_and(np.right_shift(bitcast(x, unsigned), unsigned.type(fraction_bits)), exponent_mask),
        unsigned.type(0),
    )
    y = np.where(subnormal, x * _power_of_two(lift, x.dtype), x)
    bits = bitcast(y, unsigned)
    field = np.bitwise_and(np.right_shift(bits, unsigned.type(fraction_bits)), exponent_mask)
    exponent = ops.cast(field, np.int32) - np.int32(bias - 1) - np.where(subnormal, np.int32(lift), np.int32(0))
    special = np.logical_or(np.equal(x, x.dtype.type(0)), np.logical_not(np.isfinite(x)))
    exponent = np.where(special, np.int32(0), exponent)
    half = np.floor_divide(exponent, np.int32(2))
    mantissa = x * _power_of_two(-half, x.dtype) * _power_of_two(half - exponent, x.dtype)
    # A signalling NaN comes out quiet (x + x) where the installed numpy's loop quiets it (C's
    # frexp, float16's through float) and unchanged where it copies x (numpy 2.4's float32 and
    # float64 loops): the rule changed between numpy versions, and kiln matches the one it runs with.
    nan = x + x if _frexp_quiets_nan(x.dtype) else x
    return np.where(np.isnan(x), nan, np.where(special, x, mantissa)), exponent


@functools.lru_cache(maxsize=None)
def _frexp_quiets_nan(dtype) -> bool:
    """Whether this numpy's frexp returns a signalling NaN of `dtype` quieted."""
    fraction_bits, _, unsigned = _float_format(np.dtype(dtype))
    exponent_ones = (1 << (8 * np.dtype(dtype).itemsize - 1)) - (1 << fraction_bits)
    signalling = np.array([exponent_ones | 1], unsigned).view(dtype)
    with np.errstate(invalid="ignore"):
        mantissa, _ = np.frexp(signalling)
    return bool(mantissa.view(unsigned)[0] >> (fraction_bits - 1) & 1)


def _ldexp(ctx, operands):
    """x * 2**n rounded once, subnormal and overflowing results included. float16 and float32
    are scaled exactly in float64 and rounded back once. float64 is C's scalbn (musl's): up to
    two scalings by 2**1023, or by 2**-969 (where a rounded intermediate implies a result
    below half the smallest subnormal: 0 either way), then one by 2**n made from its bits.
    An exponent past +-4096 is clamped first: the result is then 0 or inf whatever x is."""
    x, n = operands
    n = ops.cast(np.clip(n, n.dtype.type(-4096), n.dtype.type(4096)), np.int64)
    if x.dtype != np.float64:
        # |n| <= 300 covers float32's whole range, 2**-149 to 2**128, and float64 holds every product
        wide = ops.cast(x, np.float64) * _power_of_two(np.clip(n, np.int64(-300), np.int64(300)), np.dtype(np.float64))
        return ops.cast(wide, x.dtype)
    fraction_bits, bias, _ = _float_format(x.dtype)
    low, high = 1 - bias, bias
    down = low + fraction_bits + 1  # musl's 0x1p-1022 * 0x1p53
    y = x
    for _ in range(2):
        up_step, down_step = np.greater(n, np.int64(high)), np.less(n, np.int64(low))
        step = np.where(up_step, np.int64(high), np.where(down_step, np.int64(down), np.int64(0)))
        y = y * _power_of_two(step, x.dtype)
        n = n - step
    return y * _power_of_two(np.clip(n, np.int64(low), np.int64(high)), x.dtype)


def _detached(x):
    """x's value without its gradient: nextafter and spacing are step functions, whose
    derivative is 0 wherever it exists (as floor's and rint's are in passes/autodiff)."""
    return bitcast(bitcast(x, _UINT[x.dtype.itemsize]), x.dtype)


def _step_away(x, toward_larger_magnitude):
    """The float next to x (finite or infinite, not 0): its bits, read as a signed integer
    with the sign apart, plus or minus one."""
    signed = np.dtype(f"i{x.dtype.itemsize}")
    bits = bitcast(x, signed)
    one = signed.type(1)
    return bitcast(np.where(toward_larger_magnitude, bits + one, bits - one), x.dtype)


def _nextafter(ctx, operands):
    """numpy's nextafter: the float after x toward y; y where they are equal (so -0.0 toward
    0.0 is 0.0; float16's own loop, npy_half_nextafter, gives x there), the smallest
    subnormal with y's sign from zero, NaN if either is NaN (float16: numpy's one NaN)."""
    x, y = (_detached(v) for v in operands)
    zero = x.dtype.type(0)
    tiny = np.copysign(_smallest_subnormal(x.dtype), y)
    result = np.where(np.equal(x, zero), tiny, _step_away(x, np.equal(np.greater(y, x), np.greater(x, zero))))
    result = np.where(np.equal(x, y), x if x.dtype == np.float16 else y, result)
    # C's nextafter gives x + y for a NaN (quiet, its payload kept); float16's loop its one NaN
    either_nan = x + y if x.dtype != np.float16 else x.dtype.type(np.nan)
    return np.where(np.logical_or(np.isnan(x), np.isnan(y)), either_nan, result)


def _spacing(ctx, operands):
    """numpy's npy_spacing: the distance from x to the next float away from zero (negative for
    negative x), the smallest subnormal at either zero, NaN for infinities, a NaN quieted.
    float16's own loop (npy_half_spacing) steps toward +inf instead (spacing(-1.0) is
    +2**-11) and gives its one NaN for infinities and NaN."""
    x = _detached(operands[0])
    if x.dtype == np.float16:
        result = _nextafter(ctx, [x, _full(ctx, np.inf, x)]) - x
        return np.where(np.isfinite(x), result, x.dtype.type(np.nan))
    away = _step_away(x, np.bool_(True))
    result = np.where(np.equal(x, x.dtype.type(0)), _smallest_subnormal(x.dtype), away - x)
    result = np.where(np.isinf(x), x.dtype.type(np.nan), result)
    return np.where(np.isnan(x), x + x, result)


def _magnitude_bits(x):
    """|x| as the unsigned integer of x's width: -MIN wraps to 2**(bits-1), as numpy's C does."""
    unsigned = _UINT[x.dtype.itemsize]
    return ops.cast(np.where(np.less(x, x.dtype.type(0)), np.negative(x), x) if x.dtype.kind == "i" else x, unsigned)


def _bitwise_count(ctx, operands):
    """numpy 2's bitwise_count: the 1-bits of |x|, as uint8; the classic SWAR count (pairs,
    nibbles, bytes, then the bytes summed by one wrapping multiplication)."""
    v = _magnitude_bits(operands[0])
    t, bits = v.dtype.type, 8 * v.dtype.itemsize

    def pattern(byte):
        return t(int.from_bytes(bytes([byte]) * v.dtype.itemsize, "little"))

    v = v - np.bitwise_and(np.right_shift(v, t(1)), pattern(0x55))
    v = np.bitwise_and(v, pattern(0x33)) + np.bitwise_and(np.right_shift(v, t(2)), pattern(0x33))
    v = np.bitwise_and(v + np.right_shift(v, t(4)), pattern(0x0F))
    if bits > 8:
        v = np.right_shift(v * pattern(0x01), t(bits - 8))
    return ops.cast(v, np.uint8)


def _euclid_steps(bits: int) -> int:
    """How many remainder steps Euclid's algorithm takes at most on values below 2**bits:
    consecutive Fibonacci numbers are its worst case (Lamé)."""
    small, large, steps = 1, 2, 1
    while large < 2**bits:
        small, large, steps = large, small + large, steps + 1
    return steps + 1


def _gcd_lcm(want_lcm):
    """numpy's npy_gcd / npy_lcm: on the magnitudes (-MIN wraps to 2**(bits-1) read unsigned),
    Euclid's algorithm unrolled to its worst case; gcd(0, 0) is 0, lcm is |a| // gcd * |b|
    wrapped to the dtype (0 where either is 0)."""

    def rule(ctx, operands):
        a, b = operands
        unsigned = _UINT[a.dtype.itemsize]
        magnitudes = [_magnitude_bits(v) for v in (a, b)]
        low, high = magnitudes
        zero, one = unsigned.type(0), unsigned.type(1)
        for _ in range(_euclid_steps(8 * a.dtype.itemsize)):
            running = np.not_equal(low, zero)
            low, high = (
                np.where(running, np.remainder(high, np.where(running, low, one)), zero),
                np.where(running, low, high),
            )
        if not want_lcm:
            return ops.cast(high, a.dtype)
        first, second = magnitudes
        some = np.not_equal(high, zero)
        result = np.where(some, np.floor_divide(first, np.where(some, high, one)) * second, zero)
        return ops.cast(result, a.dtype)

    return rule


UFUNC_RULES.update(
    {
        np.reciprocal: _reciprocal,
        np.sign: _sign,
        np.floor: _float_only(T.FloorOp),
        np.ceil: _float_only(T.CeilOp),
        np.trunc: _float_only(T.TruncOp),
        np.signbit: _on_floats(_signbit, lambda ctx, x: _cmp(ctx, x, _full(ctx, 0, x), "lt")),
        np.isnan: _on_floats(_isnan, _ints_false),
        np.isinf: _on_floats(_isinf, _ints_false),
        np.isfinite: _on_floats(_isfinite, _ints_true),
        np.fmax: _nan_ignoring("gt", T.MaximumOp, T.OrOp),
        np.fmin: _nan_ignoring("lt", T.MinimumOp, T.AndOp),
        np.logaddexp: _on_floats(_logaddexp(_log1p_exp, np.log(2))),
        np.logaddexp2: _on_floats(_logaddexp(_log2_1p_exp2, 1)),
        np.hypot: _on_floats(_hypot),
        np.heaviside: _on_floats(_heaviside),
        np.deg2rad: _scale(lambda t: t(np.pi) / t(180)),
        np.rad2deg: _scale(lambda t: t(180) / t(np.pi)),
        np.radians: _scale(lambda t: t(np.pi) / t(180)),
        np.degrees: _scale(lambda t: t(180) / t(np.pi)),
        np.divmod: _divmod,
        np.modf: _modf,
        np.bitwise_xor: lambda ctx, operands: (
            _cmp(ctx, *operands, "ne") if operands[0].dtype == np.bool_ else ctx.emit(T.BitwiseXorOp, operands)
        ),
        np.invert: _invert,
        np.frexp: _frexp,
        np.ldexp: _ldexp,
        np.nextafter: _nextafter,
        np.spacing: _spacing,
        np.gcd: _gcd_lcm(want_lcm=False),
        np.lcm: _gcd_lcm(want_lcm=True),
        np.bitwise_count: _bitwise_count,
    }
)
FUNCTION_RULES.update({np.round: _round, np.around: _round, np.nan_to_num: _nan_to_num})
NUMPY_PROTOCOL.update(view=view)
