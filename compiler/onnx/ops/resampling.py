"""ONNX resampling and spatial rearrangement: Resize, Upsample, DepthToSpace, SpaceToDepth.

Resize interpolates one axis at a time, with source indices and weights computed by numpy at
import time, so its scales, sizes and roi must be known then (they set the output shape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kiln.onnx.registry import constant, op


@op("DepthToSpace", attributes=("blocksize", "mode"))
def depth_to_space(node, x):
    block, mode = node.attr("blocksize"), node.attr("mode", "DCR")
    n, c, h, w = x.shape
    if mode == "DCR":
        y = x.reshape((n, block, block, c // block**2, h, w)).transpose((0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        y = x.reshape((n, c // block**2, block, block, h, w)).transpose((0, 1, 4, 2, 5, 3))
    else:
        raise node.error(f"mode must be DCR or CRD, got {mode!r}")
    return y.reshape((n, c // block**2, h * block, w * block))


@op("SpaceToDepth", attributes=("blocksize", "mode"))
def space_to_depth(node, x):
    block, mode = node.attr("blocksize"), node.attr("mode", "DCR")
    n, c, h, w = x.shape
    blocks = x.reshape((n, c, h // block, block, w // block, block))
    if mode == "DCR":
        y = blocks.transpose((0, 3, 5, 1, 2, 4))
    elif mode == "CRD":
        y = blocks.transpose((0, 1, 3, 5, 2, 4))
    else:
        raise node.error(f"mode must be DCR or CRD, got {mode!r}")
    return y.reshape((n, c * block**2, h // block, w // block))


_RESIZE_MODES = ("nearest", "linear", "cubic")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)


@dataclass
class Resampling:
    """How Resize maps output to input coordinates and weighs the neighbours it reads."""

    mode: str = "nearest"
    coordinates: str = "half_pixel"
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    extrapolation: float = 0.0
    antialias: bool = False
    legacy_nearest: bool = False  # opsets before 11: floor when enlarging, ceil when shrinking


@op(
    "Resize",
    attributes=(
        "antialias",
        "axes",
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "keep_aspect_ratio_policy",
        "mode",
        "nearest_mode",
    ),
    since=10,
)
def resize(node, x, *inputs):
    if node.opset < 11:
        scales, roi, sizes = inputs[0], None, None
        how = Resampling(node.attr("mode", "nearest"), "asymmetric", legacy_nearest=True)
    else:
        roi, scales, sizes = (list(inputs) + [None] * 3)[:3]
        how = Resampling(
            node.attr("mode", "nearest"),
            node.attr("coordinate_transformation_mode", "half_pixel"),
            node.attr("nearest_mode", "round_prefer_floor"),
            node.attr("cubic_coeff_a", -0.75),
            bool(node.attr("exclude_outside", 0)),
            node.attr("extrapolation_value", 0.0),
            bool(node.attr("antialias", 0)),
        )
    _check_resampling(node, how)
    if how.coordinates != "tf_crop_and_resize":
        roi = None  # only read by tf_crop_and_resize (and often an empty placeholder)
    scales, sizes, roi = (_known(node, v, name) for v, name in ((scales, "scales"), (sizes, "sizes"), (roi, "roi")))
    axes = _resize_axes(node, x.ndim)
    if roi is not None and roi.size:
        full = np.concatenate([np.zeros(x.ndim), np.ones(x.ndim)])
        full[axes], full[[x.ndim + a for a in axes]] = roi[: len(axes)], roi[len(axes) :]
        roi = full.reshape(2, x.ndim).T
    else:
        roi = None
    out, factors = _resize_shape(node, x.shape, axes, scales, sizes)
    return _resample(x, out, factors, roi, how)


def _known(node, value, name):
    """An optional Resize input as a float64 numpy array, None when absent or empty."""
    value = constant(node, value, name)
    return None if value is None or value.size == 0 else value.astype(np.float64)


def _check_resampling(node, how: Resampling):
    for value, allowed, name in (
        (how.mode, _RESIZE_MODES, "mode"),
        (how.coordinates, _COORDINATE_MODES, "coordinate_transformation_mode"),
        (how.nearest, _NEAREST_MODES, "nearest_mode"),
    ):
        if value not in allowed:
            raise node.error(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    if how.mode == "cubic" and node.opset < 11:
        raise node.error("mode must be nearest or linear before opset 11")


def _resize_axes(node, ndim):
    axes = node.ints("axes")
    if axes is None:
        return list(range(ndim))
    axes = [a + ndim if a < 0 else a for a in axes]
    if sorted(set(axes)) != sorted(axes) or any(not 0 <= a < ndim for a in axes):
        raise node.error(f"axes {node.ints('axes')} are not distinct axes of a {ndim}-D input")
    return axes


def _resize_shape(node, shape, axes, scales, sizes):
    """The output shape and the scale factor of every axis, from scales or sizes (and the
    keep_aspect_ratio_policy)."""
    ndim = len(shape)
    factors, out = [1.0] * ndim, list(shape)
    if (scales is None) == (sizes is None):
        raise node.error("exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        raise node.error(f"{'scales' if scales is not None else 'sizes'} has {len(given)} values for {len(axes)} axes")
    if scales is not None:
        for axis, scale in zip(axes, scales):
            if scale <= 0:
                raise node.error(f"scales must be positive, got {scales.tolist()}")
            factors[axis], out[axis] = float(scale), int(scale * shape[axis])
        return out, factors
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    ratios = [float(size) / shape[axis] for axis, size in zip(axes, sizes)]
    if policy == "stretch":
        for axis, size, ratio in zip(axes, sizes, ratios):
            factors[axis], out[axis] = ratio, int(size)
        return out, factors
    if policy not in ("not_larger", "not_smaller"):
        raise node.error(f"keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got {policy!r}")
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    for axis in axes:
        factors[axis], out[axis] = scale, int(scale * shape[axis] + 0.5)  # rounded half up, as the spec
    return out, factors


def _resample(x, out, factors, roi, how: Resampling):
    """`x` resized axis by axis (the interpolations are separable) to shape `out`. float16
    is interpolated in float32 across all axes and rounded once, as ONNX's reference
    (float64 weights, one cast at the end) rounds once: rounding between the axes added an
    error per axis."""
    y = x.astype(np.float32) if x.dtype == np.float16 and how.mode != "nearest" else x
    for axis, (size, new_size, factor) in enumerate(zip(x.shape, out, factors)):
        bounds = None if roi is None else roi[axis]
        if new_size == size and factor == 1.0 and (bounds is None or tuple(bounds) == (0.0, 1.0)):
            continue
        y = _resample_axis(y, axis, new_size, factor, bounds, how)
    return y.astype(x.dtype) if y.dtype != x.dtype else y


def _source_coordinates(how: Resampling, size, new_size, factor, bounds):
    """Where each output position along an axis reads from in the input (float64)."""
    y = np.arange(new_size, dtype=np.float64)
    scaled = factor * size  # the output length before truncation to an integer
    mode = how.coordinates
    if mode == "align_corners":
        return np.zeros(new_size) if scaled == 1 else y * (size - 1) / (scaled - 1)
    if mode == "asymmetric":
        return y / factor
    if mode == "tf_crop_and_resize":
        start, end = bounds if bounds is not None else (0.0, 1.0)
        if scaled == 1:
            return np.full(new_size, (end - start) * (size - 1) / 2) + start * (size - 1)
        return y * (end - start) * (size - 1) / (scaled - 1) + start * (size - 1)
    if mode == "pytorch_half_pixel" and scaled == 1:
        return np.full(new_size, -0.5)
    if mode == "half_pixel_symmetric":
        offset = size / 2 * (1 - new_size / scaled)
        return offset + (y + 0.5) / factor - 0.5
    return (y + 0.5) / factor - 0.5


def _weights(how: Resampling, ratio: np.ndarray, factor: float) -> np.ndarray:
    """The weights of the taps around each source coordinate, (positions, taps), for the
    fraction `ratio` in (0, 1] past the tap before it (an exact coordinate has ratio 1)."""
    r = ratio[:, None]
    if how.mode == "nearest":
        if how.legacy_nearest:
            right = np.full_like(r, factor < 1, dtype=bool) | (r == 1)
        else:
            right = {
                "round_prefer_floor": r > 0.5,
                "round_prefer_ceil": r >= 0.5,
                "floor": r == 1,
                "ceil": np.ones_like(r, dtype=bool),
            }[how.nearest] | (r == 1)
        return np.concatenate([~right, right], axis=1).astype(np.float64)
    if how.antialias and factor < 1:
        # The kernel stretched by 1 / factor (a low-pass filter when shrinking), normalized.
        first = math.floor(-(1 if how.mode == "linear" else 2) / factor) + 1
        distance = np.abs((np.arange(first, 2 - first)[None, :] - r) * factor)
        weights = np.clip(1 - distance, 0, 1) if how.mode == "linear" else _cubic(distance, how.cubic_a)
        return weights / weights.sum(axis=1, keepdims=True)
    if how.mode == "linear":
        return np.concatenate([1 - r, r], axis=1)
    return _cubic(np.abs(np.arange(-1, 3)[None, :] - r), how.cubic_a)


def _cubic(distance, a):
    """Keys' cubic convolution kernel with parameter `a` at `distance` >= 0."""
    d2, d3 = distance**2, distance**3
    near = (a + 2) * d3 - (a + 3) * d2 + 1
    far = a * d3 - 5 * a * d2 + 8 * a * distance - 4 * a
    return np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))


