"""Which numpy ufuncs and functions the tracer understands, and how.

Rule tables, not class hierarchies: a ufunc maps to a function that builds
the tensor op from operands that numpy's own type resolution has already
promoted (``ufunc.resolve_dtypes`` is the single source of promotion rules,
NEP 50 weak scalars included) and that have been broadcast to one shape.
"""

from __future__ import annotations

import functools
import inspect
import operator

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects.types import SUPPORTED_DTYPES
from kiln.errors import ArgumentError, DTypeError, InvalidValueError, ShapeError, UnsupportedError
from kiln.frontend import python_ints, views
from kiln.frontend import traced_ops as ops
from kiln.frontend.tracing import NUMPY_PROTOCOL, user_location


def _op(op_class, bool_op=None, **attributes):
    """Rule emitting `op_class`, or `bool_op` when numpy computes in bool (add on bools is or)."""

    def rule(ctx, operands):
        chosen = bool_op if operands[0].dtype == np.bool_ and bool_op is not None else op_class
        return ctx.emit(chosen, operands, attributes or None)

    return rule


# What a comparison says when its signed operand is negative and the other is unsigned (uint64
# against int64, which numpy 2 compares exactly): (signed on the left, signed on the right).
_NEGATIVE_SIGNED = {"eq": (False, False), "ne": (True, True), "lt": (True, False), "le": (True, False),
                    "gt": (False, True), "ge": (False, True)}  # fmt: skip


def _compare(predicate):
    """kiln.cmp; uint64 against int64 (numpy's mixed loops) compares the int64 as uint64 where
    it is not negative, and by its sign where it is."""

    def rule(ctx, operands):
        a, b = operands
        if a.dtype == b.dtype:
            return ctx.emit(T.CmpOp, operands, {"predicate": predicate})
        signed = 0 if a.dtype.kind == "i" else 1
        as_unsigned = [ops.astype(x, np.uint64) for x in operands]
        zero = ops.broadcast_to(ops.lift(ctx, np.array(0, np.int64), np.int64), a.shape)
        negative = ctx.emit(T.CmpOp, [operands[signed], zero], {"predicate": "lt"})
        exact = ctx.emit(T.CmpOp, as_unsigned, {"predicate": predicate})
        answer = ops.broadcast_to(ops.lift(ctx, np.array(_NEGATIVE_SIGNED[predicate][signed]), np.bool_), a.shape)
        return ops.where(negative, answer, exact)

    return rule


def _identity_on_bool(op_class):
    def rule(ctx, operands):
        return operands[0] if operands[0].dtype == np.bool_ else ctx.emit(op_class, operands)

    return rule


def _square(ctx, operands):
    return ctx.emit(T.MulOp, [operands[0], operands[0]])


UFUNC_RULES = {
    np.add: _op(T.AddOp, T.OrOp),
    np.subtract: _op(T.SubOp),
    np.multiply: _op(T.MulOp, T.AndOp),
    np.true_divide: _op(T.DivOp),
    np.maximum: _op(T.MaximumOp, T.OrOp),
    np.minimum: _op(T.MinimumOp, T.AndOp),
    np.power: _op(T.PowOp),
    np.float_power: _op(T.PowOp),
    np.negative: _op(T.NegOp),
    np.positive: lambda ctx, operands: operands[0],
    np.conjugate: lambda ctx, operands: operands[0],  # kiln's dtypes are all real
    np.absolute: _identity_on_bool(T.AbsOp),
    np.fabs: _op(T.AbsOp),
    np.square: _square,
    np.exp: _op(T.ExpOp),
    np.log: _op(T.LogOp),
    np.sqrt: _op(T.SqrtOp),
    np.tanh: _op(T.TanhOp),
    np.sin: _op(T.SinOp),
    np.cos: _op(T.CosOp),
    np.rint: _op(T.RintOp),
    np.remainder: _op(T.RemainderOp),
    np.fmod: _op(T.FModOp),
    np.floor_divide: _op(T.FloorDivideOp),
    np.equal: _compare("eq"),
    np.not_equal: _compare("ne"),
    np.less: _compare("lt"),
    np.less_equal: _compare("le"),
    np.greater: _compare("gt"),
    np.greater_equal: _compare("ge"),
    np.logical_and: _op(T.AndOp),
    np.logical_or: _op(T.OrOp),
    np.logical_xor: _op(T.CmpOp, predicate="ne"),
    np.logical_not: _op(T.NotOp),
    np.bitwise_and: _op(T.BitwiseAndOp, T.AndOp),
    np.bitwise_or: _op(T.BitwiseOrOp, T.OrOp),
    np.left_shift: _op(T.LeftShiftOp),
    np.right_shift: _op(T.RightShiftOp),
}
# The float functions of the math dialect's table, each a ufunc of the same name (numpy_ufuncs
# adds the ufuncs composed of tensor ops, and floor, ceil and trunc of integers).
UFUNC_RULES.update((op.numpy_fn, _op(op)) for op in T.FLOAT_FUNCTION_OPS.values())

