"""A loop of one iteration becomes its body in the LLVM IR, with its iter_args and results
still flowing through it."""

import numpy as np

import kiln


def test_a_reduction_over_one_element_has_no_loop_and_numpys_numbers():
    f = kiln.compile(lambda x: np.exp(x).sum(axis=1) * 2)
    x = np.random.default_rng(0).standard_normal((5, 1)).astype(np.float32)
    low = f.lower(x)
    assert 'kiln.loop = "k0.r"' in low.text("affine") and "to 1 iter_args" in low.text("affine")
    llvm_ir = low.pipeline.llvm_ir()
    assert llvm_ir.count('icmp slt i64 %"iv') == 1  # the loop over rows alone
    assert "phi  float" not in llvm_ir  # the sum's accumulator needs no phi
    np.testing.assert_allclose(f(x), np.exp(x).sum(axis=1) * 2, rtol=1e-6)


def test_nested_single_iteration_loops_inside_a_real_one():
    f = kiln.compile(lambda x, w: x @ w)
    x = np.random.default_rng(1).standard_normal((1, 1)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((1, 9)).astype(np.float32)
    np.testing.assert_allclose(f(x, w), x @ w, rtol=1e-6)
