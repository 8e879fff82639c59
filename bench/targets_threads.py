"""kiln beside another library's thread pool in one process, as a training loop runs it.

A loop that calls a kiln step and then does numpy work (a matmul, a metric) alternates two
thread pools: libgomp's (kiln's parallel loops) and OpenBLAS's (numpy's matmul), or torch's.
Each pool's idle threads spin for a while before they sleep, so what one library leaves spinning
slows the other. Each workload times, in interleaved rounds:

- each side alone, after a pause that lets the other's threads sleep (harness.PAUSE);
- the two alternating back to back, with no pause, as a training loop calls them;

and prints the alternating time against the sum of the separate ones (1.00: no interference),
with the CPU time per call, which shows the spinning itself (a noisy machine moves wall times
far more than CPU times). Compare libgomp's old default spin with
``GOMP_SPINCOUNT=300000 python bench/run.py --only beside_numpy``.
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
import threading
import time

from harness import PAUSE, ROOT


def _thread_ticks() -> dict:
    """CPU clock ticks (user + system) of each thread of this process, by thread id (Linux)."""
    ticks = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks[int(tid)] = int(fields[11]) + int(fields[12])
    except OSError:
        pass
    return ticks


def _timed(fn, seconds, per_thread=None):
    """(wall seconds, CPU seconds of every thread of the process) per call of fn, over `seconds`;
    adds each thread's ticks to `per_thread` (a Counter) if given."""
    before = _thread_ticks() if per_thread is not None else {}
    runs, wall, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < seconds or runs < 3:
        fn()
        runs += 1
    result = (time.perf_counter() - wall) / runs, (time.process_time() - cpu) / runs
    if per_thread is not None:
        for tid, ticks in _thread_ticks().items():
            per_thread[tid] += ticks - before.get(tid, 0)
        per_thread["calls"] += runs
    return result


def alongside(kiln_side, other_side, rounds=15, seconds=0.1) -> dict:
    """Medians over rounds of each side alone, the two alternating, and the per-round ratio of
    alternating to the sum of the separate times. Many short rounds: on a shared machine the
    neighbours' load changes from one second to the next, and each round sees it on all three."""
    both = lambda: (kiln_side(), other_side())  # noqa: E731
    parts = {"kiln alone": kiln_side, "other alone": other_side, "alternating": both}
    both()  # warm-up: compilation, caches, page mappings
    wall = {name: [] for name in parts}
    cpu = {name: [] for name in parts}
    per_thread = {name: collections.Counter() for name in parts}
    for _ in range(rounds):
        for name, fn in parts.items():
            time.sleep(PAUSE)  # the previous part's threads go to sleep
            w, c = _timed(fn, seconds, per_thread[name])
            wall[name].append(w)
            cpu[name].append(c)
    ratios = [b / (k + o) for k, o, b in zip(wall["kiln alone"], wall["other alone"], wall["alternating"])]
    return {
        "wall": {name: statistics.median(t) for name, t in wall.items()},
        "cpu": {name: statistics.median(t) for name, t in cpu.items()},
        "ratios": sorted(ratios),
        "per_thread": per_thread,
    }


def report(title, other_name, result):
    wall, cpu, ratios = result["wall"], result["cpu"], result["ratios"]
    print(f"\n{title}")
    for name in wall:
        label = name.replace("other", other_name)
        print(f"  {label:<26}{wall[name] * 1e3:>9.2f} ms  {cpu[name] * 1e3:>9.2f} ms CPU")
    separate = wall["kiln alone"] + wall["other alone"]
    separate_cpu = cpu["kiln alone"] + cpu["other alone"]
    print(f"  {'sum of the separate':<26}{separate * 1e3:>9.2f} ms  {separate_cpu * 1e3:>9.2f} ms CPU")
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"  alternating / separate: {median:.2f} over {len(ratios)} rounds (quartiles {q1:.2f}-{q3:.2f}, "
        f"range {ratios[0]:.2f}-{ratios[-1]:.2f}); CPU {cpu['alternating'] / separate_cpu:.2f}"
    )
    # Which thread burns the CPU: a pool's idle thread that spins through the other's calls
    # shows up here, whatever the neighbours do to wall times.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    caller = threading.get_native_id()
    print("  CPU ms per call, by thread (the calling thread first):")
    for name, counts in result["per_thread"].items():
        calls = counts.pop("calls", 0)
        busy = sorted((t for t in counts if counts[t]), key=lambda t: (t != caller, t))
        shares = "  ".join(f"{counts[t] * tick / calls * 1e3:6.2f}" for t in busy)
        print(f"    {name.replace('other', other_name):<24}{shares}")


