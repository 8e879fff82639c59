"""Emit LLVM IR (through ``llvmlite.ir``) for an affine-level module.

Every ``func.func @f`` becomes ``i32 @kiln_f(ptr noalias %in..., ptr noalias %out...)``
returning a status: 0, or one of STATUS's codes. Memrefs are bare pointers
to row-major data (their static shapes give the strides); ``index`` is i64;
``i1`` is stored in memory as one byte, like numpy's bool. Loops become the
usual header/body/latch blocks with phis for induction variables and
iter_args. Float ops carry no fast-math flags: results match numpy's
elementwise semantics (reductions add in loop order).
"""
from __future__ import annotations

import re

import llvmlite.ir as ir

from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import Binary, Const, Dim
from kiln.dialects.types import MemRefType, VectorType

STATUS = {"out of memory": 1, "negative integer power": 2}
OUT_OF_BOUNDS = 1000  # debug builds: status OUT_OF_BOUNDS + k means access_sites(...)[k] went out of bounds


def access_sites(function) -> list:
    """Every load and store of a scheduled function, in a fixed order: the numbering
    debug builds use to say which access went out of bounds."""
    return [op for op in function.walk() if isinstance(op, (A.LoadOp, A.StoreOp, A.VectorLoadOp, A.VectorStoreOp))]

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_SCALARS = {"f32": ir.FloatType(), "f64": ir.DoubleType(), "i1": I1, "i8": I8, "i32": I32, "i64": I64, "index": I64}
_INTRINSIC_SUFFIX = {"f32": "f32", "f64": "f64", "i1": "i1", "i8": "i8", "i32": "i32", "i64": "i64"}


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


def emit_module(module, triple: str = "", data_layout: str = "", bounds_checks: bool = False) -> ir.Module:
    """LLVM IR for an affine-level module; `bounds_checks` guards every load and store
    (an access outside its buffer is skipped and reported through the status)."""
    llvm_module = ir.Module(name="kiln")
    llvm_module.triple = triple
    llvm_module.data_layout = data_layout
    globals_ = {}
    for op in module.body.ops:
        if isinstance(op, MR.GlobalOp):
            globals_[op.sym_name] = _emit_global(llvm_module, op)
    for op in module.body.ops:
        if isinstance(op, F.FuncOp):
            emitter = FunctionEmitter(llvm_module, globals_, op)
            if bounds_checks:
                emitter.sites = {id(site): k for k, site in enumerate(access_sites(op))}
            emitter.emit()
    return llvm_module


def _emit_global(llvm_module, op):
    data = op.initial_value.astype(op.initial_value.dtype.newbyteorder("<")).tobytes()
    array_type = ir.ArrayType(I8, len(data))
    variable = ir.GlobalVariable(llvm_module, array_type, name=op.sym_name)
    variable.initializer = ir.Constant(array_type, bytearray(data))
    variable.global_constant = True
    variable.linkage = "private"
    variable.align = MR.ALIGNMENT
    return variable


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
        self.sites = None  # {id(access op): number} in debug builds

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
        for op in ops:
            handler = _HANDLERS.get(type(op))
            if handler is None:
                raise NotImplementedError(f"no LLVM code generation for {op.name}")
            handler(self, op)

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


_HANDLERS: dict = {}


def handles(*op_classes):
    def register(fn):
        for cls in op_classes:
            _HANDLERS[cls] = fn
        return fn
    return register


@handles(F.ReturnOp)
def _return(e: FunctionEmitter, op):
    e.b.ret(e.b.load(e.status))


@handles(A.ForOp)
def _for(e: FunctionEmitter, op):
    upper = upper_bound(e, op)
    before = e.b.block
    header = e.function.append_basic_block("loop")
    body = e.function.append_basic_block("body")
    exit_ = e.function.append_basic_block("done")
    e.b.branch(header)
    e.b.position_at_end(header)
    iv = e.b.phi(I64, name="iv")
    iv.add_incoming(ir.Constant(I64, op.lower), before)
    carried = []
    for init in op.inits:
        phi = e.b.phi(e.get(init).type)
        phi.add_incoming(e.get(init), before)
        carried.append(phi)
    e.b.cbranch(e.b.icmp_signed("<", iv, upper), body, exit_)
    e.b.position_at_end(body)
    e.values[op.induction_variable] = iv
    for arg, phi in zip(op.body.args[1:], carried):
        e.values[arg] = phi
    e.emit_block(op.body)  # its affine.yield records the next values in e.yielded
    latch = e.b.block
    iv.add_incoming(e.b.add(iv, ir.Constant(I64, op.step), flags=["nsw"]), latch)
    for phi, value in zip(carried, e.yielded):
        phi.add_incoming(value, latch)
    e.b.branch(header)
    e.b.position_at_end(exit_)
    for result, phi in zip(op.results, carried):
        e.values[result] = phi


