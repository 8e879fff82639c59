"""The CUDA backend without a GPU: the CUDA C of every op-table case and example
compiles with nvcc, and its kernels, built as C++ with the grid and block loops
made explicit (host emulation), give numpy's numbers."""

import concurrent.futures
import os
import shutil
import subprocess

import cffi
import numpy as np
import pytest
from op_table import CASES
from targets import NEEDS_GPU
from test_ops import assert_same

import kiln
from kiln.codegen.cuda_codegen import emit_cuda, entry_name
from kiln.codegen.cuda_prelude import PRELUDE
from kiln.frontend import pytree
from kiln.tools.cli import load_function

ROOT = __file__.rsplit("/tests/", 1)[0]
NVCC = shutil.which("nvcc")
CXX = shutil.which("g++")


def combined(functions):
    """One CUDA C file for many functions, each under its own prefix."""
    parts, entries = [PRELUDE], []
    for k, (compiled, args) in enumerate(functions):
        lowered = compiled.lower(*args)
        parts.append(emit_cuda(lowered.module("affine"), prefix=f"c{k}_", prelude=False))
        function = lowered.module("tensor").body.ops[0]
        entries.append((entry_name(function.sym_name, f"c{k}_"), function))
    return "\n".join(parts), entries


@pytest.fixture(scope="module")
def op_table_source(tmp_path_factory):
    functions = [(kiln.compile(case.fn, target="cuda-emulate"), case.args) for case in CASES]
    source, entries = combined(functions)
    path = tmp_path_factory.mktemp("cuda") / "op_table.cu"
    path.write_text(source)
    return path, entries


@pytest.fixture(scope="module")
def op_table_library(op_table_source, tmp_path_factory):
    """The op table's CUDA C built for the host emulation, with the flags kiln builds with."""
    from kiln.codegen import nvcc
    from kiln.runtime.cache import DiskCache

    path, entries = op_table_source
    library = nvcc.build(path.read_text(), emulate=True, cache=DiskCache(str(tmp_path_factory.mktemp("cache"))))
    ffi = cffi.FFI()
    for name, function in entries:
        count = len(function.arguments) + len(function.function_type.results)
        ffi.cdef(f"int {name}({', '.join(['void *'] * count)});")
    return ffi, ffi.dlopen(library), entries


@pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) for the host emulation")
@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_every_op_table_case_gives_numpys_numbers_in_host_emulation(op_table_library, order, monkeypatch):
    """In both orders of the emulation's threads (and blocks): a kernel whose threads
    cooperate must not depend on which runs first between barriers."""
    monkeypatch.setenv("KILN_EMULATE_ORDER", order)
    ffi, lib, entries = op_table_library
    for case, (name, function) in zip(CASES, entries):
        inputs = [
            np.ascontiguousarray(np.asarray(a, dtype=arg.type.dtype)) for a, arg in zip(case.args, function.arguments)
        ]
        outputs = [np.empty(t.shape, t.dtype) for t in function.function_type.results]
        assert getattr(lib, name)(*[ffi.from_buffer(a) for a in inputs + outputs]) == 0, case.name
        want = case.fn(*case.args)
        assert_same(outputs[0][()] if outputs[0].ndim == 0 else outputs[0], want)


EXAMPLES = (
    "mlp.py:predict",
    "layernorm.py:layernorm",
    "attention.py:attention",
    "matmul.py:matmul",
    "train_step.py:train_step",
    "c/mlp_model.py:mlp",
)


def random_inputs(specs, rng):
    """Arrays for a function's (possibly nested) input specs."""
    inputs = []
    for spec in specs:
        leaves, treedef = pytree.flatten(spec)
        arrays = [(0.5 * rng.standard_normal(leaf.shape)).astype(leaf.dtype) for leaf in leaves]
        inputs.append(pytree.unflatten(treedef, arrays))
    return inputs


@pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) for the host emulation")
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_gives_the_cpu_backends_numbers_in_host_emulation(example):
    compiled, specs = load_function(f"{ROOT}/examples/{example}")
    inputs = random_inputs(specs, np.random.default_rng(4))
    want = compiled(*inputs)  # the CPU backend, itself checked against numpy in test_examples
    got = kiln.compile(compiled.fn, target="cuda-emulate")(*inputs)
    want_leaves, got_leaves = pytree.flatten(want)[0], pytree.flatten(got)[0]
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)")
def test_nvcc_accepts_the_cuda_c_of_every_op_table_case_and_example(op_table_source, tmp_path):
    path, _ = op_table_source
    examples = []
    for target in EXAMPLES:
        compiled, specs = load_function(f"{ROOT}/examples/{target}")
        examples.append((kiln.compile(compiled.fn, target="cuda-emulate"), specs))
    for spec in (kiln.f32[9], kiln.f64[9], kiln.i64[9], kiln.i32[9], kiln.u8[9], kiln.bool_[9]):  # every tree
        for reduce in ("sum", "max", "min"):
            examples.append((kiln.compile(lambda x, r=reduce: getattr(x, r)(), target="cuda-emulate"), [spec]))
    source, _ = combined(examples)
    examples_path = tmp_path / "examples.cu"
    examples_path.write_text(source)
    for source_path in (path, examples_path):
        result = subprocess.run(
            [NVCC, "-c", "-diag-suppress", "177", str(source_path), "-o", os.devnull], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)")
def test_nvcc_builds_a_loadable_library_for_the_gpu(tmp_path):
    from kiln.codegen import nvcc
    from kiln.runtime import cuda
    from kiln.runtime.cache import DiskCache

    lowered = kiln.compile(lambda x: x - x.mean(), target="cuda-emulate").lower(kiln.f32[100])
    path = nvcc.build(lowered.text("cuda"), emulate=False, cache=DiskCache(str(tmp_path)))
    function = cuda.CudaFunction(path, entry_name("<lambda>"), 2, emulate=False)  # loads; needs no GPU
    assert callable(function.entry)


def test_the_cuda_stage_is_readable_cuda_c():
    lowered = kiln.compile(lambda x, b: np.tanh(x + b), target="cuda-emulate").lower(kiln.f32[64, 33], kiln.f32[33])
    assert lowered.stages == ["tensor", "optimized", "affine", "scheduled", "cuda"]
    text = lowered.text("cuda")
    assert "__global__ void kiln__lambda__k0(float *v0, float *v1, float *v2) {" in text
    assert 'extern "C" int kiln__lambda_(float *v0, float *v1, float *v2) {' in text
    assert "KILN_LAUNCH(kiln__lambda__k0, 9, 256, v0, v1, v2);" in text
    assert "if ((error = cudaGetLastError()) != cudaSuccess) goto done;" in text


def test_compiled_functions_run_through_the_emulated_backend():
    f = kiln.compile(lambda a, b: kiln.softmax(a @ b), target="cuda-emulate")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 3))
    np.testing.assert_allclose(f(a, b), kiln.softmax(a @ b), rtol=1e-12)
    power = kiln.compile(lambda x, y: x**y, target="cuda-emulate")
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        power(np.array([2, 3]), np.array([1, -1]))
    np.testing.assert_array_equal(power(np.array([2, 3]), np.array([1, 2])), [2, 9])  # the status was cleared


def test_scalars_shared_between_top_level_loops_stay_in_one_kernel():
    # x.mean() and x.std() are top-level scalars that later loops read: they must not be split
    # into kernels that cannot see each other's variables.
    standardize = kiln.compile(lambda x: (x - x.mean()) / x.std() + x.sum(), target="cuda-emulate")
    x = np.random.default_rng(3).standard_normal(13)
    np.testing.assert_allclose(standardize(x), (x - x.mean()) / x.std() + x.sum(), rtol=1e-12)


@NEEDS_GPU
def test_every_op_table_case_gives_numpys_numbers_on_the_gpu():
    from kiln.codegen import nvcc

    compiled = [kiln.compile(case.fn, target="cuda") for case in CASES]
    sources = [f.lower(*case.args).text("cuda") for f, case in zip(compiled, CASES)]

    def build(source):
        try:
            nvcc.build(source, emulate=False)
        except Exception as exc:
            return f"nvcc: {str(exc).strip()[-300:]}"

    # One nvcc run per case takes about a second: built side by side into the disk cache
    # first, the calls below find their libraries there instead of taking minutes.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        refused = list(pool.map(build, sources))
    failures = []  # every case that differs, not only the first: a GPU run is rare
    for f, case, why in zip(compiled, CASES, refused):
        try:
            assert why is None, why
            assert_same(f(*case.args), case.fn(*case.args))
        except Exception as exc:
            failures.append(f"{case.name}: {type(exc).__name__}: {str(exc).strip()[:300]}")
    assert not failures, f"{len(failures)} of {len(CASES)} cases differ on the GPU:\n" + "\n".join(failures)


