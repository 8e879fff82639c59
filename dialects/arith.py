"""The ``arith`` dialect: scalar arithmetic, as in upstream MLIR.

%c = arith.constant 1.0 : f32
%s = arith.addf %a, %c : f32
%p = arith.cmpf olt, %a, %b : f32
%w = arith.extf %a : f32 to f64
"""

from __future__ import annotations

import math
import re
from typing import ClassVar

import numpy as np

from .ir import Operation
from .printer import format_float
from .types import SCALAR_TYPES, ScalarType, element_of, f16, f32, f64, i1, index, like

FLOATS = (f32, f64)  # what float arithmetic computes in
STORED_FLOATS = (f16, f32, f64)  # what constants, selects and casts also take: f16 is only stored
INTEGERS = (SCALAR_TYPES["i8"], SCALAR_TYPES["i16"], SCALAR_TYPES["i32"], SCALAR_TYPES["i64"], i1, index)
_BITS_VIEW = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def format_scalar(value, type_: ScalarType) -> str:
    """A constant's literal: ``1.5``, ``-3``, ``true``, or MLIR's hex form for NaN and infinities."""
    if type_ == i1:
        return "true" if value else "false"
    if type_ in STORED_FLOATS:
        if math.isfinite(value):
            return format_float(value, type_.dtype)
        size = type_.dtype.itemsize
        bits = np.array(value, type_.dtype).view(_BITS_VIEW[size])
        return f"0x{int(bits):0{2 * size}X}"
    return str(int(value))


class ConstantOp(Operation):
    name = "arith.constant"
    attribute_names = ("value",)

    def verify(self):
        super().verify()
        if not isinstance(self.result.type, ScalarType):
            raise self.error("arith.constant here takes a scalar type")

    def print_custom(self, printer):
        t = self.result.type
        text = format_scalar(self.value, t)
        printer.write(f"arith.constant {text}" + ("" if t == i1 else f" : {t}"))

    @classmethod
    def parse_custom(cls, parser, num_results):
        for word, value in (("true", True), ("false", False)):
            if parser.accept(word):
                return cls([], {"value": value}, [i1])
        m = parser.match(_HEX) or parser.match(_NUMBER)
        if not m:
            parser.fail("expected a constant")
        parser.expect(":")
        t = parser.parse_type()
        text = m.group(0)
        if text.startswith("0x"):
            bits = np.array(int(text, 16), _BITS_VIEW[t.dtype.itemsize])
            value = float(bits.view(t.dtype))
        else:
            value = float(text) if t in STORED_FLOATS else int(text)
        return cls([], {"value": value}, [t])


class _Same(Operation):
    """Operands and result of one scalar type, printed ``arith.addf %a, %b : f32``."""

    allowed: ClassVar[tuple] = FLOATS

    def infer_result_types(self):
        types = {v.type for v in self.operands}
        if len(types) != 1:
            raise self.error(f"{self.name} operands differ in type: {', '.join(sorted(map(str, types)))}")
        t = types.pop()
        if element_of(t) not in self.allowed:
            raise self.error(f"{self.name} does not take {t}")
        return [t]


def same_typed_op(class_name, op_name, arity, allowed, doc):
    names = ("lhs", "rhs") if arity == 2 else ("operand",)
    return type(
        class_name,
        (_Same,),
        {"name": op_name, "operand_names": names, "allowed": allowed, "__doc__": doc, "__module__": __name__},
    )


