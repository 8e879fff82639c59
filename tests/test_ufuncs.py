"""numpy's elementwise ufuncs and operators at their edges, on every target: integer division
and shifts at the integer extremes (never a trap), float remainder and floor division with
signed zeros, infinities and NaN, the math functions on special values, the errors, and
which constants fold. The op table holds the everyday cases; these are the corners."""

import itertools
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln

TARGETS = ["interpret", "cpu", "cuda-emulate"]


def numpy_result(fn, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def assert_exactly(got, want):
    """Same dtype and shape, equal values, NaN where numpy has NaN, and the same sign bits
    (so -0.0 is not 0.0; a NaN's sign is not part of numpy's answer)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def pairs(values, dtype):
    """Every (a, b) of `values`, as two flat arrays of 67 or more elements (vector loops and a
    remainder loop both run)."""
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(values, repeat=2)))
    repeat = -(-67 // a.size)
    return np.tile(a, repeat), np.tile(b, repeat)


def int_values(dtype):
    info = np.iinfo(dtype)
    return [0, 1, -1, 2, -2, 3, -3, 7, -7, int(info.max), int(info.min), int(info.min) + 1, int(info.max) - 1]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize(
    "name, fn",
    [
        ("//", lambda a, b: a // b),
        ("%", lambda a, b: a % b),
        ("fmod", np.fmod),
        ("divmod", lambda a, b: np.divmod(a, b)[0] * 3 + np.divmod(a, b)[1]),
    ],
)
def test_integer_division_at_the_extremes_is_numpys_and_never_traps(name, fn, dtype, target):
    """x // 0 and x % 0 are 0, MIN // -1 wraps to MIN, quotients round toward -inf and
    remainders take the divisor's sign: LLVM's sdiv and srem would trap on the first two."""
    a, b = pairs(int_values(dtype), dtype)
    assert_exactly(kiln.compile(fn, target=target)(a, b), numpy_result(fn, a, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_shifts_by_any_count_are_numpys(dtype, target):
    """Counts at or past the width give 0 (<<) or the sign fill (>>), negative counts too."""
    bits = np.iinfo(dtype).bits
    counts = [0, 1, 5, bits - 2, bits - 1, bits, bits + 1, 2 * bits + 3, -1, -bits, -(bits + 1)]
    values = [0, 1, -1, 5, -5, int(np.iinfo(dtype).max), int(np.iinfo(dtype).min)]
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(values, counts)))
    for fn in (np.left_shift, np.right_shift):
        assert_exactly(kiln.compile(fn, target=target)(a, b), numpy_result(fn, a, b))


FLOAT_SPECIALS = [0.0, -0.0, 1.5, -1.5, 3.0, -3.0, 0.5, 7.25, -1e-30, np.inf, -np.inf, np.nan, 1e30]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [np.remainder, np.floor_divide, np.fmod], ids=lambda f: f.__name__)
def test_float_remainder_and_floor_division_match_numpy_bit_for_bit(fn, dtype, target):
    """numpy's npy_divmod: division by zero, infinities, NaN and the sign of zero results."""
    a, b = pairs(FLOAT_SPECIALS, dtype)
    assert_exactly(kiln.compile(fn, target=target)(a, b), numpy_result(fn, a, b))


EXACT_UNARY = [np.floor, np.ceil, np.trunc, np.rint, np.sign, np.signbit, np.isnan, np.isinf, np.isfinite, np.fabs]
EXACT_BINARY = [np.copysign, np.fmax, np.fmin, np.heaviside]
ROUNDING_VALUES = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, 1e30, -1e-30, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_functions_on_special_values(dtype, target):
    """Rounding, signs and classification: exactly numpy's, -0.0 and NaN's sign bit included."""
    x = np.array(ROUNDING_VALUES + [-v for v in ROUNDING_VALUES], dtype)
    x[-1] = -np.nan  # a NaN with its sign bit set: signbit and copysign read it
    for fn in EXACT_UNARY:
        assert_exactly(kiln.compile(fn, target=target)(x), numpy_result(fn, x)), fn.__name__
    # no equal pair of nonzero floats: numpy's fmax and fmin give either zero at a tie of 0.0
    # and -0.0, by array size (its SIMD and scalar loops differ), so only NaN-free ties are checked
    y = np.roll(x, 3)
    for fn in EXACT_BINARY:
        got, want = kiln.compile(fn, target=target)(x, y), numpy_result(fn, x, y)
        ties = (x == y) & (x == 0) & (fn in (np.fmax, np.fmin))
        assert_exactly(np.where(ties, 0, got), np.where(ties, 0, want))


TRANSCENDENTAL = {
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "arcsin": np.arcsin,
    "arccos": np.arccos,
    "arctan": np.arctan,
    "arcsinh": np.arcsinh,
    "arccosh": np.arccosh,
    "arctanh": np.arctanh,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "exp2": np.exp2,
    "log2": np.log2,
    "log10": np.log10,
    "cbrt": np.cbrt,
    "deg2rad": np.deg2rad,
    "rad2deg": np.rad2deg,
    "arctan2": lambda x: np.arctan2(x, x[::-1]),
    "hypot": lambda x: np.hypot(x, x[::-1]),
    "logaddexp": lambda x: np.logaddexp(x, x[::-1]),
    "logaddexp2": lambda x: np.logaddexp2(x, x[::-1]),
    "float_power": lambda x: np.float_power(x, 3),
    "reciprocal": np.reciprocal,
}
EDGE_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-7, -1e-7, 1e-30, 100.0, -100.0, 1e30, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", TRANSCENDENTAL)
def test_math_functions_at_their_edges(name, dtype, target):
    """Outside the domain NaN, poles and overflow infinities, zeros signed as numpy's, and
    values within 2e-6 (float32) or 1e-12 (float64) relative elsewhere, as in the op table."""
    fn = TRANSCENDENTAL[name]
    x = np.resize(np.array(EDGE_VALUES, dtype), 67)
    want = numpy_result(fn, x)
    got = kiln.compile(fn, target=target)(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))
    tol = 2e-6 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=0)


