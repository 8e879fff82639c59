"""ONNX's random ops, drawn on every call from kiln.random with the node's key (see
onnx/random_state.py for where keys come from): RandomUniform, RandomNormal, their Like
forms, Bernoulli and Multinomial. Dropout's training mode (ops/activations.py) uses
`dropout_mask` below.
"""

from __future__ import annotations

import numpy as np

from kiln import random
from kiln.onnx.registry import numpy_dtype, op

_FLOAT = 1  # TensorProto.FLOAT, the generators' default output type


def _float_type(node, default) -> np.dtype:
    dtype = numpy_dtype(node.attr("dtype"), node, "dtype") if "dtype" in node else np.dtype(default)
    if dtype.kind != "f":
        raise node.error(f"dtype must be a float type, got {dtype}")
    return dtype


@op("RandomUniform", attributes=("dtype", "high", "low", "seed", "shape"))
def random_uniform(node):
    dtype = _float_type(node, np.float32)
    low, high = node.attr("low", 0.0), node.attr("high", 1.0)
    return random.uniform(node.random_key(), tuple(node.ints("shape")), dtype, low, high)


@op("RandomNormal", attributes=("dtype", "mean", "scale", "seed", "shape"))
def random_normal(node):
    dtype = _float_type(node, np.float32)
    loc, scale = node.attr("mean", 0.0), node.attr("scale", 1.0)
    return random.normal(node.random_key(), tuple(node.ints("shape")), dtype, loc, scale)


@op("RandomUniformLike", attributes=("dtype", "high", "low", "seed"))
def random_uniform_like(node, x):
    dtype = _float_type(node, x.dtype if x.dtype.kind == "f" else np.float32)
    return random.uniform(node.random_key(), x.shape, dtype, node.attr("low", 0.0), node.attr("high", 1.0))


@op("RandomNormalLike", attributes=("dtype", "mean", "scale", "seed"))
def random_normal_like(node, x):
    dtype = _float_type(node, x.dtype if x.dtype.kind == "f" else np.float32)
    return random.normal(node.random_key(), x.shape, dtype, node.attr("mean", 0.0), node.attr("scale", 1.0))


@op("Bernoulli", attributes=("dtype", "seed"), since=15)
def bernoulli(node, p):
    """1 with probability p, else 0, elementwise, in `dtype` (default: p's)."""
    dtype = numpy_dtype(node.attr("dtype"), node, "dtype") if "dtype" in node else p.dtype
    # uniform(p's dtype) < p is kiln.random.bernoulli; p is traced or a constant here
    drawn = random.uniform(node.random_key(), p.shape, p.dtype) < p
    return drawn.astype(dtype)


@op("Multinomial", attributes=("dtype", "sample_size", "seed"), since=7)
def multinomial(node, logits):
    """`sample_size` class indices per row of the unnormalized log-probabilities [batch,
    class]: the Gumbel-max trick, argmax(logits + Gumbel noise), one draw per sample."""
    dtype = numpy_dtype(node.attr("dtype", 6), node, "dtype")
    if dtype not in (np.int32, np.int64):
        raise node.error(f"dtype must be int32 or int64, got {dtype}")
    if logits.ndim != 2:
        raise node.error(f"input must be [batch_size, class_size], got shape {list(logits.shape)}")
    samples = int(node.attr("sample_size", 1))
    batch, classes = logits.shape
    u = random.uniform(node.random_key(), (batch, samples, classes), logits.dtype)
    # -log(-log(v)) for v = 1 - u in (0, 1]: Gumbel(0, 1)
    gumbel = -np.log(-np.log(np.asarray(1, logits.dtype) - u))
    return np.argmax(np.reshape(logits, (batch, 1, classes)) + gumbel, axis=-1).astype(dtype)


def dropout_mask(node, x, keep):
    """Dropout's training-mode mask: True where an element is kept, with probability `keep`
    (1 - ratio, 0-d, of x's dtype; traced when the ratio is a graph input)."""
    return random.bernoulli(node.random_key(), keep, x.shape)
