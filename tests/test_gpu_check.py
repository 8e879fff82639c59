"""What bench/gpu_check.sh relies on, checked without a GPU: the gpu marker selects exactly
the tests that need one, nvcc builds for the GPU KILN_CUDA_ARCH names, and bench/cuda.py's
code paths run under the emulation."""

import importlib.util
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
def test_an_architecture_this_nvcc_cannot_build_for_is_an_error_naming_the_variable(monkeypatch, tmp_path):
    """sm_35 has the form nvcc's -arch takes, but nvcc 12 and later dropped Kepler."""
    monkeypatch.setenv("KILN_CUDA_ARCH", "sm_35")
    source = kiln.compile(lambda x: x + 1, target="cuda").lower(kiln.f32[3]).text("cuda")
    with pytest.raises(kiln.KilnError, match=r"KILN_CUDA_ARCH='sm_35': this nvcc cannot build for that architecture"):
        nvcc.build(source, emulate=False, cache=DiskCache(str(tmp_path)))


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


def bench_module(name):
    """A script of bench/ imported as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(ROOT, "bench", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bench_cuda_runs_every_workload_under_the_emulation_and_checks_it_against_numpy():
    result = subprocess.run(
        [sys.executable, "bench/cuda.py", "--emulate", "--quick", "--markdown", "--budget", "0.05", "--repeats", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line.split(" | ") for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0][:2] == ["| workload", "implementation"]
    table = {(r[0].lstrip("| "), r[1]): r[-1].rstrip(" |") for r in rows[1:]}
    workloads = [
        "matmul 17x17x17 f32",
        "matmul 32x32x32 f32",
        "fused chain tanh(x*y+z), 1000",
        "row softmax 7x33",
        "layernorm 7x33",
        "MLP training step 784-512-512-10, batch 8",
        "conv2d 3x3 pad 1, 1x3x9x9 -> 4 filters",
    ]
    assert sorted(table) == sorted((w, who) for w in workloads for who in ("numpy (CPU)", "kiln cuda-emulate"))
    assert all(table[(w, "kiln cuda-emulate")] == "ok" for w in workloads)
    assert "- limit, memory bandwidth: " in result.stdout and "no PyTorch with CUDA here" in result.stdout


def test_bench_cuda_marks_a_result_that_differs_from_numpys():
    bench = bench_module("cuda")
    want = {"b": np.array([1.0, np.nan]), "w": np.arange(4.0).reshape(2, 2)}
    assert bench.difference({"b": np.array([1.0, np.nan]), "w": np.arange(4.0).reshape(2, 2)}, want, 1e-6) is None
    assert "result 1: 4 of 4 elements differ, max |kiln - numpy| = 0.001" in bench.difference(
        {"b": np.array([1.0, np.nan]), "w": np.arange(4.0).reshape(2, 2) + 1e-3}, want, 1e-6
    )
    assert "shape (4,)" in bench.difference({"b": np.array([1.0, np.nan]), "w": np.arange(4.0)}, want, 1e-6)
    assert bench.difference((np.ones(1),), (np.ones(1), np.ones(1)), 1e-6) == "1 results, numpy has 2"
    assert "result 0: 1 of 2 elements differ" in bench.difference(np.array([np.nan, 2]), np.array([1.0, 2]), 1e-6)


def test_bench_conv_oracle_is_numpys_convolution():
    bench = bench_module("cuda")
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 7, 5)), rng.standard_normal((4, 3, 3, 3))
    want = np.zeros((2, 4, 7, 5))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(7):
        for j in range(5):
            want[:, :, i, j] = np.einsum("nchw,fchw->nf", padded[:, :, i : i + 3, j : j + 3], w)
    np.testing.assert_allclose(bench.numpy_conv3x3(x, w), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_each_gpu_test_runs_in_one_process_and_the_op_table_alone(count):
    names = ["a[1]", "test_every_op_table_case_gives_numpys_numbers_on_the_gpu", "b", "c[x-cuda]", "d"]
    owner = bench_module("gpu_tests").shares(names, count)
    assert len(owner) == len(names) and all(0 <= o < count for o in owner)
    if count > 1:
        assert owner.count(owner[1]) == 1  # the op table's process runs nothing else


def test_the_sanitizer_program_gives_numpys_numbers_under_the_emulation():
    result = subprocess.run(
        [sys.executable, "bench/gpu_sanitize.py", "--target", "cuda-emulate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("ok     ") == 8 and "SUMMARY: 0 of 8 programs differ from numpy" in result.stdout


def test_bench_cuda_names_a_workload_that_fails_or_differs_and_runs_the_rest(monkeypatch, capsys):
    bench = bench_module("cuda")
    x = np.arange(6, dtype=np.float32)
    monkeypatch.setattr(
        bench,
        "workloads",
        lambda scale: [
            bench.Workload("cannot trace", 24.0, False, lambda x: x.reshape(5), [x], lambda x: x, None, 1e-6),
            bench.Workload("off by one", 24.0, False, lambda x: x + 1, [x], lambda x: x + 2, None, 1e-6),
            bench.Workload("right", 24.0, False, lambda x: x * 2, [x], lambda x: x * 2, None, 1e-6),
        ],
    )
    assert bench.main(["--emulate", "--markdown", "--budget", "0.01", "--repeats", "3"]) == 1
    rows = {line.split(" | ")[0][2:]: line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")}
    assert "| kiln cuda-emulate |" in rows["cannot trace"] and "ERROR: ShapeError: " in rows["cannot trace"]
    assert rows["off by one"].endswith(
        "WRONG: result 0: 6 of 6 elements differ, max \\|kiln - numpy\\| = 1 where both are finite (tolerance 7e-06) |"
    )
    assert rows["right"].endswith("| ok |")
