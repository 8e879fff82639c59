"""kiln build: a shared library and a C header that need no Python to call."""

import gzip
import os
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from kiln.tools.build import build_library
from kiln.tools.cli import load_function

ROOT = __file__.rsplit("/tests/", 1)[0]
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler to link libraries with (install gcc)")
rng = np.random.default_rng(29)


def test_a_c_program_classifies_digits_with_the_trained_weights_built_in(tmp_path):
    """examples/c/main.c as its comment runs it: train, build with --weights, compile, classify."""
    weights = tmp_path / "digits_mlp.safetensors"
    train = [sys.executable, f"{ROOT}/examples/train_mlp.py", "--epochs", "3", "--save", str(weights)]
    subprocess.run(train, capture_output=True, check=True)
    out = tmp_path / "build"
    model = f"{ROOT}/examples/c/digits_model.py:classify"
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "build", model, "--weights", str(weights), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert {"libclassify.so", "classify.h", "README"} <= set(os.listdir(out))
    assert "int32_t classify(const float *image, int64_t *out0, float *out1);" in (out / "classify.h").read_text()
    program = out / "main"
    subprocess.run(
        [CC, f"{ROOT}/examples/c/main.c", f"-I{out}", f"-L{out}", "-lclassify", "-Wl,-rpath,$ORIGIN"]
        + ["-o", str(program)],
        check=True,
    )
    with gzip.open(f"{ROOT}/examples/data/digits.csv.gz", "rt") as f:
        table = f.read()
    # no PYTHONPATH, nothing of kiln: the library carries the weights
    run = subprocess.run([str(program)], input=table, capture_output=True, text=True, env={}, check=True)
    *lines, summary = run.stdout.splitlines()
    printed = [re.fullmatch(r"digit (\d) \(p = ([\d.]+)\), label (\d)", line).groups() for line in lines]
    assert len(printed) == 1797 and re.fullmatch(r"accuracy 0\.9\d+ \(\d+ of 1797\)", summary), summary
    sys.path.insert(0, f"{ROOT}/examples/c")
    import digits_model

    pixels = np.loadtxt(table.splitlines(), delimiter=",", dtype=np.float32)[:, :64]
    classify = kiln.compile(digits_model.classify)
    params = kiln.load_weights(weights)
    for (digit, probability, _), image in zip(printed[:50], pixels):
        want_digit, want_probabilities = classify(params, image[None, :])
        assert int(digit) == want_digit[0]
        assert abs(float(probability) - want_probabilities[0, want_digit[0]]) < 1e-4


def make_library(tmp_path, fn, specs, name, grad=None):
    compiled = kiln.compile(fn)
    build_library(compiled, specs, str(tmp_path), name, grad)
    return compiled, kiln.load(str(tmp_path / f"lib{name}.so"))


