"""kiln's scans (one kiln.scan: a sequential loop along the axis, the other axes parallel and
vectorized) against numpy's, interleaved in one process, on 1 and 2 threads.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/scans.py
    python bench/scans.py --quick

Workloads: a moving average by cumsum (the difference of two shifted cumsums) of 100 000
and 1 000 000 float64, a cumprod of 1 000 000 float64 near 1, and a cumsum along axis 0 and
along axis 1 of a 2000 x 2000 float64 matrix. numpy runs every scan on one thread; kiln's
thread count is changed between the two passes (kiln.runtime.threads.set_thread_count),
numpy's times are taken again in each. Every result is checked against numpy's first (the
bits are numpy's: the same sequential order). Prints each time and the ratio numpy / kiln
(above 1: kiln is faster). A shared machine moves these by tens of percent between runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from harness import report_against_numpy

import kiln
from kiln.runtime import threads

WINDOW = 50


def moving_average(x):
    total = np.cumsum(x)
    return (total[WINDOW:] - total[:-WINDOW]) / WINDOW


def workloads(quick: bool):
    rng = np.random.default_rng(0)
    scale = 10 if quick else 1
    long = rng.standard_normal(1_000_000 // scale)
    side = 2000 // (3 if quick else 1)
    matrix = rng.standard_normal((side, side))
    return [
        (f"moving average (cumsum) of {100_000 // scale} float64", moving_average, long[: 100_000 // scale]),
        (f"moving average (cumsum) of {long.size} float64", moving_average, long),
        (f"cumprod of {long.size} float64 near 1", np.cumprod, 1 + long * 1e-3),
        (f"cumsum along axis 0 of {side} x {side} float64", lambda a: np.cumsum(a, axis=0), matrix),
        (f"cumsum along axis 1 of {side} x {side} float64", lambda a: np.cumsum(a, axis=1), matrix),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer rounds")
    args = parser.parse_args(argv)
    cases = workloads(args.quick)
    compiled = [kiln.compile(fn) for _, fn, _ in cases]
    for (title, fn, x), f in zip(cases, compiled):
        np.testing.assert_array_equal(f(x), fn(x), err_msg=title)
    for count in (1, 2):
        threads.set_thread_count(count)
        print(f"\n== kiln on {count} thread{'s' if count > 1 else ''} (numpy: one) ==")
        report_against_numpy(cases, compiled, rounds=3 if args.quick else 7)
    return 0


if __name__ == "__main__":
    sys.exit(main())
