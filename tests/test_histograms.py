"""histogram, bincount, searchsorted, digitize, interp, convolve and correlate at numpy's
complexity: bins counted by a scatter-add, lookups by a binary search of ceil(log2(m + 1))
gathers, correlations as k multiply-adds per output. Oracles: numpy bit for bit (where its
summation order is a loop; within a few ulps where it calls BLAS's dot), float64 central
differences for gradients, mlir-opt for the printed stages; the structural tests read the
`affine` stage for loops over the bins, the sorted array or an (outputs, taps) table."""

import re

import numpy as np
import pytest
from test_mlir_opt import MLIR_OPT, STAGE_FORMS, mlir_opt

import kiln
from kiln.errors import DTypeError, InvalidValueError, OutOfBoundsError, ShapeError, UnsupportedError

rng = np.random.default_rng(11)
# every float lands somewhere awkward: NaN, both infinities, -0.0, the range's ends, an edge
AWKWARD = np.concatenate([rng.random(97), [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, 0.5, 0.2, 1 + 2**-52, -(2**-1074)]])


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    assert got.tobytes() == want.tobytes(), (got, want)


def assert_all_same(got, want):
    for g, w in zip(got, want, strict=True):
        assert_same(g, w)


# -- histogram --------------------------------------------------------------------------------------
HISTOGRAMS = {
    "equal bins on edges and range ends": (lambda a: np.histogram(a, 5, range=(0, 1)), (AWKWARD,)),
    "float32 data, float64 range scalars": (
        lambda a: np.histogram(a, 7, range=(np.float64(0.1), np.float64(0.9))),
        (AWKWARD.astype(np.float32),),
    ),
    "float32 data, weak range": (lambda a: np.histogram(a, 7, range=(0.1, 0.9)), (AWKWARD.astype(np.float32),)),
    "a prime number of bins, reversed view": (lambda a: np.histogram(a[::-1], 13, range=(-0.5, 1.25)), (AWKWARD,)),
    "strided view": (lambda a: np.histogram(a[::3], 4, range=(0, 1)), (AWKWARD,)),
    "one bin": (lambda a: np.histogram(a, 1, range=(0, 1)), (AWKWARD,)),
    "size 1": (lambda a: np.histogram(a, 3), (np.array([2.5]),)),
    "empty": (lambda a: np.histogram(a, 4, range=(0, 1)), (np.zeros(0),)),
    "int8 over its whole range": (
        lambda a: np.histogram(a, 17, range=(-128, 127)),
        (np.arange(-128, 128).astype(np.int8),),
    ),
    "int64 limits": (
        lambda a: np.histogram(a, 3, range=(-(2**62), 2**62)),
        (np.array([-(2**63), -(2**62), 0, 2**62, 2**63 - 1], np.int64),),
    ),
    "uint8 data": (lambda a: np.histogram(a, 6), (np.array([0, 255, 7, 7, 128], np.uint8),)),
    "edges with a repeat": (lambda a: np.histogram(a, [0, 0.2, 0.5, 0.5, 1.0]), (AWKWARD,)),
    "edges with infinities": (lambda a: np.histogram(a, [-np.inf, 0, 0.5, np.inf]), (AWKWARD,)),
    "int edges on int data": (lambda a: np.histogram(a, [-3, 0, 2, 9]), (np.arange(-5, 12, dtype=np.int16),)),
    "density, equal bins": (lambda a: np.histogram(a, 9, range=(0, 1), density=True), (AWKWARD,)),
    "weights float64": (lambda a, w: np.histogram(a, 6, range=(0, 1), weights=w), (AWKWARD, rng.standard_normal(107))),
    "weights float32": (
        lambda a, w: np.histogram(a, 6, range=(0, 1), weights=w),
        (AWKWARD, rng.standard_normal(107).astype(np.float32)),
    ),
    "weights float16": (
        lambda a, w: np.histogram(a, 6, range=(0, 1), weights=w),
        (AWKWARD, rng.standard_normal(107).astype(np.float16)),
    ),
    "weights int32 (summed in float64)": (
        lambda a, w: np.histogram(a, 6, range=(0, 1), weights=w),
        (AWKWARD, rng.integers(-(2**20), 2**20, 107).astype(np.int32)),
    ),
    "weights int64 with edges (exact, wrapping)": (
        lambda a, w: np.histogram(a, [0, 0.5, 1], weights=w),
        (AWKWARD, np.full(107, 2**62, np.int64)),
    ),
    "weights bool": (lambda a, w: np.histogram(a, 3, range=(0, 1), weights=w), (AWKWARD, AWKWARD > 0.5)),
}


