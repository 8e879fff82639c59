"""ONNX shape and layout ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split,
Slice, Expand, Tile, Pad, CenterCropPad, Shape, Size, ConstantOfShape, Range, EyeLike, Trilu,
ReverseSequence, and the ops whose output shape depends on values (NonZero, Unique, Compress),
which kiln computes only on values known at import time.

Shapes, axes, pads and counts must be known when the model is imported (kiln's shapes are
static); the data they act on may be traced.
"""

from __future__ import annotations

import math

import numpy as np

from kiln.onnx.registry import constant, is_traced, numpy_dtype, op


def _axis(node, axis: int, rank: int) -> int:
    """`axis` in [0, rank), from ONNX's [-rank, rank)."""
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def _ints(node, value, what: str) -> list:
    """An input that must be known at import time, as a list of Python ints."""
    return [int(v) for v in constant(node, value, what).reshape(-1)]


def _input_or_attribute(node, value, name: str, input_since: int):
    """`name`'s ints: the attribute before opset `input_since`, the input from it on (None
    when absent)."""
    if node.opset < input_since:
        return node.ints(name)
    return None if value is None else _ints(node, value, name)


# -- reshaping -----------------------------------------------------------------------------
@op("Reshape", attributes=("allowzero",), since=5)
def reshape(node, data, shape):
    shape = _ints(node, shape, "shape")
    if not node.attr("allowzero", 0):
        # 0 copies the input's dimension at that position (allowzero=1 makes it a real 0)
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if shape.count(-1) > 1:
        raise node.error(f"shape {shape} has more than one -1")
    return np.reshape(data, _resolved(node, shape, data.size, data.shape))