AddFOp = same_typed_op("AddFOp", "arith.addf", 2, FLOATS, "float addition")
SubFOp = same_typed_op("SubFOp", "arith.subf", 2, FLOATS, "float subtraction")
MulFOp = same_typed_op("MulFOp", "arith.mulf", 2, FLOATS, "float multiplication")
DivFOp = same_typed_op("DivFOp", "arith.divf", 2, FLOATS, "float division")
MaximumFOp = same_typed_op("MaximumFOp", "arith.maximumf", 2, FLOATS, "IEEE maximum (NaN propagates, like np.maximum)")
MinimumFOp = same_typed_op("MinimumFOp", "arith.minimumf", 2, FLOATS, "IEEE minimum (NaN propagates)")
NegFOp = same_typed_op("NegFOp", "arith.negf", 1, FLOATS, "float negation")
AddIOp = same_typed_op("AddIOp", "arith.addi", 2, INTEGERS, "wrapping integer addition")
SubIOp = same_typed_op("SubIOp", "arith.subi", 2, INTEGERS, "wrapping integer subtraction")
MulIOp = same_typed_op("MulIOp", "arith.muli", 2, INTEGERS, "wrapping integer multiplication")
MaxSIOp = same_typed_op("MaxSIOp", "arith.maxsi", 2, INTEGERS, "signed maximum")
MinSIOp = same_typed_op("MinSIOp", "arith.minsi", 2, INTEGERS, "signed minimum")
AndIOp = same_typed_op("AndIOp", "arith.andi", 2, INTEGERS, "bitwise and (logical and on i1)")
OrIOp = same_typed_op("OrIOp", "arith.ori", 2, INTEGERS, "bitwise or (logical or on i1)")
XOrIOp = same_typed_op("XOrIOp", "arith.xori", 2, INTEGERS, "bitwise xor (logical not with true)")
# As upstream, these are undefined for a zero divisor, for the minimum divided by -1 and
# for shift counts outside [0, bits): the scalar rules that build them select a safe divisor
# or count first, and numpy's answer for the rest (x // 0 == 0, shifts past the width).
_WIDE = tuple(t for t in INTEGERS if t != i1)
FloorDivSIOp = same_typed_op("FloorDivSIOp", "arith.floordivsi", 2, _WIDE, "signed division rounding toward -inf")
RemSIOp = same_typed_op("RemSIOp", "arith.remsi", 2, _WIDE, "signed remainder with the dividend's sign (C's %)")
ShLIOp = same_typed_op("ShLIOp", "arith.shli", 2, _WIDE, "shift left")
ShRSIOp = same_typed_op("ShRSIOp", "arith.shrsi", 2, _WIDE, "arithmetic shift right (sign fill)")
# The unsigned twins, for numpy's unsigned integers (signless here, as MLIR's arith wants).
DivUIOp = same_typed_op("DivUIOp", "arith.divui", 2, _WIDE, "unsigned division")
RemUIOp = same_typed_op("RemUIOp", "arith.remui", 2, _WIDE, "unsigned remainder")
ShRUIOp = same_typed_op("ShRUIOp", "arith.shrui", 2, _WIDE, "logical shift right (zero fill)")
MaxUIOp = same_typed_op("MaxUIOp", "arith.maxui", 2, INTEGERS, "unsigned maximum")
MinUIOp = same_typed_op("MinUIOp", "arith.minui", 2, INTEGERS, "unsigned minimum")
RemFOp = same_typed_op("RemFOp", "arith.remf", 2, FLOATS, "float remainder with the dividend's sign (C's fmod)")