def _resample_axis(x, axis, new_size, factor, bounds, how: Resampling):
    """One axis resized: each output position a weighted sum of the input at constant
    indices (edges repeated), or for nearest a plain gather."""
    size = x.shape[axis]
    source = _source_coordinates(how, size, new_size, factor, bounds)
    below = np.floor(source)
    ratio = np.where(source == below, 1.0, source - below)
    weights = _weights(how, ratio, factor)
    taps = weights.shape[1]
    # The taps straddle the source coordinate: taps // 2 at or before it, the rest after.
    first = (below - (np.where(source == below, taps // 2, taps // 2 - 1))).astype(np.int64)
    indices = first[:, None] + np.arange(taps)[None, :]
    if how.exclude_outside:
        weights = np.where((indices < 0) | (indices >= size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    indices = np.clip(indices, 0, size - 1)
    if how.mode == "nearest":
        y = np.take(x, indices[np.arange(new_size), np.argmax(weights, axis=1)], axis=axis)
    else:
        y = _interpolate(x, axis, indices, weights)
    if how.coordinates == "tf_crop_and_resize":
        outside = (source < 0) | (source > size - 1)
        if outside.any():
            mask = outside.reshape((-1,) + (1,) * (x.ndim - axis - 1))
            y = np.where(mask, np.asarray(how.extrapolation, y.dtype), y)
    return y


def _interpolate(x, axis, indices, weights):
    """sum_j weights[o, j] * x[indices[o, j]] along `axis`, as a product with the (input,
    output) matrix of the weights, computed in x's float type (float32 for others)."""
    size = x.shape[axis]
    matrix = np.zeros((size, indices.shape[0]))
    np.add.at(matrix, (indices, np.arange(indices.shape[0])[:, None]), weights)
    dtype = np.dtype(x.dtype) if np.dtype(x.dtype) in (np.float32, np.float64) else np.dtype(np.float32)
    moved = np.moveaxis(x, axis, -1).astype(dtype)
    y = np.moveaxis(np.matmul(moved, matrix.astype(dtype)), -1, axis)
    if np.dtype(x.dtype).kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.round(y), info.min, info.max)
    return y.astype(x.dtype)


@op("Upsample", attributes=("mode", "scales"), since=7)
def upsample(node, x, scales=None):
    scales = np.asarray(node.attr("scales"), np.float64) if node.opset < 9 else _known(node, scales, "scales")
    mode = node.attr("mode", "nearest")
    if mode == "bilinear":  # opset 7's other name for linear
        mode = "linear"
    how = Resampling(mode, "asymmetric", legacy_nearest=True)
    _check_resampling(node, how)
    if scales is None or len(scales) != x.ndim:
        raise node.error(f"scales must have one value per axis of the {x.ndim}-D input")
    out = [int(s * n) for s, n in zip(scales, x.shape)]
    return _resample(x, out, [float(s) for s in scales], None, how)
