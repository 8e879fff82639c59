"""cache_read on the GPU: stage the tile of a buffer that one iteration of a loop reads, for
the whole block, in the block's shared memory, copied by all of the block's threads.

The loop must run inside a loop bound to a block index. The tile spans, besides the loops
inside it, the thread loops around it (every thread of the block reads from the one tile).
The copy is the CPU step's copy nest (``passes/cache_read.py``) with its loops bound to the
thread indices the kernel uses, the innermost to ``threadIdx.x`` (neighbouring threads read
neighbouring elements: coalesced), followed by a ``gpu.barrier`` (every thread's part of the
tile is written before any thread reads it); a second barrier ends the iteration, so that no
thread overwrites the tile with the next iteration's while another still reads it. Before
(a matmul after ``tile([k0.i, k0.j], [16, 16]); split(k0.r, 8)`` and four binds)::

    affine.for %k0.i.o = 0 to 2 {
      affine.for %k0.j.o = 0 to 2 {
        affine.for %k0.i.i = 0 to 16 {
          affine.for %k0.j.i = 0 to 16 {
            %1 = affine.for %k0.r.o = 0 to 4 iter_args(%acc0 = %0) -> (f32) {
              %2 = affine.for %k0.r.i = 0 to 8 iter_args(%acc1 = %acc0) -> (f32) {
                %3 = affine.load %a[%k0.i.o * 16 + %k0.i.i, %k0.r.o * 8 + %k0.r.i] : memref<32x32xf32>
                ...

After ``cache_read(k0.r.o, a)``::

            %1 = affine.for %k0.r.o = 0 to 4 iter_args(%acc0 = %0) -> (f32) {
              %a_tile = memref.alloca() {...} : memref<16x8xf32, #gpu.address_space<workgroup>>
              affine.for %k0.r.o.copy0 = 0 to 16 {
                affine.for %k0.r.o.copy1 = 0 to 8 {
                  %2 = affine.load %a[%k0.i.o * 16 + %k0.r.o.copy0, %k0.r.o * 8 + %k0.r.o.copy1] : memref<32x32xf32>
                  affine.store %2, %a_tile[%k0.r.o.copy0, %k0.r.o.copy1] : memref<16x8xf32, #gpu...>
                } {kiln.bind = "threadIdx.x", kiln.loop = "k0.r.o.copy1"}
              } {kiln.bind = "threadIdx.y", kiln.loop = "k0.r.o.copy0"}
              gpu.barrier
              %3 = affine.for %k0.r.i = 0 to 8 iter_args(%acc1 = %acc0) -> (f32) {
                %4 = affine.load %a_tile[%k0.i.i, %k0.r.i] : memref<16x8xf32, #gpu...>
                ...
              gpu.barrier
              affine.yield %3 : f32

Every thread of a block must reach every barrier, so the step is refused where it cannot
be sure they do: a loop around it bound to a thread index without a constant limit (a
constant bound, or a ``min`` with a constant: the CUDA backend launches that many threads,
one iteration each, and those past a partial tile's bound only copy and wait), more than
1024 threads, a loop around it whose bound depends on a thread index, more than 48 KiB of
shared memory in the kernel, or a buffer the kernel also writes (a block's copy would race
with the writes).
"""

from __future__ import annotations

import math

from kiln.dialects import affine as A
from kiln.dialects import gpu as G
from kiln.dialects import memref as MR
from kiln.dialects.affine import BIND, loop_name
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import AFFINE_WRITE, LOOP_LIKE

from .cache_read import cache_read
from .loop_transforms import ScheduleError

THREADS_PER_BLOCK_MAX = 1024
THREAD_AXIS_MAX = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64}  # CUDA's blockDim limits
SHARED_MEMORY_BYTES = 48 * 1024  # what a block may declare statically on every CUDA GPU
WORKGROUP = "workgroup"