FLOAT_PREDICATES = ("oeq", "one", "olt", "ole", "ogt", "oge", "ueq", "une", "ult", "ule", "ugt", "uge", "ord", "uno")
INT_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
# The relation each integer predicate tests (signedness is in its first letter), as C and
# LLVM's builders spell it: what every code generator needs from the predicate.
INT_RELATIONS = dict(zip(INT_PREDICATES, ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")))


class _Compare(Operation):
    operand_names = ("lhs", "rhs")
    attribute_names = ("predicate",)
    predicates: ClassVar[tuple]
    allowed: ClassVar[tuple]

    def infer_result_types(self):
        a, b = (v.type for v in self.operands)
        if a != b or element_of(a) not in self.allowed:
            raise self.error(f"{self.name} takes two operands of one type among {', '.join(map(str, self.allowed))}")
        if self.attributes.get("predicate") not in self.predicates:
            raise self.error(f"{self.name}: unknown predicate {self.attributes.get('predicate')!r}")
        return [like(a, i1)]

    def print_custom(self, printer):
        printer.write(f"{self.name} {self.predicate}, {printer.operands(self.operands)} : {self.lhs.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        predicate = parser.match(_WORD)
        if not predicate:
            parser.fail("expected a comparison predicate")
        parser.expect(",")
        operands = parser.parse_operands()
        parser.expect(":")
        parser.parse_type()
        return cls(operands, {"predicate": predicate.group(0)})


class CmpFOp(_Compare):
    """Float comparison; ordered predicates are false with NaN, ``une`` is true (as numpy's !=)."""

    name = "arith.cmpf"
    predicates = FLOAT_PREDICATES
    allowed = FLOATS


class CmpIOp(_Compare):
    name = "arith.cmpi"
    predicates = INT_PREDICATES
    allowed = INTEGERS


class SelectOp(Operation):
    name = "arith.select"
    operand_names = ("condition", "true_value", "false_value")

    def infer_result_types(self):
        c, a, b = (v.type for v in self.operands)
        if element_of(c) != i1 or a != b or (c != i1 and c != like(a, i1)):
            raise self.error(f"arith.select takes i1 and two values of one type, got {c}, {a}, {b}")
        return [a]

    def print_custom(self, printer):
        condition = "" if self.condition.type == i1 else f"{self.condition.type}, "
        printer.write(f"arith.select {printer.operands(self.operands)} : {condition}{self.true_value.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        operands = parser.parse_operands()
        parser.expect(":")
        parser.parse_type()
        if parser.accept(","):
            parser.parse_type()
        return cls(operands, {})


class _Cast(Operation):
    """``arith.extf %a : f32 to f64``; the pair of types must be one the cast converts."""

    operand_names = ("operand",)
    sources: ClassVar[tuple]
    targets: ClassVar[tuple]
    widening: ClassVar[object] = None  # True: target wider; False: narrower; None: any

    def verify(self):
        super().verify()
        src, dst = self.operand.type, self.result.type
        if type(src) is not type(dst) or getattr(src, "lanes", 1) != getattr(dst, "lanes", 1):
            raise self.error(f"{self.name} cannot convert {src} to {dst}")
        src, dst = element_of(src), element_of(dst)
        if src not in self.sources or dst not in self.targets:
            raise self.error(f"{self.name} cannot convert {src} to {dst}")
        if self.widening is not None and (_bits(dst) > _bits(src)) != self.widening:
            raise self.error(f"{self.name} cannot convert {src} to {dst}")

    def print_custom(self, printer):
        printer.write(f"{self.name} {printer.name_of(self.operand)} : {self.operand.type} to {self.result.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        operand = parser.parse_value()
        parser.expect(":")
        parser.parse_type()
        parser.expect("to")
        return cls([operand], {}, [parser.parse_type()])


def _bits(t: ScalarType) -> int:
    return 1 if t == i1 else (64 if t == index else t.dtype.itemsize * 8)


def _cast(class_name, op_name, sources, targets, widening=None):
    return type(
        class_name,
        (_Cast,),
        {"name": op_name, "sources": sources, "targets": targets, "widening": widening, "__module__": __name__},
    )


_INTS = tuple(t for t in INTEGERS if t != index)
ExtFOp = _cast("ExtFOp", "arith.extf", STORED_FLOATS, STORED_FLOATS, True)
TruncFOp = _cast("TruncFOp", "arith.truncf", STORED_FLOATS, STORED_FLOATS, False)
SIToFPOp = _cast("SIToFPOp", "arith.sitofp", _INTS, FLOATS)
UIToFPOp = _cast("UIToFPOp", "arith.uitofp", _INTS, FLOATS)
FPToSIOp = _cast("FPToSIOp", "arith.fptosi", FLOATS, _INTS)
ExtSIOp = _cast("ExtSIOp", "arith.extsi", _INTS, _INTS, True)
ExtUIOp = _cast("ExtUIOp", "arith.extui", _INTS, _INTS, True)
TruncIOp = _cast("TruncIOp", "arith.trunci", _INTS, _INTS, False)


class IndexCastOp(_Cast):
    """``arith.index_cast %i : i64 to index``: an integer read as an index (sign-extended or
    truncated to the index width, 64 bits on every target kiln has), or back."""

    name = "arith.index_cast"
    sources = targets = _INTS + (index,)

    def verify(self):
        super().verify()
        if (element_of(self.operand.type) == index) == (element_of(self.result.type) == index):
            raise self.error(
                f"{self.name} converts between index and an integer type, not {self.operand.type} to {self.result.type}"
            )


class BitcastOp(_Cast):
    """``arith.bitcast %a : f32 to i32``: the same bits read as a type of the same width."""

    name = "arith.bitcast"
    sources = targets = STORED_FLOATS + tuple(t for t in _INTS if t != i1)

    def verify(self):
        super().verify()
        src, dst = element_of(self.operand.type), element_of(self.result.type)
        if _bits(src) != _bits(dst):
            raise self.error(f"{self.name} cannot convert {src} to {dst} (the widths differ)")


def float_to_int(x, dtype) -> np.ndarray:
    """What a float-to-integer cast computes, in every target and in constant folding.

    Truncation toward zero, as numpy's ``astype`` on x86-64, including where numpy leaves
    the result to the machine (NaN, infinities, values out of range; numpy warns there):

    - int32 and int64: NaN, infinities and values whose truncation falls outside the type
      give its minimum (``0x80000000`` for int32), the x86-64 conversion instruction's
      "integer indefinite" value. LLVM's plain ``fptosi`` would be poison there and its
      ``fptosi.sat`` saturates; kiln computes this rule explicitly instead.
    - int8, int16, uint8 and uint16: C converts to int32 and wraps: -1.0 is 255 in uint8.
    - uint32: through int64, then wrapped.
    - uint64: values from 2**63 up are converted after subtracting 2**63, as C compilers
      do; below that through int64 (so -1.0 wraps to 2**64 - 1).
    """
    dtype = np.dtype(dtype)
    x = np.asarray(x)
    if dtype.itemsize < 4:
        return float_to_int(x, np.int32).astype(dtype)
    if dtype == np.uint32:
        return float_to_int(x, np.int64).astype(dtype)
    if dtype == np.uint64:
        high = x >= 2.0**63
        low_part = float_to_int(np.where(high, 0, x), np.int64).view(np.uint64)
        high_part = float_to_int(np.where(high, x - 2.0**63, 0), np.int64).view(np.uint64) ^ np.uint64(2**63)
        return np.where(high, high_part, low_part).astype(dtype)
    bound = float(2 ** (8 * dtype.itemsize - 1))  # exact in float32 and float64
    with np.errstate(invalid="ignore"):
        inside = (x > -bound) & (x < bound)
        result = np.where(inside, x, 0).astype(dtype)
    return np.where(inside, result, np.iinfo(dtype).min).astype(dtype)


def signless_value(value, t: ScalarType) -> int | float | bool:
    """`value` of type `t` as a constant of ``t.signless``: an unsigned value at or above
    the signed maximum is written as the negative number with its bits (255 in ui8 is -1 in
    i8), as MLIR prints signless constants."""
    if not t.is_unsigned:
        return value
    return int(np.array(value).astype(t.dtype).view(t.signless.dtype))


_HEX = re.compile(r"0x[0-9A-Fa-f]+")
_NUMBER = re.compile(r"[-+]?(\d+\.\d*([eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)")
_WORD = re.compile(r"[a-z]+")
