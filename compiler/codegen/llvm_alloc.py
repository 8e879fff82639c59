"""LLVM code for ``memref.alloc`` and ``memref.dealloc``: heap buffers, and the one block
a function keeps between calls.

A buffer allocated at the top of a function body with a static size (the memory plan's
arena, above all) is not given back to the C library when the call ends: the function
keeps one such block in a private global slot and the next call takes it again::

    block = atomicrmw xchg @f.kept0, null        ; take the kept block, if any
    if block == null: block = aligned_alloc(64, size)
    ...                                          ; the body
    if cmpxchg(@f.kept0, null, block) failed:    ; put it back, unless a concurrent call
        free(block)                              ; already has: then this one is freed

Why: glibc serves a block above its mmap threshold (128 KiB, growing with use) by mmap and
gives it back by munmap, so every call faulted in every page of its scratch memory again:
on a virtual machine 3 µs a 4 KiB page, which made a 1.5 MiB arena cost 1.1 ms a call,
six times the kernels' own time (bench/data_dependent.py's cumsum row). Whether it
happened depended on what the process had allocated before. The exchange keeps the
function reentrant: calls from several threads at once each get a block of their own.
What stays allocated is one block per compiled function (ONNX Runtime's and PyTorch's CPU
allocators keep freed memory in the same way); a buffer allocated inside a loop, or sized
at run time, is freed as before.
"""

from __future__ import annotations

import llvmlite.ir as ir

from kiln.codegen.llvm_emitter import I8, I32, I64, FunctionEmitter, handles, stored
from kiln.codegen.status import STATUS
from kiln.dialects import memref as MR

_BYTES = I8.as_pointer()


def _kept_slot(e: FunctionEmitter, op):
    """The global that keeps `op`'s block between calls, or None where it is freed: an
    allocation inside a loop (made again each time round) is not kept."""
    if op.parent is not e.func.body:
        return None
    kept = e.kept_slots
    if op not in kept:
        slot = ir.GlobalVariable(e.module, _BYTES, name=f"{e.function.name}.kept{len(kept)}")
        slot.linkage = "internal"
        slot.initializer = ir.Constant(_BYTES, None)
        slot.align = 8
        kept[op] = slot
    return kept[op]


@handles(MR.AllocOp)
def _alloc(e: FunctionEmitter, op):
    t = op.result.type
    size = max(t.size * t.dtype.itemsize, 1)
    size = -(-size // MR.ALIGNMENT) * MR.ALIGNMENT  # aligned_alloc wants a multiple of the alignment
    aligned_alloc = e.declare("aligned_alloc", _BYTES, [I64, I64])
    slot = _kept_slot(e, op)
    if slot is None:
        raw = e.b.call(aligned_alloc, [ir.Constant(I64, MR.ALIGNMENT), ir.Constant(I64, size)])
    else:
        taken = e.b.atomic_rmw("xchg", slot, ir.Constant(_BYTES, None), "acquire")
        before = e.b.block
        with e.b.if_then(e.b.icmp_unsigned("==", taken, ir.Constant(_BYTES, None)), likely=False):
            fresh = e.b.call(aligned_alloc, [ir.Constant(I64, MR.ALIGNMENT), ir.Constant(I64, size)])
            allocated = e.b.block
        raw = e.b.phi(_BYTES)
        raw.add_incoming(taken, before)
        raw.add_incoming(fresh, allocated)
    failed = e.b.icmp_unsigned("==", raw, ir.Constant(_BYTES, None))
    with e.b.if_then(failed, likely=False):
        free = e.declare("free", ir.VoidType(), [_BYTES])
        for earlier in e.allocations:
            e.b.call(free, [e.b.bitcast(earlier, _BYTES)])
        e.b.ret(ir.Constant(I32, STATUS["out of memory"]))
    pointer = e.b.bitcast(raw, stored(t.element).as_pointer())
    e.allocations.append(pointer)
    e.values[op.result] = pointer


@handles(MR.DeallocOp)
def _dealloc(e: FunctionEmitter, op):
    free = e.declare("free", ir.VoidType(), [_BYTES])
    block = e.b.bitcast(e.get(op.memref), _BYTES)
    slot = e.kept_slots.get(getattr(op.memref, "op", None))
    if slot is None:
        e.b.call(free, [block])
        return
    swapped = e.b.cmpxchg(slot, ir.Constant(_BYTES, None), block, "release", "monotonic")
    with e.b.if_then(e.b.not_(e.b.extract_value(swapped, 1)), likely=False):
        e.b.call(free, [block])
