"""ONNX activations: the elementwise ones, Softmax/LogSoftmax/Hardmax and Dropout.

Float attributes (alpha, beta, gamma...) are applied in the input's dtype so that float16
and float64 stay what they are, as the spec's T -> T requires.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.ops.elementwise import erf
from kiln.onnx.ops.randomness import dropout_mask
from kiln.onnx.registry import constant, is_traced, op


def _scalar(x, value):
    """The attribute `value` as a 0-d array of `x`'s dtype, so it does not promote `x`."""
    return np.asarray(value, x.dtype)


def _same(x, result):
    return result if result.dtype == x.dtype else result.astype(x.dtype)


def _sigmoid(x):
    # exp(-x) overflows to inf for very negative x, and 1 / (1 + inf) is the right limit, 0.
    one = _scalar(x, 1)
    return one / (one + np.exp(-x))


@op("Relu")
def relu(node, x):
    return _same(x, np.maximum(x, _scalar(x, 0)))


@op("LeakyRelu", attributes=("alpha",))
def leaky_relu(node, x):
    alpha = _scalar(x, node.attr("alpha", 0.01))
    return _same(x, np.where(x >= 0, x, x * alpha))


@op("PRelu", since=7)
def prelu(node, x, slope):
    if slope.ndim == 1 and slope.shape[0] > 1 and not _broadcasts_to(slope.shape, x.shape) and x.ndim >= 2:
        # A per-channel slope of shape [C] (opset 6's form, which onnx's version converter keeps)
        # does not broadcast against [N, C, ...]; like the reference, it applies at the channel axis.
        if slope.shape[0] != x.shape[1]:
            raise node.error(f"slope of shape {tuple(slope.shape)} does not broadcast to X of shape {tuple(x.shape)}")
        slope = np.reshape(slope, (slope.shape[0],) + (1,) * (x.ndim - 2))
    return _same(x, np.where(x >= 0, x, x * slope))


def _broadcasts_to(shape, target) -> bool:
    """Whether `shape` broadcasts to `target` (ONNX's unidirectional broadcasting)."""
    if len(shape) > len(target):
        return False
    return all(d in (1, t) for d, t in zip(shape[::-1], target[::-1]))


@op("Elu", attributes=("alpha",))
def elu(node, x):
    alpha = _scalar(x, node.attr("alpha", 1.0))
    return _same(x, np.where(x >= 0, x, alpha * np.expm1(x)))


@op("Selu", attributes=("alpha", "gamma"))
def selu(node, x):
    alpha = _scalar(x, node.attr("alpha", 1.67326319217681884765625))
    gamma = _scalar(x, node.attr("gamma", 1.05070102214813232421875))
    return _same(x, gamma * np.where(x > 0, x, alpha * np.expm1(x)))


@op("Celu", attributes=("alpha",), since=12)
def celu(node, x):
    alpha = _scalar(x, node.attr("alpha", 1.0))
    return _same(x, np.maximum(x, _scalar(x, 0)) + np.minimum(_scalar(x, 0), alpha * np.expm1(x / alpha)))


@op("Sigmoid")
def sigmoid(node, x):
    return _same(x, _sigmoid(x))


def _hard_sigmoid(x, alpha, beta):
    return np.clip(_scalar(x, alpha) * x + _scalar(x, beta), _scalar(x, 0), _scalar(x, 1))


@op("HardSigmoid", attributes=("alpha", "beta"))
def hard_sigmoid(node, x):
    return _same(x, _hard_sigmoid(x, node.attr("alpha", 0.2), node.attr("beta", 0.5)))


@op("HardSwish", since=14)
def hard_swish(node, x):
    return _same(x, x * _hard_sigmoid(x, 1 / 6, 0.5))


def _softplus(x):
    # log(1 + exp(x)) without overflow for large x.
    return np.logaddexp(_scalar(x, 0), x)


@op("Softplus")
def softplus(node, x):
    return _same(x, _softplus(x))


@op("Softsign")
def softsign(node, x):
    return _same(x, x / (_scalar(x, 1) + np.abs(x)))


