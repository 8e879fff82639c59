"""What one element of each elementwise tensor op computes, in arith and math ops.

A rule takes the builder, the tensor op, the operands' element type and the
loaded scalars, and returns the scalar result. The element type is the tensor's
(``ui8``, say); the scalars are signless (``i8``), as MLIR's arith wants, and the
rule picks the unsigned op where numpy's unsigned semantics differ (``divui``,
``cmpi ult``, ``shrui``, ``maxui``). Integer and bool variants
follow numpy: wrapping integer arithmetic, NaN-propagating maximum/minimum,
``!=`` true for NaN. Float maximum and minimum are numpy's exactly, signed
zeros included: ``np.maximum(a, b)`` is ``a`` where ``a`` wins or is NaN and
``b`` otherwise, so ``np.maximum(0.0, -0.0)`` is ``-0.0`` (IEEE's maximum,
``arith.maximumf``, would say ``0.0``).
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import arith as AR
from kiln.dialects import math as M
from kiln.dialects import tensor as T
from kiln.dialects.types import f16, f32, i1, i32, i64, ui32, ui64


def by_kind(float_op, int_op, bool_op=None, unsigned_op=None):
    def rule(b, op, t, *xs):
        if t.is_float:
            cls = float_op
        elif t.is_bool and bool_op:
            cls = bool_op
        else:
            cls = unsigned_op if t.is_unsigned and unsigned_op else int_op
        return b.op(cls, *xs)

    return rule


def constant(b, value, t):
    """A scalar constant of the tensor element type `t`, typed as the loop level computes."""
    return b.op(AR.ConstantOp, result_type=t.signless, value=AR.signless_value(value, t))


def _neg(b, op, t, x):
    return b.op(AR.NegFOp, x) if t.is_float else b.op(AR.SubIOp, constant(b, 0, t), x)


def _not(b, op, t, x):
    return b.op(AR.XOrIOp, x, constant(b, True, i1))


_FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_SIGNED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_UNSIGNED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def _cmp(b, op, t, x, y):
    if t.is_float:
        return b.op(AR.CmpFOp, x, y, predicate=_FLOAT_PREDICATES[op.predicate])
    table = _UNSIGNED if t.is_bool or t.is_unsigned else _SIGNED  # False < True, as numpy orders bools
    return b.op(AR.CmpIOp, x, y, predicate=table[op.predicate])


def _pick(float_predicate, int_op, unsigned_op):
    def rule(b, op, t, x, y):
        if not t.is_float:
            return b.op(unsigned_op if t.is_unsigned else int_op, x, y)
        wins = b.op(
            AR.OrIOp, b.op(AR.CmpFOp, x, y, predicate=float_predicate), b.op(AR.CmpFOp, x, x, predicate="une")
        )  # x != x: x is NaN
        return b.op(AR.SelectOp, wins, x, y)

    return rule


def _select(b, op, t, c, x, y):
    return b.op(AR.SelectOp, c, x, y)


def convert(b, x, src, dst):
    """numpy's astype for one element (float to integer: ``arith.float_to_int``'s rule)."""
    if src.signless == dst.signless:  # int8 <-> uint8 keeps the bits
        return x
    if src == f16 and dst != f32:  # f16 is widened exactly, then converted
        return convert(b, convert(b, x, f16, f32), f32, dst)
    if dst.is_bool:  # truthiness: nonzero (and NaN) is True
        if src.is_float:
            return b.op(AR.CmpFOp, x, constant(b, 0.0, src), predicate="une")
        return b.op(AR.CmpIOp, x, constant(b, 0, src), predicate="ne")
    if dst == f16 and not src.is_float:  # exact: integers that f32 rounds are past f16's range
        return convert(b, convert(b, x, src, f32), f32, dst)
    if src.is_float and dst.is_float:
        cls = AR.ExtFOp if dst.dtype.itemsize > src.dtype.itemsize else AR.TruncFOp
    elif dst.is_float:
        cls = AR.UIToFPOp if src.is_bool or src.is_unsigned else AR.SIToFPOp
    elif src.is_float:
        return _float_to_int(b, x, src, dst)
    elif src.is_bool or dst.dtype.itemsize > src.dtype.itemsize:  # i1 is narrower than i8
        cls = AR.ExtUIOp if src.is_bool or src.is_unsigned else AR.ExtSIOp
    else:
        cls = AR.TruncIOp
    return b.op(cls, x, result_type=dst.signless)


def _float_to_int(b, x, src, dst):
    """``arith.float_to_int``'s rule: through int32 (int64 for uint32) and wrapped, and
    uint64 from 2**63 up converted less 2**63."""
    if dst.dtype.itemsize < 4 or dst == ui32:
        wide = i32 if dst.dtype.itemsize < 4 else i64
        return b.op(AR.TruncIOp, b.op(AR.FPToSIOp, x, result_type=wide), result_type=dst.signless)
    if dst != ui64:
        return b.op(AR.FPToSIOp, x, result_type=dst)
    high = b.op(AR.CmpFOp, x, constant(b, 2.0**63, src), predicate="oge")
    low_part = b.op(AR.FPToSIOp, b.op(AR.SelectOp, high, constant(b, 0.0, src), x), result_type=i64)
    shifted = b.op(AR.SubFOp, x, constant(b, 2.0**63, src))
    high_part = b.op(AR.FPToSIOp, b.op(AR.SelectOp, high, shifted, constant(b, 0.0, src)), result_type=i64)
    high_part = b.op(AR.XOrIOp, high_part, constant(b, -(2**63), i64))
    return b.op(AR.SelectOp, high, high_part, low_part)


def _cast(b, op, t, x):
    return convert(b, x, t, op.result.type.element)


def _bitcast(b, op, t, x):
    """The loop level's integers are signless: int32 <-> uint32 is no op at all there."""
    dst = op.result.type.element.signless
    return x if t.signless == dst else b.op(AR.BitcastOp, x, result_type=dst)


