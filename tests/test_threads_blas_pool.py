"""numpy's BLAS on kiln's libgomp threads (kiln.runtime.blas_pool): same numbers, any thread count.

The oracle is numpy in float64 with OpenBLAS's own threads, never kiln.
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from kiln.runtime import blas_pool, threads

pytestmark = pytest.mark.skipif(
    not (threads.available() and blas_pool.openblas_libraries()),
    reason="needs libgomp and an OpenBLAS (0.3.27 or later) that takes a threads callback",
)


@pytest.fixture
def shared():
    assert blas_pool.share() is True
    yield
    blas_pool.unshare()


def products(rng):
    """Shapes small (one thread) and large (OpenBLAS splits them into jobs), float32 and float64."""
    for m, k, n in [(3, 4, 5), (256, 784, 512), (1024, 1024, 1024), (513, 77, 1031)]:
        for dtype in (np.float32, np.float64):
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            yield a, b


def test_matmul_on_kiln_threads_matches_float64(shared):
    rng = np.random.default_rng(0)
    for a, b in products(rng):
        want = a.astype(np.float64) @ b.astype(np.float64)
        tol = 1e-3 if a.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(a @ b, want, rtol=tol, atol=tol * np.sqrt(a.shape[1]))


def test_lapack_on_kiln_threads(shared):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((400, 400)) + 400 * np.eye(400)
    x = rng.standard_normal((400, 3))
    np.testing.assert_allclose(np.linalg.solve(a, a @ x), x, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("count", [1, 2])
def test_kiln_and_numpy_alternate_on_one_pool(shared, count):
    """A training loop: a kiln step, then numpy's matmul on the same threads, with 1 and 2 threads."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 96)).astype(np.float32)
    w = rng.standard_normal((96, 64)).astype(np.float32)
    layer = kiln.compile(lambda x, w: np.maximum(x @ w, 0))
    threads.set_thread_count(count)
    try:
        for _ in range(3):
            hidden = layer(x, w)
            scores = hidden @ w.T
            np.testing.assert_allclose(hidden, np.maximum(x.astype(np.float64) @ w, 0), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(scores, hidden.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-3)
    finally:
        threads.set_thread_count(threads.thread_count())


def test_python_threads_each_get_their_own_team(shared):
    # libgomp keeps one pool per calling thread, so BLAS calls from several Python threads at once
    # run side by side, each on its own team.
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 300))
    want = a @ a
    results, errors = [None] * 4, []

    def work(k):
        try:
            results[k] = [np.abs(a @ a - want).max() for _ in range(5)]
        except Exception as error:  # re-raised in the test's thread
            errors.append(error)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    assert max(max(r) for r in results) < 1e-9


def test_unshare_gives_openblas_its_threads_back(shared):
    blas_pool.unshare()
    a = np.random.default_rng(4).standard_normal((512, 512))
    np.testing.assert_allclose(a @ a, a.astype(np.float64) @ a, rtol=1e-12, atol=1e-9)
    assert blas_pool.share() is True  # and sharing again works


def test_a_forked_child_runs_blas_on_openblas_threads(shared):
    # libgomp's pool does not survive fork(): a child that kept the callback would wait forever.
    script = """
import os, sys
import numpy as np
from kiln.runtime import blas_pool
assert blas_pool.share()
a = np.random.default_rng(5).standard_normal((600, 600))
want = a @ a
pid = os.fork()
if pid == 0:
    os._exit(0 if np.abs(a @ a - want).max() < 1e-9 else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


@pytest.mark.parametrize("setting", ["OMP_THREAD_LIMIT=1", "OMP_DYNAMIC=true"])
def test_share_refuses_where_libgomp_may_give_fewer_threads_than_openblas_has(setting):
    # A threaded GEMM's jobs wait for each other: run in turn on a smaller team they would hang.
    script = """
import numpy as np
from kiln.runtime import blas_pool
assert blas_pool.share() is False
a = np.random.default_rng(6).standard_normal((500, 500))
assert np.abs(a @ a - a.astype(np.longdouble) @ a).max() < 1e-9
"""
    name, value = setting.split("=")
    env = dict(os.environ, **{name: value, "OPENBLAS_NUM_THREADS": "2"})
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
