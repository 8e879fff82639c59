"""kiln's benchmark suite: kiln against every installed peer, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py      # everything, a few minutes
    python bench/run.py --quick                                           # smaller sizes, a smoke test
    python bench/run.py --only matmul,chain

Peers: numpy always; numexpr, PyTorch, JAX and ONNX Runtime when installed (a note says
which are missing; `pip install -e '.[bench]'` and `pip install torch` install them).
Workloads live in bench/targets_*.py, one file per area: convolutions and models
(targets_conv), compile times (targets_compile), small calls and starts
(targets_dispatch), row kernels and the MLP step (targets_rows), kiln beside numpy
and torch (targets_threads). Every library gets the same number of threads (the
machine's cores, or --threads). Implementations of one workload are timed in
interleaved rounds, so a noisy neighbour slows all of them alike; each figure
is a median. Ratios are against numpy (above 1: faster than numpy). Some
machines set OPENBLAS_CORETYPE to an older CPU, which slows numpy's BLAS:
unset it (as above) to compare with numpy at its best.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, configure_threads, interleaved, peers, report  # noqa: E402


def bench_matmul(np, kiln, found, quick):
    for n in (256, 512) if quick else (256, 512, 1024):
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        compiled = kiln.compile(lambda x, y: x @ y)
        np.testing.assert_allclose(compiled(a, b), a @ b, rtol=1e-3, atol=1e-3)
        impl = {"numpy": lambda: a @ b, "kiln": lambda: compiled(a, b)}
        if "torch" in found:
            ta, tb = found["torch"].from_numpy(a), found["torch"].from_numpy(b)
            impl["torch"] = lambda: ta @ tb
        report(f"matmul {n}x{n}x{n} float32", interleaved(impl), "GFLOP/s", lambda s: 2 * n**3 / s / 1e9)


def bench_chain(np, kiln, found, quick):
    n = 1 << (20 if quick else 24)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    out, copy_target = np.empty_like(a), np.empty_like(a)

    def chain(x, y, z):
        return np.maximum(x * y + z, 0) * 2 - x

    compiled = kiln.compile(chain)
    np.testing.assert_allclose(compiled(a, b, c), chain(a, b, c), rtol=1e-5, atol=1e-6)  # FMA rounding
    impl = {
        "numpy": lambda: chain(a, b, c),
        "kiln (new output)": lambda: compiled(a, b, c),
        "kiln (out=)": lambda: compiled(a, b, c, out=out),
        "copy (bandwidth)": lambda: np.copyto(copy_target, a),
        "np.empty + first touch": lambda: np.empty(n, np.float32).fill(0),
    }
    if "numexpr" in found:
        ne = found["numexpr"]
        impl["numexpr (out=)"] = lambda: ne.evaluate("where(a*b + c > 0, a*b + c, 0) * 2 - a", out=out)
    if "torch" in found:
        torch = found["torch"]
        ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
        impl["torch"] = lambda: torch.clamp_min(ta * tb + tc, 0) * 2 - ta
    times = interleaved(impl)
    traffic = {"copy (bandwidth)": 2, "np.empty + first touch": 1}
    report(f"fused chain maximum(a*b + c, 0) * 2 - a, {n} float32", times, "GB/s", None)
    for name, seconds in times.items():
        moved = traffic.get(name, 4) * n * 4
        print(f"  {name:<22}{moved / seconds / 1e9:>10.1f} GB/s effective")
    kernel = times["kiln (out=)"]
    print(
        f"  kiln's kernel runs at {100 * (4 * n * 4 / kernel) / (2 * n * 4 / times['copy (bandwidth)']):.0f}% "
        "of the copy bandwidth measured above"
    )


WORKLOADS = {
    "matmul": bench_matmul,
    "chain": bench_chain,
}


def discover() -> dict:
    """This file's workloads, then those of every ``bench/targets_*.py``, in file-name order."""
    found = dict(WORKLOADS)
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "targets_*.py"))):
        module = importlib.import_module(os.path.basename(path)[:-3])
        found.update(module.WORKLOADS)
    return found


def main():
    workloads = discover()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--only", default="", help="comma-separated workloads: " + ", ".join(workloads))
    args = parser.parse_args()
    configure_threads(args.threads)
    import numpy as np

    sys.path.insert(0, ROOT)
    import kiln

    # libgomp reads its wait policy once, when it loads; torch loads it on import. Loading it
    # through kiln first gives every library the policy kiln chooses (docs/runtime.md).
    from kiln.runtime import threads

    threads.available()
    found, missing = peers()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"machine: {cpu}, {os.cpu_count()} cores; {args.threads} threads for every library")
    print(
        f"numpy {np.__version__}, kiln {kiln.__version__}"
        + "".join(f", {name} {module.__version__}" for name, module in found.items())
    )
    print(f"OpenMP idle threads: {threads.wait_policy()}")
    if missing:
        print(f"not installed, skipped: {', '.join(missing)}")
    chosen = [w for w in args.only.split(",") if w] or list(workloads)
    unknown = [w for w in chosen if w not in workloads]
    if unknown:
        parser.error(f"unknown workloads {', '.join(unknown)}; choose from {', '.join(workloads)}")
    for name in chosen:
        workloads[name](np, kiln, found, args.quick)


if __name__ == "__main__":
    main()