@pytest.mark.parametrize("case", HISTOGRAMS)
def test_histogram_is_numpys_bit_for_bit(case):
    fn, args = HISTOGRAMS[case]
    assert_all_same(kiln.compile(fn)(*args), fn(*args))


def test_histogram_weights_sum_block_by_block_as_numpy():
    # numpy adds each block of 65536 values apart and then the blocks: a different rounding
    # from one running sum, which kiln keeps
    a, w = rng.random(140_000), rng.standard_normal(140_000) * 1e6
    fn = lambda a, w: np.histogram(a, 50, range=(0, 1), weights=w)  # noqa: E731
    assert_all_same(kiln.compile(fn)(a, w), fn(a, w))
    fn32 = lambda a, w: np.histogram(a, 50, range=(0, 1), weights=w.astype(np.float32))  # noqa: E731
    assert_all_same(kiln.compile(fn32)(a, w), fn32(a, w))


def test_histogram_of_an_edge_array_with_float_weights_is_within_rounding():
    # numpy sums the sorted weights cumulatively and subtracts; kiln adds each bin's directly
    a, w = rng.random(300), rng.standard_normal(300)
    fn = lambda a, w: np.histogram(a, [0, 0.3, 0.31, 1], weights=w)  # noqa: E731
    got, want = kiln.compile(fn)(a, w), fn(a, w)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
    assert_same(got[1], want[1])


def test_histogram_on_cuda_emulate():
    fn = lambda a, w: np.histogram(a, 5, range=(0, 1), weights=w)  # noqa: E731
    w = rng.standard_normal(AWKWARD.size)
    assert_all_same(kiln.compile(fn, target="cuda-emulate")(AWKWARD, w), fn(AWKWARD, w))
    edges = lambda a: np.histogram(a, [0, 0.25, 0.5, 1.0])  # noqa: E731
    assert_all_same(kiln.compile(edges, target="cuda-emulate")(AWKWARD), edges(AWKWARD))


# -- histogram2d, histogramdd ----------------------------------------------------------------------
_X = np.concatenate([rng.random(200), [np.nan, 1.0, 0.0, -np.inf, 0.5]])
_Y = np.concatenate([rng.random(200), [0.5, 1.0, 1.0, 0.2, np.inf]])
HISTOGRAMS_DD = {
    "2d equal bins": (lambda x, y: np.histogram2d(x, y, 5, range=[(0, 1), (0, 1)]), (_X, _Y)),
    "2d a count and an edge array with a repeat": (
        lambda x, y: np.histogram2d(x, y, [3, [0, 0.5, 0.5, 1]], range=[(0, 1), None]),
        (_X, _Y),
    ),
    "2d one edge array for both": (lambda x, y: np.histogram2d(x, y, np.array([0, 0.3, 1.0])), (_X, _Y)),
    "2d weights": (
        lambda x, y, w: np.histogram2d(x, y, 4, range=[(0, 1), (0, 1)], weights=w),
        (_X, _Y, rng.standard_normal(_X.size)),
    ),
    "2d edges from the data, float32": (
        lambda x, y: np.histogram2d(x[:200].astype(np.float32), y[:200].astype(np.float32), 3),
        (_X, _Y),
    ),
    "2d int32 data": (
        lambda x, y: np.histogram2d((x[:200] * 10).astype(np.int32), (y[:200] * 10).astype(np.int32), 3),
        (_X, _Y),
    ),
    "2d empty": (lambda x, y: np.histogram2d(x[:0], y[:0], 3), (_X, _Y)),
    "dd (N, 3), reversed view": (
        lambda x, y: np.histogramdd(np.stack([x, y, x * y], 1)[::-1], (2, 3, 4), range=[(0, 1)] * 3),
        (_X, _Y),
    ),
    "dd 1-d sample": (lambda x, y: np.histogramdd(x, 7, range=[(0, 1)]), (_X, _Y)),
}


