"""ONNX elementwise math, comparison, logic and casts (numpy broadcasting).

ONNX types are strict where numpy's promote: each handler gives the dtype the spec names
(the first input's, for arithmetic), whatever numpy would have promoted to.
"""

from __future__ import annotations

import numpy as np

from kiln.onnx.registry import numpy_dtype, op, to_numpy


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
    if a.dtype.kind == "i":
        # C's division, truncating toward zero (the spec's reference), not numpy's floor:
        # the floored quotient is one too low where the remainder is nonzero and the signs differ.
        quotient = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return _same(a, np.where(inexact, quotient + np.asarray(1, a.dtype), quotient))
    if a.dtype.kind == "u":
        return _same(a, np.floor_divide(a, b))
    return _same(a, np.divide(a, b))


@op("Mod", attributes=("fmod",), since=10)
def mod(node, a, b):
    fmod = node.attr("fmod", 0)
    if fmod not in (0, 1):
        raise node.error(f"fmod must be 0 or 1, got {fmod}")
    # fmod=0 is the floored remainder with B's sign (numpy's mod, special cases included);
    # fmod=1 the truncated one with A's sign (C's fmod).
    return _same(a, np.fmod(a, b) if fmod else np.mod(a, b))


@op("Pow", since=7)
def pow_(node, a, b):
    # Computed in the type numpy promotes the two to (an integer base to a float power in
    # float), then cast to the base's type, as the reference computes it.
    return _same(a, np.power(a, b))


def _unary(numpy_function):
    def handler(node, x):
        return _same(x, numpy_function(x))

    return handler


for _name, _fn in {
    "Abs": np.abs,
    "Neg": np.negative,
    "Sqrt": np.sqrt,
    "Exp": np.exp,
    "Log": np.log,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Reciprocal": np.reciprocal,
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
    "Round": np.round,  # half to even, as the spec says
}.items():
    op(_name)(_unary(_fn))


_SQRT_PI = 1.7724538509055160273
_ERF_SERIES_CUTOFF = 1.5
_ERF_SERIES_TERMS = 25
_ERFC_CONTFRAC_TERMS = 50


def _erf_series(x):
    """erf(x) by its power series: accurate to a few ulps for |x| < 1.5."""
    x2 = x * x
    acc = np.zeros_like(x)
    fk = _ERF_SERIES_TERMS + 0.5
    for _ in range(_ERF_SERIES_TERMS):
        acc = 2.0 + x2 * acc / fk
        fk -= 1.0
    return acc * x * np.exp(-x2) / _SQRT_PI


def _erfc_continued_fraction(x):
    """erfc(x) for x >= 1.5 by its continued fraction (CPython's math.erfc method); 0 from
    x = 30 on, where it underflows."""
    x2 = x * x
    a, da = 0.0, 0.5
    p, p_last = np.ones_like(x), np.zeros_like(x)
    q, q_last = da + x2, np.ones_like(x)
    for _ in range(_ERFC_CONTFRAC_TERMS):
        a += da
        da += 2.0
        b = da + x2
        p, p_last = b * p - a * p_last, p
        q, q_last = b * q - a * q_last, q
    return np.where(x < 30.0, p / q * x * np.exp(-x2) / _SQRT_PI, 0.0)


def erf(x):
    """The error function, elementwise, in float64 (then cast back to `x`'s dtype): numpy
    has none, so it is built of numpy operations, exact to float64 rounding."""
    wide = x.astype(np.float64)
    magnitude = np.abs(wide)
    # Each branch is given arguments in its own range only; the continued fraction of an
    # infinite argument is NaN, but np.where drops it (numpy would warn when folding constants).
    with np.errstate(all="ignore"):
        series = _erf_series(np.clip(wide, -_ERF_SERIES_CUTOFF, _ERF_SERIES_CUTOFF))
        tail = np.sign(wide) * (1.0 - _erfc_continued_fraction(np.maximum(magnitude, _ERF_SERIES_CUTOFF)))
    return _same(x, np.where(magnitude < _ERF_SERIES_CUTOFF, series, tail))


@op("Erf")
def erf_(node, x):
    return erf(x)


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
    op(_name, since=18)(_binary(_fn))


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


# Opset 7 takes equal shapes only, which numpy's broadcasting serves as well.
op("Sum", since=7)(_variadic(np.add))
op("Max", since=7)(_variadic(np.maximum))  # NaN propagates, as the reference
op("Min", since=7)(_variadic(np.minimum))


@op("Mean", since=7)
def mean(node, *inputs):
    total = _variadic(np.add)(node, *inputs)
    return _same(inputs[0], total / np.asarray(len(inputs), inputs[0].dtype))


@op("Clip", attributes=("min", "max"), since=6)
def clip(node, x, low=None, high=None):
    if node.opset < 11:
        # Before opset 11 the bounds are float attributes, unbounded where left out.
        low, high = (
            None if v is None else np.asarray(v, x.dtype) for v in (node.attr("min", None), node.attr("max", None))
        )
    # max after min: where min > max every value becomes max, as the spec says.
    result = x if low is None else np.maximum(x, low)
    result = result if high is None else np.minimum(result, high)
    return _same(x, result)


# saturate and round_mode concern only the float8 targets, which kiln refuses as types.
@op("Cast", attributes=("to", "saturate", "round_mode"), since=6)
def cast(node, x):
    return cast_to(x, numpy_dtype(node.attr("to"), node, "to"))


@op("CastLike", attributes=("saturate", "round_mode"), since=15)
def cast_like(node, x, like):
    return cast_to(x, np.dtype(like.dtype))


def cast_to(x, dtype):
    """`x` in `dtype` by ONNX's Cast rules: floats to bool are ``x != 0`` (NaN is True), floats
    out of an integer type's range are undefined (numpy's result here), integers wrap."""
    if x.dtype == dtype:
        return x
    if dtype == np.bool_:
        return x != 0
    return x.astype(dtype)


@op("Identity")
def identity(node, x):
    return x


_CONSTANT_ATTRIBUTES = (
    "value",
    "value_float",
    "value_floats",
    "value_int",
    "value_ints",
    "value_string",
    "value_strings",
    "sparse_value",
)


@op("Constant", attributes=_CONSTANT_ATTRIBUTES)
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
    if "sparse_value" in node:
        return _dense(node, node.attr("sparse_value"))
    if "value_string" in node or "value_strings" in node:
        raise node.error("string constants are not supported by kiln")
    raise node.error("has none of value, value_float(s), value_int(s), sparse_value")


def _dense(node, sparse):
    """A ``SparseTensorProto`` as the dense numpy array it stands for (zeros elsewhere)."""
    values, indices = to_numpy(sparse.values, node), to_numpy(sparse.indices, node)
    shape = tuple(sparse.dims)
    dense = np.zeros(int(np.prod(shape, dtype=np.int64)), values.dtype)
    # Indices are either linear ([NNZ]) or one coordinate tuple per value ([NNZ, rank]).
    flat = indices if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), shape)
    dense[flat] = values
    return dense.reshape(shape)
