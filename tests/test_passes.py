"""Graph passes: IR before and after (the FileCheck tests of tests/ir/), kernel counts, memory plans,
and results that no pass may change."""

import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest
from op_table import CASES

import kiln
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.registry import parse_pipeline, run_passes
from kiln.tools.cli import main

rng = np.random.default_rng(17)


IR_TESTS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "ir", "*.mlir")))
# `// RUN: kiln opt %s -p PIPELINE [options] | filecheck %s [options]`, as LLVM's lit writes it.
RUN = re.compile(r"^// RUN: kiln opt (?P<opt>.+?) \| filecheck (?P<check>.+)$")


def run_lines(path):
    """(kiln opt's arguments, filecheck's arguments) of each RUN line of `path`, `%s` replaced by it."""
    runs = []
    for line in open(path).read().splitlines():
        if line.startswith("// RUN:"):
            found = RUN.match(line)
            if found is None:
                raise ValueError(f"{path}: a RUN line reads `// RUN: kiln opt %s ... | filecheck %s`, not {line!r}")
            runs.append(tuple([a.replace("%s", path) for a in shlex.split(found.group(k))] for k in ("opt", "check")))
    if not runs:
        raise ValueError(f"{path}: an IR test names its passes on a `// RUN: kiln opt %s -p ... | filecheck %s` line")
    return runs


def pipelines_of(path):
    """The pass names the RUN lines of `path` run."""
    names = set()
    for opt_args, _ in run_lines(path):
        for flag in ("-p", "--pass-pipeline"):
            if flag in opt_args:
                names |= {entry.name for entry in parse_pipeline(opt_args[opt_args.index(flag) + 1])}
    return names


