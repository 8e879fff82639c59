"""The kiln command line, run as a user would run it."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
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


# ----- the user's mistakes are one error line, not a traceback through kiln -----


def _run_cli(tmp_path, capsys, source, *args, name="model.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    status = main([*args[:1], f"{path}:f", *args[1:]])
    return status, capsys.readouterr().err


def _assert_one_error(status, err, where, message, quoted):
    """kiln's error shape: `kiln: error: file:line: message`, then the quoted source line."""
    lines = err.splitlines()
    assert status == 1 and "Traceback" not in err, err
    assert re.match(rf"kiln: error: (\S*/)?{re.escape(where)}: ", lines[0]) and message in lines[0], err
    assert lines[1:] == [f"    {quoted}"], err


@pytest.mark.parametrize(
    "spec, message",
    [
        ('kiln.f32["n", 3]', "kiln.f32['n', 3]: dimension 0 is 'n', a named size, which is not supported yet"),
        ("kiln.f32[-1, 3]", "kiln.f32[-1, 3]: dimension 0 is -1, an unknown size, which is not supported yet"),
        ("kiln.f32[4, -7]", "kiln.f32[4, -7]: dimension 1 is -7; only non-negative int sizes are supported"),
        ("kiln.f32[2.5]", "kiln.f32[2.5]: dimension 0 is 2.5, a float; only non-negative int sizes"),
        ("kiln.i64[True, 2]", "kiln.i64[True, 2]: dimension 0 is True, a bool"),
    ],
)
@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "string-annotations"])
def test_a_bad_spec_is_one_line_at_the_annotation(tmp_path, capsys, spec, message, future):
    head = "from __future__ import annotations\n" if future else ""
    source = f"{head}import kiln\n\n\ndef f(y: kiln.f32[2],\n      x: {spec}):\n    return x\n"
    status, err = _run_cli(tmp_path, capsys, source, "dump")
    # Evaluated at def time, the error names the annotation's own line; a string annotation,
    # evaluated later, has no line of its own, so it names the def.
    where, quoted = ("model.py:5", f"x: {spec}):") if not future else ("model.py:5", "def f(y: kiln.f32[2],")
    _assert_one_error(status, err, where, message, quoted)


def test_a_bad_spec_in_python_is_a_spec_error_at_the_users_line():
    with pytest.raises(kiln.errors.SpecError, match=r"test_cli.py:\d+: kiln.f32\['n', 3\]: dimension 0") as info:
        kiln.f32["n", 3]
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    with pytest.raises(kiln.errors.SpecError, match=r"kiln.f32\[0, -1\]: dimension 1 is -1"):
        kiln.TensorSpec((0, -1), np.float32)
    assert kiln.f32[0, 1, np.int64(7)].shape == (0, 1, 7)  # zero and numpy ints are sizes


@pytest.mark.parametrize(
    "source, where, message, quoted",
    [
        (
            "import kiln\ndef f(x: kiln.f32[3]\n    return x\n",
            "model.py:2",
            "SyntaxError: '(' was never closed",
            "def f(x: kiln.f32[3]",
        ),
        (
            "import kiln\nimport no_such_module_here\n",
            "model.py:2",
            "ModuleNotFoundError: No module named 'no_such_module_here'",
            "import no_such_module_here",
        ),
        ("import kiln\nSIZE = {}['n']\n", "model.py:2", "KeyError: 'n'", "SIZE = {}['n']"),
    ],
    ids=["syntax", "import", "runtime"],
)
def test_a_file_that_fails_to_import_is_one_line(tmp_path, capsys, source, where, message, quoted):
    _assert_one_error(*_run_cli(tmp_path, capsys, source, "dump"), where, message, quoted)


def test_an_exception_in_the_traced_function_is_one_line_at_the_users_line(tmp_path, capsys):
    source = """\
        import numpy as np
        import kiln


        def helper(x):
            return x + undefined_name


        def f(x: kiln.f32[4, 3]):
            return np.sum(helper(x))
    """
    status, err = _run_cli(tmp_path, capsys, source, "dump")
    _assert_one_error(
        status, err, "model.py:6", "NameError: name 'undefined_name' is not defined", "return x + undefined_name"
    )