def _safe_divisor(b, t, d):
    """(d is 0 or -1, d with those replaced by 1): the divisors arith's integer division
    is undefined for (x / 0, and MIN / -1 overflows), and one it can take instead. An
    unsigned divisor is only replaced where it is 0."""
    special = b.op(AR.CmpIOp, d, constant(b, 0, t), predicate="eq")
    if not t.is_unsigned:
        special = b.op(AR.OrIOp, special, b.op(AR.CmpIOp, d, constant(b, -1, t), predicate="eq"))
    return special, b.op(AR.SelectOp, special, constant(b, 1, t), d)


def _unsigned_division(op_class):
    """numpy's x // d and x % d on unsigned integers: truncating, and 0 where d is 0."""

    def rule(b, t, x, d):
        zero_divisor, safe = _safe_divisor(b, t, d)
        return b.op(AR.SelectOp, zero_divisor, constant(b, 0, t), b.op(op_class, x, safe))

    return rule


def _int_floor_divide(b, t, x, d):
    """numpy's x // d: rounds toward -inf, x // 0 is 0, MIN // -1 wraps to MIN."""
    if t.is_unsigned:
        return _unsigned_division(AR.DivUIOp)(b, t, x, d)
    _, safe = _safe_divisor(b, t, d)
    quotient = b.op(AR.FloorDivSIOp, x, safe)  # x // 1 == x where d was 0 or -1
    negated = b.op(AR.SubIOp, constant(b, 0, t), x)
    quotient = b.op(AR.SelectOp, b.op(AR.CmpIOp, d, constant(b, -1, t), predicate="eq"), negated, quotient)
    return b.op(AR.SelectOp, b.op(AR.CmpIOp, d, constant(b, 0, t), predicate="eq"), constant(b, 0, t), quotient)


def _int_fmod(b, t, x, d):
    """C's x % d (the dividend's sign); x % 0 is 0 in numpy, and x % -1 is always 0."""
    if t.is_unsigned:
        return _unsigned_division(AR.RemUIOp)(b, t, x, d)
    _, safe = _safe_divisor(b, t, d)
    return b.op(AR.RemSIOp, x, safe)


def _int_remainder(b, t, x, d):
    """numpy's x % d: the divisor's sign, x % 0 is 0."""
    if t.is_unsigned:
        return _unsigned_division(AR.RemUIOp)(b, t, x, d)
    _, safe = _safe_divisor(b, t, d)
    rem = b.op(AR.RemSIOp, x, safe)
    zero = constant(b, 0, t)
    signs_differ = b.op(
        AR.XOrIOp,
        b.op(AR.CmpIOp, rem, zero, predicate="slt"),
        b.op(AR.CmpIOp, safe, zero, predicate="slt"),
    )
    fix = b.op(AR.AndIOp, b.op(AR.CmpIOp, rem, zero, predicate="ne"), signs_differ)
    return b.op(AR.SelectOp, fix, b.op(AR.AddIOp, rem, safe), rem)