# Logical ufuncs compute in the operands' dtype and then test truthiness;
# kiln's and/or/not take bools, so their operands are cast to bool first.
_TRUTH_UFUNCS = (np.logical_and, np.logical_or, np.logical_xor, np.logical_not)
# Ufunc methods other than __call__ and outer (reduce, accumulate, at): method name ->
# rule(ufunc, inputs, kwargs), registered by the modules that implement them.
UFUNC_METHODS: dict = {}


def _name(fn) -> str:
    module = getattr(fn, "__module__", None) or "numpy"
    module = "np" + module[len("numpy") :] if module.startswith("numpy") else module
    return f"{module}.{fn.__name__}"


def apply_ufunc(ufunc, method, inputs, kwargs, operator=False):
    """`ufunc.method(*inputs, **kwargs)` on traced values. `operator` says it came from a Python
    operator (x + 1), whose result on weak scalars stays weak; a ufunc called on them gives a
    strong numpy scalar, as numpy 2 does (np.exp(2.0) is an np.float64)."""
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (out,)
    if any(o is not None for o in outs):
        if method != "__call__" or not all(isinstance(o, ops.Tracer) and not o.weak for o in outs):
            raise UnsupportedError(
                f"{name}(..., out=...) is supported only for a plain ufunc call writing traced arrays "
                "(out=x with x traced); use the returned value",
                user_location(),
            )
        where = kwargs.pop("where", True)
        results = apply_ufunc(ufunc, method, inputs, kwargs)
        results = results if isinstance(results, tuple) else (results,)
        if where is not True:
            # numpy computes only where `where` holds; out keeps its elements elsewhere
            results = tuple(np.where(where, r, o) for r, o in zip(results, outs))
        casting = kwargs.get("casting", "same_kind")
        written = tuple(write_out(ufunc, o, r, casting) for o, r in zip(outs, results))
        return written if isinstance(out, tuple) and len(written) > 1 else written[0]
    if method in UFUNC_METHODS:
        return UFUNC_METHODS[method](ufunc, inputs, kwargs)
    if method not in ("__call__", "outer") or method == "outer" and ufunc.nin != 2:
        raise UnsupportedError(f"{name} is not supported by kiln", user_location())
    if kwargs.get("where", True) is not True:
        raise UnsupportedError(
            f"{name}(..., where=...) without out= leaves numpy's other elements uninitialised; pass out= "
            "(e.g. out=np.zeros_like(x)) or use np.where",
            user_location(),
        )
    kwargs.pop("where", None)
    loop_keywords = {k: kwargs.pop(k) for k in ("dtype", "casting", "signature", "sig") if k in kwargs}
    if kwargs:
        raise UnsupportedError(f"{name}: keyword(s) {', '.join(sorted(kwargs))} are not supported", user_location())
    if method == "outer":
        # numpy makes arrays of both operands first, so Python scalars are strong here.
        a, b = (ops.strong(x) if isinstance(x, ops.Tracer) else np.asarray(ops.check_operand(x)) for x in inputs)
        return apply_ufunc(ufunc, "__call__", (np.reshape(a, np.shape(a) + (1,) * np.ndim(b)), b), loop_keywords)
    signature, casting = _loop_request(name, ufunc, loop_keywords)
    if ufunc is np.matmul:
        return ops.matmul(*inputs)
    if ufunc not in UFUNC_RULES:
        raise UnsupportedError(f"{name} is not supported by kiln", user_location())

    operands = [ops.check_operand(x) for x in inputs]
    lifted = None  # the operands as lifted, where they differ from the operands
    if ufunc in _COMPARISONS:
        outside = _compare_outside_range(ufunc, operands)
        if outside is not None:
            return outside
    keys = tuple(ops.promotion_key(x) for x in operands)
    python_only = all(isinstance(k, type) for k in keys)
    if python_only:
        # Python scalars only: numpy computes in their default dtypes (int64, float64); kiln
        # computes Python ints in uint64 where one is 2**63 or more (python_ints).
        keys = tuple(np.dtype(k) for k in keys)
        keys = tuple(python_ints.computing_dtype(operands) if k == np.int64 else k for k in keys)
    try:
        requested = {"casting": casting} if signature is None else {"casting": casting, "signature": signature}
        loop = ufunc.resolve_dtypes(keys + (None,) * ufunc.nout, **requested)
    except (TypeError, ValueError) as exc:
        if loop_keywords:
            raise DTypeError(f"{name}: {exc}", user_location()) from None
        listed = ", ".join(str(k.__name__ if isinstance(k, type) else k) for k in keys)
        raise DTypeError(f"{name} does not take ({listed}): {exc}", user_location()) from None
    in_dtypes, out_dtypes = loop[: ufunc.nin], loop[ufunc.nin :]
    if ufunc in _TRUTH_UFUNCS and signature is None:
        in_dtypes = (np.dtype(bool),) * ufunc.nin
    exact_comparison = (
        ufunc in _COMPARISONS
        and signature is None
        and all(d.kind in "iu" for d in in_dtypes)
        and any(isinstance(x, ops.Tracer) and x.weak and x.dtype.kind in "iu" for x in operands)
    )
    if exact_comparison:
        in_dtypes = tuple(_exact_comparison_dtype(x, d) for x, d in zip(operands, in_dtypes))
    elif python_only and python_ints.is_modular(ufunc):
        # exact Python ints in 64 bits: their bits are right modulo 2**64 whatever the dtype, and
        # python_arithmetic checks the exact result itself (2**63 * 0 is 0)
        lifted = [python_ints.wrapped(x, d) for x, d in zip(operands, in_dtypes)]
    elif ufunc not in _TRUTH_UFUNCS or signature is not None:
        for x, dtype in zip(operands, in_dtypes):
            python_ints.check_conversion(x, dtype)
    if ufunc is np.power and out_dtypes[0].kind in "iu" and _has_negative_constant(operands[1]):
        # numpy refuses this whatever the base, after converting the Python int (NEP 50: uint8_array
        # ** -1 is an OverflowError); known now, it is raised now, at the user's line
        raise InvalidValueError("Integers to negative integer powers are not allowed.", user_location())
    for dtype in (*in_dtypes, *out_dtypes):
        if dtype not in SUPPORTED_DTYPES:
            listed = ", ".join(str(d) for d in in_dtypes)
            raise DTypeError(
                f"{name} on ({listed}) computes in {dtype}, which kiln does not "
                "support; cast the inputs first (e.g. .astype(np.float32))",
                user_location(),
            )

    ctx = ops.context_of(operands)
    tracers = [ops.lift(ctx, x, d) for x, d in zip(lifted if lifted else operands, in_dtypes)]
    shape = ops.broadcast_shapes(*(t.shape for t in tracers))
    tracers = [ops.broadcast_to(t, shape) for t in tracers]
    if (
        ufunc is np.power
        and operator
        and isinstance(operands[0], ops.Tracer)
        and operands[0].dtype == np.bool_
        and type(operands[1]) is int
        and operands[1] == 2
    ):
        # ndarray ** 2 (a Python int) is numpy's np.square, and the square of bool is int8
        as_int8 = ops.cast(tracers[0], np.int8)
        result, out_dtypes = ctx.emit(T.MulOp, [as_int8, as_int8]), (np.dtype(np.int8),)
    elif ufunc is np.power and out_dtypes[0].kind == "f" and _is_constant(operands[1], 0.5):
        # numpy's float power loop takes the square root for a scalar exponent of 0.5:
        # (-0.0) ** 0.5 is -0.0 and (-inf) ** 0.5 NaN there, where pow gives 0.0 and inf.
        result = ctx.emit(T.SqrtOp, [tracers[0]])
    else:
        result = UFUNC_RULES[ufunc](ctx, tracers)
    weak = operator and all(ops.is_weak(x) for x in operands)
    results = tuple(ops.Tracer(r.value, ctx, weak=weak) for r in (result if ufunc.nout > 1 else (result,)))
    if weak and ufunc.nout == 1:
        python_ints.python_arithmetic(ufunc, operands, results[0])
    for r, dtype in zip(results, out_dtypes):
        assert r.dtype == dtype, f"{name}: traced {r.dtype}, numpy gives {dtype}"
    return results if ufunc.nout > 1 else results[0]


