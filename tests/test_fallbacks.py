"""What kiln cannot do as asked it says, once, where the user sees it: parallel loops
without libgomp, and a cached CUDA library that changed on disk since it was built.
And the compile cache itself: where it lives, and builders of one entry taking turns."""

import hashlib
import multiprocessing
import os
import sys
import time
import warnings

import numpy as np
import pytest

import kiln
from kiln.codegen import nvcc
from kiln.runtime import cache as disk_cache
from kiln.runtime import cuda, threads
from kiln.runtime.cache import DiskCache


@pytest.fixture
def without_libgomp(monkeypatch):
    monkeypatch.setattr(threads, "_locate", lambda: None)  # where the loader finds no libgomp
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


def test_the_cache_directory_is_kiln_cache_dir_else_the_users_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "mine"))
    assert DiskCache().directory == str(tmp_path / "mine")
    monkeypatch.delenv("KILN_CACHE_DIR")
    if sys.platform.startswith("linux"):  # the XDG base directories
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert DiskCache().directory == str(tmp_path / "xdg" / "kiln")
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert DiskCache().directory == os.path.expanduser("~/.cache/kiln")


def _build_in_own_process(directory, key, log, barrier):
    cache = DiskCache(directory)
    barrier.wait()
    with cache.writing(key):
        if cache.load(key) is None:
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
            time.sleep(0.3)  # a slow build: without the lock, every process would start one
            cache.store(key, b"object code " * 1000)


def test_processes_building_one_entry_take_turns(tmp_path):
    key, log = "ab" + "0" * 62, str(tmp_path / "builds.log")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [
        context.Process(target=_build_in_own_process, args=(str(tmp_path / "cache"), key, log, barrier))
        for _ in range(4)
    ]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0
    assert len(open(log).read().split()) == 1  # built once; the others found it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # intact: no "damaged" warning
        assert DiskCache(str(tmp_path / "cache")).load(key) == b"object code " * 1000


def test_a_builder_that_never_finishes_is_waited_for_then_overtaken(tmp_path, monkeypatch):
    import filelock

    cache = DiskCache(str(tmp_path))
    key = "cd" + "1" * 62
    os.makedirs(os.path.dirname(cache.path(key)))
    monkeypatch.setattr(disk_cache, "LOCK_TIMEOUT", 0.2)
    with filelock.FileLock(cache.path(key) + ".lock"):  # held as by a stuck process
        with pytest.warns(RuntimeWarning, match="waited 0.2 s for another build of the compile cache entry"):
            with cache.writing(key):
                cache.store(key, b"code")
    assert cache.load(key) == b"code"
