"""LLVM code for scalar and vector arithmetic: the arith, math and vector dialects.

Every handler works on scalars and on vectors alike (LLVM's instructions and
intrinsics are overloaded on vector types); only math.ipowi is scalar-only.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from kiln.codegen.llvm_emitter import HANDLERS, I1, I32, FunctionEmitter, handles, scalar, suffix
from kiln.codegen.llvm_half import float_to_half, half_to_float
from kiln.codegen.llvm_math import expf, tanhf
from kiln.codegen.status import STATUS, check_status
from kiln.dialects import arith as AR
from kiln.dialects import cf as CF
from kiln.dialects import func as F
from kiln.dialects import math as M
from kiln.dialects import vector as V
from kiln.dialects.ir import BlockArgument
from kiln.dialects.types import VectorType, element_of


@handles(AR.ConstantOp)
def _constant(e: FunctionEmitter, op):
    t = op.result.type
    value = op.value
    if t.name == "f16":  # its bits (see llvm_emitter)
        value = int(np.array(value, np.float16).view(np.int16))
    e.values[op.result] = ir.Constant(scalar(t), float(value) if t.name in ("f32", "f64") else int(value))


_CONTRACT = ("contract",)


def accumulates(op) -> bool:
    """Whether the float add or subtract `op` steps a loop-carried accumulator: one of its
    operands is an iter_arg, or an earlier step of one (unrolling chains them).

    Only there may a multiply fuse into the add as one FMA (one rounding instead of two),
    as in numpy's own sums and BLAS. Anywhere else ``a * b + c`` is rounded twice, as
    numpy computes it: fused, ``1 / (a * b + c)`` at ``a * b = -1e-60``, ``c = 0`` would
    be ``-inf`` (the exact product's sign) where numpy gives ``inf``.
    """
    pending = list(op.operands)
    while pending:
        value = pending.pop()
        if isinstance(value, BlockArgument):
            # a float argument of a loop's body is an iter_arg; of a function's, an outlined
            # kernel's scalar (a whole-array sum it reads), which accumulates nothing
            return not isinstance(value.block.parent.parent, F.FuncOp)
        producer = getattr(value, "op", None)
        if isinstance(producer, (AR.AddFOp, AR.SubFOp)):
            pending.extend(producer.operands)
    return False


def _binary(build):
    def handler(e, op):
        e.values[op.result] = build(e.b, e.get(op.operands[0]), e.get(op.operands[1]))

    return handler


def _accumulating(build):
    """A float add or subtract: `contract` (LLVM may fuse a multiply into it) only where it
    accumulates; no other fast-math freedom is given."""

    def handler(e, op):
        flags = _CONTRACT if accumulates(op) else ()
        e.values[op.result] = build(e.b, e.get(op.operands[0]), e.get(op.operands[1]), flags)

    return handler


HANDLERS[AR.AddFOp] = _accumulating(lambda b, x, y, flags: b.fadd(x, y, flags=flags))
HANDLERS[AR.SubFOp] = _accumulating(lambda b, x, y, flags: b.fsub(x, y, flags=flags))
for _cls, _build in {
    # A multiply fuses only into an add that allows it too (see accumulates).
    AR.MulFOp: lambda b, x, y: b.fmul(x, y, flags=_CONTRACT),
    AR.DivFOp: lambda b, x, y: b.fdiv(x, y),
    AR.AddIOp: lambda b, x, y: b.add(x, y),
    AR.SubIOp: lambda b, x, y: b.sub(x, y),
    AR.MulIOp: lambda b, x, y: b.mul(x, y),
    AR.AndIOp: lambda b, x, y: b.and_(x, y),
    AR.OrIOp: lambda b, x, y: b.or_(x, y),
    AR.XOrIOp: lambda b, x, y: b.xor(x, y),
    # The scalar rules give these only divisors and counts they are defined for (see arith).
    AR.RemSIOp: lambda b, x, y: b.srem(x, y),
    AR.ShLIOp: lambda b, x, y: b.shl(x, y),
    AR.ShRSIOp: lambda b, x, y: b.ashr(x, y),
    AR.DivUIOp: lambda b, x, y: b.udiv(x, y),
    AR.RemUIOp: lambda b, x, y: b.urem(x, y),
    AR.ShRUIOp: lambda b, x, y: b.lshr(x, y),
    AR.RemFOp: lambda b, x, y: b.frem(x, y),
}.items():
    HANDLERS[_cls] = _binary(_build)


def _call_intrinsic(base, arity=1, extra=()):
    def handler(e, op):
        t = op.result.type
        fn = (
            e.intrinsic(base, t, arity)
            if not extra
            else e.declare(f"llvm.{base}.{suffix(t)}", scalar(t), [scalar(t)] * arity + [c.type for c in extra])
        )
        e.values[op.result] = e.b.call(fn, [e.get(v) for v in op.operands] + list(extra))

    return handler


def _f32_inline(emit, otherwise):
    """float32 (scalar or vector) through `emit`'s inline sequence; float64 through libm."""

    def handler(e, op):
        if element_of(op.result.type).name == "f32":
            e.values[op.result] = emit(e.b, e.get(op.operand))
        else:
            otherwise(e, op)

    return handler


HANDLERS.update(
    {
        AR.MaximumFOp: _call_intrinsic("maximum", 2),
        AR.MinimumFOp: _call_intrinsic("minimum", 2),
        AR.MaxSIOp: _call_intrinsic("smax", 2),
        AR.MinSIOp: _call_intrinsic("smin", 2),
        AR.MaxUIOp: _call_intrinsic("umax", 2),
        AR.MinUIOp: _call_intrinsic("umin", 2),
        M.ExpOp: _f32_inline(expf, _call_intrinsic("exp")),
        M.LogOp: _call_intrinsic("log"),
        M.SqrtOp: _call_intrinsic("sqrt"),
        M.SinOp: _call_intrinsic("sin"),
        M.CosOp: _call_intrinsic("cos"),
        M.TanhOp: _f32_inline(tanhf, _call_intrinsic("tanh")),
        M.AbsFOp: _call_intrinsic("fabs"),
        M.PowFOp: _call_intrinsic("pow", 2),
        M.AbsIOp: _call_intrinsic("abs", 1, (ir.Constant(I1, 0),)),
    }
)


def _libm_call(name):
    """A C library function (``name``, ``name + "f"`` for float32), one call per lane of a vector:
    the JIT resolves it from the process, ``kiln build`` links the math library."""

    def handler(e, op):
        t = op.result.type
        element = scalar(element_of(t))
        fn = e.declare(name + ("f" if element_of(t).name == "f32" else ""), element, [element] * len(op.operands))
        args = [e.get(v) for v in op.operands]
        if not isinstance(t, VectorType):
            e.values[op.result] = e.b.call(fn, args)
            return
        result = ir.Constant(scalar(t), ir.Undefined)
        for lane in range(t.lanes):
            index = ir.Constant(I32, lane)
            value = e.b.call(fn, [e.b.extract_element(a, index) for a in args])
            result = e.b.insert_element(result, value, index)
        e.values[op.result] = result

    return handler


HANDLERS.update(
    (f.op, _call_intrinsic(f.intrinsic, len(f.op.operand_names)) if f.intrinsic else _libm_call(f.c_name))
    for f in M.FLOAT_FUNCTIONS
)


@handles(AR.FloorDivSIOp)
def _floordivsi(e, op):
    # Truncating division, one less where the remainder is nonzero and its sign differs
    # from the divisor's (then the exact quotient was negative and not an integer).
    a, d = e.get(op.lhs), e.get(op.rhs)
    t = a.type
    quotient, remainder = e.b.sdiv(a, d), e.b.srem(a, d)
    zero = _splat(t, 0)
    inexact = e.b.icmp_signed("!=", remainder, zero)
    signs_differ = e.b.icmp_signed("<", e.b.xor(remainder, d), zero)
    e.values[op.result] = e.b.sub(quotient, e.b.zext(e.b.and_(inexact, signs_differ), t))


@handles(AR.NegFOp)
def _negf(e, op):
    e.values[op.result] = e.b.fneg(e.get(op.operand))


_FCMP = {
    "oeq": "==",
    "one": "!=",
    "olt": "<",
    "ole": "<=",
    "ogt": ">",
    "oge": ">=",
    "ord": "ord",
    "uno": "uno",
    "ueq": "==",
    "une": "!=",
    "ult": "<",
    "ule": "<=",
    "ugt": ">",
    "uge": ">=",
}


@handles(AR.CmpFOp)
def _cmpf(e, op):
    compare = e.b.fcmp_unordered if op.predicate.startswith("u") else e.b.fcmp_ordered
    e.values[op.result] = compare(_FCMP[op.predicate], e.get(op.lhs), e.get(op.rhs))


@handles(AR.CmpIOp)
def _cmpi(e, op):
    compare = e.b.icmp_unsigned if op.predicate.startswith("u") else e.b.icmp_signed
    e.values[op.result] = compare(AR.INT_RELATIONS[op.predicate], e.get(op.lhs), e.get(op.rhs))


@handles(AR.SelectOp)
def _select(e, op):
    e.values[op.result] = e.b.select(*(e.get(v) for v in op.operands))


@handles(AR.ExtFOp, AR.TruncFOp)
def _float_cast(e, op):
    src, dst = element_of(op.operand.type), element_of(op.result.type)
    x = e.get(op.operand)
    if src.name == "f16":
        e.values[op.result] = half_to_float(e.b, x, scalar(op.result.type))
    elif dst.name == "f16":
        e.values[op.result] = float_to_half(e.b, x)
    else:
        e.values[op.result] = (e.b.fpext if isinstance(op, AR.ExtFOp) else e.b.fptrunc)(x, scalar(op.result.type))


@handles(AR.BitcastOp)
def _bitcast(e, op):
    # f16 is an i16 of its bits in LLVM (see llvm_emitter): from or to f16 nothing changes
    x, target = e.get(op.operand), scalar(op.result.type)
    e.values[op.result] = x if x.type == target else e.b.bitcast(x, target)


_CASTS = {
    AR.SIToFPOp: "sitofp",
    AR.UIToFPOp: "uitofp",
    AR.ExtSIOp: "sext",
    AR.ExtUIOp: "zext",
    AR.TruncIOp: "trunc",
}


@handles(AR.IndexCastOp)
def _index_cast(e, op):
    # index is i64 on every target: an i64 passes as it is, narrower integers sign-extend
    x, target = e.get(op.operand), scalar(op.result.type)
    lane = lambda t: t.element if isinstance(t, ir.VectorType) else t  # noqa: E731  (vectors cast lane by lane)
    width, wanted = lane(x.type).width, lane(target).width
    e.values[op.result] = x if width == wanted else (e.b.sext(x, target) if width < wanted else e.b.trunc(x, target))


@handles(*_CASTS)
def _cast(e, op):
    e.values[op.result] = getattr(e.b, _CASTS[type(op)])(e.get(op.operand), scalar(op.result.type))


@handles(AR.FPToSIOp)
def _fptosi(e, op):
    # kiln.dialects.arith.float_to_int's rule: NaN and out-of-range values give the type's
    # minimum. A plain fptosi is poison there, so it is only selected where x is in range
    # (select does not propagate the poison of the arm it does not pick).
    src, dst = scalar(op.operand.type), scalar(op.result.type)
    bits = element_of(op.result.type).dtype.itemsize * 8
    x = e.get(op.operand)
    bound = float(2 ** (bits - 1))  # exact in float32 and float64
    inside = e.b.and_(e.b.fcmp_ordered(">", x, _splat(src, -bound)), e.b.fcmp_ordered("<", x, _splat(src, bound)))
    e.values[op.result] = e.b.select(inside, e.b.fptosi(x, dst), _splat(dst, -(2 ** (bits - 1))))


def _splat(t: ir.Type, value):
    """`value` as a constant of type `t`, every lane of a vector."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [value] * t.count)
    return ir.Constant(t, value)


@handles(M.IPowIOp)
def _ipowi(e, op):
    t = op.result.type
    if isinstance(t, VectorType):
        raise NotImplementedError("math.ipowi on vectors")
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


@handles(CF.AssertOp)
def _assert(e, op):
    """A failed check records its status and the function goes on, as a failed ipowi does."""
    with e.b.if_then(e.b.not_(e.get(op.condition)), likely=False):
        e.b.store(ir.Constant(I32, check_status(e.func, op, e.callees)), e.status)


@handles(V.BroadcastOp)
def _broadcast(e, op):
    t = scalar(op.result.type)
    lane = e.b.insert_element(ir.Constant(t, ir.Undefined), e.get(op.source), ir.Constant(I32, 0))
    e.values[op.result] = e.b.shuffle_vector(
        lane, ir.Constant(t, ir.Undefined), ir.Constant(ir.VectorType(I32, op.result.type.lanes), None)
    )


_REDUCE = {
    "add": ("fadd", "add"),
    "mul": ("fmul", "mul"),
    "maximumf": ("fmaximum", None),
    "minimumf": ("fminimum", None),
    "maxsi": (None, "smax"),
    "minsi": (None, "smin"),
    "maxui": (None, "umax"),
    "minui": (None, "umin"),
    "and": (None, "and"),
    "or": (None, "or"),
}


@handles(V.ReductionOp)
def _reduction(e, op):
    t = op.vector.type
    element = scalar(t.element)
    name = _REDUCE[op.kind][0 if t.element.is_float else 1]
    if name in ("fadd", "fmul"):  # ordered: lane 0 first, starting from the identity
        start = ir.Constant(element, -0.0 if name == "fadd" else 1.0)
        fn = e.declare(f"llvm.vector.reduce.{name}.{suffix(t)}", element, [element, scalar(t)])
        e.values[op.result] = e.b.call(fn, [start, e.get(op.vector)])
    else:
        fn = e.declare(f"llvm.vector.reduce.{name}.{suffix(t)}", element, [scalar(t)])
        e.values[op.result] = e.b.call(fn, [e.get(op.vector)])


@handles(V.ExtractOp)
def _extract(e, op):
    e.values[op.result] = e.b.extract_element(e.get(op.vector), ir.Constant(I32, op.position))
