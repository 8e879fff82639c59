"""Sliding windows over the spatial axes of an (N, C, *spatial) input, shared by the ONNX
convolutions and pools: where each window goes (strides, dilations, pads or auto_pad, ceil
mode), the padded input, and the taps (for each kernel offset, one strided slice of the
padded input that is an (N, C, *output) view of every window's element at that offset).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


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


def sliding_window(node, spatial, kernel, ceil_mode: bool = False) -> Window:
    """The window of a Conv or pool node over an input of spatial shape `spatial`, from its
    strides, dilations and pads or auto_pad."""
    n = len(spatial)
    strides = node.ints("strides") or [1] * n
    dilations = node.ints("dilations") or [1] * n
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in AUTO_PADS:
        raise node.error(f"auto_pad must be one of {', '.join(AUTO_PADS)}, got {auto_pad!r}")
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


def pad_spatial(x, begin, end, value=0):
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


def window_tap(padded, offset, window: Window):
    """The element at kernel `offset` of every window: a strided slice of the padded input."""
    spatial = tuple(
        slice(k * d, k * d + s * (o - 1) + 1, s)
        for k, d, s, o in zip(offset, window.dilations, window.strides, window.out)
    )
    return padded[(Ellipsis, *spatial)]


def kernel_shape(node, w_or_x_spatial):
    kernel = node.ints("kernel_shape")
    return list(w_or_x_spatial) if kernel is None else kernel


def same_dtype(x, result):
    """`result` in `x`'s dtype (ONNX's T -> T, where numpy would promote)."""
    return result if result.dtype == x.dtype else result.astype(x.dtype)
