"""np.isclose, allclose, select, isin, searchsorted and digitize against numpy, on every target."""

import numpy as np
import pytest
from targets import TARGETS
from test_ops import assert_same

import kiln

SPECIAL = np.array([0.0, -0.0, 1.5, np.nan, np.inf, -np.inf, 1e-9, 3.0, -2.5, 1.5 + 1e-6])
INTS = np.array([-5, 0, 3, 2**31 - 1, -(2**31), 7, 3], np.int32)

CASES = [
    ("isclose", lambda a, b: np.isclose(a, b), (SPECIAL, SPECIAL[::-1])),
    (
        "isclose_equal_nan_tolerances",
        lambda a, b: np.isclose(a, b, 1e-3, 0.1, equal_nan=True),
        (SPECIAL, SPECIAL[::-1]),
    ),
    ("isclose_scalar", lambda a: np.isclose(a, 1.5), (SPECIAL.astype(np.float32),)),
    ("isclose_ints", lambda a: np.isclose(a, 3), (INTS,)),
    ("allclose", lambda a: np.allclose(a, a + 1e-9), (SPECIAL[np.isfinite(SPECIAL)],)),
    ("allclose_with_nan_is_false", lambda a: np.allclose(a, a), (SPECIAL,)),
    ("select", lambda a: np.select([a > 1, a < 0], [a, -a], default=7.0), (SPECIAL,)),
    ("select_promotes_lists", lambda a: np.select([a > 0], [1], default=a), (INTS,)),
    ("isin", lambda a: np.isin(a, [1.5, np.nan, 0.0]), (SPECIAL,)),
    ("isin_invert_traced", lambda a, t: np.isin(a, t, invert=True), (INTS, INTS[:3])),
    ("isin_empty", lambda a: np.isin(a, np.zeros(0, np.int32)), (INTS,)),
    # past 16 test elements the tests are sorted and searched (NaN equals nothing, -0.0 equals 0.0)
    ("isin_sorted_search", lambda a, t: np.isin(a, t), (np.tile(SPECIAL, 3)[::-1], np.tile(SPECIAL[::2], 4))),
    ("isin_sorted_search_invert", lambda a, t: np.isin(a, t, invert=True), (INTS, np.repeat(INTS, 3))),
    ("isin_sorted_search_int_float", lambda a: np.isin(a, np.arange(-40.0, 40.0, 0.5)), (INTS,)),
    (
        "isin_uint64_with_int64_compares",
        lambda a, t: np.isin(a, t),
        (INTS.astype(np.int64), np.arange(20, dtype=np.uint64)),
    ),
    ("searchsorted_left", lambda a, v: np.searchsorted(np.sort(a), v), (SPECIAL, SPECIAL[::-1])),
    ("searchsorted_right", lambda a, v: np.searchsorted(np.sort(a), v, side="right"), (SPECIAL, SPECIAL[::-1])),
    ("searchsorted_constant", lambda v: np.searchsorted([1, 3, 5], v), (INTS,)),
    ("searchsorted_sorter", lambda a, v: np.searchsorted(a, v, sorter=np.argsort(a)), (INTS, INTS[::-1])),
    ("digitize", lambda x: np.digitize(x, [0.0, 1.0, 2.0]), (SPECIAL,)),
    ("digitize_right", lambda x: np.digitize(x, [0.0, 1.0, 2.0], right=True), (SPECIAL,)),
    ("digitize_decreasing", lambda x: np.digitize(x, [3.0, 1.0, -1.0]), (SPECIAL,)),
    ("digitize_decreasing_right", lambda x: np.digitize(x, [3.0, 1.0, -1.0], right=True), (SPECIAL,)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, fn, args", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy(name, fn, args, target):
    with np.errstate(all="ignore"):
        want = fn(*args)
        got = kiln.compile(fn, target=target)(*args)
    assert_same(got, want)


def test_gradient_flows_through_select():
    x = np.array([-2.0, 0.5, 3.0])
    grad = kiln.grad(lambda x: np.sum(np.select([x > 1, x < 0], [x**2, -x], default=x * 3)))(x)
    np.testing.assert_allclose(grad, [-1.0, 3.0, 6.0])


@pytest.mark.parametrize(
    "fn, error, match",
    [
        (lambda x: np.select([x], [x]), kiln.DTypeError, "should be boolean"),
        (lambda x: np.select([x > 0], [x, x]), kiln.ShapeError, "same length"),
        (lambda x: np.digitize(x, [1.0, 0.0, 2.0]), kiln.ArgumentError, "monotonically"),
        (lambda x: np.digitize(x, x), kiln.ArgumentError, "constant bins"),
        (lambda x: np.searchsorted(x, x, side="middle"), kiln.ArgumentError, "side"),
    ],
)
def test_errors(fn, error, match):
    with pytest.raises(error, match=match):
        kiln.compile(fn)(np.arange(3.0))


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint16, np.int64, np.uint64, np.float16, np.float32, np.float64, np.bool_]
)
def test_isin_with_many_tests_matches_numpy_at_the_limits(dtype):
    rng = np.random.default_rng(3)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(0, 40, 211).astype(dtype)
        tests = rng.integers(0, 40, 53).astype(dtype)
        x[:2], tests[:2] = (info.min, info.max), (info.max, info.min)
    elif dtype == np.bool_:
        x, tests = rng.random(211) < 0.5, np.ones(53, bool)
    else:
        x, tests = rng.integers(-9, 9, 211).astype(dtype), rng.integers(-9, 9, 53).astype(dtype)
        x[:5], tests[:3] = (np.nan, -0.0, np.inf, -np.inf, 0.0), (np.nan, 0.0, -np.inf)
    for kw in ({}, {"invert": True}):
        assert_same(kiln.compile(lambda a, t: np.isin(a, t, **kw))(x, tests), np.isin(x, tests, **kw))


def test_isin_with_many_tests_has_no_loop_over_both():
    """Each element is searched for among the sorted tests (log m steps), not compared with all m."""
    affine = kiln.compile(lambda a, t: np.isin(a, t)).lower(kiln.f64[1000], kiln.f64[500]).text("affine")
    nests = affine.split("\n    affine.for ")
    both = [n for n in nests if "to 1000 " in n and "to 500 " in n]
    assert not both, both[0]