def _loop_request(name, ufunc, keywords):
    """(signature, casting) for ``ufunc.resolve_dtypes`` from a ufunc call's ``dtype=``,
    ``signature=`` (or its old name ``sig=``) and ``casting=``: numpy reads ``dtype=D`` as the
    signature that fixes every output to D (np.add(a, b, dtype=np.float32) adds in float32)."""
    casting = keywords.get("casting", "same_kind")
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ArgumentError(
            f"{name}: casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe' (got {casting!r})",
            user_location(),
        )
    given = [k for k in ("dtype", "signature", "sig") if keywords.get(k) is not None]
    if len(given) > 1:
        raise ArgumentError(f"{name}: cannot specify both 'signature' and 'dtype'", user_location())
    if not given:
        return None, casting
    if given[0] == "dtype":
        dtype = ops.check_dtype(keywords["dtype"], f"{name}(dtype=...)")
        return (None,) * ufunc.nin + (dtype,) * ufunc.nout, casting
    signature = keywords[given[0]]
    if isinstance(signature, (tuple, list)):
        signature = tuple(None if d is None else np.dtype(d) for d in signature)
    return signature, casting


def write_out(ufunc, out, result, casting="same_kind"):
    """numpy's out=: the result broadcast to out's shape and cast by the `casting` rule is
    written into out in place (every alias and view of out sees it); out is returned."""
    if ops.broadcast_shapes(result.shape, out.shape) != out.shape:
        raise ShapeError(
            f"non-broadcastable output operand with shape {out.shape} doesn't match the broadcast shape "
            f"{ops.broadcast_shapes(result.shape, out.shape)}",
            user_location(),
        )
    if not np.can_cast(result.dtype, out.dtype, casting):
        raise DTypeError(
            f"Cannot cast ufunc '{ufunc.__name__}' output from {result.dtype} to {out.dtype} with casting rule "
            f"'{casting}'",
            user_location(),
        )
    views.assign(out, ops.cast(ops.broadcast_to(ops.strong(result), out.shape), out.dtype))
    return out