def _resolved(node, shape: list, size: int, from_shape) -> tuple:
    """`shape` with its -1 worked out (numpy refuses -1 beside a 0 dimension)."""
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise node.error(f"cannot reshape {tuple(from_shape)} to {shape}")
        shape = [size // known if s == -1 else s for s in shape]
    if math.prod(shape) != size:
        raise node.error(f"cannot reshape {tuple(from_shape)} to {shape}")
    return tuple(shape)


@op("Flatten", attributes=("axis",))
def flatten(node, x):
    axis = node.attr("axis", 1)
    if not -x.ndim <= axis <= x.ndim:
        raise node.error(f"axis {axis} is out of range for a tensor of rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    return np.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@op("Transpose", attributes=("perm",))
def transpose(node, x):
    perm = node.ints("perm", None)
    return np.transpose(x, None if perm is None else [_axis(node, p, x.ndim) for p in perm])


@op("Squeeze", attributes=("axes",))
def squeeze(node, x, axes=None):
    axes = _input_or_attribute(node, axes, "axes", 13)
    if axes is None:
        axes = [i for i, n in enumerate(x.shape) if n == 1]
    axes = {_axis(node, a, x.ndim) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise node.error(f"cannot squeeze axes {sorted(axes)} of shape {x.shape}: not all are 1")
    return np.reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


@op("Unsqueeze", attributes=("axes",))
def unsqueeze(node, x, axes=None):
    axes = _input_or_attribute(node, axes, "axes", 13)
    if axes is None:
        raise node.error("the axes are missing")
    rank = x.ndim + len(axes)
    inserted = {_axis(node, a, rank) for a in axes}
    if len(inserted) != len(axes):
        raise node.error(f"repeated axes in {axes}")
    dims = iter(x.shape)
    return np.reshape(x, tuple(1 if i in inserted else next(dims) for i in range(rank)))


@op("Concat", attributes=("axis",), since=4)
def concat(node, *inputs):
    axis = _axis(node, node.attr("axis"), inputs[0].ndim)
    return np.concatenate(inputs, axis=axis)


@op("Split", attributes=("axis", "split", "num_outputs"))
def split(node, x, split_=None):
    axis = _axis(node, node.attr("axis", 0), x.ndim)
    outputs = len(node.proto.output)
    if node.opset < 13 and "split" in node:
        sizes = node.ints("split")
    elif split_ is not None:
        sizes = _ints(node, split_, "split")
    else:
        count = node.attr("num_outputs", outputs) if node.opset >= 18 else outputs
        # equal parts; from opset 18 the last one may be smaller
        part = -(-x.shape[axis] // count)
        sizes = [min(part, max(x.shape[axis] - part * k, 0)) for k in range(count)]
    if sum(sizes) != x.shape[axis] or len(sizes) != outputs:
        raise node.error(f"split {sizes} does not divide axis {axis} of length {x.shape[axis]} into {outputs} outputs")
    bounds = np.cumsum([0] + sizes)
    lead = (slice(None),) * axis
    return tuple(x[lead + (slice(int(a), int(b)),)] for a, b in zip(bounds[:-1], bounds[1:]))


# -- slicing -------------------------------------------------------------------------------
@op("Slice", attributes=("starts", "ends", "axes"))
def slice_(node, data, starts=None, ends=None, axes=None, steps=None):
    if node.opset < 10:
        starts, ends, axes, steps = node.ints("starts"), node.ints("ends"), node.ints("axes", None), None
    else:
        starts, ends = _ints(node, starts, "starts"), _ints(node, ends, "ends")
        axes = None if axes is None else _ints(node, axes, "axes")
        steps = None if steps is None else _ints(node, steps, "steps")
    axes = list(range(len(starts))) if axes is None else [_axis(node, a, data.ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise node.error("starts, ends, axes and steps must have one distinct axis each")
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise node.error("a step of 0")
        index[axis] = _clamped(start, end, step, data.shape[axis])
    return data[tuple(index)]


def _clamped(start: int, end: int, step: int, n: int) -> slice:
    """ONNX's start/end (negative from the end, clamped; INT_MAX-style sentinels) as a Python
    slice; a negative step's end clamps to -1, "before the first element", which a Python
    slice spells None."""
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), n), min(max(end, 0), n), step)
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    return slice(start, None if end < 0 else end, step)


# -- broadcasting and repeating --------------------------------------------------------------
@op("Expand", since=8)
def expand(node, x, shape):
    shape = _ints(node, shape, "shape")
    try:
        target = np.broadcast_shapes(x.shape, tuple(shape))
    except ValueError:
        raise node.error(f"shape {shape} does not broadcast with the input's {x.shape}") from None
    return np.broadcast_to(x, target)


@op("Tile", since=6)
def tile(node, x, repeats):
    repeats = _ints(node, repeats, "repeats")
    if len(repeats) != x.ndim:
        raise node.error(f"repeats {repeats} must have one entry per axis of the input ({x.ndim})")
    return np.tile(x, repeats)


@op("Pad", attributes=("mode", "pads", "value"), since=2)
def pad(node, data, pads=None, constant_value=None, axes=None):
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise node.error(f"mode {mode!r} is not an ONNX Pad mode")
    if node.opset < 11:
        pads, value, axes = node.ints("pads"), node.attr("value", 0.0), None
    else:
        pads = _ints(node, pads, "pads")
        value = 0 if constant_value is None else constant_value
        axes = None if axes is None else _ints(node, axes, "axes")
    axes = list(range(data.ndim)) if axes is None else [_axis(node, a, data.ndim) for a in axes]
    if len(pads) != 2 * len(axes):
        raise node.error(f"pads {pads} must have two entries per padded axis ({len(axes)})")
    widths = [(0, 0)] * data.ndim
    for k, axis in enumerate(axes):
        widths[axis] = (pads[k], pads[k + len(axes)])
    return _padded(node, data, widths, mode, value)


def _padded(node, data, widths: list, mode: str, value):
    # Negative pads crop: cut first, then pad what is left.
    data = data[tuple(slice(max(-a, 0), n - max(-b, 0)) for (a, b), n in zip(widths, data.shape))]
    widths = [(max(a, 0), max(b, 0)) for a, b in widths]
    if not any(a or b for a, b in widths):
        return data
    if mode != "constant":
        if any(n == 0 and (a or b) for (a, b), n in zip(widths, data.shape)):
            raise node.error(f"mode {mode!r} cannot pad an empty axis")
        return np.pad(data, widths, mode=mode)
    if is_traced(value):
        # A traced fill value: pad with zeros and select the padding by a constant mask.
        mask = np.pad(np.zeros(data.shape, bool), widths, constant_values=True)
        return np.where(mask, np.reshape(value, ()).astype(data.dtype), np.pad(data, widths))
    return np.pad(data, widths, constant_values=np.asarray(value).astype(data.dtype).reshape(()).item())


@op("CenterCropPad", attributes=("axes",), since=18)
def center_crop_pad(node, x, shape):
    shape = _ints(node, shape, "shape")
    axes = node.ints("axes", None)
    axes = list(range(x.ndim)) if axes is None else [_axis(node, a, x.ndim) for a in axes]
    if len(shape) != len(axes):
        raise node.error(f"shape {shape} must have one entry per axis in {axes}")
    widths = [(0, 0)] * x.ndim
    for axis, wanted in zip(axes, shape):
        # the smaller half at the start and the larger at the end, cropping or padding
        diff = abs(wanted - x.shape[axis])
        sign = 1 if wanted >= x.shape[axis] else -1
        widths[axis] = (sign * (diff // 2), sign * (diff - diff // 2))
    return _padded(node, x, widths, "constant", 0)


# -- shapes as values ------------------------------------------------------------------------
@op("Shape", attributes=("start", "end"))
def shape(node, x):
    start, end = node.attr("start", 0), node.attr("end", None)
    return np.array(x.shape, np.int64)[start:end]


@op("Size")
def size(node, x):
    return np.array(x.size, np.int64)


@op("ConstantOfShape", attributes=("value",), since=9)
def constant_of_shape(node, shape):
    shape = tuple(_ints(node, shape, "shape"))
    value = node.attr("value", None)
    value = np.zeros((), np.float32) if value is None else value.reshape(())
    # A view of one element: a large filled weight is never materialized (kiln compiles a
    # zero-stride constant as its scalar broadcast).
    return np.broadcast_to(value, shape)


@op("Range", attributes=("stash_type",), since=11)
def range_(node, start, limit, delta):
    if any(is_traced(v) for v in (start, limit, delta)):
        raise node.error(
            "Range's length depends on start, limit and delta, so they must be known when the model is "
            "imported (an initializer, a Constant or computed from shapes), because kiln compiles static "
            "shapes; here they depend on a graph input"
        )
    dtype = np.asarray(start).dtype
    compute = dtype
    if dtype == np.float16 and node.opset >= 27:
        # float16 steps are accumulated in stash_type (float by default), then rounded once
        compute = numpy_dtype(node.attr("stash_type", 1), node, "stash_type")
        if compute.kind != "f":
            raise node.error(f"stash_type must be a float type, got {compute}")
    start, limit, delta = (np.asarray(v, compute).reshape(()).item() for v in (start, limit, delta))
    if delta == 0:
        raise node.error("delta is 0")
    # numpy's length is the spec's max(ceil((limit - start) / delta), 0), in double precision
    return np.arange(start, limit, delta, dtype=compute if compute != dtype else None).astype(dtype)


@op("EyeLike", attributes=("dtype", "k"), since=9)
def eye_like(node, x):
    dtype = numpy_dtype(node.attr("dtype"), node, "dtype") if "dtype" in node else x.dtype
    if x.ndim != 2:
        raise node.error(f"the input must be 2-D, got shape {x.shape}")
    return np.eye(x.shape[0], x.shape[1], k=node.attr("k", 0), dtype=dtype)


@op("Trilu", attributes=("upper",), since=14)
def trilu(node, x, k=None):
    k = 0 if k is None else _ints(node, k, "k")[0]
    return np.triu(x, k) if node.attr("upper", 1) else np.tril(x, k)


@op("ReverseSequence", attributes=("batch_axis", "time_axis"), since=10)
def reverse_sequence(node, x, sequence_lens):
    batch_axis, time_axis = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    if {batch_axis, time_axis} != {0, 1}:
        raise node.error("batch_axis and time_axis must be 0 and 1")
    steps = x.shape[time_axis]
    time = np.arange(steps).reshape((steps, 1) if time_axis == 0 else (1, steps))
    lens = np.reshape(sequence_lens.astype(np.int64), (1, -1) if time_axis == 0 else (-1, 1))
    # the first len steps of each sequence reversed, the rest kept
    source = np.where(time < lens, lens - 1 - time, time)
    source = np.reshape(source, source.shape + (1,) * (x.ndim - 2))
    return np.take_along_axis(x, np.broadcast_to(source, x.shape), axis=time_axis)


# -- values that decide the output shape -----------------------------------------------------
def _static_only(node, *values):
    if any(is_traced(v) for v in values):
        raise node.error(
            f"{node.op_type}'s output shape depends on the values of its input, so they must be known when "
            "the model is imported (an initializer, a Constant or computed from shapes), because kiln compiles "
            "static shapes; here they depend on a graph input"
        )


@op("NonZero", since=9)
def non_zero(node, x):
    _static_only(node, x)
    x = np.asarray(x)
    if x.ndim == 0:  # numpy refuses np.nonzero of a 0-d array; ONNX gives a (0, count) result
        return np.zeros((0, int(x != 0)), np.int64)
    return np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1)


@op("Compress", attributes=("axis",), since=9)
def compress(node, x, condition):
    # only the condition decides the shape: the data may be traced
    _static_only(node, condition)
    axis = node.attr("axis", None)
    if axis is not None:
        axis = _axis(node, axis, x.ndim)
    length = x.size if axis is None else x.shape[axis]
    condition = np.asarray(condition).reshape(-1)
    if condition.size > length:
        raise node.error(f"the condition has {condition.size} entries for an axis of length {length}")
    kept = np.flatnonzero(condition)  # a shorter condition leaves the rest out
    return np.take(np.reshape(x, -1) if axis is None else x, kept, axis=axis)


@op("Unique", attributes=("axis", "sorted"), since=11)
def unique(node, x):
    _static_only(node, x)
    x, axis = np.asarray(x), node.attr("axis", None)
    values, indices, inverse, counts = np.unique(x, True, True, True, axis=axis)
    if not node.attr("sorted", 1):
        # in the order of first occurrence
        order = np.argsort(indices, kind="stable")
        values = np.take(values, order, axis=axis) if axis is not None else values[order]
        inverse = np.argsort(order)[inverse]
        indices, counts = indices[order], counts[order]
    return values, indices.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)
