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

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import against_numpy, thread_and_round_arguments  # noqa: E402


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
    args = thread_and_round_arguments(__doc__)
    import numpy as np

    check = lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # noqa: E731
    against_numpy(workloads(np), args.rounds, check)


if __name__ == "__main__":
    main()
