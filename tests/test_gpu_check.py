"""What bench/gpu_check.sh relies on, checked without a GPU: the gpu marker selects exactly
the tests that need one, nvcc builds for the GPU KILN_CUDA_ARCH names, and bench/cuda.py's
code paths run under the emulation."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.codegen import nvcc
from kiln.runtime.cache import DiskCache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NVCC = shutil.which("nvcc")


def collected(*args):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_gpu_marker_selects_the_tests_that_need_a_gpu_and_only_them():
    files = ["tests/test_cuda.py", "tests/test_gpu_schedules.py", "tests/test_compare.py"]
    selected = collected("-m", "gpu", *files)
    assert "tests/test_cuda.py::test_every_op_table_case_gives_numpys_numbers_on_the_gpu" in selected
    assert (
        "tests/test_cuda.py::test_every_example_gives_the_cpu_backends_numbers_on_the_gpu[mlp.py:predict]" in selected
    )
    assert "tests/test_gpu_schedules.py::test_bound_schedules_give_numpys_numbers_on_the_gpu[shape1]" in selected
    assert "tests/test_compare.py::test_matches_numpy[isclose-cuda]" in selected  # the "cuda" of targets.TARGETS
    assert not [t for t in selected if "emulat" in t or t.endswith("-cpu]") or "mlir_opt" in t]
    unselected = collected("-m", "not gpu", *files)
    assert "tests/test_cuda.py::test_the_cuda_stage_is_readable_cuda_c" in unselected
    assert not set(selected) & set(unselected)


@pytest.mark.parametrize("value", ["sm90", "90", "sm_90; rm -rf /", "-G", "sm_90 -G"])
def test_a_cuda_arch_nvcc_does_not_take_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("KILN_CUDA_ARCH", value)
    with pytest.raises(ValueError, match="KILN_CUDA_ARCH=.* is not a GPU architecture nvcc's -arch takes"):
        nvcc.arch_flags()


@pytest.mark.parametrize(
    "value,flags",
    [
        ("", []),
        ("sm_90", ["-arch=sm_90"]),
        (" sm_90\n", ["-arch=sm_90"]),
        ("sm_90a", ["-arch=sm_90a"]),
        ("compute_80", ["-arch=compute_80"]),
        ("native", ["-arch=native"]),
    ],
)
def test_cuda_arch_gives_nvccs_arch_option(monkeypatch, value, flags):
    monkeypatch.setenv("KILN_CUDA_ARCH", value)
    assert nvcc.arch_flags() == flags


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)")
def test_nvcc_builds_for_the_architecture_asked_for_and_caches_each_apart(monkeypatch, tmp_path):
    source = kiln.compile(lambda x: np.tanh(x) * 2.0, target="cuda").lower(kiln.f32[37]).text("cuda")
    cache = DiskCache(str(tmp_path))
    commands = []
    run = subprocess.run
    monkeypatch.setattr(nvcc.subprocess, "run", lambda command, **kw: commands.append(command) or run(command, **kw))
    monkeypatch.delenv("KILN_CUDA_ARCH", raising=False)
    default = nvcc.build(source, emulate=False, cache=cache)
    monkeypatch.setenv("KILN_CUDA_ARCH", "sm_90")
    hopper = nvcc.build(source, emulate=False, cache=cache)
    assert hopper != default  # a library for one GPU is never taken for another's
    assert [c for c in commands[0] if c.startswith("-arch")] == []
    assert [c for c in commands[1] if c.startswith("-arch")] == ["-arch=sm_90"]
    assert nvcc.build(source, emulate=False, cache=cache) == hopper and len(commands) == 2  # from the cache
