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
from kiln.dialects import arith as AR
from kiln.dialects import func as F
from kiln.dialects import math as M
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import Binary, Const, Dim
from kiln.dialects.types import MemRefType, ScalarType

STATUS = {"out of memory": 1, "negative integer power": 2}

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_SCALARS = {"f32": ir.FloatType(), "f64": ir.DoubleType(), "i1": I1, "i8": I8, "i32": I32, "i64": I64, "index": I64}
_INTRINSIC_SUFFIX = {"f32": "f32", "f64": "f64", "i32": "i32", "i64": "i64"}


def symbol_name(function_name: str) -> str:
    """The native symbol of a kiln function: prefixed so that a function called
    ``exp`` cannot shadow the C library's, and made a C identifier."""
    return "kiln_" + re.sub(r"\W", "_", function_name)


def scalar(t: ScalarType) -> ir.Type:
    return _SCALARS[t.name]


def stored(t: ScalarType) -> ir.Type:
    """How an element sits in memory (bool as a byte)."""
    return I8 if t.name == "i1" else scalar(t)


def emit_module(module, triple: str = "", data_layout: str = "") -> ir.Module:
    llvm_module = ir.Module(name="kiln")
    llvm_module.triple = triple
    llvm_module.data_layout = data_layout
    globals_ = {}
    for op in module.body.ops:
        if isinstance(op, MR.GlobalOp):
            globals_[op.sym_name] = _emit_global(llvm_module, op)
    for op in module.body.ops:
        if isinstance(op, F.FuncOp):
            FunctionEmitter(llvm_module, globals_, op).emit()
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

    def emit(self) -> None:
        entry = self.function.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        self.status = self.b.alloca(I32, name="status")
        self.b.store(ir.Constant(I32, 0), self.status)
        for arg, llvm_arg in zip(self.func.arguments, self.function.args):
            llvm_arg.name = arg.name_hint or ""
            self.values[arg] = llvm_arg
        self.emit_block(self.func.body)

    def emit_block(self, block) -> None:
        for op in block.ops:
            handler = _HANDLERS.get(type(op))
            if handler is None:
                raise NotImplementedError(f"no LLVM code generation for {op.name}")
            handler(self, op)

    def get(self, value):
        return self.values[value]

    # -- functions this module calls -------------------------------------------------
    def declare(self, name: str, result: ir.Type, args) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(result, list(args)), name=name)

    def intrinsic(self, base: str, t: ScalarType, arity: int = 1) -> ir.Function:
        llvm_type = scalar(t)
        return self.declare(f"llvm.{base}.{_INTRINSIC_SUFFIX[t.name]}", llvm_type, [llvm_type] * arity)

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
    before = e.b.block
    header = e.function.append_basic_block("loop")
    body = e.function.append_basic_block("body")
    exit_ = e.function.append_basic_block("done")
    e.b.branch(header)
    e.b.position_at_end(header)
    iv = e.b.phi(I64, name="iv")
    iv.add_incoming(ir.Constant(I64, op.lower), before)
    carried = []
    for init in op.operands:
        phi = e.b.phi(e.get(init).type)
        phi.add_incoming(e.get(init), before)
        carried.append(phi)
    e.b.cbranch(e.b.icmp_signed("<", iv, ir.Constant(I64, op.upper)), body, exit_)
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


@handles(A.YieldOp)
def _yield(e: FunctionEmitter, op):
    e.yielded = [e.get(v) for v in op.operands]


@handles(A.LoadOp)
def _load(e: FunctionEmitter, op):
    element = op.memref.type.element
    value = e.b.load(e.address(op), align=element.dtype.itemsize)
    e.values[op.result] = e.b.trunc(value, I1) if element.name == "i1" else value


@handles(A.StoreOp)
def _store(e: FunctionEmitter, op):
    value = e.get(op.operands[0])
    if op.memref.type.element.name == "i1":
        value = e.b.zext(value, I8)
    e.b.store(value, e.address(op), align=op.memref.type.element.dtype.itemsize)


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


@handles(AR.ConstantOp)
def _constant(e: FunctionEmitter, op):
    t = op.result.type
    value = op.value
    e.values[op.result] = ir.Constant(scalar(t), float(value) if t.is_float else int(value))


def _binary(build):
    def handler(e, op):
        e.values[op.result] = build(e.b, e.get(op.operands[0]), e.get(op.operands[1]))
    return handler


for _cls, _build in {
    AR.AddFOp: lambda b, x, y: b.fadd(x, y), AR.SubFOp: lambda b, x, y: b.fsub(x, y),
    AR.MulFOp: lambda b, x, y: b.fmul(x, y), AR.DivFOp: lambda b, x, y: b.fdiv(x, y),
    AR.AddIOp: lambda b, x, y: b.add(x, y), AR.SubIOp: lambda b, x, y: b.sub(x, y),
    AR.MulIOp: lambda b, x, y: b.mul(x, y), AR.AndIOp: lambda b, x, y: b.and_(x, y),
    AR.OrIOp: lambda b, x, y: b.or_(x, y), AR.XOrIOp: lambda b, x, y: b.xor(x, y),
}.items():
    _HANDLERS[_cls] = _binary(_build)


