"""kiln.sort, the merge sort behind np.sort, np.argsort, partitions, medians and quantiles,
kiln.top_k, np.lexsort and ONNX TopK: numpy's stable sort is the oracle, bit for bit (NaN
last, -0.0 and 0.0 kept in index order, repeated keys in index order) in every dtype, at the
sizes that stress a bottom-up merge (0, 1, 2, primes, powers of two and one past); through
the LLVM code, the affine interpreter and CUDA emulation; every stage verified by mlir-opt;
gradients against float64 central differences; and the lowered IR is one nest of
ceil(log2 n) passes, not a network of log2(n)^2 / 2 columns."""

import numpy as np
import pytest
from stage_checks import MLIR_OPT, NVCC, assert_mlir_opt_accepts_every_stage, assert_nvcc_compiles

import kiln
from kiln.dialects import affine as A
from kiln.dialects import tensor_sort as TS
from kiln.dialects.diagnostics import KilnError, ShapeError
from kiln.dialects.types import TensorType, f32
from kiln.interpreters.affine_interpreter import run_affine
from kiln.interpreters.tensor_interpreter import run_function

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
DTYPES += [np.float16, np.float32, np.float64]
SIZES = [0, 1, 2, 3, 7, 8, 9, 31, 64, 127]


def bits_equal(got, want):
    """Equal dtype, shape and bits: NaN where NaN, the sign of every zero."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), (got, want)
        np.testing.assert_array_equal(got.view(unsigned)[~nan], want.view(unsigned)[~nan])
    else:
        np.testing.assert_array_equal(got, want)


def keys(shape, dtype, seed=0):
    """Few distinct values, so that most keys repeat (stability shows); floats with NaN, both
    infinities and both zeros; integers with their type's limits."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.25, 3.0, 1e-3], dtype)
    else:
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1, 7], dtype)
    return pool[rng.integers(0, pool.size, shape)]


def stable_argsort(x, axis=-1):
    return np.argsort(x, axis=axis, kind="stable")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sort_and_argsort_give_numpys_stable_order_in_every_dtype(dtype):
    sort = kiln.compile(lambda a: np.sort(a, axis=-1))
    argsort = kiln.compile(lambda a: np.argsort(a, axis=-1))
    for n in SIZES:
        x = keys((3, n), dtype, n)
        bits_equal(sort(x), np.sort(x, axis=-1, kind="stable"))
        bits_equal(argsort(x), stable_argsort(x))


def test_every_nan_sorts_last_and_zeros_keep_their_index_order():
    x = np.array([np.nan, 0.0, -0.0, -np.inf, np.nan, 0.0, np.inf, -0.0, 1.0], np.float32)
    got = kiln.compile(np.sort)(x)
    bits_equal(got, np.sort(x, kind="stable"))
    assert list(np.signbit(got[1:5])) == [False, True, False, True]  # 0.0, -0.0, 0.0, -0.0: as given
    bits_equal(kiln.compile(np.argsort)(x), np.array([3, 1, 2, 5, 7, 8, 6, 0, 4]))


def test_integer_limits_and_unsigned_order():
    for dtype in (np.int64, np.uint64, np.int8, np.uint8):
        info = np.iinfo(dtype)
        x = np.array([info.max, info.min, 0, info.max, 1, info.min], dtype)
        bits_equal(kiln.compile(np.sort)(x), np.sort(x, kind="stable"))
        bits_equal(kiln.compile(np.argsort)(x), stable_argsort(x))


@pytest.mark.parametrize("shape", [(4, 5, 6), (1, 11), (6, 1), (2, 0, 3)], ids=str)
def test_every_axis_and_axis_none(shape):
    x = keys(shape, np.float64, sum(shape))
    for axis in [None, *range(-len(shape), len(shape))]:
        bits_equal(kiln.compile(lambda a, axis=axis: np.sort(a, axis=axis))(x), np.sort(x, axis=axis, kind="stable"))
        bits_equal(kiln.compile(lambda a, axis=axis: np.argsort(a, axis=axis))(x), stable_argsort(x, axis))


