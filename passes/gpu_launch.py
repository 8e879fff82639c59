"""How a scheduled loop nest is launched on a GPU: which of its loops spread over threads,
and the grid and block sizes that cover them (``Launch``).

Decided here once, for the ``outline-kernels{launch=true}`` pass that writes it on each
kernel's call (``kiln.grid``, ``kiln.block``, as MLIR's ``gpu.launch_func`` takes them) and
for the CUDA printer, which launches each callee with the sizes of its call and walks the
same thread loops. Two mappings:

* a nest no schedule bound (``plain_launch``): its perfectly nested loops from the top with
  constant bounds and no iter_args (``thread_loops``) flatten into one index that a
  grid-stride loop spreads over a one-dimensional grid of ``THREADS_PER_BLOCK`` threads a
  block; what is inside them runs sequentially in each thread. A scatter's loops over its
  index (``may_collide``) and what they hold run in one thread, in order;
* a nest whose loops are bound to ``blockIdx``/``threadIdx`` (``bound_launch``): each axis
  covers its longest bound loop, within CUDA's limits (strided loops cover the rest).

An empty nest launches nothing: its grid is ``(0, 1, 1)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kiln.dialects import affine as A
from kiln.dialects import gpu as G
from kiln.dialects import memref as MR
from kiln.dialects.affine import BIND

THREADS_PER_BLOCK = 256
THREADS_PER_BLOCK_MAX = 1024  # every NVIDIA GPU since compute capability 2.0
KILN_WARP = 32  # threads a warp, as KILN_WARP in the CUDA prelude
THREADS_ALONG = {"x": 1024, "y": 1024, "z": 64}  # blockDim's largest x, y, z on every CUDA GPU


class Launch(NamedTuple):
    """A kernel's launch: `grid` and `block` are (x, y, z) sizes; `cooperative` when the
    block's threads meet at barriers or combine a reduction (they must run together)."""

    grid: tuple
    block: tuple
    cooperative: bool = False

    @property
    def empty(self) -> bool:
        return 0 in self.grid


def bound(nest) -> bool:
    """Whether a schedule bound some loop of `nest` to a block or thread index."""
    return any(BIND in op.attributes for op in nest.walk())


def launch_of(nest) -> Launch:
    """The launch of a top-level loop nest that gives no values (`nest`, an affine.for)."""
    return bound_launch(nest) if bound(nest) else plain_launch(nest)


def thread_loops(nest) -> list:
    """The loops of an unbound nest that spread over the grid, outermost first (may be empty:
    the whole nest then runs in one thread)."""
    chain = [nest]
    while True:
        body = [op for op in chain[-1].body.ops if not isinstance(op, A.YieldOp)]
        if len(body) == 1 and isinstance(body[0], A.ForOp) and not body[0].inits and body[0].constant_bounds:
            chain.append(body[0])
        else:
            break
    if isinstance(chain[0], A.ForOp) and (chain[0].inits or not chain[0].constant_bounds):
        return []
    # a scatter's loops over its index stay in one thread, in order (see may_collide)
    return chain[: next((k for k, loop in enumerate(chain) if may_collide(loop)), len(chain))]


def flat_extent(chain) -> int:
    """How many iterations the thread loops `chain` make together (1 for none)."""
    return int(np.prod([loop.upper for loop in chain], dtype=np.int64)) if chain else 1


def plain_launch(nest) -> Launch:
    """One thread an iteration of the thread loops, `THREADS_PER_BLOCK` a block, at most
    65535 blocks (the grid-stride loop covers the rest)."""
    total = flat_extent(thread_loops(nest))
    if total == 0:
        return Launch((0, 1, 1), (1, 1, 1))
    threads = min(THREADS_PER_BLOCK, total)
    return Launch((min(65535, -(-total // threads)), 1, 1), (threads, 1, 1))


def bound_launch(nest) -> Launch:
    """Each bound axis as long as its longest loop, within CUDA's limits; around barriers,
    exactly as many threads as the thread loops there run (each thread one iteration); a
    bound reduction's threads in whole warps (they combine with warp shuffles)."""
    extents = {}
    for op in nest.walk():  # several loops on one index: the launch covers the longest
        if BIND in op.attributes:
            extents[op.attributes[BIND]] = max(extents.get(op.attributes[BIND], 1), op.trip_count)
    barriers = any(isinstance(op, G.BarrierOp) for op in nest.walk())
    if barriers:  # every thread runs one iteration of each thread loop around a barrier
        extents.update(barrier_thread_extents(nest))
    threads = {}
    for axis in "xyz":  # CUDA's limits: 1024 threads a block, 64 along z; strided loops cover the rest
        room = THREADS_PER_BLOCK_MAX // int(np.prod(list(threads.values()) or [1]))
        threads[axis] = max(1, min(extents.get(f"threadIdx.{axis}", 1), room, THREADS_ALONG[axis]))
    # A bound reduction's threads combine their shares with warp shuffles: full warps only
    # (the bind step allows threadIdx.x alone in such a kernel).
    reductions = bound_reductions(nest)
    if reductions:
        threads["x"] = min(THREADS_PER_BLOCK_MAX, -(-threads["x"] // KILN_WARP) * KILN_WARP)
    blocks = tuple(max(1, min(extents.get(f"blockIdx.{axis}", 1), 65535)) for axis in "xyz")
    return Launch(blocks, tuple(threads.values()), barriers or reductions)


def bound_reductions(nest) -> bool:
    """Whether `nest` holds a reduction loop bound to a thread index."""
    return any(isinstance(op, A.ForOp) and op.inits and BIND in op.attributes for op in nest.walk())


def barrier_thread_extents(nest) -> dict:
    """{thread axis: extent} of the thread loops around the kernel's barriers. The block has
    exactly that many threads on the axis, so every thread runs one iteration of each and
    reaches every barrier (the cache_read step checked that their bounds are constant)."""
    found = {}
    for op in nest.walk():
        if not isinstance(op, G.BarrierOp):
            continue
        loop = op.parent.parent.parent
        while isinstance(loop, A.ForOp):
            axis = str(loop.attributes.get(BIND, ""))
            if axis.startswith("threadIdx"):
                if found.setdefault(axis, A.constant_limit(loop)) != A.constant_limit(loop):
                    raise NotImplementedError(f"barriers under {axis} loops of different extents")
            loop = loop.parent.parent.parent if loop.parent is not None and loop.parent.parent is not None else None
    return found


def may_collide(loop) -> bool:
    """Whether two iterations of `loop` may write one element: it holds a store through a
    computed index (a scatter's memref.store) none of whose subscripts is an affine.apply
    of the loop's variable. A scatter's loops over the other axes of its destination pass
    their variable to the subscript that way, so their iterations write distinct elements
    and spread over threads; its loops over the index do not, and run sequentially in one
    thread, in the index's order, as numpy's ufunc.at and assignment apply updates (a
    repeated index then sees every earlier update, and the last store wins)."""
    iv = loop.induction_variable
    for op in loop.walk():
        if isinstance(op, MR.StoreOp) and not any(
            isinstance(getattr(i, "op", None), A.ApplyOp) and iv in i.op.operands for i in op.indices
        ):
            return True
    return False