def _call_intrinsic(base, arity=1, extra=()):
    def handler(e, op):
        t = op.result.type
        fn = e.intrinsic(base, t, arity) if not extra else e.declare(
            f"llvm.{base}.{_INTRINSIC_SUFFIX[t.name]}", scalar(t), [scalar(t)] * arity + [c.type for c in extra])
        e.values[op.result] = e.b.call(fn, [e.get(v) for v in op.operands] + list(extra))
    return handler


_HANDLERS.update({
    AR.MaximumFOp: _call_intrinsic("maximum", 2), AR.MinimumFOp: _call_intrinsic("minimum", 2),
    AR.MaxSIOp: _call_intrinsic("smax", 2), AR.MinSIOp: _call_intrinsic("smin", 2),
    M.ExpOp: _call_intrinsic("exp"), M.LogOp: _call_intrinsic("log"), M.SqrtOp: _call_intrinsic("sqrt"),
    M.SinOp: _call_intrinsic("sin"), M.CosOp: _call_intrinsic("cos"), M.TanhOp: _call_intrinsic("tanh"),
    M.AbsFOp: _call_intrinsic("fabs"), M.PowFOp: _call_intrinsic("pow", 2),
    M.AbsIOp: _call_intrinsic("abs", 1, (ir.Constant(I1, 0),)),
})


@handles(AR.NegFOp)
def _negf(e, op):
    e.values[op.result] = e.b.fneg(e.get(op.operand))


_FCMP = {"oeq": "==", "one": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=", "ord": "ord", "uno": "uno",
         "ueq": "==", "une": "!=", "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}
_ICMP = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
         "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


@handles(AR.CmpFOp)
def _cmpf(e, op):
    compare = e.b.fcmp_unordered if op.predicate.startswith("u") else e.b.fcmp_ordered
    e.values[op.result] = compare(_FCMP[op.predicate], e.get(op.lhs), e.get(op.rhs))


@handles(AR.CmpIOp)
def _cmpi(e, op):
    compare = e.b.icmp_unsigned if op.predicate.startswith("u") else e.b.icmp_signed
    e.values[op.result] = compare(_ICMP[op.predicate], e.get(op.lhs), e.get(op.rhs))


@handles(AR.SelectOp)
def _select(e, op):
    e.values[op.result] = e.b.select(*(e.get(v) for v in op.operands))


_CASTS = {AR.ExtFOp: "fpext", AR.TruncFOp: "fptrunc", AR.SIToFPOp: "sitofp", AR.UIToFPOp: "uitofp",
          AR.ExtSIOp: "sext", AR.ExtUIOp: "zext", AR.TruncIOp: "trunc"}


@handles(*_CASTS)
def _cast(e, op):
    e.values[op.result] = getattr(e.b, _CASTS[type(op)])(e.get(op.operand), scalar(op.result.type))


@handles(AR.FPToSIOp)
def _fptosi(e, op):
    # The saturating form: NaN gives 0 and out-of-range values clamp, where a plain
    # fptosi would be undefined behaviour (numpy's result there is platform-defined).
    src, dst = op.operand.type, op.result.type
    fn = e.declare(f"llvm.fptosi.sat.{dst.name}.{src.name}", scalar(dst), [scalar(src)])
    e.values[op.result] = e.b.call(fn, [e.get(op.operand)])


@handles(M.IPowIOp)
def _ipowi(e, op):
    t = op.result.type
    helper = e.module.globals.get(f"kiln.ipowi.{t.name}") or _define_ipowi(e.module, scalar(t), t.name)
    e.values[op.result] = e.b.call(helper, [e.get(op.lhs), e.get(op.rhs), e.status])


def _define_ipowi(module, t: ir.Type, name: str) -> ir.Function:
    """base ** exponent by squaring; a negative exponent sets the status (numpy raises there)."""
    fn = ir.Function(module, ir.FunctionType(t, [t, t, I32.as_pointer()]), name=f"kiln.ipowi.{name}")
    fn.linkage = "internal"
    base, exponent, status = fn.args
    entry, bad, loop, done = (fn.append_basic_block(n) for n in ("entry", "negative", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed("<", exponent, ir.Constant(t, 0)), bad, loop)
    b.position_at_end(bad)
    b.store(ir.Constant(I32, STATUS["negative integer power"]), status)
    b.ret(ir.Constant(t, 0))
    b.position_at_end(loop)
    result = b.phi(t)
    power = b.phi(t)
    remaining = b.phi(t)
    result.add_incoming(ir.Constant(t, 1), entry)
    power.add_incoming(base, entry)
    remaining.add_incoming(exponent, entry)
    odd = b.trunc(remaining, I1)
    new_result = b.select(odd, b.mul(result, power), result)
    new_remaining = b.lshr(remaining, ir.Constant(t, 1))
    result.add_incoming(new_result, loop)
    power.add_incoming(b.mul(power, power), loop)
    remaining.add_incoming(new_remaining, loop)
    b.cbranch(b.icmp_signed("==", new_remaining, ir.Constant(t, 0)), done, loop)
    b.position_at_end(done)
    b.ret(new_result)
    return fn
