"""Whole-tensor reductions on the GPU (``x.sum()``, ``x.max()``, ``x.min()``, ``x.any()``,
``x.all()``) are two-level trees: each block combines its threads' partial results into one
partial, and a second launch of one block combines those. Checked in host emulation against
numpy on sizes around the warp and block sizes, with NaN, infinities, signed zeros and
integer limits; the results have the same bits in whichever order the emulation runs the
threads, and the CUDA C uses no atomics for them."""

import re

import numpy as np
import pytest
from targets import NEEDS_CXX
from test_reduction_accuracy import TENTH, assert_as_accurate, fsum

import kiln
from kiln.codegen.cuda_prelude import PRELUDE

CASES = ("random", "nan and integer limits", "infinities and integer maxima", "negative zeros and integer minima")
# Every case on sizes around the warp and block sizes; two on a size that fills every block.
SIZES = [(case, n) for n in (1, 31, 32, 33, 1023, 1025, 65537) for case in CASES]
SIZES += [("nan and integer limits", 1_000_003)]
COOP_LAUNCH = re.compile(r"KILN_LAUNCH_COOP\((\w+), (\d+), 1, 1, (\d+), 1, 1")


def sum_max_min(a, b, c, d):
    """x.sum(), x.max(), x.min() of each argument: twelve whole-tensor reductions."""
    return tuple(r for x in (a, b, c, d) for r in (x.sum(), x.max(), x.min()))


def inputs(case, n, rng):
    """f32, f64, i32 and i64 tensors of `n` elements for one of the cases below."""
    floats = rng.standard_normal(n) * 10
    ints = {t: rng.integers(-1000, 1000, n) for t in (np.int32, np.int64)}
    where = rng.integers(0, n, 2)
    if case == "nan and integer limits":
        floats[where[0]] = np.nan
        for t in ints:
            ints[t] = rng.choice([np.iinfo(t).min, np.iinfo(t).max, -1, 0, 1], n)
    elif case == "infinities and integer maxima":  # an int32 sum past int32, an int64 sum wrapping
        floats[where[0]], floats[where[1]] = np.inf, -np.inf
        ints = {t: np.full(n, np.iinfo(t).max) for t in ints}
    elif case == "negative zeros and integer minima":
        floats = np.full(n, -0.0)
        ints = {t: np.full(n, np.iinfo(t).min) for t in ints}
    return [floats.astype(np.float32), floats, ints[np.int32].astype(np.int32), ints[np.int64].astype(np.int64)]


def assert_numpys(got, want, x):
    """Integers and max/min exactly numpy's (a zero's sign too); float sums close to it."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    if want.dtype.kind == "f" and np.isfinite(want) and want != 0:  # a float sum, in another order
        tolerance = np.finfo(want.dtype).eps * 8 * np.log2(x.size + 1) * np.abs(x).sum()
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance)
    else:
        np.testing.assert_array_equal(got, want)  # NaN, an infinity, an integer, a max or min
        assert np.signbit(got) == np.signbit(want)


@pytest.fixture(scope="module")
def tree_sum_max_min():
    return kiln.compile(sum_max_min, target="cuda-emulate")


@NEEDS_CXX
@pytest.mark.parametrize("case, n", SIZES)
def test_sum_max_min_give_numpys_results(tree_sum_max_min, case, n):
    arrays = inputs(case, n, np.random.default_rng(n))
    got = tree_sum_max_min(*arrays)
    with np.errstate(invalid="ignore"):  # inf + -inf
        wants = sum_max_min(*arrays)
    for k, want in enumerate(wants):
        assert_numpys(got[k], want, arrays[k // 3])


@NEEDS_CXX
def test_the_same_bits_whichever_order_threads_and_blocks_run_in(monkeypatch):
    """The emulation runs a block's threads forward or in reverse, and blocks on one or
    several host threads, in the order they come: a float sum's bits depend on neither."""
    rng = np.random.default_rng(8)
    n = 300_007
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)).astype(np.float32)
    fn = kiln.compile(lambda x, y: (x.sum(), y.sum(), x.max(), y.min()), target="cuda-emulate")
    results = set()
    for order, threads in [("forward", "1"), ("reverse", "1"), ("forward", "3"), ("reverse", "3")]:
        monkeypatch.setenv("KILN_EMULATE_ORDER", order)
        monkeypatch.setenv("KILN_EMULATE_THREADS", threads)
        results.add(b"".join(np.asarray(r).tobytes() for r in fn(x, x.astype(np.float64))))
    assert len(results) == 1
    got = fn(x, x.astype(np.float64))
    assert_as_accurate(got[0], x.sum(), fsum(x))
    assert got[2] == x.max() and got[3] == x.min()


