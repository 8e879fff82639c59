"""numpy parity on corners the fuzzer found: maximum and minimum at signed zeros,
matmul of bool and integer arrays, and reductions over an axis of a 0-d array.
numpy's answer is the expected value throughout, compared bit for bit (the sign
of a zero, NaN, the dtype), on the CPU, the interpreter, the emulated CUDA and a
GPU where there is one."""

import warnings

import numpy as np
import pytest
from targets import TARGETS

import kiln
from kiln import KilnError


def run(fn, target, *args):
    return kiln.compile(fn, target=target)(*args)


def expected_of(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def assert_same(got, expected):
    """Equal in value, shape, dtype, NaN-ness and the sign of every zero. A NaN's sign is
    not compared: inf * 0 is -NaN on x86 and +NaN on a GPU."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind == "f":
        numbers = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got)[numbers], np.signbit(expected)[numbers])


# -- reductions over an axis of a 0-d array --------------------------------------------
ZERO_D_REDUCTIONS = {
    "sum0": lambda x: np.sum(x, axis=0),
    "sum-1-keepdims": lambda x: np.sum(x, axis=-1, keepdims=True),
    "max-1-keepdims": lambda x: np.max(x, axis=-1, keepdims=True),
    "min0": lambda x: np.min(x, axis=0),
    "amax0": lambda x: np.amax(x, axis=np.int64(0)),
    "prod-1": lambda x: np.prod(x, axis=-1),
    "any0": lambda x: np.any(x, axis=0),
    "all-1": lambda x: np.all(x, axis=-1, keepdims=True),
    "argmax0": lambda x: np.argmax(x, axis=0),
    "argmin-1-keepdims": lambda x: np.argmin(x, axis=-1, keepdims=True),
    "squeeze0": lambda x: np.squeeze(x, axis=0),
    "add.reduce-1": lambda x: np.add.reduce(x, axis=-1),
    "maximum.reduce0": lambda x: np.maximum.reduce(x, axis=0),
    "method": lambda x: x.max(axis=0) + x.sum(-1),
    "softmax": lambda x: kiln.softmax(x),
    "logsumexp-1": lambda x: kiln.logsumexp(x, axis=-1),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(ZERO_D_REDUCTIONS))
@pytest.mark.parametrize(
    "value",
    [np.array(2.0), np.array(-0.0, np.float32), np.array(np.nan), np.array(7, np.int32), np.array(True)],
    ids=repr,
)
def test_reduction_over_an_axis_of_a_0d_array(target, name, value):
    fn = ZERO_D_REDUCTIONS[name]
    if name in ("softmax", "logsumexp-1") and value.dtype.kind != "f":
        pytest.skip("float helpers")
    assert_same(run(fn, target, value), expected_of(fn, value))


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_of_a_python_float(target):
    """kiln.softmax(0.5) is 1.0 eagerly; so is the compiled softmax of a float argument."""
    assert_same(run(kiln.softmax, target, 0.5), kiln.softmax(0.5))
    assert_same(run(kiln.softmax, target, 0.5), np.float64(1.0))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: np.sum(x, axis=1),
        lambda x: np.sum(x, axis=(0,)),
        lambda x: np.max(x, axis=(-1,)),
        lambda x: np.mean(x, axis=0),
        lambda x: np.var(x, axis=-1),
        lambda x: np.std(x, axis=0),
        lambda x: np.argmax(x, axis=1),
        lambda x: np.squeeze(x, axis=(0,)),
    ],
    ids=["sum1", "sum(0,)", "max(-1,)", "mean0", "var-1", "std0", "argmax1", "squeeze(0,)"],
)
def test_0d_axes_numpy_rejects_are_rejected(fn):
    value = np.array(2.0)
    with pytest.raises(np.exceptions.AxisError):
        fn(value)
    with pytest.raises(KilnError, match="out of range"):
        run(fn, "cpu", value)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("axis", [(), 0, None])
def test_sum_over_no_axes_starts_at_zero(target, axis):
    """numpy's sum starts at 0.0, so a sum over no axes (or over a 0-d array) turns -0.0 into 0.0."""
    x = np.array([-0.0, 1.0, -0.0, np.nan, -np.inf], np.float32)
    fn = (lambda a: np.sum(a, axis=())) if axis == () else (lambda a: np.sum(a[0], axis=axis))
    assert_same(run(fn, target, x), expected_of(fn, x))


# -- matmul of bool and integer arrays ---------------------------------------------------
MATMUL_SHAPES = [
    ((2, 2), (2, 2)),
    ((1, 1), (1, 1)),
    ((3, 5), (5, 4)),
    ((7, 13), (13, 17)),
    ((16, 33), (33, 40)),
    ((0, 3), (3, 2)),
    ((3, 0), (0, 2)),
    ((2, 5, 7), (7, 3)),
    ((7,), (7,)),
    ((7,), (7, 4)),
    ((4, 7), (7,)),
]


def _operands(dtype, shapes, rng):
    if dtype == np.bool_:
        return [rng.random(s) < 0.25 for s in shapes]
    info = np.iinfo(dtype)  # the whole range, so sums of products wrap around as numpy's do
    return [rng.integers(info.min, info.max, s, dtype=dtype, endpoint=True) for s in shapes]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_of_bool_and_integer_arrays(target, dtype, shapes):
    a, b = _operands(dtype, shapes, np.random.default_rng(len(shapes[0]) * 100 + shapes[0][-1]))
    assert_same(run(lambda x, y: x @ y, target, a, b), expected_of(np.matmul, a, b))


@pytest.mark.parametrize("target", TARGETS)
def test_bool_matmul_examples(target):
    assert_same(run(lambda x: x @ x, target, np.ones((2, 2), bool)), np.ones((2, 2), bool))
    a = np.array([[True, False], [False, False]])
    assert_same(run(lambda x, y: x @ y, target, a, a.T), a @ a.T)
    views = np.random.default_rng(5).random((12, 10)) < 0.3  # strided, reversed and transposed views
    left, right = views[::-2, 1::3], views[:6, ::-2].T[:3]
    assert_same(run(lambda x, y: np.dot(x, y), target, left, right), np.dot(left, right))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("other", [np.int32, np.int64, np.float32])
def test_bool_matmul_with_another_dtype_promotes(target, other):
    rng = np.random.default_rng(3)
    a, b = rng.random((3, 4)) < 0.5, (rng.integers(-5, 5, (4, 2))).astype(other)
    assert_same(run(lambda x, y: x @ y, target, a, b), a @ b)
    assert_same(run(lambda x, y: x @ y, target, b.T, a.T), b.T @ a.T)


# -- maximum and minimum at signed zeros ---------------------------------------------------
SPECIAL = [-0.0, 0.0, np.nan, np.inf, -np.inf, 1.0, -1.0]


def _pairs(dtype, repeat):
    """Every ordered pair of special values, `repeat` times over (long arrays take the vector loops)."""
    left = np.array([a for a in SPECIAL for _ in SPECIAL] * repeat, dtype)
    right = np.array([b for _ in SPECIAL for b in SPECIAL] * repeat, dtype)
    return left, right


ELEMENTWISE = {
    "maximum": lambda x, y: np.maximum(x, y),
    "minimum": lambda x, y: np.minimum(x, y),
    "maximum-reversed-views": lambda x, y: np.maximum(x[::-1], y[::-1]),
    "minimum-strided": lambda x, y: np.minimum(x[:-1:3], y[1::3]),
    "relu": lambda x, y: kiln.relu(x) + kiln.relu(y) * 0,
    "maximum-0": lambda x, y: np.maximum(x, 0) - np.maximum(-0.0, y),
    "minimum-scalars": lambda x, y: np.minimum(x, -0.0) * np.minimum(0.0, y),
    "maximum-of-2d-transposed": lambda x, y: np.maximum(x.reshape(7, -1).T, y.reshape(7, -1).T),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("repeat", [1, 5])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_maximum_minimum_are_numpys(target, dtype, repeat, name):
    """np.maximum(a, b) is a where a > b or a is NaN, else b: np.maximum(0.0, -0.0) is -0.0."""
    x, y = _pairs(dtype, repeat)
    fn = ELEMENTWISE[name]
    assert_same(run(fn, target, x, y), expected_of(fn, x, y))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_zero_examples(target, dtype):
    zero, negative_zero = np.array([0.0], dtype), np.array([-0.0], dtype)
    assert_same(run(np.minimum, target, negative_zero, zero), np.minimum(negative_zero, zero))
    assert not np.signbit(run(np.minimum, target, negative_zero, zero)[0])
    assert np.signbit(run(np.minimum, target, zero, negative_zero)[0])
    assert np.signbit(run(np.maximum, target, zero, negative_zero)[0])
    assert_same(run(kiln.relu, target, negative_zero), np.maximum(negative_zero, 0))


@pytest.mark.parametrize("target", TARGETS)
def test_folded_maximum_minimum_are_numpys(target):
    """Constants fold to numpy's answer too (both operands known at compile time)."""

    def fn(x):
        zeros = np.zeros_like(x)
        return (
            np.maximum(zeros, -zeros),
            np.minimum(-zeros, zeros),
            np.maximum(-zeros, 0.0),
            np.minimum(zeros, np.full_like(x, np.nan)),
            np.clip(-zeros, 0.0, 1.0),
        )

    x = np.ones(5, np.float32)
    for got, want in zip(run(fn, target, x), fn(x)):
        assert_same(got, want)


CLIPS = {
    "scalars": lambda x, lo, hi: np.clip(x, lo[0], hi[0]),
    "python": lambda x, lo, hi: np.clip(x, -0.0, 0.0) + np.clip(x, 0.0, 1.0),
    "method": lambda x, lo, hi: x.clip(0.0, -0.0),
    "array-bounds": lambda x, lo, hi: np.clip(x, lo, hi),
    "one-element-bounds": lambda x, lo, hi: np.clip(x.reshape(-1, 1), lo[:1], hi[None, :1]),
    "row-bounds": lambda x, lo, hi: np.clip(x.reshape(-1, 1), lo[:, None], hi[0]),
    "low-only": lambda x, lo, hi: np.clip(x, lo, None),
    "high-only": lambda x, lo, hi: np.clip(x, None, hi[0]),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CLIPS))
def test_clip_is_numpys_at_signed_zeros_and_nan(target, dtype, name):
    """numpy clips between two one-element bounds keeping x where it equals a bound
    (np.clip(-0.0, 0.0, 1.0) is -0.0), but with larger bounds it is minimum(maximum(x, lo), hi)."""
    fn = CLIPS[name]
    for lo_value in SPECIAL:
        for hi_value in SPECIAL:
            x = np.array(SPECIAL * 3, dtype)
            lo, hi = np.full(x.shape, lo_value, dtype), np.full(x.shape, hi_value, dtype)
            assert_same(run(fn, target, x, lo, hi), expected_of(fn, x, lo, hi))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 17, 64, 1000])