@op("Gelu", attributes=("approximate",), since=20)
def gelu(node, x):
    approximate = node.attr("approximate", "none")
    half = _scalar(x, 0.5)
    if approximate == "none":
        return _same(x, half * x * (_scalar(x, 1) + erf(x / _scalar(x, np.sqrt(2)))))
    if approximate == "tanh":
        inner = _scalar(x, np.sqrt(2 / np.pi)) * (x + _scalar(x, 0.044715) * x * x * x)
        return _same(x, half * x * (_scalar(x, 1) + np.tanh(inner)))
    raise node.error(f"approximate must be 'none' or 'tanh', got {approximate!r}")


@op("Mish", since=18)
def mish(node, x):
    return _same(x, x * np.tanh(_softplus(x)))


@op("Swish", attributes=("alpha",), since=24)
def swish(node, x):
    return _same(x, x * _sigmoid(_scalar(x, node.attr("alpha", 1.0)) * x))


@op("ThresholdedRelu", attributes=("alpha",), since=10)
def thresholded_relu(node, x):
    return _same(x, np.where(x > _scalar(x, node.attr("alpha", 1.0)), x, _scalar(x, 0)))


def _axis(node, x):
    """The normalized ``axis``: opset 13 on defaults to -1; before, to 1."""
    axis = node.attr("axis", -1 if node.opset >= 13 else 1)
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise node.error(f"axis {axis} is out of range for rank {x.ndim}")
    return axis % max(x.ndim, 1)


def _per_axis(function):
    """`function(x, axis)` as the spec applies it: along `axis` from opset 13 on; before, on
    the input coerced to 2-D at `axis` (the dimensions from `axis` on form one row)."""

    def handler(node, x):
        axis = _axis(node, x)
        if node.opset >= 13 or x.ndim == 0:
            return _same(x, function(x, axis))
        rows, columns = (int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))
        flat = np.reshape(x, (rows, columns))
        return _same(x, np.reshape(function(flat, 1), x.shape))

    return handler


def _softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _hardmax(x, axis):
    """1 at the first maximum along `axis`, 0 elsewhere."""
    if x.size == 0:
        return x
    first = np.argmax(x, axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis]).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
    return (positions == first).astype(x.dtype)


op("Softmax", attributes=("axis",))(_per_axis(_softmax))
op("LogSoftmax", attributes=("axis",))(_per_axis(_log_softmax))
op("Hardmax", attributes=("axis",))(_per_axis(_hardmax))


@op("Dropout", attributes=("ratio", "seed"), since=7)
def dropout(node, x, ratio=None, training_mode=None):
    """Dropout: at inference the identity and an all-true mask; in training mode (opset 12 on,
    a true training_mode input) a mask drawn on every call, keeping each element with
    probability 1 - ratio, and the kept elements scaled by 1 / (1 - ratio), as ONNX's
    reference does."""
    training = False
    if node.opset >= 12 and training_mode is not None:
        # Opset 12 on, training_mode is an input (before, Dropout is always inference).
        training = bool(constant(node, training_mode, "training_mode"))
    if training and ratio is not None and is_traced(ratio):  # a graph input: the mask's p is traced too
        keep = _scalar(x, 1) - ratio.astype(x.dtype)
        mask = dropout_mask(node, x, keep)
        return np.where(mask, x / keep, _scalar(x, 0)), mask
    # At inference the ratio is not needed (and may be a graph input).
    ratio = 0.5 if ratio is None or not training else float(constant(node, ratio, "ratio"))
    if training and ratio > 0:
        if not 0 <= ratio < 1:
            raise node.error(f"ratio must be in [0, 1), got {ratio}")
        mask = dropout_mask(node, x, _scalar(x, 1 - ratio))
        return np.where(mask, x * _scalar(x, 1 / (1 - ratio)), _scalar(x, 0)), mask
    # The mask is bool from opset 10 on, of the input's type before.
    mask_dtype = bool if node.opset >= 10 else x.dtype
    mask = np.full_like(x, True, dtype=mask_dtype) if is_traced(x) else np.ones(x.shape, mask_dtype)
    return x, mask