@NEEDS_CXX
def test_integer_sums_are_the_cpu_backends_and_numpys():
    """numpy sums int32 in int64 (its default integer here), and kiln's CPU backend does too;
    a sum asked for in int32 wraps around in both, and so does an int64 sum past its range."""
    x = np.full(65537, np.iinfo(np.int32).max, np.int32)
    x[::3] = np.iinfo(np.int32).min
    y = np.full(1025, 2**62, np.int64)
    fn = lambda x, y: (x.sum(), x.sum(dtype=np.int32), y.sum())  # noqa: E731
    gpu, cpu, want = kiln.compile(fn, target="cuda-emulate")(x, y), kiln.compile(fn)(x, y), fn(x, y)
    for g, c, w in zip(gpu, cpu, want, strict=True):
        assert g.dtype == c.dtype == w.dtype and g == c == w
    assert want[0] != want[1] and want[2] == 2**62  # 1025 * 2**62 wraps to 2**62


@NEEDS_CXX
def test_signed_zeros_order_as_the_cpu_backend_orders_them():
    """max and min order -0.0 below 0.0, as the CPU backend's (IEEE 754 maximum and minimum);
    numpy's result for a mix of the two depends on where they are."""
    fn = lambda x: (x.max(), x.min(), x.sum())  # noqa: E731
    gpu, cpu = kiln.compile(fn, target="cuda-emulate"), kiln.compile(fn)
    for n in (2, 33, 70001):
        x = np.full(n, -0.0, np.float32)
        x[n // 2] = 0.0
        for g, c, want in zip(gpu(x), cpu(x), (0.0, -0.0, 0.0)):
            assert g == c == want and np.signbit(g) == np.signbit(c) == np.signbit(want)


@NEEDS_CXX
@pytest.mark.parametrize("n", [1, 33, 65537])
def test_narrow_unsigned_and_boolean_reductions_give_numpys_results(n):
    """Integers narrower than 32 bits are widened for the warp shuffles, unsigned ones by
    zero extension; any and all are the maximum and minimum of 0s and 1s."""
    rng = np.random.default_rng(n)
    dtypes = (np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)
    arrays = [rng.integers(np.iinfo(t).min, np.iinfo(t).max, n, dtype=t, endpoint=True) for t in dtypes]
    flags = rng.random(n) < 0.5

    def reductions(*xs):
        *ints, flags = xs
        return (
            *(r for x in ints for r in (x.max(), x.min())),
            ints[0].sum(dtype=np.int8),
            flags.any(),
            flags.all(),
            (~flags).all(),
            (flags & False).any(),
        )

    got = kiln.compile(reductions, target="cuda-emulate")(*arrays, flags)
    for g, want in zip(got, reductions(*arrays, flags), strict=True):
        assert g.dtype == want.dtype and g == want


@NEEDS_CXX
def test_empty_tensors_give_the_identity_or_numpys_error():
    x = np.zeros(0, np.float32)
    fn = lambda x, i, b: (x.sum(), i.sum(), b.any(), b.all())  # noqa: E731
    args = (x, np.zeros((0, 3), np.int32), np.zeros(0, bool))
    got = kiln.compile(fn, target="cuda-emulate")(*args)
    for g, want in zip(got, fn(*args), strict=True):
        assert g.dtype == want.dtype and g == want and not np.signbit(g)
    with pytest.raises(ValueError):
        x.max()
    with pytest.raises(kiln.ShapeError, match="np.max of an empty axis has no identity"):
        kiln.compile(lambda x: x.max(), target="cuda-emulate")(x)


@NEEDS_CXX
@pytest.mark.parametrize("n", [1_000_003, 10_000_019])
def test_float_sums_are_as_accurate_as_numpys(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    tenths = np.full(n, 0.1, np.float32)
    total = kiln.compile(lambda x: x.sum(), target="cuda-emulate")
    assert_as_accurate(total(x), x.sum(), fsum(x))
    assert_as_accurate(total(tenths), tenths.sum(), n * TENTH)


@pytest.mark.parametrize("shape", [(0,), (1,), (7, 1, 3), (1_000_003,)])
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64, bool]
)
def test_the_cuda_c_is_a_two_level_tree_without_atomics(shape, dtype):
    """Each reduction: one launch over the grid and one of a single block, whole warps in
    each, the same block tree in both, and no atomic anywhere in the kernels."""
    reductions = ["sum", "max", "min"] + (["any", "all"] if dtype is not bool else [])  # bool's are max and min
    if shape == (0,):
        reductions = ["sum"]  # an empty max has no identity, and an empty any or all folds
    fn = kiln.compile(lambda x: tuple(getattr(x, r)() for r in reductions), target="cuda-emulate")
    kernels = fn.lower(np.zeros(shape, dtype)).text("cuda")[len(PRELUDE) :]
    assert "atomic" not in kernels.lower()
    launches = COOP_LAUNCH.findall(kernels)
    assert len(launches) == 2 * len(reductions)
    for (grid, blocks, threads), (total, one, finishers) in zip(launches[::2], launches[1::2]):
        assert total == grid + "_total" and one == "1"
        assert int(threads) % 32 == 0 and int(finishers) % 32 == 0
        assert 1 <= int(blocks) <= int(finishers) <= 1024
        assert kernels.count(f"{total}(void)") == 1
    assert kernels.count("kiln_block_allreduce<") == 2 * len(reductions)
