"""What kiln cannot do as asked it says, once, where the user sees it: parallel loops
without libgomp, and a cached CUDA library that changed on disk since it was built."""

import ctypes.util
import hashlib
import os
import warnings

import numpy as np
import pytest

import kiln
from kiln.codegen import nvcc
from kiln.runtime import cuda, threads
from kiln.runtime.cache import DiskCache


@pytest.fixture
def without_libgomp(monkeypatch):
    find = ctypes.util.find_library
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None if name == "gomp" else find(name))
    threads._library.cache_clear()
    yield
    monkeypatch.undo()
    threads._library.cache_clear()  # the next caller finds the real one again


def test_parallel_without_libgomp_warns_once_and_still_computes(without_libgomp):
    fn = lambda x: np.tanh(x) * 2  # noqa: E731
    x = np.linspace(-3, 3, 7 * 33, dtype=np.float32).reshape(7, 33)
    with pytest.warns(RuntimeWarning, match=r"libgomp .* not installed, so parallel loops run serially") as caught:
        compiled = kiln.compile(fn, schedule=kiln.Schedule().parallel("k0.i"))
        np.testing.assert_allclose(compiled(x), np.tanh(x.astype(np.float64)) * 2, rtol=1e-6)
        again = kiln.compile(lambda x: x + 1, schedule=kiln.Schedule().parallel("k0.i"))
        np.testing.assert_array_equal(again(x), x + 1)
    assert sum("libgomp" in str(w.message) for w in caught) == 1
    assert threads.available() is False


def test_with_libgomp_there_is_no_warning():
    threads._library.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        available = threads.available()
    if not available:
        pytest.skip("this machine has no libgomp")


def _emulated_source():
    return kiln.compile(lambda x: x * 3 + 1, target="cuda-emulate").lower(kiln.f32[10]).text("cuda")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data + b"\0",  # grown
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: bytes([data[0] ^ 1]) + data[1:],  # one flipped bit
        lambda data: b"",  # emptied
    ],
)
def test_a_cached_cuda_library_that_changed_on_disk_is_rebuilt(tmp_path, damage):
    from kiln.codegen.cuda_codegen import entry_name

    cache = DiskCache(str(tmp_path))
    source = _emulated_source()
    path = nvcc.build(source, emulate=True, cache=cache)
    with open(path, "rb") as f:
        built = f.read()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an intact library is reused without a word
        assert nvcc.build(source, emulate=True, cache=cache) == path
    with open(path, "wb") as f:
        f.write(damage(built))
    with pytest.warns(RuntimeWarning, match="does not match the SHA-256 recorded"):
        assert nvcc.build(source, emulate=True, cache=cache) == path
    with open(path, "rb") as f:
        rebuilt = f.read()
    key = os.path.basename(path)[: -len(".so")]
    assert cache.load("cuda-" + key) == hashlib.sha256(rebuilt).digest()
    function = cuda.CudaFunction(path, entry_name("<lambda>"), 2, emulate=True)
    x, out = np.arange(10, dtype=np.float32), np.empty(10, np.float32)
    assert function([x], [out]) == 0
    np.testing.assert_array_equal(out, x * 3 + 1)