def describe_pools(np):
    """What runs the BLAS calls, with how many threads, and how long libgomp's threads spin."""
    from kiln.runtime import threads

    threads.available()  # loads libgomp, so threadpoolctl sees it
    try:
        import threadpoolctl
    except ImportError:
        print("  (install threadpoolctl to see each pool's library and threads)")
    else:
        for pool in threadpoolctl.threadpool_info():
            print(f"  {pool['internal_api']:<9}{pool['num_threads']} threads  {os.path.basename(pool['filepath'])}")
    print(f"  libgomp's idle threads: {threads.wait_policy()}")


def mlp(np, batch):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import mlp_step

    return mlp_step.make(np, batch)


def bench_beside_numpy(np, kiln, found, quick):
    batch = 64 if quick else 256
    step, numpy_step, params, x, y, _ = mlp(np, batch)
    compiled = kiln.compile(step)
    w = np.random.default_rng(1).standard_normal((784, 512)).astype(np.float32)
    labels = y.argmax(1)

    def numpy_work():
        features = x @ w  # a matmul: OpenBLAS's threads
        return float((features[:, :10].argmax(1) == labels).mean())  # a metric: numpy on one thread

    print("\nthread pools in this process:")
    describe_pools(np)
    kiln_step = lambda: compiled(params, x, y)  # noqa: E731
    rounds = 3 if quick else 15
    report(
        f"MLP step (kiln), then a {batch}x784x512 matmul and an accuracy (numpy), back to back",
        "numpy",
        alongside(kiln_step, numpy_work, rounds),
    )
    report(
        f"MLP step (kiln), then the same step in numpy (bench/mlp_step.py), back to back, batch {batch}",
        "numpy step",
        alongside(kiln_step, lambda: numpy_step(params, x, y), rounds),
    )
    from kiln.runtime import blas_pool

    if blas_pool.share():
        try:
            report(
                "the first loop again, numpy's BLAS on kiln's threads (kiln.runtime.blas_pool.share())",
                "numpy",
                alongside(kiln_step, numpy_work, rounds),
            )
        finally:
            blas_pool.unshare()
    try:
        import threadpoolctl
    except ImportError:
        return
    # OpenBLAS's idle threads spin (yielding) for ~0.1 s after each call, through kiln's next
    # step; with one BLAS thread there is none (docs/runtime.md, "Beside numpy and torch").
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        report(
            "the first loop again, numpy's BLAS on one thread (threadpoolctl.threadpool_limits(1, 'blas'))",
            "numpy",
            alongside(kiln_step, numpy_work, rounds),
        )


def bench_beside_torch(np, kiln, found, quick):
    if "torch" not in found:
        print("\nkiln beside torch: torch is not installed, skipped")
        return
    batch = 64 if quick else 256
    step, _, params, x, y, torch_step = mlp(np, batch)
    compiled = kiln.compile(step)
    report(
        f"MLP step in kiln, then in torch eager, back to back, batch {batch}",
        "torch step",
        alongside(lambda: compiled(params, x, y), torch_step(found["torch"]), 3 if quick else 15),
    )


WORKLOADS = {"beside_numpy": bench_beside_numpy, "beside_torch": bench_beside_torch}
