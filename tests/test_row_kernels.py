"""Row kernels: softmax with exp in a row buffer, and reductions in several vector
accumulators, checked against numpy on awkward shapes and values.

A row softmax is one kernel (passes/fusion.py): per row the maximum, exp into a buffer
on the stack, its sum, the division. A max, min or integer reduction runs in several
independent vector accumulators (passes/vectorize.py), which must not change its result:
those reductions give the same answer in any order.
"""

import numpy as np
import pytest

import kiln
from kiln.runtime import threads

SHAPES = [(1, 1), (3, 1), (1, 17), (7, 13), (5, 64), (5, 100), (2, 1031), (3, 4096), (2, 4097), (0, 5), (4, 0)]


def numpy_softmax(x, axis=-1):
    """The oracle: numpy's own arithmetic in x's dtype, the same formula kiln traces."""
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return shifted / np.sum(shifted, axis=axis, keepdims=True)


def rows(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 4).astype(dtype)


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-13), (np.float16, 2e-3)])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_row_softmax_matches_numpy(shape, dtype, rtol):
    x = rows(shape, dtype)
    if 0 in shape:  # numpy's max of an empty row raises; a row of length 0 is only allowed when rows are 0
        if shape[-1] == 0:
            return
    got = kiln.compile(kiln.softmax)(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, numpy_softmax(x), rtol=rtol, atol=1e-7 if dtype != np.float16 else 1e-4)


def test_row_softmax_is_one_kernel_with_a_row_buffer_until_the_row_outgrows_it():
    short = kiln.compile(kiln.softmax).lower(kiln.f32[8, 4096])
    assert short.text("optimized").startswith("// 1 kernels")
    assert "memref.alloca" in short.text("affine")
    long = kiln.compile(kiln.softmax).lower(kiln.f32[8, 4097])  # 16 KiB + 4 bytes: exp is stored instead
    assert long.text("optimized").startswith("// 2 kernels")


def test_row_softmax_of_special_values_matches_numpy_bit_for_bit_where_numpy_is_exact():
    x = np.array(
        [
            [0.0, -0.0, 1.0, 2.0],
            [np.inf, 1.0, 2.0, 3.0],  # inf - inf: nan
            [-np.inf, 1.0, 2.0, 3.0],  # exp(-inf) is 0
            [-np.inf, -np.inf, -np.inf, -np.inf],
            [np.nan, 1.0, 2.0, 3.0],
            [1e30, -1e30, 0.0, 1e30],
            [-0.0, -0.0, -0.0, -0.0],
        ],
        np.float32,
    )
    x = np.concatenate([x, np.tile(x, (1, 33))[:, :131]], axis=1)  # rows longer than a vector, with tails
    got = kiln.compile(kiln.softmax)(x)
    want = numpy_softmax(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    assert not np.signbit(got[~np.isnan(got)]).any()


@pytest.mark.parametrize("axis", [0, 1, -1, (0, 2)])
def test_softmax_along_other_axes_and_ranks_matches_numpy(axis):
    x = rows((5, 6, 37), np.float32, seed=1)
    got = kiln.compile(lambda v: kiln.softmax(v, axis=axis))(x)
    np.testing.assert_allclose(got, numpy_softmax(x, axis), rtol=2e-6, atol=1e-8)


def test_softmax_of_a_vector_uses_a_row_buffer_at_function_level():
    x = rows((1000,), np.float32, seed=2)
    compiled = kiln.compile(kiln.softmax)
    np.testing.assert_allclose(compiled(x), numpy_softmax(x), rtol=2e-6, atol=1e-9)
    assert compiled.lower(x).text("optimized").startswith("// 1 kernels")


@pytest.mark.parametrize("count", [1, 2])
def test_parallel_rows_each_use_their_own_row_buffer(count):
    x = rows((4096, 100), np.float32, seed=3)
    compiled = kiln.compile(kiln.softmax)
    assert "affine.parallel" in compiled.lower(x).text("scheduled")
    before = threads.thread_count()
    threads.set_thread_count(count)
    try:
        got = compiled(x)
    finally:
        threads.set_thread_count(before)
    np.testing.assert_allclose(got, numpy_softmax(x), rtol=2e-6, atol=1e-9)


def test_logsumexp_and_a_cross_entropy_gradient_match_numpy():
    x = rows((33, 257), np.float32, seed=4)
    y = np.eye(257, dtype=np.float32)[np.arange(33) % 257]

    def loss(z):
        return -np.mean(np.sum(y * (z - kiln.logsumexp(z, axis=1, keepdims=True)), axis=1))

    value, grad = kiln.compile(kiln.value_and_grad(loss))(x)
    wide = x.astype(np.float64)
    lse = wide.max(1, keepdims=True) + np.log(np.exp(wide - wide.max(1, keepdims=True)).sum(1, keepdims=True))
    np.testing.assert_allclose(value, -np.mean(np.sum(y * (wide - lse), axis=1)), rtol=1e-5)
    np.testing.assert_allclose(grad, (np.exp(wide - lse) - y) / 33, rtol=1e-4, atol=1e-7)


LENGTHS = [1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 1031]


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_float_max_and_min_in_several_accumulators_match_numpy_exactly(length, reduce):
    rng = np.random.default_rng(length)
    x = rng.standard_normal((6, length)).astype(np.float32)
    x[1, rng.integers(0, length)] = np.nan  # anywhere: in any accumulator, or in the tail
    x[2] = -0.0
    x[3, :] = 0.0
    x[3, rng.integers(0, length)] = -0.0
    x[4, rng.integers(0, length)] = np.inf
    x[5, rng.integers(0, length)] = -np.inf
    fn = (lambda v: v.max(axis=1)) if reduce == "max" else (lambda v: v.min(axis=1))
    got, want = kiln.compile(fn)(x), fn(x)
    np.testing.assert_array_equal(got, want)
    signs = [0, 1, 2, 4, 5]  # row 3 mixes 0.0 and -0.0: numpy's answer there depends on its order
    np.testing.assert_array_equal(np.signbit(got[signs]), np.signbit(want[signs]))
    # kiln's is IEEE's maximum and minimum (0.0 > -0.0) at every length, vectorized or not
    assert length == 1 or np.signbit(got[3]) == (reduce == "min")


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float64])
def test_integer_reductions_in_several_accumulators_match_numpy_exactly(length, dtype):
    rng = np.random.default_rng(length)
    x = rng.integers(0, 200, (3, length)).astype(dtype)
    for fn in (lambda v: v.max(axis=1), lambda v: v.min(axis=1), lambda v: v.sum(axis=1, dtype=v.dtype)):
        np.testing.assert_array_equal(kiln.compile(fn)(x), fn(x))
    flags = x % 3 == 0
    np.testing.assert_array_equal(kiln.compile(lambda v: v.any(axis=1))(flags), flags.any(axis=1))
    np.testing.assert_array_equal(kiln.compile(lambda v: v.all(axis=1))(flags), flags.all(axis=1))


