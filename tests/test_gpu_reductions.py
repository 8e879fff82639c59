"""Row reductions on the GPU: the default recipe gives each row a block whose threads each
combine a strided share and then combine their partial results as a tree
(kiln_block_allreduce). Checked in host emulation, where a block's threads run as
cooperating fibres in forward or reverse order (KILN_EMULATE_ORDER), against numpy on
awkward row lengths and counts, NaN, infinities and signed zeros."""

import math
import re
import shutil
import subprocess

import numpy as np
import pytest

import kiln
from kiln.dialects import parse_ir
from kiln.passes.loop_transforms import bind
from kiln.passes.schedule import find_loop

ROW_LENGTHS = [1, 31, 32, 33, 1000, 100_003]
ROW_COUNTS = [1, 7, 13]
ORDERS = ["forward", "reverse"]


def layernorm(x):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    return centered / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + 1e-5)


def row_ops(x):
    return (
        x.sum(axis=-1),
        x.max(axis=-1),
        x.min(axis=-1),
        x.mean(axis=-1),
        kiln.softmax(x),
        layernorm(x),
        kiln.logsumexp(x, axis=-1),
    )


def numpy_row_ops(x):
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    m = x.max(axis=-1)
    return (
        x.sum(axis=-1),
        x.max(axis=-1),
        x.min(axis=-1),
        x.mean(axis=-1),
        shifted / shifted.sum(axis=-1, keepdims=True),
        layernorm(x),
        m + np.log(np.exp(x - m[:, None]).sum(axis=-1)),
    )


NAMES = ["sum", "max", "min", "mean", "softmax", "layernorm", "logsumexp"]


@pytest.fixture(params=ORDERS)
def order(request, monkeypatch):
    monkeypatch.setenv("KILN_EMULATE_ORDER", request.param)
    return request.param


def shapes():
    # every row length with a prime count of rows, and the short and long rows with 1 and 7
    cases = [(13, n) for n in ROW_LENGTHS]
    cases += [(rows, n) for rows in (1, 7) for n in (1, 33, 1000)]
    return cases + [(2, 100_003)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", shapes(), ids=str)
def test_row_reductions_give_numpys_numbers(shape, dtype, order):
    x = (np.random.default_rng(shape[1]).standard_normal(shape) * 3).astype(dtype)
    f = kiln.compile(row_ops, target="cuda-emulate")
    exact = np.abs(x.astype(np.float64)).sum(axis=-1)
    eps = np.finfo(dtype).eps
    for name, got, want in zip(NAMES, f(x), numpy_row_ops(x)):
        assert got.dtype == dtype and got.shape == want.shape, name
        if name == "sum":  # a strided share per thread then a tree: a few ulp of sum|x|, as numpy
            error = np.abs(got.astype(np.float64) - x.astype(np.float64).sum(axis=-1))
            assert (error <= 8 * eps * exact).all(), (name, error.max() / exact.max())
        elif name in ("max", "min"):
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            rtol = 2e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_sums_of_one_sign_stay_within_a_few_ulp(dtype, order):
    # Positive terms are where one thread adding a whole row loses most: about n/2 ulp of
    # the sum for 100 003 terms; a strided share of ~98 per thread and a tree lose a few.
    x = np.random.default_rng(11).random((3, 100_003)).astype(dtype)
    got = kiln.compile(lambda x: x.sum(axis=-1), target="cuda-emulate")(x)
    exact = np.array([math.fsum(row) for row in x.astype(np.float64)])  # correctly rounded
    error = np.abs(got - exact) / exact / np.finfo(dtype).eps
    assert (error <= 8).all(), error


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(13, 1), (7, 33), (13, 1000), (2, 100_003)], ids=str)
def test_integer_row_reductions_give_numpys_numbers(shape, dtype, order):
    rng = np.random.default_rng(3)
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    f = kiln.compile(lambda x: (x.sum(axis=-1), x.max(axis=-1), x.min(axis=-1)), target="cuda-emulate")
    text = f.lower(x).text("cuda")
    assert shape[1] < 32 or text.count("kiln_block_allreduce<") == 3
    total, high, low = f(x)
    want = x.sum(axis=-1)  # int32 sums in int64, as numpy's; int64 sums wrap around
    assert total.dtype == want.dtype
    np.testing.assert_array_equal(total, want)
    np.testing.assert_array_equal(high, x.max(axis=-1))
    np.testing.assert_array_equal(low, x.min(axis=-1))


