"""Sorting beyond the op table: numpy's stable order at every length (ties, NaN, infinities,
signed zeros, integer extremes), the partition property, kiln.top_k against its definition,
median and quantile against numpy, gradients of sorted values, and the errors."""

import warnings

import numpy as np
import pytest
from test_ops import assert_same

import kiln

rng = np.random.default_rng(1516)
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-30])


def interpreted(fn, *args):
    return kiln.compile(fn, target="interpret")(*args)


def assert_same_bits(got, want):
    """Equal values where NaN matches NaN and -0.0 only -0.0: the order of a stable sort exactly."""
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33])
def test_sort_and_argsort_are_numpys_stable_sort_at_every_length(n):
    floats = rng.choice(SPECIALS, (3, n)).astype(np.float32)
    ints = rng.integers(-3, 3, (n, 2))
    extremes = rng.choice(np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, -1], np.int32), (2, n))
    got = interpreted(lambda x: (np.sort(x), np.argsort(x)), floats)
    assert_same_bits(got[0], np.sort(floats, kind="stable"))
    assert_same(got[1], np.argsort(floats, kind="stable"))
    got = interpreted(lambda a: (np.sort(a, axis=0), np.argsort(a, axis=0)), ints)
    assert_same(got[0], np.sort(ints, axis=0))
    assert_same(got[1], np.argsort(ints, axis=0, kind="stable"))
    assert_same(interpreted(lambda a: np.argsort(a, kind="quicksort"), extremes), np.argsort(extremes, kind="stable"))


def test_native_sort_of_specials_and_bools():
    x = rng.choice(SPECIALS, (2, 5))
    b = rng.random((2, 3)) < 0.5
    got = kiln.compile(lambda x, b: (np.sort(x, axis=1), np.argsort(x, axis=None), np.sort(b), np.argsort(b)))(x, b)
    assert_same_bits(got[0], np.sort(x, axis=1, kind="stable"))
    assert_same(got[1], np.argsort(x, axis=None, kind="stable"))
    assert_same(got[2], np.sort(b))
    assert_same(got[3], np.argsort(b, kind="stable"))


@pytest.mark.parametrize("kth", [0, 3, -1, [1, 5], (0, 2, 6)])
def test_partition_has_the_partition_property(kth):
    x = rng.integers(-4, 4, (3, 7)).astype(np.float64)
    part, index = interpreted(lambda x: (np.partition(x, kth, axis=1), np.argpartition(x, kth, axis=1)), x)
    ordered = np.sort(x, axis=1)
    np.testing.assert_array_equal(np.take_along_axis(x, index, axis=1), part)
    for k in np.atleast_1d(kth) % 7:
        np.testing.assert_array_equal(part[:, k], ordered[:, k])
        assert np.all(part[:, :k] <= part[:, k : k + 1]) and np.all(part[:, k + 1 :] >= part[:, k : k + 1])
    np.testing.assert_array_equal(np.sort(part, axis=1), ordered)  # a permutation of each row


def reference_top_k(x, k):
    """The definition: positions ordered by value descending (NaN first), then by index."""
    out_values, out_index = [], []
    for row in x:
        keyed = sorted(range(len(row)), key=lambda i: (not np.isnan(row[i]), -np.nan_to_num(row[i], nan=0.0), i))
        out_index.append(keyed[:k])
        out_values.append(row[keyed[:k]])
    return np.array(out_values, x.dtype).reshape(len(x), k), np.array(out_index, np.int64).reshape(len(x), k)


@pytest.mark.parametrize("k", [0, 1, 3, 9])
def test_top_k_largest_first_ties_by_lower_index(k):
    x = rng.choice(np.array([np.nan, 2.0, 1.0, -np.inf, 0.0]), (4, 9))
    a = rng.integers(-2, 2, (4, 9)).astype(np.int32)
    for data in (x, a):
        want = reference_top_k(data, k)
        for got in (interpreted(lambda v: kiln.top_k(v, k), data), kiln.top_k(data, k)):
            assert_same(got[0], want[0])
            assert_same(got[1], want[1])
    got = interpreted(lambda v: kiln.top_k(v, k, axis=0), a.T)
    assert_same(got[1], reference_top_k(a, k)[1].T)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
def test_median_and_quantile_match_numpy(n):
    x = rng.standard_normal((3, n))
    x32 = x.astype(np.float32)
    a = rng.integers(-9, 9, (n, 2)).astype(np.int32)
    q = [0.0, 0.1, 0.5, 0.75, 0.999, 1.0]
    cases = (
        (lambda x: np.median(x, axis=1), x),
        (lambda x: np.median(x), x32),
        (lambda a: np.median(a, axis=0, keepdims=True), a),
        (lambda x: np.quantile(x, q, axis=1), x),
        (lambda x: np.quantile(x, 0.37, axis=1, keepdims=True), x32),
        (lambda x: np.quantile(x, np.float64(0.37)), x32),
        (lambda x: np.quantile(x, np.array(q, np.float32), axis=1), x32),
        (lambda a: np.quantile(a, 1, axis=0), a),
        (lambda a: np.percentile(a, [5, 50, 95], axis=0), a),
        (lambda x: np.percentile(x, 62.5, axis=(0, 1)), x),
    )
    for fn, data in cases:
        assert_same(interpreted(fn, data), fn(data))


