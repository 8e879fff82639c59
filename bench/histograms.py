"""Histograms, counting, binary search and correlations: kiln against numpy, interleaved in one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/histograms.py
    python bench/histograms.py --threads 2 --rounds 11 --scales 1 10

Workloads, each at 1x and 10x its size: ``np.histogram`` of 100 000 values into 50 equal
bins, ``np.bincount`` of 100 000 values below 1000, ``np.searchsorted`` of 100 000 values
into 1000 sorted ones, ``np.interp`` at 100 000 points of 1000 samples, and
``np.convolve(s, w, "same")`` with 31 taps at n = 1000, 10 000 and 100 000. Each is O(n)
(a scatter-add), O(n log m) (a binary search of gathers) or O(n k) (a multiply-add per tap)
in kiln as in numpy. Times are medians of interleaved rounds (see bench/harness.py); the
ratio is numpy's time over kiln's (above 1: kiln is faster). Both check their results
against each other before timing.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import configure_threads, interleaved  # noqa: E402


def workloads(np, scale: int):
    """(title, function, arguments) at `scale` times the base sizes."""
    rng = np.random.default_rng(0)
    n = 100_000 * scale
    x = rng.random(n)
    yield f"histogram: {n} values, 50 bins", lambda a: np.histogram(a, 50, range=(0, 1))[0], (x,)
    counts = rng.integers(0, 1000, n)
    yield f"bincount: {n} values, minlength 1000", lambda c: np.bincount(c, minlength=1000), (counts,)
    table = np.sort(rng.random(1000))
    yield f"searchsorted: {n} values into 1000", lambda a, v: np.searchsorted(a, v), (table, x)
    fp = rng.standard_normal(1000)
    yield f"interp: {n} points, 1000 samples", lambda v, xp, fp: np.interp(v, xp, fp), (x, table, fp)
    taps = rng.standard_normal(31)
    for size in (1000, 10_000, 100_000):
        signal = rng.standard_normal(size * scale)
        yield f"convolve same: n {size * scale}, 31 taps", lambda s, w: np.convolve(s, w, "same"), (signal, taps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    configure_threads(args.threads)
    import numpy as np

    import kiln

    print(f"{args.threads} thread(s), medians of {args.rounds} interleaved rounds")
    for scale in args.scales:
        for title, fn, inputs in workloads(np, scale):
            compiled = kiln.compile(fn)
            np.testing.assert_allclose(compiled(*inputs), fn(*inputs), rtol=1e-9, atol=1e-9)
            times = interleaved({"numpy": lambda: fn(*inputs), "kiln": lambda: compiled(*inputs)}, rounds=args.rounds)
            print(
                f"  {title:<42} numpy {times['numpy'] * 1e6:>10.1f} us   kiln {times['kiln'] * 1e6:>10.1f} us   "
                f"{times['numpy'] / times['kiln']:>6.2f}x numpy",
                flush=True,
            )


if __name__ == "__main__":
    main()
