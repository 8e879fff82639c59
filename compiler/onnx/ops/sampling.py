"""ONNX sampling of an image at computed coordinates: GridSample and RoiAlign.

The coordinates may be traced (they usually come from the model, as AffineGrid's): each
output reads its taps by a gather from the flattened image, with weights computed
elementwise, so nothing about the coordinates needs to be known at import time.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from kiln.onnx.registry import constant, op, traced_if

# Opset 16 names the modes after 2-D images; opset 20 generalizes them to N-D.
_MODES_16 = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}
_MODES_20 = {"linear": "linear", "cubic": "cubic", "nearest": "nearest"}
_CUBIC_ALPHA = -0.75


@op("GridSample", attributes=("align_corners", "mode", "padding_mode"), since=16)
def grid_sample(node, x, grid):
    """Samples `x` ([N, C, *D]) at `grid`'s ([N, *O, r]) normalized coordinates, the last
    axis in x, y, z order (the spatial axes reversed), with nearest, (multi)linear or cubic
    interpolation; out-of-range taps read zeros, the border or the reflection."""
    modes = _MODES_16 if node.opset < 20 else _MODES_20
    name = node.attr("mode", "bilinear" if node.opset < 20 else "linear")
    if name not in modes:
        raise node.error(f"mode must be one of {sorted(modes)} in opset {node.opset}, got {name!r}")
    mode = modes[name]
    padding = node.attr("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        raise node.error(f"padding_mode must be zeros, border or reflection, got {padding!r}")
    rank = x.ndim - 2
    if node.opset < 20 and rank != 2:
        raise node.error(f"GridSample samples 2-D images before opset 20; the input has {rank} spatial axes")
    if grid.ndim != rank + 2 or grid.shape[-1] != rank or grid.shape[0] != x.shape[0]:
        raise node.error(f"grid of shape {list(grid.shape)} does not fit an input of shape {list(x.shape)}")
    dims = x.shape[2:]
    align = bool(node.attr("align_corners", 0))
    lows = [0.0 if align else -0.5 for _ in dims]
    highs = [d - 1.0 if align else d - 0.5 for d in dims]
    # Coordinates in float32 whatever the grid's type, as the reference computes them.
    coords = []
    for i, d in enumerate(dims):
        g = grid[..., rank - 1 - i].astype(np.float32)
        c = (g + 1) / 2 * (d - 1) if align else ((g + 1) * d - 1) / 2
        if mode == "nearest":
            c = np.rint(c)
        coords.append(_inside(c, lows[i], highs[i], d, padding))
    flat = np.reshape(x, x.shape[:2] + (-1,))
    if mode == "nearest":
        return _read(flat, [c.astype(np.int64) for c in coords], dims, lows, highs, padding)
    taps = 2 if mode == "linear" else 4
    starts = [np.floor(c) for c in coords]
    weights = [_weights(c - s, mode) for c, s in zip(coords, starts)]
    first = -1 if mode == "cubic" else 0
    total = None
    for offsets in itertools.product(range(taps), repeat=rank):
        indices = [(s + (first + k)).astype(np.int64) for s, k in zip(starts, offsets)]
        weight = math.prod(w[k] for w, k in zip(weights, offsets)).astype(x.dtype)
        term = _read(flat, indices, dims, lows, highs, padding) * weight[:, None]
        total = term if total is None else total + term
    return total


def _inside(c, low: float, high: float, size: int, padding: str):
    """A coordinate outside [low, high] clamped to the image (border) or reflected into the
    range (reflection); left as it is for zeros."""
    if padding == "border":
        return np.where((c < low) | (c > high), np.clip(c, 0, size - 1), c)
    if padding == "reflection":
        return _reflect(c, low, high)
    return c


def _reflect(c, low: float, high: float):
    """`c` reflected at `low` and `high` until it lies between them."""
    span = np.float32(high - low)
    below, above = low - c, c - high
    outside = np.maximum(below, above)
    folds = np.floor(np.maximum(outside, 0) / span)
    rest = np.maximum(outside, 0) - folds * span
    even = np.mod(folds, 2) == 0
    from_below = np.where(even, low + rest, high - rest)
    from_above = np.where(even, high - rest, low + rest)
    return np.where(below > 0, from_below, np.where(above > 0, from_above, c)).astype(c.dtype)


def _weights(t, mode: str) -> list:
    """The interpolation weights of the taps around a point `t` past the first (of two) or
    second (of four) tap."""
    if mode == "linear":
        return [1 - t, t]
    a = _CUBIC_ALPHA
    return [
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]


def _read(flat, indices: list, dims, lows, highs, padding: str):
    """flat ([N, C, prod(D)]) at the integer `indices` (each [N, *O]): [N, C, *O], with an
    index outside the image read as 0 (zeros), the nearest edge (border) or its reflection."""
    valid = None
    position = None
    for i, (index, size) in enumerate(zip(indices, dims)):
        if padding == "zeros":
            inside = (index >= 0) & (index < size)
            valid = inside if valid is None else valid & inside
            index = np.clip(index, 0, size - 1)
        elif padding == "border":
            index = np.clip(index, 0, size - 1)
        else:
            reflected = _reflect(index.astype(np.float32), lows[i], highs[i])
            index = np.clip(np.trunc(reflected).astype(np.int64), 0, size - 1)
        position = index if position is None else position * size + index
    batch, channels = flat.shape[:2]
    out_shape = position.shape[1:]
    gathered = np.take_along_axis(
        flat, np.broadcast_to(np.reshape(position, (batch, 1, -1)), (batch, channels, math.prod(out_shape))), axis=2
    )
    gathered = np.reshape(gathered, (batch, channels) + tuple(out_shape))
    if valid is not None:
        gathered = np.where(valid[:, None], gathered, np.zeros((), flat.dtype))
    return gathered


@op(
    "RoiAlign",
    attributes=(
        "coordinate_transformation_mode",
        "mode",
        "output_height",
        "output_width",
        "sampling_ratio",
        "spatial_scale",
    ),
    since=10,
)
def roi_align(node, x, rois, batch_indices):
    """Each region of interest ([x1, y1, x2, y2] of the image at its batch index) divided
    into output_height x output_width bins, each the average (or max) of bilinear samples
    on a regular grid in the bin: [num_rois, C, output_height, output_width]. With
    sampling_ratio 0 the grid adapts to each region's size, which must then be known at
    import time; the regions and indices may be traced otherwise."""
    mode = node.attr("mode", "avg")
    default_transform = "half_pixel" if node.opset >= 16 else "output_half_pixel"
    transform = node.attr("coordinate_transformation_mode", default_transform)
    if mode not in ("avg", "max") or transform not in ("half_pixel", "output_half_pixel"):
        raise node.error(f"mode {mode!r} or coordinate_transformation_mode {transform!r} is not RoiAlign's")
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
        raise node.error(f"RoiAlign takes [N, C, H, W] and [num_rois, 4], got {list(x.shape)}, {list(rois.shape)}")
    out_h, out_w = node.attr("output_height", 1), node.attr("output_width", 1)
    ratio = node.attr("sampling_ratio", 0)
    if ratio == 0:
        rois = constant(node, rois, "rois (sampling_ratio 0 adapts the sampling grid to them)")
    scale = node.attr("spatial_scale", 1.0)
    half_pixel = transform == "half_pixel"
    height, width = x.shape[2:]
    dtype = rois.dtype
    corners = rois * np.asarray(scale, dtype) - np.asarray(0.5 if half_pixel else 0.0, dtype)
    start_w, start_h, end_w, end_h = (corners[:, k] for k in range(4))
    roi_w, roi_h = end_w - start_w, end_h - start_h
    if not half_pixel:
        roi_w, roi_h = np.maximum(roi_w, 1.0).astype(dtype), np.maximum(roi_h, 1.0).astype(dtype)
    bin_h, bin_w = roi_h / out_h, roi_w / out_w
    grid_h, grid_w = _grid(ratio, roi_h, out_h, rois.shape[0]), _grid(ratio, roi_w, out_w, rois.shape[0])
    ys = _samples(start_h, bin_h, out_h, grid_h, height)  # each [R, out, G]
    xs = _samples(start_w, bin_w, out_w, grid_w, width)
    # [R, out_h, out_w, Gh, Gw] after broadcasting the y and x factors against each other.
    ys = [v[:, :, None, :, None] for v in ys]
    xs = [v[:, None, :, None, :] for v in xs]
    (y_low, y_high, ly, y_valid, y_used), (x_low, x_high, lx, x_valid, x_used) = ys, xs
    valid = (y_valid & x_valid).astype(dtype)
    used = y_used & x_used
    image = np.take(
        traced_if(np.reshape(x, x.shape[:2] + (-1,)), batch_indices), batch_indices.astype(np.int64), axis=0
    )
    terms = [
        (y_low, x_low, (1 - ly) * (1 - lx)),
        (y_low, x_high, (1 - ly) * lx),
        (y_high, x_low, ly * (1 - lx)),
        (y_high, x_high, ly * lx),
    ]
    values = [_gathered(image, yi * width + xi) * (w * valid)[:, None] for yi, xi, w in terms]
    if mode == "avg":
        count = np.maximum(grid_h * grid_w, 1).astype(dtype)
        total = (values[0] + values[1] + values[2] + values[3]) * used[:, None]
        result = np.sum(total, axis=(-2, -1)) / np.reshape(count, (-1, 1, 1, 1))
    else:
        # Each sample's largest weighted corner, as onnxruntime computes the max mode.
        best = np.maximum(np.maximum(values[0], values[1]), np.maximum(values[2], values[3]))
        result = np.max(np.where(used[:, None], best, -np.inf), axis=(-2, -1))
    return result.astype(x.dtype)


def _grid(ratio: int, size, bins: int, count: int):
    """Samples per bin along an axis: sampling_ratio, or ceil(size / bins) per region."""
    if ratio > 0:
        return np.full((count,), ratio, np.int64)
    return np.ceil(np.asarray(size) / bins).astype(np.int64)


def _samples(start, bin_size, bins: int, grid, limit: int):
    """The bilinear taps of each sample along one axis: low and high index, the fraction
    past the low one, whether the sample lies in the image's reach, and whether it is one
    of its region's grid (grids of fewer samples leave the rest unused)."""
    most = int(np.max(grid))  # known at import time: sampling_ratio, or from constant regions
    k = np.arange(bins).reshape(1, -1, 1)
    i = np.arange(most).reshape(1, 1, -1)
    per = (bin_size / np.maximum(grid, 1).astype(bin_size.dtype))[:, None, None]
    position = start[:, None, None] + k * bin_size[:, None, None] + (i + 0.5) * per
    position = position.astype(start.dtype)
    reach = (position >= -1.0) & (position <= limit)
    position = np.maximum(position, 0)
    low = np.floor(position).astype(np.int64)
    last = low >= limit - 1
    low = np.where(last, limit - 1, low)
    high = np.where(last, limit - 1, low + 1)
    fraction = np.where(last, 0, position - low).astype(start.dtype)
    used = np.broadcast_to(i < grid[:, None, None], position.shape)
    return low, high, fraction, reach, used


def _gathered(image, position):
    """image ([R, C, H*W]) at `position` ([R, *S]): [R, C, *S]."""
    rois, channels = image.shape[:2]
    shape = position.shape[1:]
    flat = np.broadcast_to(np.reshape(position, (rois, 1, -1)), (rois, channels, math.prod(shape)))
    return np.reshape(np.take_along_axis(image, flat, axis=2), (rois, channels) + tuple(shape))
