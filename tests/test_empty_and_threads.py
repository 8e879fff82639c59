"""Arrays with no elements, and compiling from several threads at once.

Every op takes size-0 operands and gives numpy's result (shape, dtype, values:
an empty sum is 0, an empty mean nan, an empty max an error), natively, in the
interpreter and in the CUDA backend's host emulation. Threads trace and compile
independently (trace state belongs to the thread) and share the compile caches.
"""

import ctypes
import os
import shutil
import subprocess
import threading
import warnings

import cffi
import numpy as np
import pytest
from op_table import CASES, IX_TRACED_INDEX_CASES
from test_ops import assert_same

import kiln
from kiln.codegen.cuda_codegen import emit_cuda, entry_name
from kiln.codegen.cuda_prelude import PRELUDE

CXX = shutil.which("g++")
TARGETS = [
    "cpu",
    "interpret",
    pytest.param(
        "cuda-emulate",
        marks=pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) for the CUDA backend's host emulation"),
    ),
]


def numpy_result(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns for empty means; the value is what counts
        return fn(*args)


def kiln_result(fn, target, *args, debug=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return kiln.compile(fn, target=target, debug=debug)(*args)


def check(fn, target, *args):
    assert_same(kiln_result(fn, target, *args), numpy_result(fn, *args))


# -- the issue's examples, and the rules behind them ---------------------------------------------
ISSUE_EXAMPLES = [
    ("reshape_minus_one", lambda a: a.reshape(-1), [np.zeros((0, 3), np.float32)]),
    ("stack", lambda a: np.stack([a, a]), [np.zeros((0,), np.float32)]),
    ("ellipsis_newaxis", lambda x: x[..., None], [np.zeros((3, 0, 2), np.float32)]),
    ("mean", lambda x: x.mean(), [np.zeros((0,), np.float32)]),
    ("var", lambda x: x.var(), [np.zeros((0, 4), np.float64)]),
    ("mean_empty_axis", lambda x: np.mean(x, axis=0), [np.zeros((0, 4), np.float32)]),
    ("var_ddof_one_element", lambda x: np.var(x, ddof=1), [np.array([2.5])]),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, fn, args", ISSUE_EXAMPLES, ids=[e[0] for e in ISSUE_EXAMPLES])
def test_the_reported_size_0_examples_give_numpys_results(name, fn, args, target):
    check(fn, target, *args)


EMPTY_REDUCTIONS = [
    ("sum_all_f32", np.sum, np.zeros((0,), np.float32)),
    ("sum_empty_axis", lambda x: x.sum(axis=0), np.zeros((0, 5))),
    ("sum_keepdims", lambda x: x.sum(axis=(0, 2), keepdims=True), np.zeros((0, 3, 2), np.float32)),
    ("sum_int32_widens", np.sum, np.zeros((4, 0), np.int32)),
    ("sum_bool_counts", lambda x: x.sum(axis=1), np.zeros((3, 0), bool)),
    ("sum_of_nothing_kept", lambda x: x.sum(axis=1), np.zeros((0, 7), np.float32)),
    ("mean_int", np.mean, np.zeros((0,), np.int64)),
    ("mean_axis_1", lambda x: x.mean(axis=1), np.zeros((4, 0), np.float32)),
    ("mean_keepdims", lambda x: x.mean(axis=0, keepdims=True), np.zeros((0, 2, 3))),
    ("var_axis", lambda x: x.var(axis=0), np.zeros((0, 3), np.float32)),
    ("std_empty", np.std, np.zeros((2, 0))),
    ("var_ddof_equals_n", lambda x: x.var(ddof=2), np.array([1.0, 3.0])),  # 2 / 0: inf
    ("var_ddof_above_n", lambda x: x.var(ddof=5), np.array([1.0, 3.0, 4.0])),  # clamped to n - ddof = 0
    ("var_constant_ddof_n", lambda x: x.var(axis=1, ddof=3), np.ones((2, 3), np.float32)),  # 0 / 0: nan
    ("std_ddof_one_element", lambda x: x.std(ddof=1), np.array([7.0], np.float32)),
    ("max_of_nonempty_axes", lambda x: x.max(axis=1), np.zeros((0, 3), np.float32)),
    ("min_keepdims", lambda x: np.min(x, axis=0, keepdims=True), np.zeros((4, 0), np.int64)),
    ("softmax_rows_of_nothing", kiln.softmax, np.zeros((0, 5), np.float32)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, fn, x", EMPTY_REDUCTIONS, ids=[e[0] for e in EMPTY_REDUCTIONS])
def test_reductions_over_nothing_give_numpys_identity_or_nan(name, fn, x, target):
    check(fn, target, x)


def test_empty_means_warn_at_the_users_line():
    with pytest.warns(RuntimeWarning, match="mean or variance over no elements") as record:
        kiln.compile(lambda x: x.mean(axis=0))(np.zeros((0, 2)))
    assert __file__.endswith(record[0].filename)


@pytest.mark.parametrize(
    "fn",
    [np.max, np.min, lambda x: x.max(axis=0), lambda x: np.amin(x, axis=(0, 1)), lambda x: kiln.logsumexp(x, axis=0)],
)
def test_max_and_min_of_nothing_raise_value_error_when_traced(fn):
    x = np.zeros((0, 3), np.float32)
    with pytest.raises(ValueError):
        fn(x)  # numpy's own behaviour
    f = kiln.compile(fn)
    with pytest.raises(kiln.ShapeError, match="empty axis has no identity") as error:
        f.lower(kiln.f32[0, 3])  # at trace time, before any code is made
    assert isinstance(error.value, ValueError)


MATMULS_WITH_K_0 = [
    ("matrix", (3, 0), (0, 4), np.float32),
    ("batched", (2, 3, 0), (0, 5), np.float64),
    ("broadcast_batch", (2, 1, 1, 0), (3, 0, 2), np.float32),
    ("vector_vector", (0,), (0,), np.float64),
    ("matrix_vector", (5, 0), (0,), np.float32),
    ("integers", (2, 0), (0, 3), np.int64),
    ("empty_result", (0, 4), (4, 3), np.float32),
    ("empty_batch", (0, 2, 3), (3, 4), np.float64),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, a, b, dtype", MATMULS_WITH_K_0, ids=[m[0] for m in MATMULS_WITH_K_0])
def test_matmul_over_nothing_is_zeros(name, a, b, dtype, target):
    check(lambda x, y: x @ y, target, np.ones(a, dtype), np.ones(b, dtype))


VIEWS = [
    ("transposed_input", lambda x: x * 2, np.zeros((3, 0), np.float32).T),
    ("reversed_input", lambda x: x + 1, np.zeros((0,))[::-1]),
    ("strided_input", lambda x: np.tanh(x), np.zeros((4, 0, 6), np.float32)[::2, :, ::3]),
    ("reverse_empty", lambda x: x[::-1], np.zeros((0, 2), np.int32)),
    ("transpose_empty", lambda x: x.T + 1, np.zeros((2, 0, 3), np.float32)),
    ("slice_to_nothing", lambda x: x[3:1, :] * 2, np.ones((5, 3), np.float32)),
    ("reshape_zero_to_zero", lambda x: x.reshape(0, 5, 0), np.zeros((3, 0, 7))),
    ("reshape_keeps_zero_last", lambda x: x.reshape(2, 3, -1), np.zeros((6, 0), np.float32)),
    ("broadcast_zero", lambda x, y: x + y, np.zeros((0, 1), np.float32), np.ones((1, 3), np.float32)),
    ("broadcast_to_zero", lambda x: np.broadcast_to(x, (0, 4)), np.ones((4,), np.int64)),
    ("concatenate_nothing", lambda x, y: np.concatenate([x, y], axis=0), np.zeros((0, 3)), np.ones((2, 3))),
    ("concatenate_empties", lambda x, y: np.concatenate([x, y], axis=1), np.zeros((0, 3)), np.zeros((0, 2))),
    ("where_empty", lambda c, x: np.where(c, x, -x), np.zeros((0, 3), bool), np.zeros((0, 3), np.float32)),
    ("squeeze_beside_zero", np.squeeze, np.zeros((1, 0, 1), np.float32)),
    ("expand_dims_zero", lambda x: np.expand_dims(x, (0, 2)), np.zeros((0, 3), np.float32)),
    ("cast_empty", lambda x: x.astype(np.int32), np.zeros((2, 0), np.float64)),
    ("index_beside_zero", lambda x: x[1, :, -1], np.zeros((3, 0, 2), np.float32)),
    (
        "conv2d_no_channels",
        lambda x, w: kiln.conv2d(x, w, padding=1),
        np.zeros((2, 0, 5, 5), np.float32),
        np.zeros((3, 0, 3, 3), np.float32),
    ),
    ("conv2d_no_batch", kiln.conv2d, np.zeros((0, 2, 5, 5)), np.ones((3, 2, 3, 3))),
    ("grad_of_empty_sum", kiln.grad(lambda x: np.sum(np.tanh(x) * 3)), np.zeros((0, 4), np.float32)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("view", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_and_layouts_of_empty_arrays(view, target):
    name, fn, *args = view
    if name == "grad_of_empty_sum":
        got = kiln_result(fn, target, *args)
        assert_same(got, np.zeros((0, 4), np.float32))  # d/dx of a sum over nothing: nothing
    else:
        check(fn, target, *args)


# -- the whole op table, with each dimension shrunk to 0 and to 1 -----------------------------------
def resized(case, size) -> list:
    """`case`'s arguments with dimension lengths replaced by `size`: each distinct length in
    every argument at once (so broadcasting and contraction still fit), then each axis of
    each argument alone. The values are the case's own, repeated or cut (np.resize)."""
    shapes = [np.shape(a) for a in case.args]
    variants = []
    for length in sorted({d for shape in shapes for d in shape if d != size}):
        variants.append([tuple(size if d == length else d for d in shape) for shape in shapes])
    for i, shape in enumerate(shapes):
        for axis in range(len(shape)):
            variants.append(
                [tuple(size if (j, k) == (i, axis) else d for k, d in enumerate(s)) for j, s in enumerate(shapes)]
            )
    unique = []
    for variant in variants:
        if variant != shapes and variant not in unique:
            unique.append(variant)
    return [
        [np.resize(a, s).astype(a.dtype) if isinstance(a, np.ndarray) else a for a, s in zip(case.args, variant)]
        for variant in unique
    ]


def numpy_refuses_an_index(fn, args) -> bool:
    try:
        numpy_result(fn, *args)
    except IndexError:
        return True
    except ValueError:
        pass
    return False


def matches_numpy_or_refuses_alike(fn, target, args):
    try:
        want = numpy_result(fn, *args)
    except (ValueError, IndexError) as numpy_error:  # an empty max, an index past a shrunk axis
        with pytest.raises(IndexError if isinstance(numpy_error, IndexError) else ValueError):
            kiln_result(fn, target, *args)
        return
    except ZeroDivisionError:
        # np.average's weights summing to zero (or an empty average): numpy raises on the values,
        # which kiln sees only at run time; documented as inf or nan. It must still run cleanly.
        try:
            got = kiln_result(fn, target, *args)
        except kiln.KilnError:
            return
        assert np.asarray(got).dtype.kind == "f"
        return
    assert_same(kiln_result(fn, target, *args), want)


def numpy_leaves_undefined(case, args) -> bool:
    """numpy's einsum skips its size check of a repeated label whose first size is 0
    (np.einsum("iji->ji", a) of a (0, 2, 3) array) and returns uninitialised memory; kiln
    refuses the differing sizes as it does for every other shape."""
    return case.name == "linalg_einsum_diagonal_3d" and args[0].shape[0] != args[0].shape[2]


@pytest.mark.parametrize("target", ["cpu", "interpret"])
@pytest.mark.parametrize("size", [0, 1])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_every_op_table_case_resized_matches_numpy(case, size, target):
    for args in resized(case, size):
        if case.name.startswith("conv2d") and args[0].shape[1] != args[1].shape[1]:
            continue  # kiln.conv2d on arrays is kiln's own reference, which does not check channels
        if numpy_leaves_undefined(case, args):
            with pytest.raises(kiln.ShapeError):
                kiln_result(case.fn, target, *args)
            continue
        if case.name in IX_TRACED_INDEX_CASES and numpy_refuses_an_index(case.fn, args):
            # an index argument out of range: OutOfBoundsError when the function runs, or a refusal
            # while tracing (no index fits an axis of size 0; a later line that numpy never reached)
            with pytest.raises(kiln.KilnError):
                kiln_result(case.fn, target, *args)
            continue
        try:
            matches_numpy_or_refuses_alike(case.fn, target, args)
        except AssertionError as exc:
            raise AssertionError(f"{case.name} with shapes {[np.shape(a) for a in args]}: {exc}") from None


def empty_inputs_numpy_takes(case):
    """(arguments, numpy's result) for each size-0 variant of `case` that numpy computes
    (a convolution whose channels no longer match is not one)."""
    for args in resized(case, 0):
        if (
            case.name.startswith("conv2d")
            and args[0].shape[1] != args[1].shape[1]
            or numpy_leaves_undefined(case, args)
        ):
            continue
        try:
            yield args, numpy_result(case.fn, *args)
        except (ValueError, IndexError, ZeroDivisionError):
            continue


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_no_native_load_or_store_of_a_size_0_case_leaves_its_buffer(case):
    """Debug builds bounds-check every load and store of the native code: a value hoisted
    out of a loop that never runs must not read an empty buffer."""
    for args, want in empty_inputs_numpy_takes(case):
        try:
            got = kiln_result(case.fn, "cpu", *args, debug=True)
        except kiln.NonFiniteError:
            continue  # an integer mean of nothing divides 0 by 0, which debug mode reports after the bounds
        assert_same(got, want)


@pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) for the CUDA backend's host emulation")
def test_every_op_table_case_with_a_size_0_dimension_in_cuda_host_emulation(tmp_path):
    """One C++ build for all of them (one per case would take minutes)."""
    runs, parts = [], [PRELUDE]
    for case in CASES:
        for args, want in empty_inputs_numpy_takes(case):  # numpy's refusals are checked natively above
            compiled = kiln.compile(case.fn, target="cuda-emulate")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                lowered = compiled.lower(*args)
            prefix = f"c{len(runs)}_"
            parts.append(emit_cuda(lowered.module("affine"), prefix=prefix, prelude=False))
            function = lowered.module("tensor").body.ops[0]
            runs.append((case.name, args, want, entry_name(function.sym_name, prefix), function))
    source, library = tmp_path / "empty.cu", tmp_path / "empty.so"
    source.write_text("\n".join(parts))
    subprocess.run(
        [CXX, "-DKILN_EMULATE", "-x", "c++", "-O0", "-fPIC", "-shared", str(source), "-o", str(library)], check=True
    )
    ffi = cffi.FFI()
    for _, _, _, name, function in runs:
        count = len(function.arguments) + len(function.function_type.results)
        ffi.cdef(f"int {name}({', '.join(['void *'] * count)});")
    lib = ffi.dlopen(str(library))
    for case_name, args, want, name, function in runs:
        inputs = [np.ascontiguousarray(np.asarray(a, dtype=arg.type.dtype)) for a, arg in zip(args, function.arguments)]
        outputs = [np.full(t.shape, 7, t.dtype) for t in function.function_type.results]  # 7: not an identity
        assert getattr(lib, name)(*[ffi.from_buffer(a) for a in inputs + outputs]) == 0, case_name
        assert_same(outputs[0][()] if outputs[0].ndim == 0 else outputs[0], want)


def test_a_result_with_no_elements_runs_no_native_code():
    f = kiln.compile(lambda x, y: (x @ y, x.sum(axis=1)))
    x, y = np.ones((0, 3), np.float32), np.ones((3, 5), np.float32)
    f.lower(x, y).compile()
    (executable,) = f._executables.values()

    called = []

    @ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * 4)
    def record(*pointers):  # what the generated entry of plain arrays calls
        called.append(pointers)
        return 0

    class Refuse:
        def __call__(self, arrays):
            raise AssertionError("native code was called with nothing to compute")

        c_function = __call__  # what the fast path of plain arrays calls
        address = ctypes.cast(record, ctypes.c_void_p).value

    executable.native = Refuse()
    for _ in range(2):  # the checked path, then the fast path it registers
        product, sums = f(x, y)
        assert product.shape == (0, 5) and product.dtype == np.float32
        assert sums.shape == (0,) and sums.dtype == np.float32
    assert f._plain_calls.table
    out = (np.empty((0, 5), np.float32), np.empty((0,), np.float32))
    assert f(x, y, out=out) is out
    assert not called, "the entry called native code with nothing to compute"


# -- threads ---------------------------------------------------------------------------------------
def run_in_threads(count, work):
    """work(k) in `count` threads released together; returns their results, re-raising any error."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def run(k):
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as exc:  # noqa: B036 (handed to the main thread below)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A cache of the test's own: every thread really compiles."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))


def own_function(k):
    """A different function for each k, with a gradient inside for some (nested traces)."""
    if k % 2:
        return lambda x, w: np.tanh(x * (k + 1)) @ w + x.sum(axis=0) * k
    return lambda x, w: kiln.grad(lambda x, w: np.sum(np.sin(x @ w) * (k + 1)), argnums=1)(x, w)


@pytest.mark.parametrize("repeat", range(4))
def test_eight_threads_compile_and_call_their_own_functions(repeat, empty_cache):
    def work(k):
        rng = np.random.default_rng(100 * repeat + k)
        x = rng.standard_normal((3 + k, 7))
        w = rng.standard_normal((7, 7 if k % 2 else 2))
        fn = own_function(k)
        return kiln.compile(fn)(x, w), x, w

    for k, (got, x, w) in enumerate(run_in_threads(8, work)):
        if k % 2:
            want = np.tanh(x * (k + 1)) @ w + x.sum(axis=0) * k
        else:
            want = x.T @ (np.cos(x @ w) * (k + 1))  # d/dw sum(sin(x @ w)) * (k + 1)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("repeat", range(4))
def test_eight_threads_call_one_function_with_new_shapes(repeat, empty_cache):
    f = kiln.compile(lambda x: (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1))
    shapes = [(1, 3), (4, 5), (0, 7), (3, 1), (4, 5), (4, 5), (13, 2), (1, 3)]  # repeats: threads share a build

    def work(k):
        x = np.random.default_rng(10 * repeat + k).standard_normal(shapes[k]).astype(np.float32)
        return f(x), x

    for got, x in run_in_threads(8, work):
        want = (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    assert len(f.compilations) == len(set(shapes))  # each signature traced and compiled once


def test_threads_compiling_one_function_build_its_cache_entry_once(empty_cache):
    def work(k):
        f = kiln.compile(lambda x: np.exp(x) @ x.T)  # a new compiled function each: only the disk cache is shared
        x = np.linspace(-1, 1, 12).reshape(3, 4)
        np.testing.assert_allclose(f(x), np.exp(x) @ x.T, rtol=1e-12)
        return f.compilations[0].from_cache

    assert sorted(run_in_threads(8, work)) == [False] + [True] * 7


@pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) for the CUDA backend's host emulation")
def test_threads_compile_for_the_cuda_emulation(empty_cache):
    def work(k):
        x = np.arange(2.0 * (k + 1)).reshape(2, k + 1)
        return kiln.compile(lambda x: np.tanh(x) * k, target="cuda-emulate")(x), x, k

    for got, x, k in run_in_threads(4, work):
        np.testing.assert_allclose(got, np.tanh(x) * k, rtol=1e-12)


def test_a_traced_value_from_another_threads_trace_is_refused():
    leaked, traced, done = [], threading.Event(), threading.Event()

    def keep_tracing(x):
        leaked.append(x)
        traced.set()
        done.wait(timeout=60)  # still tracing while the other thread tries to use x
        return x * 2

    other = threading.Thread(target=lambda: kiln.compile(keep_tracing).lower(kiln.f32[3]))
    other.start()
    try:
        traced.wait(timeout=60)
        with pytest.raises(kiln.KilnError, match="escaped the function that made it"):
            kiln.compile(lambda y: y + leaked[0])(np.ones(3, np.float32))
        with pytest.raises(kiln.KilnError, match="used from another thread"):
            np.exp(leaked[0])  # this thread traces nothing
    finally:
        done.set()
        other.join()


def test_nothing_is_left_tracing_in_a_thread_whose_trace_failed():
    def fails(x):
        raise RuntimeError("user error")

    def work(k):
        with pytest.raises(RuntimeError, match="user error"):
            kiln.compile(fails)(np.ones(2))
        return kiln.compile(lambda x: x + k)(np.ones(2))  # a fresh trace in the same thread works

    for k, got in enumerate(run_in_threads(4, work)):
        np.testing.assert_array_equal(got, np.ones(2) + k)


def test_the_library_path_skips_native_code_for_empty_results(tmp_path):
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler to link libraries with (install gcc)")
    from kiln.tools.build import build_library

    compiled = kiln.compile(lambda x: x.sum(axis=1))
    build_library(compiled, (kiln.f32[0, 3],), str(tmp_path), "rows")
    library = kiln.load(str(tmp_path / "librows.so"))
    got = library(np.zeros((0, 3), np.float32))
    assert got.shape == (0,) and got.dtype == np.float32


def test_the_thread_count_holds_in_every_thread_that_calls_compiled_code():
    from kiln.runtime import threads

    if not threads.available():
        pytest.skip("no libgomp: parallel loops run on one thread anyway")
    library = threads._library()
    f = kiln.compile(lambda x: np.tanh(x) * 2)
    x = np.ones((64, 64), np.float32)
    threads.set_thread_count(1)
    try:
        # OpenMP keeps the count per thread: a thread that never set it would use every core.
        seen = run_in_threads(3, lambda k: (f(x), library.omp_get_max_threads())[1])
        assert seen == [1, 1, 1]
        threads.set_thread_count(2)
        assert run_in_threads(2, lambda k: (f(x), library.omp_get_max_threads())[1]) == [2, 2]
    finally:
        threads.set_thread_count(threads.thread_count())
