"""Long differential fuzzing runs: random programs, kiln against numpy (and, with
--gradients, kiln.grad against finite differences), for a bounded time.

    python tests/fuzz/run.py --minutes 5
    python tests/fuzz/run.py --minutes 5 --gradients
    python tests/fuzz/run.py --minutes 2 --target cuda-emulate
    python tests/fuzz/run.py --minutes 5 --schedules     # random legal schedules

Prints the number of programs tried and every mismatch (the program, shrunk
by hypothesis, and the seed); exits 1 if there was one.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzz.programs import check, check_gradient, check_schedule, programs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--gradients", action="store_true")
    parser.add_argument("--schedules", action="store_true", help="compile under random legal schedules")
    parser.add_argument("--target", default="cpu", choices=["cpu", "interpret", "cuda-emulate", "cuda"])
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args()
    deadline = time.monotonic() + 60 * args.minutes
    tried = [0]
    strategy = (programs(args.max_steps, dtypes=(np.float64,), smooth=True) if args.gradients
                else programs(args.max_steps))

    class OutOfTime(Exception):
        pass

    @settings(max_examples=10**9, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strategy, st.integers(0, 2**32 - 1))
    def fuzz(program, seed):
        if time.monotonic() > deadline:
            raise OutOfTime
        tried[0] += 1
        if tried[0] % 200 == 0:
            print(f"  {tried[0]} programs, no mismatch so far", flush=True)
        if args.gradients:
            check_gradient(program, seed)
        elif args.schedules:
            check_schedule(program, seed)
        else:
            check(program, seed, args.target)

    started = time.monotonic()
    try:
        fuzz()
    except OutOfTime:
        pass
    except AssertionError as exc:
        print(f"MISMATCH after {tried[0]} programs:\n{exc}")
        return 1
    except Exception as exc:  # a crash (hypothesis may group several) is a finding too
        import traceback
        print(f"CRASH after {tried[0]} programs:")
        traceback.print_exception(exc)
        return 1
    what = "gradients" if args.gradients else "random schedules" if args.schedules else f"target {args.target}"
    print(f"{tried[0]} random programs ({what}) in {time.monotonic() - started:.0f} s: no mismatch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
