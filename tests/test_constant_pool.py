"""Large constants (a model's weights) live in a pool outside the object code: code linked in
process reaches them through one symbol, so hundreds of MB of weights can never put data more
than 2 GB from the code that reads it (LLVM's in-process loader aborted Python on that), and
the disk cache, kiln build and a damaged cache entry all keep numpy's numbers."""

import glob
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiln
import kiln.onnx
from kiln.codegen.constant_pool import LARGE_CONSTANT_BYTES
from kiln.frontend.tracing import immutable
from kiln.runtime.cache import DiskCache
from kiln.tools.build import build_library

rng = np.random.default_rng(7)


def _dense(weights, bias):
    # weights.T folds into a new constant at compile time: the pool holds what the passes made.
    return lambda x: np.tanh(x @ weights.T + bias)


def _entries(directory, suffix):
    return sorted(glob.glob(os.path.join(directory, "*", f"*{suffix}")))


def test_large_constants_are_read_through_the_pool_and_not_compiled_into_the_code():
    weights = rng.standard_normal((256, 257)).astype(np.float32)  # 263 KB, and an odd size
    bias = rng.standard_normal(256).astype(np.float32)  # 1 KB: stays in the code
    x = rng.standard_normal((5, 257)).astype(np.float32)
    compiled = kiln.compile(_dense(weights, bias))
    # float64 is the oracle: float32 dots of 257 terms are ~1e-5 from it in any order, so
    # numpy's own float32 result (which depends on OpenBLAS's kernel) is no oracle at 1e-6.
    exact = np.tanh(x.astype(np.float64) @ weights.T.astype(np.float64) + bias)
    np.testing.assert_allclose(compiled(x), exact, rtol=0, atol=1e-4)
    llvm = compiled.lower(x).text("llvm")
    # (LLVM may mark it local_unnamed_addr: its address is not compared, only read through)
    assert re.search(r"external (local_unnamed_addr )?constant \[263168 x i8\], align 64", llvm)
    assert len(llvm) < weights.nbytes / 4  # the weights are not spelled out in the IR
    code = compiled.lower(x).pipeline.object_code()
    assert len(code.object) < weights.nbytes / 4
    (pool,) = code.symbols.values()
    assert pool.ctypes.data % 64 == 0 and not pool.flags.writeable


