"""Graph passes: IR before and after, kernel counts, memory plans, and results
that no pass may change."""

import textwrap

import numpy as np
import pytest
from op_table import CASES

import kiln
from kiln.dialects import parse_ir, print_ir, verify
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.registry import run_passes

rng = np.random.default_rng(17)


def after(passes, text):
    module = parse_ir(textwrap.dedent(text))
    return print_ir(run_passes(module, passes), locations=False)


def body(text):
    """The lines of a function body, as written in a test."""
    return textwrap.dedent(text).strip("\n")


def test_dce_removes_unused_ops_and_what_only_they_used():
    out = after(
        ["dce"],
        """
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = kiln.exp %x : tensor<4xf32>
          %1 = kiln.tanh %0 : tensor<4xf32>
          %2 = kiln.neg %x : tensor<4xf32>
          func.return %2 : tensor<4xf32>
        }""",
    )
    assert (
        out
        == body("""
        module {
          func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
            %0 = kiln.neg %x : tensor<4xf32>
            func.return %0 : tensor<4xf32>
          }
        }""")
        + "\n"
    )


def test_cse_merges_equal_ops_and_constants_by_value():
    out = after(
        ["cse"],
        """
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = kiln.constant dense<1.0> : tensor<f32>
          %1 = kiln.constant dense<1.0> : tensor<f32>
          %2 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
          %3 = kiln.broadcast_to %1 : (tensor<f32>) -> tensor<4xf32>
          %4 = kiln.add %x, %2 : tensor<4xf32>
          %5 = kiln.add %x, %3 : tensor<4xf32> loc("elsewhere.py":9:1)
          %6 = kiln.mul %4, %5 : tensor<4xf32>
          func.return %6 : tensor<4xf32>
        }""",
    )
    assert (
        out
        == body("""
        module {
          func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
            %0 = kiln.constant dense<1.0> : tensor<f32>
            %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
            %2 = kiln.add %x, %1 : tensor<4xf32>
            %3 = kiln.mul %2, %2 : tensor<4xf32>
            func.return %3 : tensor<4xf32>
          }
        }""")
        + "\n"
    )


def test_canonicalize_folds_identities_double_layout_ops_and_constants():
    out = after(
        ["canonicalize"],
        """
        func.func @f(%x: tensor<4xf32>, %y: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>) {
          %0 = kiln.constant dense<1.0> : tensor<f32>
          %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
          %2 = kiln.mul %x, %1 : tensor<4xf32>
          %3 = kiln.constant dense<-0.0> : tensor<f32>
          %4 = kiln.broadcast_to %3 : (tensor<f32>) -> tensor<4xf32>
          %5 = kiln.add %4, %2 : tensor<4xf32>
          %6 = kiln.transpose %y {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
          %7 = kiln.transpose %6 {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
          %8 = kiln.reshape %y : (tensor<2x3xf32>) -> tensor<3x2xf32>
          %9 = kiln.reshape %8 : (tensor<3x2xf32>) -> tensor<6xf32>
          %10 = kiln.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
          %11 = kiln.sqrt %10 : tensor<3xf32>
          func.return %5, %7, %9, %11 : tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>
        }""",
    )
    assert (
        out
        == body("""
        module {
          func.func @f(%x: tensor<4xf32>, %y: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>) {
            %0 = kiln.reshape %y : (tensor<2x3xf32>) -> tensor<6xf32>
            %1 = kiln.constant dense<[1.0, 1.4142135, 1.7320508]> : tensor<3xf32>
            func.return %x, %y, %0, %1 : tensor<4xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<3xf32>
          }
        }""")
        + "\n"
    )


def test_canonicalize_folds_elementwise_ops_of_broadcast_scalars_without_growing_constants():
    out = after(
        ["canonicalize"],
        """
        func.func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {
          %0 = kiln.constant dense<2.0> : tensor<f32>
          %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<1000xf32>
          %2 = kiln.constant dense<1.0> : tensor<f32>
          %3 = kiln.broadcast_to %2 : (tensor<f32>) -> tensor<1000xf32>
          %4 = kiln.sub %1, %3 : tensor<1000xf32>
          %5 = kiln.pow %x, %4 : tensor<1000xf32>
          %6 = kiln.pow %5, %1 : tensor<1000xf32>
          func.return %6 : tensor<1000xf32>
        }""",
    )
    assert (
        out
        == body("""
        module {
          func.func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {
            %0 = kiln.mul %x, %x : tensor<1000xf32>
            func.return %0 : tensor<1000xf32>
          }
        }""")
        + "\n"
    )


