"""Neural-network helpers numpy lacks. Each works on numpy arrays (eagerly)
and on traced values (inside ``@kiln.compile``), with the same code.

The examples below assume ``import numpy as np, kiln``.
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects.tensor import conv2d_reference
from kiln.dialects.tensor_sort import stable_order
from kiln.errors import ArgumentError, ShapeError
from kiln.frontend.traced_ops import check_operand, context_of, lift, normalize_axis, promotion_sample, sort
from kiln.frontend.traced_ops import conv2d as traced_conv2d
from kiln.frontend.tracing import Tracer, user_location


def relu(x):
    """max(x, 0) elementwise, in `x`'s shape and dtype (numpy's ``np.maximum(x, 0)``; NaN stays NaN).

    >>> kiln.relu(np.array([-1.5, 0.0, 2.0], np.float32))
    array([0., 0., 2.], dtype=float32)
    """
    return np.maximum(x, 0)


def sigmoid(x):
    """The logistic function 1 / (1 + exp(-x)) elementwise, in `x`'s shape; float inputs keep
    their dtype, integers give float64 (numpy's division rules). Very negative `x` gives 0,
    not a warning.

    >>> kiln.sigmoid(np.array([-1000.0, 0.0, 1000.0]))
    array([0. , 0.5, 1. ])
    """
    # exp(-x) overflows to inf for very negative x, and 1 / (1 + inf) is the right limit, 0.
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis` (an int or tuple of ints; numpy's axis rules, so an
    axis out of range raises), computed as exp(x - max) so large inputs do not overflow.
    Same shape as `x`; float inputs keep their dtype.

    >>> kiln.softmax(np.array([[1.0, 1.0], [0.0, 1000.0]]))
    array([[0.5, 0.5],
           [0. , 1. ]])
    """
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over `axis` (None: every element), computed as max + log(sum(exp(x -
    max))) so that large inputs do not overflow; the shape is numpy's reduction shape
    (`keepdims` as in ``np.sum``).

    >>> float(kiln.logsumexp(np.array([1000.0, 1000.0])))
    1000.6931471805599
    """
    peak = np.max(x, axis=axis, keepdims=True)
    result = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return result if keepdims else np.squeeze(result, axis=axis)


def top_k(x, k, axis=-1):
    """The `k` largest elements of `x` along `axis` and their indices: ``(values, indices)``,
    each of `x`'s shape with `axis` cut to `k`; values in `x`'s dtype, largest first, indices
    int64. Ties go to the lower index and NaN counts as the largest value, as in
    ``jax.lax.top_k`` and ``torch.topk``. `k` must be a Python int in [0, n] (a negative or
    non-integer k is a ``kiln.ArgumentError``, one past the axis a ``kiln.ShapeError``).
    Traced, it is a stable descending sort (``kiln.sort``) cut to `k`, which canonicalization
    makes a selection for k <= 16 (O(n k): one pass over each row keeping the k best in
    registers) and a merge sort otherwise (O(n log n)); its values are differentiable.

    >>> kiln.top_k(np.array([1.0, 3.0, 2.0, 3.0]), 2)
    (array([3., 3.]), array([1, 3]))
    """
    traced = isinstance(x, Tracer)
    x = x if traced else np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if isinstance(k, (bool, Tracer)) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ArgumentError(f"kiln.top_k: k must be a non-negative Python int, got {k!r}", user_location())
    if k > n:
        raise ShapeError(f"kiln.top_k: k={k} is more than the axis' {n} elements", user_location())
    cut = (slice(None),) * axis + (slice(0, int(k)),)
    # one sort for the permutation; the k values are gathered through it (O(k) a row)
    if traced:
        indices = sort(x, axis, descending=True, with_values=False)[1][cut]
    else:
        indices = np.moveaxis(stable_order(np.moveaxis(x, axis, -1), descending=True), -1, axis)[cut]
    return np.take_along_axis(x, indices, axis), indices


def conv2d(x, weight, stride=1, padding=0, groups=1):
    """2-D convolution (cross-correlation, as in deep-learning frameworks, not flipped).

    `x` is (N, C, H, W) and `weight` (F, C / groups, KH, KW); `stride` and `padding` are ints
    or (height, width) pairs, padding with zeros. `groups` (a positive int dividing C and F)
    convolves each of that many groups of channels apart: filter f reads the channels of
    group f // (F / groups); groups=C with F=C is a depthwise convolution. The result is (N,
    F, (H + 2*ph - KH) // sh + 1, (W + 2*pw - KW) // sw + 1) in numpy's promoted dtype of the
    two. Channel counts that do not fit raise ``kiln.ShapeError``, a `groups` that is not a
    positive int ``kiln.ArgumentError``.

    >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
    >>> kiln.conv2d(x, np.ones((1, 1, 2, 2)), stride=2)
    array([[[[10., 18.],
             [42., 50.]]]])
    >>> kiln.conv2d(np.ones((1, 2, 3, 3)), np.ones((2, 1, 3, 3)), groups=2)[0, :, 0, 0]
    array([9., 9.])
    """
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ArgumentError(f"kiln.conv2d: groups must be a positive int, got {groups!r}", user_location())
    groups = int(groups)
    if isinstance(x, Tracer) or isinstance(weight, Tracer):
        if groups == 1:
            return traced_conv2d(x, weight, stride, padding)
        return _traced_grouped_conv2d(x, weight, stride, padding, groups)

    x, weight = np.asarray(x), np.asarray(weight)
    dtype = np.result_type(x, weight)
    return conv2d_reference(x.astype(dtype), weight.astype(dtype), _pair(stride), _pair(padding), groups)


def _pair(v):
    return (int(v), int(v)) if np.ndim(v) == 0 else tuple(int(e) for e in v)


def _traced_grouped_conv2d(x, weight, stride, padding, groups):
    """``traced_conv2d`` with a groups attribute on the op."""
    ctx = context_of((x, weight))
    x, weight = check_operand(x), check_operand(weight)
    dtype = np.result_type(promotion_sample(x), promotion_sample(weight))
    x, weight = lift(ctx, x, dtype), lift(ctx, weight, dtype)
    attributes = {"stride": _pair(stride), "padding": _pair(padding), "groups": groups}
    return ctx.emit(T.Conv2DOp, [x, weight], attributes)
