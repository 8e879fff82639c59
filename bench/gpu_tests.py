"""Every test marked gpu (``pytest -m gpu``), spread over several pytest processes.

    python bench/gpu_tests.py [--jobs N] [--timeout SECONDS] [--out DIR]

Most GPU tests build a library with nvcc (about a second each) and run it for
milliseconds: one process takes minutes for what a 16-core machine does in one.
Each process collects the test files that can hold GPU tests (those that name
NEEDS_GPU, pytest.mark.gpu or import tests/targets.py) and keeps its share of the
gpu-marked tests (``-p bench.gpu_tests``, this module as a pytest plugin, reading
``KILN_GPU_SHARD=k/n``); the op-table test, which builds its 706 libraries with
a thread per core, gets a process of its own. The repository's conftest.py, which
collects the documentation through Sybil, is left out (``--confcutdir=tests``),
and a test file that cannot be imported is counted as an error, not a stop. The last line printed starts with
``SUMMARY:``; the exit status is 0 only when the tests ran, none failed and at least
one passed (a run where they all skip, for want of a GPU, is a failure here).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The tests whose work is many times another's, by name: each is given a process of its own.
HEAVY = ("test_every_op_table_case_gives_numpys_numbers_on_the_gpu",)
MAY_HOLD_GPU_TESTS = re.compile(r"NEEDS_GPU|mark\.gpu|from targets import")


def test_files() -> list[str]:
    """The test files that can hold gpu-marked tests, relative to the repository root."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "test_*.py"))):
        with open(path) as f:
            if MAY_HOLD_GPU_TESTS.search(f.read()):
                found.append(os.path.relpath(path, ROOT))
    return found


def shares(names: list[str], count: int) -> list[int]:
    """The process (0 .. count-1) each test runs in: the heavy ones alone in the first
    processes, the others dealt out over the rest in turn."""
    heavy = [i for i, name in enumerate(names) if name.split("[")[0] in HEAVY]
    alone = min(len(heavy), count - 1)
    owner, dealt = [], 0
    for i in range(len(names)):
        if i in heavy and alone:
            owner.append(heavy.index(i) % alone)
        else:
            owner.append(alone + dealt % (count - alone))
            dealt += 1
    return owner


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """As a plugin: keep this process's share of the gpu-marked tests (KILN_GPU_SHARD=k/n)."""
    shard = os.environ.get("KILN_GPU_SHARD")
    if not shard:
        return
    k, n = (int(part) for part in shard.split("/"))
    on_the_gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    owner = shares([item.name for item in on_the_gpu], n)
    keep = {id(item) for item, o in zip(on_the_gpu, owner) if o == k}
    deselected = [item for item in items if id(item) not in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if id(item) in keep]


def counts(junit: str) -> dict:
    """Tests, failures, errors and skips in a JUnit XML report, with the failures' names
    and messages."""
    suite = ElementTree.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    found = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    found["failed"], found["why_skipped"] = [], []
    for case in suite.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            found["why_skipped"].append(skipped.get("message") or "")
        for outcome in ("failure", "error"):
            element = case.find(outcome)
            if element is not None:
                message = (element.get("message") or "").strip().replace("\n", " ")
                found["failed"].append(f"{case.get('classname')}::{case.get('name')}: {message[:400]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cores = os.cpu_count() or 1
    parser.add_argument("--jobs", type=int, default=max(1, min(8, cores // 2)), help="pytest processes")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds before the processes are stopped")
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "out"))
    parser.add_argument("paths", nargs="*", help="test files or folders (default: those that can hold GPU tests)")
    args = parser.parse_args()
    paths = args.paths or test_files()
    out = os.path.join(args.out, "gpu-tests")
    os.makedirs(out, exist_ok=True)
    processes = []
    started = time.monotonic()
    for k in range(args.jobs):
        log = open(os.path.join(out, f"shard-{k}.log"), "w")
        command = [
            sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "bench.gpu_tests", "-p", "no:cacheprovider",
            "--confcutdir=tests", "--continue-on-collection-errors", "-rfE",
            f"--junitxml={os.path.join(out, f'shard-{k}.xml')}", *paths,
        ]  # fmt: skip
        shard_env = dict(os.environ, KILN_GPU_SHARD=f"{k}/{args.jobs}")
        processes.append(
            (subprocess.Popen(command, cwd=ROOT, env=shard_env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True), log)
        )  # fmt: skip

    def stop(signum, frame):  # stopped from outside (timeout(1)): the processes, in sessions of their own, too
        for process, _ in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    timed_out = []
    for k, (process, log) in enumerate(processes):
        try:
            process.wait(timeout=max(0.0, args.timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its nvcc and compiler children too
            process.wait()
            timed_out.append(k)
        log.close()
    seconds = time.monotonic() - started
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "failed": [], "why_skipped": []}
    for k in range(args.jobs):
        junit = os.path.join(out, f"shard-{k}.xml")
        if k in timed_out or not os.path.exists(junit):
            with open(os.path.join(out, f"shard-{k}.log")) as f:
                tail = f.read()[-3000:]
            why = "stopped at the time limit" if k in timed_out else f"exited {processes[k][0].returncode}, no report"
            print(f"process {k} {why}; the end of its output ({out}/shard-{k}.log):\n{tail}")
            continue
        found = counts(junit)
        for key in total:
            total[key] += found[key]
    for line in total["failed"]:
        print(f"FAILED {line}")
    passed = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    summary = (
        f"{passed} passed, {total['failures']} failed, {total['errors']} errors, {total['skipped']} skipped "
        f"of {total['tests']} gpu tests in {seconds:.0f} s ({args.jobs} processes)"
    )
    if timed_out:
        summary += f"; {len(timed_out)} processes stopped at {args.timeout:.0f} s, their tests not counted"
    if total["tests"] and total["skipped"] == total["tests"]:
        summary += f"; all skipped ({total['why_skipped'][0]})"
    print(f"SUMMARY: {summary}")
    ok = not timed_out and passed > 0 and not total["failures"] and not total["errors"]
    ok = ok and all(process.returncode == 0 for process, _ in processes)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
