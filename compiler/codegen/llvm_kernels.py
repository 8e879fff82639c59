"""Each kernel of a function in an LLVM function of its own.

LLVM's loop passes (induction variable simplification, loop rotation, unrolling) do work
that grows with the function around the loop they change, so one function holding every
kernel of a model made them quadratic in its size: DenseNet-121's 10,000 blocks took 67 s
of LLVM's O2 pipeline, ResNet-50's 4,000 took 5 s. The ``outline-kernels`` pass
(``kiln.passes.outline_kernels``) has put each kernel's nests in a private function called
once; each becomes ``internal noinline void @kiln_f.kernel<k>(...)``, whose parameters are
the status slot and the call's operands::

    func.call @f_k3(%x, %arena, %scale)  ->  call @kiln_f.kernel3(ptr %status, ptr %x, ptr %arena, float %scale)

A buffer is passed as its base, an argument of the function or an arena it allocated, both
``noalias`` as in the function; the views of an arena the nest reads are computed again
inside (the pass put them there) from the base and their constant offsets, so LLVM sees the
same aliasing facts as when the nest was inline. Constants and globals are used directly.
The function is made where its one call is emitted, so the module's functions come in the
order of the calls, and a parameter is ``noalias`` exactly where the caller's value is a base.
"""

from __future__ import annotations

import llvmlite.ir as ir

from kiln.codegen.llvm_emitter import FunctionEmitter, handles
from kiln.dialects import func as F
from kiln.dialects.traits import ALLOCATION
from kiln.dialects.types import MemRefType


class KernelEmitter(FunctionEmitter):
    """Emits one nest into its kernel function; values of the function are its parameters."""

    def __init__(self, parent: FunctionEmitter, function: ir.Function):
        self.share_function_state(parent, function)
        self.alloca_builder = ir.IRBuilder(function.append_basic_block("entry"))
        self.start = function.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)


@handles(F.CallOp)
def _call(e: FunctionEmitter, op):
    callee = e.callees[op.attributes["callee"]]
    outer = [e.status] + [e.get(v) for v in op.operands]
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
    for value, parameter, arg in zip(op.operands, callee.arguments, function.args[1:]):
        inner.values[parameter] = arg
        if _is_base(value):
            arg.add_attribute("noalias")
    inner.emit_ops(callee.body.ops[:-1])  # up to its func.return
    inner.b.ret_void()
    inner.alloca_builder.branch(inner.start)
    e.b.call(function, outer)


def _is_base(value) -> bool:
    """A buffer that overlaps no other the function can see: an argument (the caller
    checks) or an allocation of the function's own."""
    if not isinstance(value.type, MemRefType):
        return False
    return getattr(value, "op", None) is None or value.op.has_trait(ALLOCATION)
