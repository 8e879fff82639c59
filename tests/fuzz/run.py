"""Long differential fuzzing runs: random programs, kiln against numpy (and, with
--gradients, kiln.grad against finite differences), for a bounded time.

    python tests/fuzz/run.py --minutes 5
    python tests/fuzz/run.py --minutes 5 --gradients
    python tests/fuzz/run.py --minutes 2 --target cuda-emulate
    python tests/fuzz/run.py --minutes 5 --schedules     # random legal schedules
    python tests/fuzz/run.py --minutes 30 --keep-going   # every distinct failure, not only the first
    python tests/fuzz/run.py --minutes 5 --threads 4     # four programs traced and run at once

Programs of every dtype kiln supports, with scalar arguments, views, size-0
dimensions and special values (NaN, inf, -0.0, huge, integer limits).
Prints the number of programs tried, how many numpy itself rejected and
how many kiln refused with UnsupportedError (the most common messages), and
the first mismatch or crash (the program, shrunk by hypothesis, its seed and
inputs); exits 1 if there was one.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tqdm import tqdm  # noqa: E402

from fuzz.programs import DTYPES, check, check_concurrently, check_gradient, programs  # noqa: E402
from fuzz.schedules import check_schedule  # noqa: E402


def _only(kind, exc) -> bool:
    """Whether `exc` is a `kind`, or a group (hypothesis's FlakyFailure) of nothing else."""
    parts = getattr(exc, "exceptions", None)
    return isinstance(exc, kind) if parts is None else all(_only(kind, part) for part in parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--gradients", action="store_true")
    parser.add_argument("--schedules", action="store_true", help="compile under random legal schedules")
    parser.add_argument("--target", default="cpu", choices=["cpu", "interpret", "cuda-emulate", "cuda"])
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument(
        "--threads", type=int, default=1, help="check this many programs at once, one thread each (native target)"
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="record each distinct failure (unshrunk) and go on, instead of stopping at the first",
    )
    args = parser.parse_args()
    deadline = time.monotonic() + 60 * args.minutes
    tried = [0]
    outcomes = collections.Counter()
    findings = {}
    everything = dict(views=True, empty=True)
    strategy = (
        programs(args.max_steps, dtypes=(np.float64,), smooth=True, **everything)
        if args.gradients
        else programs(args.max_steps, dtypes=DTYPES, mixed=True, scalars=True, specials=True, large=True, **everything)
    )

    class OutOfTime(Exception):
        pass

    if args.threads > 1:
        strategy = st.lists(strategy, min_size=args.threads, max_size=args.threads)

    @settings(max_examples=10**9, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strategy, st.integers(0, 2**32 - 1))
    def fuzz(program, seed):
        if time.monotonic() > deadline:
            raise OutOfTime
        batch = max(args.threads, 1)
        tried[0] += batch
        bar.set_postfix_str(f"{outcomes['failed']} failing, {max(0.0, deadline - time.monotonic()):.0f} s left", False)
        bar.update(batch)
        try:
            if args.gradients:
                outcomes[check_gradient(program, seed)] += 1
            elif args.schedules:
                outcomes[check_schedule(program, seed)] += 1
            elif args.threads > 1:
                outcomes.update(check_concurrently([(p, seed + k) for k, p in enumerate(program)], args.target))
            else:
                outcomes[check(program, seed, args.target)] += 1
        except AssertionError as exc:
            if not args.keep_going:
                raise
            outcomes["failed"] += 1
            # one entry per kind of failure: its first line without the seed, the shortest program kept
            kind = str(exc).splitlines()[0].split(" for seed")[0]
            if kind not in findings or len(str(exc)) < len(findings[kind]):
                findings[kind] = str(exc)

    started = time.monotonic()
    # On a terminal, a live count of programs; in a log, only the summary below.
    bar = tqdm(file=sys.stdout, disable=None, leave=False, unit=" programs", dynamic_ncols=True)
    try:
        with bar:
            fuzz()
    except OutOfTime:
        pass
    except AssertionError as exc:
        print(f"MISMATCH after {tried[0]} programs:\n{exc}")
        return 1
    except Exception as exc:  # a crash (hypothesis may group several) is a finding too
        # Unless every part of it is OutOfTime: the deadline passed while hypothesis replayed an
        # example it had run before the deadline, and it reports the two as a flaky failure.
        if not _only(OutOfTime, exc):
            import traceback

            print(f"CRASH after {tried[0]} programs:")
            traceback.print_exception(exc)
            return 1
    what = "gradients" if args.gradients else "random schedules" if args.schedules else f"target {args.target}"
    for text in findings.values():
        print(f"FINDING:\n{text}\n")
    print(
        f"{tried[0]} random programs ({what}) in {time.monotonic() - started:.0f} s: "
        + (f"{len(findings)} distinct findings in {outcomes['failed']} failing programs" if findings else "no mismatch")
    )
    refused = {k: n for k, n in outcomes.items() if k.startswith("unsupported")}
    if outcomes:
        print(
            f"  compared {outcomes['checked']}, rejected by numpy {outcomes['invalid']}, "
            f"UnsupportedError {sum(refused.values())}"
        )
    for message, n in sorted(refused.items(), key=lambda item: -item[1])[:5]:
        print(f"  {n:6d} x {message}")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
