"""float16 <-> float32/float64 conversions as integer LLVM IR, with numpy's rounding.

kiln keeps a float16 element as an ``i16`` holding its IEEE 754 binary16 bits, not as
LLVM's ``half``: on a CPU without F16C, ``fpext half`` and ``fptrunc ... to half`` become
calls to compiler-rt's ``__extendhfsf2`` and ``__truncsfhf2``, which the MCJIT loader
cannot resolve. These conversions use only integer, bitcast, shift and select
instructions (no calls, no branches), so they work lane by lane on vectors and leave
the loops around them vectorizable.

The rule is numpy's (``npy_halfbits_to_floatbits``, ``npy_halfbits_to_doublebits``,
``npy_floatbits_to_halfbits`` and ``npy_doublebits_to_halfbits`` in
numpy/_core/src/common/half.cpp): widening is exact, a NaN keeping its sign and payload
(it is not quieted); narrowing rounds once, to nearest with ties to even, into the
subnormals and to ±inf past the largest finite half (65504), so a float64 does not pass
through float32 on the way; a NaN keeps its sign and the top 10 bits of its payload,
made nonzero where they are all zero so that it stays a NaN. ``PRELUDE`` in
``kiln.codegen.cuda_prelude`` holds the same conversions in C.

Example: a float16 element loaded, doubled in float32, stored back::

    bits = b.load(b.gep(x, [i]))                       # i16 (or <8 x i16>)
    y = b.fmul(half_to_float(b, bits, ir.FloatType()), two)
    b.store(float_to_half(b, y), b.gep(out, [i]))      # i16, rounded as numpy's astype
"""

from __future__ import annotations

import dataclasses

import llvmlite.ir as ir


@dataclasses.dataclass(frozen=True)
class BinaryFormat:
    """An IEEE 754 binary interchange format, by the widths of its fields; every constant
    the conversions use is derived from these."""

    exponent_bits: int
    mantissa_bits: int  # the stored fraction, without the implicit leading 1

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def exponent_mask(self) -> int:
        """The bits of +inf: the exponent field all ones."""
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def mantissa_mask(self) -> int:
        return (1 << self.mantissa_bits) - 1


HALF = BinaryFormat(exponent_bits=5, mantissa_bits=10)
SINGLE = BinaryFormat(exponent_bits=8, mantissa_bits=23)
DOUBLE = BinaryFormat(exponent_bits=11, mantissa_bits=52)
FORMATS = {"float": SINGLE, "double": DOUBLE}


def half_to_float(builder: ir.IRBuilder, bits: ir.Value, target: ir.Type) -> ir.Value:
    """The float16 whose bits are `bits` (``i16`` or ``<N x i16>``) as `target`, a float or
    double type (or a vector of N of them): exact, as numpy's ``astype`` widens."""
    b, dst = builder, _format(target)
    wide = _with_element(bits.type, ir.IntType(dst.bits))

    def c(value):
        return _splat(wide, value)

    h = b.zext(bits, wide)
    shift = dst.mantissa_bits - HALF.mantissa_bits
    sign = b.shl(b.and_(h, c(HALF.sign_mask)), c(dst.bits - HALF.bits))
    magnitude = b.and_(h, c(HALF.sign_mask - 1))
    moved = b.shl(magnitude, c(shift))  # both fields in place, the exponent still biased for float16
    rebias = dst.bias - HALF.bias
    normal = b.add(moved, c(rebias << dst.mantissa_bits))
    special = b.or_(moved, c(dst.exponent_mask))  # inf, and NaN with its payload as it is
    # A subnormal half m * 2**-24 has its leading one shifted up to the implicit bit's place,
    # which makes it a normal number once the shift is taken off its exponent.
    normalized, lead = _normalize(b, b.and_(h, c(HALF.mantissa_mask)), HALF.mantissa_bits, c)
    subnormal = b.add(b.shl(normalized, c(shift)), b.shl(b.sub(c(rebias), lead), c(dst.mantissa_bits)))
    exponent = b.lshr(magnitude, c(HALF.mantissa_bits))
    result = b.select(b.icmp_unsigned("==", exponent, c(HALF.exponent_mask >> HALF.mantissa_bits)), special, normal)
    result = b.select(b.icmp_unsigned("==", exponent, c(0)), subnormal, result)
    result = b.select(b.icmp_unsigned("==", magnitude, c(0)), c(0), result)
    return b.bitcast(b.or_(result, sign), target)


