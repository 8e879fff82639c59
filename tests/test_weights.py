"""SafeTensors weights: ``kiln.save_weights``/``kiln.load_weights`` round trips, and
``kiln build --weights`` building a file's tensors into a library a C program calls."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln.tools import weights as weights_module
from kiln.tools.cli import main
from kiln.tools.weights import bind_weights, flatten_weights, unflatten_weights

CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
rng = np.random.default_rng(17)


def test_a_nested_dict_round_trips_with_dotted_names(tmp_path):
    params = {
        "encoder": {"layer0": {"w": rng.standard_normal((3, 4)).astype(np.float32), "b": np.zeros(4, np.float32)}},
        "head": rng.standard_normal((4, 2)),
        "steps": np.array(7, np.int64),
    }
    path = tmp_path / "model.safetensors"
    kiln.save_weights(path, params)
    flat = kiln.load_weights(path)
    assert list(flat) == ["encoder.layer0.b", "encoder.layer0.w", "head", "steps"]
    nested = kiln.load_weights(str(path), nested=True)
    assert nested.keys() == params.keys() and nested["encoder"]["layer0"].keys() == {"w", "b"}
    for name, value in flatten_weights(params).items():
        assert flat[name].dtype == value.dtype and flat[name].shape == value.shape
        np.testing.assert_array_equal(flat[name], value)


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_]
)
def test_every_dtype_kiln_computes_in_round_trips(tmp_path, dtype):
    value = (rng.standard_normal((2, 3)) * 10).astype(dtype)
    path = tmp_path / "w.safetensors"
    kiln.save_weights(path, {"value": value})
    got = kiln.load_weights(path)["value"]
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)


def test_views_scalars_and_metadata(tmp_path):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "w.safetensors"
    kiln.save_weights(path, {"t": base.T, "s": 2.5, "every_other": base[:, ::2]}, metadata={"format": "np"})
    got = kiln.load_weights(path)
    np.testing.assert_array_equal(got["t"], base.T)
    np.testing.assert_array_equal(got["every_other"], base[:, ::2])
    assert got["s"].shape == () and got["s"] == 2.5


def test_a_pytorch_style_state_dict_reads_as_nested_dicts():
    flat = {"fc1.weight": 1, "fc1.bias": 2, "fc2.weight": 3}
    assert unflatten_weights(flat) == {"fc1": {"weight": 1, "bias": 2}, "fc2": {"weight": 3}}
    assert flatten_weights(unflatten_weights(flat)) == flat


@pytest.mark.parametrize(
    "params, message",
    [
        ({"a.b": np.zeros(1), "a": {"b": np.zeros(1)}}, "two weights are both named 'a.b'"),
        ({1: np.zeros(1)}, "weight names are non-empty strings"),
        ({"s": np.array(["text"])}, "weight 's' is <U4; SafeTensors files hold bool, integer and float arrays"),
        ([np.zeros(1)], "weights are a dict of arrays"),
    ],
)
def test_what_cannot_be_saved_is_named(tmp_path, params, message):
    with pytest.raises(kiln.KilnError, match=message.replace("(", r"\(").replace(".", r"\.")):
        kiln.save_weights(tmp_path / "w.safetensors", params)


def test_files_that_are_not_safetensors_are_refused(tmp_path):
    with pytest.raises(kiln.KilnError, match="no such weights file"):
        kiln.load_weights(tmp_path / "missing.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not json")
    with pytest.raises(kiln.KilnError, match="could not read .*bad.safetensors as a SafeTensors file"):
        kiln.load_weights(bad)
    with pytest.raises(kiln.KilnError, match="is both a tensor and a group of tensors"):
        unflatten_weights({"a.b": 1, "a": 2})


def test_a_missing_safetensors_package_is_named(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "safetensors", None)  # as if it were not installed
    with pytest.raises(kiln.KilnError, match="needs the safetensors package: pip install safetensors"):
        weights_module.save_weights(tmp_path / "w.safetensors", {"a": np.zeros(1)})


SPECS = {"w": kiln.f32[4, 3], "layer": {"b": kiln.f32[3]}}


def good_weights():
    return {"w": np.ones((4, 3), np.float32), "layer.b": np.zeros(3, np.float32)}


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda w: w.pop("w"), kiln.KilnError, "the tensor 'w' is missing: the function needs it"),
        (
            lambda w: w.update(extra=np.zeros(1), more=np.zeros(1)),
            kiln.KilnError,
            "the tensors 'extra', 'more' are not a parameter of the function",
        ),
        (lambda w: w.update(w=np.ones((3, 4), np.float32)), kiln.ShapeError, "'w' has shape (3, 4), the function"),
        (lambda w: w.update(w=np.ones((4, 3))), kiln.DTypeError, "'w' is float64, the function expects float32"),
    ],
)
def test_bind_names_the_tensor_that_does_not_fit(change, error, message):
    given = good_weights()
    change(given)
    with pytest.raises(error) as info:
        bind_weights(SPECS, given, what="params.safetensors")
    assert str(info.value).startswith("params.safetensors: ") and message in str(info.value)


def test_bind_shapes_the_tensors_like_the_specs():
    bound = bind_weights({"fc.w": kiln.f32[2], "b": {"c": kiln.i64[()]}}, {"fc.w": np.ones(2, np.float32), "b.c": 3})
    assert bound.keys() == {"fc.w", "b"} and bound["b"]["c"] == 3  # a key of the specs may hold '.'


MODEL = textwrap.dedent("""\
    import numpy as np
    import kiln

    def predict(x: kiln.f32[2, 4], params: {"w": kiln.f32[4, 3], "layer": {"b": kiln.f32[3]}}, shift: kiln.f32[3]):
        return np.tanh(x @ params["w"] + params["layer"]["b"]) + shift

    def two_dicts(a: {"w": kiln.f32[3]}, b: {"w": kiln.f32[3]}):
        return a["w"] + b["w"]
