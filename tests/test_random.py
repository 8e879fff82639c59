"""kiln.random: Threefry-2x32's published answers, the same bits on every target (numpy,
running the same uint32 arithmetic on numpy keys, is the oracle), the distributions checked
by Kolmogorov-Smirnov and chi-square statistics against their exact CDFs and probabilities,
independence of split keys' streams, the bad arguments numpy refuses, and gradients through
dropout by finite differences. Seeds are fixed, so each statistic is one number, compared
with its critical value at a significance of 0.001."""

import math
import shutil
import subprocess

import numpy as np
import pytest
from targets import TARGETS

import kiln
from kiln.frontend.threefry import threefry2x32

R = kiln.random

# Random123's kat_vectors for threefry2x32_20: counter, key, result.
THREEFRY_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


def _block(key, ctr):
    return np.stack(threefry2x32(key[0], key[1], ctr[:1], ctr[1:]))[:, 0]


@pytest.mark.parametrize("target", TARGETS)
def test_threefry_gives_random123s_known_answers_on_every_target(target):
    block = kiln.compile(_block, target=target)
    for counter, key, want in THREEFRY_KAT:
        key, counter = np.array(key, np.uint32), np.array(counter, np.uint32)
        assert _block(key, counter).tolist() == list(want)  # numpy on the same code
        assert block(key, counter).tolist() == list(want)


DRAWS = {
    "split": lambda key: R.split(key, 3),
    "fold_in": lambda key: R.fold_in(key, 2**32 - 1),
    "uniform_f16": lambda key: R.uniform(key, (5, 7), np.float16),
    "uniform_f32_bounds": lambda key: R.uniform(key, (13,), np.float32, -2.0, 3.0),
    "uniform_f64": lambda key: R.uniform(key, (11,), np.float64),
    "normal_f16": lambda key: R.normal(key, (7,), np.float16),
    "normal_f32": lambda key: R.normal(key, (2, 9), np.float32, 1.0, 3.0),
    "bernoulli": lambda key: R.bernoulli(key, 0.3, (17,)),
    "randint_i8": lambda key: R.randint(key, -128, 128, (19,), np.int8),
    "randint_i64_wide": lambda key: R.randint(key, -(10**15), 10**17, (5,)),
    "randint_u64_full": lambda key: R.randint(key, 0, 2**64, (3,), np.uint64),
    "permutation": lambda key: R.permutation(key, 13),
    "permutation_rows": lambda key: R.permutation(key, np.arange(10.0).reshape(5, 2)[::-1]),
    "empty": lambda key: R.uniform(key, (0, 3)),
    "scalar": lambda key: R.normal(key),
}


@pytest.mark.parametrize("target", TARGETS)
def test_every_draw_gives_the_same_bits_on_every_target(target):
    key = R.key(2**40 + 12345)
    # one compiled function for all draws: one native build per target
    got = kiln.compile(lambda key: {name: draw(key) for name, draw in DRAWS.items()}, target=target)(key)
    for name, draw in DRAWS.items():
        want = draw(key)
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        assert got[name].tobytes() == want.tobytes(), name


@pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)"
)
def test_nvcc_accepts_the_cuda_c_of_every_draw(tmp_path):
    # cuda-emulate runs this same CUDA C as C++; here nvcc compiles it for a GPU.
    draws = kiln.compile(lambda key: {name: draw(key) for name, draw in DRAWS.items()}, target="cuda-emulate")
    source = tmp_path / "draws.cu"
    source.write_text(draws.lower(kiln.u32[2]).text("cuda"))
    result = subprocess.run(
        ["nvcc", "-c", "-diag-suppress", "177", str(source), "-o", "/dev/null"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_key_is_an_argument_so_each_call_draws_for_its_key():
    dropout = kiln.compile(lambda x, key: x * R.bernoulli(key, 0.5, x.shape) / 0.5)
    x = np.ones(257, np.float32)
    a, b = R.split(R.key(7))
    assert np.array_equal(dropout(x, a), dropout(x, a))
    assert not np.array_equal(dropout(x, a), dropout(x, b))
    assert set(np.unique(dropout(x, a))) == {0.0, 2.0}


def test_key_and_split_follow_jaxs_layout():
    assert R.key(0).tolist() == [0, 0]
    assert R.key(2**64 - 1).tolist() == [0xFFFFFFFF, 0xFFFFFFFF]
    assert R.key(np.uint64(3) << np.uint64(32)).tolist() == [3, 0]
    # split's words are Threefry of the counters 0..2n-1 (first half in word 0, second in word 1)
    y0, y1 = threefry2x32(np.uint32(0), np.uint32(0), np.arange(2, dtype=np.uint32), np.arange(2, 4, dtype=np.uint32))
    assert R.split(R.key(0)).ravel().tolist() == [*y0.tolist(), *y1.tolist()]
    assert R.split(R.key(0), 0).shape == (0, 2)
    # fold_in(key, d) is Threefry of the counter (0, d), as JAX's
    assert R.fold_in(R.key(5), 9).tolist() == [
        int(w[0]) for w in threefry2x32(np.uint32(0), np.uint32(5), np.zeros(1, np.uint32), np.full(1, 9, np.uint32))
    ]
    folded = kiln.compile(lambda key, d: R.fold_in(key, d))
    assert folded(R.key(5), np.uint32(9)).tolist() == R.fold_in(R.key(5), 9).tolist()
    traced = kiln.compile(lambda seed: R.key(seed))
    for seed in (0, 1, 2**31 - 1, 2**33 + 9):
        assert traced(np.int64(seed)).tolist() == R.key(seed).tolist()


def _ks_statistic(samples, cdf):
    """Kolmogorov-Smirnov distance of the samples' empirical CDF from `cdf`."""
    x = np.sort(np.asarray(samples, np.float64))
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


def _ks_critical(n):
    return 1.95 / math.sqrt(n)  # the asymptotic critical value at significance 0.001


_normal_cdf = np.vectorize(lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2))))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_uniform_is_uniform_in_its_half_open_interval(dtype):
    n, lo, hi = 20000, -3.0, 5.0
    u = kiln.compile(lambda key: R.uniform(key, (n,), dtype, lo, hi))(R.key(11))
    assert u.dtype == dtype and np.all((u >= lo) & (u < hi))
    assert _ks_statistic(u, lambda x: (x - lo) / (hi - lo)) < _ks_critical(n)
    standard = R.uniform(R.key(12), (n,), dtype)
    assert _ks_statistic(standard, lambda x: x) < _ks_critical(n)
    bits = {np.float16: 11, np.float32: 24, np.float64: 53}[dtype]
    assert np.all(standard.astype(np.float64) * 2.0**bits % 1 == 0)  # multiples of 2**-bits
    # a sample as large as 2**bits draws, and reaches the ends of [0, 1) at that resolution
    assert standard.min() < 0.001 and standard.max() > 0.999