def test_hypot_does_not_overflow_or_underflow_in_the_squares():
    x = np.array([3e200, 3e-200, 1e308, 0.0, np.inf, np.nan])
    y = np.array([4e200, 4e-200, 1e308, -0.0, np.nan, -np.inf])
    np.testing.assert_allclose(kiln.compile(np.hypot)(x, y), np.hypot(x, y), rtol=1e-15)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_modf_signs_its_parts_as_c_does(dtype, target):
    x = np.array(ROUNDING_VALUES + [-v for v in ROUNDING_VALUES] + [-3.0, 1e-45, -1e30], dtype)
    got, want = kiln.compile(np.modf, target=target)(x), numpy_result(np.modf, x)
    for g, w in zip(got, want):
        assert_exactly(g, w)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_reciprocal_is_numpys_integer_division(target):
    """numpy's 1 / x in the integer type, through a float: 0 gives the minimum, 1 and -1
    are kept, everything else truncates to 0."""
    for dtype in (np.int32, np.int64):
        x = np.array(int_values(dtype), dtype)
        assert_exactly(kiln.compile(np.reciprocal, target=target)(x), numpy_result(np.reciprocal, x))


@pytest.mark.parametrize("target", TARGETS)
def test_round_to_decimals_as_numpy(target):
    x = np.array([1.2345, 2.5, -2.5, 0.125, -0.0, 1234.5678, 1e300, np.inf, np.nan], np.float64)
    for decimals in (-3, -1, 0, 1, 2, 5, 30):
        fn = lambda v, d=decimals: np.round(v, d)  # noqa: E731
        assert_exactly(kiln.compile(fn, target=target)(x), fn(x))
        assert_exactly(kiln.compile(fn, target=target)(x.astype(np.float32)), fn(x.astype(np.float32)))
    a = np.array([15, 25, -35, 149, -151, 2**31 - 1, -(2**31)], np.int32)
    for decimals in (-2, -1, 0, 3):
        fn = lambda v, d=decimals: np.around(v, d)  # noqa: E731
        assert_exactly(kiln.compile(fn, target=target)(a), numpy_result(fn, a))


@pytest.mark.parametrize("target", TARGETS)
def test_nan_to_num_keywords(target):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5], np.float32)
    cases = [
        lambda v: np.nan_to_num(v),
        lambda v: np.nan_to_num(v, nan=-9.0, posinf=1e300, neginf=-1),
        lambda v: np.nan_to_num(v, copy=False, posinf=np.float64(2.5)),
    ]
    for fn in cases:
        assert_exactly(kiln.compile(fn, target=target)(x), numpy_result(fn, x))
        assert_exactly(kiln.compile(fn, target=target)(x.astype(np.float64)), numpy_result(fn, x.astype(np.float64)))


