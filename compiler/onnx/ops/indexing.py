"""ONNX gathers, scatters and OneHot, as numpy indexing.

Indices may be negative (counted from the end of their axis, in [-n, n)); an index outside
that range is an error when the compiled model runs (numpy indexing of a traced array checks
its bounds then), never a read or write out of bounds.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import constant, op, traced_if


def _axis(node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def _element_index(indices, axis: int) -> tuple:
    """The fancy index that reads element `indices[i]` along `axis` and position i elsewhere:
    ONNX's GatherElements/ScatterElements addressing."""
    index = []
    for dim, n in enumerate(indices.shape):
        if dim == axis:
            index.append(indices)
        else:
            index.append(np.arange(n).reshape((1,) * dim + (n,) + (1,) * (indices.ndim - dim - 1)))
    return tuple(index)


def _tuple_index(indices, batch_dims: int = 0) -> tuple:
    """GatherND/ScatterND's index: the last axis of `indices` addresses the data's leading
    axes (after `batch_dims` batch axes shared with the indices)."""
    lead = indices.shape[:-1]
    batch = [
        np.arange(n).reshape((1,) * dim + (n,) + (1,) * (len(lead) - dim - 1))
        for dim, n in enumerate(lead[:batch_dims])
    ]
    return tuple(batch) + tuple(indices[..., k] for k in range(indices.shape[-1]))


def _copy_for_writes(data, *writes):
    """A copy of `data` that the scatter can write into: traced if anything written is."""
    traced = traced_if(data, *writes)
    return traced if traced is not data else data.copy()


_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(node, out, index, updates):
    """`out[index] = updates`, or combined by the node's reduction: every update of a repeated
    index is combined in (numpy's ``ufunc.at``), where plain assignment would keep one."""
    reduction = node.attr("reduction", "none")
    if reduction == "none":
        out[index] = updates
        return out
    if reduction not in _REDUCTIONS:
        raise node.error(f"reduction {reduction!r} is not an ONNX reduction")
    _REDUCTIONS[reduction].at(out, index, updates)
    return out


@op("Gather", attributes=("axis",))
def gather(node, data, indices):
    axis = _axis(node, node.attr("axis", 0), data.ndim)
    return np.take(traced_if(data, indices), indices, axis=axis)


@op("GatherElements", attributes=("axis",), since=11)
def gather_elements(node, data, indices):
    axis = _axis(node, node.attr("axis", 0), data.ndim)
    if indices.ndim != data.ndim:
        raise node.error(f"indices of rank {indices.ndim} for data of rank {data.ndim}")
    return traced_if(data, indices)[_element_index(indices, axis)]


@op("GatherND", attributes=("batch_dims",), since=11)
def gather_nd(node, data, indices):
    batch_dims = node.attr("batch_dims", 0)
    _check_nd(node, data, indices, batch_dims)
    return traced_if(data, indices)[_tuple_index(indices, batch_dims)]


def _check_nd(node, data, indices, batch_dims: int):
    if indices.ndim < 1 or batch_dims < 0 or batch_dims >= min(data.ndim, indices.ndim):
        raise node.error(f"batch_dims {batch_dims} for data {data.shape} and indices {indices.shape}")
    if data.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise node.error(f"the batch axes of data {data.shape} and indices {indices.shape} differ")
    if indices.shape[-1] > data.ndim - batch_dims:
        raise node.error(f"indices {indices.shape} address more axes than data {data.shape} has")


@op("ScatterElements", attributes=("axis", "reduction"), since=11)
def scatter_elements(node, data, indices, updates):
    axis = _axis(node, node.attr("axis", 0), data.ndim)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise node.error(f"indices {indices.shape} and updates {updates.shape} for data {data.shape}")
    out = _copy_for_writes(data, indices, updates)
    return _scatter(node, out, _element_index(indices, axis), updates)


@op("Scatter", attributes=("axis",), since=9)
def scatter(node, data, indices, updates):
    return scatter_elements(node, data, indices, updates)


@op("ScatterND", attributes=("reduction",), since=11)
def scatter_nd(node, data, indices, updates):
    _check_nd(node, data, indices, 0)
    expected = indices.shape[:-1] + data.shape[indices.shape[-1] :]
    if updates.shape != expected:
        raise node.error(f"updates {updates.shape} for indices {indices.shape} and data {data.shape}: want {expected}")
    out = _copy_for_writes(data, indices, updates)
    return _scatter(node, out, _tuple_index(indices), updates)


@op("OneHot", attributes=("axis",), since=9)
def one_hot(node, indices, depth, values):
    depth = int(constant(node, depth, "depth").reshape(-1)[0])
    rank = indices.ndim + 1
    axis = _axis(node, node.attr("axis", -1), rank)
    # in-range negative indices count from the end; others match no position (all off_value)
    wrapped = np.where(indices < 0, indices + depth, indices)
    positions = np.arange(depth).reshape((depth,) + (1,) * (rank - axis - 1))
    hot = np.expand_dims(wrapped, axis) == positions
    off, on = values[0], values[1]
    return np.where(hot, on, off).astype(values.dtype)