@pytest.mark.parametrize("case", HISTOGRAMS_DD)
def test_histogramdd_is_numpys_bit_for_bit(case):
    fn, args = HISTOGRAMS_DD[case]
    got, want = kiln.compile(fn)(*args), fn(*args)
    assert_same(got[0], want[0])
    for g, w in zip(got[1:], want[1:], strict=True):
        assert_all_same(g, w) if isinstance(w, list) else assert_same(g, w)


def test_histogram2d_density_and_cuda_emulate():
    fn = lambda x, y: np.histogram2d(x, y, 5, range=[(0, 1), (0, 1)], density=True)[0]  # noqa: E731
    np.testing.assert_allclose(kiln.compile(fn)(_X, _Y), fn(_X, _Y), rtol=1e-14)
    counts = lambda x, y: np.histogram2d(x, y, [3, [0, 0.5, 1]], range=[(0, 1), None])[0]  # noqa: E731
    assert_same(kiln.compile(counts, target="cuda-emulate")(_X, _Y), counts(_X, _Y))


def test_histogramdd_refusals_name_the_problem():
    with pytest.raises(ShapeError, match="dimension of bins"):
        kiln.compile(lambda x, y: np.histogramdd(np.stack([x, y], 1), [2, 3, 4]))(_X[:5], _Y[:5])
    with pytest.raises(ShapeError, match="one entry per dimension"):
        kiln.compile(lambda x, y: np.histogram2d(x, y, 2, range=[(0, 1)]))(_X[:5], _Y[:5])
    with pytest.raises(ShapeError, match="monotonically"):
        kiln.compile(lambda x, y: np.histogram2d(x, y, [[1, 0], 2]))(_X[:5], _Y[:5])


# -- bincount ---------------------------------------------------------------------------------------
def test_bincount_is_numpys():
    x = np.array([0, 3, 3, 1, 0, 9, 9, 9, 2], np.int32)
    w = np.array([0.5, 1, 2, -1, 3, 1e-17, np.inf, 1, -0.0])
    assert_same(kiln.compile(lambda x: np.bincount(x, minlength=10))(x), np.bincount(x, minlength=10))
    assert_same(kiln.compile(lambda x: np.bincount(x, minlength=13))(x), np.bincount(x, minlength=13))
    assert_same(kiln.compile(lambda x, w: np.bincount(x, w, minlength=10))(x, w), np.bincount(x, w))
    f32 = w.astype(np.float32)
    assert_same(kiln.compile(lambda x, w: np.bincount(x, w, minlength=10))(x, f32), np.bincount(x, f32))
    # a constant x: numpy's length max(x) + 1, weights traced
    assert_same(kiln.compile(lambda w: np.bincount(x, w))(w), np.bincount(x, w))
    assert_same(kiln.compile(lambda w: np.bincount([], minlength=3) + w)(1), np.bincount([], minlength=3) + 1)
    for dtype in (np.bool_, np.uint8, np.int8, np.uint32, np.int64):
        v = (x % 2).astype(dtype)
        assert_same(kiln.compile(lambda v: np.bincount(v, minlength=2))(v), np.bincount(v, minlength=2))
    empty = np.zeros(0, np.int64)
    assert_same(kiln.compile(lambda v: np.bincount(v, minlength=4))(empty), np.bincount(empty, minlength=4))
    assert_same(kiln.compile(lambda v: np.bincount(v, minlength=1), target="cuda-emulate")(x * 0), [9])


@pytest.mark.parametrize("bad", [np.array([0, 10]), np.array([-1, 2])])
def test_bincount_values_past_minlength_raise_when_the_function_runs(bad):
    f = kiln.compile(lambda x: np.bincount(x, minlength=10))
    with pytest.raises(OutOfBoundsError, match=r"the input's values must lie in 0\.\.9 \(minlength=10\)"):
        f(bad)
    assert_same(f(np.array([9])), np.bincount([9], minlength=10))  # still usable


