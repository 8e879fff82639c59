"""The command line on ONNX models: ``kiln dump|tune|profile|bisect|build model.onnx``, the
input specs read from the graph (``--input-shape`` for symbolic dimensions), and a built
library called from C, checked against onnxruntime."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.tools.build import c_identifiers
from kiln.tools.cli import main

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
rng = np.random.default_rng(41)
W = rng.standard_normal((1, 4)).astype(np.float32)
B = rng.standard_normal(4).astype(np.float32)


def tiny_model(batch="N"):
    """relu(x * W + B) * scale, exp of it, and x > 0, from elementwise ops only; the input and
    output names ("input.1", "495") are not C identifiers, as an exporter's often are not."""
    nodes = [
        helper.make_node("Mul", ["input.1", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "B"], ["pre"]),
        helper.make_node("Max", ["pre", "zero"], ["relu"]),
        helper.make_node("Mul", ["relu", "scale"], ["495"]),
        helper.make_node("Exp", ["495"], ["exp"]),
        helper.make_node("Greater", ["input.1", "zero"], ["positive"]),
    ]
    initializers = [
        numpy_helper.from_array(W, "W"),
        numpy_helper.from_array(B, "B"),
        numpy_helper.from_array(np.array(0, np.float32), "zero"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_graph",
        [
            helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [batch, 4]),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT, []),
        ],
        [
            helper.make_tensor_value_info("495", TensorProto.FLOAT, [batch, 4]),
            helper.make_tensor_value_info("exp", TensorProto.FLOAT, [batch, 4]),
            helper.make_tensor_value_info("positive", TensorProto.BOOL, [batch, 4]),
        ],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_model(), str(path))
    return str(path)


def reference(x, scale):
    """The model's outputs as onnxruntime computes them (numpy's where it is not installed)."""
    try:
        import onnxruntime
    except ImportError:
        out = np.maximum(x * W + B, 0) * scale
        return [out, np.exp(out), x > 0]
    session = onnxruntime.InferenceSession(tiny_model().SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"input.1": x, "scale": scale})