def test_canonicalize_leaves_target_dependent_float_ops_to_the_run_time():
    """The math library and orders of additions are each target's own: folding them with
    numpy's values would make a constant differ from the same op computed at run time."""
    out = after(
        ["canonicalize"],
        """
        func.func @f() -> (tensor<3xf32>, tensor<f32>, tensor<i32>) {
          %0 = kiln.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
          %1 = kiln.exp %0 : tensor<3xf32>
          %2 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
          %3 = kiln.constant dense<[2147483647, 1, 5]> : tensor<3xi32>
          %4 = kiln.reduce_sum %3 {axes = array<i64: 0>, keepdims = false} : (tensor<3xi32>) -> tensor<i32>
          func.return %1, %2, %4 : tensor<3xf32>, tensor<f32>, tensor<i32>
        }""",
    )
    assert "kiln.exp" in out and "kiln.reduce_sum %0" in out
    assert "dense<-2147483643> : tensor<i32>" in out  # integer sums wrap exactly: folded


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


def test_fusion_outlines_a_dense_layer_into_one_group():
    out = after(
        ["fuse"],
        """
        func.func @dense(%x: tensor<8x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<8x3xf32> {
          %0 = kiln.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
          %1 = kiln.broadcast_to %b : (tensor<3xf32>) -> tensor<8x3xf32>
          %2 = kiln.add %0, %1 : tensor<8x3xf32>
          %3 = kiln.tanh %2 : tensor<8x3xf32>
          func.return %3 : tensor<8x3xf32>
        }""",
    )
    assert (
        out
        == body("""
        module {
          func.func @dense(%x: tensor<8x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<8x3xf32> {
            %0 = kiln.fused(%in0 = %x, %in1 = %w, %in2 = %b) -> tensor<8x3xf32> {
              %1 = kiln.matmul %in0, %in1 : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
              %2 = kiln.broadcast_to %in2 : (tensor<3xf32>) -> tensor<8x3xf32>
              %3 = kiln.add %1, %2 : tensor<8x3xf32>
              %4 = kiln.tanh %3 : tensor<8x3xf32>
              kiln.yield %4 : tensor<8x3xf32>
            }
            func.return %0 : tensor<8x3xf32>
          }
        }""")
        + "\n"
    )
    verify(parse_ir(out))


def test_fusion_keeps_a_column_reduction_out_of_a_row_loop():
    out = after(
        ["fuse"],
        """
        func.func @f(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
          %0 = kiln.reduce_max %x {axes = array<i64: 0>, keepdims = true} : (tensor<8x4xf32>) -> tensor<1x4xf32>
          %1 = kiln.broadcast_to %0 : (tensor<1x4xf32>) -> tensor<8x4xf32>
          %2 = kiln.sub %x, %1 : tensor<8x4xf32>
          func.return %2 : tensor<8x4xf32>
        }""",
    )
    assert "kiln.fused" not in out  # fused, the maximum would be recomputed for every row


KERNEL_COUNTS = [
    ("elementwise chain", lambda x, y: np.tanh(x * 2 + y) - x / 3, (kiln.f32[64, 32], kiln.f32[32]), 1),
    ("gelu", lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))), (kiln.f32[128, 64],), 1),
    (
        "dense + bias + relu",
        lambda x, w, b: kiln.relu(x @ w + b),
        (kiln.f32[64, 32], kiln.f32[32, 16], kiln.f32[16]),
        1,
    ),
    ("row softmax", kiln.softmax, (kiln.f32[64, 100],), 2),
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
        4,
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


def test_rematerialize_recomputes_a_long_lived_elementwise_value_near_its_late_use():
    out = after(
        ["rematerialize"],
        """
        func.func @f(%x: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<8xf32> {
          %0 = kiln.tanh %x : tensor<8xf32>
          %1 = kiln.reshape %0 : (tensor<8xf32>) -> tensor<1x8xf32>
          %2 = kiln.matmul %1, %w : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
          %3 = kiln.exp %2 : tensor<1x8xf32>
          %4 = kiln.matmul %3, %w : (tensor<1x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32>
          %5 = kiln.sin %4 : tensor<1x8xf32>
          %6 = kiln.reshape %5 : (tensor<1x8xf32>) -> tensor<8xf32>
          %7 = kiln.mul %6, %0 : tensor<8xf32>
          func.return %7 : tensor<8xf32>
        }""",
    )
    lines = [line.strip() for line in out.splitlines()]
    at = lines.index("%7 = kiln.tanh %x : tensor<8xf32>")
    assert lines[at + 1] == "%8 = kiln.mul %6, %7 : tensor<8xf32>"
    assert lines.index("%0 = kiln.tanh %x : tensor<8xf32>") < at


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
