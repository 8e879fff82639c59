"""Checks by tools outside kiln that several test modules run on what kiln prints: upstream
mlir-opt on every stage of a lowered function, nvcc on CUDA C. Each is None where the tool
is not installed (tests skip with the reason)."""

import os
import shutil
import subprocess

MLIR_OPT = next(
    (p for p in ("/usr/lib/llvm-19/bin/mlir-opt", shutil.which("mlir-opt") or "") if os.access(p, os.X_OK)), None
)
NVCC = shutil.which("nvcc")

# How each stage is handed to mlir-opt: the tensor stages' kiln dialect is unknown upstream.
STAGES = [
    ("tensor", True, ["--allow-unregistered-dialect"]),
    ("optimized", True, ["--allow-unregistered-dialect"]),
    ("affine", False, []),
    ("scheduled", False, []),
]


def assert_mlir_opt_accepts_every_stage(lowered) -> None:
    for stage, generic, flags in STAGES:
        text = lowered.text(stage, generic=generic)
        result = subprocess.run([MLIR_OPT, *flags, "-"], input=text, capture_output=True, text=True)
        assert result.returncode == 0, f"mlir-opt rejected the {stage} stage:\n{result.stderr}\n{text}"


def assert_nvcc_compiles(source: str, path) -> None:
    """`source` (CUDA C) written to `path` compiles with nvcc."""
    path.write_text(source)
    result = subprocess.run(
        [NVCC, "-c", "-diag-suppress", "177", str(path), "-o", os.devnull], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