def special_rows(n, dtype):
    """Rows of length n: a NaN early, late and alone in one thread's share; infinities of
    both signs; zeros of both signs, mixed and alone."""
    rows = np.zeros((9, n), dtype)
    rows[0] = np.arange(n)
    rows[0, n // 3] = np.nan
    rows[1] = -np.arange(n)
    rows[1, -1] = np.nan
    rows[2, :] = np.inf
    rows[3, :] = -np.inf
    rows[4] = np.arange(n)
    rows[4, n // 2] = np.inf
    rows[4, 0] = -np.inf
    rows[5, :] = -0.0
    rows[6, ::2] = -0.0
    rows[7, 1::2] = -0.0
    rows[8] = np.where(np.arange(n) % 7 == 3, -0.0, 0.0)
    return rows


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [33, 1000, 2053])
def test_nan_inf_and_signed_zeros_as_numpy(n, dtype, order):
    x = special_rows(n, dtype)
    f = kiln.compile(lambda x: (x.max(axis=-1), x.min(axis=-1), x.sum(axis=-1)), target="cuda-emulate")
    high, low, total = f(x)
    with np.errstate(invalid="ignore"):
        want_high, want_low, want_total = x.max(axis=-1), x.min(axis=-1), x.sum(axis=-1)
    np.testing.assert_array_equal(high, want_high)
    np.testing.assert_array_equal(low, want_low)
    # Rows 5 to 8 hold only zeros: -0.0 < 0.0 (IEEE 754 maximum and minimum, kiln's meaning on
    # every target), so the maximum is -0.0 only where every zero is, the minimum where any is.
    zeros = x[5:]
    np.testing.assert_array_equal(np.signbit(high[5:]), np.signbit(zeros).all(axis=-1))
    np.testing.assert_array_equal(np.signbit(low[5:]), np.signbit(zeros).any(axis=-1))
    np.testing.assert_array_equal(np.isnan(total), np.isnan(want_total))
    finite = ~np.isnan(want_total)
    np.testing.assert_array_equal(total[finite], want_total[finite])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_that_overflow_are_infinite(dtype, order):
    # the compensation is dropped at inf: it must not turn an overflowed sum into NaN
    big = np.finfo(dtype).max / 1000
    x = np.full((3, 100_003), big, dtype)
    x[1] = -big
    x[2, 1:] = 1.0
    x[2, 0] = np.inf  # inf from the start: the compensation must not make the rest NaN
    got = kiln.compile(lambda x: x.sum(axis=-1), target="cuda-emulate")(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, x.sum(axis=-1))


def test_empty_rows_and_no_rows():
    f = kiln.compile(lambda x: x.sum(axis=-1), target="cuda-emulate")
    np.testing.assert_array_equal(f(np.ones((5, 0), np.float32)), np.zeros(5, np.float32))
    assert f(np.ones((0, 1000), np.float32)).shape == (0,)


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.sum(axis=-1), lambda x: x.max(axis=-1), kiln.softmax, layernorm, lambda x: kiln.logsumexp(x, -1)],
    ids=["sum", "max", "softmax", "layernorm", "logsumexp"],
)
def test_the_default_schedule_gives_each_row_a_block(fn):
    lowered = kiln.compile(fn, target="cuda-emulate").lower(kiln.f32[64, 1000])
    scheduled = lowered.text("scheduled")
    assert scheduled.startswith("// schedule (default): bind(k0.i, blockIdx.x); bind(k0.r, threadIdx.x)")
    source = lowered.text("cuda")
    assert re.search(r"KILN_LAUNCH_COOP\(kiln_\w+_k0, 64, 1, 1, 1024, 1, 1,", source)
    # every reduction loop is combined by a block: none is left to one thread per row
    assert source.count("kiln_block_allreduce<float, kiln_") == scheduled.count("iter_args") > 0


def test_rows_of_a_3d_tensor_take_two_block_indices(order):
    f = kiln.compile(lambda x: (x - x.mean(axis=-1, keepdims=True)).max(axis=-1), target="cuda-emulate")
    x = np.random.default_rng(4).standard_normal((3, 5, 100))
    scheduled = f.lower(x).text("scheduled")
    assert "bind(k0.j, blockIdx.x); bind(k0.i, blockIdx.y)" in scheduled
    np.testing.assert_allclose(f(x), (x - x.mean(axis=-1, keepdims=True)).max(axis=-1), rtol=1e-12, atol=1e-12)


def test_a_rows_result_is_stored_by_one_thread():
    source = kiln.compile(lambda x: x.sum(axis=-1), target="cuda-emulate").lower(kiln.f32[6, 500]).text("cuda")
    assert "        if (threadIdx.x == 0) v1[(v2) * 1LL] = v" in source


def test_the_block_size_follows_the_row_length():
    for n, threads in [(32, 32), (33, 64), (700, 704), (100_003, 1024)]:
        source = kiln.compile(lambda x: x.max(axis=-1), target="cuda-emulate").lower(kiln.f32[5, n]).text("cuda")
        assert f"KILN_LAUNCH_COOP(kiln__lambda__k0, 5, 1, 1, {threads}, 1, 1," in source, n


