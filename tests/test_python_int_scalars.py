"""Python ints against integer arrays of every width, numpy 2 (NEP 50) as the oracle.

A comparison with a Python int is exact whatever its value; arithmetic with one that the
array's dtype cannot hold is numpy's OverflowError. Both as constants in the function body
(decided while tracing) and as traced arguments (decided when the compiled function is
called: one compiled function serves every value).
"""

import operator
import re
import warnings

import numpy as np
import pytest

import kiln

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def awkward_ints(dtype) -> list:
    """In range and just out of it on both sides, and past int64 and uint64."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    values = {-1, 0, 1, 7, lo, hi, lo - 1, hi + 1, 2**63 - 1, 2**63, -(2**63), 2**64 - 1}
    return sorted(values)


def sample(dtype) -> np.ndarray:
    """The dtype's extremes and a few values between, reversed and strided (a view)."""
    info = np.iinfo(dtype)
    base = np.array([info.min, info.max, 0, 1, info.max // 3, info.min // 2 + 1, 2], dtype)
    return np.repeat(base, 2)[::-2]


def numpy_or_error(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's int64 scalar wrap-around
        try:
            return fn(*args)
        except OverflowError as exc:
            return exc


def assert_matches(expected, got_fn):
    if isinstance(expected, OverflowError):
        with pytest.raises(OverflowError, match="out of bounds|does not fit"):
            got_fn()
    else:
        got = got_fn()
        assert np.asarray(got).dtype == np.asarray(expected).dtype
        np.testing.assert_array_equal(got, expected)


COMPARISONS = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]
ARITHMETIC = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.and_,
              operator.or_, operator.xor, np.maximum, np.minimum]  # fmt: skip


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_python_int_argument_compares_exactly_with_every_integer_width(dtype):
    a = sample(dtype)
    for op in COMPARISONS:
        compiled = kiln.compile(lambda x, s: (op(x, s), op(s, x)))
        for s in awkward_ints(dtype):
            if s >= 2**64 or s < -(2**63):
                continue  # not a traced argument: kiln asks for a static one (tested below)
            expected = (op(a, s), op(s, a))
            got = compiled(a, s)
            for e, g in zip(expected, got):
                np.testing.assert_array_equal(g, e, err_msg=f"{op.__name__}({dtype.__name__}, {s})")
        assert len(compiled.compilations) <= 2  # one trace for int64-sized values, one from 2**63 on


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.uint64, np.int64], ids=lambda d: np.dtype(d).name)
def test_a_python_int_constant_compares_exactly(dtype):
    a = sample(dtype)
    for s in awkward_ints(dtype) + [2**64, -(2**63) - 1, 2**70]:
        compiled = kiln.compile(lambda x: (x < s, s <= x, x == s, x != s))
        for e, g in zip((a < s, s <= a, a == s, a != s), compiled(a)):
            np.testing.assert_array_equal(g, e, err_msg=f"{dtype.__name__} vs {s}")


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_arithmetic_with_a_python_int_argument_that_does_not_fit_is_an_overflow_error(dtype):
    a = sample(dtype)
    for op in ARITHMETIC:
        compiled = kiln.compile(lambda x, s: op(x, s))
        for s in awkward_ints(dtype):
            if op in (operator.floordiv, operator.mod) and s == 0 or not -(2**63) <= s < 2**64:
                continue  # numpy's division by zero, not this rule; not a traced argument
            expected = numpy_or_error(op, a, s)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                assert_matches(expected, lambda: compiled(a, s))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.uint16, np.uint32], ids=lambda d: np.dtype(d).name)
def test_arithmetic_with_a_python_int_constant_that_does_not_fit_is_an_overflow_error(dtype):
    a = sample(dtype)
    info = np.iinfo(dtype)
    for s in (int(info.max) + 1, int(info.min) - 1, 2**64, int(info.max)):
        expected = numpy_or_error(lambda x: x + s, a)
        assert_matches(expected, lambda: kiln.compile(lambda x: x + s)(a))


def test_the_overflow_error_names_the_value_the_dtype_and_the_users_line():
    f = kiln.compile(lambda x, s: x + s)  # the line
    x = np.arange(3, dtype=np.int8)
    np.testing.assert_array_equal(f(x, 100), x + 100)
    with pytest.raises(kiln.IntegerOverflowError, match="Python integer 300 out of bounds for int8") as info:
        f(x, 300)
    assert re.search(r"test_python_int_scalars\.py:\d+: ", str(info.value))
    assert "# the line" in str(info.value)
    assert len(f.compilations) == 1  # the check is made per call, not by tracing again


