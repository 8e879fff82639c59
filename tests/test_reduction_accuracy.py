"""Float sums are at least about as accurate as numpy's pairwise summation.

Adding n float32 numbers into one accumulator loses about n/2 ulp when they share a
sign; numpy loses about log2(n). Every test measures errors against float64
``math.fsum`` of the same inputs (or an exact value), in float32 ulps of the result,
and allows kiln a small multiple of numpy's error, never less than a few ulps."""

import math
import warnings

import numpy as np
import pytest

import kiln

TENTH = float(np.float32(0.1))  # the float32 nearest 0.1, exactly


def ulps(got, exact) -> float:
    got = np.asarray(got, np.float64).reshape(-1)
    exact = np.asarray(exact, np.float64).reshape(-1)
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got - exact) / spacing))


def fsum(x, axis=None):
    """float64-exact sums of float32 `x`, over all of it or along `axis`."""
    x = np.asarray(x, np.float64)
    if axis is None:
        return math.fsum(x.reshape(-1))
    moved = np.moveaxis(x, axis, -1)
    return np.array([math.fsum(row) for row in moved.reshape(-1, moved.shape[-1])]).reshape(moved.shape[:-1])


def assert_as_accurate(got, numpy_result, exact, factor=3.0, floor=4.0):
    """kiln's error is at most `factor` times numpy's, or `floor` ulps."""
    mine, theirs = ulps(got, exact), ulps(numpy_result, exact)
    assert mine <= factor * max(theirs, floor), f"kiln {mine:.2f} ulp, numpy {theirs:.2f} ulp"


# -- the examples ---------------------------------------------------------------------
def test_mean_of_twenty_million_tenths():
    x = np.full(20_000_000, 0.1, np.float32)
    got = kiln.compile(lambda x: x.mean())(x)
    assert got.dtype == np.float32
    assert_as_accurate(got, x.mean(), TENTH)
    assert abs(float(got) - 0.1) < 1e-7  # it was 0.10108 (1.1% off)


def test_means_divide_once_as_numpy_does():
    """numpy divides the sum by the count (in float64, rounded once); sum x float32(1/n)
    rounds twice: 5 x float32(1/3) is 1.6666667, 5/3 is 1.6666666."""
    x = np.array([1.0, 2.0, 2.0], np.float32)
    assert kiln.compile(lambda x: x.mean())(x) == x.mean() == np.float32(5 / 3)
    rows = np.array([[1.0, 2.0, 2.0], [4.0, 0.5, 0.5]], np.float32)
    np.testing.assert_array_equal(kiln.compile(lambda x: x.mean(axis=1))(rows), rows.mean(axis=1))


def test_row_sums_of_four_rows_of_five_million():
    x = np.full((4, 5_000_000), 0.1, np.float32)
    got = kiln.compile(lambda x: x.sum(axis=1))(x)
    assert_as_accurate(got, x.sum(axis=1), np.full(4, 5_000_000 * TENTH))
    np.testing.assert_allclose(got, 500_000.0, rtol=1e-6)  # it was 0.3% off


# -- the rule: sizes, layouts, fused producers -------------------------------------------------
SIZES = [0, 1, 2, 7, 63, 64, 65, 127, 511, 512, 513, 4099, 65_537, 100_003, 1_000_003]


