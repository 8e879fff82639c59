"""Graph passes: IR before and after (the FileCheck tests of tests/ir/), kernel counts, memory plans,
and results that no pass may change."""

import glob
import os
import subprocess
import sys

import numpy as np
import pytest
from op_table import CASES

import kiln
from kiln.dialects import parse_ir, print_ir
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.registry import run_passes

rng = np.random.default_rng(17)


IR_TESTS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "ir", "*.mlir")))


def passes_of(text):
    """The passes an IR test names on its `// PASSES: a b` line."""
    for line in text.splitlines():
        if line.startswith("// PASSES:"):
            return line.removeprefix("// PASSES:").split()
    raise ValueError("an IR test names its passes on a `// PASSES: name ...` line")


@pytest.mark.parametrize("path", IR_TESTS, ids=[os.path.basename(p) for p in IR_TESTS])
def test_ir(path):
    """tests/ir/*.mlir: parse the file, run the passes it names, and match the printed IR against
    its `// CHECK` lines with FileCheck."""
    text = open(path).read()
    module = run_passes(parse_ir(text), passes_of(text))
    result = subprocess.run(
        [sys.executable, "-m", "filecheck", path],
        input=print_ir(module, locations=False),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ir_tests_cover_the_graph_passes_and_the_lowering():
    named = {name for path in IR_TESTS for name in passes_of(open(path).read())}
    assert {"canonicalize", "cse", "dce", "fuse", "plan-memory", "lower-tensor-to-affine"} <= named


def test_filecheck_rejects_ir_that_does_not_match(tmp_path):
    """The driver fails when the IR differs from the checks: a test that cannot fail checks nothing."""
    path = tmp_path / "wrong.mlir"
    path.write_text(open(IR_TESTS[0]).read().replace("// CHECK", "// CHECK: kiln.no_such_op\n// CHECK", 1))
    with pytest.raises(AssertionError):
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