_COMPARISONS = {
    np.equal: operator.eq,
    np.not_equal: operator.ne,
    np.less: operator.lt,
    np.less_equal: operator.le,
    np.greater: operator.gt,
    np.greater_equal: operator.ge,
}


def _compare_outside_range(ufunc, operands):
    """numpy 2 compares an integer array with a Python int outside its dtype's range
    exactly (NEP 50: `int32_array == 2**40` is all False) rather than refusing it: every
    element then compares as the dtype's extreme on that side does. None if no operand is
    such an int."""
    a, b = operands
    for scalar, array, flipped in ((b, a, False), (a, b, True)):
        if type(scalar) is int and isinstance(array, ops.Tracer) and array.dtype.kind in "iu":
            info = np.iinfo(array.dtype)
            if info.min <= scalar <= info.max:
                return None
            extreme = int(info.max if scalar > info.max else info.min)
            value = _COMPARISONS[ufunc](*((scalar, extreme) if flipped else (extreme, scalar)))
            ctx = ops.context_of(operands)
            return ops.strong(ops.broadcast_to(ops.lift(ctx, np.bool_(value), np.dtype(bool)), array.shape))
    return None


def _exact_comparison_dtype(x, loop_dtype) -> np.dtype:
    """The dtype an operand of an integer comparison with a Python int argument compares in,
    so that numpy 2's exact answer comes out whatever the int's value (``uint8_array < s``
    with s = 256 is all True): the argument's own int64 (uint64 from 2**63 on), an array
    widened to int64 (uint64 stays: _compare's mixed rule compares it with int64 exactly),
    a constant in the loop's dtype widened alike (_compare_outside_range took the others)."""
    if isinstance(x, ops.Tracer) and x.weak:
        return x.dtype
    if python_ints.is_python_int(x):
        return np.dtype(np.int64 if python_ints.fits(x, np.int64) else np.uint64)
    if loop_dtype == np.uint64:
        return loop_dtype
    return np.dtype(np.int64)


def _has_negative_constant(x) -> bool:
    return not isinstance(x, ops.Tracer) and np.asarray(x).dtype.kind in "iu" and bool(np.any(np.asarray(x) < 0))


def _is_constant(x, value) -> bool:
    """Whether `x` is the scalar `value`, known while tracing (a traced exponent's value is not)."""
    return (
        not isinstance(x, ops.Tracer)
        and np.ndim(x) == 0
        and np.asarray(x).dtype.kind in "fiu"
        and float(np.asarray(x)) == value
    )


