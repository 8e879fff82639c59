"""ONNX quantization and bit-level ops: QuantizeLinear, DequantizeLinear, QLinearMatMul,
QLinearConv and BitCast.

Quantized values are the integer types kiln computes in (int8, uint8, int16, uint16, and
int32 to dequantize); the float8, float4, int4 and int2 types are not kiln dtypes, so a model
using them is refused where its tensors are read, or here where an attribute names one.
"""

from __future__ import annotations

import math

import numpy as np

from kiln.onnx.registry import OPS, numpy_dtype, op

# The integer types QuantizeLinear saturates to, by their ranges (the spec's table).
_QUANTIZED = (np.uint8, np.int8, np.uint16, np.int16)


def _axis(node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def _broadcastable(node, value, shape: tuple, axis: int, block_size: int):
    """A scale or zero point laid out to broadcast against an input of `shape`: a scalar (or
    one element) per tensor, a 1-D tensor per `axis`, and for blocked quantization a tensor
    of the input's rank with `shape[axis]` divided into blocks of `block_size`, each block's
    value repeated over it."""
    if value.ndim == 0 or value.size == 1:
        return np.reshape(value, ())
    rank = len(shape)
    axis = _axis(node, axis, rank)
    if block_size:
        return _blocked(node, value, shape, axis, block_size)
    if value.ndim != 1 or value.shape[0] != shape[axis]:
        raise node.error(
            f"a per-axis scale or zero point has shape [{shape[axis]}] (axis {axis} of {list(shape)}), "
            f"got {list(value.shape)}"
        )
    return np.reshape(value, tuple(shape[axis] if d == axis else 1 for d in range(rank)))


def _blocked(node, value, shape: tuple, axis: int, block_size: int):
    if block_size < 0:
        raise node.error(f"block_size must be positive, got {block_size}")
    blocks = math.ceil(shape[axis] / block_size)
    expected = tuple(blocks if d == axis else n for d, n in enumerate(shape))
    if tuple(value.shape) != expected:
        raise node.error(
            f"a blocked scale or zero point for an input of shape {list(shape)}, axis {axis} and block_size "
            f"{block_size} has shape {list(expected)}, got {list(value.shape)}"
        )
    # Element i along the axis reads block i // block_size (the last block may be shorter).
    return np.take(value, np.arange(shape[axis]) // block_size, axis=axis)


def _layout(node):
    """axis and block_size, in the opsets that have them."""
    axis = node.attr("axis", 1) if node.opset >= 13 else 1
    block_size = node.attr("block_size", 0) if node.opset >= 21 else 0
    return axis, block_size


def _quantized_dtype(node, zero_point) -> np.dtype:
    """QuantizeLinear's output type: y_zero_point's, else output_dtype's, else uint8."""
    output_dtype = node.attr("output_dtype", 0)
    wanted = numpy_dtype(output_dtype, node, "output_dtype") if output_dtype else None
    if zero_point is not None:
        if wanted is not None and wanted != zero_point.dtype:
            raise node.error(f"output_dtype is {wanted} but y_zero_point is {zero_point.dtype}")
        wanted = zero_point.dtype
    wanted = np.dtype(np.uint8 if wanted is None else wanted)
    if wanted not in [np.dtype(t) for t in _QUANTIZED]:
        raise node.error(f"kiln quantizes to int8, uint8, int16 and uint16, not {wanted}")
    return wanted


def _division_dtype(node, x, scale) -> np.dtype:
    """The type x / y_scale is computed in: `precision` where given, else y_scale's (an
    integer scale divides in the float type numpy promotes the two to)."""
    precision = node.attr("precision", 0)
    if precision:
        return numpy_dtype(precision, node, "precision")
    if scale.dtype.kind == "f":
        return scale.dtype
    return np.result_type(x.dtype, scale.dtype, np.float16)


def saturated(values, dtype):
    """`values` (float, already rounded) clipped to `dtype`'s range and cast to it. NaN, which
    the spec leaves open (and a float-to-integer conversion leaves undefined), gives the
    type's minimum, as onnxruntime and the reference give it."""
    info = np.iinfo(dtype)
    values = np.where(np.isnan(values), np.asarray(info.min, values.dtype), values)
    return np.clip(values, info.min, info.max).astype(dtype)


@op("QuantizeLinear", attributes=("axis", "saturate", "block_size", "output_dtype", "precision"), since=10)
def quantize_linear(node, x, y_scale, y_zero_point=None):
    """y = saturate(round_half_even(x / y_scale) + y_zero_point). `saturate` concerns only the
    float8 types, which kiln refuses, so every integer type saturates."""
    dtype = _quantized_dtype(node, y_zero_point)
    axis, block_size = _layout(node)
    scale = _broadcastable(node, y_scale, x.shape, axis, block_size)
    division = _division_dtype(node, x, y_scale)
    rounded = np.rint(x.astype(division) / scale.astype(division))
    # The zero point is added in at least float32: float16 cannot hold uint16's range exactly.
    wide = np.promote_types(division, np.float32)
    rounded = rounded.astype(wide)
    if y_zero_point is not None:
        rounded = rounded + _broadcastable(node, y_zero_point, x.shape, axis, block_size).astype(wide)
    return saturated(rounded, dtype)


@op("DequantizeLinear", attributes=("axis", "block_size", "output_dtype"), since=10)
def dequantize_linear(node, x, x_scale, x_zero_point=None):
    """y = (x - x_zero_point) * x_scale, in output_dtype (x_scale's type by default)."""
    output_dtype = node.attr("output_dtype", 0)
    dtype = numpy_dtype(output_dtype, node, "output_dtype") if output_dtype else x_scale.dtype
    axis, block_size = _layout(node)
    # The difference is exact in int32 (or int64 for int32 inputs); the product is taken in
    # at least float32 and rounded once to a float16 output, as the reference does.
    difference = x.astype(np.int64 if x.dtype == np.int32 else np.int32)
    if x_zero_point is not None:
        if x_zero_point.dtype != x.dtype:
            raise node.error(f"x is {x.dtype} but x_zero_point is {x_zero_point.dtype}")
        zero = _broadcastable(node, x_zero_point, x.shape, axis, block_size)
        difference = difference - zero.astype(difference.dtype)
    wide = np.promote_types(dtype, np.float32)
    scale = _broadcastable(node, x_scale, x.shape, axis, block_size)
    return (difference.astype(wide) * scale.astype(wide)).astype(dtype)


def _rows(value, operand):
    """A per-row scale or zero point of `operand` (shape [M] for an [M, K] operand) as a
    column, so that it broadcasts along the rows; scalars and N-D values broadcast as given."""
    if value.ndim == 1 and value.size != 1 and operand.ndim >= 2:
        return np.reshape(value, (-1, 1))
    return value


@op("QLinearMatMul", since=10)
def qlinear_matmul(node, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """The quantized matmul: (a - a_zero_point) @ (b - b_zero_point), accumulated in int32,
    requantized with a_scale * b_scale / y_scale (per tensor, per row of a, per column of b)."""
    accumulated = np.matmul(_centred(a, _rows(a_zero_point, a)), _centred(b, b_zero_point))
    # The multiplier is formed in the scales' type, the product in float64 (the reference's order).
    multiplier = _rows(a_scale, a) * b_scale / y_scale
    scaled = np.rint(accumulated.astype(np.float64) * multiplier.astype(np.float64))
    dtype = y_zero_point.dtype if y_zero_point is not None else a.dtype
    if y_zero_point is not None:
        scaled = scaled + _rows(y_zero_point, a).astype(np.float64)
    return saturated(scaled, dtype)


def _centred(x, zero_point):
    x = x.astype(np.int32)
    return x if zero_point is None else x - zero_point.astype(np.int32)


_CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@op("QLinearConv", attributes=_CONV_ATTRIBUTES, since=10)
def qlinear_conv(node, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, b=None):
    """The quantized convolution: ConvInteger's int32 sums plus the int32 bias B, requantized
    with x_scale * w_scale / y_scale (w_scale per tensor or per output channel)."""
    conv_integer = OPS.get("ConvInteger")
    if conv_integer is None:
        raise node.error("needs kiln's ConvInteger handler, which this build lacks")
    accumulated = conv_integer.handler(node, x, w, x_zero_point, w_zero_point)
    channels = (-1,) + (1,) * (x.ndim - 2)
    if b is not None:
        accumulated = accumulated + np.reshape(b.astype(np.int32), channels)
    if w_scale.size != 1 and (w_scale.ndim != 1 or w_scale.shape[0] != w.shape[0]):
        raise node.error(f"w_scale is a scalar or one per output channel ({w.shape[0]}), got {list(w_scale.shape)}")
    w_scale = np.reshape(w_scale, channels if w_scale.size != 1 else ())
    multiplier = x_scale * w_scale / y_scale
    scaled = np.rint(accumulated.astype(np.float64) * multiplier.astype(np.float64))
    dtype = y_zero_point.dtype if y_zero_point is not None else x.dtype
    if y_zero_point is not None:
        scaled = scaled + y_zero_point.astype(np.float64)
    return saturated(scaled, dtype)


@op("BitCast", attributes=("to",), since=26)
def bitcast(node, x):
    """The input's bits read as `to`, a type of the same width (a bool is one byte, 0 or 1)."""
    dtype = numpy_dtype(node.attr("to"), node, "to")
    if dtype.itemsize != x.dtype.itemsize:
        raise node.error(f"BitCast keeps the bit width; {x.dtype} and {dtype} differ")
    if dtype == np.bool_:
        # Any nonzero byte is a true bool; numpy's view would keep the byte as it is.
        return x.view(np.uint8) != 0
    return x.view(dtype)
