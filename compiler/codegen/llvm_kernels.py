"""Each kernel of a function in an LLVM function of its own.

LLVM's loop passes (induction variable simplification, loop rotation, unrolling) do work
that grows with the function around the loop they change, so one function holding every
kernel of a model made them quadratic in its size: DenseNet-121's 10,000 blocks took 67 s
of LLVM's O2 pipeline, ResNet-50's 4,000 took 5 s. A top-level loop nest (a kernel) becomes
a call of ``internal noinline void @kiln_f.kernel<k>(...)``, whose parameters are what the
nest reads from the function::

    %status, %x, %arena, %scale  ->  call @kiln_f.kernel3(ptr %status, ptr %x, ptr %arena, float %scale)

A buffer is passed as its base, an argument of the function or an arena it allocated, both
``noalias`` as in the function; the views of an arena the nest reads are computed again
inside from the base and their constant offsets, so LLVM sees the same aliasing facts as
when the nest was inline. Constants and globals are used directly.

Nests that give values (a whole-array reduction's loop), allocate or return stay inline.
"""

from __future__ import annotations

import llvmlite.ir as ir

from kiln.codegen.llvm_emitter import FunctionEmitter
from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects.traits import ALLOCATION
from kiln.dialects.types import MemRefType
from kiln.passes.kernel_inputs import outside_values

# Ops a kernel function computes again from its parameters instead of taking their values.
_RECOMPUTED = (MR.ViewOp, MR.GetGlobalOp, AR.ConstantOp)


def _recomputed(op) -> bool:
    return isinstance(op, _RECOMPUTED)


# Ops a kernel function cannot hold: they allocate (and free on failure), or return.
_STAY_INLINE = (MR.AllocOp, MR.DeallocOp, F.ReturnOp)


class KernelEmitter(FunctionEmitter):
    """Emits one nest into its kernel function; values of the function are its parameters."""

    def __init__(self, parent: FunctionEmitter, function: ir.Function):
        self.module = parent.module
        self.globals = parent.globals
        self.func = parent.func
        self.function = function
        self.values = {}
        self.allocations = []
        self.sites = parent.sites
        self.alloca_builder = ir.IRBuilder(function.append_basic_block("entry"))
        self.start = function.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)


def outline_kernel(e: FunctionEmitter, nest, emit_nest) -> bool:
    """Emit `nest` (a top-level loop nest of e's function) as a kernel function and a call
    to it; `emit_nest(emitter, nest)` emits the nest itself. False if it must stay inline."""
    if nest.results or any(isinstance(op, _STAY_INLINE) for op in nest.walk()):
        return False
    parameters, recomputed = outside_values([nest], _recomputed)
    outer = [e.status] + [e.get(v) for v in parameters]
    count = sum(1 for g in e.module.globals.values() if g.name.startswith(f"{e.function.name}.kernel"))
    function = ir.Function(
        e.module, ir.FunctionType(ir.VoidType(), [v.type for v in outer]), name=f"{e.function.name}.kernel{count}"
    )
    function.linkage = "internal"
    function.attributes.add("noinline")  # inlined back, it would be one huge function again
    function.attributes.add("nounwind")
    inner = KernelEmitter(e, function)
    inner.status = function.args[0]
    function.args[0].add_attribute("noalias")  # a stack slot of the caller
    for value, arg in zip(parameters, function.args[1:]):
        inner.values[value] = arg
        if _is_base(value):
            arg.add_attribute("noalias")
    inner.emit_ops(recomputed)
    emit_nest(inner, nest)
    inner.b.ret_void()
    inner.alloca_builder.branch(inner.start)
    e.b.call(function, outer)
    return True


def _is_base(value) -> bool:
    """A buffer that overlaps no other the function can see: an argument (the caller
    checks) or an allocation of the function's own."""
    if not isinstance(value.type, MemRefType):
        return False
    return getattr(value, "op", None) is None or value.op.has_trait(ALLOCATION)


def is_kernel(e: FunctionEmitter, op) -> bool:
    """Whether `op` is a loop nest at the top of the function `e` emits."""
    return type(e) is FunctionEmitter and isinstance(op, A.ForOp) and op.parent is e.func.body