def test_dump_names_the_function_after_the_file_and_takes_the_input_shape(model_path, capsys):
    assert main(["dump", model_path, "--input-shape", "input.1=2,4", "--no-locations"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "module {\n  func.func @tiny(%input_1: tensor<2x4xf32>, %scale: tensor<f32>) -> "
        "(tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xi1>)"
    )
    assert "kiln.exp" in out


def test_dump_all_stages_locates_ops_at_their_nodes(model_path, capsys):
    assert main(["dump", model_path, "--input-shape", "input.1=3,4", "--stage", "all"]) == 0
    out = capsys.readouterr().out
    assert "// ----- stage: llvm -----" in out and 'loc("tiny.onnx":5:0)' in out  # Exp is the fifth node


def test_a_model_with_static_shapes_needs_no_option(tmp_path, capsys):
    path = tmp_path / "fixed.onnx"
    onnx.save(tiny_model(batch=5), str(path))
    assert main(["dump", str(path)]) == 0
    assert "func.func @fixed(%input_1: tensor<5x4xf32>" in capsys.readouterr().out


@pytest.mark.parametrize(
    "options, message",
    [
        (
            [],
            "the model's input 'input.1' has shape [N, 4], whose dimension N is symbolic; kiln compiles static "
            "shapes: give the input's shape with --input-shape input.1=1,4",
        ),
        (["--input-shape", "x=2,4"], "--input-shape x: the model has no input 'x' (its inputs: input.1, scale)"),
        (["--input-shape", "input.1=2,5"], "does not fit the model's input 'input.1' of shape [N, 4]"),
        (["--input-shape", "input.1=2"], "does not fit the model's input 'input.1' of shape [N, 4]"),
        (["--input-shape", "input.1=2;4"], "--input-shape takes name=d0,d1,... (e.g. x=1,3,224,224), got"),
        (["--input-shape", "input.1"], "--input-shape takes name=d0,d1,..."),
        (["--input-shape", "input.1=2,4", "--input-shape", "input.1=3,4"], "gives 'input.1' twice"),
    ],
)
def test_input_shape_errors_are_one_clear_line(model_path, capsys, options, message):
    assert main(["dump", model_path, *options]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: ") and message in err and err.count("\n") == 1


def test_other_errors_name_what_is_wrong(tmp_path, model_path, capsys):
    assert main(["dump", str(tmp_path / "missing.onnx")]) == 1
    assert "no such file: " in capsys.readouterr().err
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    assert main(["dump", str(broken)]) == 1
    assert "could not read the ONNX model" in capsys.readouterr().err
    assert main(["build", model_path, "--input-shape", "input.1=2,4", "--weights", "w.safetensors", "-o", "b"]) == 1
    assert "an ONNX model carries its own weights" in capsys.readouterr().err
    source = tmp_path / "f.py"
    source.write_text("import kiln\ndef f(x: kiln.f32[3]):\n    return x\n")
    assert main(["dump", f"{source}:f", "--input-shape", "x=3"]) == 1
    assert "--input-shape is for ONNX models" in capsys.readouterr().err


def test_profile_times_the_model_on_random_inputs(model_path, capsys):
    assert main(["profile", model_path, "--input-shape", "input.1=64,4", "--seconds", "0.2"]) == 0
    assert "tiny" in capsys.readouterr().out


def test_bisect_runs_the_model_after_every_step(model_path, capsys):
    assert main(["bisect", model_path, "--input-shape", "input.1=8,4"]) == 0
    assert "every step keeps the reference's numbers" in capsys.readouterr().out


def test_tune_records_the_models_kernels(tmp_path, model_path):
    db = tmp_path / "tuning.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "tune", model_path, "--input-shape", "input.1=256,4"]
        + ["--trials", "3", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "tiny k0 (" in result.stderr and f"recorded in {db}" in result.stdout and db.exists()


def test_the_built_library_names_the_graphs_inputs_and_outputs(tmp_path, model_path, capsys):
    assert main(["build", model_path, "--input-shape", "input.1=2,4", "-o", str(tmp_path / "build")]) == 0
    header = (tmp_path / "build" / "tiny.h").read_text()
    assert (
        "int32_t tiny(const float *input_1, const float *scale, float *v495, float *exp, uint8_t *positive);" in header
    )
    # the header quotes the graph's names that had to change
    assert (
        '/* input input_1 ("input.1"): float32[2][4] */' in header and "/* input scale: float32 (a scalar) */" in header
    )
    assert '/* output v495 ("495"): float32[2][4] */' in header and "#define TINY_POSITIVE_SIZE 8" in header
    library = kiln.load(str(tmp_path / "build" / "libtiny.so"))
    x, scale = rng.standard_normal((2, 4)).astype(np.float32), np.array(1.5, np.float32)
    for got, want in zip(library(input_1=x, scale=scale), reference(x, scale)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


C_PROGRAM = r"""
#include <stdio.h>
#include "tiny.h"

int main(void) {
    float x[TINY_INPUT_1_SIZE], scale = 1.5f;
    float out[TINY_V495_SIZE], e[TINY_EXP_SIZE];
    uint8_t positive[TINY_POSITIVE_SIZE];
    for (int i = 0; i < TINY_INPUT_1_SIZE; i++) x[i] = (float)(i % 7) / 2.0f - 1.25f;
    if (tiny(x, &scale, out, e, positive) != 0) return 1;
    for (int i = 0; i < TINY_V495_SIZE; i++) printf("%.9g %.9g %d\n", out[i], e[i], positive[i]);
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler to link libraries with (install gcc)")
def test_a_c_program_runs_the_built_model_as_onnxruntime_does(tmp_path, model_path):
    out = tmp_path / "build"
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "build", model_path, "--input-shape", "input.1=3,4", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert {"libtiny.so", "tiny.h", "README"} <= set(os.listdir(out))
    (tmp_path / "main.c").write_text(C_PROGRAM)
    program = tmp_path / "main"
    subprocess.run(
        [CC, str(tmp_path / "main.c"), f"-I{out}", f"-L{out}", "-ltiny", f"-Wl,-rpath,{out}", "-o", str(program)],
        check=True,
    )
    run = subprocess.run([str(program)], capture_output=True, text=True, env={}, check=True)
    printed = np.array([[float(v) for v in line.split()] for line in run.stdout.splitlines()])
    x = ((np.arange(12) % 7) / 2 - 1.25).astype(np.float32).reshape(3, 4)
    want, want_exp, want_positive = reference(x, np.array(1.5, np.float32))
    np.testing.assert_allclose(printed[:, 0], want.ravel(), rtol=1e-6)
    np.testing.assert_allclose(printed[:, 1], want_exp.ravel(), rtol=1e-6)
    np.testing.assert_array_equal(printed[:, 2], want_positive.ravel())


def test_c_identifiers_are_distinct_and_valid():
    assert c_identifiers(["input.1", "495", "int", "X", "x", "", "a-b"]) == [
        "input_1",
        "v495",
        "int_",
        "X",
        "x_2",
        "v",
        "a_b",
    ]