def _float_divmod(b, t, a, d):
    """(a // d, a % d) for floats, step for step as numpy's npy_divmod and npy_floor_divide:
    the remainder takes the divisor's sign (a signed zero, too), the quotient is rounded
    to the nearest integer of (a - mod) / d, and d == 0 gives a / d and NaN."""

    def c(value):
        return constant(b, value, t)

    def cmp(predicate, x, y):
        return b.op(AR.CmpFOp, x, y, predicate=predicate)

    fmod = mod = b.op(AR.RemFOp, a, d)
    div = b.op(AR.DivFOp, b.op(AR.SubFOp, a, mod), d)
    mod_nonzero = cmp("une", mod, c(0.0))  # C's `if (mod)`: NaN counts as nonzero
    fix = b.op(AR.AndIOp, mod_nonzero, b.op(AR.XOrIOp, cmp("olt", d, c(0.0)), cmp("olt", mod, c(0.0))))
    signed_zero = b.op(M.CopysignOp, c(0.0), d)
    mod = b.op(AR.SelectOp, fix, b.op(AR.AddFOp, mod, d), b.op(AR.SelectOp, mod_nonzero, mod, signed_zero))
    div = b.op(AR.SelectOp, fix, b.op(AR.SubFOp, div, c(1.0)), div)
    floor = b.op(M.FloorOp, div)
    up = cmp("ogt", b.op(AR.SubFOp, div, floor), c(0.5))
    floor = b.op(AR.SelectOp, up, b.op(AR.AddFOp, floor, c(1.0)), floor)
    quotient = b.op(AR.DivFOp, a, d)
    floor = b.op(AR.SelectOp, cmp("une", div, c(0.0)), floor, b.op(M.CopysignOp, c(0.0), quotient))
    by_zero = cmp("oeq", d, c(0.0))
    return b.op(AR.SelectOp, by_zero, quotient, floor), b.op(AR.SelectOp, by_zero, fmod, mod)


def _division(float_rule, int_rule):
    def rule(b, op, t, x, y):
        return float_rule(b, t, x, y) if t.is_float else int_rule(b, t, x, y)

    return rule


def _shift(shift_op, past_width, unsigned_op=None):
    """numpy's shifts: counts outside [0, bits) (negative ones too) give `past_width`'s
    value, where arith's shift is undefined: the shift only sees a count it takes. An
    unsigned right shift fills with zeros (`unsigned_op`), and past the width gives 0."""

    def rule(b, op, t, x, count):
        bits = constant(b, t.dtype.itemsize * 8, t)
        inside = b.op(AR.CmpIOp, count, bits, predicate="ult")
        shift = unsigned_op if t.is_unsigned and unsigned_op else shift_op
        shifted = b.op(shift, x, b.op(AR.SelectOp, inside, count, constant(b, 0, t)))
        return b.op(AR.SelectOp, inside, shifted, past_width(b, t, x))

    return rule


def _check_index(b, op, t, x):
    """The index itself, after a cf.assert that it lies in [-size, size) ([0, size) unsigned)."""
    if t.is_unsigned:
        inside = b.op(AR.CmpIOp, x, constant(b, op.size, t), predicate="ult")
    else:
        above = b.op(AR.CmpIOp, x, constant(b, -op.size, t), predicate="sge")
        inside = b.op(AR.AndIOp, above, b.op(AR.CmpIOp, x, constant(b, op.size, t), predicate="slt"))
    b.check(inside, op.message, op.loc)
    return x


def _sign_fill(b, t, x):
    if t.is_unsigned:
        return constant(b, 0, t)
    return b.op(AR.ShRSIOp, x, constant(b, t.dtype.itemsize * 8 - 1, t))


def _abs(b, op, t, x):
    if t.is_float:
        return b.op(M.AbsFOp, x)
    return x if t.is_unsigned else b.op(M.AbsIOp, x)