@pytest.mark.parametrize(
    "fn, error, match",
    [
        (lambda x: np.bincount(x), UnsupportedError, "pass minlength"),
        (lambda x: np.bincount(x.astype(np.float64), minlength=3), DTypeError, "safe"),
        (lambda x: np.bincount(x.reshape(1, -1), minlength=3), ShapeError, "too deep"),
        (lambda x: np.bincount(x, minlength=-1), InvalidValueError, "negative"),
        (lambda x: np.bincount(x, np.ones(2), minlength=3), ShapeError, "same length"),
        (lambda x: np.bincount(np.array([1, -1]), x[:2]), InvalidValueError, "negative"),
    ],
)
def test_bincount_refusals_name_the_problem(fn, error, match):
    with pytest.raises(error, match=match):
        kiln.compile(fn)(np.array([0, 1, 2]))


# -- searchsorted, digitize, interp ------------------------------------------------------------------
SORTED = np.array([-np.inf, -2.0, -0.0, 0.0, 0.0, 0.0, 1.5, 3.0, 3.0, np.inf, np.nan, np.nan])
PROBES = np.array([np.nan, -np.inf, np.inf, -3.0, -2.0, -0.0, 0.0, 1.0, 1.5, 3.0, 7.0, 2.0**-1074])


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("m", [0, 1, 2, 3, 7, 8, 12])
def test_searchsorted_is_numpys_for_every_length(side, m):
    a = SORTED[:m]
    f = kiln.compile(lambda a, v: np.searchsorted(a, v, side=side))
    assert_same(f(a, PROBES), np.searchsorted(a, PROBES, side=side))
    assert_same(f(a, PROBES.reshape(3, 4)[:, ::-1]), np.searchsorted(a, PROBES.reshape(3, 4)[:, ::-1], side=side))


def test_searchsorted_integers_limits_and_views():
    a = np.array([np.iinfo(np.int64).min, -5, 0, 0, 7, np.iinfo(np.int64).max], np.int64)
    v = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 8], np.int64)
    for side in ("left", "right"):
        f = kiln.compile(lambda a, v: np.searchsorted(a, v, side=side))
        assert_same(f(a, v), np.searchsorted(a, v, side=side))
        assert_same(f(a[::2], v[::-1]), np.searchsorted(a[::2], v[::-1], side=side))
    u8 = np.array([0, 3, 3, 255], np.uint8)
    g = kiln.compile(lambda a, v: np.searchsorted(a, v))
    assert_same(g(u8, np.array([-1, 3, 300])), np.searchsorted(u8, np.array([-1, 3, 300])))
    big = np.sort(rng.integers(-50, 50, 1009))
    probes = rng.integers(-60, 60, 301)
    assert_same(g(big, probes), np.searchsorted(big, probes))
    assert_same(
        kiln.compile(lambda a, v, s: np.searchsorted(a, v, sorter=s))(big[::-1], probes, np.arange(1009)[::-1]),
        np.searchsorted(big[::-1], probes, sorter=np.arange(1009)[::-1]),
    )
    assert_same(kiln.compile(g, target="cuda-emulate")(big, probes), np.searchsorted(big, probes))


@pytest.mark.parametrize("right", [False, True])
def test_digitize_increasing_and_decreasing(right):
    x = np.concatenate([PROBES, [0.5, -1.0]])
    for bins in (np.array([-1.0, 0.0, 0.0, 1.5, 3.0]), np.array([3.0, 1.5, 0.0, 0.0, -1.0])):
        f = kiln.compile(lambda x: np.digitize(x, bins, right=right))
        assert_same(f(x), np.digitize(x, bins, right=right))


def test_interp_is_numpys_with_many_points():
    xp = np.sort(rng.random(1000)) * 10
    xp[100:103] = xp[100]  # repeated sample points
    fp = rng.standard_normal(1000)
    fp[500] = np.inf
    x = np.concatenate([rng.random(500) * 12 - 1, xp[::7], [np.nan, -np.inf, np.inf]])
    f = kiln.compile(lambda x, xp, fp: np.interp(x, xp, fp))
    assert_same(f(x, xp, fp), np.interp(x, xp, fp))
    assert_same(kiln.compile(f, target="cuda-emulate")(x, xp, fp), np.interp(x, xp, fp))


