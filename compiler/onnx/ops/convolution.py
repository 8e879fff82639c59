"""ONNX convolutions (N-D, NCHW): Conv, ConvInteger, DeformConv, ConvTranspose.

Each contracts every tap of the padded input (``windows.tap``) with the kernel's weights at
that offset and adds. 2-D (and 1-D) convolutions without dilation go to ``kiln.conv2d``,
grouped and depthwise ones included, which lowers to one dedicated kernel.
"""

from __future__ import annotations

import itertools

import numpy as np

from kiln.frontend.nn import conv2d as kiln_conv2d
from kiln.onnx.ops.windows import AUTO_PADS, Window, kernel_shape, pad_spatial, same_dtype, sliding_window, window_tap
from kiln.onnx.registry import op


@op("Conv", attributes=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
def conv(node, x, w, b=None):
    kernel = kernel_shape(node, w.shape[2:])
    if list(w.shape[2:]) != kernel:
        raise node.error(f"kernel_shape {kernel} does not match the weight's shape {list(w.shape)}")
    group = node.attr("group", 1)
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise node.error(f"input channels {x.shape[1]} and weight shape {list(w.shape)} do not fit group={group}")
    window = sliding_window(node, x.shape[2:], kernel)
    y = _convolve(x, w, window, group)
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * (x.ndim - 2))
    return same_dtype(x, y)


def _convolve(x, w, window: Window, group: int):
    """The cross-correlation of `x` (N, C, *spatial) with `w` (M, C / group, *kernel) over
    `window`: (N, M, *window.out)."""
    n = x.ndim - 2
    if n == 1:  # as a 2-D convolution of height 1, for kiln.conv2d's kernel
        flat = Window(*([first, *rest] for first, rest in zip((1, 1, 1, 0, 0, 1), _fields(window))))
        return _convolve(x[:, :, None], w[:, :, None], flat, group)[:, :, 0]
    if n == 2 and window.dilations == [1, 1]:
        return _conv2d(x, w, window, group)
    return _conv_taps(x, w, window, group)


def _fields(window: Window):
    return window.kernel, window.strides, window.dilations, window.begin, window.end, window.out


def _conv2d(x, w, window: Window, group: int):
    """kiln.conv2d; its padding is symmetric, so the rest of the padding goes on `x`. Where the
    last window stops short of the end padding (a stride-2 convolution of an even size:
    begin 1, end 0), padding `begin` on both sides gives the same windows, so the input is
    not copied to pad it."""
    symmetric = [
        b if 0 <= e <= b and (size + 2 * b - k) // s + 1 == o else max(min(b, e), 0)
        for b, e, size, k, s, o in zip(window.begin, window.end, x.shape[2:], window.kernel, window.strides, window.out)
    ]
    end = [max(e - p, min(e, 0)) for e, p in zip(window.end, symmetric)]  # never crop what padding covers
    x = pad_spatial(x, [b - p for b, p in zip(window.begin, symmetric)], end)
    return kiln_conv2d(x, w, window.strides, symmetric, groups=group)


def _conv_taps(x, w, window: Window, group: int):
    """The convolution as the sum over kernel offsets of each tap contracted with the
    weights at that offset, channels grouped (any rank, dilation and group count)."""
    batch, channels, n = x.shape[0], x.shape[1], x.ndim - 2
    cg, mg = channels // group, w.shape[0] // group
    padded = pad_spatial(x, window.begin, window.end)
    padded = padded.reshape((batch, group, cg, *padded.shape[2:]))
    weights = w.reshape((group, mg, cg, *window.kernel))
    letters = "xyzuvw"[:n]
    total = None
    for offset in window.offsets():
        tap = window_tap(padded, offset, window)  # (N, G, Cg, *out)
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
    kernel = kernel_shape(node, w.shape[2:])
    # Zero points subtracted in int32 before padding, so the padding is the zero point itself.
    x = _shifted(x, x_zero_point)
    if w_zero_point is not None and w_zero_point.size > 1:  # one per output channel
        w_zero_point = w_zero_point.reshape((-1,) + (1,) * (w.ndim - 1))
    w = _shifted(w, w_zero_point)
    window = sliding_window(node, x.shape[2:], kernel)
    return _conv_taps(x, w, window, group).astype(np.int32)


@op("DeformConv", attributes=("dilations", "group", "kernel_shape", "offset_group", "pads", "strides"), since=19)
def deform_conv(node, x, w, offset, b=None, mask=None):
    if x.ndim != 4:
        raise node.error(f"kiln supports 2-D DeformConv only, got a {x.ndim - 2}-D input")
    group, offset_group = node.attr("group", 1), node.attr("offset_group", 1)
    kernel = kernel_shape(node, w.shape[2:])
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
    return same_dtype(x, y)


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
    kernel = kernel_shape(node, w.shape[2:])
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
    return same_dtype(x, y)


def _transpose_pads(node, spatial, strides, full):
    """ConvTranspose's pads (begin, end): given, or split from output_shape / auto_pad SAME."""
    n = len(spatial)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in AUTO_PADS:
        raise node.error(f"auto_pad must be one of {', '.join(AUTO_PADS)}, got {auto_pad!r}")
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