def test_every_size_around_the_threshold_and_every_dtype_gives_numpys_numbers():
    for dtype in (np.float64, np.float16, np.int8, np.uint16, np.int64, np.bool_):
        for elements in (1, LARGE_CONSTANT_BYTES // np.dtype(dtype).itemsize + 1, 3 * 4099):
            table, other = (rng.integers(0, 2 if dtype is np.bool_ else 100, elements).astype(dtype) for _ in "ab")
            x = rng.integers(0, 2 if dtype is np.bool_ else 100, elements).astype(dtype)
            if dtype is np.bool_:
                compiled, want = kiln.compile(lambda x: x ^ table ^ other[::-1]), x ^ table ^ other[::-1]
            else:
                compiled, want = kiln.compile(lambda x: x * table + other[::-1]), x * table + other[::-1]
            np.testing.assert_array_equal(compiled(x), want, err_msg=f"{np.dtype(dtype)} x {elements}")


def test_a_second_compile_maps_the_pool_from_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    weights = rng.standard_normal((300, 200))
    bias = rng.standard_normal(300)
    x = rng.standard_normal((3, 200))
    first = kiln.compile(_dense(weights, bias))
    first(x)
    (pool,) = _entries(tmp_path, ".const")
    second = kiln.compile(_dense(weights, bias))
    np.testing.assert_allclose(second(x), np.tanh(x @ weights.T + bias), rtol=1e-12)
    assert [c.from_cache for c in second.compilations] == [True]
    assert os.path.getsize(pool) >= weights.nbytes


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove"])
def test_a_damaged_or_missing_pool_is_built_again(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    weights = rng.standard_normal((128, 64))
    x = rng.standard_normal((2, 64))
    kiln.compile(lambda x: x @ weights.T)(x)
    (pool,) = _entries(tmp_path, ".const")
    if damage == "remove":
        os.remove(pool)
    else:
        with open(pool, "r+b") as f:
            if damage == "flip":
                f.seek(-100, os.SEEK_END)
                byte = f.read(1)
                f.seek(-100, os.SEEK_END)
                f.write(bytes([byte[0] ^ 0x40]))
            else:
                f.truncate(os.path.getsize(pool) - 8)
    again = kiln.compile(lambda x: x @ weights.T)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(again(x), x @ weights.T, rtol=1e-12)
    assert [c.from_cache for c in again.compilations] == [False]
    assert (damage == "remove") != any("damaged" in str(w.message) for w in caught)
    assert DiskCache(str(tmp_path)).map(os.path.basename(pool)[: -len(".const")], ".const") is not None


def test_functions_of_one_name_with_different_weights_each_keep_their_own():
    # One symbol name serves them all: it is bound to each one's pool as that one is linked.
    x = rng.standard_normal((4, 64)).astype(np.float32)
    functions, expected = [], []
    for k in range(4):
        weights = rng.standard_normal((64, 64)).astype(np.float32)

        def layer(x, weights=weights):
            return x @ weights

        functions.append(kiln.compile(layer))
        expected.append(x @ weights)
        functions[-1](x)
    for compiled, want in zip(functions, expected):
        np.testing.assert_allclose(compiled(x), want, rtol=1e-5, atol=1e-5)


def test_an_unwritable_cache_keeps_the_pool_in_memory(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("KILN_CACHE_DIR", str(blocked / "cache"))
    weights = rng.standard_normal((100, 100))
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        compiled = kiln.compile(lambda x: x @ weights)
        got = compiled(np.eye(100))
    np.testing.assert_array_equal(got, weights)


def test_a_built_library_carries_its_pool(tmp_path):
    weights = rng.standard_normal((96, 80))
    bias = rng.standard_normal(96)

    def loss(x):
        return np.tanh(x @ weights.T + bias).sum()

    build_library(kiln.compile(loss), [kiln.f64[7, 80]], str(tmp_path), "dense", grad_argnums=0)
    x = rng.standard_normal((7, 80))
    value = kiln.load(str(tmp_path / "libdense.so"))(x)
    np.testing.assert_allclose(value, loss(x), rtol=1e-12)
    value, grad = kiln.load(str(tmp_path / "libdense.so"), name="dense_grad")(x)
    for i, j in ((0, 0), (3, 5), (6, 79)):
        probe = np.zeros_like(x)
        probe[i, j] = 1e-6
        np.testing.assert_allclose(grad[i, j], (loss(x + probe) - loss(x - probe)) / 2e-6, rtol=1e-5, atol=1e-8)
    assert os.path.getsize(tmp_path / "libdense.so") > 2 * weights.nbytes  # both entries carry it: no file to lose


_MANY = """
import numpy as np, kiln
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 4096)).astype(np.float32)
for k in range({count}):
    w = rng.standard_normal((4096, 4096), dtype=np.float32)  # 64 MB each
    f = kiln.compile(lambda x, w=w: x @ w)
    np.testing.assert_allclose(f(x), x @ w, rtol=1e-3, atol=1e-2)
    kept = globals().setdefault("kept", [])
    kept.append(f)
print("ok", len(kept))
"""


def test_many_large_weights_loaded_in_one_process_all_run():
    """The abort this guards against came once the process had mapped about 2 GB between a
    function's code and its data: twelve functions of 64 MB each, all kept alive."""
    result = subprocess.run([sys.executable, "-c", _MANY.format(count=12)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["ok", "12"]


def test_only_arrays_nobody_can_change_are_kept_without_a_copy():
    frozen = np.frombuffer(np.arange(6.0).tobytes()).reshape(2, 3)
    assert immutable(frozen) and immutable(frozen.T[::-1])
    owner = np.arange(6.0)
    owner.setflags(write=False)
    assert not immutable(owner)  # its owner may make it writable again
    view = np.arange(6.0)[::2]
    view.setflags(write=False)
    assert not immutable(view)  # a read-only view of memory someone else can write
    assert not immutable(np.frombuffer(bytearray(8)))
    with pytest.raises(ValueError):
        frozen.setflags(write=True)


def test_a_captured_writable_array_changed_after_the_trace_does_not_change_the_result():
    weights = np.ones(10_000)
    compiled = kiln.compile(lambda x: x * weights)
    first = compiled(np.ones(10_000))
    weights[:] = 5
    np.testing.assert_array_equal(compiled(np.ones(10_000)), first)


def test_an_onnx_model_with_real_weights_loads_twice_equal_to_onnxruntime(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    w1 = rng.standard_normal((512, 300)).astype(np.float32) / 20  # Gemm transB: folded into a transposed copy
    w2 = rng.standard_normal((512, 10)).astype(np.float32) / 20
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "w1"], ["h"], transB=1),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 300])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    path = str(tmp_path / "mlp.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = rng.standard_normal((4, 300)).astype(np.float32)
    (want,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for load in range(2):
        fn = kiln.onnx.load(path)
        np.testing.assert_allclose(fn(x)[0], want, rtol=1e-4, atol=1e-5)
        assert [c.from_cache for c in fn.compilations] == [load == 1]
        constants = [op.value for op in fn.lower(x).pipeline.module("tensor").walk() if op.name == "kiln.constant"]
        assert all(immutable(c) for c in constants if c.nbytes > LARGE_CONSTANT_BYTES)  # the weights, not copies


_WEIGHT_DTYPES = (np.float32, np.float64, np.float16, np.int8, np.int32, np.uint16, np.bool_)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(_WEIGHT_DTYPES), st.integers(1, 3000), st.integers(1, 700), st.booleans()),
        min_size=3,
        max_size=6,
    )
)
def test_random_models_with_several_large_weights_in_one_process_give_numpys_numbers(layers):
    """Fuzzing the pool: functions kept alive side by side, each with large weights of a
    random dtype and shape (odd sizes, several a function, some seen transposed), each
    checked against numpy after all of them are loaded."""
    generator = np.random.default_rng(len(layers))
    loaded = []
    for dtype, rows, columns, transposed in layers:
        weights = generator.integers(0, 2 if dtype is np.bool_ else 50, (rows, columns)).astype(dtype)
        extra = generator.integers(0, 2 if dtype is np.bool_ else 50, columns).astype(dtype)
        combine, add = (np.bitwise_xor, np.bitwise_and) if dtype is np.bool_ else (np.multiply, np.add)

        def fn(x, w=weights, e=extra, t=transposed, combine=combine, add=add):
            return add(combine(w.T, x[:, None]), e[:, None]) if t else add(combine(w, x), e)

        x = generator.integers(0, 2 if dtype is np.bool_ else 5, columns).astype(dtype)
        compiled = kiln.compile(fn)
        compiled(x)
        loaded.append((compiled, fn, x))
    for compiled, fn, x in loaded:
        np.testing.assert_array_equal(compiled(x), fn(x))


def test_a_transposed_view_of_immutable_weights_is_a_transpose_of_them_not_a_copy():
    weights = np.frombuffer(rng.standard_normal(64 * 48).tobytes()).reshape(64, 48)
    x = rng.standard_normal((3, 48))
    compiled = kiln.compile(lambda x: x @ weights.T + x @ weights[::-1].T)
    np.testing.assert_allclose(compiled(x), x @ weights.T + x @ weights[::-1].T, rtol=1e-12)
    tensor = compiled.lower(x).pipeline.module("tensor")
    constants = [op.value for op in tensor.walk() if op.name == "kiln.constant"]
    assert all(c.flags.c_contiguous for c in constants)  # no constant is read in another order
    assert sum(np.shares_memory(c, weights) for c in constants) == 1  # weights.T: the weights themselves
    assert len(constants) == 2  # weights[::-1].T: copied in C order


@pytest.mark.parametrize("how", ["store", "store_mapped"])
def test_an_entry_that_cannot_be_renamed_into_place_leaves_no_temporary(tmp_path, how):
    # A rename that fails (the entry's path taken by a directory; a full disk fails the same
    # way) warns and keeps nothing: a pool's temporary file holds all of a model's weights.
    cache = DiskCache(str(tmp_path))
    os.makedirs(cache.path("k" * 64, ".const"))
    os.makedirs(cache.path("k" * 64, ".o"))
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        if how == "store":
            cache.store("k" * 64, b"x" * 100000, ".o")
        else:
            cache.store_mapped("k" * 64, [np.ones(50000)], ".const")
    assert glob.glob(str(tmp_path / "**" / ".tmp-*"), recursive=True) == []
