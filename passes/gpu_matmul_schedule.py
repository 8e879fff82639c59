"""The CUDA default schedule for matrix products: register tiles fed from shared memory.

A block computes a ``BM x BN`` tile of the result with ``TY x TX`` threads; each thread
holds ``BM/TY x BN/TX`` results in registers (its rows ``TY`` apart and its columns ``TX``
apart, so that neighbouring threads store neighbouring elements). The k loop walks ``BK``
columns of A and rows of B at a time; each step the block copies its ``BM x BK`` tile of A
and ``BK x BN`` tile of B into shared memory (``cache_read`` on the GPU), and every thread
reads its operands from there: each element of A and B comes from global memory once per
block instead of once per result. For a 128 x 128 x 128 product the steps are::

    tile([k0.i, k0.j], [64, 64])
    tile([k0.i.i, k0.j.i], [16, 16])
    reorder([k0.i.i.i, k0.j.i.i, k0.i.i.o, k0.j.i.o])
    unroll_jam(k0.i.i.o, 4)          # 4 rows of accumulators ...
    unroll_jam(k0.j.i.o, 4)          # ... by 4 columns: 16 iter_args of one k loop
    split(k0.r, 16)
    bind(k0.i.o, blockIdx.y); bind(k0.j.o, blockIdx.x)
    bind(k0.i.i.i, threadIdx.y); bind(k0.j.i.i, threadIdx.x)
    cache_read(k0.r.o, a); cache_read(k0.r.o, b)

Where no such tile divides M or N (a prime, say), each thread computes one result of a
``16 x 16`` block tile, still fed from shared memory; the blocks at the edges have threads
with no result, which only help to copy and wait at the barriers.

A leading batch loop (``a @ b`` of 3-d arrays) is bound to ``blockIdx.z``. The tile sizes
divide M and N, so that the register loops have constant extents (``unroll_jam`` needs
them); K needs no such care (its last step is shorter for every thread).
A product too small to pay for the staging (fewer than ``MIN_WORK`` multiply-adds), or
whose M or N has no divisor that makes a useful tile, keeps one thread per result.
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import memref as MR

from .default_schedule import root_chain
from .schedule import kernels

THREADS = 16  # threads a block along each of i and j: 256 a block
REGISTERS = 4  # results a thread along each of i and j at most: 16 accumulators
K_STEP = 16  # the k columns of A (rows of B) staged per step
MIN_WORK = 1 << 15  # multiply-adds below which the default mapping is as fast
MIN_TILE = 16  # a block tile narrower than this along i or j stages too little to pay


def matmul_recipe(function, kernel: str) -> list:
    """The steps above for `kernel` when it is a matrix product (a reduction loop with one
    accumulator under two, or three with a batch, result loops of constant bounds), else []."""
    nest = next((n for n in kernels(function) if A.kernel_of(n) == kernel), None)
    chain = root_chain(nest) if nest is not None else []
    if len(chain) not in (2, 3) or not all(loop.constant_bounds for loop in chain):
        return []
    body = [op for op in chain[-1].body.ops if not isinstance(op, A.YieldOp)]
    reductions = [op for op in body if isinstance(op, A.ForOp)]
    if len(reductions) != 1 or len(reductions[0].inits) != 1 or not reductions[0].constant_bounds:
        return []
    if any(isinstance(op, A.ForOp) for op in reductions[0].body.ops):
        return []  # a reduction over more than one loop: not a plain product
    rows, cols, depth = chain[-2].upper, chain[-1].upper, reductions[0].upper
    batch = chain[0].upper if len(chain) == 3 else 1
    if batch * rows * cols * depth < MIN_WORK:
        return []
    tm, rm = _tile(rows)
    tn, rn = _tile(cols)
    i, j, r = (A.loop_name(loop) for loop in (chain[-2], chain[-1], reductions[0]))
    if tm * rm >= MIN_TILE and tn * rn >= MIN_TILE:
        steps = [
            ("tile", [i, j], [tm * rm, tn * rn]),
            ("tile", [f"{i}.i", f"{j}.i"], [tm, tn]),
            ("reorder", [f"{i}.i.i", f"{j}.i.i", f"{i}.i.o", f"{j}.i.o"]),
            ("unroll_jam", f"{i}.i.o", rm),
            ("unroll_jam", f"{j}.i.o", rn),
            ("split", r, K_STEP),
            ("bind", f"{i}.o", "blockIdx.y"),
            ("bind", f"{j}.o", "blockIdx.x"),
            ("bind", f"{i}.i.i", "threadIdx.y"),
            ("bind", f"{j}.i.i", "threadIdx.x"),
        ]
    elif rows >= THREADS and cols >= THREADS:  # no tile divides: one result a thread, edges idle
        steps = [
            ("tile", [i, j], [THREADS, THREADS]),
            ("split", r, K_STEP),
            ("bind", f"{i}.o", "blockIdx.y"),
            ("bind", f"{j}.o", "blockIdx.x"),
            ("bind", f"{i}.i", "threadIdx.y"),
            ("bind", f"{j}.i", "threadIdx.x"),
        ]
    else:
        return []
    if len(chain) == 3:
        steps.append(("bind", A.loop_name(chain[0]), "blockIdx.z"))
    reads = [op for op in reductions[0].body.ops if isinstance(op, A.LoadOp)]
    for buffer in dict.fromkeys(MR.buffer_name(op.memref) for op in reads):
        if buffer is not None:
            steps.append(("cache_read", f"{r}.o", buffer))
    return steps


def _tile(extent: int) -> tuple:
    """(threads, registers) along one result axis: the largest tile threads x registers that
    divides `extent`, with at most THREADS threads and REGISTERS registers, threads first."""
    best = (1, 1)
    for threads in range(1, THREADS + 1):
        for registers in range(1, REGISTERS + 1):
            size = threads * registers
            if extent % size == 0 and (size, threads) > (best[0] * best[1], best[0]):
                best = (threads, registers)
    return best
