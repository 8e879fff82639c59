"""kiln at another commit against kiln here, on the reduction workloads, in alternating processes.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/against_commit.py 869ecc2
    python bench/against_commit.py HEAD~3 --rounds 5 --threads 1

A speed claim about a change ("sums are as accurate as numpy's and no slower") needs the
old code and the new timed on the same machine at the same moment: on a shared machine
the load moves more than most changes do. This checks out the other commit into a
temporary worktree, then runs one process per side per round, alternating which side
goes first, each timing every workload (the best of several calls after a warm-up,
with its own empty compile cache). It prints the median of the rounds per side and
the ratio (above 1: this checkout is faster), and each side's error in float32 ulps
against float64 ``math.fsum`` (from bench/reductions.py), so speed and accuracy of one
build are read off one line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# pyproject.toml's package-dir: the import package kiln is compiler/, its subpackages sit beside it.
PACKAGE_DIRS = {"dialects": "dialects", "passes": "passes", "runtime": "runtime"}

CHILD = r"""
import json, math, os, sys, tempfile, time
os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import numpy as np
import kiln
from reductions import ulp_error, workloads
assert kiln.__file__.startswith(sys.argv[1]), kiln.__file__
results = {}
for title, fn, x, exact in workloads(np, sys.argv[3] == "quick"):
    compiled = kiln.compile(fn)
    got = compiled(x)
    best = math.inf
    for _ in range(int(sys.argv[4])):
        started = time.perf_counter()
        compiled(x)
        best = min(best, time.perf_counter() - started)
    results[title] = [best, ulp_error(got, exact)]
print(json.dumps(results))
"""


def package_tree(source_root: str, into: str) -> str:
    """A directory from which `import kiln` imports the checkout at `source_root`."""
    package = os.path.join(into, "kiln")
    os.makedirs(package)
    for name in os.listdir(os.path.join(source_root, "compiler")):
        os.symlink(os.path.join(source_root, "compiler", name), os.path.join(package, name))
    for name, folder in PACKAGE_DIRS.items():
        os.symlink(os.path.join(source_root, folder), os.path.join(package, name))
    return into


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("commit", help="the commit to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10, help="timed calls per workload per process (best kept)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from run import configure_threads

    configure_threads(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        worktree = os.path.join(scratch, "other")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", worktree, args.commit], check=True)
        try:
            sides = {
                args.commit: package_tree(worktree, os.path.join(scratch, "other-import")),
                "this checkout": package_tree(ROOT, os.path.join(scratch, "this-import")),
            }
            runs = {side: [] for side in sides}
            for k in range(args.rounds):
                order = list(sides) if k % 2 == 0 else list(sides)[::-1]
                for side in order:
                    out = subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            CHILD,
                            sides[side],
                            HERE,
                            "quick" if args.quick else "full",
                            str(args.calls),
                        ],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                    runs[side].append(json.loads(out.splitlines()[-1]))
                    print(f"round {k + 1}/{args.rounds}: {side} done", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", worktree], check=False)

    old, new = runs[args.commit], runs["this checkout"]
    print(
        f"{args.rounds} rounds, {args.threads} threads; times are medians over rounds of the best of "
        f"{args.calls} calls; errors in float32 ulps against math.fsum"
    )
    print(f"{'workload':<44} {args.commit[:12]:>12} {'this':>10} {'ratio':>6} {'err old':>9} {'err new':>9}")
    for title in new[0]:
        t_old = statistics.median(r[title][0] for r in old)
        t_new = statistics.median(r[title][0] for r in new)
        print(
            f"{title:<44} {t_old * 1e3:10.2f}ms {t_new * 1e3:8.2f}ms {t_old / t_new:6.2f} "
            f"{old[0][title][1]:9.2f} {new[0][title][1]:9.2f}"
        )


if __name__ == "__main__":
    main()