def float_to_half(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """`x` (float or double, or a vector of them) as float16 bits (``i16`` or ``<N x i16>``),
    rounded once to nearest, ties to even, as numpy's ``astype(np.float16)``."""
    b, src = builder, _format(x.type)
    wide = _with_element(x.type, ir.IntType(src.bits))

    def c(value):
        return _splat(wide, value)

    u = b.bitcast(x, wide)
    shift = src.mantissa_bits - HALF.mantissa_bits
    sign = b.lshr(b.and_(u, c(src.sign_mask)), c(src.bits - HALF.bits))
    magnitude = b.and_(u, c(src.sign_mask - 1))
    exponent = b.lshr(magnitude, c(src.mantissa_bits))
    payload = b.lshr(b.and_(u, c(src.mantissa_mask)), c(shift))
    nan = b.or_(c(HALF.exponent_mask), b.select(b.icmp_unsigned("==", payload, c(0)), c(1), payload))
    # Below 2**-14 the half is subnormal: its significand counts units of 2**-24, so the
    # source's significand (implicit one included) is shifted further right, by one more bit
    # per binade down. Past M + 2 bits every significand rounds to 0, so the shift stops there
    # (a source subnormal, whose implicit bit is set here wrongly, also lands there).
    min_normal = src.bias - HALF.bias + 1  # the source's exponent field of 2**-14
    is_subnormal = b.icmp_unsigned("<", exponent, c(min_normal))
    significand = b.or_(b.and_(u, c(src.mantissa_mask)), c(1 << src.mantissa_bits))
    deeper = b.sub(c(min_normal + shift), exponent)
    deeper = b.select(b.icmp_unsigned("<", deeper, c(src.mantissa_bits + 2)), deeper, c(src.mantissa_bits + 2))
    rebiased = b.sub(magnitude, c((src.bias - HALF.bias) << src.mantissa_bits))
    value = b.select(is_subnormal, significand, rebiased)
    amount = b.select(is_subnormal, deeper, c(shift))
    # Round to nearest, ties to even: add just under half a unit, plus the kept lowest bit.
    # A carry out of the significand increments the exponent, which is the right result,
    # up to 0x7c00 (inf) from just below 65520; larger values are clamped to inf.
    half_unit_less_one = b.sub(b.shl(c(1), b.sub(amount, c(1))), c(1))
    kept_lowest = b.and_(b.lshr(value, amount), c(1))
    rounded = b.lshr(b.add(b.add(value, half_unit_less_one), kept_lowest), amount)
    inf = c(HALF.exponent_mask)
    finite = b.select(b.icmp_unsigned("<", rounded, inf), rounded, inf)
    result = b.select(b.icmp_unsigned(">", magnitude, c(src.exponent_mask)), nan, finite)
    return b.trunc(b.or_(result, sign), _with_element(x.type, ir.IntType(HALF.bits)))


def _normalize(b: ir.IRBuilder, m: ir.Value, width: int, c):
    """(m shifted left until bit `width` is set, the shift), for 0 < m < 2**width: a binary
    search over shifts of 8, 4, 2, 1 (for width 10) instead of a call to llvm.ctlz."""
    lead = c(0)
    for k in (1 << i for i in reversed(range(width.bit_length()))):
        short = b.icmp_unsigned("<", m, c(1 << (width + 1 - k)))
        m = b.select(short, b.shl(m, c(k)), m)
        lead = b.select(short, b.add(lead, c(k)), lead)
    return m, lead


def _format(t: ir.Type) -> BinaryFormat:
    element = t.element if isinstance(t, ir.VectorType) else t
    if str(element) not in FORMATS:
        raise TypeError(f"float16 converts to and from float and double, not {t}")
    return FORMATS[str(element)]


def _with_element(t: ir.Type, element: ir.Type) -> ir.Type:
    """`element`, or a vector of it as long as `t` is."""
    return ir.VectorType(element, t.count) if isinstance(t, ir.VectorType) else element


def _splat(t: ir.Type, value: int) -> ir.Constant:
    return ir.Constant(t, [value] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(t, value)