def test_the_one_line_on_the_real_console(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("import kiln\n\n\ndef f(x: kiln.f32[3]):\n    raise ValueError('no good')\n")
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "dump", f"{path}:f"], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "kiln: error: model.py:5: ValueError: no good\n    raise ValueError('no good')\n"


def test_filtering_off_shows_the_whole_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_TRACEBACK_FILTERING", "off")
    path = tmp_path / "model.py"
    path.write_text("import kiln\n\n\ndef f(x: kiln.f32[3]):\n    return x + undefined_name\n")
    with pytest.raises(NameError) as info:
        main(["dump", f"{path}:f"])
    files = [str(entry.path) for entry in info.traceback]
    assert any("/frontend/trace.py" in f for f in files) and files[-1] == str(path)


def test_a_fault_inside_kiln_keeps_its_traceback(tmp_path, monkeypatch):
    # An exception raised in kiln's own code is kiln's bug: it is not dressed up as the user's.
    from kiln.errors import filter_traceback
    from kiln.tools import targets

    monkeypatch.setattr(targets, "annotated_specs", filter_traceback)  # raises AttributeError inside kiln
    path = tmp_path / "model.py"
    path.write_text("import kiln\n\n\ndef f(x: kiln.f32[3]):\n    return x\n")
    with pytest.raises(AttributeError):
        main(["dump", f"{path}:f"])


def test_an_exception_in_a_compiled_function_shows_the_users_frames_not_kilns(tmp_path, monkeypatch):
    path = tmp_path / "user_model.py"
    path.write_text("def f(x):\n    return x + undefined_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from user_model import f

    with pytest.raises(NameError) as info:
        kiln.compile(f)(np.ones(3))
    files = [str(entry.path) for entry in info.traceback]
    roots = kiln.version.source_roots()
    kilns = {f for f in files if f.startswith(roots)}
    assert files[-1] == str(path) and kilns == {kiln.errors.__file__}, files  # all but the one that re-raises


OK_SOURCE = """\
    import numpy as np
    import kiln


    def f(x: kiln.f32[4, 3], w: kiln.f32[3, 2]):
        return np.sum(x @ w)
"""


@pytest.mark.parametrize(
    "grad, message",
    [
        ("y", "--grad y: y is neither a parameter of f (x, w) nor an argument number 0..1"),
        ("2", "--grad 2: 2 is neither a parameter of f (x, w) nor an argument number 0..1"),
        ("-3", "--grad -3: -3 is neither"),
        ("", "--grad : an empty item is neither"),
        ("0,", "--grad 0,: an empty item is neither"),
        ("1,w", "--grad 1,w: w (argument 1) is named twice"),
    ],
)
def test_build_grad_misuse_is_one_line(tmp_path, capsys, grad, message):
    status, err = _run_cli(tmp_path, capsys, OK_SOURCE, "build", "--grad", grad, "-o", str(tmp_path / "out"))
    assert status == 1 and err == f"kiln: error: {message}" + err.split(message, 1)[1], err
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


def test_build_grad_takes_parameter_names(tmp_path, capsys):
    status, _ = _run_cli(tmp_path, capsys, OK_SOURCE, "build", "--grad", "x, w", "-o", str(tmp_path / "out"))
    assert status == 0
    lib = kiln.load(str(tmp_path / "out" / "libf.so"), "f_grad")
    x, w = np.random.default_rng(0).standard_normal((4, 3)), np.random.default_rng(1).standard_normal((3, 2))
    value, gx, gw = lib(x.astype(np.float32), w.astype(np.float32))  # flat, as the C signature
    np.testing.assert_allclose(value, np.sum(x.astype(np.float32) @ w.astype(np.float32)), rtol=1e-5)
    # d/dx sum(x @ w) = ones @ w.T; d/dw = x.T @ ones (numpy as the oracle)
    np.testing.assert_allclose(gx, np.ones((4, 2)) @ w.T, rtol=1e-5)
    np.testing.assert_allclose(gw, x.T @ np.ones((4, 2)), rtol=1e-5)
