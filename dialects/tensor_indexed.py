"""kiln's tensor ops that read or write through an index tensor: gathers (along one axis)
and scatters, ufunc.at's and item assignment's (along the last axis: the front end moves
the indexed axes there as views, which move no data)::

    %g = kiln.gather %table, %ids {axis = 0} : (tensor<5000x64xf32>, tensor<256xi64>) -> tensor<256x64xf32>
    %s = kiln.scatter_at %y, %ids, %v {kind = "add"}
        : (tensor<3x10xf32>, tensor<7xi64>, tensor<3x7xf32>) -> tensor<3x10xf32>
    %w = kiln.scatter_at %x, %ids, %v {kind = "store"}    // x[..., ids] = v
        : (tensor<3x10xf32>, tensor<7xi64>, tensor<3x7xf32>) -> tensor<3x10xf32>

The index holds int64 positions already inside the axis (0 <= i < n): the front end checks
and wraps numpy's negative indices before (``kiln.check_index``), so these ops never see a
bad one. Each lowers to one loop nest whose loads (gather) or loads and stores (scatter)
go through the index (``memref.load`` / ``memref.store``): O(output) work, where a
comparison with every position of the axis costs O(output * n).
"""

from __future__ import annotations

import numpy as np

from .diagnostics import DTypeError, OutOfBoundsError, ShapeError
from .tensor import ALL, TensorOp
from .traits import MOVES_ELEMENTS
from .types import i64

# ufunc.at's kinds: how an update combines with the element it lands on (numpy's ufunc).
SCATTER_KINDS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}
# item assignment's kind: the update replaces the element (numpy's x[idx] = v; of repeated
# indices the last in C order wins, as numpy's assignment loop leaves it in practice)
STORE = "store"


def _check_positions(op, index, n: int) -> None:
    """The reference semantics' check that every index lies in 0..n-1 (the front end's
    kiln.check_index made it so; an op built otherwise is a bug named here)."""
    bad = (index < 0) | (index >= n)
    if np.any(bad):
        raise OutOfBoundsError(f"{op.name}: index {int(index[bad].flat[0])} is outside 0..{n - 1}", op.loc)


class GatherOp(TensorOp):
    """``kiln.gather``: np.take(src, index, axis): for src of shape S and an int64 index of
    shape B (every value in 0..S[axis]-1), shape S[:axis] + B + S[axis + 1:], src's element
    type. `axis` is optional: the last axis when absent."""

    name = "kiln.gather"
    traits = frozenset({MOVES_ELEMENTS})  # its elements are the source's, nothing computed
    operand_names = ("source", "index")

    @property
    def gather_axis(self) -> int:
        return self.attributes.get("axis", self.operands[0].type.rank - 1)

    def infer_result_types(self):
        source, index = self.tensor_operand(0), self.tensor_operand(1)
        axis = self.gather_axis
        if not isinstance(axis, int) or not 0 <= axis < source.rank:
            raise self.error(f"kiln.gather axis {axis!r} is out of range for {source}", ShapeError)
        if index.element != i64:
            raise self.error(f"kiln.gather takes an i64 index, got {index.element}", DTypeError)
        self.check_element(source, ALL)
        if source.shape[axis] == 0 and index.size:
            raise self.error("kiln.gather from an empty axis", ShapeError)
        return [source.with_shape(source.shape[:axis] + index.shape + source.shape[axis + 1 :])]

    def evaluate(self, source, index):
        _check_positions(self, index, source.shape[self.gather_axis])
        return np.take(source, index, axis=self.gather_axis)


