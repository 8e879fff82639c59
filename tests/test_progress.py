"""Progress bars of the long commands (kiln tune, bisect, build, the fuzz runner): drawn
on a terminal, silent in a pipe or a log, where only the summary each prints is written."""

import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.tools.bisect import StepBar
from kiln.tools.build import build_library

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream", [Terminal, io.StringIO], ids=["terminal", "pipe"])
def test_bisect_draws_its_steps_on_a_terminal_and_prints_its_estimate_anywhere(stream):
    out = stream()
    with StepBar(out) as bar:
        report = kiln.bisect(lambda x: np.tanh(x) * 3, np.linspace(-1, 1, 7), progress=bar.say)
    total = len(report.steps)
    text = out.getvalue()
    assert text.count(f"kiln bisect of <lambda>: {total} steps; about ") == 1
    drawn = f"{total}/{total}, native code: ok" in text
    assert drawn == (stream is Terminal)
    if stream is io.StringIO:
        assert text.splitlines() == [text.splitlines()[0]]  # the estimate alone


@pytest.mark.skipif(
    shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None, reason="no C compiler"
)
@pytest.mark.parametrize("stream", [Terminal, io.StringIO], ids=["terminal", "pipe"])
def test_build_draws_its_steps_on_a_terminal_only(tmp_path, stream):
    out = stream()
    paths = build_library(kiln.compile(lambda x: (x * x).sum()), (kiln.f32[5],), str(tmp_path), "sq", 0, progress=out)
    assert os.path.exists(paths["library"])
    drawn = "compiling sq_grad" in out.getvalue() and "linking libsq.so" in out.getvalue()
    assert drawn == (stream is Terminal)
    assert stream is Terminal or out.getvalue() == ""


def test_a_fuzz_run_in_a_log_prints_only_its_summary():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "fuzz", "run.py"), "--minutes", "0.02", "--max-steps", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(tuple("0123456789")) and "random programs (target cpu) in" in lines[0]
    assert lines[1].startswith("  compared ")
    assert "\r" not in result.stdout and "programs/s" not in result.stdout
