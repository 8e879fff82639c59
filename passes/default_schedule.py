"""Default schedules: what every kernel gets without tuning.

For each kernel: vectorize the loops that can be (legality decides: a loop
whose accesses move along contiguous memory), innermost first: elementwise
loops, reductions along the contiguous axis (with a vector accumulator) and,
where the innermost loop cannot be, an outer one (matmul along its columns,
its reduction over k carrying vectors); then run the outermost loop in
parallel if the kernel does enough work to pay for waking the thread pool.
"""
from __future__ import annotations

from kiln.dialects import affine as A

from .loop_transforms import ScheduleError
from .schedule import Schedule, apply_step, kernels

PARALLEL_MIN_WORK = 1 << 16  # innermost iterations; below this a kernel stays on one thread


def default_schedule(function, vector_bits: int = 256, threads: bool = True) -> Schedule:
    """Choose and apply a schedule to `function` (affine level); returns the steps applied."""
    schedule = Schedule()
    for k in range(len(kernels(function))):
        nest = kernels(function)[k]
        for loop in _vector_candidates(nest):
            name = f"k{k}.{loop.induction_variable.name_hint}"
            lanes = vector_bits // (8 * _widest_element(loop))
            if loop.parent is None or lanes < 2 or not loop.constant_bounds or loop.upper < lanes:
                continue
            if _try(function, schedule, ("vectorize", name, lanes)) and _contains_loops(loop):
                break  # an outer loop vectorized: the loops inside it are done
        nest = kernels(function)[k]
        if threads and isinstance(nest, A.ForOp) and nest.constant_bounds and nest.upper >= 2 \
                and _work(nest) >= PARALLEL_MIN_WORK:
            _try(function, schedule, ("parallel", f"k{k}.{nest.induction_variable.name_hint}"))
    return schedule


def _try(function, schedule, step) -> bool:
    try:
        apply_step(function, step)
    except ScheduleError:
        return False
    schedule.add(*step)
    return True


def _vector_candidates(nest) -> list:
    """Loops that hold no other loop first (innermost), then the loops around them, inside out."""
    loops = [op for op in nest.walk() if isinstance(op, A.ForOp)]
    leaves = [l for l in loops if not _contains_loops(l)]
    others = [l for l in reversed(loops) if _contains_loops(l)]
    return leaves + others


def _contains_loops(loop) -> bool:
    return any(isinstance(op, (A.ForOp, A.ParallelOp)) for op in loop.walk() if op is not loop)


def _widest_element(loop) -> int:
    sizes = [op.memref.type.dtype.itemsize for op in loop.walk()
             if isinstance(op, (A.LoadOp, A.StoreOp))]
    return max(sizes, default=4)


def _work(nest) -> int:
    """Innermost iterations of a nest: the product of loop trip counts along its deepest path."""
    best = 0
    for op in nest.body.ops:
        if isinstance(op, A.ForOp):
            best = max(best, _work(op))
    trips = nest.trip_count if isinstance(nest, A.ForOp) else nest.upper
    return max(trips, 1) * max(best, 1)
