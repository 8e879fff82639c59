"""The kiln command line, run as a user would run it."""

import subprocess
import sys
import textwrap

import pytest

from kiln.tools.cli import main

ROOT = __file__.rsplit("/tests/", 1)[0]


def test_dump_prints_the_tensor_stage(capsys):
    assert main(["dump", f"{ROOT}/examples/mlp.py:predict", "--stage", "tensor", "--no-locations"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("module {\n  func.func @predict(%x: tensor<64x784xf32>, %params_b1: tensor<128xf32>")
    assert "kiln.matmul %x, %params_w1 : (tensor<64x784xf32>, tensor<784x128xf32>) -> tensor<64x128xf32>" in out
    assert "loc(" not in out


def test_dump_all_stages_labels_each(capsys):
    assert main(["dump", f"{ROOT}/examples/layernorm.py:layernorm", "--stage", "all"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// ----- stage: tensor -----\nmodule {\n")
    assert 'loc("' in out and "layernorm.py" in out


def test_dump_generic_form(capsys):
    assert main(["dump", f"{ROOT}/examples/attention.py:attention", "--generic"]) == 0
    assert '"kiln.matmul"(' in capsys.readouterr().out


@pytest.mark.parametrize(
    "source, target, message",
    [
        ("def f(x):\n    return x\n", "f", "parameter 'x' of f has no input spec"),
        ("def f(x: int):\n    return x\n", "f", "annotation of 'x' is not a kiln spec"),
        ("def f(x):\n    return x\n", "g", "has no function 'g'"),
    ],
)
def test_dump_errors_are_one_clear_line(tmp_path, capsys, source, target, message):
    path = tmp_path / "model.py"
    path.write_text("import kiln\n" + source)
    assert main(["dump", f"{path}:{target}"]) == 1
    assert message in capsys.readouterr().err


def test_trace_errors_reach_the_user_with_their_line(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text(
        textwrap.dedent("""\
        import kiln
        def f(x: kiln.f32[3], y: kiln.f32[4]):
            return x + y
    """)
    )
    assert main(["dump", f"{path}:f"]) == 1
    err = capsys.readouterr().err
    assert "bad.py:3: shapes (3,) and (4,) do not broadcast" in err and "return x + y" in err


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "kiln", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("kiln ")