def gpu_cache_read(loop, buffer_name: str, layout=None):
    """Stage `buffer_name`'s tile for `loop`'s iterations in shared memory (see the module's
    docstring); returns the tile's allocation. ScheduleError where it is not safe."""
    step = f"cache_read({loop_name(loop)}, {buffer_name})"
    around = list(_ancestors(loop))
    if BIND in loop.attributes:
        raise ScheduleError(
            f"{step}: the loop is bound to {loop.attributes[BIND]}; stage tiles in an unbound loop inside it (a k loop)"
        )
    if not any(str(op.attributes.get(BIND, "")).startswith("blockIdx") for op in around):
        raise ScheduleError(
            f"{step}: on the GPU a cache_read stages a tile in a block's shared memory, so the loop must be "
            "inside a loop bound to blockIdx (bind the block and thread loops first)"
        )
    threads = [op for op in around if str(op.attributes.get(BIND, "")).startswith("threadIdx")]
    thread_ivs = {op.induction_variable for op in threads}
    for op in threads:
        if A.constant_limit(op) is None:
            raise ScheduleError(
                f"{step}: {loop_name(op)} (bound to {op.attributes[BIND]}) has no constant limit, so the block "
                "cannot have one thread per iteration to reach the barriers"
            )
    for op in threads:
        axis = op.attributes[BIND]
        if A.constant_limit(op) > THREAD_AXIS_MAX[axis]:
            raise ScheduleError(
                f"{step}: {loop_name(op)} is bound to {axis}, which a block has at most {THREAD_AXIS_MAX[axis]} "
                f"of, and the block needs one thread per iteration ({A.constant_limit(op)}) to reach the barriers"
            )
    if math.prod(A.constant_limit(op) for op in threads) > THREADS_PER_BLOCK_MAX:
        raise ScheduleError(
            f"{step}: the thread loops around it make more than {THREADS_PER_BLOCK_MAX} threads a block"
        )
    for op in [loop] + [o for o in around if o not in threads]:
        if isinstance(op, A.ForOp) and not op.constant_bounds and thread_ivs & set(op.bound_operands):
            raise ScheduleError(
                f"{step}: the bound of {loop_name(op)} depends on a thread index, so threads would not reach "
                "the same barriers"
            )
    copy = f"{loop_name(loop)}.{buffer_name}.copy0"
    if any(isinstance(o, A.ForOp) and loop_name(o) == copy for o in loop.walk()):
        raise ScheduleError(f"{step}: {buffer_name} is already staged in shared memory in this loop")
    kernel = around[-1] if around else loop
    for op in kernel.walk():
        if op.has_trait(AFFINE_WRITE) and MR.buffer_name(op.memref) == buffer_name:
            raise ScheduleError(f"{step}: the kernel also writes {buffer_name}; its threads would race with the copy")
    used = sum(
        op.result.type.size * op.result.type.dtype.itemsize
        for op in kernel.walk()
        if isinstance(op, MR.AllocaOp) and op.result.type.memory_space == WORKGROUP
    )
    tile, copy = cache_read(
        loop, buffer_name, layout, spanning=threads, memory_space=WORKGROUP, max_bytes=SHARED_MEMORY_BYTES - used
    )
    axes = sorted({op.attributes[BIND] for op in threads} or {"threadIdx.x"})  # x, then y, then z
    copy_loops = [op for op in copy[0].walk() if isinstance(op, A.ForOp)] if copy else []
    for d, copy_loop in enumerate(copy_loops):  # one name per buffer: two tiles of one loop stay apart
        A.set_loop_name(copy_loop, f"{loop_name(loop)}.{buffer_name}.copy{d}")
    for copy_loop, axis in zip(reversed(copy_loops), axes):
        copy_loop.attributes[BIND] = axis
    body = loop.body
    # Two cache_reads of one loop share their barriers: the copies go before the first.
    ops = [tile, *copy]  # cache_read put them first in the body; they move before the barrier
    for op in ops:
        Rewriter.detach(op)
    first = next((k for k, op in enumerate(body.ops) if isinstance(op, G.BarrierOp)), None)
    staged = first is not None and all(_is_staging(op) for op in body.ops[:first])
    new = ops if staged else ops + [G.BarrierOp([], {})]
    Rewriter.insert(new, InsertPoint.at_index(body, first if staged else 0))
    if not isinstance(body.ops[-2] if len(body.ops) > 1 else None, G.BarrierOp):
        Rewriter.insert(G.BarrierOp([], {}), InsertPoint.before(body.ops[-1]))  # before the yield
    return tile


def _is_staging(op) -> bool:
    """An op of a cache_read's staging: a shared tile's allocation or its copy nest."""
    if isinstance(op, MR.AllocaOp):
        return op.result.type.memory_space == WORKGROUP
    return isinstance(op, A.ForOp) and ".copy" in loop_name(op)


def _ancestors(op):
    """The loops around `op`, innermost first."""
    while op.parent is not None and op.parent.parent is not None:
        op = op.parent.parent.parent
        if not op.has_trait(LOOP_LIKE):
            return
        yield op