def test_max_min_reductions_match_numpy_where_numpys_order_does_not_matter(target, dtype, n):
    """Away from mixed-sign zeros a reduction's answer is numpy's: NaN wins, and zeros of one sign keep it."""
    rng = np.random.default_rng(n)
    for zero in (0.0, -0.0):
        x = np.where(rng.random(n) < 0.5, zero, -rng.random(n) - 1).astype(dtype)
        for fn in (np.max, lambda a: np.min(-a), lambda a: np.max(a.reshape(1, -1)[:, ::-1], axis=1)):
            assert_same(run(fn, target, x), fn(x))
        x[n // 2] = np.nan
        assert_same(run(np.max, target, x), np.max(x))
        assert_same(run(np.min, target, x), np.min(x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 3, 8, 33, 1000])
def test_max_min_reductions_of_mixed_zeros_are_ieee(target, dtype, n):
    """Between zeros of both signs a reduction gives IEEE 754's answer, 0.0 for max and -0.0 for
    min, whatever the order (numpy's answer depends on its order of evaluation, see
    docs/reliability.md)."""
    rng = np.random.default_rng(n)
    x = np.where(rng.random(n) < 0.5, 0.0, -0.0).astype(dtype)
    x[0], x[-1] = -0.0, 0.0
    for arrangement in (x, x[::-1], np.roll(x, n // 2)):
        got_max, got_min = run(np.max, target, arrangement), run(np.min, target, arrangement)
        assert_same(got_max, dtype(0.0))
        assert_same(got_min, dtype(-0.0))
    rows = np.stack([x, x[::-1]])
    assert_same(run(lambda a: np.max(a, axis=1), target, rows), np.zeros(2, dtype))
    assert_same(run(lambda a: np.min(a.T, axis=0), target, rows), np.full(2, -0.0, dtype))


OUT_OF_RANGE_COMPARISONS = {
    "eq-above": lambda x: x == 2**40,
    "ne-above": lambda x: x != 2**40,
    "lt-above": lambda x: x < 2**40,
    "ge-above": lambda x: x >= 2**40,
    "gt-below": lambda x: x > -(2**40),
    "le-below": lambda x: x <= -(2**40),
    "int-on-the-left": lambda x: 2**40 > x,
    "np.less-int64-max": lambda x: np.less(x, 2**63 - 1),
    "np.greater_equal-below-int64": lambda x: np.greater_equal(-(2**70), x),
    "beside-in-range": lambda x: (x < 2**31) & (x == 5),
}


@pytest.mark.parametrize("target", TARGETS[:3])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("name", OUT_OF_RANGE_COMPARISONS)
def test_comparisons_with_python_ints_outside_the_dtype_are_exact(name, dtype, target):
    """NEP 50: numpy 2 compares an integer array with a Python int its dtype cannot hold
    exactly, instead of refusing it."""
    fn = OUT_OF_RANGE_COMPARISONS[name]
    info = np.iinfo(dtype)
    x = np.array([info.min, -1, 0, 5, info.max], dtype)[::-1]  # a reversed view too
    assert_same(run(fn, target, x), expected_of(fn, x))


def test_conj_of_a_real_array_is_the_array():
    """ndarray.conj and .conjugate return a real array itself (np.conj of bool is int8)."""
    b, x = np.array([True, False]), np.array([[1.5, -0.0]], np.float32).T
    assert_same(run(lambda b: b.conj(), "cpu", b), b.conj())
    assert_same(run(lambda x: x.conjugate() * 2, "cpu", x), x.conjugate() * 2)
    assert_same(run(lambda b: np.conj(b), "cpu", b), np.conj(b))


@pytest.mark.parametrize("target", TARGETS[:3])
def test_python_int_arguments_compare_exactly_and_never_wrap_into_int32(target):
    """A Python int argument is weak (NEP 50): compared with an int32 array it compares
    exactly whatever its value; used in int32 arithmetic it must fit, or numpy raises."""
    x = np.array([1, -2, 3, np.iinfo(np.int32).max], np.int32)
    compare = kiln.compile(lambda x, s: (x < s, x == s, s >= x), target=target)
    add = kiln.compile(lambda x, s: x + s, target=target)
    for s in (2, -(2**40), 2**33, 2**31, -(2**31), 2**63 - 1):
        for got, want in zip(compare(x, s), (x < s, x == s, s >= x)):
            assert_same(got, want)
    assert_same(add(x, 5), x + 5)
    assert_same(add(x, -(2**31)), x + -(2**31))
    for s in (2**31, 2**40, -(2**31) - 1):  # the same function, called with a wider int
        with pytest.raises(OverflowError):
            x + s
        with pytest.raises(kiln.IntegerOverflowError, match=f"Python integer {s} out of bounds for int32"):
            add(x, s)


@pytest.mark.parametrize("target", TARGETS[:3])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x**0.5,
        lambda x: np.power(x, 0.5),
        lambda x: x ** np.float32(0.5),
        lambda x: x**1.5,
        lambda x: x**2,
        lambda x: x**-1.0,
    ],
    ids=["**0.5", "power-0.5", "**f32(0.5)", "**1.5", "**2", "**-1"],
)
def test_scalar_powers_at_signed_zeros_and_infinities(fn, target):
    """numpy's float power loop takes the square root for a scalar exponent of 0.5, so
    (-0.0) ** 0.5 is -0.0 and (-inf) ** 0.5 is NaN, not pow's 0.0 and inf."""
    x = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, 4.0, -4.0, 2.0], np.float32)
    assert_same(run(fn, target, x), expected_of(fn, x))


@pytest.mark.parametrize(
    "fill, dtype",
    [
        (np.nan, np.int32),
        (np.inf, np.int32),
        (-np.inf, np.int64),
        (1e10, np.int32),
        (-2.7, np.int64),
        (np.float32(-1e20), np.int64),
    ],
)
def test_full_like_with_a_float_fill_into_integers_casts_as_numpy_does(fill, dtype):
    """numpy fills by an unsafe cast: NaN, infinities and out-of-range floats give the
    integer type's minimum on x86-64 (kiln's float-to-int rule), not an error."""
    x = np.zeros((2, 3), np.float32)
    fn = lambda x: np.full_like(x, fill, dtype=dtype)  # noqa: E731
    assert_same(run(fn, "cpu", x), expected_of(fn, x))
    assert_same(run(fn, "interpret", x), expected_of(fn, x))


def test_bool_array_squared_is_int8_as_numpy_squares_it():
    """numpy squares for a scalar exponent of 2, and the square of bool is int8; bool ** 3
    is int64 in numpy and kiln alike."""
    b = np.array([True, False])
    assert_same(run(lambda b: b**2, "cpu", b), b**2)
    assert_same(run(lambda b: b**3, "cpu", b), b**3)