""")


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    params = {"w": rng.standard_normal((4, 3)).astype(np.float32), "layer": {"b": np.arange(3, dtype=np.float32)}}
    kiln.save_weights(tmp_path / "params.safetensors", params)
    return path, params


def test_build_with_weights_takes_the_parameter_out_of_the_c_signature(tmp_path, model, capsys):
    path, params = model
    out = tmp_path / "build"
    argv = ["build", f"{path}:predict", "--weights", str(tmp_path / "params.safetensors"), "-o", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    header = (out / "predict.h").read_text()
    assert "int32_t predict(const float *x, const float *shift, float *out0);" in header
    library = kiln.load(str(out / "libpredict.so"))
    x, shift = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    want = np.tanh(x @ params["w"] + params["layer"]["b"]) + shift
    np.testing.assert_allclose(library(x, shift), want, rtol=1e-5, atol=1e-6)


def test_dump_with_weights_shows_them_as_constants(tmp_path, model, capsys):
    path, _ = model
    assert main(["dump", f"{path}:predict", "--no-locations", "--weights", str(tmp_path / "params.safetensors")]) == 0
    out = capsys.readouterr().out
    assert "func.func @predict(%x: tensor<2x4xf32>, %shift: tensor<3xf32>)" in out
    assert "kiln.constant dense<[0.0, 1.0, 2.0]> : tensor<3xf32>" in out


@pytest.mark.parametrize(
    "target, options, message",
    [
        ("predict", ["--weights", "{tmp}/missing.safetensors"], "no such weights file"),
        ("two_dicts", ["--weights", "{tmp}/params.safetensors"], "two_dicts has 2 (a, b); name one with"),
        ("two_dicts", ["--weights", "{tmp}/params.safetensors", "--weights-param", "c"], "has no parameter 'c'"),
        (
            "predict",
            ["--weights", "{tmp}/params.safetensors", "--weights-param", "x"],
            "the annotation of 'x' is not a dict of specs",
        ),
        (
            "two_dicts",
            ["--weights", "{tmp}/params.safetensors", "--weights-param", "a"],
            "params.safetensors: the tensor 'layer.b' is not a parameter of the function",
        ),
        ("predict", ["--weights-param", "params"], "give --weights too"),
    ],
)
def test_build_with_weights_errors_are_one_clear_line(tmp_path, model, capsys, target, options, message):
    path, _ = model
    options = [o.format(tmp=tmp_path) for o in options]
    assert main(["build", f"{path}:{target}", *options, "-o", str(tmp_path / "build")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: ") and message in err, err


C_PROGRAM = r"""
#include <stdio.h>
#include "predict.h"

int main(void) {
    float x[PREDICT_X_SIZE], shift[PREDICT_SHIFT_SIZE], out[PREDICT_OUT0_SIZE];
    for (int i = 0; i < PREDICT_X_SIZE; i++) x[i] = (float)i / 8.0f - 0.5f;
    for (int i = 0; i < PREDICT_SHIFT_SIZE; i++) shift[i] = (float)i;
    if (predict(x, shift, out) != 0) return 1;
    for (int i = 0; i < PREDICT_OUT0_SIZE; i++) printf("%.9g\n", out[i]);
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler to link libraries with (install gcc)")
def test_a_c_program_calls_a_library_with_the_files_weights_inside(tmp_path, model):
    path, params = model
    out = tmp_path / "build"
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "build", f"{path}:predict", "--weights", str(tmp_path / "params.safetensors")]
        + ["-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    os.remove(tmp_path / "params.safetensors")  # the library does not read the file: the weights are inside
    (tmp_path / "main.c").write_text(C_PROGRAM)
    program = tmp_path / "main"
    subprocess.run(
        [CC, str(tmp_path / "main.c"), f"-I{out}", f"-L{out}", "-lpredict", f"-Wl,-rpath,{out}", "-o", str(program)],
        check=True,
    )
    run = subprocess.run([str(program)], capture_output=True, text=True, env={}, check=True)
    printed = np.array([float(v) for v in run.stdout.split()])
    x = (np.arange(8, dtype=np.float32) / 8 - 0.5).reshape(2, 4)
    want = np.tanh(x @ params["w"] + params["layer"]["b"]) + np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(printed, want.ravel(), rtol=1e-5, atol=1e-6)