def test_non_contiguous_and_reversed_views():
    x = keys((9, 14), np.float32, 3)
    for view in (x[::-1], x[:, ::-2], x.T, x[1:8:3, 2:]):
        bits_equal(kiln.compile(lambda a: np.argsort(a, axis=1))(view), stable_argsort(view, 1))
    traced = kiln.compile(lambda a: np.sort(a[::-1, ::2].T, axis=0))
    bits_equal(traced(x), np.sort(x[::-1, ::2].T, axis=0, kind="stable"))


def test_the_benchmark_shape_top_five_of_negated_scores():
    scores = np.random.default_rng(1).standard_normal((512, 128)).astype(np.float32)
    scores[::7, ::5] = 0.5  # ties
    f = kiln.compile(lambda s: np.argsort(-s, axis=1)[:, :5])
    bits_equal(f(scores), stable_argsort(-scores, 1)[:, :5])


def test_top_k_is_descending_nan_first_ties_by_lower_index():
    x = keys((5, 23), np.float32, 9)
    values, indices = kiln.compile(lambda a: kiln.top_k(a, 6))(x)
    want_values, want_indices = kiln.top_k(x, 6)  # numpy (lexsort) outside a trace
    bits_equal(values, want_values)
    bits_equal(indices, want_indices)
    u = keys((4, 17), np.uint8, 2)
    got = kiln.compile(lambda a: kiln.top_k(a, 17, axis=1))(u)
    for g, w in zip(got, kiln.top_k(u, 17, axis=1)):
        bits_equal(g, w)


def test_lexsort_and_partitions():
    a, b = keys((3, 29), np.int32, 4), keys((3, 29), np.float64, 5)
    bits_equal(kiln.compile(lambda p, q: np.lexsort((p, q), axis=-1))(a, b), np.lexsort((a, b), axis=-1))
    x = keys((41,), np.float32, 6)
    for kth in (0, 20, 40):
        got = kiln.compile(lambda v, kth=kth: np.partition(v, kth))(x)
        bits_equal(got[kth : kth + 1], np.sort(x, kind="stable")[kth : kth + 1])
        order = kiln.compile(lambda v, kth=kth: np.argpartition(v, kth))(x)
        assert order[kth] == stable_argsort(x)[kth]


def test_median_of_a_large_vector():
    x = np.random.default_rng(2).standard_normal(10007)
    assert kiln.compile(np.median)(x) == np.median(x)
    # the order statistics are exact; the interpolation between them may round differently
    got = kiln.compile(lambda v: np.quantile(v, [0.1, 0.9]))(x)
    np.testing.assert_allclose(got, np.quantile(x, [0.1, 0.9]), rtol=1e-15)


@pytest.mark.parametrize("target", ["interpret", "cuda-emulate"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint32, np.bool_, np.float16])
def test_other_targets(target, dtype):
    x = keys((6, 19), dtype, 7)
    bits_equal(kiln.compile(lambda a: np.sort(a, axis=1), target=target)(x), np.sort(x, axis=1, kind="stable"))
    bits_equal(kiln.compile(lambda a: np.argsort(a, axis=0), target=target)(x), stable_argsort(x, 0))
    bits_equal(kiln.compile(np.argsort, target=target)(x[0]), stable_argsort(x[0]))  # one row, one thread


def test_the_affine_interpreter_runs_both_loop_stages():
    x = keys((5, 23), np.float64, 8)
    lowered = kiln.compile(lambda a: np.argsort(a, axis=1)).lower(kiln.f64[5, 23])
    for stage in ("affine", "scheduled"):
        (out,) = run_affine(lowered.module(stage), [x])
        bits_equal(out, stable_argsort(x, 1))
    (out,) = run_function(lowered.module("tensor").body.ops[0], [x])
    bits_equal(out, stable_argsort(x, 1))


