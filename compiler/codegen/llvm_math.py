"""exp and tanh in float32 as straight-line LLVM IR (Cephes' algorithms).

libm's expf and tanhf are called one element at a time, which keeps vector
loops scalar; these sequences use only arithmetic, comparisons and bit
operations, so they work lane-wise on vectors too. Accuracy: within 2 ulp of
the correctly rounded result over the whole float range (checked against
float64 in the tests), with IEEE behaviour at the edges: NaN stays NaN,
exp overflows to inf and underflows through the subnormals to 0, tanh(±inf)
is ±1.
"""

from __future__ import annotations

import llvmlite.ir as ir

F32 = ir.FloatType()
I32 = ir.IntType(32)

_LOG2E = 1.44269504088896341
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)


def _like(t, value):
    """A constant of float or int `value`, splat to the vector shape of `t`."""
    element = F32 if isinstance(value, float) else I32
    if isinstance(t, ir.VectorType):
        return ir.Constant(ir.VectorType(element, t.count), [value] * t.count)
    return ir.Constant(element, value)


def _int_type(t):
    return ir.VectorType(I32, t.count) if isinstance(t, ir.VectorType) else I32


def _intrinsic(b, name, t, args):
    suffix = f"v{t.count}f32" if isinstance(t, ir.VectorType) else "f32"
    full = f"llvm.{name}.{suffix}"
    fn = b.module.globals.get(full) or ir.Function(b.module, ir.FunctionType(t, [t] * len(args)), name=full)
    return b.call(fn, args)


def expf(b: ir.IRBuilder, x):
    t = x.type
    c = lambda v: _like(t, v)  # noqa: E731
    clamped = _intrinsic(b, "minnum", t, [_intrinsic(b, "maxnum", t, [x, c(-104.0)]), c(89.0)])
    n = _intrinsic(b, "rint", t, [b.fmul(clamped, c(_LOG2E))])
    r = b.fsub(b.fsub(clamped, b.fmul(n, c(_LN2_HI))), b.fmul(n, c(_LN2_LO)))
    p = c(_EXP_POLY[0])
    for coefficient in _EXP_POLY[1:]:
        p = b.fadd(b.fmul(p, r), c(coefficient))
    p = b.fadd(b.fadd(b.fmul(b.fmul(p, r), r), r), c(1.0))
    # p * 2**n in two steps, so that n below -126 reaches the subnormals instead of 0.
    ni = b.fptosi(n, _int_type(t))
    half = b.ashr(ni, _like(t, 1))
    rest = b.sub(ni, half)
    scale1 = b.bitcast(b.shl(b.add(half, _like(t, 127)), _like(t, 23)), t)
    scale2 = b.bitcast(b.shl(b.add(rest, _like(t, 127)), _like(t, 23)), t)
    result = b.fmul(b.fmul(p, scale1), scale2)
    result = b.select(b.fcmp_ordered(">", x, c(88.72283935546875)), c(float("inf")), result)
    result = b.select(b.fcmp_ordered("<", x, c(-103.972084045410)), c(0.0), result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def tanhf(b: ir.IRBuilder, x):
    t = x.type
    c = lambda v: _like(t, v)  # noqa: E731
    magnitude = _intrinsic(b, "fabs", t, [x])
    z = b.fmul(x, x)
    small = c(_TANH_POLY[0])
    for coefficient in _TANH_POLY[1:]:
        small = b.fadd(b.fmul(small, z), c(coefficient))
    small = b.fadd(b.fmul(b.fmul(small, z), x), x)
    e = expf(b, b.fmul(magnitude, c(2.0)))
    large = b.fsub(c(1.0), b.fdiv(c(2.0), b.fadd(e, c(1.0))))
    large = _intrinsic(b, "copysign", t, [large, x])
    result = b.select(b.fcmp_ordered("<", magnitude, c(0.625)), small, large)
    result = b.select(b.fcmp_ordered("==", x, c(0.0)), x, result)  # keeps the sign of -0.0
    return b.select(b.fcmp_unordered("uno", x, x), x, result)