def test_a_long_max_runs_in_four_accumulators():
    # 1003 leaves whole vectors and a scalar remainder after the four accumulators at any
    # vector width (4, 8 or 16 float32 lanes: AVX-512 is not on every host)
    text = kiln.compile(lambda v: v.max(axis=1)).lower(kiln.f32[3, 1003]).text("scheduled")
    assert "iter_args(%acc0 = %2, %acc1 = %4, %acc2 = %6, %acc3 = %8)" in text
    assert '{kiln.loop = "k0.r.tail"}' in text  # the vectors left over, one accumulator
    assert '{kiln.loop = "k0.r.tail.tail"}' in text  # then the scalar remainder


@pytest.mark.parametrize("shape", [(1, 1), (7, 15), (13, 16), (131, 129), (257, 520), (1024, 1024), (3, 4099)], ids=str)
def test_column_sums_with_jammed_vectors_match_a_float64_sum(shape):
    x = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    x[0, 0] = -0.0
    got = kiln.compile(lambda v: v.sum(axis=0))(x)
    exact = x.astype(np.float64).sum(axis=0)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, exact, rtol=4 * shape[0] ** 0.5 * 2**-24)


def test_column_sums_read_many_vectors_per_row_and_leave_two_blocks_for_the_threads():
    text = kiln.compile(lambda v: v.sum(axis=0)).lower(kiln.f32[1024, 1024]).text("scheduled")
    if "vector<16xf32>" in text:  # AVX-512; with AVX2's 16 registers, eight
        assert "unroll_jam(k0.i, 32); parallel(k0.i.u)" in text.splitlines()[0]


def test_a_row_sum_adds_vectors_up_its_tree_and_sums_the_lanes_once():
    text = kiln.compile(lambda v: v.sum(axis=1)).lower(kiln.f32[4, 1024]).text("scheduled")
    if "vector<16xf32>" in text:
        assert text.count("vector.reduction <add>") == 1


@pytest.mark.parametrize("length", [64, 100, 512, 1000, 1024, 4099, 65536 + 17])
def test_row_sums_with_lanes_summed_once_stay_within_two_ulp_of_fsum(length):
    import math

    x = np.random.default_rng(length).random((3, length), dtype=np.float32)
    got = kiln.compile(lambda v: v.sum(axis=1))(x)
    for row, value in zip(x, got):
        exact = math.fsum(row.astype(np.float64))
        assert abs(float(value) - exact) <= 2 * float(np.spacing(np.float32(exact)))