def test_python_int_arithmetic_past_int64_is_an_error_not_a_wrapped_value():
    f = kiln.compile(lambda s, t: s * t + 1)
    assert f(3, 5) == 16
    assert f(2**31, 2**31) == 2**62 + 1
    for s, t in ((2**62, 4), (-(2**63), -1), (2**40, 2**40)):
        with pytest.raises(kiln.IntegerOverflowError, match=f"gives {s * t}, which does not fit in int64"):
            f(s, t)
    g = kiln.compile(lambda s: -s)
    with pytest.raises(OverflowError, match="does not fit in int64"):
        g(-(2**63))
    h = kiln.compile(lambda x, s: x + s * s)  # the exact square meets the uint8 array
    x = np.arange(4, dtype=np.uint8)
    np.testing.assert_array_equal(h(x, 15), x + 225)
    with pytest.raises(OverflowError, match="Python integer 256 out of bounds for uint8"):
        h(x, 16)


def test_a_python_int_from_2_63_on_meets_uint64_as_numpy_and_is_refused_elsewhere():
    f = kiln.compile(lambda x, s: x + s)
    u = np.array([0, 1, 2**62], np.uint64)
    np.testing.assert_array_equal(f(u, 2**63), u + 2**63)
    with pytest.raises(OverflowError):
        f(np.arange(3), 2**63)
    with pytest.raises(kiln.ArgumentError, match="static_argnames"):
        f(u, 2**64)


def test_clip_with_python_int_bounds_past_the_dtype_follows_numpy():
    for dtype in (np.uint8, np.int8, np.uint16):
        a = sample(dtype)
        for low, high in ((-5, 300), (-1000, 5), (0, 2**70), (-(2**70), -1), (300, 400), (3, 2**40)):
            expected = numpy_or_error(lambda x: np.clip(x, low, high), a)
            assert_matches(expected, lambda: kiln.compile(lambda x: np.clip(x, low, high))(a))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint64], ids=lambda d: np.dtype(d).name)
def test_clip_with_python_int_arguments_as_bounds_follows_numpy(dtype):
    a = sample(dtype)
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    compiled = kiln.compile(lambda x, low, high: np.clip(x, low, high))
    for low, high in (
        (-5, 300),
        (lo - 1, hi + 1),
        (lo, hi),
        (3, 5),
        (hi + 1, hi + 2),
        (-1, -1),
        (lo - 1, 2),
        (7, 2**63),
    ):
        if not all(-(2**63) <= v < 2**64 for v in (low, high)):
            continue  # not a traced argument
        expected = numpy_or_error(lambda x: np.clip(x, low, high), a)
        assert_matches(expected, lambda: compiled(a, low, high))


def test_where_converts_a_python_int_as_numpy_does():
    c = np.array([True, False, False])
    for dtype, s in ((np.int32, 2**40), (np.uint8, -1), (np.int8, 300), (np.int64, 5)):
        x = np.array([1, 2, 3], dtype)
        expected = np.where(c, x, s)
        assert_matches(expected, lambda: kiln.compile(lambda c, x: np.where(c, x, s))(c, x))
        assert_matches(expected, lambda: kiln.compile(lambda c, x, s: np.where(c, x, s))(c, x, s))


def _write_broadcast(x):
    y = np.broadcast_to(x, (2, 2))
    y[0, 0] = 1
    return y


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda x: x**-1, "Integers to negative integer powers are not allowed"),
        (lambda x: np.power(x, np.array([1, -2])), "Integers to negative integer powers are not allowed"),
        (lambda x: x[::0], "slice step cannot be zero"),
        (lambda x: np.insert(x, slice(None, None, 0), 5), "slice step cannot be zero"),
        (lambda x: np.take(x, [0], mode="bounce"), "clipmode must be one of"),
        (_write_broadcast, "assignment destination is read-only"),
    ],
)
def test_numpy_value_errors_while_tracing_name_the_users_line(fn, message):
    x = np.arange(2, dtype=np.int32)
    with pytest.raises(ValueError, match=message):
        fn(x)  # numpy's own
    with pytest.raises(kiln.InvalidValueError, match=message) as info:
        kiln.compile(fn)(x)
    assert re.search(r"test_python_int_scalars\.py:\d+: ", str(info.value))