def _no_extras(name, extras):
    given = sorted(k for k, v in extras.items() if v is not None)
    if given:
        raise UnsupportedError(f"{name}: keyword(s) {', '.join(given)} are not supported", user_location())


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_extras("np.sum", {"out": out})
    return ops.reduce_where("sum", a, axis, keepdims, dtype, initial, where)


def _max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _no_extras("np.max", {"out": out})
    return ops.reduce_where("max", a, axis, keepdims, None, initial, where)


def _min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _no_extras("np.min", {"out": out})
    return ops.reduce_where("min", a, axis, keepdims, None, initial, where)


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    _no_extras("np.mean", {"out": out})
    return ops.mean_where(a, axis, dtype, keepdims, where)


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    _no_extras("np.var", {"out": out})
    return ops.var_where(a, axis, dtype, _ddof("np.var", ddof, correction), keepdims, where, mean)


def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    _no_extras("np.std", {"out": out})
    result = np.sqrt(ops.var_where(a, axis, dtype, _ddof("np.std", ddof, correction), keepdims, where, mean))
    return result if dtype is None else ops.astype(result, dtype)  # numpy writes the root back into dtype


def _ddof(name, ddof, correction):
    """numpy 2's `correction` is the array API's name for ddof; numpy refuses both at once."""
    if correction is None:
        return ddof
    if ddof != 0:
        raise ArgumentError(f"{name}: ddof and correction can't be provided simultaneously", user_location())
    return correction


def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_extras("np.prod", {"out": out})
    return ops.reduce_where("prod", a, axis, keepdims, dtype, initial, where)


def _any(a, axis=None, out=None, keepdims=False, *, where=None):
    _no_extras("np.any", {"out": out})
    return ops.reduce_where("any", a, axis, keepdims, where=where)


def _all(a, axis=None, out=None, keepdims=False, *, where=None):
    _no_extras("np.all", {"out": out})
    return ops.reduce_where("all", a, axis, keepdims, where=where)


def _argmax(a, axis=None, out=None, *, keepdims=False):
    _no_extras("np.argmax", {"out": out})
    return ops.arg_extreme("max", a, axis, keepdims)


def _argmin(a, axis=None, out=None, *, keepdims=False):
    _no_extras("np.argmin", {"out": out})
    return ops.arg_extreme("min", a, axis, keepdims)


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _no_extras("np.trace", {"out": out})
    return ops.reduce("sum", ops.diagonal(a, offset, axis1, axis2), -1, False, dtype)


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **extras):
    _no_extras("np.clip", dict(extras, out=out))
    low, high = (a_min if a_min is not None else min), (a_max if a_max is not None else max)
    if isinstance(a, ops.Tracer) and a.dtype.kind in "iu":
        # numpy's _clip: a Python int bound at or past the dtype's own extreme bounds nothing
        # (np.clip(uint8_array, -5, 300) is the array); one past the other extreme still
        # meets numpy's OverflowError.
        info = np.iinfo(a.dtype)
        low = None if type(low) is int and low <= info.min else low
        high = None if type(high) is int and high >= info.max else high
        if isinstance(low, ops.Tracer) and low.weak and low.dtype.kind in "iu":
            low = python_ints.clamped(low, low=int(info.min))  # the same, for an argument
        if isinstance(high, ops.Tracer) and high.weak and high.dtype.kind in "iu":
            high = python_ints.clamped(high, high=int(info.max))
        if low is None and high is None:
            return np.positive(a)  # a new array, as numpy's
    # np.clip is one ufunc of three operands: their common dtype, not that of max then min.
    operands = [ops.check_operand(v) for v in (a, low, high) if v is not None]
    target = np.result_type(*(ops.promotion_sample(v) for v in operands))
    result = a if isinstance(a, ops.Tracer) and a.dtype == target else ops.lift(ops.context_of(operands), a, target)
    if low is not None and high is not None and np.size(low) == 1 and np.size(high) == 1 and target.kind == "f":
        # numpy clips between two one-element bounds in a loop of its own, which keeps x where
        # it equals a bound (np.clip(-0.0, 0.0, 1.0) is -0.0, np.maximum(-0.0, 0.0) is 0.0);
        # a NaN bound or x gives NaN.
        result = np.where(np.logical_or(np.less(result, low), np.not_equal(low, low)), low, result)
        return np.where(np.logical_or(np.greater(result, high), np.not_equal(high, high)), high, result)
    result = result if low is None else np.maximum(result, low)
    return result if high is None else np.minimum(result, high)


