"""How long kiln's idle OpenMP threads spin: bounded unless the user chose, and results unchanged.

libgomp reads its wait policy once, when it loads, so each case runs in a new process and asks
libgomp itself what it read (``OMP_DISPLAY_ENV=verbose`` prints ``GOMP_SPINCOUNT`` then).
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.runtime import threads

pytestmark = pytest.mark.skipif(not threads.available(), reason="no libgomp: parallel loops run on one thread")

LOAD = """
import os
from kiln.runtime import threads
{before}
threads.available()
print(os.environ.get("GOMP_SPINCOUNT"), os.environ.get("OMP_WAIT_POLICY"))
print(threads.wait_policy())
"""


def load_in_new_process(before="", **environment):
    """(libgomp's spin count as it reports it, GOMP_SPINCOUNT and OMP_WAIT_POLICY after kiln loaded it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(environment, OMP_DISPLAY_ENV="verbose")
    result = subprocess.run(
        [sys.executable, "-c", LOAD.format(before=before)], env=env, capture_output=True, text=True, check=True
    )
    reported = re.findall(r"GOMP_SPINCOUNT = '(\d+)'", result.stderr)
    assert len(reported) == 1, result.stderr  # libgomp initialised once
    after, described = result.stdout.splitlines()
    return int(reported[0]), after.split(), described


def test_without_a_user_setting_libgomp_spins_a_bounded_while():
    spin, after, described = load_in_new_process()
    assert spin == threads.SPIN_COUNT
    assert after == ["None", "None"]  # programs started later inherit the user's environment, not kiln's
    assert described == f"GOMP_SPINCOUNT={threads.SPIN_COUNT} (kiln's)"


def test_the_users_spin_count_stands():
    spin, after, described = load_in_new_process(GOMP_SPINCOUNT="12345")
    assert spin == 12345
    assert after == ["12345", "None"]
    assert described == "GOMP_SPINCOUNT=12345 (the user's)"


@pytest.mark.parametrize("policy", ["active", "passive"])
def test_the_users_wait_policy_stands(policy):
    spin, after, _ = load_in_new_process(OMP_WAIT_POLICY=policy)
    assert spin == (30_000_000_000 if policy == "active" else 0)  # libgomp's own values for each policy
    assert after == ["None", policy]


def test_a_libgomp_loaded_before_kiln_keeps_what_it_read():
    # torch, for one, brings libgomp in; it read its environment then, and kiln changes nothing.
    before = "import ctypes, ctypes.util; ctypes.CDLL(ctypes.util.find_library('gomp'))"
    spin, after, described = load_in_new_process(before=before)
    assert spin != threads.SPIN_COUNT
    assert after == ["None", "None"]
    assert described.startswith("libgomp's own")


def mlp_layer(x, w, b):
    return np.maximum(x @ w + b, 0).sum(axis=1)


@pytest.mark.parametrize("count", [1, 2])
def test_results_match_numpy_with_one_and_two_threads(count):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((96, 40)), rng.standard_normal((40, 72))
    b = rng.standard_normal(72)
    x, w, b = (a.astype(np.float32) for a in (x, w, b))
    compiled = kiln.compile(mlp_layer, schedule=kiln.Schedule().parallel("k0.i"))
    threads.set_thread_count(count)
    try:
        got = [compiled(x, w, b) for _ in range(3)]  # again: the pool's threads are reused, not restarted
    finally:
        threads.set_thread_count(threads.thread_count())
    want = mlp_layer(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