def test_the_checks_guard_ahead_of_time_compiled_functions_and_gradients():
    x = np.arange(3, dtype=np.int8)
    compiled = kiln.compile(lambda x, s: x + s).lower(x, 1).compile()
    np.testing.assert_array_equal(compiled(x, 100), x + 100)
    with pytest.raises(kiln.IntegerOverflowError, match="Python integer 200 out of bounds for int8"):
        compiled(x, 200)

    def loss(w, x, s):
        return (w * (x + s).astype(np.float32)).sum()

    grad = kiln.compile(kiln.grad(loss))
    w = np.ones(3, np.float32)
    np.testing.assert_array_equal(grad(w, x, 5), (x + 5).astype(np.float32))
    with pytest.raises(kiln.IntegerOverflowError, match="Python integer 300 out of bounds for int8"):
        grad(w, x, 300)


def _store(x, s):
    y = x.copy()
    y[1] = s
    return y


@pytest.mark.parametrize("fn", [_store, lambda x, s: np.full_like(x, s)], ids=["setitem", "full_like"])
def test_storing_a_python_int_argument_checks_it_as_numpy_does(fn):
    for dtype in (np.uint8, np.int16, np.uint64):
        x = sample(dtype)
        compiled = kiln.compile(fn)
        for s in awkward_ints(dtype):
            if -(2**63) <= s < 2**64:
                assert_matches(numpy_or_error(fn, x, s), lambda: compiled(x, s))


# Python-int-only arithmetic on an argument, meeting an array: (name, fn(x, s)).
PYTHON_INT_EXPRESSIONS = [
    ("x + s*0", lambda x, s: x + s * 0),
    ("x + s//s", lambda x, s: x + s // s),
    ("x + s%7", lambda x, s: x + s % 7),
    ("x + (s-1)", lambda x, s: x + (s - 1)),
    ("x + (s+1)", lambda x, s: x + (s + 1)),
    ("x + -s", lambda x, s: x + (-s)),
    ("x + abs(s)", lambda x, s: x + abs(s)),
    ("x + (s&255)", lambda x, s: x + (s & 255)),
    ("x + (s|1)", lambda x, s: x + (s | 1)),
    ("x + (s^s)", lambda x, s: x + (s ^ s)),
    ("x + (s>>60)", lambda x, s: x + (s >> 60)),
    ("x + (s<<0)", lambda x, s: x + (s << 0)),
    ("x + s**1", lambda x, s: x + s**1),
    ("x + (s-s)", lambda x, s: x + (s - s)),
    ("x < s-1", lambda x, s: x < (s - 1)),
    ("x >= s//2", lambda x, s: x >= s // 2),
    ("x == s%3", lambda x, s: x == s % 3),
]
AROUND_THE_LIMITS = sorted(
    v + d for v in (2**63, 2**64 - 1, -(2**63)) for d in range(-3, 4) if -(2**63) <= v + d < 2**64
)


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8, np.uint64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name, fn", PYTHON_INT_EXPRESSIONS, ids=[n for n, _ in PYTHON_INT_EXPRESSIONS])
def test_python_int_arithmetic_past_int64_follows_the_exact_value(dtype, name, fn):
    """Only a result the computing dtype (int64, or uint64 from 2**63 on) cannot hold may raise,
    and it names that result; numpy (exact Python ints) is the oracle."""
    a = sample(dtype)
    compiled = kiln.compile(fn)
    for s in AROUND_THE_LIMITS:
        expected = numpy_or_error(fn, a, s)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = compiled(a, s)
        except kiln.IntegerOverflowError as exc:
            found = re.search(r"gives (-?\d+), which does not fit in (u?int64)", str(exc))
            if isinstance(expected, OverflowError) and "out of bounds" in str(exc):
                continue
            assert found, f"{name}, s={s}: {exc}"
            assert not fits_dtype(int(found[1]), found[2]), f"{name}, s={s}: {exc}"
            continue
        assert not isinstance(expected, OverflowError), f"{name}, s={s}: numpy raises {expected}"
        assert got.dtype == expected.dtype, f"{name}, s={s}"
        np.testing.assert_array_equal(got, expected, err_msg=f"{name}, s={s}")


def fits_dtype(value, dtype):
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_a_negative_python_int_exponent_on_unsigned_is_numpys_overflow_error_first(dtype):
    def power_assign(x):
        y = x.copy()
        y **= -2
        return y

    x = np.array([1, 2], dtype)
    for fn in (lambda x: x**-1, lambda x: np.power(x, -3), power_assign):
        with pytest.raises(OverflowError, match=f"Python integer -\\d out of bounds for {np.dtype(dtype).name}"):
            fn(x)
        with pytest.raises(
            kiln.IntegerOverflowError, match=f"Python integer -\\d out of bounds for {np.dtype(dtype).name}"
        ):
            kiln.compile(fn)(x)
    with pytest.raises(kiln.IntegerOverflowError, match="out of bounds"):
        kiln.compile(lambda x, s: x**s)(x, -1)
