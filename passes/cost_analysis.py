"""What scheduled affine IR costs, kernel by kernel: floating-point operations and bytes moved.

A static count of what the loops execute, read off the IR the code generators
emit: each arithmetic or math op on ``f32``/``f64`` (a vector op counts once per
lane) times the trip counts of the loops around it, and the size of every buffer
a kernel loads from or stores to, each buffer counted once however often it is
touched (a kernel's own scratch, a packed tile, is left out: it lives in cache).
Conversions, selects and constants are not FLOPs. For::

    affine.for %k0.i = 0 to 64 {
      affine.for %k0.j = 0 to 32 {
        %0 = affine.for %k0.r = 0 to 16 iter_args(%acc = %zero) -> (f32) {
          %1 = affine.load %a[%k0.i, %k0.r] : memref<64x16xf32>
          %2 = affine.load %b[%k0.r, %k0.j] : memref<16x32xf32>
          %3 = arith.mulf %1, %2 : f32
          %4 = arith.addf %acc, %3 : f32
          affine.yield %4 : f32
        }
        affine.store %0, %c[%k0.i, %k0.j] : memref<64x32xf32>
      }
    }

the kernel ``k0`` does 2 * 64 * 32 * 16 = 65536 FLOPs, reads 4096 + 2048 bytes
(``%a``, ``%b``) and writes 8192 (``%c``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects.traits import LOOP_LIKE, MEMORY_ACCESS, MEMORY_WRITE
from kiln.dialects.types import MemRefType, VectorType

NOT_FLOPS = {
    "arith.constant",
    "arith.select",
    "arith.extf",
    "arith.truncf",
    "arith.sitofp",
    "arith.uitofp",
    "arith.fptosi",
    "arith.bitcast",
    "arith.index_cast",
    "affine.apply",  # index arithmetic, as the accesses' own maps
}
# Top-level ops that set up memory or return rather than compute.
HOST_OPS = (MR.AllocOp, MR.AllocaOp, MR.DeallocOp, MR.ViewOp, MR.GetGlobalOp, F.ReturnOp)


@dataclass(frozen=True)
class KernelCost:
    """One kernel's work: `flops` executed, and bytes of the buffers it reads, writes, or
    either (`bytes_accessed`: a buffer both read and written counts once)."""

    name: str
    flops: int
    bytes_read: int
    bytes_written: int
    bytes_accessed: int


def kernel_units(function: F.FuncOp) -> list:
    """The function's work in order, as (kernel name, top-level ops) per kernel; a kernel's
    name is its loops' prefix (``k0`` for ``%k0.i``), ``scalar`` for work outside loops."""
    units = []
    for op in function.body.ops:
        if isinstance(op, HOST_OPS) or op.name == "arith.constant":
            continue
        name = A.kernel_of(op) if op.has_trait(LOOP_LIKE) else "scalar"
        if units and units[-1][0] == name:
            units[-1][1].append(op)
        else:
            units.append((name, [op]))
    return units


def count_flops(op, multiplier=1, enclosing=None) -> int:
    """Floating-point operations `op` executes, `multiplier` times over (the enclosing trips;
    `enclosing` maps the induction variables of the loops around `op` to their loops)."""
    if op.has_trait(LOOP_LIKE):
        enclosing = dict(enclosing or {})
        trips = _mean_trips(op, enclosing) if isinstance(op, A.ForOp) else op.upper
        if isinstance(op, A.ForOp):
            enclosing[op.induction_variable] = op
        return round(sum(count_flops(inner, multiplier * max(trips, 0), enclosing) for inner in op.body.ops))
    if op.name in NOT_FLOPS or not (
        op.name.startswith("arith.") or op.name.startswith("math.") or op.name == "vector.reduction"
    ):
        return 0
    t = op.results[0].type if op.results else None
    if isinstance(t, VectorType):
        return multiplier * t.lanes
    if op.name == "vector.reduction":
        return multiplier * op.operands[0].type.lanes
    return multiplier if t is not None and getattr(t, "name", "") in ("f32", "f64") else 0


def _mean_trips(loop, enclosing):
    """A loop's iterations, averaged over the iterations of the loop its ``min`` bound reads
    (a GPU split's ``min(16, K - 16 * r.o)``: 16 but the last): exact where each loop's bound
    reads one enclosing loop of constant bounds; otherwise the most it can have."""
    if loop.constant_bounds:
        return loop.trip_count
    operands = set(loop.bound_operands)
    outer = enclosing.get(next(iter(operands))) if len(operands) == 1 else None
    if outer is None or not outer.constant_bounds:
        return loop.trip_count
    values = range(outer.lower, outer.upper, outer.step)
    if not values:
        return 0
    dims = loop.upper_map.num_dims
    total = sum(len(range(loop.lower, min(loop.upper_map.evaluate([v] * dims)), loop.step)) for v in values)
    return Fraction(total, len(values))


def buffer_bytes(ops) -> tuple:
    """(bytes read, bytes written, bytes accessed) of the buffers `ops` load or store,
    each buffer counted once; buffers the ops allocate themselves are left out."""
    inside = {r for top in ops for op in top.walk() for r in op.results}
    read, written = {}, {}
    for top in ops:
        for op in top.walk():
            memref = op.memref if op.has_trait(MEMORY_ACCESS) else None
            if memref is not None and isinstance(memref.type, MemRefType) and memref not in inside:
                size = memref.type.size * memref.type.dtype.itemsize
                (written if op.has_trait(MEMORY_WRITE) else read)[memref] = size
    accessed = {**read, **written}
    return sum(read.values()), sum(written.values()), sum(accessed.values())


def cost_analysis(function: F.FuncOp) -> list:
    """One KernelCost per kernel of a scheduled (or affine) `function`, in execution order."""
    costs = []
    for name, ops in kernel_units(function):
        read, written, accessed = buffer_bytes(ops)
        costs.append(KernelCost(name, sum(count_flops(op) for op in ops), read, written, accessed))
    return costs