def test_operators_and_their_in_place_forms_on_scalars_and_arrays():
    def f(a, n):
        b = a * 1
        b //= n
        b %= 7
        b <<= 1
        b >>= 1
        b |= 8
        b &= ~1
        b ^= 3
        q, r = divmod(b, -4)
        return q, r, 100 // a, 100 % a, 3 << (a & 7), -a >> 2, abs(-a), +a

    a = np.array([5, -5, 17, -17, 1, -1, 2**31 - 1], np.int32)
    got, want = kiln.compile(f)(a, 3), numpy_result(f, a, 3)
    for g, w in zip(got, want):
        assert_exactly(g, w)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=9),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=9),
)
def test_int64_division_and_shifts_agree_with_numpy_on_random_values(a, b):
    n = min(len(a), len(b))
    a, b = np.array(a[:n], np.int64), np.array(b[:n], np.int64)
    for fn in (np.floor_divide, np.remainder, np.fmod):
        assert_exactly(kiln.compile(fn)(a, b), numpy_result(fn, a, b))
    counts = b % 80 - 10
    for fn in (np.left_shift, np.right_shift):
        assert_exactly(kiln.compile(fn)(a, counts), numpy_result(fn, a, counts))


@pytest.mark.parametrize("fn", [lambda a: a << a, lambda a: a // a, lambda a: a % a, np.round, np.exp])
def test_bool_arithmetic_numpy_does_in_int8_or_float16_gives_numpy_dtype(fn):
    b = np.array([True, False, True])
    with np.errstate(all="ignore"):
        want = fn(b)
    got = kiln.compile(fn)(b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_bitwise_operators_on_floats_are_refused_as_numpy_refuses_them():
    x = np.ones(3, np.float32)
    for fn, name in ((lambda v: v & v, "bitwise_and"), (lambda v: ~v, "invert"), (lambda v: v << 1, "left_shift")):
        with pytest.raises(kiln.DTypeError, match=rf"np\.{name} does not take \(float32"):
            kiln.compile(fn)(x)


def test_round_needs_static_decimals_and_round_builtin_says_what_to_use():
    x = np.ones(3)
    with pytest.raises(kiln.ArgumentError, match="decimals must be a Python int"):
        kiln.compile(lambda v, d: np.round(v, d))(x, np.int32(1))
    with pytest.raises(kiln.ArgumentError, match=r"use np\.round\(x, decimals\)"):
        kiln.compile(lambda v: round(v))(x)


def test_integer_power_by_a_negative_exponent_still_raises_at_run_time():
    f = kiln.compile(lambda a, b: a**b)
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        f(np.array([2, 3], np.int32), np.array([1, -1], np.int32))


def test_transcendental_constants_are_left_to_the_target_and_exact_ones_fold():
    """numpy's libm and the target's may differ by an ulp in tan, log1p, ...: those are
    computed where the program runs; floor, copysign, fmod and shifts fold exactly."""

    def f(x):
        c = np.full_like(x, 0.7)  # a constant of the traced program (np.tan(0.7) would be numpy's own)
        return x + np.tan(c) + np.log1p(c) + np.floor(c * 3) + np.copysign(c, -1.0) + np.fmod(c, np.float32(0.3))

    text = kiln.compile(f).lower(kiln.f32[3]).text("optimized")
    assert "kiln.tan" in text and "kiln.log1p" in text
    assert not re.search(r"kiln\.(floor|copysign|fmod)\b", text), text
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(kiln.compile(f)(x), f(x), rtol=2e-6)
    g = kiln.compile(lambda a: a + (np.full_like(a, -5) >> 1) + (np.full_like(a, 7) // -2))
    assert not re.search(r"kiln\.(right_shift|floor_divide)\b", g.lower(kiln.i32[2]).text("optimized"))


def test_math_calls_stay_in_vector_loops():
    """Functions without an LLVM intrinsic are C library calls, one per lane of a vector."""
    fn = lambda x, y: np.log1p(x) + np.cbrt(y) * np.arcsinh(x) + np.tan(y) + x % y  # noqa: E731
    x, y = np.linspace(0.1, 3, 203, dtype=np.float32), np.linspace(-2, 2, 203, dtype=np.float32)
    lowered = kiln.compile(fn).lower(x, y)
    assert re.search(r"math\.log1p %\S+ : vector<\d+xf32>", lowered.text("scheduled"))
    np.testing.assert_allclose(kiln.compile(fn)(x, y), fn(x, y), rtol=2e-6, atol=1e-6)


def test_piecewise_constant_functions_have_zero_gradient():
    def loss(x):
        return np.sum(np.floor(x) + np.ceil(x) * np.rint(x) + np.trunc(x) + x // 0.5 + np.sign(x))

    x = np.array([0.3, -1.7, 2.2, 4.9])
    np.testing.assert_array_equal(kiln.grad(loss)(x), np.zeros(4))
