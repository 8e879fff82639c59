"""CUDA C expressions for the scalar ops of the arith and math dialects: one entry per op
class in ``EXPRESSIONS``, each building the C expression from its operands' names
(``emitter.expr(value)``), with numpy's semantics where C's differ (rounded float
adds outside accumulations, wrapping integer arithmetic, float-to-int conversion)."""

from __future__ import annotations

import math

import numpy as np

from kiln.codegen.cuda_prelude import C_TYPES
from kiln.codegen.llvm_ops import accumulates
from kiln.dialects import arith as AR
from kiln.dialects import math as M


def literal(value, type_name: str) -> str:
    """`value` as a C literal of the kiln scalar type `type_name` (NaN, infinities and INT_MIN spelled
    so that C reads them back exactly)."""
    if type_name in ("f32", "f64"):
        v = float(value)
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        text = repr(v)
        return (
            text + ("f" if type_name == "f32" else "")
            if ("." in text or "e" in text)
            else text + (".0f" if type_name == "f32" else ".0")
        )
    if type_name == "i1":
        return "1" if value else "0"
    if type_name == "f16":  # its bits
        return str(int(np.array(value, np.float16).view(np.uint16)))
    wide = type_name in ("i64", "index")
    if int(value) == -(2 ** (63 if wide else 31)):  # the literal of -INT_MIN does not fit its type
        return f"({int(value) + 1}{'LL' if wide else ''} - 1)"
    return f"{int(value)}LL" if wide else str(int(value))


def _binary(symbol):
    return lambda e, op: f"({e.expr(op.lhs)} {symbol} {e.expr(op.rhs)})"


def _call(function_f32, function_f64=None):
    def emit(e, op):
        name = function_f32 if op.results[0].type.name == "f32" else (function_f64 or function_f32)
        return f"{name}({', '.join(e.expr(v) for v in op.operands)})"

    return emit


_FLOAT_COMPARE = {"oeq": "==", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}


def _cmpf(e, op):
    a, b = e.expr(op.lhs), e.expr(op.rhs)
    if op.predicate == "une":
        return f"!({a} == {b})"
    if op.predicate not in _FLOAT_COMPARE:
        raise NotImplementedError(f"arith.cmpf {op.predicate} in CUDA")
    return f"({a} {_FLOAT_COMPARE[op.predicate]} {b})"


def _cmpi(e, op):
    a, b = e.expr(op.lhs), e.expr(op.rhs)
    if op.predicate.startswith("u"):  # unsigned: a negative value compares as a huge one
        u = _UNSIGNED[op.lhs.type.name]
        a, b = f"({u}){a}", f"({u}){b}"
    return f"({a} {AR.INT_RELATIONS[op.predicate]} {b})"


def _cast(e, op):
    return f"({C_TYPES[op.result.type.name]})({e.expr(op.operand)})"


def _unsigned_cast(e, op):
    """uitofp and extui: the operand's bits read as unsigned first."""
    source = op.operand.type.name
    return f"({C_TYPES[op.result.type.name]})(({_UNSIGNED[source]})({e.expr(op.operand)}))"


def _float_cast(e, op):
    """extf and truncf; f16 (bits) through the prelude's exact conversions."""
    source, target, x = op.operand.type.name, op.result.type.name, e.expr(op.operand)
    if source == "f16":  # to double directly: through float would quiet a signalling NaN
        return f"kiln_half_to_{C_TYPES[target]}({x})"
    if target == "f16":
        return f"kiln_{C_TYPES[source]}_to_half({x})"
    return f"({C_TYPES[target]})({x})"


def _bitcast(e, op):
    """The operand's bytes as the result's type (f16 is its bits, an unsigned short)."""
    return f"kiln_bit_cast<{C_TYPES[op.result.type.name]}>({e.expr(op.operand)})"


def _unsigned_binary(symbol):
    """An unsigned op on signless operands: done in the unsigned type of their width."""

    def emit(e, op):
        t = op.results[0].type.name
        u = _UNSIGNED[t]
        return f"({C_TYPES[t]})(({u}){e.expr(op.lhs)} {symbol} ({u}){e.expr(op.rhs)})"

    return emit


def _unsigned_pick(relation):
    def emit(e, op):
        u = _UNSIGNED[op.results[0].type.name]
        a, b = e.expr(op.lhs), e.expr(op.rhs)
        return f"(({u}){a} {relation} ({u}){b} ? {a} : {b})"

    return emit


def _fptosi(e, op):
    bound = literal(2.0 ** (8 * op.result.type.dtype.itemsize - 1), op.operand.type.name)
    return f"({C_TYPES[op.result.type.name]})kiln_f2i({e.expr(op.operand)}, {bound})"