@pytest.mark.parametrize("shape", [(10**7,), (1024, 1024), (2**17 + 3,), (3 * 2**16,), (64, 4096, 3)], ids=str)
def test_whole_sums_in_parallel_slices_stay_within_two_ulp_and_do_not_depend_on_threads(shape):
    import math

    x = np.random.default_rng(len(shape)).random(shape, dtype=np.float32)
    compiled = kiln.compile(lambda v: v.sum())
    before = threads.thread_count()
    results = []
    try:
        for count in (1, 2, 3):
            threads.set_thread_count(count)
            results.append(compiled(x))
    finally:
        threads.set_thread_count(before)
    exact = math.fsum(x.astype(np.float64).ravel())
    assert results[0] == results[1] == results[2]  # the slices are fixed, whatever runs them
    assert abs(float(results[0]) - exact) <= 2 * float(np.spacing(np.float32(exact)))


def test_a_whole_sum_runs_in_slices_where_its_first_axis_divides_and_in_one_tree_where_it_is_prime():
    sliced = kiln.compile(lambda v: v.sum()).lower(kiln.f32[10**7]).text("scheduled")
    assert "parallel(k0.sum)" in sliced.splitlines()[0] and "memref<16xf32>" in sliced
    prime = kiln.compile(lambda v: v.sum()).lower(kiln.f32[2**17 + 3]).text("scheduled")
    assert "partials" not in prime


def test_whole_sums_of_special_values_match_numpy():
    for values in (
        [-0.0] * 200000,
        [1.0] * 199999 + [np.nan],
        [np.inf] * 3 + [1.0] * 199997,
        [np.inf, -np.inf] * 100000,
    ):
        x = np.array(values, np.float32)
        with np.errstate(invalid="ignore"):  # inf - inf
            got, want = kiln.compile(lambda v: v.sum())(x), x.sum()
        np.testing.assert_array_equal(got, want)
        assert np.signbit(got) == np.signbit(want)


def numpy_logsumexp(x, axis=-1):
    top = np.max(x, axis=axis, keepdims=True)
    return top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))


def numpy_layernorm(x, axis=-1):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    return centered / np.sqrt(np.mean(centered * centered, axis=axis, keepdims=True) + 1e-5)


# Each row pattern written as user code would write it; the same code run by numpy is the oracle.
ROW_PATTERNS = {
    "softmax": numpy_softmax,
    "kiln_softmax": lambda v: kiln.softmax(v, axis=-1),
    "logsumexp": numpy_logsumexp,
    "kiln_logsumexp": lambda v: kiln.logsumexp(v, axis=-1, keepdims=True),
    "log_softmax": lambda v: v - numpy_logsumexp(v),
    "shifted_logsumexp": lambda v: np.log(np.sum(np.exp(v - v.max(-1, keepdims=True)), -1, keepdims=True)),
    "layernorm": numpy_layernorm,
}
ORACLES = {"kiln_softmax": numpy_softmax, "kiln_logsumexp": numpy_logsumexp}
# Rows of one element, reached every way: a 0-d array seen as a vector, a vector of one, columns.
SHORT_ROWS = [
    ("0-d as (1,)", ()),
    ("(1,)", (1,)),
    ("(1, 1)", (1, 1)),
    ("(3, 1)", (3, 1)),
    ("(1, 7)", (1, 7)),
    ("(5,)", (5,)),
]


def as_rows(x):
    return x.reshape(-1) if x.ndim == 0 else x


@pytest.mark.parametrize("shape", [s for _, s in SHORT_ROWS], ids=[n for n, _ in SHORT_ROWS])
@pytest.mark.parametrize("pattern", ROW_PATTERNS)
def test_row_patterns_on_rows_of_one_and_rank_0_inputs_match_numpy_forward_and_finite_differences(pattern, shape):
    body = ROW_PATTERNS[pattern]
    x = np.array(rows(shape, np.float64, seed=5))
    got = kiln.compile(lambda v: body(as_rows(v)))(x)
    np.testing.assert_allclose(got, ORACLES.get(pattern, body)(as_rows(x)), rtol=1e-12, atol=1e-12)
    weights = rows(
        as_rows(x).shape, np.float64, seed=6
    )  # so that a sum that is constant (softmax's) is not all that is checked

    def loss(v):  # each as_rows is a view of its own, as in user code (one of the faults needed two)
        return np.sum(weights * body(as_rows(v))) + np.sum(as_rows(v) - body(as_rows(v)))

    # kiln.grad alone (no forward value kept) fuses differently from value_and_grad: check both
    np.testing.assert_allclose(kiln.compile(kiln.grad(loss))(x), central_differences(loss, x), rtol=1e-6, atol=1e-7)
    assert kiln.gradcheck(loss, x).ok


def central_differences(fn, x, eps=1e-6):
    """d fn / d x in float64, by numpy alone."""
    grad = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[k] += eps
        down[k] -= eps
        grad[k] = (fn(up) - fn(down)) / (2 * eps)
    return grad
