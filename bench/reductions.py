"""Float32 reductions: kiln against numpy (and PyTorch / JAX when installed), speed and accuracy.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/reductions.py
    python bench/reductions.py --quick          # smaller sizes, a smoke test

For each workload the implementations run in interleaved rounds (see bench/run.py);
times are medians, ratios are numpy's time over the implementation's (above 1:
faster than numpy). Accuracy is each result's largest error against a float64
``math.fsum`` of the same float32 inputs, in units of the float32 result's last
place (ulp): numpy's pairwise summation stays within a few ulp at any length.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import configure_threads, interleaved, peers  # noqa: E402


def ulp_error(got, exact) -> float:
    """Largest |got - exact| in float32 ulps of the exact values."""
    import numpy as np

    got = np.asarray(got, np.float64).reshape(-1)
    exact = np.asarray(exact, np.float64).reshape(-1)
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got - exact) / spacing))


def workloads(np, quick):
    """(title, numpy function, float32 input, exact result from float64 fsums)."""
    rng = np.random.default_rng(0)
    sizes = (1_000_000, 4_000_000) if quick else (1_000_000, 4_000_000, 20_000_000)
    for n in sizes:
        x = rng.random(n, dtype=np.float32)
        yield f"sum of {n:,} uniform [0, 1)", lambda x: x.sum(), x, math.fsum(x.astype(np.float64))
    n = sizes[-1]
    tenth = np.full(n, 0.1, np.float32)
    yield f"mean of {n:,} copies of 0.1", lambda x: x.mean(), tenth, math.fsum(tenth.astype(np.float64)) / n
    x = rng.random(n, dtype=np.float32)
    yield (
        f"sum of squares of {n:,} uniform",
        lambda x: (x * x).sum(),
        x,
        math.fsum((x.astype(np.float64) * x).astype(np.float32).astype(np.float64)),
    )
    x = (rng.standard_normal(n) + 10).astype(np.float32)
    wide = x.astype(np.float64)
    mean = math.fsum(wide) / n
    yield f"var of {n:,} normal(10, 1)", lambda x: x.var(), x, math.fsum((wide - mean) ** 2) / n
    rows = np.full((4, n // 4), 0.1, np.float32)
    yield (
        f"row sums of (4, {n // 4:,}) copies of 0.1",
        lambda x: x.sum(axis=1),
        rows,
        [math.fsum(r.astype(np.float64)) for r in rows],
    )
    tall = rng.random((n // 8, 8), dtype=np.float32)
    yield (
        f"column sums of ({n // 8:,}, 8) uniform",
        lambda x: x.sum(axis=0),
        tall,
        [math.fsum(c.astype(np.float64)) for c in tall.T],
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    configure_threads(args.threads)
    import numpy as np

    import kiln

    found, missing = peers()
    if missing:
        print(f"(not installed, not compared: {', '.join(m for m in missing if m != 'numexpr')})")
    print(f"threads: {args.threads}")
    for title, fn, x, exact in workloads(np, args.quick):
        compiled = kiln.compile(fn)
        results = {"numpy": lambda: fn(x), "kiln": lambda: compiled(x)}
        if "torch" in found:
            tx = found["torch"].from_numpy(x)
            results["torch"] = lambda: fn(tx).numpy()
        if "jax" in found:
            jitted, jx = found["jax"].jit(fn), found["jax"].numpy.asarray(x)
            results["jax"] = lambda: np.asarray(jitted(jx).block_until_ready())
        errors = {name: ulp_error(run(), exact) for name, run in results.items()}
        times = interleaved(results)
        print(f"\n{title}")
        for name, seconds in times.items():
            print(
                f"  {name:<8}{seconds * 1e3:>10.3f} ms {times['numpy'] / seconds:>8.2f}x numpy"
                f"   error {errors[name]:>10.2f} ulp"
            )


if __name__ == "__main__":
    main()
