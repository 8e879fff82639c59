"""The examples run as users run them, and agree with numpy."""

import glob
import os
import re
import runpy
import subprocess
import sys

import pytest

ROOT = __file__.rsplit("/tests/", 1)[0]
# train_mlp.py trains for ten epochs by default, onnx_resnet.py times five calls of ResNet-50 after
# compiling it; their own tests below run them shorter.
SCRIPTS = sorted(
    path
    for path in glob.glob(f"{ROOT}/examples/**/*.py", recursive=True)
    if not path.endswith(("train_mlp.py", "onnx_resnet.py"))
)
RESNET_OPS = {"Conv", "BatchNormalization", "Relu", "Sum", "MaxPool", "AveragePool", "Reshape", "Gemm", "Softmax"}


@pytest.mark.parametrize("path", SCRIPTS, ids=[os.path.relpath(p, f"{ROOT}/examples") for p in SCRIPTS])
def test_every_example_runs_as_a_script_and_prints_what_it_shows(path):
    result = subprocess.run([sys.executable, path], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip(), f"{path} printed nothing"


@pytest.mark.parametrize("name", ["layernorm", "attention"])
def test_example_agrees_with_numpy(name, capsys):
    runpy.run_path(f"{ROOT}/examples/{name}.py", run_name="__main__")
    out = capsys.readouterr().out
    error = float(out.rsplit("=", 1)[1])
    assert error < 1e-5, out


def test_main_example_prints_its_ir():
    result = subprocess.run([sys.executable, f"{ROOT}/examples/mlp.py"], capture_output=True, text=True, check=True)
    assert "max |kiln - numpy| = " in result.stdout
    assert "func.func @predict(" in result.stdout and "kiln.reduce_max" in result.stdout


def test_training_example_learns_agrees_with_hand_written_numpy_and_saves_its_weights(tmp_path):
    saved = tmp_path / "digits_mlp.safetensors"
    result = subprocess.run(
        [sys.executable, f"{ROOT}/examples/train_mlp.py", "--epochs", "3", "--save", str(saved)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "with remat:" in result.stdout
    lines = result.stdout.splitlines()
    last_epoch = lines[-3].split()
    assert last_epoch[0] == "3" and float(last_epoch[3]) > 0.9  # test accuracy; chance is 0.1
    differences = [float(v) for v in re.findall(r"difference (\S+?)(?:,|$)", lines[-2])]
    assert len(differences) == 2 and max(differences) < 1e-4
    assert lines[-1] == f"trained parameters saved to {saved}"
    import kiln

    shapes = {name: value.shape for name, value in kiln.load_weights(saved).items()}
    assert shapes == {"b1": (64,), "b2": (10,), "w1": (64, 64), "w2": (64, 10)}


def test_resnet_example_agrees_with_onnxruntime():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import kiln

    missing = RESNET_OPS - set(kiln.onnx.supported_ops())
    if missing:
        pytest.skip(f"kiln.onnx does not import {', '.join(sorted(missing))} yet")
    result = subprocess.run(
        [sys.executable, f"{ROOT}/examples/onnx_resnet.py", "--runs", "1"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("kiln, weights as arguments"))
    assert float(row.split()[-1]) < 1e-4, result.stdout  # max |kiln - onnxruntime| of the probabilities
    assert "warning" not in result.stdout
