"""kiln's sorts (kiln.sort: a bottom-up merge sort of each row, O(n log n)) against numpy's,
interleaved in one process, on one thread.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/sorts.py
    python bench/sorts.py --quick

Workloads, each at 1x and 10x its size: np.sort of 512 x 128 float32 along the rows, the
top five of each row by np.argsort(-scores, axis=1)[:, :5] on the same, and np.median of
100 000 float64 (10x: 5120 x 128 and 1 000 000). Every result is checked against numpy's
first (argsort against numpy's stable one: kiln's is always stable). Prints each time and
the ratio numpy / kiln (above 1: kiln is faster). A shared machine moves these by tens of
percent between runs.
"""

from __future__ import annotations

import argparse
import sys

from harness import configure_threads

configure_threads(1)

import numpy as np  # noqa: E402  (after the thread count is set)
from harness import report_against_numpy  # noqa: E402

import kiln  # noqa: E402


def top_five(scores):
    return np.argsort(-scores, axis=1)[:, :5]


def workloads(quick: bool):
    rng = np.random.default_rng(0)
    cases = []
    for scale in (1, 10):
        rows = 512 * scale // (4 if quick else 1)
        scores = rng.standard_normal((rows, 128)).astype(np.float32)
        long = rng.standard_normal(100_000 * scale // (4 if quick else 1))
        cases += [
            (f"np.sort of {rows} x 128 float32, axis=1", lambda a: np.sort(a, axis=1), scores, None),
            (f"np.argsort(-s, axis=1)[:, :5] of {rows} x 128 float32", top_five, scores, "stable"),
            (f"np.median of {long.size} float64", np.median, long, None),
        ]
    return cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer rounds")
    args = parser.parse_args(argv)
    cases = workloads(args.quick)
    compiled = [kiln.compile(fn) for _, fn, _, _ in cases]
    for (title, fn, x, kind), f in zip(cases, compiled):
        want = np.argsort(-x, axis=1, kind="stable")[:, :5] if kind else fn(x)
        np.testing.assert_array_equal(f(x), want, err_msg=title)
    print("== one thread, kiln and numpy ==")
    report_against_numpy([case[:3] for case in cases], compiled, rounds=3 if args.quick else 7)
    return 0


if __name__ == "__main__":
    sys.exit(main())
