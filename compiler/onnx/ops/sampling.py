"""ONNX sampling of an image at computed coordinates: GridSample.

The coordinates may be traced (they usually come from the model, as AffineGrid's): each
output reads its taps by a gather from the flattened image, with weights computed
elementwise, so nothing about the coordinates needs to be known at import time.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from kiln.onnx.registry import op

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