def _pow(b, op, t, x, y):
    """x ** y; an unsigned exponent at or past 2**(bits-1) (which ipowi would read as
    negative) is replaced by one it reads as positive with the same power: 2**(bits-2) plus
    y mod 2**(bits-2). Odd bases repeat with a period dividing 2**(bits-2) (the unit group
    mod 2**bits has that exponent); even ones are 0 from any exponent >= bits on."""
    if t.is_float:
        return b.op(M.PowFOp, x, y)
    if t.is_unsigned:
        bits = t.dtype.itemsize * 8
        quarter = constant(b, 2 ** (bits - 2), t)
        small = b.op(AR.CmpIOp, y, constant(b, 2 ** (bits - 1), t), predicate="ult")
        folded = b.op(AR.OrIOp, b.op(AR.AndIOp, y, constant(b, 2 ** (bits - 2) - 1, t)), quarter)
        y = b.op(AR.SelectOp, small, y, folded)
    return b.op(M.IPowIOp, x, y)


SCALAR_RULES = {
    T.AddOp: by_kind(AR.AddFOp, AR.AddIOp),
    T.SubOp: by_kind(AR.SubFOp, AR.SubIOp),
    T.MulOp: by_kind(AR.MulFOp, AR.MulIOp),
    T.DivOp: by_kind(AR.DivFOp, None),
    T.MaximumOp: _pick("ogt", AR.MaxSIOp, AR.MaxUIOp),
    T.MinimumOp: _pick("olt", AR.MinSIOp, AR.MinUIOp),
    T.PowOp: _pow,
    T.AndOp: by_kind(None, AR.AndIOp),
    T.OrOp: by_kind(None, AR.OrIOp),
    T.NegOp: _neg,
    T.AbsOp: _abs,
    T.ExpOp: by_kind(M.ExpOp, None),
    T.LogOp: by_kind(M.LogOp, None),
    T.SqrtOp: by_kind(M.SqrtOp, None),
    T.TanhOp: by_kind(M.TanhOp, None),
    T.SinOp: by_kind(M.SinOp, None),
    T.CosOp: by_kind(M.CosOp, None),
    T.NotOp: _not,
    T.CmpOp: _cmp,
    T.SelectOp: _select,
    T.ConvertOp: _cast,
    T.BitcastOp: _bitcast,
    T.FModOp: _division(lambda b, t, x, y: b.op(AR.RemFOp, x, y), _int_fmod),
    T.RemainderOp: _division(lambda b, t, x, y: _float_divmod(b, t, x, y)[1], _int_remainder),
    T.FloorDivideOp: _division(lambda b, t, x, y: _float_divmod(b, t, x, y)[0], _int_floor_divide),
    T.BitwiseAndOp: by_kind(None, AR.AndIOp),
    T.BitwiseOrOp: by_kind(None, AR.OrIOp),
    T.BitwiseXorOp: by_kind(None, AR.XOrIOp),
    T.LeftShiftOp: _shift(AR.ShLIOp, lambda b, t, x: constant(b, 0, t)),
    T.RightShiftOp: _shift(AR.ShRSIOp, _sign_fill, AR.ShRUIOp),
    T.CheckIndexOp: _check_index,
}
SCALAR_RULES.update((tensor_op, by_kind(math_op, None)) for math_op, tensor_op in T.FLOAT_FUNCTION_OPS.items())


def reduction_identity(kind, t):
    """The value a sum, max or min starts from."""
    if kind is T.ReduceSumOp:
        return False if t.is_bool else (0.0 if t.is_float else 0)
    if t.is_bool:
        return kind is T.ReduceMinOp
    if t.is_float:
        return -np.inf if kind is T.ReduceMaxOp else np.inf
    info = np.iinfo(t.dtype)
    return int(info.min) if kind is T.ReduceMaxOp else int(info.max)


REDUCTION_COMBINE = {
    T.ReduceSumOp: by_kind(AR.AddFOp, AR.AddIOp),
    T.ReduceMaxOp: by_kind(AR.MaximumFOp, AR.MaxSIOp, AR.OrIOp, AR.MaxUIOp),
    T.ReduceMinOp: by_kind(AR.MinimumFOp, AR.MinSIOp, AR.AndIOp, AR.MinUIOp),
}
