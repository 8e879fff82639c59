"""ONNX normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
RMSNormalization, MeanVarianceNormalization and LRN.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.ops.windows import pad_spatial, same_dtype
from kiln.onnx.registry import numpy_dtype, op


def _per_channel(value, ndim):
    """A (C,) vector shaped to broadcast along axis 1 of an `ndim`-D input."""
    return value.reshape((-1,) + (1,) * (ndim - 2))


@op("BatchNormalization", attributes=("epsilon", "is_test", "momentum", "spatial", "training_mode"), since=6)
def batch_normalization(node, x, scale, bias, mean, var):
    epsilon = np.asarray(node.attr("epsilon", 1e-5), x.dtype)
    if node.opset < 9 and not node.attr("spatial", 1):
        # spatial=0: one statistic per element of (C, D1, ...), broadcast over the batch only.
        shaped = lambda v: v.astype(x.dtype)  # noqa: E731
    else:
        shaped = lambda v: _per_channel(v.astype(x.dtype), x.ndim)  # noqa: E731
    if node.opset >= 14 and node.attr("training_mode", 0):
        return _batch_normalization_training(node, x, shaped, scale, bias, mean, var, epsilon)
    if (node.opset < 7 and not node.attr("is_test", 0)) or (node.opset < 14 and len(_outputs(node)) > 1):
        raise node.error("training mode (the statistics and running averages of opsets before 14) is not supported")
    inv = shaped(scale) / np.sqrt(shaped(var) + epsilon)
    return same_dtype(x, (x - shaped(mean)) * inv + shaped(bias))


def _outputs(node):
    return [name for name in node.proto.output if name]


def _batch_normalization_training(node, x, shaped, scale, bias, mean, var, epsilon):
    """Opset 14's training mode: normalized by the batch's own statistics (over every axis but
    the channels), and the running mean and variance moved toward them by 1 - momentum."""
    axes = (0, *range(2, x.ndim))
    batch_mean, centered, batch_var = _moments(x, axes)
    y = centered / np.sqrt(batch_var + epsilon) * shaped(scale) + shaped(bias)
    momentum = np.asarray(node.attr("momentum", 0.9), x.dtype)
    running_mean = mean * momentum + batch_mean.reshape(mean.shape) * (1 - momentum)
    running_var = var * momentum + batch_var.reshape(var.shape) * (1 - momentum)
    return same_dtype(x, y), same_dtype(mean, running_mean), same_dtype(var, running_var)


def _moments(x, axes):
    mean = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    centered = x - mean
    return mean, centered, np.mean(centered * centered, axis=axes, keepdims=True, dtype=x.dtype)


@op("InstanceNormalization", attributes=("epsilon",))
def instance_normalization(node, x, scale, bias):
    _, centered, var = _moments(x, tuple(range(2, x.ndim)))
    y = centered / np.sqrt(var + np.asarray(node.attr("epsilon", 1e-5), x.dtype))
    return same_dtype(x, y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim))


def _stash_dtype(node):
    dtype = numpy_dtype(node.attr("stash_type", 1), node, "stash_type")
    if dtype.kind != "f":
        raise node.error(f"stash_type must be a float type, got {dtype}")
    return dtype


@op("LayerNormalization", attributes=("axis", "epsilon", "stash_type"), since=17)
def layer_normalization(node, x, scale, bias=None):
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    stash = _stash_dtype(node)
    xs = x.astype(stash)
    mean, centered, var = _moments(xs, tuple(range(axis, x.ndim)))
    inv_std = np.reciprocal(np.sqrt(var + np.asarray(node.attr("epsilon", 1e-5), stash)))
    y = (centered * inv_std).astype(x.dtype) * scale
    if bias is not None:
        y = y + bias
    return same_dtype(x, y), mean, inv_std


@op("RMSNormalization", attributes=("axis", "epsilon", "stash_type"), since=23)
def rms_normalization(node, x, scale):
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    stash = _stash_dtype(node)
    xs = x.astype(stash)
    mean_square = np.mean(xs * xs, axis=tuple(range(axis, x.ndim)), keepdims=True, dtype=stash)
    inv_rms = np.reciprocal(np.sqrt(mean_square + np.asarray(node.attr("epsilon", 1e-5), stash)))
    return same_dtype(x, (xs * inv_rms).astype(x.dtype) * scale)


@op("MeanVarianceNormalization", attributes=("axes",), since=9)
def mean_variance_normalization(node, x):
    axes = tuple(node.ints("axes", [0, 2, 3]))
    mean = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    # As the spec's function body: the variance as E[x^2] - E[x]^2, and 1e-9 added to its root.
    variance = np.mean(x * x, axis=axes, keepdims=True, dtype=x.dtype) - mean * mean
    return same_dtype(x, (x - mean) / (np.sqrt(variance) + np.asarray(1e-9, x.dtype)))


@op("LRN", attributes=("alpha", "beta", "bias", "size"))
def lrn(node, x):
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    squares = pad_spatial((x * x).swapaxes(1, -1), [before], [after]).swapaxes(1, -1)
    channels = x.shape[1]
    total = squares[:, 0:channels]
    for k in range(1, size):
        total = total + squares[:, k : k + channels]
    scale = np.asarray(bias, x.dtype) + np.asarray(alpha / size, x.dtype) * total
    return same_dtype(x, x / scale ** np.asarray(beta, x.dtype))
