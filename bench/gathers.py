"""Gathers and scatters by a traced index: kiln against numpy, interleaved in one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/gathers.py
    python bench/gathers.py --threads 2 --rounds 11

Workloads: an embedding lookup ``table[ids]`` (a 5000 x 64 float32 table, 256 ids), a
cross-entropy ``-logp[np.arange(n), labels].mean()`` (512 x 100) and ``np.add.at`` of
100 000 updates into 1000 positions. Each is one kiln.gather or kiln.scatter_at, one loop
over its output (or its updates) loading through the index, so its cost follows the
output's size, not the output's times the axis'. Times are medians of interleaved rounds
(see bench/harness.py); the ratio is numpy's time over kiln's (above 1: kiln is faster).
Both check their results against each other before timing.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import configure_threads, interleaved  # noqa: E402


def workloads(np):
    """(title, function, arguments): each function runs as it is under numpy and compiled under kiln."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((5000, 64)).astype(np.float32)
    ids = rng.integers(0, 5000, 256)
    yield "table[ids]: 5000 x 64 table, 256 ids", lambda t, i: t[i], (table, ids)

    logp = np.log(rng.dirichlet(np.ones(100), 512)).astype(np.float32)
    labels = rng.integers(0, 100, 512)
    yield (
        "-logp[np.arange(n), labels].mean(): 512 x 100",
        lambda lp, y: -lp[np.arange(lp.shape[0]), y].mean(),
        (logp, labels),
    )

    def add_at(y, i, v):
        y = y.copy()
        np.add.at(y, i, v)
        return y

    updates = (np.zeros(1000, np.float32), rng.integers(0, 1000, 100_000), rng.random(100_000, dtype=np.float32))
    yield "np.add.at: 100 000 updates into 1000", add_at, updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    configure_threads(args.threads)
    import numpy as np

    import kiln

    print(f"{args.threads} thread(s), medians of {args.rounds} interleaved rounds")
    for title, fn, inputs in workloads(np):
        compiled = kiln.compile(fn)
        np.testing.assert_allclose(compiled(*inputs), fn(*inputs), rtol=1e-5, atol=1e-5)
        times = interleaved({"numpy": lambda: fn(*inputs), "kiln": lambda: compiled(*inputs)}, rounds=args.rounds)
        print(
            f"  {title:<48} numpy {times['numpy'] * 1e6:>9.1f} us   kiln {times['kiln'] * 1e6:>9.1f} us   "
            f"{times['numpy'] / times['kiln']:>6.2f}x numpy"
        )


if __name__ == "__main__":
    main()
