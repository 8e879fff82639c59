"""ONNX pools (N-D, NCHW): MaxPool, MaxUnpool, AveragePool, LpPool and the global pools.

Pools combine the taps of the padded input elementwise (max, sum). Window counts (the
average pool's divisor) and index grids (MaxPool's Indices) are computed by numpy at import
time from the shapes alone, so they are constants of the traced program.

A float16 average accumulates its window in float32 and rounds once, as ONNX's reference
does (``np.average`` / ``np.mean`` of the window, which numpy takes in float32): rounding
after every tap lost accuracy and, with a float16 <-> float32 conversion per tap and
element, made LLVM's optimizer take seconds on a 16 x 16 window. The input is widened once.
LpPool follows the same rule (the spec's (sum |x|^p)^(1/p), in float32, one rounding):
ONNX's reference rounds |x|^p and the window's mean to float16 on the way, so it can be a
few ulps away, and infinite where a power passes 65504 (|x| = 300, p = 2) but the result
does not.
"""

from __future__ import annotations

import math

import numpy as np

from kiln.onnx.ops.windows import Window, pad_spatial, same_dtype, sliding_window, window_tap
from kiln.onnx.registry import constant, op, traced_if


def _pool_window(node, x):
    kernel = node.ints("kernel_shape")
    if kernel is None:
        raise node.error("the required attribute 'kernel_shape' is missing")
    return sliding_window(node, x.shape[2:], kernel, bool(node.attr("ceil_mode", 0)))


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@op("MaxPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"))
def max_pool(node, x):
    window = _pool_window(node, x)
    # float16 is widened once (a maximum is exact in either width), not converted per tap
    padded = pad_spatial(_accumulated(x), window.begin, window.end, _lowest(np.dtype(x.dtype)))
    taps = [window_tap(padded, offset, window) for offset in window.offsets()]
    wants_indices = len(node.proto.output) > 1 and node.proto.output[1]
    if not wants_indices:
        y = taps[0]
        for tap in taps[1:]:
            y = np.maximum(y, tap)
        return same_dtype(x, y)
    stacked = np.stack(taps, axis=-1)
    y = same_dtype(x, np.max(stacked, axis=-1))
    # The flat index (over N, C and the spatial axes, in row-major order or, for
    # storage_order=1, the spatial axes column-major) of each tap's element, as a constant.
    spatial = x.shape[2:]
    size = math.prod(spatial)
    order = "F" if node.attr("storage_order", 0) else "C"
    positions = np.arange(size, dtype=np.int64).reshape(spatial, order=order)
    grid = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * len(spatial)) * size
    grid = pad_spatial(grid + positions, window.begin, window.end, -1)
    index_taps = np.stack([window_tap(grid, offset, window) for offset in window.offsets()], axis=-1)
    chosen = np.argmax(stacked, axis=-1)
    indices = np.take_along_axis(index_taps, chosen[..., None], axis=-1)[..., 0]
    return y, indices.astype(np.int64)


@op("MaxUnpool", attributes=("kernel_shape", "pads", "strides"), since=9)
def max_unpool(node, x, indices, output_shape=None):
    n = x.ndim - 2
    kernel, strides = node.ints("kernel_shape"), node.ints("strides") or [1] * n
    pads = node.ints("pads") or [0] * (2 * n)
    spatial = [(size - 1) * s + k - b - e for size, s, k, b, e in zip(x.shape[2:], strides, kernel, pads[:n], pads[n:])]
    shape = tuple(x.shape[:2]) + tuple(spatial)
    # Indices are flat positions in the pooled tensor's input (as MaxPool gives them); every
    # other element is zero.
    flat = traced_if(np.zeros_like(x, shape=(math.prod(shape),)), indices)
    flat[indices.reshape(-1)] = x.reshape(-1)
    y = flat.reshape(shape)
    if output_shape is None:
        return y
    # A larger output_shape (the pooled input's, where the pool dropped a border) keeps the
    # unpooled values at its start, as the reference does.
    wanted = [int(v) for v in constant(node, output_shape, "output_shape")]
    extra = [w - size for w, size in zip(wanted, shape)]
    if len(wanted) != len(shape) or min(extra) < 0:
        raise node.error(f"output_shape {wanted} is smaller than the unpooled shape {list(shape)}")
    return np.pad(y, [(0, e) for e in extra]) if any(extra) else y


def _window_counts(x, window: Window, include_pad: bool):
    """How many elements each window averages over (a numpy constant): the input's, plus with
    `include_pad` the model's explicit padding, never the extra that ceil mode adds."""
    inside = np.ones(x.shape[2:], np.int64)
    if include_pad:
        inside = pad_spatial(inside, window.begin, [min(p, e) for p, e in zip(window.pads_end, window.end)], 1)
        inside = pad_spatial(
            inside, [0] * len(window.begin), [e - min(p, e) for p, e in zip(window.pads_end, window.end)]
        )
    else:
        inside = pad_spatial(inside, window.begin, window.end)
    return sum(window_tap(inside, offset, window) for offset in window.offsets())


def _tap_sum(x, window: Window):
    padded = pad_spatial(x, window.begin, window.end)
    total = None
    for offset in window.offsets():
        tap = window_tap(padded, offset, window)
        total = tap if total is None else total + tap
    return total


@op(
    "AveragePool",
    attributes=("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"),
)
def average_pool(node, x):
    window = _pool_window(node, x)
    counts = _window_counts(x, window, bool(node.attr("count_include_pad", 0)))
    wide = _accumulated(x)
    return same_dtype(x, _tap_sum(wide, window) / counts.astype(wide.dtype))


def _accumulated(x):
    """`x` in the dtype a window accumulates in: float32 for float16, else its own."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


@op("LpPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"))
def lp_pool(node, x):
    window = _pool_window(node, x)
    p = node.attr("p", 2)
    return same_dtype(x, _lp(_tap_sum(_abs_power(_accumulated(x), p), window), p))


def _abs_power(x, p):
    return np.abs(x) ** np.asarray(p, x.dtype)


def _lp(total, p):
    return total ** np.asarray(1.0 / p, total.dtype)


@op("GlobalAveragePool")
def global_average_pool(node, x):
    wide = _accumulated(x)
    return same_dtype(x, np.mean(wide, axis=tuple(range(2, x.ndim)), keepdims=True, dtype=wide.dtype))


@op("GlobalMaxPool")
def global_max_pool(node, x):
    return np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalLpPool", attributes=("p",), since=2)
def global_lp_pool(node, x):
    p = node.attr("p", 2)
    wide = _accumulated(x)
    total = np.sum(_abs_power(wide, p), axis=tuple(range(2, x.ndim)), keepdims=True, dtype=wide.dtype)
    return same_dtype(x, _lp(total, p))
