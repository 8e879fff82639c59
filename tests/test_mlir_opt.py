"""What kiln prints at the affine level is real MLIR: upstream mlir-opt parses and
verifies it. (The tensor stage is kiln's own dialect; upstream registers a
different dialect under the same name, so mlir-opt cannot check it.) Skipped,
with the reason, where mlir-opt is missing."""

import os
import shutil
import subprocess

import pytest
from op_table import CASES

import kiln

CANDIDATES = [os.environ.get("KILN_MLIR_OPT", ""), "/usr/lib/llvm-19/bin/mlir-opt", shutil.which("mlir-opt") or ""]
MLIR_OPT = next((path for path in CANDIDATES if path and os.access(path, os.X_OK)), None)
pytestmark = pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")


def mlir_opt(text: str, *flags):
    result = subprocess.run([MLIR_OPT, *flags, "-"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, f"mlir-opt rejected kiln's IR:\n{result.stderr}\n{text}"
    return result.stdout


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_affine_stage_is_accepted_by_mlir_opt(case):
    lowered = kiln.compile(case.fn).lower(*case.args)
    for stage in ("affine", "scheduled"):
        mlir_opt(lowered.text(stage))


def test_mlir_opt_lowers_kiln_affine_code_further():
    """A real consumer: upstream's own lowering of affine loops runs on kiln's output."""
    lowered = kiln.compile(lambda x, y: (x @ y).sum(axis=0)).lower(kiln.f32[7, 13], kiln.f32[13, 5])
    out = mlir_opt(lowered.text("affine"), "--lower-affine")
    assert "scf.for" in out and "affine.for" not in out