# -- convolve, correlate ------------------------------------------------------------------------------
LENGTHS = [(1, 1), (5, 1), (7, 3), (3, 7), (10, 10), (2, 5), (101, 31)]
MODES = ("full", "same", "valid")


def _small_ints(n, dtype):
    return rng.integers(-8, 8, n).astype(dtype)


@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.uint8, np.int64, np.bool_])
def test_convolve_and_correlate_are_numpys_bit_for_bit(fn, dtype):
    # small integers are exact in every float, so the bits do not depend on the sum's order
    lengths = LENGTHS if dtype == np.float64 else [(7, 3), (3, 7), (13, 4)]
    for n, m in lengths:
        a, v = _small_ints(n, dtype), _small_ints(m, dtype)
        if dtype == np.float16:
            v = (v / 8).astype(np.float16)
        f = kiln.compile(lambda a, v: tuple(fn(a, v, mode) for mode in MODES))
        assert_all_same(f(a, v), [fn(a, v, mode) for mode in MODES])


def test_convolve_of_random_floats_is_within_a_few_ulps():
    # numpy's float dot is BLAS's, summing in its own order: kiln sums the taps in order
    for n, m in [(1000, 31), (31, 1000), (17, 16)]:
        a, v = rng.standard_normal(n), rng.standard_normal(m)
        got = kiln.compile(lambda a, v: tuple(np.convolve(a, v, mode) for mode in MODES))(a, v)
        for mode, g in zip(MODES, got):
            scale = np.convolve(np.abs(a), np.abs(v), mode)
            assert np.all(np.abs(g - np.convolve(a, v, mode)) <= 8 * np.finfo(np.float64).eps * scale)


def test_convolve_infinite_tap_and_views():
    a, v = np.array([1.0, 2, 3, 4, 5]), np.array([np.inf, 1, 2])
    for fn in (np.convolve, np.correlate):
        for mode in ("full", "same", "valid"):
            f = kiln.compile(lambda a, v: fn(a, v, mode))
            assert_same(f(a, v), fn(a, v, mode))  # no inf * 0 from padding at the ends
            assert_same(f(a[::-2], v[::-1]), fn(a[::-2], v[::-1], mode))
    f = kiln.compile(lambda a, v: np.convolve(a, v, "same"), target="cuda-emulate")
    a, v = _small_ints(50, np.float32), _small_ints(7, np.float32)
    assert_same(f(a, v), np.convolve(a, v, "same"))


def test_convolve_with_more_taps_than_the_slice_sum_takes():
    a, v = _small_ints(300, np.float64), _small_ints(200, np.float64)
    for mode in ("full", "same", "valid"):
        assert_same(kiln.compile(lambda a, v: np.correlate(a, v, mode))(a, v), np.correlate(a, v, mode))


# -- gradients ----------------------------------------------------------------------------------------
def test_gradients_match_central_differences():
    x = np.array([0.25, 1.5, 2.75, 0.9])
    xp, fp = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 3.0, -2.0, 5.0])
    kiln.gradcheck(lambda x, fp: np.sum(np.sin(np.interp(x, xp, fp))), x, fp, argnums=(0, 1))
    a, v = rng.standard_normal(23), rng.standard_normal(5)
    for mode in ("full", "same", "valid"):
        kiln.gradcheck(lambda a, v: np.sum(np.tanh(np.convolve(a, v, mode))), a, v, argnums=(0, 1))
        kiln.gradcheck(lambda a, v: np.sum(np.tanh(np.correlate(v, a, mode))), a, v, argnums=(0, 1))
    data, w = rng.random(40), rng.standard_normal(40)
    kiln.gradcheck(lambda w: np.sum(np.histogram(data, 5, range=(0, 1), weights=w)[0] ** 2), w)
    kiln.gradcheck(lambda w: np.sum(np.histogram(data, [0, 0.5, 1], weights=w)[0] ** 2), w)
    kiln.gradcheck(lambda w: np.sum(np.bincount(np.arange(40) % 3, w) ** 2), w)
    kiln.gradcheck(lambda w: np.sum(np.histogram2d(data, w, 3, range=[(0, 1), (-1, 1)], weights=w)[0] ** 2), w)


