"""``kiln.sort``: a stable sort along the last axis (the front end moves the sorted axis
last as a view, which moves no data), giving the sorted values or the int64 permutation::

    %v = kiln.sort %x {order = "ascending", returns = "values"} : (tensor<512x128xf32>) -> tensor<512x128xf32>
    %p = kiln.sort %x {order = "descending", returns = "indices"} : (tensor<512x128xf32>) -> tensor<512x128xi64>
    %t = kiln.sort %x {count = 5, order = "descending", returns = "indices"} : (tensor<512x128xf32>) -> tensor<512x5xi64>

With ``count`` the result holds only the first `count` positions of each sorted row (a
top-k, or a partial sort): what canonicalization makes of a sort followed by a slice of its
first elements (``np.argsort(-s, axis=1)[:, :5]``, ``kiln.top_k``).

The order is numpy's (np.sort, np.argsort with kind="stable"): NaN after every number (all
NaNs equal, so they keep their index order), -0.0 equal to 0.0 (kept in index order), equal
keys in index order. "descending" is the order of ``torch.topk`` and ``jax.lax.top_k``:
NaN first, then the numbers from the largest, equal keys still in index order (so it is
not the ascending order reversed). Every element type kiln has: bool (False first), signed
and unsigned integers (compared as such), float16/32/64.

How it runs (passes/lower_sort.py): a bottom-up merge sort of each row, O(n log n), written
as ordinary affine loops. ceil(log2 n) passes, each one sequential ``affine.for`` over the
row carrying the two read positions (iter_args) and reading the runs through
``memref.load`` at those positions, four rows side by side; the groups of rows are an
outer loop the schedules may run in parallel (on a GPU one thread per group: a sort of few
long rows uses few threads). It needs no op below the tensor level, so the
LLVM and CUDA code generators, the affine interpreter and ``mlir-opt`` see only loops,
loads, stores and arith. (The other ways were a private routine per dtype, called with
``func.call``, which each code generator would write by hand, or ``scf.while``, which kiln
does not have: the fixed-trip form reads two elements per output element, about as much as
a hand-written merge.) A sort with a small ``count`` is a selection instead, O(n k) a row
with no scratch memory: the loop over the row carries the k best keys and their positions
in registers and inserts each element by compares and selects, so it needs no branch.
"""

from __future__ import annotations

import numpy as np

from .diagnostics import ShapeError
from .tensor import ALL, TensorOp
from .types import i64

SORT_ORDERS = ("ascending", "descending")
SORT_RESULTS = ("values", "indices")


def stable_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """The int64 permutation that sorts `x` along its last axis in kiln.sort's order."""
    x = np.asarray(x)
    if not descending:
        return np.argsort(x, axis=-1, kind="stable").astype(np.int64)
    # Stable: NaN first, then the keys from the largest (~ reverses integers and bools
    # without overflow, - floats exactly), equal keys in index order.
    if x.dtype.kind == "f":
        keys = (np.where(np.isnan(x), 0, -x), ~np.isnan(x))
    else:
        keys = (~x,)
    return np.lexsort(keys, axis=-1).astype(np.int64)


class SortOp(TensorOp):
    """``kiln.sort``: sorts the last axis of a tensor of rank >= 1 in `order` ("ascending" or
    "descending", see the module docstring) and `returns` "values" (same type as the
    operand) or "indices" (its shape, i64: out[..., k] is the position in the row of the
    k-th element of the sorted row). With the optional ``count`` (an int in [0, n]) the last
    axis of the result is cut to the first `count` of those. Errors: a rank-0 operand
    (ShapeError), an unknown order or `returns`, a count outside [0, n]
    (VerificationError)."""

    name = "kiln.sort"
    operand_names = ("operand",)
    attribute_names = ("order", "returns")

    def infer_result_types(self):
        t = self.tensor_operand(0)
        if self.attributes.get("order") not in SORT_ORDERS:
            raise self.error(f"kiln.sort order must be one of {', '.join(SORT_ORDERS)}, got {self.order!r}")
        if self.attributes.get("returns") not in SORT_RESULTS:
            raise self.error(f"kiln.sort returns must be one of {', '.join(SORT_RESULTS)}, got {self.returns_kind!r}")
        if t.rank == 0:
            raise self.error("kiln.sort needs an axis to sort: its operand is 0-d", ShapeError)
        self.check_element(t, ALL)
        n = t.shape[-1]
        count = self.attributes.get("count", n)
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= n:
            raise self.error(f"kiln.sort count must be an int in [0, {n}], got {count!r}")
        t = t.with_shape(t.shape[:-1] + (count,))
        return [t if self.attributes["returns"] == "values" else t.with_element(i64)]

    @property
    def returns_kind(self) -> str:
        return self.attributes.get("returns")

    @property
    def count(self) -> int:
        """How many positions of each sorted row the result holds (the whole row without a
        ``count`` attribute)."""
        return self.attributes.get("count", self.operand.type.shape[-1])

    @property
    def descending(self) -> bool:
        return self.attributes["order"] == "descending"

    def evaluate(self, x):
        """numpy's stable argsort (lexsort for descending), and the values it takes."""
        order = stable_order(x, self.descending)[..., : self.count]
        return order if self.returns_kind == "indices" else np.take_along_axis(np.asarray(x), order, axis=-1)
