"""`kiln opt`, run as a user runs it: IR text in, passes run, IR text out; every mistake one
`kiln: error:` line with exit status 1."""

import subprocess
import sys

import pytest

from kiln.codegen import llvm_target
from kiln.dialects import parse_ir, print_ir
from kiln.passes.pass_table import SPECS
from kiln.passes.registry import run_passes
from kiln.pipeline import GRAPH_PASSES
from kiln.runtime import threads
from kiln.target import TARGETS
from kiln.tools.cli import main
from kiln.tools.targets import load_target

ROOT = __file__.rsplit("/tests/", 1)[0]
DENSE = f"{ROOT}/tests/ir/fuse_dense.mlir"


def opt(capsys, *argv):
    status = main(["opt", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_error(status, out, err, message):
    assert status == 1 and out == "", out
    assert err.startswith("kiln: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err


def test_without_a_pipeline_the_ir_round_trips(capsys):
    status, out, err = opt(capsys, DENSE)
    assert status == 0 and err == ""
    assert out == print_ir(parse_ir(open(DENSE).read()), locations=False)


def test_the_pipeline_runs_and_the_result_is_printed(capsys):
    status, out, _ = opt(capsys, DENSE, "--pass-pipeline", "canonicalize,fuse{max-places=4}")
    assert status == 0
    want = run_passes(parse_ir(open(DENSE).read()), ["canonicalize", "fuse{max-places=4}"])
    assert out == print_ir(want, locations=False) and "kiln.fused" in out


def test_output_to_a_file(tmp_path, capsys):
    path = tmp_path / "out.mlir"
    status, out, _ = opt(capsys, DENSE, "-p", "fuse", "-o", str(path))
    assert status == 0 and out == ""
    assert "kiln.fused" in path.read_text() and parse_ir(path.read_text())


def test_print_ir_after_all_writes_each_pass_to_stderr(capsys):
    status, out, err = opt(capsys, DENSE, "-p", "canonicalize,cse,fuse{max-places=4}", "--print-ir-after-all")
    assert status == 0
    headers = [line for line in err.splitlines() if line.startswith("// -----//")]
    assert headers == [
        "// -----// IR Dump After canonicalize //----- //",
        "// -----// IR Dump After cse //----- //",
        "// -----// IR Dump After fuse{max-places=4} //----- //",
    ]
    last = err.rsplit("//----- //\n", 1)[1]
    assert last.strip() == out.strip()  # the last dump is the result


def test_locations_only_when_asked(tmp_path, capsys):
    path = tmp_path / "located.mlir"
    path.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = kiln.neg %x : tensor<4xf32> loc("model.py":3:12)\n'
        "  func.return %0 : tensor<4xf32>\n}\n"
    )
    assert "loc(" not in opt(capsys, str(path))[1]
    assert 'kiln.neg %x : tensor<4xf32> loc("model.py":3:12)' in opt(capsys, str(path), "--print-debuginfo")[1]
    assert '"kiln.neg"(%x)' in opt(capsys, str(path), "--generic")[1]


def test_list_passes_names_every_pass_and_option(capsys):
    status, out, _ = opt(capsys, "--list-passes")
    assert status == 0
    lines = out.splitlines()
    for name, spec in SPECS.items():
        assert any(line.startswith(f"{name} ") and spec.summary in line for line in lines), name
        for option in spec.options:
            assert f"  {option.name}=<{option.type_name}>  {option.help}" in out
    assert "  max-places=<int>  the most places one value may be computed in, fused (default 8)" in lines


def test_standard_input_and_output_through_a_real_process():
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "opt", "-", "-p", "fuse"],
        input=open(DENSE).read(),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and result.stderr == ""
    assert "kiln.fused(%in0 = %x, %in1 = %w, %in2 = %b)" in result.stdout


def test_an_error_on_the_real_console():
    result = subprocess.run(
        [sys.executable, "-m", "kiln", "opt", "-", "-p", "fuse{max-size=8}"], input="", capture_output=True, text=True
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        "kiln: error: pass pipeline 'fuse{max-size=8}', column 6: pass fuse has no option 'max-size'; its options: "
        "max-places: int (default 8), row-buffer-bytes: int (default 16384)\n"
    )


def test_kiln_help_lists_opt():
    result = subprocess.run([sys.executable, "-m", "kiln", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "opt " in result.stdout and "run passes on an IR file" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("canonicalize,fusee", "unknown pass 'fusee' (did you mean 'fuse'?); the passes: canonicalize, cse, dce, "),
        ("fuse{max-size=8}", "pass fuse has no option 'max-size'; its options: max-places: int (default 8)"),
        ("plan-memory{alignment=3}", "option alignment of pass plan-memory must be a power of two, 8 or more, not '3'"),
        ("canonicalize{max-iterations=1}", "did not settle after 1 iterations"),
    ],
)
def test_a_bad_pipeline_is_one_line(capsys, pipeline, message):
    src = f"{ROOT}/tests/ir/canonicalize.mlir"
    assert_one_error(*opt(capsys, src, "-p", pipeline), message)


def test_a_parse_error_names_file_line_and_column(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = kiln.neg %y : tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n"
    )
    assert_one_error(*opt(capsys, str(path), "-p", "cse"), f"{path}:2:19: use of undefined value %y")


def test_ir_that_does_not_verify_is_refused_before_any_pass(tmp_path, capsys):
    path = tmp_path / "wrong.mlir"
    path.write_text("func.func @f(%x: tensor<4xf32>) -> tensor<3xf32> {\n  func.return %x : tensor<4xf32>\n}\n")
    assert_one_error(*opt(capsys, str(path), "-p", "cse"), "func.return gives (tensor<4xf32>) but @f returns")


def test_a_missing_file_and_a_missing_argument(tmp_path, capsys):
    assert_one_error(*opt(capsys, str(tmp_path / "nowhere.mlir")), "nowhere.mlir: No such file or directory")
    assert_one_error(*opt(capsys), "kiln opt needs an IR file (or - for standard input), or --list-passes")


def test_a_bad_pipeline_is_reported_before_the_file_is_read(tmp_path, capsys):
    assert_one_error(*opt(capsys, str(tmp_path / "nowhere.mlir"), "-p", "fusee"), "unknown pass 'fusee'")


@pytest.mark.parametrize("target", ["examples/layernorm.py:layernorm", "examples/mlp.py:predict"])
def test_kiln_opt_with_the_compilers_pipeline_makes_its_stages(tmp_path, capsys, target):
    """The tensor stage `kiln dump` prints, through `kiln opt` with the passes kiln.compile runs,
    is the affine stage it prints, and with the default schedule (at this host's vector width
    and thread pool) the scheduled stage."""
    assert main(["dump", f"{ROOT}/{target}", "--stage", "tensor", "--print-large-constants"]) == 0
    path = tmp_path / "tensor.mlir"
    path.write_text(capsys.readouterr().out)
    loaded = load_target(f"{ROOT}/{target}")
    lowered = loaded.compiled.lower(*loaded.specs)
    graph = ",".join(GRAPH_PASSES)
    lower = TARGETS["cpu"].pass_spec("lower-tensor-to-affine")  # with the host's vector width, if not AVX2's
    status, out, _ = opt(capsys, str(path), "-p", f"{graph},{lower}")
    assert status == 0 and out == print_ir(lowered.module("affine"), locations=False)
    schedule = (
        f"default-schedule{{vector-bits={llvm_target.vector_bits()} threads={str(threads.available()).lower()} "
        f"vector-registers={llvm_target.vector_registers()}}}"
    )
    status, out, _ = opt(capsys, str(path), "-p", f"{graph},{lower},{schedule}")
    assert status == 0 and out == print_ir(lowered.module("scheduled"), locations=False)


def test_kiln_opt_with_the_cuda_pipeline_makes_its_stages(tmp_path, capsys):
    target = f"{ROOT}/examples/layernorm.py:layernorm"
    assert main(["dump", target, "--target", "cuda-emulate", "--stage", "tensor", "--print-large-constants"]) == 0
    path = tmp_path / "tensor.mlir"
    path.write_text(capsys.readouterr().out)
    loaded = load_target(target, compile_target="cuda-emulate")
    lowered = loaded.compiled.lower(*loaded.specs)
    pipeline = ",".join(GRAPH_PASSES) + ",lower-tensor-to-affine-gpu,gpu-default-schedule"
    status, out, _ = opt(capsys, str(path), "-p", pipeline)
    assert status == 0 and out == print_ir(lowered.module("scheduled"), locations=False)
    assert "kiln.bind" in out