def test_median_and_quantile_are_nan_where_the_slice_holds_nan():
    x = np.array([[1.0, np.nan, 3.0, 0.0], [4.0, 2.0, 5.0, -1.0], [np.nan] * 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in (lambda x: np.median(x, axis=1), lambda x: np.quantile(x, [0.2, 0.9], axis=1)):
            assert_same(kiln.compile(fn)(x), fn(x))


def test_gradient_of_sorted_values_goes_back_to_where_each_came_from():
    """d sum(w * sort(x)) / dx[argsort(x)[i]] = w[i]; top_k's values likewise."""
    x = rng.permutation(7).astype(np.float64).reshape(1, 7) - 3.0
    w = rng.standard_normal((1, 7))
    want = np.zeros_like(x)
    np.put_along_axis(want, np.argsort(x, axis=1), w, axis=1)
    np.testing.assert_allclose(interpreted(kiln.grad(lambda x: np.sum(np.sort(x, axis=1) * w)), x), want, rtol=1e-12)
    want = np.zeros_like(x)
    np.put_along_axis(want, np.argsort(-x, axis=1)[:, :4], w[:, :4], axis=1)
    top = kiln.grad(lambda x: np.sum(kiln.top_k(x, 4)[0] * w[:, :4]))
    np.testing.assert_allclose(interpreted(top, x), want, rtol=1e-12)


def test_errors_name_the_problem_and_the_alternative():
    x = np.arange(6.0).reshape(2, 3)
    cases = (
        (lambda x: np.unique(x), kiln.UnsupportedError, "depends on the data.*np.sort"),
        (lambda x: np.nonzero(x), kiln.UnsupportedError, "depends on the data.*np.where"),
        (lambda x: np.argwhere(x > 1), kiln.UnsupportedError, "np.argwhere"),
        (lambda x: np.flatnonzero(x), kiln.UnsupportedError, "np.flatnonzero"),
        (lambda x: np.extract(x > 1, x), kiln.UnsupportedError, "np.extract"),
        (lambda x: np.compress(x[0] > 1, x, axis=1), kiln.UnsupportedError, "np.compress"),
        (lambda x: np.sort(x, kind="bogo"), kiln.ArgumentError, "sort kind"),
        (lambda x: np.sort(x, order="f"), kiln.UnsupportedError, "structured"),
        (lambda x: np.sort(x, axis=2), kiln.ShapeError, "out of range"),
        (lambda x: np.partition(x, 3), kiln.ShapeError, "out of bounds"),
        (lambda x: np.quantile(x, 1.5), kiln.ArgumentError, r"range \[0, 1\]"),
        (lambda x: np.percentile(x, -1), kiln.ArgumentError, r"range \[0, 100\]"),
        (lambda x: np.quantile(x, x[0, 0] / 10), kiln.UnsupportedError, "traced q"),
        (lambda x: np.quantile(x, 0.5, method="nearest"), kiln.UnsupportedError, "linear"),
        (lambda x: np.quantile(x[:, :0], 0.5, axis=1), kiln.OutOfBoundsError, "empty axis"),
        (lambda x: kiln.top_k(x, 4), kiln.ShapeError, "k=4 is more than the axis' 3 elements"),
    )
    for fn, error, words in cases:
        with pytest.raises(error, match=words):
            interpreted(fn, x)
    with pytest.raises(kiln.ArgumentError, match="non-negative Python int"):
        kiln.top_k(x, -1)


def test_compress_and_extract_with_a_condition_known_while_tracing():
    x = rng.standard_normal((3, 5)).astype(np.float32)
    cases = (
        lambda x: np.compress([True, False, True, True, False], x, axis=1),
        lambda x: np.compress([0, 1], x, axis=0),  # shorter than the axis: the rest is left out
        lambda x: np.compress(np.zeros(5, bool), x, axis=-1),
        lambda x: np.compress([1, 0, 0, 1, 1, 1, 0], x),  # axis None: of the flattened array
        lambda x: np.extract(np.arange(15).reshape(3, 5) % 4 == 1, x),
    )
    for fn in cases:
        assert_same(interpreted(fn, x), fn(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_median_and_quantiles_skip_nan(dtype):
    x = rng.standard_normal((5, 9)).astype(dtype)
    x[rng.random((5, 9)) < 0.4] = np.nan
    x[3] = np.nan  # all NaN: NaN, as numpy (which warns)
    x[2, 1:] = np.nan  # one number
    cases = (
        lambda x: np.nanmedian(x, axis=1),
        lambda x: np.nanmedian(x, axis=0, keepdims=True),
        lambda x: np.nanquantile(x, [0.0, 0.3, 0.5, 1.0], axis=1),
        lambda x: np.nanquantile(x, np.float64(0.8), axis=1),
        lambda x: np.nanpercentile(x, 25, axis=(0, 1)),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in cases:
            assert_same(interpreted(fn, x), fn(x))
        assert_same(kiln.compile(cases[0])(x), cases[0](x))


def test_native_nanquantile_of_two_qs():
    x = np.array([[1.0, np.nan], [np.nan, 0.5], [3.0, 2.0]], np.float32)
    fn = lambda x: np.nanquantile(x, [0.2, 0.9], axis=0)  # noqa: E731
    assert_same(kiln.compile(fn)(x), fn(x))
