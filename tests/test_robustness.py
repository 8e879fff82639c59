"""Long use and concurrent use: memory stays flat over 10,000 calls, two processes
compiling the same function into one empty cache both succeed, and the newer
entry points refuse bad input with clear exceptions."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc to read the resident set size")
def test_ten_thousand_calls_keep_memory_flat():
    f = kiln.compile(lambda x, w: kiln.softmax(np.tanh(x @ w)).sum(axis=0))
    rng = np.random.default_rng(12)
    x, w = rng.standard_normal((17, 33)).astype(np.float32), rng.standard_normal((33, 9)).astype(np.float32)
    for _ in range(1000):  # warm up: caches, allocator pools
        f(x, w)
    before = resident_bytes()
    for _ in range(10_000):
        f(x, w)
    growth = resident_bytes() - before
    # A leak of one 17x9 float32 result per call would be 6 MB; of the arena, more.
    assert growth < 2 * 2**20, f"resident memory grew by {growth / 2**20:.1f} MiB over 10,000 calls"


def test_two_processes_compiling_one_function_into_one_cache_both_succeed(tmp_path):
    script = tmp_path / "compile_once.py"
    script.write_text(
        textwrap.dedent("""
        import numpy as np, kiln
        f = kiln.compile(lambda x, y: np.tanh(x @ y + 1.0).sum(axis=1))
        x = np.arange(35.0).reshape(5, 7) / 35; y = np.ones((7, 3))
        np.testing.assert_allclose(f(x, y), np.tanh(x @ y + 1.0).sum(axis=1), rtol=1e-12)
        print("ok")
    """)
    )
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(3):  # the race needs a few tries to be likely
        processes = [
            subprocess.Popen(
                [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        for p in processes:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "ok", err


def test_new_entry_points_refuse_bad_input_clearly():
    f = kiln.compile(lambda x: x * 2.0)
    with pytest.raises(kiln.KilnError, match="target must be 'cuda' or 'cuda-emulate'"):
        kiln.to_device(np.ones(3), target="gpu")
    with pytest.raises(kiln.ArgumentError, match="is a str"):
        kiln.profile(f, "not an array")
    with pytest.raises(kiln.ArgumentError, match="is a spec"):
        kiln.bisect(f, kiln.f32[3])
    with pytest.raises(kiln.ScheduleError, match="unknown schedule step 'bind_all'"):
        kiln.Schedule().add("bind_all", "k0.i")
    with pytest.raises(kiln.StageError):
        f.lower(kiln.f32[3]).text("cuda")  # a CPU function has no cuda stage