def test_the_library_computes_what_kiln_compile_does(tmp_path):
    def mixed(x, counts, mask):
        return (np.where(mask, x * 2, x).sum(axis=0), counts.max() + counts, x.T @ x)

    specs = (kiln.f64[13, 7], kiln.i32[5], kiln.bool_[13, 7])
    compiled, library = make_library(tmp_path, mixed, specs, "mixed")
    args = (rng.standard_normal((13, 7)), rng.integers(-9, 9, 5).astype(np.int32), rng.random((13, 7)) < 0.5)
    for got, want in zip(library(*args), compiled(*args)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    header = (tmp_path / "mixed.h").read_text()
    assert (
        "int32_t mixed(const double *x, const int32_t *counts, const uint8_t *mask, double *out0, "
        "int32_t *out1, double *out2);" in header
    )
    assert "#define MIXED_X_DIM0 13" in header and "#define MIXED_OUT2_SIZE 49" in header


def test_two_threads_may_call_it_at_once(tmp_path):
    def work(x, w):
        return np.tanh(x @ w).sum(axis=1)

    _, library = make_library(tmp_path, work, (kiln.f32[256, 256], kiln.f32[256, 256]), "work")
    inputs = [
        (rng.standard_normal((256, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32))
        for _ in range(4)
    ]
    expected = [library(*args) for args in inputs]
    results, errors = {}, []

    def caller(k):
        try:
            for _ in range(20):
                got = library(*inputs[k])
                if not np.array_equal(got, expected[k]):
                    errors.append(k)
            results[k] = True
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors and len(results) == 4


def test_a_gradient_entry_point(tmp_path):
    def loss(x, w):
        return np.mean((x @ w) ** 2)

    specs = (kiln.f32[8, 5], kiln.f32[5, 3])
    build_library(kiln.compile(loss), specs, str(tmp_path), "loss", grad_argnums=1)
    value_and_grad = kiln.load(str(tmp_path / "libloss.so"), name="loss_grad")
    x, w = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    value, grad = value_and_grad(x, w)
    want_value, want_grad = kiln.value_and_grad(loss, argnums=1)(x, w)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
    assert (
        "int32_t loss_grad(const float *x, const float *w, float *out0, float *out1);"
        in (tmp_path / "loss.h").read_text()
    )


def test_wrong_calls_are_refused_before_native_code_runs(tmp_path):
    _, library = make_library(tmp_path, lambda x, y: x + y, (kiln.f32[3], kiln.f32[3]), "add")
    with pytest.raises(TypeError, match=r"add: input x must be float32\[3\], got float64\[3\]"):
        library(np.zeros(3), np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"input y must be float32\[3\], got float32\[4\]"):
        library(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(TypeError, match=r"add takes 2 arrays \(x, y\), got 1"):
        library(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="has no input 'z'"):
        library(np.zeros(3, np.float32), z=np.zeros(3, np.float32))
    np.testing.assert_array_equal(library(np.ones(3, np.float32), y=np.ones(3, np.float32)), [2, 2, 2])
    with pytest.raises(kiln.LoadError, match="has no kiln function 'nothing'"):
        kiln.load(str(tmp_path / "libadd.so"), name="nothing")
    with pytest.raises(kiln.LoadError, match="no such library"):
        kiln.load(str(tmp_path / "libmissing.so"))


def test_build_uses_the_annotations_and_a_c_name(tmp_path):
    compiled, specs = load_function(f"{ROOT}/examples/mlp.py:predict")
    with pytest.raises(kiln.KilnError, match="must be a C identifier"):
        build_library(compiled, specs, str(tmp_path), "not-a-name")


def in_process_and_library_errors(tmp_path, fn, specs, name, *args):
    compiled, library = make_library(tmp_path, fn, specs, name)
    errors = []
    for call in (compiled, library):
        with pytest.raises(Exception) as caught:
            call(*args)
        errors.append(caught.value)
    return errors


def gather_rows(table, index):
    return table[index] * 2


def take_columns(table, index):
    return np.take(table, index, axis=1)


@pytest.mark.parametrize(
    "fn, index",
    [
        (gather_rows, np.array([0, 5], np.int64)),  # one past the end
        (gather_rows, np.array([-6, 1], np.int64)),  # one before the start, counted from the end
        (take_columns, np.array([2, 3], np.int32)),  # a prime axis size, int32 indices
        (take_columns, np.array([2**31 - 1], np.int32)),
    ],
    ids=["past_end", "before_start", "axis_1", "int32_max"],
)
def test_an_index_out_of_range_raises_the_same_error_through_kiln_load_as_in_process(tmp_path, fn, index):
    table = rng.standard_normal((5, 3)).astype(np.float32)
    specs = (kiln.f32[5, 3], kiln.TensorSpec(index.shape, index.dtype))
    in_process, loaded = in_process_and_library_errors(tmp_path, fn, specs, fn.__name__, table, index)
    assert isinstance(in_process, IndexError) and type(loaded) is type(in_process)
    # In process the message also names numpy's first offending index (recomputed from the
    # arguments with the traced function); a loaded library has only the status: the rest is equal.
    assert re.search(r"index -?\d+ is out of bounds", str(in_process))
    assert str(loaded) == re.sub(r"index -?\d+ is", "index is", str(in_process))
    assert re.search(r"index is out of bounds for axis \d with size \d", str(loaded))
    assert f"test_build.py:{fn.__code__.co_firstlineno + 1}" in str(loaded)  # the user's line


def test_a_negative_integer_power_raises_the_same_error_through_kiln_load_as_in_process(tmp_path):
    def power(x, y):
        return x**y

    specs = (kiln.i32[3], kiln.i32[3])
    x, y = np.array([2, 3, 4], np.int32), np.array([1, -1, 2], np.int32)
    in_process, loaded = in_process_and_library_errors(tmp_path, power, specs, "power", x, y)
    assert type(loaded) is type(in_process) is ValueError and str(loaded) == str(in_process)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the CUDA host emulation")
def test_an_emulated_cuda_library_raises_the_in_process_index_error_through_kiln_load(tmp_path):
    from kiln.tools.build_cuda import build_cuda_library

    compiled = kiln.compile(gather_rows, target="cuda-emulate")
    build_cuda_library(compiled, (kiln.f32[5, 3], kiln.i64[2]), str(tmp_path), "gather_rows")
    library = kiln.load(str(tmp_path / "libgather_rows.so"))
    table, index = np.ones((5, 3), np.float32), np.array([0, 5])
    errors = []
    for call in (compiled, library):
        with pytest.raises(IndexError) as caught:
            call(table, index)
        errors.append(caught.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[1]) == re.sub(r"index -?\d+ is", "index is", str(errors[0]))
    assert "index is out of bounds for axis 0 with size 5" in str(errors[1])


def test_statuses_a_library_does_not_list_are_named_not_guessed():
    from kiln.library import library_status_error

    signature = {"entry": "f", "checks": [{"status": -1, "message": "index is out of bounds for axis 0 with size 3"}]}
    assert str(library_status_error(-1, signature)) == "index is out of bounds for axis 0 with size 3"
    assert "status -2, which its table of index checks does not list" in str(library_status_error(-2, signature))
    assert isinstance(library_status_error(1, signature), MemoryError)
    emulated = {"entry": "f", "target": "cuda-emulate"}
    assert "the CUDA kernels failed: CUDA error 9" in str(library_status_error(1009, emulated))


def test_a_python_int_whose_value_numpy_checks_is_refused_not_built_unchecked(tmp_path):
    # In process, 300 into uint8 raises (NEP 50); a C caller could not run that check.
    compiled = kiln.compile(lambda x, s: x + s)
    with pytest.raises(kiln.IntegerOverflowError):
        compiled(np.zeros(3, np.uint8), 300)
    with pytest.raises(kiln.KilnError, match="uint8.*array spec"):
        build_library(compiled, [kiln.u8[3], 5], str(tmp_path), "add_int")
    assert not os.path.exists(tmp_path / "libadd_int.so")


def test_a_python_int_no_check_depends_on_is_built_and_computes_numpys_result(tmp_path):
    # Mixed with float32, numpy converts the int to float32: no value check, so it builds.
    compiled, library = make_library(tmp_path, lambda x, s: x * s, [kiln.f32[3], 5], "scale")
    x = np.array([1.5, -0.0, np.inf], np.float32)
    got = library(x, 7)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * 7)