# -- structure --------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1000, 1024, 1025])
def test_a_sort_is_one_nest_of_log2_n_passes(n):
    """The merge sort's shape, not a network's: one nest (rows, a copy, ceil(log2 n) merge
    passes), so the loop count grows as log2(n), where a bitonic network has
    log2(n)(log2(n) + 1) / 2 columns of kernels (55 at n = 1000)."""
    lowered = kiln.compile(lambda a: np.argsort(a, axis=1)).lower(kiln.f32[4, n])
    affine = lowered.module("affine")
    function = next(op for op in affine.walk() if op.name == "func.func")
    nests = [op for op in function.body.ops if isinstance(op, A.ForOp)]
    assert len(nests) == 1
    loops = [op for op in nests[0].walk() if isinstance(op, A.ForOp)]
    passes = (n - 1).bit_length()
    assert len(loops) == 1 + 1 + passes  # rows, the copy, the passes
    sorts = [op for op in lowered.module("tensor").walk() if isinstance(op, TS.SortOp)]
    assert len(sorts) == 1 and sorts[0].returns_kind == "indices"


def test_the_op_refuses_what_it_cannot_sort():
    from kiln.dialects.ir import Block

    block = Block([TensorType((), f32)])
    with pytest.raises(ShapeError, match="0-d"):
        TS.SortOp([block.args[0]], {"order": "ascending", "returns": "values"}).verify()
    block = Block([TensorType((3,), f32)])
    with pytest.raises(KilnError, match="order must be one of"):
        TS.SortOp([block.args[0]], {"order": "up", "returns": "values"}).verify()


# -- gradients ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_gradients_of_sorted_values_match_finite_differences(axis):
    x = np.random.default_rng(11).permutation(42).reshape(6, 7) * 0.31  # distinct: no ties
    w = np.random.default_rng(12).standard_normal(42)
    w = w.reshape(6, 7) if axis is not None else w
    assert kiln.gradcheck(lambda a: np.sum(np.sort(a, axis=axis) * w), x).ok
    assert kiln.gradcheck(lambda a: np.sum(kiln.top_k(a, 3, axis=0)[0] ** 2), x).ok
    assert kiln.gradcheck(lambda a: np.median(a, axis=1).sum() + np.quantile(a, 0.3), x).ok


def test_the_gradient_lands_where_each_value_came_from():
    x = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    grad = kiln.compile(kiln.grad(lambda a: np.sum(np.sort(a, axis=1) * np.array([1.0, 10.0, 100.0]))))(x)
    np.testing.assert_array_equal(grad, [[100.0, 1.0, 10.0], [10.0, 1.0, 100.0]])


# -- CUDA C and mlir-opt ---------------------------------------------------------------------------
@pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)")
def test_nvcc_compiles_the_cuda_c_of_sorts(tmp_path):
    """One thread per row runs the merge passes (the CUDA code is the same loops)."""
    for k, (fn, spec) in enumerate(
        [
            (lambda a: np.argsort(-a, axis=1)[:, :5], kiln.f32[512, 128]),
            (np.sort, kiln.f16[100]),
            (lambda a: kiln.top_k(a, 3), kiln.u64[7, 9]),
        ]
    ):
        assert_nvcc_compiles(kiln.compile(fn, target="cuda-emulate").lower(spec).text("cuda"), tmp_path / f"sort{k}.cu")


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
def test_mlir_opt_accepts_every_stage_of_sorts():
    for fn, spec in [
        (lambda a: np.argsort(-a, axis=1)[:, :5], kiln.f32[8, 33]),
        (np.sort, kiln.f16[40]),
        (lambda a: np.sort(a, axis=0), kiln.u8[4, 9]),
        (lambda a: kiln.top_k(a, 2), kiln.i64[3, 5]),
        (kiln.grad(lambda a: np.sum(np.sort(a) ** 2)), kiln.f64[7]),
    ]:
        assert_mlir_opt_accepts_every_stage(kiln.compile(fn).lower(spec))