def _dot(a, b, out=None):
    _no_extras("np.dot", {"out": out})
    return ops.dot(a, b)


def _matmul(a, b, /, out=None, **extras):
    _no_extras("np.matmul", dict(extras, out=out))
    return ops.matmul(a, b)


def _reshape(a, shape=None, order="C", newshape=None, copy=None):
    return ops.reshape(a, shape if newshape is None else newshape, order)


def _concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    _no_extras("np.concatenate", {"out": out, "casting": casting})
    return ops.concatenate(arrays, axis, dtype)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting=None):
    _no_extras("np.stack", {"out": out, "dtype": dtype, "casting": casting})
    return ops.stack(arrays, axis)


def _like(name, a, fill_value, dtype, shape, device):
    _no_extras(name, {"device": None if device == "cpu" else device})
    return ops.full_like(a, fill_value, dtype, shape)


def _zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like("np.zeros_like", a, 0, dtype, shape, device)


def _ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like("np.ones_like", a, 1, dtype, shape, device)


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like("np.full_like", a, fill_value, dtype, shape, device)


FUNCTION_RULES = {
    np.sum: _sum,
    np.prod: _prod,
    np.any: _any,
    np.all: _all,
    np.argmax: _argmax,
    np.argmin: _argmin,
    np.repeat: ops.repeat,
    np.diagonal: ops.diagonal,
    np.trace: _trace,
    np.max: _max,
    np.amax: _max,
    np.min: _min,
    np.amin: _min,
    np.mean: _mean,
    np.var: _var,
    np.std: _std,
    np.matmul: _matmul,
    np.dot: _dot,
    np.reshape: _reshape,
    np.transpose: lambda a, axes=None: ops.transpose(a, axes),
    np.swapaxes: ops.swapaxes,
    np.moveaxis: ops.moveaxis,
    np.expand_dims: ops.expand_dims,
    np.squeeze: lambda a, axis=None: ops.squeeze(a, axis),
    np.ravel: lambda a, order="C": ops.reshape(a, (-1,), order),
    np.broadcast_to: lambda array, shape, subok=False: ops.broadcast_to(ops.as_tracer(array), _shape(shape)),
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.where: ops.where,
    np.clip: _clip,
    np.zeros_like: _zeros_like,
    np.ones_like: _ones_like,
    np.full_like: _full_like,
    np.real: lambda val: val,  # kiln's dtypes are all real
    np.imag: lambda val: ops.full_like(val, 0),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[ops.normalize_axis(axis, a.ndim)],
    np.copy: lambda a, order="K", subok=False: a,
}

# The numpy functions that return views of their argument (numpy's reshape only where it need
# not copy: traced_ops.reshape decides): item assignment through their results writes the
# argument, and theirs sees it (frontend/views.py). Every other function returns new arrays.
VIEW_FUNCTIONS = {
    np.reshape,
    np.transpose,
    np.swapaxes,
    np.moveaxis,
    np.expand_dims,
    np.squeeze,
    np.ravel,
    np.broadcast_to,
    np.real,
    np.diagonal,
}


def _shape(shape) -> tuple:
    return (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)


@functools.lru_cache(maxsize=None)
def _signature(rule) -> inspect.Signature:
    return inspect.signature(rule)


def apply_function(func, args, kwargs):
    """`func(*args, **kwargs)` on traced values. Arguments the rule does not take are an
    UnsupportedError naming the function; results are strong (numpy functions return arrays
    or numpy scalars, never Python scalars)."""
    rule = FUNCTION_RULES.get(func)
    if rule is None:
        raise UnsupportedError(f"{_name(func)} is not supported by kiln", user_location())
    try:
        _signature(rule).bind(*args, **kwargs)
    except TypeError as exc:
        raise UnsupportedError(
            f"{_name(func)} with these arguments is not supported by kiln ({exc})", user_location()
        ) from None
    result = rule(*args, **kwargs)
    if func in VIEW_FUNCTIONS:
        return ops.strong(result) if isinstance(result, ops.Tracer) else result
    own = views.fresh  # numpy's copies: neither the argument itself nor a view of it
    if type(result) in (tuple, list):
        return type(result)(own(ops.strong(r)) if isinstance(r, ops.Tracer) else r for r in result)
    return own(ops.strong(result)) if isinstance(result, ops.Tracer) else result


NUMPY_PROTOCOL.update(ufunc=apply_ufunc, function=apply_function)