class ScatterAtOp(TensorOp):
    """``kiln.scatter_at``: numpy's unbuffered ``ufunc.at`` along one axis (`axis`, optional:
    the last when absent). For dest of shape S, an int64 index of shape B (values in
    0..S[axis]-1) and source of shape S[:axis] + B + S[axis + 1:], the result is dest after,
    for each position b of B in C order, ``dest[..., index[b], ...] = convert(kind(dest[...,
    index[b], ...], source[..., b, ...]))`` (the index at `axis`): the update computed in
    source's element type (float16 through float32, rounded), then converted to dest's,
    before the next update reads it. So a repeated index applies every time, in order,
    rounding each time, as ``np.add.at`` does. `kind` is add, sub, mul, max or min (numpy's
    maximum and minimum: NaN wins); on bool, add is or and mul is and. Kind ``store`` is
    assignment: ``dest[..., index[b], ...] = convert(source[..., b, ...])``, the element not
    read, so of repeated indices the last update in C order is what stays."""

    name = "kiln.scatter_at"
    operand_names = ("dest", "index", "source")
    attribute_names = ("kind",)

    @property
    def scatter_axis(self) -> int:
        return self.attributes.get("axis", self.operands[0].type.rank - 1)

    @property
    def scatter_axes(self) -> int:
        """How many of dest's axes, from `axis` on, the index addresses (`axes`, optional: 1):
        with several, an index value is their flat position in C order (x[i, j] = v with
        i * n + j), so that no reshape stands between the scatter and the array it writes."""
        return self.attributes.get("axes", 1)

    def merged_shape(self) -> tuple:
        """dest's shape with the addressed axes merged into one (what the index counts in)."""
        shape, axis, count = self.operands[0].type.shape, self.scatter_axis, self.scatter_axes
        return shape[:axis] + (int(np.prod(shape[axis : axis + count], dtype=np.int64)),) + shape[axis + count :]

    def infer_result_types(self):
        dest, index, source = (self.tensor_operand(k) for k in range(3))
        if self.attributes.get("kind") not in (*SCATTER_KINDS, STORE):
            kinds = ", ".join((*SCATTER_KINDS, STORE))
            raise self.error(f"kiln.scatter_at kind must be one of {kinds}, got {self.attributes.get('kind')!r}")
        if index.element != i64:
            raise self.error(f"kiln.scatter_at takes an i64 index, got {index.element}", DTypeError)
        axis, count = self.scatter_axis, self.scatter_axes
        if (
            not isinstance(axis, int)
            or not isinstance(count, int)
            or not (0 <= axis and 1 <= count <= dest.rank - axis)
        ):
            raise self.error(f"kiln.scatter_at axis {axis!r} (axes {count!r}) is out of range for {dest}", ShapeError)
        if source.shape != dest.shape[:axis] + index.shape + dest.shape[axis + count :]:
            raise self.error(
                f"kiln.scatter_at: source {source.shape} must be dest's axes {dest.shape[:axis]} before axis "
                f"{axis}, the index's {index.shape}, then dest's {dest.shape[axis + count :]}",
                ShapeError,
            )
        self.check_element(dest, ALL)
        self.check_element(source, ALL)
        if self.merged_shape()[axis] == 0 and index.size:
            raise self.error("kiln.scatter_at into an empty axis", ShapeError)
        return [dest]

    def evaluate(self, dest, index, source):
        axis, merged = self.scatter_axis, self.merged_shape()
        _check_positions(self, index, merged[axis])
        result = np.array(dest, copy=True).reshape(merged)
        flat = source.reshape(merged[:axis] + (np.size(index),) + merged[axis + 1 :])
        at = (slice(None),) * axis
        ufunc = SCATTER_KINDS.get(self.kind)
        if source.dtype == np.bool_ and self.kind in ("add", "mul"):
            ufunc = np.logical_or if self.kind == "add" else np.logical_and
        with np.errstate(all="ignore"):
            for b, position in enumerate(np.reshape(index, -1).tolist()):
                update = flat[at + (b,)]
                if ufunc is not None:  # combined with the element in source's type; a store replaces it
                    update = ufunc(result[at + (position,)].astype(source.dtype), update)
                result[at + (position,)] = update.astype(dest.dtype)
        return result.reshape(dest.shape)
