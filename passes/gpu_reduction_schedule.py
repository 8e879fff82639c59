"""The default GPU recipe for row reductions: one block per row, its threads sharing the row.

A kernel whose result loops hold reductions along the row (``x.sum(axis=-1)``, ``x.max(-1)``,
a mean, softmax, layernorm, logsumexp) runs each row in one thread under the grid-stride
mapping: a long row is then a long sequential loop, and neighbouring threads read memory a
row apart. This recipe binds the innermost result loop to ``blockIdx.x`` (the next ones out
to ``blockIdx.y`` and ``blockIdx.z``) and every loop of the row to ``threadIdx.x``: the
block's threads read the row together, coalesced, and each reduction is a strided share per
thread and then a tree across the block (see ``bind``). Before, a row sum on the CUDA
target::

    affine.for %k0.i = 0 to 64 {
      %1 = affine.for %k0.r = 0 to 1000 iter_args(%acc0 = %0) -> (f32) {
        %2 = affine.load %x[%k0.i, %k0.r] : memref<64x1000xf32>
        %3 = arith.addf %acc0, %2 : f32
        affine.yield %3 : f32
      } {kiln.loop = "k0.r"}
      affine.store %1, %out0[%k0.i] : memref<64xf32>
    } {kiln.loop = "k0.i"}

After, the same loops with ``{kiln.bind = "blockIdx.x"}`` on ``k0.i`` and
``{kiln.bind = "threadIdx.x"}`` on ``k0.r``; the CUDA code launches blocks of 1024 threads
(the row length rounded up to whole warps, at most 1024).

Claimed: a perfect nest of result loops whose innermost body holds at least one reduction
loop the block can combine (``reduction_combines``) that reads along the row (its index
moves only the last index of every load), and no reduction loop that reads across rows (a
``k`` loop reading ``B[k, j]``: one thread per result element reads that coalesced) or is
a matmul's (left to the matmul recipe).
Rows shorter than a warp keep one thread per row: a block would leave most threads idle.
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects.affine import loop_name
from kiln.dialects.affine_expr import dims_of
from kiln.dialects.traits import LOOP_LIKE

from .loop_transforms import reduction_combines
from .schedule import kernels

WARP = 32
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def row_reduction_recipe(function, kernel) -> list:
    """The bind steps giving `kernel` (``k0``, ...) of `function` one block per row, or []
    when it is not a row reduction (see the module's docstring)."""
    nests = [n for n in kernels(function) if A.kernel_of(n) == kernel and isinstance(n, A.ForOp)]
    if len(nests) != 1:
        return []
    rows = [nests[0]]
    while True:
        loop = rows[-1]
        if loop.inits or not loop.constant_bounds or loop.lower != 0 or loop.step != 1:
            return []
        inner = [op for op in loop.body.ops if op.has_trait(LOOP_LIKE)]
        if len(inner) == 1 and isinstance(inner[0], A.ForOp) and not inner[0].inits:
            rows.append(inner[0])  # scalar work beside it (a row's maximum loaded) runs in every thread
        else:
            break
    if any(not isinstance(op, A.ForOp) for op in inner):
        return []
    reductions = [op for op in inner if op.inits]
    ivs = [loop.induction_variable for loop in rows]
    if any(_reads_across_rows(op) or _is_matmul(op, ivs) for op in reductions):
        return []
    bound = [op for op in reductions if reduction_combines(op) is not None and _reads_along_rows(op)]
    if not bound or max(op.trip_count for op in inner) < WARP:
        return []
    # the innermost result loops to blocks, skipping those of one iteration (keepdims' axes)
    blocks = [loop for loop in reversed(rows) if loop.trip_count > 1] or rows[-1:]
    steps = [("bind", loop_name(loop), axis) for loop, axis in zip(blocks, BLOCK_AXES)]
    return steps + [("bind", loop_name(op), "threadIdx.x") for op in inner if op in bound or not op.inits]


def _loads(loop):
    """The loads inside `loop` whose indices use its induction variable, each with the
    positions of the indices that do."""
    iv = loop.induction_variable
    for op in loop.walk():
        if isinstance(op, A.LoadOp) and iv in op.indices:
            k = list(op.indices).index(iv)
            yield op, [p for p, e in enumerate(op.map.results) if k in dims_of(e)]


def _reads_along_rows(loop) -> bool:
    rank_last = [(len(load.map.results) - 1, positions) for load, positions in _loads(loop)]
    return bool(rank_last) and all(positions == [last] for last, positions in rank_last)


def _is_matmul(loop, result_ivs) -> bool:
    """Whether two of the reduction's loads each follow a result index the other does not
    (``A[i, k]`` and ``B[j, k]``): a matmul, whose tiles reuse operands across results; the
    loads of a row reduction follow the same row (or none: a matvec's vector)."""
    used = [{iv for iv in result_ivs if iv in load.indices} for load, _ in _loads(loop)]
    return any(a - b and b - a for a in used for b in used)


def _reads_across_rows(loop) -> bool:
    return any(positions and positions[-1] != len(load.map.results) - 1 for load, positions in _loads(loop))
