"""ONNX signal processing: DFT, STFT and MelWeightMatrix.

kiln has no complex dtype, and ONNX represents a complex tensor as a trailing axis of two
reals (one for a real signal), so the transforms are matrix products with cosine and sine
tables computed at import time (the lengths are static): exact to the float type's
rounding, O(n^2) per transformed axis rather than an FFT's O(n log n).
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import constant, numpy_dtype, op


def _scalar_int(node, value, what: str, default=None):
    if value is None:
        return default
    return int(constant(node, value, what).reshape(-1)[0])


def _parts(x, length: int):
    """The real and imaginary parts (None for a real signal) of `x` ([..., N, 1 or 2]), each
    [..., length]: cut to the first `length` values or zero-padded."""
    real = _fitted(x[..., 0], length)
    return real, (_fitted(x[..., 1], length) if x.shape[-1] == 2 else None)


def _fitted(part, length: int):
    size = part.shape[-1]
    if size >= length:
        return part[..., :length]
    return np.pad(part, [(0, 0)] * (part.ndim - 1) + [(0, length - size)])


def _tables(inputs: int, outputs: int, period: int, dtype, inverse: bool):
    """cos and sin of 2 pi k n / period as [inputs, outputs] matrices (the input index by
    the output index), the product reduced modulo the period first for accuracy; the sine
    negated for the forward transform."""
    n = np.arange(inputs).reshape(-1, 1)
    k = np.arange(outputs).reshape(1, -1)
    angle = 2 * np.pi * ((n * k) % period) / period
    sign = 1.0 if inverse else -1.0
    return np.cos(angle).astype(dtype), (sign * np.sin(angle)).astype(dtype)


def dft(x, length: int, inverse: bool, onesided: bool):
    """ONNX's DFT of `x` ([..., N, 1 or 2]) along axis -2 with `length` points: [..., K, 2]
    (K = length, or length // 2 + 1 one-sided), or the real [..., length, 1] of an inverse
    one-sided transform (IRFFT)."""
    dtype = x.dtype
    if inverse and onesided:
        return _irfft(x, length)
    outputs = length // 2 + 1 if onesided else length
    real, imag = _parts(x, length)
    cos, sin = _tables(length, outputs, length, dtype, inverse)
    # (r + i m)(cos + i sin), the sine signed for the direction.
    out_real = np.matmul(real, cos)
    out_imag = np.matmul(real, sin)
    if imag is not None:
        out_real = out_real - np.matmul(imag, sin)
        out_imag = out_imag + np.matmul(imag, cos)
    if inverse:
        scale = np.asarray(length, dtype)
        out_real, out_imag = out_real / scale, out_imag / scale
    return np.stack([out_real, out_imag], axis=-1)


def _irfft(x, length: int):
    """The real signal of `length` samples whose one-sided spectrum is `x` ([..., K, 2]):
    each bin between the first and the middle one stands for itself and its conjugate, so
    it counts twice; the sines of the first and middle bins vanish, and with them the
    imaginary parts numpy's irfft ignores there."""
    dtype = x.dtype
    bins = length // 2 + 1
    real, imag = _parts(x, bins)
    cos, sin = _tables(bins, length, length, np.float64, inverse=True)
    weight = np.full((bins, 1), 2.0)
    weight[0] = 1.0
    if length % 2 == 0:
        weight[-1] = 1.0
    cos, sin = (weight * cos / length).astype(dtype), (weight * sin / length).astype(dtype)
    out = np.matmul(real, cos)
    if imag is not None:
        out = out - np.matmul(imag, sin)
    return out[..., None]


def _widened(x):
    """float16 signals are transformed in float32 (sums of many terms would lose too much)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


@op("DFT", attributes=("axis", "inverse", "onesided"), since=17)
def dft_op(node, x, dft_length=None, axis=None):
    """The discrete Fourier transform along `axis` (an attribute before opset 20, an input
    from it on), forward or inverse, full or one-sided."""
    rank = x.ndim
    if node.opset >= 20:
        axis = _scalar_int(node, axis, "axis", -2)
    else:
        axis = node.attr("axis", 1)
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise node.error(f"axis {axis} is not a signal axis of a tensor of rank {rank}")
    axis %= rank
    if x.shape[-1] not in (1, 2):
        raise node.error(f"the last axis holds a real or complex value (1 or 2), got {x.shape[-1]}")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    default = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    length = _scalar_int(node, dft_length, "dft_length", default)
    if length < 1:
        raise node.error(f"dft_length must be positive, got {length}")
    result = dft(np.moveaxis(_widened(x), axis, -2), length, inverse, onesided)
    return np.moveaxis(result, -2, axis).astype(x.dtype)


@op("STFT", attributes=("onesided",), since=17)
def stft(node, signal, frame_step, window=None, frame_length=None):
    """The DFT of each frame of `frame_length` samples, `frame_step` apart, times `window`:
    [batch, frames, bins, 2]."""
    step = _scalar_int(node, frame_step, "frame_step")
    size = signal.shape[1]
    default = window.shape[0] if window is not None else size
    length = _scalar_int(node, frame_length, "frame_length", default)
    if window is not None and window.shape[0] != length:
        raise node.error(f"the window has {window.shape[0]} values but frame_length is {length}")
    if step < 1 or not 0 < length <= size:
        raise node.error(f"frame_step {step} and frame_length {length} do not fit a signal of {size} samples")
    frames = (size - length) // step + 1
    # [batch, frames, length, C]: the frames' samples, gathered by an index table.
    starts = np.arange(frames).reshape(-1, 1) * step
    framed = np.take(_widened(signal), starts + np.arange(length), axis=1)
    if window is not None:
        framed = framed * np.reshape(window.astype(framed.dtype), (length, 1))
    return dft(framed, length, False, bool(node.attr("onesided", 1))).astype(signal.dtype)


@op("MelWeightMatrix", attributes=("output_datatype",), since=17)
def mel_weight_matrix(node, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
    """Triangular filters, equally spaced on the mel scale, as a [dft_length // 2 + 1,
    num_mel_bins] matrix; the band edges are spectrogram bins computed as the reference does."""
    bins = _scalar_int(node, num_mel_bins, "num_mel_bins")
    length = _scalar_int(node, dft_length, "dft_length")
    dtype = numpy_dtype(node.attr("output_datatype", 1), node, "output_datatype")
    low = 2595 * np.log1p(lower_edge_hertz / 700) / np.log(10)
    high = 2595 * np.log1p(upper_edge_hertz / 700) / np.log(10)
    step = (high - low) / (bins + 2)
    hertz = 700 * np.expm1((np.arange(bins + 2) * step + low) / 2595 * np.log(10))
    edges = np.floor_divide((length + 1) * hertz, sample_rate).astype(np.int64)
    left, centre, right = edges[:-2], edges[1:-1], edges[2:]
    j = np.arange(length // 2 + 1).reshape(-1, 1)
    rising = (j - left).astype(np.float64) / np.maximum(centre - left, 1).astype(np.float64)
    falling = (right - j).astype(np.float64) / np.maximum(right - centre, 1).astype(np.float64)
    weights = np.where((j >= left) & (j <= centre), np.where(centre == left, 1.0, rising), 0.0)
    # The falling edge is written after the rising one, from the centre on.
    weights = np.where((j >= centre) & (j < right), falling, weights)
    return weights.astype(dtype)