# -- complexity: the loop nests ------------------------------------------------------------------------
def _nests(fn, *specs):
    """(trip count, loops inside it) of each top-level loop nest of fn's `affine` stage."""
    affine = kiln.compile(fn).lower(*specs).text("affine")
    nests = re.split(r"\n    affine\.for ", affine)[1:]
    return [(int(re.match(r"%\S+ = 0 to (\d+)", n).group(1)), n.count("affine.for")) for n in nests], nests


def test_histogram_loops_once_over_the_data_and_once_over_the_bins():
    for bins in (1000, np.linspace(0, 1, 1001)):
        shape, nests = _nests(lambda a: np.histogram(a, bins, range=(0, 1))[0], kiln.f64[4099])
        assert all(inner == 0 for _, inner in shape), shape  # no loop over the bins inside one over the data
        assert {trips for trips, _ in shape} <= {4099, 1001, 1000}, shape
        assert [trips for trips, _ in shape].count(1001) == 1  # zeroing the counts (the dropped go to bin 1000)
        assert sum("memref.store" in nest for nest in nests) == 1  # one scatter


def test_histogram2d_loops_once_over_the_data():
    shape, _ = _nests(
        lambda x, y: np.histogram2d(x, y, [300, 400], range=[(0, 1), (0, 1)])[0], kiln.f64[4099], kiln.f64[4099]
    )
    assert all(inner <= 1 for _, inner in shape), shape  # only the (300, 400) result's own 2-d loop
    assert not any(trips == 4099 and inner for trips, inner in shape), shape


def test_bincount_loops_once_over_the_data():
    shape, nests = _nests(lambda x: np.bincount(x, minlength=777), kiln.i64[4099])
    assert shape == [(4099, 0), (777, 0), (4099, 0)], shape  # the check, the zeros, the scatter


def test_searchsorted_reads_the_sorted_array_only_through_gathers():
    shape, nests = _nests(lambda a, v: np.searchsorted(a, v), kiln.f64[1000], kiln.f64[4099])
    assert shape == [(4099, 0)] * len(shape), shape
    # ceil(log2(1001)) = 10 steps, each one gather through memref.load
    assert sum(nest.count("memref.load %a[") for nest in nests) == 10


def test_interp_has_no_loop_over_the_sample_points():
    shape, _ = _nests(lambda x, xp, fp: np.interp(x, xp, fp), kiln.f64[4099], kiln.f64[1000], kiln.f64[1000])
    assert shape == [(4099, 0)] * len(shape), shape


def test_convolve_has_no_outputs_by_taps_table():
    shape, nests = _nests(lambda s, w: np.convolve(s, w, "same"), kiln.f64[10007], kiln.f64[31])
    assert all(inner == 0 for _, inner in shape) and all(trips not in (31, 10007 * 31) for trips, _ in shape), shape
    assert not any("memref.load" in nest for nest in nests)  # no gather through an index table
    assert max(trips for trips, _ in shape) == 10007 - 30  # the outputs every tap overlaps, in one loop


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda a, w: np.histogram(a, 5, range=(0, 1), weights=w)[0], (kiln.f32[37], kiln.f32[37])),
        (lambda a: np.histogram(a, [0, 0.5, 1.0])[0], (kiln.f64[37],)),
        (lambda x: np.bincount(x, minlength=9), (kiln.i32[37],)),
        (lambda a, v: np.searchsorted(a, v, side="right"), (kiln.f64[13], kiln.f64[5])),
        (lambda s, w: np.convolve(s, w, "same"), (kiln.f64[37], kiln.f64[5])),
    ],
)
def test_every_stage_is_accepted_by_mlir_opt(fn, args):
    lowered = kiln.compile(fn).lower(*args)
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)