def _rounded(symbol, name):
    """Float `symbol`, fused with a multiply only where it accumulates."""

    def emit(e, op):
        if accumulates(op):
            return f"({e.expr(op.lhs)} {symbol} {e.expr(op.rhs)})"
        prefix = "kiln_f" if op.result.type.name == "f32" else "kiln_d"
        return f"{prefix}{name}({e.expr(op.lhs)}, {e.expr(op.rhs)})"

    return emit


_UNSIGNED = {
    "i8": "unsigned char",
    "i16": "unsigned short",
    "i32": "unsigned",
    "i64": "unsigned long long",
    "index": "unsigned long long",
    "i1": "unsigned",
}


def _wrapping(symbol):
    """Integer `symbol` done in the unsigned type of the same width, so it wraps (on i1: mod 2)."""

    def emit(e, op):
        t = op.results[0].type.name
        u = _UNSIGNED[t]
        value = f"(({u}){e.expr(op.lhs)} {symbol} ({u}){e.expr(op.rhs)})"
        return f"({C_TYPES[t]})({value} & 1u)" if t == "i1" else f"({C_TYPES[t]}){value}"

    return emit


def _absi(e, op):
    x, t = e.expr(op.operand), op.result.type.name
    return f"({x} < 0 ? ({C_TYPES[t]})(0 - ({_UNSIGNED[t]}){x}) : {x})"  # abs(INT_MIN) is INT_MIN, as in numpy


EXPRESSIONS = {
    AR.AddFOp: _rounded("+", "add"),
    AR.SubFOp: _rounded("-", "sub"),
    AR.MulFOp: _binary("*"),
    AR.DivFOp: _binary("/"),
    AR.AddIOp: _wrapping("+"),
    AR.SubIOp: _wrapping("-"),
    AR.MulIOp: _wrapping("*"),
    AR.AndIOp: _binary("&"),
    AR.OrIOp: _binary("|"),
    AR.XOrIOp: _binary("^"),
    AR.NegFOp: lambda e, op: f"(-{e.expr(op.operand)})",
    AR.MaximumFOp: _call("kiln_maxf", "kiln_max"),
    AR.MinimumFOp: _call("kiln_minf", "kiln_min"),
    AR.MaxSIOp: lambda e, op: f"({e.expr(op.lhs)} > {e.expr(op.rhs)} ? {e.expr(op.lhs)} : {e.expr(op.rhs)})",
    AR.MinSIOp: lambda e, op: f"({e.expr(op.lhs)} < {e.expr(op.rhs)} ? {e.expr(op.lhs)} : {e.expr(op.rhs)})",
    AR.CmpFOp: _cmpf,
    AR.CmpIOp: _cmpi,
    AR.SelectOp: lambda e, op: f"({e.expr(op.condition)} ? {e.expr(op.true_value)} : {e.expr(op.false_value)})",
    AR.ExtFOp: _float_cast,
    AR.TruncFOp: _float_cast,
    AR.SIToFPOp: _cast,
    AR.UIToFPOp: _unsigned_cast,
    AR.ExtSIOp: _cast,
    AR.ExtUIOp: _unsigned_cast,
    AR.TruncIOp: _cast,
    AR.IndexCastOp: _cast,
    AR.FPToSIOp: _fptosi,
    AR.BitcastOp: _bitcast,
    M.ExpOp: _call("expf", "exp"),
    M.LogOp: _call("logf", "log"),
    M.SqrtOp: _call("sqrtf", "sqrt"),
    M.TanhOp: _call("tanhf", "tanh"),
    M.SinOp: _call("sinf", "sin"),
    M.CosOp: _call("cosf", "cos"),
    M.AbsFOp: _call("fabsf", "fabs"),
    M.PowFOp: _call("powf", "pow"),
    M.AbsIOp: _absi,
    M.IPowIOp: lambda e, op: f"({C_TYPES[op.result.type.name]})kiln_ipow({e.expr(op.lhs)}, {e.expr(op.rhs)})",
    # The scalar rules give these only divisors and counts they are defined for (see arith);
    # a left shift is done unsigned, since shifting a negative value left is undefined in C.
    AR.FloorDivSIOp: lambda e, op: (
        f"({C_TYPES[op.result.type.name]})kiln_floordivsi({e.expr(op.lhs)}, {e.expr(op.rhs)})"
    ),
    AR.RemSIOp: _binary("%"),
    AR.ShLIOp: _wrapping("<<"),
    AR.ShRSIOp: _binary(">>"),
    AR.DivUIOp: _unsigned_binary("/"),
    AR.RemUIOp: _unsigned_binary("%"),
    AR.ShRUIOp: _unsigned_binary(">>"),
    AR.MaxUIOp: _unsigned_pick(">"),
    AR.MinUIOp: _unsigned_pick("<"),
    AR.RemFOp: _call("fmodf", "fmod"),
}
EXPRESSIONS.update((f.op, _call(f.c_name + "f", f.c_name)) for f in M.FLOAT_FUNCTIONS)
