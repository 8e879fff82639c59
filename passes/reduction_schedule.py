"""Schedules for reductions along a non-contiguous axis (column sums, bias gradients).

The default schedule vectorizes such a kernel along its result loop, which reads
memory contiguously, and the reduction loops inside carry vectors. One vector of
columns per trip down the rows reads one cache line per row, each in a new page,
and its single accumulator chain waits on every load. Jamming several vectors
of columns into the same trip reads as many consecutive lines per row into as
many independent accumulators, the summation tree unchanged (each column's sum is
the same sequence of additions). ``x.sum(axis=0)`` of a 1024x1024 float32 array,
after ``vectorize(k0.i, 16)`` and ``unroll_jam(k0.i, 32)``::

    affine.parallel (%k0.i.u) = (0) to (2) {
      ... 32 accumulators per level of the tree over the rows ...
          affine.for %k0.r = 0 to 128 iter_args(%acc0_2 = %..., ...) -> (vector<16xf32>, ...) {
            %.. = affine.vector_load %v[... + %k0.r, %k0.i.u * 512] : memref<1024x1024xf32>, vector<16xf32>
            ...
            %.. = affine.vector_load %v[... + %k0.r, %k0.i.u * 512 + 496] : memref<1024x1024xf32>, vector<16xf32>
"""

from __future__ import annotations

from kiln.dialects import affine as A

from .loop_transforms import ScheduleError
from .schedule import apply_step, find_loop


def jam_vector_reductions(function, name: str, vector_bits: int, schedule) -> None:
    """After `name`, a loop around reduction loops, was vectorized: jam its vectors so that
    each step down the reduced axis reads several consecutive ones, as many as leave two
    iterations for the thread pool (AVX-512's 32 registers take up to 32 accumulators in a
    leaf: the levels above it spill once a leaf; AVX2's 16, 8)."""
    loop = find_loop(function, name)
    inner = [op for op in loop.walk() if isinstance(op, A.ForOp) and op is not loop]
    if not inner or not all(op.inits for op in inner) or not loop.constant_bounds:
        return
    factors = (32, 16, 8, 4) if vector_bits >= 512 else (8, 4)
    chosen = [f for f in factors if loop.upper // f >= 2] or [f for f in factors if f <= loop.upper]
    for factor in chosen:
        try:
            apply_step(function, ("unroll_jam", name, factor))
        except ScheduleError:
            continue
        schedule.add("unroll_jam", name, factor)
        return
