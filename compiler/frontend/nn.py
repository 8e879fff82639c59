"""Neural-network helpers numpy lacks. Each works on numpy arrays (eagerly)
and on traced values (inside ``@kiln.compile``), with the same code."""

from __future__ import annotations

import numpy as np

from kiln.dialects.tensor import conv2d_reference
from kiln.frontend.traced_ops import conv2d as traced_conv2d
from kiln.frontend.tracing import Tracer


def relu(x):
    return np.maximum(x, 0)


def sigmoid(x):
    # exp(-x) overflows to inf for very negative x, and 1 / (1 + inf) is the right limit, 0.
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def softmax(x, axis=-1):
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def logsumexp(x, axis=None, keepdims=False):
    peak = np.max(x, axis=axis, keepdims=True)
    result = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return result if keepdims else np.squeeze(result, axis=axis)


def conv2d(x, weight, stride=1, padding=0):
    """2-D convolution (cross-correlation), NCHW input, FCHW weight, zero padding."""
    if isinstance(x, Tracer) or isinstance(weight, Tracer):
        return traced_conv2d(x, weight, stride, padding)

    def pair(v):
        return (v, v) if np.ndim(v) == 0 else tuple(v)

    x, weight = np.asarray(x), np.asarray(weight)
    dtype = np.result_type(x, weight)
    return conv2d_reference(x.astype(dtype), weight.astype(dtype), pair(stride), pair(padding))
