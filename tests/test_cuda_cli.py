"""The command line for the CUDA backend on a machine without a GPU: ``kiln dump --target
cuda`` prints the CUDA C, ``kiln build --target cuda`` builds with nvcc (``cuda-emulate``
builds the same source for the CPU, checked against numpy), ``kiln tune --target
cuda-emulate`` runs the GPU search end to end and ``kiln.compile`` applies what it records;
the GPU's fingerprint and the CUDA-event timer are checked against a fake libcudart."""

import ctypes
import io
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import yaml

import kiln
from kiln.passes.kernels import extract, kernel_names
from kiln.runtime import cuda
from kiln.tools import gpu_tuner, tuner
from kiln.tools.cli import main
from kiln.tools.gpu_tuner import GpuKernelBench, GpuSearchSpace, GpuTuning
from kiln.tools.tuning_db import TuningDB, gpu_fingerprint, host_fingerprint, target_fingerprint

ROOT = __file__.rsplit("/tests/", 1)[0]
NVCC = shutil.which("nvcc")
CXX = shutil.which(os.environ.get("CXX", "g++"))
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) for the host emulation")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit)")


def _has_gpu() -> bool:
    try:
        cuda.check_gpu()
    except cuda.CudaUnavailable:
        return False
    return True


MODEL = """
import numpy as np
import kiln

def step(x: kiln.f32[7, 13], w: kiln.f32[13]):
    return np.tanh(x * w).sum(axis=1), np.maximum(x, 0)

def loss(x: kiln.f64[5, 3], w: kiln.f64[3]):
    return (np.tanh(x @ w) ** 2).sum()

@kiln.compile(target="cuda")
def on_gpu(x: kiln.f32[4]):
    return np.exp(x)
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return str(path)


# ----- kiln dump --target -----


def test_dump_prints_the_cuda_c_without_a_gpu(capsys):
    assert main(["dump", f"{ROOT}/examples/mlp.py:predict", "--target", "cuda", "--stage", "cuda"]) == 0
    source = capsys.readouterr().out
    assert "__global__ void kiln_predict_k0(" in source
    assert 'extern "C" int kiln_predict(float *v0, float *v1, float *v2, float *v3, float *v4, float *v5) {' in source
    assert main(["dump", f"{ROOT}/examples/mlp.py:predict", "--target", "cuda-emulate", "--stage", "cuda"]) == 0
    assert capsys.readouterr().out == source  # the emulation builds this same source


def test_dump_all_stages_of_the_cuda_target(capsys):
    assert main(["dump", f"{ROOT}/examples/layernorm.py:layernorm", "--target", "cuda", "--stage", "all"]) == 0
    out = capsys.readouterr().out
    labels = re.findall(r"^// ----- stage: (\w+) -----$", out, re.M)
    assert labels == ["tensor", "optimized", "affine", "scheduled", "cuda"]


@pytest.mark.parametrize(
    "target, stage, message",
    [
        (
            "cuda",
            "llvm",
            "--target cuda has no stage 'llvm' (its stages: tensor, optimized, affine, scheduled, cuda, or all); "
            "llvm is a stage of --target cpu",
        ),
        (
            None,
            "cuda",
            "--target cpu has no stage 'cuda' (its stages: tensor, optimized, affine, scheduled, llvm, or all); "
            "cuda is a stage of --target cuda and cuda-emulate",
        ),
        ("interpret", "affine", "--target interpret has no stage 'affine' (its stages: tensor, or all)"),
        ("cuda-emulate", "optimised", "--target cuda-emulate has no stage 'optimised'"),
    ],
)
def test_a_stage_the_target_lacks_is_an_error_listing_its_stages(capsys, target, stage, message):
    argv = ["dump", f"{ROOT}/examples/mlp.py:predict", "--stage", stage] + (["--target", target] if target else [])
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_target_overrides_the_one_the_file_compiled_for(model, capsys):
    assert main(["dump", f"{model}:on_gpu", "--stage", "cuda"]) == 0  # its own target: cuda
    assert "__global__ void kiln_on_gpu_k0(" in capsys.readouterr().out
    assert main(["dump", f"{model}:on_gpu", "--target", "cpu", "--stage", "llvm"]) == 0
    assert "define " in capsys.readouterr().out


def test_an_unknown_target_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["dump", f"{ROOT}/examples/mlp.py:predict", "--target", "tpu"])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err


def _relu_exp_model(tmp_path) -> str:
    """exp(relu(x)) and x > 0 of an input "input.1" of shape [N, 3], as an ONNX file."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["input.1"], ["r"]),
            helper.make_node("Exp", ["r"], ["495"]),
            helper.make_node("Greater", ["input.1", "zero"], ["positive"]),
        ],
        "relu",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3])],
        [
            helper.make_tensor_value_info("495", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("positive", TensorProto.BOOL, ["N", 3]),
        ],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])],
    )
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_dump_an_onnx_model_for_cuda(tmp_path, capsys):
    path = _relu_exp_model(tmp_path)
    assert main(["dump", path, "--input-shape", "input.1=5,3", "--target", "cuda", "--stage", "cuda"]) == 0
    assert 'extern "C" int kiln_relu(float *v0, float *v1, unsigned char *v2) {' in capsys.readouterr().out