def kiln_opt(*argv):
    """(status, stdout, stderr) of the `kiln opt` command line, run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["opt", *argv])
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("path", IR_TESTS, ids=[os.path.basename(p) for p in IR_TESTS])
def test_ir(path):
    """tests/ir/*.mlir: each RUN line's `kiln opt` (the file parsed, its pipeline run and the
    result printed), its output matched against the file's CHECK lines with FileCheck."""
    for opt_args, check_args in run_lines(path):
        status, out, err = kiln_opt(*opt_args)
        assert status == 0, err
        result = subprocess.run(
            [sys.executable, "-m", "filecheck", *check_args], input=out, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_a_run_line_is_a_shell_command():
    """A RUN line is what a user types: run through a shell, `kiln opt` in a process of its own."""
    path = os.path.join(os.path.dirname(__file__), "ir", "fuse_dense.mlir")
    line = next(line for line in open(path) if line.startswith("// RUN:")).removeprefix("// RUN:")
    command = line.replace("%s", shlex.quote(path)).replace("kiln opt", f"{shlex.quote(sys.executable)} -m kiln opt")
    command = command.replace("filecheck", f"{shlex.quote(sys.executable)} -m filecheck")
    result = subprocess.run(command, shell=True, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ir_tests_cover_the_graph_passes_and_the_lowering():
    named = set().union(*(pipelines_of(path) for path in IR_TESTS))
    assert {"canonicalize", "cse", "dce", "fuse", "plan-memory", "lower-tensor-to-affine", "default-schedule"} <= named


def test_filecheck_rejects_ir_that_does_not_match(tmp_path):
    """The driver fails when the IR differs from the checks: a test that cannot fail checks nothing."""
    path = tmp_path / "wrong.mlir"
    path.write_text(open(IR_TESTS[0]).read().replace("// CHECK", "// CHECK: kiln.no_such_op\n// CHECK", 1))
    with pytest.raises(AssertionError):
        test_ir(str(path))


def test_a_failing_pipeline_fails_its_ir_test(tmp_path):
    path = tmp_path / "wrong.mlir"
    path.write_text(open(IR_TESTS[0]).read().replace("-p canonicalize", "-p canonicalise", 1))
    with pytest.raises(AssertionError, match="unknown pass 'canonicalise'"):
        test_ir(str(path))


@pytest.mark.parametrize("fn", [np.exp, np.tanh, np.log, np.sum, lambda c: c**1.7])
def test_a_folded_constant_equals_the_same_op_computed_at_run_time(fn):
    c = np.linspace(0.1, 3.0, 12, dtype=np.float32).reshape(3, 4)
    x = np.zeros((), np.float32)
    # np.zeros_like(x) + c is a traced value that folds to a constant (fn(c) alone is numpy's own)
    folded = kiln.compile(lambda x: fn(np.zeros_like(x) + c) + x)
    assert "kiln.constant" in folded.lower(x).text("optimized")
    captured = folded(x)
    passed = kiln.compile(lambda c, x: fn(c) + x)(c, x)
    np.testing.assert_array_equal(captured, passed)
    np.testing.assert_allclose(captured, fn(c) + x, rtol=2e-6)  # and both are numpy's, within ulps


def test_waste_from_autodiff_goes_away():
    def loss(w, x):
        return np.mean(np.tanh(x @ w) ** 2)

    lowered = kiln.compile(kiln.value_and_grad(loss)).lower(kiln.f32[3, 2], kiln.f32[4, 3])
    before = lowered.module("tensor").body.ops[0].body.ops
    module = run_passes(lowered.module("tensor").clone({}), ["canonicalize", "cse", "dce"])
    after_ops = module.body.ops[0].body.ops
    names = [op.name for op in after_ops]
    assert len(after_ops) < len(before) - 6
    assert "kiln.pow" not in names  # x ** 2 is x * x, and its derivative's x ** 1 is x
    assert names.count("kiln.constant") < [op.name for op in before].count("kiln.constant")


KERNEL_COUNTS = [
    ("elementwise chain", lambda x, y: np.tanh(x * 2 + y) - x / 3, (kiln.f32[64, 32], kiln.f32[32]), 1),
    ("gelu", lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))), (kiln.f32[128, 64],), 1),
    (
        "dense + bias + relu",
        lambda x, w, b: kiln.relu(x @ w + b),
        (kiln.f32[64, 32], kiln.f32[32, 16], kiln.f32[16]),
        1,
    ),
    ("row softmax", kiln.softmax, (kiln.f32[64, 100],), 1),  # exp in a row buffer: see passes/fusion.py
    ("softmax of rows too long for a row buffer", kiln.softmax, (kiln.f32[4, 8192],), 2),
    (
        "layernorm",
        lambda x, g, b: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b,
        (kiln.f32[64, 96], kiln.f32[96], kiln.f32[96]),
        1,
    ),
    (
        "mlp with softmax",
        lambda x, w1, b1, w2: kiln.softmax(kiln.relu(x @ w1 + b1) @ w2),
        (kiln.f32[8, 16], kiln.f32[16, 32], kiln.f32[32], kiln.f32[32, 10]),
        3,  # matmul + relu, matmul, softmax (one kernel: exp in a row buffer)
    ),
]


@pytest.mark.parametrize("name, fn, specs, kernels", KERNEL_COUNTS, ids=[k[0] for k in KERNEL_COUNTS])
def test_kernel_counts(name, fn, specs, kernels):
    compiled = kiln.compile(fn)
    lowered = compiled.lower(*specs)
    assert lowered.kernel_count == kernels
    function = lowered.module("affine").body.ops[-1]
    assert sum(op.name == "affine.for" for op in function.body.ops) == kernels  # one loop nest each
    args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    np.testing.assert_allclose(compiled(*args), fn(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pass_name", ["canonicalize", "cse", "dce", "fuse", "plan-memory"])
def test_no_pass_changes_any_result_of_the_op_table(pass_name):
    for case in CASES:
        module = kiln.compile(case.fn).lower(*case.args).module("tensor")
        function = module.body.ops[0]
        inputs = [np.asarray(a) for a in case.args]
        want = run_function(function, inputs)
        changed = run_passes(module.clone({}), [pass_name])
        got = run_function(changed.body.ops[0], inputs)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, case.name
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{pass_name} changed {case.name}")


def test_remat_shrinks_a_training_steps_arena_and_keeps_its_numbers():
    def step(params, x, y):
        def loss(p):
            logits = kiln.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
            return -np.mean(np.sum(y * (logits - kiln.logsumexp(logits, axis=1, keepdims=True)), axis=1))

        value, grads = kiln.value_and_grad(loss)(params)
        return value, {k: params[k] - 0.1 * grads[k] for k in params}

    params = {
        "w1": rng.standard_normal((64, 64)).astype(np.float32) * 0.1,
        "b1": np.zeros(64, np.float32),
        "w2": rng.standard_normal((64, 10)).astype(np.float32) * 0.1,
        "b2": np.zeros(10, np.float32),
    }
    x = rng.standard_normal((64, 64)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    kept, recomputed = kiln.compile(step), kiln.compile(step, remat=True)
    plain, remat = kept.lower(params, x, y).memory_plan, recomputed.lower(params, x, y).memory_plan
    assert remat.arena_bytes < plain.arena_bytes < plain.unplanned_bytes
    for a, b in zip(pytree_leaves(kept(params, x, y)), pytree_leaves(recomputed(params, x, y))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def pytree_leaves(tree):
    from kiln.frontend.pytree import flatten

    return flatten(tree)[0]