@NEEDS_GPU
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_gives_the_cpu_backends_numbers_on_the_gpu(example):
    compiled, specs = load_function(f"{ROOT}/examples/{example}")
    inputs = random_inputs(specs, np.random.default_rng(4))
    want, got = compiled(*inputs), kiln.compile(compiled.fn, target="cuda")(*inputs)
    for g, w in zip(pytree.flatten(got)[0], pytree.flatten(want)[0]):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)
    device_inputs = [
        pytree.unflatten(pytree.flatten(i)[1], [kiln.to_device(a) for a in pytree.flatten(i)[0]]) for i in inputs
    ]
    on_device = kiln.compile(compiled.fn, target="cuda")(*device_inputs)
    for g, w in zip(pytree.flatten(on_device)[0], pytree.flatten(want)[0]):
        assert isinstance(g, kiln.DeviceArray)
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-4, atol=2e-5)


def test_target_cuda_says_what_is_missing():
    from kiln.runtime.cuda import CudaUnavailable, check_gpu

    try:
        check_gpu()
    except CudaUnavailable as exc:
        compiled = kiln.compile(lambda x: x, target="cuda")  # compiling and lowering need no GPU
        with pytest.raises(kiln.KilnError, match="target='cuda' needs") as info:
            compiled(np.ones(3, np.float32))
        assert str(exc) in str(info.value)
    else:
        pytest.skip("a GPU is present: the error cannot be shown here")


def test_device_arrays_stay_on_the_device_between_calls():
    step = kiln.compile(lambda w, x: w - 0.1 * (x @ w), target="cuda-emulate")
    rng = np.random.default_rng(5)
    w, x = rng.standard_normal((7, 7)), rng.standard_normal((7, 7))
    w_device, x_device = kiln.to_device(w, target="cuda-emulate"), kiln.to_device(x, target="cuda-emulate")
    for _ in range(3):
        w_device = step(w_device, x_device)
        w = w - 0.1 * (x @ w)
    assert isinstance(w_device, kiln.DeviceArray) and w_device.shape == (7, 7)
    np.testing.assert_allclose(w_device.numpy(), w, rtol=1e-12)
    np.testing.assert_allclose(step(w, x_device).numpy(), w - 0.1 * (x @ w), rtol=1e-12)  # host and device mixed
    with pytest.raises(kiln.DTypeError, match="argument 'x' has dtype complex64"):
        kiln.compile(lambda x: x + 1, target="cuda-emulate")(kiln.to_device(np.ones(3, np.complex64), "cuda-emulate"))
    with pytest.raises(AttributeError, match="host memory"):
        x_device.__cuda_array_interface__  # an emulated array must not pass for GPU memory


@pytest.mark.parametrize("shape", [(1,), (13,), (7, 1, 3), (300_007,)])  # the last: threads take several elements
@pytest.mark.parametrize("reduce", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_whole_tensor_reductions_spread_over_the_grid(shape, reduce, dtype):
    f = kiln.compile(lambda x: getattr(x, reduce)(), target="cuda-emulate")
    x = (np.random.default_rng(6).standard_normal(shape) * 10).astype(dtype)
    text = f.lower(x).text("cuda")[len(PRELUDE) :]
    assert text.count("kiln_block_allreduce<") == 2 and "atomic" not in text  # blocks' partials, then theirs
    got, want = f(x), getattr(x, reduce)()
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    if np.dtype(dtype).kind == "f" and reduce != "sum":
        x.reshape(-1)[len(x.reshape(-1)) // 2] = np.nan
        assert np.isnan(f(x))  # NaN propagates through the partial results


def test_cuda_c_prints_without_a_gpu():
    # Lowering stops short of nvcc and the device: the CUDA C of a target="cuda" function
    # can be read on any machine, as for cuda-emulate.
    fn = lambda x, y: np.tanh(x) * y + 1  # noqa: E731
    lowered = kiln.compile(fn, target="cuda").lower(kiln.f32[37], kiln.f32[37])
    source = lowered.text("cuda")
    assert "__global__" in source
    assert source == kiln.compile(fn, target="cuda-emulate").lower(kiln.f32[37], kiln.f32[37]).text("cuda")
