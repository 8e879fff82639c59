"""ONNX convolution, pooling, normalization and resampling ops (N-D, NCHW layout).

Convolutions and pools are built from the kernel's taps: for each kernel offset, one strided
slice of the padded input (``_tap``) is an (N, C, *output) view of every window's element at
that offset. Pools combine the taps elementwise (max, sum), convolutions contract each tap
with the kernel's weights at that offset and add. 2-D convolutions without dilation and with
few groups go to ``kiln.conv2d``, which lowers to a dedicated kernel. Window counts (the
average pool's divisor) and index grids (MaxPool's Indices) are computed by numpy at import
time from the shapes alone, so they are constants of the traced program.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from kiln.frontend.nn import conv2d as kiln_conv2d
from kiln.onnx.registry import constant, numpy_dtype, op

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
# Grouped 2-D convolutions up to this many groups run one kiln.conv2d per group; more groups
# are a sum over the kernel's taps. Each kiln.conv2d is a kernel of its own, and compiling
# many is slow: ShuffleNet (33 convolutions of 4 groups) compiled in 84 s (and ran in 30 ms)
# with a conv2d per group, in 7.5 s (170 ms) as taps; AlexNet's 2 groups are faster as conv2d.
_MAX_CONV2D_GROUPS = 2


def _same(x, result):
    """`result` in `x`'s dtype (ONNX's T -> T, where numpy would promote)."""
    return result if result.dtype == x.dtype else result.astype(x.dtype)


@dataclass
class Window:
    """Where a sliding window goes along each spatial axis: kernel size, stride, dilation, the
    padding before and after the input (after may be more than the model's pads in ceil
    mode, or negative to crop), the output size, and the padding after that the model asked
    for (what an average pool with count_include_pad counts)."""

    kernel: list
    strides: list
    dilations: list
    begin: list
    end: list
    out: list
    pads_end: list | None = None

    def offsets(self):
        """Every kernel offset, in row-major order (the order ONNX's references scan a window)."""
        return itertools.product(*(range(k) for k in self.kernel))


def _window(node, spatial, kernel, ceil_mode: bool = False) -> Window:
    """The window of a Conv or pool node over an input of spatial shape `spatial`, from its
    strides, dilations and pads or auto_pad."""
    n = len(spatial)
    strides = node.ints("strides") or [1] * n
    dilations = node.ints("dilations") or [1] * n
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise node.error(f"auto_pad must be one of {', '.join(_AUTO_PADS)}, got {auto_pad!r}")
    if len(kernel) != n or len(strides) != n or len(dilations) != n:
        raise node.error(f"kernel_shape, strides and dilations must have {n} values for a {n}-D input")
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-size // s) for size, s in zip(spatial, strides)]
        totals = [max(0, (o - 1) * s + e - size) for o, s, e, size in zip(out, strides, extents, spatial)]
        # SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning.
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
        pads_end = [t - b for t, b in zip(totals, begin)]
    else:
        pads = node.ints("pads") or [0] * (2 * n) if auto_pad == "NOTSET" else [0] * (2 * n)
        if len(pads) != 2 * n:
            raise node.error(f"pads must have {2 * n} values for a {n}-D input, got {pads}")
        begin, pads_end = pads[:n], pads[n:]
        out = []
        for size, b, e, extent, s in zip(spatial, begin, pads_end, extents, strides):
            span = size + b + e - extent
            count = -(-span // s) + 1 if ceil_mode else span // s + 1
            if ceil_mode and (count - 1) * s >= size + b:
                count -= 1  # the last window must start inside the input or its leading pad
            out.append(count)
    if any(o < 1 for o in out):
        raise node.error(f"the window does not fit the input: output spatial shape {out}")
    # The padding after the input that the last window actually reaches.
    end = [(o - 1) * s + e - size - b for o, s, e, size, b in zip(out, strides, extents, spatial, begin)]
    return Window(list(kernel), strides, dilations, begin, end, out, pads_end)


def _pad(x, begin, end, value=0):
    """`x` padded on its last len(begin) axes with `value` (negative amounts crop)."""
    n = len(begin)
    lead = x.ndim - n
    crop = tuple([slice(None)] * lead + [slice(max(-b, 0), None if e >= 0 else e) for b, e in zip(begin, end)])
    if any(b < 0 for b in begin) or any(e < 0 for e in end):
        x = x[crop]
    widths = [(0, 0)] * lead + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if not any(w for pair in widths for w in pair):
        return x
    return np.pad(x, widths, mode="constant", constant_values=value)


def _tap(padded, offset, window: Window):
    """The element at kernel `offset` of every window: a strided slice of the padded input."""
    spatial = tuple(
        slice(k * d, k * d + s * (o - 1) + 1, s)
        for k, d, s, o in zip(offset, window.dilations, window.strides, window.out)
    )
    return padded[(Ellipsis, *spatial)]


def _kernel_shape(node, w_or_x_spatial):
    kernel = node.ints("kernel_shape")
    return list(w_or_x_spatial) if kernel is None else kernel


# -- convolutions ------------------------------------------------------------------------------


@op("Conv", attributes=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
def conv(node, x, w, b=None):
    kernel = _kernel_shape(node, w.shape[2:])
    if list(w.shape[2:]) != kernel:
        raise node.error(f"kernel_shape {kernel} does not match the weight's shape {list(w.shape)}")
    group = node.attr("group", 1)
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise node.error(f"input channels {x.shape[1]} and weight shape {list(w.shape)} do not fit group={group}")
    window = _window(node, x.shape[2:], kernel)
    y = _convolve(x, w, window, group)
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * (x.ndim - 2))
    return _same(x, y)


def _convolve(x, w, window: Window, group: int):
    """The cross-correlation of `x` (N, C, *spatial) with `w` (M, C / group, *kernel) over
    `window`: (N, M, *window.out)."""
    n = x.ndim - 2
    if n == 1:  # as a 2-D convolution of height 1, for kiln.conv2d's kernel
        flat = Window(*([first, *rest] for first, rest in zip((1, 1, 1, 0, 0, 1), _fields(window))))
        return _convolve(x[:, :, None], w[:, :, None], flat, group)[:, :, 0]
    if n == 2 and window.dilations == [1, 1] and group <= _MAX_CONV2D_GROUPS:
        return _conv2d_groups(x, w, window, group)
    return _conv_taps(x, w, window, group)


def _fields(window: Window):
    return window.kernel, window.strides, window.dilations, window.begin, window.end, window.out


def _conv2d_groups(x, w, window: Window, group: int):
    """kiln.conv2d per group; its padding is symmetric, so the rest of the padding goes on `x`."""
    symmetric = [max(min(b, e), 0) for b, e in zip(window.begin, window.end)]
    x = _pad(x, [b - p for b, p in zip(window.begin, symmetric)], [e - p for e, p in zip(window.end, symmetric)])
    cg, mg = x.shape[1] // group, w.shape[0] // group
    parts = [
        kiln_conv2d(x[:, g * cg : (g + 1) * cg], w[g * mg : (g + 1) * mg], window.strides, symmetric)
        for g in range(group)
    ]
    return parts[0] if group == 1 else np.concatenate(parts, axis=1)


def _conv_taps(x, w, window: Window, group: int):
    """The convolution as the sum over kernel offsets of each tap contracted with the
    weights at that offset, channels grouped (any rank, dilation and group count)."""
    batch, channels, n = x.shape[0], x.shape[1], x.ndim - 2
    cg, mg = channels // group, w.shape[0] // group
    padded = _pad(x, window.begin, window.end)
    padded = padded.reshape((batch, group, cg, *padded.shape[2:]))
    weights = w.reshape((group, mg, cg, *window.kernel))
    letters = "xyzuvw"[:n]
    total = None
    for offset in window.offsets():
        tap = _tap(padded, offset, window)  # (N, G, Cg, *out)
        w_k = weights[(Ellipsis, *offset)]  # (G, Mg, Cg)
        if cg == 1:  # depthwise: a broadcast product, no contraction
            term = tap * w_k.reshape((1, group, mg, *[1] * n))
        else:
            term = np.einsum(f"ngc{letters},gmc->ngm{letters}", tap, w_k)
        total = term if total is None else total + term
    return total.reshape((batch, group * mg, *window.out))


@op("ConvInteger", attributes=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"), since=10)
def conv_integer(node, x, w, x_zero_point=None, w_zero_point=None):
    group = node.attr("group", 1)
    kernel = _kernel_shape(node, w.shape[2:])
    # Zero points subtracted in int32 before padding, so the padding is the zero point itself.
    x = _shifted(x, x_zero_point)
    if w_zero_point is not None and w_zero_point.size > 1:  # one per output channel
        w_zero_point = w_zero_point.reshape((-1,) + (1,) * (w.ndim - 1))
    w = _shifted(w, w_zero_point)
    window = _window(node, x.shape[2:], kernel)
    return _conv_taps(x, w, window, group).astype(np.int32)


@op("DeformConv", attributes=("dilations", "group", "kernel_shape", "offset_group", "pads", "strides"), since=19)
def deform_conv(node, x, w, offset, b=None, mask=None):
    if x.ndim != 4:
        raise node.error(f"kiln supports 2-D DeformConv only, got a {x.ndim - 2}-D input")
    group, offset_group = node.attr("group", 1), node.attr("offset_group", 1)
    kernel = _kernel_shape(node, w.shape[2:])
    strides, dilations = node.ints("strides") or [1, 1], node.ints("dilations") or [1, 1]
    pads = node.ints("pads") or [0] * 4
    n, channels, height, width = x.shape
    out = list(offset.shape[2:])
    # Each window's tap (i, j) reads at its usual place moved by that tap's offset (dy, dx),
    # interpolated bilinearly with zeros outside the input, and weighted by the mask.
    offset = offset.reshape((n, offset_group, kernel[0], kernel[1], 2, out[0] * out[1]))
    mask = None if mask is None else mask.reshape((n, offset_group, kernel[0], kernel[1], 1, out[0] * out[1]))
    rows = (np.arange(out[0]) * strides[0] - pads[0]).repeat(out[1]).astype(x.dtype)
    cols = np.tile(np.arange(out[1]) * strides[1] - pads[1], out[0]).astype(x.dtype)
    image = x.reshape((n, offset_group, channels // offset_group, height * width))
    weights = w.reshape((group, w.shape[0] // group, w.shape[1], kernel[0], kernel[1]))
    total = None
    for i, j in itertools.product(range(kernel[0]), range(kernel[1])):
        y = rows + i * dilations[0] + offset[:, :, i, j, 0]
        x_ = cols + j * dilations[1] + offset[:, :, i, j, 1]
        tap = _bilinear(image, y, x_, height, width)  # (N, OG, C / OG, out)
        if mask is not None:
            tap = tap * mask[:, :, i, j]
        tap = tap.reshape((n, group, channels // group, out[0], out[1]))
        term = np.einsum("ngchw,gmc->ngmhw", tap, weights[:, :, :, i, j])
        total = term if total is None else total + term
    y = total.reshape((n, w.shape[0], out[0], out[1]))
    if b is not None:
        y = y + b.reshape((-1, 1, 1))
    return _same(x, y)


def _bilinear(image, y, x, height, width):
    """`image` (N, G, C, H * W) read at the points (y, x), each (N, G, P), bilinearly, with
    zeros outside: (N, G, C, P)."""
    y0, x0 = np.floor(y), np.floor(x)
    fy, fx = y - y0, x - x0
    y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
    total = None
    for dy, dx, weight in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx), (1, 0, fy * (1 - fx)), (1, 1, fy * fx)):
        yy, xx = y0 + dy, x0 + dx
        inside = (yy >= 0) & (yy < height) & (xx >= 0) & (xx < width)
        index = np.clip(yy, 0, height - 1) * width + np.clip(xx, 0, width - 1)
        index = np.broadcast_to(index[:, :, None, :], image.shape[:3] + index.shape[-1:])
        value = np.take_along_axis(image, index, axis=-1)
        term = value * np.where(inside, weight, 0)[:, :, None, :].astype(image.dtype)
        total = term if total is None else total + term
    return total


def _shifted(value, zero_point):
    value = value.astype(np.int32)
    return value if zero_point is None else value - zero_point.astype(np.int32)


@op(
    "ConvTranspose",
    attributes=("auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"),
)
def conv_transpose(node, x, w, b=None):
    n = x.ndim - 2
    spatial = list(x.shape[2:])
    kernel = _kernel_shape(node, w.shape[2:])
    group = node.attr("group", 1)
    strides = node.ints("strides") or [1] * n
    dilations = node.ints("dilations") or [1] * n
    output_padding = node.ints("output_padding") or [0] * n
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    full = [s * (size - 1) + p + e for s, size, p, e in zip(strides, spatial, output_padding, extents)]
    begin, end = _transpose_pads(node, spatial, strides, full)
    out = [f - b - e for f, b, e in zip(full, begin, end)]
    # The transposed convolution is a stride-1 convolution of the input spread out by the
    # stride (s - 1 zeros between elements) with the flipped kernel, padded by the kernel's
    # extent less the model's pads.
    spread = _spread(x, strides)
    flip = (Ellipsis, *[slice(None, None, -1)] * n)
    cg, mg = w.shape[0] // group, w.shape[1]
    weights = w.reshape((group, cg, mg, *kernel)).swapaxes(1, 2).reshape((group * mg, cg, *kernel))[flip]
    window = Window(
        kernel,
        [1] * n,
        dilations,
        [e - 1 - bb for e, bb in zip(extents, begin)],
        [o + e - 1 - length - (e - 1 - bb) for o, e, length, bb in zip(out, extents, spread.shape[2:], begin)],
        out,
    )
    y = _convolve(spread, weights, window, group)
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * n)
    return _same(x, y)


def _transpose_pads(node, spatial, strides, full):
    """ConvTranspose's pads (begin, end): given, or split from output_shape / auto_pad SAME."""
    n = len(spatial)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise node.error(f"auto_pad must be one of {', '.join(_AUTO_PADS)}, got {auto_pad!r}")
    output_shape = node.ints("output_shape")
    if output_shape is not None and len(output_shape) == n + 2:
        output_shape = output_shape[2:]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [size * s for size, s in zip(spatial, strides)]
    if output_shape is None:
        pads = node.ints("pads") or [0] * (2 * n) if auto_pad == "NOTSET" else [0] * (2 * n)
        return pads[:n], pads[n:]
    totals = [f - o for f, o in zip(full, output_shape)]
    # The spec puts the odd pixel at the end for SAME_UPPER and at the beginning otherwise.
    begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
    return begin, [t - bb for t, bb in zip(totals, begin)]


def _spread(x, strides):
    """`x` with s - 1 zeros between neighbours along each spatial axis of stride s."""
    for axis, s in enumerate(strides, start=2):
        if s == 1:
            continue
        length = x.shape[axis]
        zeros = np.zeros(x.shape, x.dtype)
        x = np.stack([x] + [zeros] * (s - 1), axis=axis + 1)
        x = x.reshape(x.shape[:axis] + (length * s,) + x.shape[axis + 2 :])
        x = x[(slice(None),) * axis + (slice(0, (length - 1) * s + 1),)]
    return x


# -- pooling -----------------------------------------------------------------------------------


def _pool_window(node, x):
    kernel = node.ints("kernel_shape")
    if kernel is None:
        raise node.error("the required attribute 'kernel_shape' is missing")
    return _window(node, x.shape[2:], kernel, bool(node.attr("ceil_mode", 0)))


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@op("MaxPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"))
def max_pool(node, x):
    window = _pool_window(node, x)
    padded = _pad(x, window.begin, window.end, _lowest(np.dtype(x.dtype)))
    taps = [_tap(padded, offset, window) for offset in window.offsets()]
    wants_indices = len(node.proto.output) > 1 and node.proto.output[1]
    if not wants_indices:
        y = taps[0]
        for tap in taps[1:]:
            y = np.maximum(y, tap)
        return y
    stacked = np.stack(taps, axis=-1)
    y = np.max(stacked, axis=-1)
    # The flat index (over N, C and the spatial axes, in row-major order or, for
    # storage_order=1, the spatial axes column-major) of each tap's element, as a constant.
    spatial = x.shape[2:]
    size = math.prod(spatial)
    order = "F" if node.attr("storage_order", 0) else "C"
    positions = np.arange(size, dtype=np.int64).reshape(spatial, order=order)
    grid = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * len(spatial)) * size
    grid = _pad(grid + positions, window.begin, window.end, -1)
    index_taps = np.stack([_tap(grid, offset, window) for offset in window.offsets()], axis=-1)
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
    flat = np.zeros_like(x, shape=(math.prod(shape),))
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
        inside = _pad(inside, window.begin, [min(p, e) for p, e in zip(window.pads_end, window.end)], 1)
        inside = _pad(inside, [0] * len(window.begin), [e - min(p, e) for p, e in zip(window.pads_end, window.end)])
    else:
        inside = _pad(inside, window.begin, window.end)
    return sum(_tap(inside, offset, window) for offset in window.offsets())


def _tap_sum(x, window: Window):
    padded = _pad(x, window.begin, window.end)
    total = None
    for offset in window.offsets():
        tap = _tap(padded, offset, window)
        total = tap if total is None else total + tap
    return total


@op(
    "AveragePool",
    attributes=("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"),
)
def average_pool(node, x):
    window = _pool_window(node, x)
    counts = _window_counts(x, window, bool(node.attr("count_include_pad", 0)))
    return _same(x, _tap_sum(x, window) / counts.astype(x.dtype))


@op("LpPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"))
def lp_pool(node, x):
    window = _pool_window(node, x)
    p = node.attr("p", 2)
    return _same(x, _lp(_tap_sum(_abs_power(x, p), window), p))


def _abs_power(x, p):
    return np.abs(x) ** np.asarray(p, x.dtype)


def _lp(total, p):
    return total ** np.asarray(1.0 / p, total.dtype)


@op("GlobalAveragePool")
def global_average_pool(node, x):
    return _same(x, np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True, dtype=x.dtype))


@op("GlobalMaxPool")
def global_max_pool(node, x):
    return np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalLpPool", attributes=("p",), since=2)
def global_lp_pool(node, x):
    p = node.attr("p", 2)
    total = np.sum(_abs_power(x, p), axis=tuple(range(2, x.ndim)), keepdims=True, dtype=x.dtype)
    return _same(x, _lp(total, p))


# -- normalization -----------------------------------------------------------------------------


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
    return _same(x, (x - shaped(mean)) * inv + shaped(bias))


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
    return _same(x, y), _same(mean, running_mean), _same(var, running_var)


def _moments(x, axes):
    mean = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    centered = x - mean
    return mean, centered, np.mean(centered * centered, axis=axes, keepdims=True, dtype=x.dtype)


@op("InstanceNormalization", attributes=("epsilon",))
def instance_normalization(node, x, scale, bias):
    _, centered, var = _moments(x, tuple(range(2, x.ndim)))
    y = centered / np.sqrt(var + np.asarray(node.attr("epsilon", 1e-5), x.dtype))
    return _same(x, y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim))


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
    return _same(x, y), mean, inv_std


@op("RMSNormalization", attributes=("axis", "epsilon", "stash_type"), since=23)
def rms_normalization(node, x, scale):
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    stash = _stash_dtype(node)
    xs = x.astype(stash)
    mean_square = np.mean(xs * xs, axis=tuple(range(axis, x.ndim)), keepdims=True, dtype=stash)
    inv_rms = np.reciprocal(np.sqrt(mean_square + np.asarray(node.attr("epsilon", 1e-5), stash)))
    return _same(x, (xs * inv_rms).astype(x.dtype) * scale)


@op("MeanVarianceNormalization", attributes=("axes",), since=9)
def mean_variance_normalization(node, x):
    axes = tuple(node.ints("axes", [0, 2, 3]))
    mean = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    # As the spec's function body: the variance as E[x^2] - E[x]^2, and 1e-9 added to its root.
    variance = np.mean(x * x, axis=axes, keepdims=True, dtype=x.dtype) - mean * mean
    return _same(x, (x - mean) / (np.sqrt(variance) + np.asarray(1e-9, x.dtype)))


@op("LRN", attributes=("alpha", "beta", "bias", "size"))
def lrn(node, x):
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    squares = _pad((x * x).swapaxes(1, -1), [before], [after]).swapaxes(1, -1)
    channels = x.shape[1]
    total = squares[:, 0:channels]
    for k in range(1, size):
        total = total + squares[:, k : k + channels]
    scale = np.asarray(bias, x.dtype) + np.asarray(alpha / size, x.dtype) * total
    return _same(x, x / scale ** np.asarray(beta, x.dtype))


# -- rearrangements ----------------------------------------------------------------------------


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


# -- resampling --------------------------------------------------------------------------------

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
    """`x` resized axis by axis (the interpolations are separable) to shape `out`."""
    y = x
    for axis, (size, new_size, factor) in enumerate(zip(x.shape, out, factors)):
        bounds = None if roi is None else roi[axis]
        if new_size == size and factor == 1.0 and (bounds is None or tuple(bounds) == (0.0, 1.0)):
            continue
        y = _resample_axis(y, axis, new_size, factor, bounds, how)
    return y


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