@pytest.mark.parametrize(
    "fn,shape",
    [
        (lambda x: x.sum(axis=-1), (64, 31)),  # a row shorter than a warp: a thread a row
        (lambda x: x.sum(axis=0), (1000, 64)),  # column sums: a thread per column reads coalesced
        (lambda x: x.T.sum(axis=-1), (1000, 64)),  # the same through a transpose
        (lambda x: x @ x.T, (64, 64)),  # a matmul's k loop reads across rows of its right operand
        (lambda x: np.tanh(x) + 1, (64, 1000)),  # elementwise: nothing to combine
    ],
    ids=["short rows", "columns", "transposed", "matmul", "elementwise"],
)
def test_other_kernels_keep_a_thread_per_element(fn, shape):
    lowered = kiln.compile(fn, target="cuda-emulate").lower(kiln.f32[shape])
    assert "kiln.bind" not in lowered.text("scheduled")
    assert "    KILN_LAUNCH_COOP(" not in lowered.text("cuda")
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(kiln.compile(fn, target="cuda-emulate")(x), fn(x), rtol=2e-5, atol=1e-4)


def test_sums_read_across_rows_keep_the_summation_tree():
    # x.T.sum(-1) walks a column of x: not the block's coalesced plain loop but the tree,
    # whose error does not grow with the column's length.
    text = kiln.compile(lambda x: x.T.sum(axis=-1), target="cuda-emulate").lower(kiln.f32[5000, 3]).text("scheduled")
    assert "k0.r.b" in text
    x = np.full((20_000, 3), 0.1, np.float32)
    got = kiln.compile(lambda x: x.T.sum(axis=-1), target="cuda-emulate")(x)
    np.testing.assert_allclose(got, np.full(3, 2000.0), rtol=1e-6)


def test_a_given_schedule_can_bind_a_reduction(order):
    schedule = kiln.Schedule().split("k0.i", 2).bind("k0.i.o", "blockIdx.x").bind("k0.r", "threadIdx.x")
    f = kiln.compile(lambda x: x.min(axis=-1), target="cuda-emulate", schedule=schedule)
    x = np.random.default_rng(2).standard_normal((9, 77))
    assert "KILN_LAUNCH_COOP(kiln__lambda__k0, 5, 1, 1, 96, 1, 1," in f.lower(x).text("cuda")
    np.testing.assert_array_equal(f(x), x.min(axis=-1))  # rows of a block one after another


PRODUCT = """
func.func @product(%x: memref<7x40xf32>, %out0: memref<7xf32>) attributes {kiln.buffers = ["x", "out0"]} {
  %0 = arith.constant 1.0 : f32
  affine.for %k0.i = 0 to 7 {
    %1 = affine.for %k0.r = 0 to 40 iter_args(%acc0 = %0) -> (f32) {
      %2 = affine.load %x[%k0.i, %k0.r] : memref<7x40xf32>
      %3 = arith.mulf %acc0, %2 : f32
      affine.yield %3 : f32
    } {kiln.loop = "k0.r"}
    affine.store %1, %out0[%k0.i] : memref<7xf32>
  } {kiln.loop = "k0.i"}
  func.return
}
"""


def test_reductions_the_block_cannot_combine_are_refused_by_name():
    function = parse_ir(PRODUCT)
    loop = find_loop(function, "k0.r")
    with pytest.raises(kiln.ScheduleError, match=r"bind\(k0.r, threadIdx.x\): only loops without iter_args, or"):
        bind(loop, "threadIdx.x")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.uint64, np.bool_])
def test_narrow_unsigned_and_boolean_rows(dtype, order):
    rng = np.random.default_rng(9)
    if dtype == np.bool_:
        x = rng.random((7, 300)) < 0.002  # mostly False: some rows all False
        fn = lambda x: (x.any(axis=-1), x.all(axis=-1), (~x).all(axis=-1))  # noqa: E731
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, (7, 300), dtype=dtype, endpoint=True)
        fn = lambda x: (x.max(axis=-1), x.min(axis=-1), x.sum(axis=-1))  # noqa: E731
    f = kiln.compile(fn, target="cuda-emulate")
    assert f.lower(x).text("cuda").count("kiln_block_allreduce<") >= 2
    for got, want in zip(f(x), fn(x)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_argmax_along_rows(order):
    x = np.random.default_rng(12).standard_normal((13, 1000)).astype(np.float32)
    x[3, 10] = x[3, 900] = 50.0  # a tie: the first index, as numpy's
    x[5, 77] = np.nan  # a NaN: its index, as numpy's
    f = kiln.compile(lambda x: x.argmax(axis=-1), target="cuda-emulate")
    np.testing.assert_array_equal(f(x), x.argmax(axis=-1))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_the_cooperative_kernels_compile_with_nvcc(tmp_path):
    source = kiln.compile(row_ops, target="cuda").lower(kiln.f32[7, 1000]).text("cuda")
    ints = kiln.compile(lambda x: (x.sum(-1), x.max(-1)), target="cuda").lower(kiln.i32[7, 1000]).text("cuda")
    (tmp_path / "rows.cu").write_text(source)
    (tmp_path / "ints.cu").write_text(ints.replace("kiln__lambda_", "kiln_ints_"))
    for name in ("rows.cu", "ints.cu"):
        subprocess.run(
            [shutil.which("nvcc"), "-c", "-o", str(tmp_path / (name + ".o")), str(tmp_path / name)], check=True
        )
