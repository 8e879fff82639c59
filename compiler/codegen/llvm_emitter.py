"""The state of emitting one ``func.func`` as LLVM IR, and the table of op handlers.

A ``FunctionEmitter`` walks a function's ops in order and calls the handler
registered for each op class (``@handles(OpClass)``); a handler reads its operands'
LLVM values from ``emitter.values`` and records its results there. The handlers live
in ``llvm_codegen`` (affine, memref, func), ``llvm_ops`` (arith, math, vector) and
``llvm_parallel`` (``affine.parallel``); this module knows none of them.

Memrefs are bare pointers to row-major data (their static shapes give the strides);
``index`` is i64; ``i1`` is stored in memory as one byte, like numpy's bool; ``f16`` is
an ``i16`` of its bits, only loaded, stored, selected and converted (no kernel computes in
it: see passes/emulate_floats.py).
"""

from __future__ import annotations

import re

import llvmlite.ir as ir

from kiln.codegen.status import OUT_OF_BOUNDS
from kiln.dialects import func as F
from kiln.dialects.affine_expr import Binary, Const, Dim
from kiln.dialects.func import walk_inlined
from kiln.dialects.traits import MEMORY_ACCESS
from kiln.dialects.types import MemRefType, VectorType


def access_sites(function, callees=None) -> list:
    """Every load and store of a scheduled function, in a fixed order: the numbering
    debug builds use to say which access went out of bounds (the same once its kernels
    are outlined into `callees`, name -> private FuncOp)."""
    return [op for op in walk_inlined(function, callees) if op.has_trait(MEMORY_ACCESS)]


def top_level_ops(function, callees=None) -> list:
    """The function's top-level ops, each func.call followed by its callee's: the ops
    ``kiln profile``'s probes are keyed by, outlined or not."""
    return [each for op in function.body.ops for each in top_level_ops_of(op, callees)]


def top_level_ops_of(op, callees=None) -> list:
    """[op], and after a func.call the ops of its callee (from `callees`)."""
    if callees and isinstance(op, F.CallOp) and op.attributes["callee"] in callees:
        return [op] + callees[op.attributes["callee"]].body.ops
    return [op]


I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
# f16 is its IEEE binary16 bits in an i16: LLVM's `half` would need the compiler runtime's
# conversion calls on CPUs without F16C, which a JIT cannot resolve (see llvm_half).
_SCALARS = {
    "f16": I16,
    "f32": ir.FloatType(),
    "f64": ir.DoubleType(),
    "i1": I1,
    "i8": I8,
    "i16": I16,
    "i32": I32,
    "i64": I64,
    "index": I64,
}
_INTRINSIC_SUFFIX = {"f32": "f32", "f64": "f64", "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64"}


def symbol_name(function_name: str) -> str:
    """The native symbol of a kiln function: prefixed so that a function called
    ``exp`` cannot shadow the C library's, and made a C identifier."""
    return "kiln_" + re.sub(r"\W", "_", function_name)


def scalar(t) -> ir.Type:
    """The LLVM type of a scalar or vector IR type."""
    if isinstance(t, VectorType):
        return ir.VectorType(_SCALARS[t.element.name], t.lanes)
    return _SCALARS[t.name]


def stored(t) -> ir.Type:
    """How an element (or a vector of them) sits in memory: bool as a byte."""
    if isinstance(t, VectorType):
        return ir.VectorType(stored(t.element), t.lanes)
    return I8 if t.name == "i1" else scalar(t)


def suffix(t) -> str:
    """An intrinsic's type suffix: f32, or v16f32 for a vector."""
    if isinstance(t, VectorType):
        return f"v{t.lanes}{_INTRINSIC_SUFFIX[t.element.name]}"
    return _INTRINSIC_SUFFIX[t.name]