def upper_bound(e: FunctionEmitter, op):
    """The loop's upper bound as an i64: a constant, or the minimum of its map's results."""
    if op.constant_bounds:
        return ir.Constant(I64, op.upper)
    values = [e.index_value(expr, op.bound_operands) for expr in op.upper_map.results]
    bound = values[0]
    for value in values[1:]:
        bound = e.b.select(e.b.icmp_signed("<", value, bound), value, bound)
    return bound


@handles(A.YieldOp)
def _yield(e: FunctionEmitter, op):
    e.yielded = [e.get(v) for v in op.operands]


@handles(A.ParallelOp)
def _parallel(e: FunctionEmitter, op):
    from .llvm_parallel import emit_parallel
    emit_parallel(e, op)


@handles(A.LoadOp)
def _load(e: FunctionEmitter, op):
    element = op.memref.type.element
    llvm_type = stored(element)
    value = e.guarded(op, 1, lambda: e.b.load(e.address(op), align=element.dtype.itemsize),
                      ir.Constant(llvm_type, 0))
    e.values[op.result] = e.b.trunc(value, I1) if element.name == "i1" else value


@handles(A.StoreOp)
def _store(e: FunctionEmitter, op):
    value = e.get(op.operands[0])
    if op.memref.type.element.name == "i1":
        value = e.b.zext(value, I8)
    e.guarded(op, 1, lambda: e.b.store(value, e.address(op), align=op.memref.type.element.dtype.itemsize))


@handles(A.VectorLoadOp)
def _vector_load(e: FunctionEmitter, op):
    t = op.result.type
    value = e.guarded(op, t.lanes, lambda: e.b.load(e.b.bitcast(e.address(op), stored(t).as_pointer()),
                                                     align=t.element.dtype.itemsize),
                      ir.Constant(stored(t), None))
    e.values[op.result] = e.b.trunc(value, scalar(t)) if t.element.name == "i1" else value


@handles(A.VectorStoreOp)
def _vector_store(e: FunctionEmitter, op):
    t = op.operands[0].type
    value = e.get(op.operands[0])
    if t.element.name == "i1":
        value = e.b.zext(value, stored(t))
    e.guarded(op, t.lanes, lambda: e.b.store(value, e.b.bitcast(e.address(op), stored(t).as_pointer()),
                                             align=t.element.dtype.itemsize))


@handles(MR.AllocOp)
def _alloc(e: FunctionEmitter, op):
    t = op.result.type
    size = max(t.size * t.dtype.itemsize, 1)
    size = -(-size // MR.ALIGNMENT) * MR.ALIGNMENT  # aligned_alloc wants a multiple of the alignment
    aligned_alloc = e.declare("aligned_alloc", I8.as_pointer(), [I64, I64])
    raw = e.b.call(aligned_alloc, [ir.Constant(I64, MR.ALIGNMENT), ir.Constant(I64, size)])
    failed = e.b.icmp_unsigned("==", raw, ir.Constant(I8.as_pointer(), None))
    with e.b.if_then(failed, likely=False):
        free = e.declare("free", ir.VoidType(), [I8.as_pointer()])
        for earlier in e.allocations:
            e.b.call(free, [e.b.bitcast(earlier, I8.as_pointer())])
        e.b.ret(ir.Constant(I32, STATUS["out of memory"]))
    pointer = e.b.bitcast(raw, stored(t.element).as_pointer())
    e.allocations.append(pointer)
    e.values[op.result] = pointer


@handles(MR.AllocaOp)
def _alloca(e: FunctionEmitter, op):
    # In the entry block, so a loop does not grow the stack on every iteration.
    t = op.result.type
    buffer = e.alloca_builder.alloca(stored(t.element), size=max(t.size, 1))
    buffer.align = MR.ALIGNMENT
    e.values[op.result] = buffer


@handles(MR.DeallocOp)
def _dealloc(e: FunctionEmitter, op):
    free = e.declare("free", ir.VoidType(), [I8.as_pointer()])
    e.b.call(free, [e.b.bitcast(e.get(op.memref), I8.as_pointer())])


@handles(MR.ViewOp)
def _view(e: FunctionEmitter, op):
    byte = e.b.gep(e.b.bitcast(e.get(op.source), I8.as_pointer()), [e.get(op.byte_shift)], inbounds=True)
    e.values[op.result] = e.b.bitcast(byte, stored(op.result.type.element).as_pointer())


@handles(MR.GetGlobalOp)
def _get_global(e: FunctionEmitter, op):
    variable = e.globals[op.attributes["name"]]
    e.values[op.result] = e.b.bitcast(variable, stored(op.result.type.element).as_pointer())


from . import llvm_ops  # noqa: E402,F401  (registers the arith, math and vector handlers)