@needs_cxx
def test_an_onnx_model_built_for_cuda_emulate_keeps_its_names_and_numbers(tmp_path, capsys):
    path, out = _relu_exp_model(tmp_path), tmp_path / "build"
    assert main(["build", path, "--input-shape", "input.1=7,3", "--target", "cuda-emulate", "-o", str(out)]) == 0
    header = (out / "relu.h").read_text()
    assert "int32_t relu(const float *input_1, float *v495, uint8_t *positive);" in header
    x = np.array([[np.nan, -np.inf, np.inf], [-0.0, 0.0, 1e-45]] + [[-1.5, 2.5, 88.0]] * 5, np.float32)
    got, positive = kiln.load(str(out / "librelu.so"))(x)
    np.testing.assert_allclose(got, np.exp(np.maximum(x, 0)), rtol=2e-7)  # expf: within an ulp; NaN stays NaN
    np.testing.assert_array_equal(positive, x > 0)


# ----- kiln build --target cuda / cuda-emulate -----


def _prototype(text: str, name: str) -> str:
    """The parameter list of `name`'s declaration or definition in C text."""
    return re.search(rf"int32_t {name}\(([^)]*)\)", text).group(1)


@needs_nvcc
def test_build_for_cuda_writes_the_library_its_source_and_a_header_of_device_pointers(model, tmp_path, capsys):
    out = tmp_path / "build"
    assert main(["build", f"{model}:step", "--target", "cuda", "-o", str(out)]) == 0
    assert capsys.readouterr().out.split() == [str(out / n) for n in ("libstep.so", "step.cu", "step.h", "README")]
    header, source = (out / "step.h").read_text(), (out / "step.cu").read_text()
    assert "Every pointer is a DEVICE pointer" in header and "1000 + a cudaError_t" in header
    params = "const float *x, const float *w, float *out0, float *out1"
    assert _prototype(header, "step") == _prototype(source, "step") == params
    assert 'extern "C" int32_t step(' in source and "__global__ void kiln_step_k0(" in source
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(out / "libstep.so")], capture_output=True, text=True)
    assert re.search(r" T step$", symbols.stdout, re.M) and re.search(r" R step_kiln_signature$", symbols.stdout, re.M)
    if CC is not None:  # a C program compiles against the header and links against the library
        program = tmp_path / "main.c"
        program.write_text('#include "step.h"\nint main(void) { return step(0, 0, 0, 0) == 0 ? 0 : 1; }\n')
        link = [CC, str(program), f"-I{out}", f"-L{out}", "-lstep", "-Wl,--unresolved-symbols=ignore-in-shared-libs"]
        result = subprocess.run(link + ["-o", str(tmp_path / "main")], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    with pytest.raises(kiln.LoadError, match="built with --target cuda: its step takes device pointers"):
        kiln.load(str(out / "libstep.so"))


def test_build_for_cuda_without_nvcc_is_a_clear_error(model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it: no nvcc
    assert main(["build", f"{model}:step", "--target", "cuda", "-o", str(tmp_path / "out")]) == 1
    assert "kiln build --target cuda needs nvcc, the CUDA compiler, and it is not on PATH" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", ["cpu", "cuda-emulate"])
def test_build_into_a_path_that_is_a_file_is_one_error_line(model, tmp_path, capsys, target):
    (tmp_path / "afile").write_text("")
    assert main(["build", f"{model}:step", "--target", target, "-o", str(tmp_path / "afile")]) == 1
    assert "is a file, not a directory to write the library into" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_a_failed_cuda_build_leaves_no_output_folder(model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KILN_CUDA_ARCH", "sm_35")  # the form nvcc takes; CUDA 12 and later cannot build it
    assert main(["build", f"{model}:step", "--target", "cuda", "-o", str(tmp_path / "out")]) == 1
    assert "KILN_CUDA_ARCH='sm_35'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@needs_cxx
def test_an_emulated_build_loads_and_gives_numpys_numbers(model, tmp_path, capsys):
    out = tmp_path / "build"
    assert main(["build", f"{model}:step", "--target", "cuda-emulate", "-o", str(out)]) == 0
    assert "every pointer is a HOST pointer" in (out / "step.h").read_text()
    step = kiln.load(str(out / "libstep.so"))
    x = np.random.default_rng(3).standard_normal((7, 13)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -0.0]
    x[1, :2] = [-np.inf, 0.0]
    w = np.linspace(-2, 2, 13, dtype=np.float32)
    sums, relu = step(x, w)
    np.testing.assert_allclose(sums, np.tanh(x * w).sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(relu, np.maximum(x, 0))  # NaN stays NaN, as numpy's maximum keeps it
    assert np.signbit(relu[0, 2]) == np.signbit(np.maximum(np.float32(-0.0), np.float32(0)))


@needs_cxx
def test_an_emulated_build_exports_the_gradient(model, tmp_path):
    out = tmp_path / "build"
    assert main(["build", f"{model}:loss", "--target", "cuda-emulate", "--grad", "1", "-o", str(out)]) == 0
    grad = kiln.load(str(out / "libloss.so"), "loss_grad")
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal(3)
    value, gradient = grad(x, w)
    t = np.tanh(x @ w)
    np.testing.assert_allclose(value, (t**2).sum(), rtol=1e-12)
    np.testing.assert_allclose(gradient, (2 * t * (1 - t**2)) @ x, rtol=1e-12)


def test_build_retargets_a_function_and_refuses_the_interpreter(model, tmp_path, capsys):
    assert main(["build", f"{model}:on_gpu", "--target", "cpu", "-o", str(tmp_path / "cpu")]) == 0
    exp = kiln.load(str(tmp_path / "cpu" / "libon_gpu.so"))  # a CPU library: callable here
    np.testing.assert_allclose(exp(np.array([0, 1, -np.inf, np.nan], np.float32)), np.exp([0, 1, -np.inf, np.nan]))
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["build", f"{model}:step", "--target", "interpret", "-o", str(tmp_path)])


# ----- the GPU's fingerprint and the CUDA-event timer, on a fake libcudart -----


class FakeCudart:
    """The libcudart calls kiln makes, answered from Python: a GPU called `name` of compute
    capability major.minor with `sms` multiprocessors, and events whose elapsed time is
    `elapsed_ms`. `calls` lists what was called, in order."""

    def __init__(self, name=b"NVIDIA H200", major=9, minor=0, sms=132, elapsed_ms=2.5, devices=1):
        self.name, self.major, self.minor, self.sms = name, major, minor, sms
        self.elapsed_ms, self.devices, self.calls = elapsed_ms, devices, []
        self.elapsed_error = 0
        self.memory = {}

    def cudaGetDeviceCount(self, count):
        count._obj.value = self.devices
        return 0

    def cudaGetDevice(self, device):
        device._obj.value = 0
        return 0

    def cudaGetDeviceProperties(self, properties, device):
        ctypes.memmove(properties, self.name + b"\0", len(self.name) + 1)
        return 0

    def cudaDeviceGetAttribute(self, value, attribute, device):
        value._obj.value = {cuda.ATTRIBUTE_MAJOR: self.major, cuda.ATTRIBUTE_MINOR: self.minor}.get(
            attribute, self.sms if attribute == cuda.ATTRIBUTE_MULTIPROCESSORS else -1
        )
        return 0

    def cudaGetErrorString(self, error):
        return b"planted error"

    def cudaMalloc(self, pointer, size):  # "device" memory in host buffers, so a test can look into it
        buffer = ctypes.create_string_buffer(max(1, size))
        self.memory[ctypes.addressof(buffer)] = buffer
        pointer._obj.value = ctypes.addressof(buffer)
        return 0

    def cudaMemcpy(self, destination, source, size, kind):
        ctypes.memmove(destination, source, size)
        return 0

    def cudaFree(self, pointer):
        self.memory.pop(pointer, None)
        return 0

    def cudaEventCreate(self, event):
        event._obj.value = 100 + len(self.calls)
        self.calls.append("create")
        return 0

    def cudaEventRecord(self, event, stream):
        self.calls.append(f"record {event.value}")
        return 0

    def cudaEventSynchronize(self, event):
        self.calls.append(f"synchronize {event.value}")
        return 0

    def cudaEventElapsedTime(self, milliseconds, start, stop):
        milliseconds._obj.value = self.elapsed_ms
        self.calls.append(f"elapsed {start.value} {stop.value}")
        return self.elapsed_error

    def cudaEventDestroy(self, event):
        self.calls.append(f"destroy {event.value}")
        return 0


@pytest.fixture
def fake_gpu(monkeypatch):
    def install(**kwargs):
        fake = FakeCudart(**kwargs)
        monkeypatch.setattr(cuda, "_cudart", lambda: fake)
        return fake

    return install


def test_the_gpu_fingerprint_is_its_name_compute_capability_and_multiprocessors(fake_gpu):
    fake_gpu()
    assert cuda.device_properties() == {"name": "NVIDIA H200", "major": 9, "minor": 0, "multiprocessors": 132}
    h200 = gpu_fingerprint()
    assert target_fingerprint("cuda") == h200 == gpu_fingerprint()  # the same GPU, the same key
    assert h200 not in (host_fingerprint(), target_fingerprint("cuda-emulate"))
    fake_gpu(sms=16)  # a MIG slice of the same GPU
    assert gpu_fingerprint() != h200
    fake_gpu(major=8, minor=6, name=b"NVIDIA GeForce RTX 3090", sms=82)
    assert gpu_fingerprint() != h200
    assert GpuTuning("cuda").description == "NVIDIA GeForce RTX 3090, compute capability 8.6, 82 SMs"


def test_no_gpu_means_no_fingerprint_and_a_clear_tuning_error(fake_gpu):
    fake_gpu(devices=0)
    with pytest.raises(cuda.CudaUnavailable, match="needs an NVIDIA GPU, and none is available"):
        gpu_fingerprint()
    if NVCC is not None:
        with pytest.raises(
            kiln.KilnError, match="kiln tune --target cuda times schedules on a GPU: .*none is available"
        ):
            GpuTuning("cuda")


def test_the_event_timer_records_around_the_call_and_reads_the_elapsed_time(fake_gpu):
    fake = fake_gpu(elapsed_ms=2.5)
    timer = cuda.EventTimer()
    start, stop = 100, 101  # the handles the fake's two cudaEventCreate calls gave
    seconds = timer(lambda: fake.calls.append("the call"))
    assert seconds == pytest.approx(2.5e-3)
    assert fake.calls == [
        "create",
        "create",
        f"record {start}",
        "the call",
        f"record {stop}",
        f"synchronize {stop}",
        f"elapsed {start} {stop}",
    ]
    fake.elapsed_error = 600
    with pytest.raises(RuntimeError, match=r"cudaEventElapsedTime failed: CUDA error 600 \(planted error\)"):
        timer(lambda: None)
    del timer
    assert fake.calls[-2:] == [f"destroy {start}", f"destroy {stop}"]


def test_the_gpu_bench_times_a_batch_with_one_pair_of_events():
    module = _kernel(lambda x, w: np.tanh(x * w).sum(axis=1), kiln.f32[6, 37], kiln.f32[37])
    seen = []

    def timer(fn):
        fn()
        return 0.004

    bench = GpuKernelBench(module, emulate=True)
    bench.emulate, bench.timer = False, timer  # the GPU path's timing, on host arrays
    assert bench.time_calls(lambda arrays: seen.append(len(arrays)), [1, 2], calls=3) == 0.004
    assert seen == [2, 2, 2]


def test_the_gpu_bench_runs_on_device_arrays_and_times_with_events(fake_gpu):
    fake = fake_gpu(elapsed_ms=0.75)
    module = _kernel(lambda x: np.tanh(x), kiln.f32[5, 3])
    bench = GpuKernelBench(module, emulate=False)  # its EventTimer and DeviceArrays on the fake runtime
    assert bench.written == [1]
    calls = []

    def run(arrays):  # a stand-in for the built kernel: out = 2 * x, through the device pointers
        calls.append(arrays)
        x, out = (np.ctypeslib.as_array((ctypes.c_float * 15).from_address(a.pointer)) for a in arrays)
        out[:] = 2 * x

    (doubled,) = bench.outputs(run)
    assert isinstance(calls[0][0], cuda.DeviceArray) and calls[0][0].pointer in fake.memory
    np.testing.assert_array_equal(doubled, 2 * bench.initial[0])
    assert bench.time_calls(run, bench.arrays(), calls=4) == pytest.approx(0.75e-3)
    assert bench.measure(run).seconds == pytest.approx(0.75e-3)
    assert fake.calls.count("create") == 2  # one pair of events for every sample


# ----- the GPU search space -----


def _kernel(fn, *specs, kernel="k0"):
    function = kiln.compile(fn, target="cuda-emulate").lower(*specs).module("affine").body.ops[-1]
    return extract(function, kernel)


@needs_cxx
@pytest.mark.parametrize(
    "fn, shapes",
    [
        (lambda a, b: a @ b, [(13, 11), (11, 17)]),
        (lambda a, b: a @ b, [(1, 1), (1, 1)]),
        (lambda x, w: np.tanh(x * w).sum(axis=1), [(37, 5), (5,)]),
        (lambda x: np.exp(x) * 2, [(3, 5, 7)]),
    ],
    ids=["matmul-primes", "matmul-1x1", "row-sums", "elementwise-3d"],
)
def test_every_gpu_candidate_gives_numpys_numbers(fn, shapes):
    specs = [kiln.f64[shape] for shape in shapes]
    function = kiln.compile(fn, target="cuda-emulate").lower(*specs).module("affine").body.ops[-1]
    assert kernel_names(function) == ["k0"]  # so the kernel's steps are the function's
    space = GpuSearchSpace.of(extract(function, "k0"))
    rng = random.Random(5)
    arrays = [np.random.default_rng(6).standard_normal(shape) for shape in shapes]
    steps_seen = set()
    for _ in range(4):
        steps = space.steps(space.random(rng))
        steps_seen.add(str(steps))
        assert all(step[0] in ("split", "reorder", "tile", "unroll", "bind") for step in steps)
        compiled = kiln.compile(fn, target="cuda-emulate", schedule=kiln.Schedule(steps), tuning_db=False)
        np.testing.assert_allclose(compiled(*arrays), fn(*arrays), rtol=1e-12, atol=1e-12, err_msg=str(steps))
    assert len(steps_seen) > 1


def test_a_whole_array_reduction_has_nothing_to_search():
    assert GpuSearchSpace.of(_kernel(lambda x: x.sum(), kiln.f32[100])) is None


def test_configurations_that_differ_only_in_unused_parameters_are_one():
    space = GpuSearchSpace.of(_kernel(lambda x: np.exp(x), kiln.f32[9]))
    config = {"x": "k0.i", "tx": 64, "y": None, "ty": 8, "blocks_outside": False, "z": True, "unroll": 1}
    assert space.canonical(config) == {**config, "ty": 1, "blocks_outside": True, "z": False}
    assert space.steps(config) == [
        ["split", "k0.i", 64],
        ["bind", "k0.i.o", "blockIdx.x"],
        ["bind", "k0.i.i", "threadIdx.x"],
    ]


def test_more_than_1024_threads_a_block_is_not_in_the_space():
    space = GpuSearchSpace.of(_kernel(lambda x: np.exp(x), kiln.f32[40, 40]))
    config = {"x": "k0.j", "tx": 1024, "y": "k0.i", "ty": 2, "blocks_outside": True, "z": False, "unroll": 1}
    assert not space.legal(config) and space.legal({**config, "tx": 512})


# ----- kiln tune --target cuda-emulate, end to end -----


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FastCandidates(GpuTuning):
    """cuda-emulate tuning on a fake clock where any schedule but the default takes half the time."""

    def bench(self, module, seed=0):
        clock = FakeClock()
        bench = GpuKernelBench(module, True, seed, clock=clock)
        real_build = bench.build

        def build(steps):
            run, keep = real_build(steps)

            def timed(arrays):
                run(arrays)
                clock.now += 1e-3 if steps is None else 0.5e-3

            return timed, keep

        bench.build = build
        return bench


TUNED = """
import numpy as np
import kiln

def rows(x: kiln.f32[9, 31], w: kiln.f32[31]):
    return np.tanh(x * w).sum(axis=1) + x.sum()
"""


@needs_cxx
def test_a_record_tuned_in_emulation_is_keyed_as_the_emulation_and_applied_by_compile(tmp_path):
    source = tmp_path / "rows.py"
    source.write_text(TUNED)
    sys.path.insert(0, str(tmp_path))
    try:
        import rows as module
    finally:
        sys.path.pop(0)
    path = str(tmp_path / "tuning.yaml")
    out = io.StringIO()
    results = tuner.tune_function(
        kiln.compile(module.rows, target="cuda-emulate"),
        (kiln.f32[9, 31], kiln.f32[31]),
        TuningDB(path),
        trials=3,
        out=out,
        tuning=FastCandidates("cuda-emulate"),
    )
    text = out.getvalue()
    assert text.startswith("tuning for the CUDA emulation on this CPU")
    assert "nothing to search: no loop of this kernel can be mapped differently" in text  # x.sum()
    tuned = [kernel for kernel, result in results if result.steps is not None]
    assert tuned and all(result.speedup == pytest.approx(2.0) for _, result in results)
    records = yaml.safe_load(open(path))
    assert {r["host"] for r in records} == {target_fingerprint("cuda-emulate")}
    assert all(r["target"] == "cuda-emulate" and any(s[0] == "bind" for s in r["steps"]) for r in records)

    x = np.random.default_rng(9).standard_normal((9, 31)).astype(np.float32)
    x[2, 3] = -0.0
    w = np.linspace(-1, 1, 31, dtype=np.float32)
    want = np.tanh(x * w).sum(axis=1) + x.sum()
    emulated = kiln.compile(module.rows, target="cuda-emulate", tuning_db=path)
    header = emulated.lower(x, w).text("scheduled").splitlines()[0]
    assert f"{tuned[0]} from the tuning database" in header and "bind(" in header
    np.testing.assert_allclose(emulated(x, w), want, rtol=1e-5, atol=1e-5)
    # Keyed as the emulation: neither the CPU nor a GPU (none here, so no key at all) takes it.
    cpu = kiln.compile(module.rows, tuning_db=path).lower(x, w).text("scheduled")
    assert "tuning database" not in cpu.splitlines()[0]
    if not _has_gpu():
        gpu = kiln.compile(module.rows, target="cuda", tuning_db=path).lower(x, w).text("scheduled")
        assert gpu.splitlines()[0] == "// schedule (default): (none)"


@needs_cxx
def test_tune_for_cuda_emulate_through_the_command_line(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(
        textwrap.dedent("""
        import numpy as np
        import kiln

        def step(x: kiln.f32[5, 11], w: kiln.f32[11, 3]):
            return np.tanh(x @ w)
    """)
    )
    db = tmp_path / "tuning.yaml"
    run = [sys.executable, "-m", "kiln", "tune"]
    result = subprocess.run(
        run + [f"{source}:step", "--target", "cuda-emulate", "--trials", "3", "--db", str(db), "--time-budget", "60"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("tuning for the CUDA emulation on this CPU (wall-clock times, not a GPU's)\n")
    assert re.search(r"step k0 \(\w+\)\n  default [\d.]+ ms, best [\d.]+ ms \([\d.]+x\), \d+ trials", result.stderr)
    report = subprocess.run(
        run + ["--report", "--target", "cuda-emulate", "--db", str(db)], capture_output=True, text=True
    )
    assert report.returncode == 0
    assert ("no records for the CUDA emulation" in report.stdout) == (not db.exists())
    verify = subprocess.run(
        run + ["--verify", "--target", "cuda-emulate", "--db", str(db)], capture_output=True, text=True
    )
    assert "stale record(s)" in verify.stdout


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present")
def test_tune_for_cuda_without_a_gpu_says_none_is_available(model, capsys):
    assert main(["tune", f"{model}:step", "--target", "cuda", "--trials", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: kiln tune --target cuda times schedules on a GPU: ")
    assert "none is available" in err or "nvcc" in err or "CUDA runtime" in err


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_long_gpu_search_shows_progress_on_a_terminal(tmp_path, monkeypatch):
    def fake_tune_kernel(module, trials, seed, strategy, budget, progress, space=None, bench=None, **_):
        assert isinstance(space, GpuSearchSpace) and isinstance(bench, GpuKernelBench)
        for trial in range(1, trials + 1):
            progress(trial, trials, 2e-3, 3e-3, 0.1 * trial, budget)
        return tuner.TuneResult(None, 3e-3, 3e-3, trials, 0)

    monkeypatch.setattr(tuner, "tune_kernel", fake_tune_kernel)
    out = Terminal()
    db = TuningDB(str(tmp_path / "t.yaml"))
    compiled = kiln.compile(lambda x: np.tanh(x) * 2, target="cuda-emulate")
    tuner.tune_function(compiled, (kiln.f32[8, 8],), db, trials=4, out=out, tuning=GpuTuning("cuda-emulate"))
    text = out.getvalue()
    assert "4/4" in text and "best 2.000 ms (1.50x the default schedule)" in text
    assert gpu_tuner.GpuTuning("cuda-emulate").notes() == {"target": "cuda-emulate", "device": "emulation"}