def test_uniform_never_returns_maxval_where_rounding_would():
    # [1, 1 + 2**-10) holds one float16 besides 1: lo + (hi - lo) * u rounds up to hi half the time
    u = R.uniform(R.key(3), (1000,), np.float16, 1.0, 1.0009765625)
    assert np.all(u == 1.0)
    near = R.uniform(R.key(4), (4000,), np.float32, 1.0, np.nextafter(np.float32(1), 2) * 2)
    assert near.max() < np.nextafter(np.float32(1), 2) * 2
    low_above_high = R.uniform(R.key(5), (1000,), np.float64, 2.0, 1.0)  # numpy's uniform allows it
    assert np.all((low_above_high > 1.0) & (low_above_high <= 2.0))
    rows = R.uniform(R.key(6), (1000, 3), np.float32, np.array([0.0, 10.0, -1.0]), np.array([1.0, 20.0, 0.0]))
    assert np.all((rows >= [0, 10, -1]) & (rows < [1, 20, 0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_matches_the_normal_cdf(dtype):
    n = 20000
    z = kiln.compile(lambda key: R.normal(key, (n,), dtype))(R.key(21))
    assert z.dtype == dtype and np.all(np.isfinite(z))
    assert _ks_statistic(z, _normal_cdf) < _ks_critical(n)
    shifted = R.normal(R.key(22), (n,), dtype, loc=-2.0, scale=0.5)
    assert _ks_statistic(shifted, lambda x: _normal_cdf((x + 2.0) / 0.5)) < _ks_critical(n)


def test_normal_float16_is_the_float32_draw_rounded():
    key = R.key(23)
    assert np.array_equal(R.normal(key, (500,), np.float16), R.normal(key, (500,), np.float32).astype(np.float16))


def _chi_square_critical(df):
    """The 0.999 quantile of chi-square with `df` degrees of freedom (Wilson-Hilferty)."""
    z = 3.090
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def _chi_square(counts, expected):
    counts, expected = np.asarray(counts, np.float64), np.asarray(expected, np.float64)
    return float(np.sum((counts - expected) ** 2 / expected))


@pytest.mark.parametrize(
    "low, high, dtype",
    [(0, 7, np.int64), (-5, 6, np.int8), (250, 256, np.uint8), (0, 1, np.int32), (3, 3 + 97, np.int16)],
)
def test_randint_is_uniform_over_its_range(low, high, dtype):
    n = 30000
    r = kiln.compile(lambda key: R.randint(key, low, high, (n,), dtype))(R.key(31))
    assert r.dtype == dtype and r.min() >= low and r.max() < high
    counts = np.bincount(r.astype(np.int64) - low, minlength=high - low)
    assert len(counts) == high - low
    if high - low > 1:
        assert _chi_square(counts, np.full(high - low, n / (high - low))) < _chi_square_critical(high - low - 1)


def test_randint_spans_the_whole_integer_range():
    info = np.iinfo(np.int64)
    r = R.randint(R.key(32), info.min, info.max + 1, (4000,))
    # the sign and the top and bottom bits are each set half the time
    for bits in (r < 0, (r >> 62) & 1, r & 1):
        assert abs(np.mean(bits) - 0.5) < 0.04
    assert R.randint(R.key(33), 10, shape=(100,)).max() < 10  # high=None: [0, low), as numpy


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.97, 1.0])
def test_bernoulli_is_true_with_probability_p(p):
    n = 20000
    b = kiln.compile(lambda key: R.bernoulli(key, p, (n,)))(R.key(41))
    assert b.dtype == np.bool_
    hits = int(b.sum())
    if p in (0.0, 1.0):
        assert hits == p * n
    else:
        assert _chi_square([hits, n - hits], [p * n, (1 - p) * n]) < _chi_square_critical(1)


def test_bernoulli_takes_an_array_of_probabilities():
    p = np.array([0.0, 0.25, 0.75, 1.0])
    b = kiln.compile(lambda key, p: R.bernoulli(key, p, (20000, 4)))(R.key(42), p)
    assert np.all(np.abs(b.mean(axis=0) - p) < 0.015)
    assert R.bernoulli(R.key(42), p).shape == (4,)  # shape defaults to p's


def _bit_planes(words):
    return ((words[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.float64)


def test_split_keys_draw_independent_streams():
    n = 4000
    keys = R.split(R.key(51), 4)
    streams = [R.uniform(k, (n,), np.float64) for k in keys] + [R.uniform(R.key(51), (n,), np.float64)]
    correlation = np.corrcoef(np.stack(streams))
    off_diagonal = correlation[~np.eye(len(streams), dtype=bool)]
    assert np.max(np.abs(off_diagonal)) < 4 / math.sqrt(n)  # |r| of independent streams ~ 1/sqrt(n)
    # joint 8x8 histogram of two streams: a chi-square test of independence
    a, b = (np.floor(s * 8).astype(int) for s in streams[:2])
    joint = np.zeros((8, 8))
    np.add.at(joint, (a, b), 1)
    assert _chi_square(joint, np.outer(joint.sum(1), joint.sum(0)) / n) < _chi_square_critical(49)
    # neighbouring seeds too, bit by bit
    planes = np.concatenate([_bit_planes(R.split(R.key(s), n // 2).ravel()) for s in (100, 101)], axis=1)
    cross = np.corrcoef(planes.T)[:32, 32:]
    assert np.max(np.abs(cross)) < 5 / math.sqrt(n)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 13])
def test_permutation_is_a_permutation(n):
    p = kiln.compile(lambda key: R.permutation(key, n))(R.key(61))
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(n))
    rows = np.arange(3.0 * n).reshape(n, 3)[::-1]
    shuffled = kiln.compile(lambda key, x: R.permutation(key, x))(R.key(61), rows)
    assert np.array_equal(shuffled, rows[p])  # rows move together, in the order of permutation(n)


def test_permutation_is_uniform_over_small_n():
    counts = {}
    for key in R.split(R.key(62), 3000):
        order = tuple(R.permutation(key, 3).tolist())
        counts[order] = counts.get(order, 0) + 1
    assert len(counts) == 6
    assert _chi_square(list(counts.values()), [500] * 6) < _chi_square_critical(5)


def test_dropout_gradient_is_the_mask_by_finite_differences():
    def loss(x, key):
        keep = R.bernoulli(key, 0.7, x.shape)
        return np.sum(np.tanh(x * keep / 0.7))

    x = np.random.default_rng(0).standard_normal(31)
    key = R.key(71)
    grad = kiln.compile(kiln.grad(loss))(x, key)
    forward = kiln.compile(loss)
    h = 1e-6
    numeric = np.array([(forward(x + h * e, key) - forward(x - h * e, key)) / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    assert np.sum(grad == 0) > 0 and np.sum(grad != 0) > 0  # some elements dropped, some kept


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: R.key(-1), ValueError, r"\[0, 2\*\*64\)"),
        (lambda: R.key(2**64), ValueError, r"\[0, 2\*\*64\)"),
        (lambda: R.key(1.5), kiln.ArgumentError, "integer seed"),
        (lambda: R.uniform(np.zeros(2, np.int32)), kiln.ArgumentError, r"takes a key \(uint32\[2\]"),
        (lambda: R.normal(np.zeros(3, np.uint32)), kiln.ArgumentError, r"got uint32\[3\]"),
        (lambda: R.uniform(7), kiln.ArgumentError, "got int"),
        (lambda: R.uniform(R.key(0), (2, -1)), kiln.ShapeError, "negative dimensions"),
        (lambda: R.uniform(R.key(0), (2,), np.int32), kiln.DTypeError, "float16, float32 or float64"),
        (
            lambda: R.uniform(R.key(0), (2,), np.float32, np.zeros(3)),
            kiln.ShapeError,
            r"minval of shape \(3,\) does not broadcast",
        ),
        (lambda: R.bernoulli(R.key(0), np.full(3, 0.5), (2,)), kiln.ShapeError, "p of shape"),
        (lambda: R.uniform(R.key(0), (2,), np.float64, 0.0, np.inf), OverflowError, "exceeds the range"),
        (lambda: R.uniform(R.key(0), (2,), np.float64, np.nan, 1.0), OverflowError, "exceeds the range"),
        (lambda: R.uniform(R.key(0), (2,), np.float16, -60000.0, 60000.0), OverflowError, "range of float16"),
        (lambda: R.normal(R.key(0), (2,), np.float32, 0.0, -1.0), ValueError, "scale < 0"),
        (lambda: R.randint(R.key(0), 5, 5), ValueError, "low >= high"),
        (lambda: R.randint(R.key(0), 0, 300, (2,), np.int8), ValueError, "high is out of bounds for int8"),
        (lambda: R.randint(R.key(0), -1, 3, (2,), np.uint8), ValueError, "low is out of bounds for uint8"),
        (lambda: R.randint(R.key(0), 0, 3, (2,), np.float32), kiln.DTypeError, "integer type"),
        (lambda: R.randint(R.key(0), 0.5, 3), kiln.ArgumentError, "must be a Python int"),
        (lambda: R.bernoulli(R.key(0), 1.5), ValueError, r"p must be in \[0, 1\]"),
        (lambda: R.bernoulli(R.key(0), np.nan), ValueError, r"p must be in \[0, 1\]"),
        (lambda: R.permutation(R.key(0), -2), ValueError, "negative count"),
        (lambda: R.permutation(R.key(0), np.float64(3.0)), kiln.ShapeError, "at least 1-dimensional"),
        (lambda: R.split(R.key(0), -1), ValueError, "n must be >= 0"),
        (lambda: R.fold_in(R.key(0), 2**32), ValueError, r"\[0, 2\*\*32\)"),
        (lambda: R.fold_in(R.key(0), -1), ValueError, r"\[0, 2\*\*32\)"),
    ],
)
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_bad_key_inside_a_trace_points_at_the_users_line():
    def draw(x):
        return R.uniform(x, (3,))  # x is float64[2], not a key

    with pytest.raises(kiln.ArgumentError) as info:
        kiln.compile(draw)(np.zeros(2))
    assert "test_random.py" in str(info.value) and "takes a key" in str(info.value)
