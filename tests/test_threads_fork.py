"""A fork() child of a process that ran parallel kiln code: libgomp's thread pool does not
survive fork(), so the child runs parallel loops on one thread instead of hanging in them."""

import os
import subprocess
import sys
import textwrap

import pytest

from kiln.runtime import threads

pytestmark = [
    pytest.mark.skipif(not threads.available(), reason="no libgomp: parallel loops run on one thread"),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform"),
]


def _run(body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(
        """
        import multiprocessing, os
        import numpy as np
        import kiln
        from kiln.runtime import threads
        threads.set_thread_count(2)
        f = kiln.compile(lambda a: np.sum(a, axis=1))
        x = np.arange(1000 * 1000, dtype=np.float64).reshape(1000, 1000)
        assert (f(x) == x.sum(axis=1)).all()  # the parent starts libgomp's pool
        """
    ) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_a_forked_child_runs_parallel_code_on_one_thread():
    result = _run(
        """
        pid = os.fork()
        if pid == 0:
            ok = (f(x) == x.sum(axis=1)).all()
            os._exit(0 if ok else 3)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0"]


def test_a_fork_pool_of_workers_computes_what_numpy_does():
    result = _run(
        """
        def work(k):
            return float(f(x + k).sum())
        with multiprocessing.get_context("fork").Pool(2) as pool:
            got = pool.map(work, range(3))
        assert got == [float((x + k).sum(axis=1).sum()) for k in range(3)], got
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"]


def test_asking_a_forked_child_for_more_threads_is_an_error_not_a_hang():
    result = _run(
        """
        pid = os.fork()
        if pid == 0:
            try:
                threads.set_thread_count(2)
            except RuntimeError as exc:
                os._exit(0 if "spawn" in str(exc) else 4)
            os._exit(5)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0"]
