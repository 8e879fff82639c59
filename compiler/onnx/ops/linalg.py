"""ONNX linear algebra: MatMul, Gemm, Einsum and MatMulInteger."""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import op


@op("MatMul")
def matmul(node, a, b):
    # numpy's matmul is the spec's: 1-D operands promoted and their dimension removed, batch dimensions broadcast.
    result = np.matmul(a, b)
    return result if result.dtype == a.dtype else result.astype(a.dtype)


@op("Gemm", attributes=("alpha", "beta", "transA", "transB"), since=7)
def gemm(node, a, b, c=None):
    """alpha * A' @ B' + beta * C, with A' and B' transposed where transA/transB say."""
    dtype = a.dtype
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if node.attr("transA", 0):
        a = a.T
    if node.attr("transB", 0):
        b = b.T
    result = _scaled(np.matmul(a, b), alpha)
    if c is not None and beta != 0.0:
        result = result + _scaled(c, beta)
    return result if result.dtype == dtype else result.astype(dtype)


def _scaled(x, factor: float):
    """`x` * `factor` in `x`'s dtype; an integer `x` times a fractional factor is computed
    in float64 and truncated back, as the reference computes it, not with the factor truncated."""
    if factor == 1.0:
        return x
    if x.dtype.kind in "iu" and factor != int(factor):
        return (x.astype(np.float64) * factor).astype(x.dtype)
    return x * np.asarray(factor, x.dtype)


@op("Einsum", attributes=("equation",), since=12)
def einsum(node, *inputs):
    # The spec's equation is numpy's, but it may contain spaces, which numpy refuses.
    equation = node.attr("equation").replace(" ", "")
    result = np.einsum(equation, *inputs)
    dtype = inputs[0].dtype
    return result if result.dtype == dtype else result.astype(dtype)


@op("MatMulInteger", since=10)
def matmul_integer(node, a, b, a_zero_point=None, b_zero_point=None):
    """(A - a_zero_point) @ (B - b_zero_point) in int32. A's zero point is a scalar or one per
    row of A; B's a scalar or one per column of B."""
    a = a.astype(np.int32)
    b = b.astype(np.int32)
    if a_zero_point is not None:
        zero = a_zero_point.astype(np.int32)
        # A per-row zero point (shape [M]) lines up with A's rows, not its last axis.
        a = a - (np.reshape(zero, (-1, 1)) if zero.ndim == 1 and zero.shape[0] != 1 else zero)
    if b_zero_point is not None:
        b = b - b_zero_point.astype(np.int32)
    return np.matmul(a, b).astype(np.int32)