@pytest.mark.parametrize("n", SIZES)
def test_sum_and_mean_of_any_length(n):
    both = kiln.compile(lambda x: (x.sum(), x.mean()))
    for x in (np.full(n, 0.1, np.float32), np.random.default_rng(n).random(n, dtype=np.float32)):
        exact = fsum(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the mean of nothing is nan
            (total, mean), want_mean = both(x), x.mean()
        assert_as_accurate(total, x.sum(), exact)
        if n:
            assert_as_accurate(mean, want_mean, exact / n)


def test_float64_sums_use_the_tree_too():
    x = np.full(300_007, 0.1)
    exact = 300_007 * 0.1
    error, numpy_error = abs(kiln.compile(lambda x: x.sum())(x) - exact), abs(x.sum() - exact)
    assert error <= 3 * max(numpy_error, 4 * np.spacing(exact))


ROWS = (601, 1009)  # 606,409 elements: two primes
VIEWS = [  # (name, function, its exact value from fsum)
    ("reversed", lambda x: x[::-1].sum(), lambda x: fsum(x)),
    ("every third", lambda x: x[::3].sum(), lambda x: fsum(x[::3])),
    ("transposed rows", lambda x: x.reshape(ROWS).T.sum(axis=1), lambda x: fsum(x.reshape(ROWS), axis=0)),
    ("reversed rows", lambda x: x.reshape(ROWS)[:, ::-1].sum(axis=1), lambda x: fsum(x.reshape(ROWS), axis=1)),
    ("columns", lambda x: x.reshape(ROWS).sum(axis=0), lambda x: fsum(x.reshape(ROWS), axis=0)),
    ("both axes", lambda x: x.reshape(ROWS).sum(), lambda x: fsum(x)),
    ("keepdims", lambda x: x.reshape(ROWS).sum(axis=1, keepdims=True), lambda x: fsum(x.reshape(ROWS), axis=1)),
    # numpy rounds each square (each product) to float32 before adding, as kiln does
    ("squares (fused)", lambda x: (x * x).sum(), lambda x: fsum(x * x)),
    (
        "scaled rows (fused)",
        lambda x: (x.reshape(ROWS) * 2 + 1).sum(axis=1),
        lambda x: fsum(x.reshape(ROWS) * np.float32(2) + np.float32(1), axis=1),
    ),
]


@pytest.mark.parametrize("name, fn, exact", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_and_fused_producers(name, fn, exact):
    x = np.random.default_rng(3).random(ROWS[0] * ROWS[1], dtype=np.float32) + np.float32(0.5)
    want, got = fn(x), kiln.compile(fn)(x)
    assert np.shape(got) == np.shape(want)
    assert_as_accurate(got, want, exact(x))


def test_columns_of_a_tall_array_beat_numpy():
    """numpy adds rows one after another along axis 0 (n/2 ulp); kiln's tree does not. The
    column loop cannot be vectorized, so each of the leaf's accumulators adds 128 numbers
    (not 16 per vector lane): a few ulps more than a contiguous sum, but bounded."""
    x = np.full((1_000_003, 3), 0.1, np.float32)
    got = kiln.compile(lambda x: x.sum(axis=0))(x)
    exact = np.full(3, 1_000_003 * TENTH)
    assert ulps(got, exact) <= 16 < 1000 < ulps(x.sum(axis=0), exact)


def test_var_and_std_of_values_far_from_zero():
    x = (np.random.default_rng(5).standard_normal(2_000_003) + 100).astype(np.float32)
    wide = x.astype(np.float64)
    mean = math.fsum(wide) / x.size
    var = math.fsum((wide - mean) ** 2) / x.size
    got_var, got_std = kiln.compile(lambda x: (x.var(), x.std()))(x)
    assert_as_accurate(got_var, x.var(), var)
    assert_as_accurate(got_std, x.std(), math.sqrt(var))


def test_softmax_and_logsumexp_of_long_rows():
    x = np.random.default_rng(6).standard_normal((2, 300_007)).astype(np.float32)
    soft, lse = kiln.compile(lambda x: (kiln.softmax(x), kiln.logsumexp(x, axis=-1)))(x)
    wide = x.astype(np.float64)
    shifted = np.exp(wide - wide.max(axis=1, keepdims=True))
    want_soft = shifted / shifted.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(soft, want_soft, rtol=2e-5, atol=0)
    np.testing.assert_allclose(soft.astype(np.float64).sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(lse, np.log(shifted.sum(axis=1)) + wide.max(axis=1), rtol=1e-6)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nan_and_infinities_still_propagate(special):
    x = np.full(100_003, 0.1, np.float32)
    x[77_777] = special
    assert np.array_equal(kiln.compile(lambda x: x.sum())(x), x.sum(), equal_nan=True)
    x[3] = -special
    with np.errstate(invalid="ignore"):  # inf + -inf
        want = x.sum()
    assert np.array_equal(kiln.compile(lambda x: x.sum())(x), want, equal_nan=True)


@pytest.mark.parametrize("n", [0, 1, 5_000])
def test_sums_of_negative_zeros_match_numpy(n):
    x = np.full(n, -0.0, np.float32)
    got, want = kiln.compile(lambda x: x.sum())(x), x.sum()
    assert got == want and np.signbit(got) == np.signbit(want)


# -- the tree is in the IR, and schedules keep it -----------------------------------------------
def test_the_summation_tree_is_in_the_affine_ir():
    text = kiln.compile(lambda x: x.sum()).lower(kiln.f32[4099]).text("affine")
    assert "%k0.sum = 0 to 1" in text  # one nest for the whole kernel
    assert "%k0.r.b = 0 to 4" in text  # 4 blocks of 1024 ...
    assert "%k0.r.b1 = 0 to 8" in text  # ... of 8 leaves ...
    assert "affine.for %k0.r = 0 to 128 iter_args(%acc0_3 = %0) -> (f32)" in text  # ... of 128, one stream
    assert "%k0.r1 = 0 to 3" in text  # ... and the 3 left over
    # A row that fits one leaf runs in 4 accumulators over its quarters (independent chains).
    row = kiln.compile(lambda x: x.sum(axis=1)).lower(kiln.f32[8, 512]).text("affine")
    assert "affine.for %k0.r = 0 to 128 iter_args(%acc0 = %0, %acc1 = %0, %acc2 = %0, %acc3 = %0)" in row


def test_outer_axes_write_the_inner_tree_once():
    """Axes with reduced axes inside them are min-bounded levels, not tails: a sum over
    four axes of 70 (a block of 64 and 6 more on each) stays a small nest."""
    compiled = kiln.compile(lambda x: x.sum())
    assert compiled.lower(kiln.f32[70, 70, 70, 70]).text("affine").count("affine.for") <= 16
    x = np.random.default_rng(7).random((66, 67, 71), dtype=np.float32)
    assert_as_accurate(compiled(x), x.sum(), fsum(x))


@pytest.mark.parametrize(
    "steps",
    [
        [("vectorize", "k0.r", 4)],
        [("unroll", "k0.r", 3)],
        [("split", "k0.r", 7), ("parallel", "k0.i")],
    ],
)
def test_user_schedules_keep_the_tree(steps):
    x = np.full((3, 1_000_003), 0.1, np.float32)
    fn = kiln.compile(lambda x: x.sum(axis=1), schedule=steps)
    assert_as_accurate(fn(x), x.sum(axis=1), np.full(3, 1_000_003 * TENTH))


# -- the CUDA backend (run on the host) ---------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 1_000, 1_000_003])
def test_cuda_whole_sums_add_partial_sums_in_block_trees(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    tenths = np.full(n, 0.1, np.float32)
    total = kiln.compile(lambda x: x.sum(), target="cuda-emulate")
    assert_as_accurate(total(x), x.sum(), fsum(x))
    assert_as_accurate(total(tenths), tenths.sum(), n * TENTH)
    source = total.lower(x).text("cuda")
    assert source.count("kiln_block_allreduce<float, kiln_add>(") == 2  # the blocks' partials, then theirs


def test_cuda_row_sums_keep_the_tree():
    x = np.full((4, 1_000_003), 0.1, np.float32)
    got = kiln.compile(lambda x: x.sum(axis=1), target="cuda-emulate")(x)
    assert_as_accurate(got, x.sum(axis=1), np.full(4, 1_000_003 * TENTH), floor=12)


def test_cuda_sums_over_several_axes_inside_a_thread():
    x = np.full((3, 300, 301), 0.1, np.float32)
    fn = kiln.compile(lambda x: x.sum(axis=(1, 2)), target="cuda-emulate")
    assert_as_accurate(fn(x), x.sum(axis=(1, 2)), np.full(3, 300 * 301 * TENTH))