class FunctionEmitter:
    def __init__(self, llvm_module, globals_, func: F.FuncOp):
        self.module = llvm_module
        self.globals = globals_
        self.func = func
        arg_types = [stored(a.type.element).as_pointer() for a in func.arguments]
        self.function = ir.Function(llvm_module, ir.FunctionType(I32, arg_types), name=symbol_name(func.sym_name))
        self.function.attributes.add("nounwind")
        for arg in self.function.args:
            arg.add_attribute("noalias")  # inputs are only read; outputs never overlap anything (checked by the caller)
        self.values = {}
        self.allocations = []
        self.kept_slots = {}  # memref.alloc -> the global keeping its block between calls (llvm_alloc)
        self.sites = None  # {id(access op): number} in debug builds
        self.probes = None  # a llvm_probes.Probes when kiln profile times this function's kernels
        self.callees = {}  # the module's private functions by name: what func.call runs

    def share_function_state(self, parent: "FunctionEmitter", function: ir.Function) -> None:
        """For an emitter of a function cut out of `parent`'s (a kernel, a parallel loop's
        body): what belongs to the whole function is shared (the LLVM module, its globals, the
        kiln function, its access sites and callees: a check's status code is numbered over
        them); values and allocations start empty."""
        self.module = parent.module
        self.globals = parent.globals
        self.func = parent.func
        self.sites = parent.sites
        self.callees = parent.callees
        self.probes = None
        self.function = function
        self.values = {}
        self.allocations = []
        self.kept_slots = {}

    def emit(self) -> None:
        # The entry block holds only stack slots, so that one made inside a loop is made once.
        self.alloca_builder = ir.IRBuilder(self.function.append_basic_block("entry"))
        start = self.function.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        self.status = self.alloca_builder.alloca(I32, name="status")
        self.b.store(ir.Constant(I32, 0), self.status)
        for arg, llvm_arg in zip(self.func.arguments, self.function.args):
            llvm_arg.name = arg.name_hint or ""
            self.values[arg] = llvm_arg
        self.emit_block(self.func.body)
        self.alloca_builder.branch(start)

    def emit_block(self, block) -> None:
        self.emit_ops(block.ops)

    def get(self, value):
        return self.values[value]

    def emit_ops(self, ops) -> None:
        probes = getattr(self, "probes", None)  # a kernel's emitter has none: its ops are not top level
        for op in ops:
            handler = HANDLERS.get(type(op))
            if handler is None:
                raise NotImplementedError(f"no LLVM code generation for {op.name}")
            # A call's probes are its callee's ops' too: the profiler keys them by the ops the
            # scheduled function had at its top level, before outline-kernels moved them.
            marked = top_level_ops_of(op, self.callees) if probes is not None else ()
            for each in marked:
                probes.before(self, each)
            handler(self, op)
            for each in marked:
                probes.after(self, each)

    # -- functions this module calls -------------------------------------------------
    def declare(self, name: str, result: ir.Type, args) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(result, list(args)), name=name)

    def intrinsic(self, base: str, t, arity: int = 1) -> ir.Function:
        llvm_type = scalar(t)
        return self.declare(f"llvm.{base}.{suffix(t)}", llvm_type, [llvm_type] * arity)

    # -- index arithmetic ---------------------------------------------------------------
    def index_value(self, expr, operands):
        if isinstance(expr, Const):
            return ir.Constant(I64, expr.value)
        if isinstance(expr, Dim):
            return self.get(operands[expr.index])
        assert isinstance(expr, Binary)
        lhs, rhs = self.index_value(expr.lhs, operands), self.index_value(expr.rhs, operands)
        if expr.kind == "+":
            return self.b.add(lhs, rhs, flags=["nsw"])
        if expr.kind == "*":
            return self.b.mul(lhs, rhs, flags=["nsw"])
        if expr.kind == "ceildiv":
            return self.b.neg(self.floordiv(self.b.neg(lhs), rhs))
        return self.floordiv(lhs, rhs) if expr.kind == "floordiv" else self.floormod(lhs, rhs)

    def floordiv(self, a, b):
        """Division rounding toward -inf (affine semantics), for a positive divisor."""
        quotient = self.b.sdiv(a, b)
        negative_remainder = self.b.icmp_signed("<", self.b.srem(a, b), ir.Constant(I64, 0))
        return self.b.sub(quotient, self.b.zext(negative_remainder, I64))

    def floormod(self, a, b):
        remainder = self.b.srem(a, b)
        negative = self.b.icmp_signed("<", remainder, ir.Constant(I64, 0))
        return self.b.add(remainder, self.b.select(negative, b, ir.Constant(I64, 0)))

    def guarded(self, access, lanes: int, emit_access, zero=None):
        """`emit_access()` only where every index is inside the buffer (debug builds); an
        access outside records its site in the status and gives `zero` instead."""
        if self.sites is None:
            return emit_access()
        ok = ir.Constant(I1, 1)
        shape = access.memref.type.shape
        for k, (expr, size) in enumerate(zip(access.map.results, shape)):
            index = self.index_value(expr, access.indices)
            end = size - (lanes - 1 if k == len(shape) - 1 else 0)
            ok = self.b.and_(ok, self.b.icmp_signed(">=", index, ir.Constant(I64, 0)))
            ok = self.b.and_(ok, self.b.icmp_signed("<", index, ir.Constant(I64, end)))
        with self.b.if_else(ok) as (inside, outside):
            with inside:
                value = emit_access()
                inside_block = self.b.block
            with outside:
                code = ir.Constant(I32, OUT_OF_BOUNDS + self.sites[id(access)])
                status = self.b.load(self.status)
                first = self.b.icmp_signed("==", status, ir.Constant(I32, 0))
                self.b.store(self.b.select(first, code, status), self.status)
                outside_block = self.b.block
        if zero is None:
            return None
        phi = self.b.phi(value.type)
        phi.add_incoming(value, inside_block)
        phi.add_incoming(zero, outside_block)
        return phi

    def address(self, access):
        t: MemRefType = access.memref.type
        offset = ir.Constant(I64, 0)
        for expr, stride in zip(access.map.results, t.strides):
            term = self.b.mul(self.index_value(expr, access.indices), ir.Constant(I64, stride), flags=["nsw"])
            offset = self.b.add(offset, term, flags=["nsw"])
        return self.b.gep(self.get(access.memref), [offset], inbounds=True)


# op class -> handler(emitter, op); llvm_codegen, llvm_ops and llvm_parallel fill it.
HANDLERS: dict = {}


def handles(*op_classes):
    def register(fn):
        for cls in op_classes:
            HANDLERS[cls] = fn
        return fn

    return register
