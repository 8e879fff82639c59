"""Graphs deeper than Python's recursion limit: 10,000 chained ops go through the graph
passes (fusion copying views into a kernel, memory planning ordering kernels and placing
the views before them) and compute numpy's numbers."""

import numpy as np

import kiln
from kiln.interpreters.affine_interpreter import run_affine
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.memory_plan import ALIGNMENT

DEPTH = 10_000


def test_ten_thousand_chained_views_fuse_into_one_kernel():
    def f(x):
        for k in range(DEPTH):  # transposes and reversals alternate, so none cancels the next
            x = x[::-1] if k % 2 else x.T
        return np.tanh(x) + 1

    optimized = kiln.compile(f).lower(kiln.f32[3, 4]).module("optimized").body.ops[0]
    assert [op.name for op in optimized.body.ops] == ["kiln.fused", "func.return"]
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 12
    (got,) = run_function(optimized, [x])
    np.testing.assert_allclose(got, f(x), rtol=1e-6)


def test_ten_thousand_chained_kernels_are_planned_in_two_buffers():
    w = np.array([[0.6, -0.8], [0.8, 0.6]])  # a rotation: the values neither grow nor vanish

    def f(x):
        for _ in range(DEPTH):
            x = x @ w
        return x.sum()

    optimized = kiln.compile(f).lower(kiln.f64[2, 2]).module("optimized").body.ops[0]
    kernels = [op for op in optimized.body.ops[:-1] if op.name != "kiln.constant"]  # w is one
    assert len(kernels) == DEPTH  # 9,999 matmuls, then the last fused with the sum
    for before, after in zip(kernels, kernels[1:]):  # in the chain's own order
        assert after.operands[0] is before.results[0]
    # Each intermediate dies at the next kernel: two buffers' bytes are all the chain needs.
    assert optimized.attributes["arena_bytes"] <= 2 * ALIGNMENT
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    (got,) = run_function(optimized, [x])
    np.testing.assert_allclose(got, f(x), rtol=1e-9)


def test_a_fused_chain_deeper_than_the_recursion_limit_lowers_to_one_loop_nest():
    # One kernel, thousands of elementwise ops and views: the lowering computes each scalar
    # from a work list (it used to recurse once per op and stop at about 600).
    def f(x):
        for k in range(3_000):
            x = np.tanh(x) if k % 3 == 0 else (x * 1.0001 + 0.5 if k % 3 == 1 else x[::-1].T.T)
        return x

    affine = kiln.compile(f).lower(kiln.f64[3, 4]).module("affine")
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    (got,) = run_affine(affine, [x])
    np.testing.assert_allclose(got, f(x), rtol=1e-12)
