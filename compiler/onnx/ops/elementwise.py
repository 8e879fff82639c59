"""ONNX elementwise math, comparison, logic and casts (numpy broadcasting, opset 7 on).

ONNX types are strict where numpy's promote: each handler gives the dtype the spec names
(the first input's, for arithmetic), whatever numpy would have promoted to.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import constant, numpy_dtype, op


def _same(x, result):
    """`result` in `x`'s dtype (ONNX's T -> T)."""
    return result if result.dtype == x.dtype else result.astype(x.dtype)


def _binary(numpy_function):
    def handler(node, a, b):
        return _same(a, numpy_function(a, b))

    return handler


for _name, _fn in {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}.items():
    op(_name, since=7)(_binary(_fn))


@op("Div", since=7)
def div(node, a, b):
    if a.dtype.kind in "iu":
        # C's division, truncating toward zero (the spec's reference), not numpy's floor.
        quotient = np.floor_divide(a, b)
        adjust = (np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0)) if a.dtype.kind == "i" else False
        return _same(a, quotient + np.asarray(adjust).astype(a.dtype))
    return _same(a, np.divide(a, b))


@op("Mod", attributes=("fmod",), since=10)
def mod(node, a, b):
    if node.attr("fmod", 0):
        return _same(a, np.fmod(a, b))
    if a.dtype.kind == "f":
        raise node.error("fmod=0 is only defined for integers; the spec requires fmod=1 for floats")
    return _same(a, np.mod(a, b))


@op("Pow", since=7)
def pow_(node, a, b):
    if a.dtype.kind in "iu" and b.dtype.kind == "f":
        return np.power(a.astype(b.dtype), b).astype(a.dtype)
    if a.dtype.kind == "f" and b.dtype != a.dtype:
        b = b.astype(a.dtype)
    return _same(a, np.power(a, b.astype(a.dtype) if a.dtype.kind in "iu" else b))


for _name, _fn in {
    "Abs": np.abs,
    "Neg": np.negative,
    "Sqrt": np.sqrt,
    "Exp": np.exp,
    "Log": np.log,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Sign": np.sign,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Tanh": np.tanh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Not": np.logical_not,
    "BitwiseNot": np.invert,
}.items():
    op(_name)(lambda node, x, _fn=_fn: _same(x, _fn(x)))


@op("Reciprocal")
def reciprocal(node, x):
    return _same(x, np.reciprocal(x))


@op("Round")
def round_(node, x):
    return _same(x, np.round(x))  # half to even, as the spec says


@op("Erf")
def erf(node, x):
    from kiln.frontend.numpy_math import erf as kiln_erf

    return _same(x, kiln_erf(x))


@op("IsNaN", since=9)
def isnan(node, x):
    return np.isnan(x)


@op("IsInf", attributes=("detect_negative", "detect_positive"), since=10)
def isinf(node, x):
    negative, positive = node.attr("detect_negative", 1), node.attr("detect_positive", 1)
    result = np.zeros_like(x, dtype=bool)
    if negative:
        result = result | (x == -np.inf)
    if positive:
        result = result | (x == np.inf)
    return result


for _name, _fn in {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}.items():
    op(_name, since=7)(lambda node, a, b, _fn=_fn: _fn(a, b))

for _name, _fn in {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}.items():
    op(_name)(_binary(_fn))


@op("BitShift", attributes=("direction",), since=11)
def bit_shift(node, x, y):
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise node.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    # numpy gives 0 for a shift past the width, as C on unsigned types would not promise.
    return _same(x, np.left_shift(x, y) if direction == "LEFT" else np.right_shift(x, y))


@op("Where", since=9)
def where(node, condition, x, y):
    return _same(x, np.where(condition, x, y))


def _variadic(numpy_function):
    def handler(node, *inputs):
        result = inputs[0]
        for value in inputs[1:]:
            result = numpy_function(result, value)
        return _same(inputs[0], result)

    return handler


op("Sum", since=8)(_variadic(np.add))
op("Max", since=8)(_variadic(np.maximum))  # NaN propagates, as in the spec's reference
op("Min", since=8)(_variadic(np.minimum))


@op("Mean", since=8)
def mean(node, *inputs):
    total = _variadic(np.add)(node, *inputs)
    return _same(inputs[0], total / np.asarray(len(inputs), inputs[0].dtype))


@op("Clip", attributes=("min", "max"), since=6)
def clip(node, x, low=None, high=None):
    if node.opset < 11:
        low, high = node.attr("min", None), node.attr("max", None)
    low = None if low is None else np.asarray(low, x.dtype) if not hasattr(low, "ndim") else low
    high = None if high is None else np.asarray(high, x.dtype) if not hasattr(high, "ndim") else high
    result = x
    if low is not None:
        result = np.maximum(result, low)
    if high is not None:
        result = np.minimum(result, high)
    return _same(x, result)


@op("Cast", attributes=("to", "saturate", "round_mode"), since=6)
def cast(node, x):
    dtype = numpy_dtype(node.attr("to"), node, "to")
    return _cast(x, dtype)


@op("CastLike", attributes=("saturate", "round_mode"), since=15)
def cast_like(node, x, like):
    return _cast(x, np.dtype(like.dtype))


def _cast(x, dtype):
    if x.dtype == dtype:
        return x
    if dtype == np.bool_:
        return x != 0
    return x.astype(dtype)


@op("Identity")
def identity(node, x):
    return x


@op("Constant", attributes=("value", "value_float", "value_floats", "value_int", "value_ints"))
def constant_(node):
    for name, dtype in (
        ("value", None),
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if name in node:
            return np.asarray(node.attr(name), dtype)
    raise node.error("has none of value, value_float(s), value_int(s)")


__all__ = ["constant"]
