"""The block a compiled function keeps between calls (kiln.codegen.llvm_alloc).

The memory plan's arena is taken from a slot of the function at the start of a call and put
back at the end, instead of aligned_alloc and free on every call (which glibc served by
mmap and munmap above its threshold, faulting in every page again). Checked here: the
generated LLVM IR takes and returns the block only for top-level allocations; the results
stay numpy's when the block is reused, when many threads call one function at once (each
must get a block of its own, or they would overwrite each other's intermediates), and when
a call fails part way (the block goes back and the next call is right); and a call after
the first faults in far fewer pages than the arena holds (a count from getrusage, not a
timing).
"""

import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln

rng = np.random.default_rng(41)


def two_scans(x):
    """Two arena buffers (the scans), a scalar result: the arena is most of the memory."""
    return np.cumsum(np.cumsum(x) * 0.5).sum()


def test_top_level_arena_is_kept_and_put_back():
    x = rng.standard_normal(50_000)
    lowered = kiln.compile(two_scans).lower(x)
    assert lowered.memory_plan.arena_bytes >= 8 * 50_000
    text = lowered.text("llvm")
    assert text.count("atomicrmw xchg") == 1  # taken once, at the top
    assert text.count("cmpxchg") == 1  # put back once, at the end
    assert "internal global ptr null" in text


def test_reused_block_gives_numpys_result_each_call():
    compiled = kiln.compile(two_scans)
    for size in (50_000, 50_000, 1, 0, 50_000):  # a new size is a new function: its own slot
        x = rng.standard_normal(size)
        np.testing.assert_allclose(compiled(x), two_scans(x), rtol=1e-9)


def test_concurrent_calls_each_get_their_own_block():
    compiled = kiln.compile(two_scans)
    inputs = [rng.standard_normal(20_000) * (k + 1) for k in range(8)]
    compiled(inputs[0])
    failures = []

    def worker(x):
        for _ in range(30):
            got = compiled(x)
            if not np.isclose(got, two_scans(x), rtol=1e-9):
                failures.append((got, two_scans(x)))

    pool = [threading.Thread(target=worker, args=(x,)) for x in inputs]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert failures == []


def test_failed_call_puts_the_block_back():
    def gather_then_scan(x, i):
        return np.cumsum(np.cumsum(x)[i]).sum()

    compiled = kiln.compile(gather_then_scan)
    x = rng.standard_normal(30_000)
    good, bad = rng.integers(0, 30_000, 30_000), np.full(30_000, 30_000)
    np.testing.assert_allclose(compiled(x, good), gather_then_scan(x, good), rtol=1e-9)
    with pytest.raises(IndexError):
        compiled(x, bad)
    np.testing.assert_allclose(compiled(x, good), gather_then_scan(x, good), rtol=1e-9)


# Run in a child process: glibc's mmap threshold adapts to what a process has freed, so a
# test process that has run others may never take the mmap path; M_MMAP_THRESHOLD fixed at
# its 128 KiB default (which turns the adaptation off) is the state of a fresh process.
_FAULTS = """
import ctypes, resource, numpy as np, kiln
ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
def two_scans(x):
    return np.cumsum(np.cumsum(x) * 0.5).sum()
x = np.random.default_rng(0).standard_normal(400_000)
compiled = kiln.compile(two_scans)
compiled(x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    compiled(x)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt and the fault count are glibc's")
def test_later_calls_do_not_fault_the_arena_in_again():
    done = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, check=True)
    faults = float(done.stdout.split()[-1])
    pages = 2 * 8 * 400_000 // 4096  # the arena: two float64 scans of 400 000
    assert faults < pages / 10, f"{faults} page faults a call for an arena of {pages} pages"
