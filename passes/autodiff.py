"""Reverse-mode automatic differentiation as a transformation of tensor IR.

``value_and_grad(function, wrt)`` returns a new function with the same
arguments that returns the original results followed by the gradient of the
first (a float scalar) with respect to each argument in `wrt`. The forward ops
are copied, then a vector-Jacobian rule per op is applied walking them
backwards; each rule is written in tensor ops, so the result is again a plain
tensor function: it is optimized, lowered and compiled like any other, and can
be differentiated again. Before::

    func.func @loss(%x: tensor<3xf32>) -> tensor<f32> {
      %0 = kiln.mul %x, %x : tensor<3xf32>
      %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
      func.return %1 : tensor<f32>
    }

After (``wrt=[0]``)::

    func.func @loss(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
      %0 = kiln.mul %x, %x : tensor<3xf32>
      %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
      %2 = kiln.constant dense<1.0> : tensor<f32>
      %3 = kiln.reshape %2 : (tensor<f32>) -> tensor<1xf32>
      %4 = kiln.broadcast_to %3 : (tensor<1xf32>) -> tensor<3xf32>
      %5 = kiln.mul %4, %x : tensor<3xf32>
      %6 = kiln.mul %x, %4 : tensor<3xf32>
      %7 = kiln.add %5, %6 : tensor<3xf32>
      func.return %1, %7 : tensor<f32>, tensor<3xf32>
    }

Broadcasting is undone by summing over the broadcast axes; max/min and
maximum/minimum share the gradient between ties, as JAX does; integer and
bool values carry no gradient.
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import func as F
from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.dialects import tensor_sort as TS
from kiln.dialects.diagnostics import DTypeError, ShapeError, VerificationError
from kiln.dialects.rewriter import Rewriter
from kiln.dialects.types import FunctionType, TensorType

from .canonicalize import splat_value
from .pass_spec import declare_pass
from .tensor_builder import TensorBuilder

VJP: dict = {}
# Tensor ops without a rule, and why none is needed (tests/test_op_registry.py checks that
# every tensor op is in VJP or here).
_NO_FLOAT_RESULT = "its result is never a float, so no gradient flows through it"
NOT_DIFFERENTIABLE: dict = {
    **{
        cls: _NO_FLOAT_RESULT
        for cls in (T.AndOp, T.OrOp, T.NotOp, T.CmpOp, T.CheckIndexOp)
        + (T.BitwiseAndOp, T.BitwiseOrOp, T.BitwiseXorOp, T.LeftShiftOp, T.RightShiftOp)
    },
    T.ConstantOp: "it has no operands to differentiate with respect to",
    T.FusedOp: "fusion runs after differentiation: gradients are taken of unfused tensor IR",
}


def vjp(*op_classes):
    """Register the rule ``rule(b, op, g, needs) -> [cotangent or None per operand]``."""

    def register(rule):
        for cls in op_classes:
            VJP[cls] = rule
        return rule

    return register


def differentiable(t) -> bool:
    return isinstance(t, TensorType) and t.element.is_float


def value_and_grad(function: F.FuncOp, wrt) -> F.FuncOp:
    results = function.body.ops[-1].operands
    if not results:
        raise VerificationError(f"@{function.sym_name} returns nothing to differentiate", function.loc)
    loss = results[0]
    if loss.type.shape != ():
        raise ShapeError(
            f"can only differentiate a function that returns a scalar; @{function.sym_name} "
            f"returns shape {loss.type.shape}",
            getattr(getattr(loss, "op", None), "loc", None),
        )
    if not loss.type.element.is_float:
        raise DTypeError(f"can only differentiate a float result; @{function.sym_name} returns {loss.type.element}")
    for index in wrt:
        if not differentiable(function.arguments[index].type):
            raise DTypeError(
                f"cannot differentiate with respect to argument #{index} of @{function.sym_name}, "
                f"of type {function.arguments[index].type}: gradients need float inputs"
            )

    new = F.FuncOp.create(
        function.sym_name,
        [a.type for a in function.arguments],
        [],
        [a.name_hint for a in function.arguments],
        loc=function.loc,
    )
    mapping = dict(zip(function.arguments, new.arguments))
    forward = []
    for op in function.body.ops[:-1]:
        clone = type(op)(
            [mapping[v] for v in op.operands], dict(op.attributes), [r.type for r in op.results], loc=op.loc
        )
        new.body.append(clone)
        mapping.update(zip(op.results, clone.results))
        forward.append(clone)

    active = {new.arguments[i] for i in wrt}
    for op in forward:
        if any(v in active for v in op.operands):
            active.update(r for r in op.results if differentiable(r.type))

    new_loss = mapping[loss]
    cotangents = {}
    if new_loss in active:
        seed = TensorBuilder(new.body, getattr(new_loss, "op", None) and new_loss.op.loc)
        cotangents[new_loss] = seed.full(1, new_loss.type)
    backpropagate(forward, active, cotangents, new.body)

    end = TensorBuilder(new.body, function.body.ops[-1].loc)
    grads = [cotangents.get(new.arguments[i]) or end.zeros(new.arguments[i].type) for i in wrt]
    outputs = [mapping[v] for v in results] + grads
    new.body.append(F.ReturnOp(outputs, {}, []))
    new.attributes["function_type"] = FunctionType(tuple(a.type for a in new.arguments), tuple(v.type for v in outputs))
    return new


def backpropagate(forward, active, cotangents, block) -> None:
    """Reverse mode over the ops `forward` (in order), appending to `block`: `cotangents`
    (value -> its cotangent) starts with the seeds and ends with every active value's."""
    for op in reversed(forward):
        g = cotangents.get(op.results[0]) if op.results else None
        needs = [v in active for v in op.operands]
        if g is None or not any(needs):
            continue
        rule = VJP.get(type(op))
        if rule is None:
            raise VerificationError(f"no gradient rule for {op.name}", op.loc)
        b = TensorBuilder(block, op.loc)
        for value, grad, need in zip(op.operands, rule(b, op, g, needs), needs):
            if need and grad is not None:
                cotangents[value] = b.add(cotangents[value], grad) if value in cotangents else grad


@declare_pass("value-and-grad", "append to each function's results the gradients of its first result")
def value_and_grad_pass(module):
    """Differentiate every function's first result with respect to all its float arguments."""
    for function in list(module.body.ops):
        if isinstance(function, F.FuncOp):
            wrt = [i for i, a in enumerate(function.arguments) if differentiable(a.type)]
            Rewriter.replace(function, value_and_grad(function, wrt))
    return module


# -- the rules ----------------------------------------------------------------------------------
def _when(needs, *thunks):
    return [thunk() if need else None for need, thunk in zip(needs, thunks)]


@vjp(T.AddOp)
def _add(b, op, g, needs):
    return [g, g]


@vjp(T.SubOp)
def _sub(b, op, g, needs):
    return _when(needs, lambda: g, lambda: b.neg(g))


@vjp(T.MulOp)
def _mul(b, op, g, needs):
    return _when(needs, lambda: b.mul(g, op.rhs), lambda: b.mul(op.lhs, g))


@vjp(T.DivOp)
def _div(b, op, g, needs):
    scaled = b.div(g, op.rhs)  # d(a/b)/db = -(a/b)/b
    return _when(needs, lambda: scaled, lambda: b.neg(b.mul(scaled, op.result)))


@vjp(T.NegOp)
def _neg(b, op, g, needs):
    return [b.neg(g)]


@vjp(T.ExpOp)
def _exp(b, op, g, needs):
    return [b.mul(g, op.result)]


@vjp(T.LogOp)
def _log(b, op, g, needs):
    return [b.div(g, op.operand)]


@vjp(T.SqrtOp)
def _sqrt(b, op, g, needs):
    return [b.div(g, b.mul(b.full(2, op.result.type), op.result))]


@vjp(T.TanhOp)
def _tanh(b, op, g, needs):
    t = op.result
    return [b.mul(g, b.sub(b.full(1, t.type), b.mul(t, t)))]


@vjp(T.SinOp)
def _sin(b, op, g, needs):
    return [b.mul(g, b.op(T.CosOp, op.operand))]


@vjp(T.CosOp)
def _cos(b, op, g, needs):
    return [b.neg(b.mul(g, b.op(T.SinOp, op.operand)))]


@vjp(T.AbsOp)
def _abs(b, op, g, needs):
    x, t = op.operand, op.operand.type
    zero = b.zeros(t)
    sign = b.select(b.cmp(x, zero, "gt"), b.full(1, t), b.select(b.cmp(x, zero, "lt"), b.full(-1, t), zero))
    return [b.mul(g, sign)]


@vjp(T.PowOp)
def _pow(b, op, g, needs):
    x, y, t = op.lhs, op.rhs, op.result.type

    def d_base():
        # y * x ** (y - 1); but x ** 0 is 1 for every x, so where y == 0 its slope is 0, and the
        # formula says 0 * 0 ** -1 = 0 * inf at x = 0 and 0 * NaN at x = NaN (JAX's rule for
        # integer exponents, lax._pow_jvp_lhs, also gives 0). There the base is taken as 1 (so
        # 0 * 1 ** -1 = 0), not the result masked afterwards: a masked-off NaN would come back
        # as 0 * inf in the gradient of this gradient (the "double where" of JAX's FAQ).
        exponent = splat_value(y)
        if exponent is not None and exponent != 0:  # a constant exponent (x ** 2): no y == 0 to guard
            return b.mul(g, b.mul(y, b.op(T.PowOp, x, b.sub(y, b.full(1, t)))))
        zero, one = b.zeros(t), b.full(1, t)
        singular = b.select(b.cmp(x, zero, "eq"), one, b.select(b.cmp(x, x, "ne"), one, x))
        base = b.select(b.cmp(y, zero, "eq"), singular, x)
        return b.mul(g, b.mul(y, b.op(T.PowOp, base, b.sub(y, one))))

    def d_exponent():  # x ** y * log(x), taken as 0 where x == 0 (where it would be 0 * -inf)
        zero = b.zeros(t)
        return b.mul(g, b.select(b.cmp(x, zero, "eq"), zero, b.mul(op.result, b.op(T.LogOp, x))))

    return _when(needs, d_base, d_exponent)


def _tie_shared(b, op, g, needs, predicate):
    a, c, t = op.lhs, op.rhs, op.result.type
    share = b.select(b.cmp(a, c, predicate), b.full(1, t), b.select(b.cmp(a, c, "eq"), b.full(0.5, t), b.zeros(t)))
    return _when(needs, lambda: b.mul(g, share), lambda: b.mul(g, b.sub(b.full(1, t), share)))


@vjp(T.MaximumOp)
def _maximum(b, op, g, needs):
    return _tie_shared(b, op, g, needs, "gt")


@vjp(T.MinimumOp)
def _minimum(b, op, g, needs):
    return _tie_shared(b, op, g, needs, "lt")


@vjp(T.SelectOp)
def _select(b, op, g, needs):
    zero = b.zeros(g.type)
    return [
        None,
        b.select(op.condition, g, zero) if needs[1] else None,
        b.select(op.condition, zero, g) if needs[2] else None,
    ]


@vjp(T.BitcastOp)
def _bitcast(b, op, g, needs):
    return [None]  # bits, not a value: no gradient flows through, as through a comparison


@vjp(T.ConvertOp)
def _cast(b, op, g, needs):
    return [b.cast(g, op.operand.type.dtype)]


def _keepdims_shape(op):
    source = op.operand.type
    return tuple(1 if i in op.axes else d for i, d in enumerate(source.shape))


@vjp(T.ReduceSumOp)
def _reduce_sum(b, op, g, needs):
    return [b.broadcast_to(b.reshape(g, _keepdims_shape(op)), op.operand.type.shape)]


@vjp(T.ReduceMaxOp, T.ReduceMinOp)
def _reduce_extreme(b, op, g, needs):
    x, shape = op.operand, op.operand.type.shape
    extreme = b.broadcast_to(b.reshape(op.result, _keepdims_shape(op)), shape)
    hits = b.cast(b.cmp(x, extreme, "eq"), x.type.dtype)  # ties share the gradient equally
    count = b.broadcast_to(b.sum(hits, op.axes, keepdims=True), shape)
    spread = b.broadcast_to(b.reshape(g, _keepdims_shape(op)), shape)
    return [b.div(b.mul(spread, hits), count)]


@vjp(TI.GatherOp)
def _gather(b, op, g, needs):
    """A gather's cotangent goes back to the positions it read, summed where an index repeats:
    a scatter-add along the gathered axis, O(len(index)) as the gather."""
    zeros = b.zeros(op.source.type)
    return [b.op(TI.ScatterAtOp, zeros, op.index, g, kind="add", axis=op.gather_axis), None]


@vjp(TS.SortOp)
def _sort(b, op, g, needs):
    """Sorted values move the operand's elements: each x[..., perm[k]] lands at out[..., k], so
    its cotangent is g[..., k] scattered back through the permutation (a kiln.sort of the same
    order giving indices). The rows are flattened into one axis for kiln.scatter_at, whose index
    is shared by every row: position perm[r, k] of row r is r * n + perm[r, k]. A sort giving
    indices has an integer result: nothing flows."""
    if op.returns_kind == "indices":
        return [None]
    shape, n = op.operand.type.shape, op.operand.type.shape[-1]
    size, taken = int(np.prod(shape)), int(np.prod(op.result.type.shape))  # a count takes fewer
    if taken == 0:
        return [b.zeros(op.operand.type)]
    attributes = {"order": op.order, "returns": "indices"}
    if "count" in op.attributes:
        attributes["count"] = op.count
    perm = b.op(TS.SortOp, op.operand, **attributes)
    starts = np.arange(size // n, dtype=np.int64).reshape(shape[:-1] + (1,)) * n
    offsets = b.broadcast_to(b.op(T.ConstantOp, value=starts), op.result.type.shape)
    flat = b.reshape(b.add(perm, offsets), (taken,))
    zeros = b.zeros(op.operand.type.with_shape((size,)))
    scattered = b.op(TI.ScatterAtOp, zeros, flat, b.reshape(g, (taken,)), kind="add")
    return [b.reshape(scattered, shape)]


@vjp(TI.ScatterAtOp)
def _scatter_at(b, op, g, needs):
    """ufunc.at's updates, differentiated as the combined update they are mathematically:
    a sum (add, sub), a product (mul: each factor's cotangent is the product of the others,
    without dividing by a zero factor) or an extreme (max, min: ties share the cotangent
    equally, as kiln.reduce_max's). Each is a few scatters and gathers, O(len(index))."""
    if op.scatter_axes > 1:  # differentiated as the same scatter into dest with those axes merged
        merged, shape = op.merged_shape(), op.dest.type.shape
        attributes = {"kind": op.kind, "axis": op.scatter_axis}
        single = b.op(TI.ScatterAtOp, b.reshape(op.dest, merged), op.index, op.source, **attributes).op
        d_dest, _, d_source = _scatter_at(b, single, b.reshape(g, merged), needs)
        return [b.reshape(d_dest, shape), None, d_source]
    dest, index, source, kind = op.dest, op.index, op.source, op.kind
    dest_dtype, source_dtype = dest.type.dtype, source.type.dtype
    if kind == TI.STORE:
        return _scatter_store(b, op, g)

    axis = op.scatter_axis

    def at_updates(x):  # x (dest's shape) read at each update's position, in source's dtype
        return b.cast(b.op(TI.GatherOp, x, index, axis=axis), source_dtype)

    def scatter(start, values, how):
        return b.op(TI.ScatterAtOp, start, index, values, kind=how, axis=axis)

    if kind in ("add", "sub"):
        d_source = at_updates(g)
        return [b.cast(g, dest_dtype), None, d_source if kind == "add" else b.neg(d_source)]
    if kind == "mul":
        zero = b.cmp(source, b.zeros(source.type), "eq")
        zeros = scatter(b.zeros(dest.type), b.cast(zero, dest_dtype), "add")  # zero factors per position
        nonzero = scatter(b.full(1, dest.type), b.select(zero, b.full(1, source.type), source), "mul")
        count, product, none = at_updates(zeros), at_updates(nonzero), b.zeros(source.type)
        others = b.select(
            zero,
            b.select(b.cmp(count, b.full(1, source.type), "eq"), product, none),
            b.select(b.cmp(count, none, "eq"), b.div(product, source), none),
        )
        d_dest = b.mul(g, b.select(b.cmp(zeros, b.zeros(dest.type), "eq"), nonzero, b.zeros(dest.type)))
        return [d_dest, None, b.mul(at_updates(b.mul(g, dest)), others)]
    dest_hit = b.cast(b.cmp(dest, op.result, "eq"), dest_dtype)
    source_hit = b.cast(b.cmp(source, at_updates(op.result), "eq"), source_dtype)
    count = b.add(dest_hit, scatter(b.zeros(dest.type), b.cast(source_hit, dest_dtype), "add"))
    share = b.div(g, b.select(b.cmp(count, b.zeros(dest.type), "eq"), b.full(1, dest.type), count))
    return [b.mul(share, dest_hit), None, b.mul(at_updates(share), source_hit)]


def _scatter_store(b, op, g):
    """Assignment's cotangents: dest's is g with the assigned positions zeroed (a store of
    zeros through the index); source's is g gathered at its position, for the update that
    stays there alone (of repeated indices the last writer; the others are overwritten, so
    their cotangent is 0). Which update is the last writer: scatter the update numbers
    0, 1, ... into -1s with the same store, and gather them back. O(len(index)) each."""
    dest, index, source, axis = op.dest, op.index, op.source, op.scatter_axis
    positions, trailing = index.type.shape, dest.type.rank - axis - 1
    zeros = b.zeros(T.tensor_type(source.type.shape, dest.type.dtype))
    d_dest = b.op(TI.ScatterAtOp, g, index, zeros, kind=TI.STORE, axis=axis)
    numbers = b.op(T.ConstantOp, value=np.arange(int(np.prod(positions, dtype=np.int64))).reshape(positions))
    unowned = b.full(-1, index.type.with_shape((dest.type.shape[axis],)))
    owner = b.op(TI.ScatterAtOp, unowned, index, numbers, kind=TI.STORE)
    last = b.cmp(b.op(TI.GatherOp, owner, index), numbers, "eq")
    last = b.broadcast_to(b.reshape(last, (1,) * axis + positions + (1,) * trailing), source.type.shape)
    picked = b.cast(b.op(TI.GatherOp, g, index, axis=axis), source.type.dtype)
    return [d_dest, None, b.select(last, picked, b.zeros(source.type))]


def _reversed(b, x, axis):
    shape = x.type.shape
    start = [shape[axis] - 1 if k == axis else 0 for k in range(len(shape))]
    stop = [-1 if k == axis else d for k, d in enumerate(shape)]
    return b.slice(x, start, stop, [-1 if k == axis else 1 for k in range(len(shape))])


@vjp(T.ScanOp)
def _scan(b, op, g, needs):
    """cumsum: each x[j] reaches every out[k], k >= j, with slope 1, so its cotangent is the
    reversed cumsum of g. cumprod, and max/min, have no closed form that survives zeros
    (out[k] / x[j] is 0 / 0) and ties: their gradient is that of the Hillis-Steele log-step
    network computing the same scan from elementwise ops (_log_step_scan), differentiated
    op by op, so a zero's cotangent is the product of the others, exactly."""
    if op.kind == "add":
        rounding = op.rounding
        scan = b.op(T.ScanOp, _reversed(b, g, op.axis), axis=op.axis, kind="add", rounding=rounding)
        return [_reversed(b, scan, op.axis)]
    forward, result = _log_step_scan(b, op.operand, op.axis, T.SCAN_KINDS[op.kind][0])
    cotangents = {result: g}
    active = {op.operand}
    for step in forward:
        if any(v in active for v in step.operands):
            active.update(step.results)
    backpropagate(forward, active, cotangents, b.block)
    return [cotangents.get(op.operand) or b.zeros(op.operand.type)]


def _log_step_scan(b, x, axis, combine):
    """The ops (appended to `b`'s block) of the inclusive scan of `x` along `axis` by
    Hillis-Steele's log-step form: step d combines every element with the one d before it,
    for d = 1, 2, 4, ... < n; returns (the ops, the scan's value)."""
    shape, start = x.type.shape, len(b.block.ops)
    n, d = shape[axis], 1

    def part(value, lo, hi):
        return b.slice(
            value,
            [lo if k == axis else 0 for k in range(len(shape))],
            [hi if k == axis else e for k, e in enumerate(shape)],
            [1] * len(shape),
        )

    while d < n:
        combined = b.op(combine, part(x, 0, n - d), part(x, d, n))
        x = b.op(T.ConcatOp, part(x, 0, d), combined, axis=axis)
        d *= 2
    return list(b.block.ops[start:]), x


@vjp(T.MatmulOp)
def _matmul(b, op, g, needs):
    return _when(needs, lambda: b.matmul(g, b.swap_last_two(op.rhs)), lambda: b.matmul(b.swap_last_two(op.lhs), g))


@vjp(T.ReshapeOp)
def _reshape(b, op, g, needs):
    return [b.reshape(g, op.operand.type.shape)]


@vjp(T.TransposeOp)
def _transpose(b, op, g, needs):
    return [b.transpose(g, np.argsort(op.permutation).tolist())]


@vjp(T.BroadcastToOp)
def _broadcast_to(b, op, g, needs):
    source, target = op.operand.type.shape, op.result.type.shape
    lead = len(target) - len(source)
    axes = list(range(lead)) + [lead + k for k, d in enumerate(source) if d == 1 and target[lead + k] != 1]
    return [b.reshape(b.sum(g, axes, keepdims=False), source)]


@vjp(T.SliceOp)
def _slice(b, op, g, needs):
    return [b.insert_slice(g, b.zeros(op.operand.type), op.start, op.stop, op.step)]


@vjp(T.InsertSliceOp)
def _insert_slice(b, op, g, needs):
    where = (op.start, op.stop, op.step)
    return _when(needs, lambda: b.slice(g, *where), lambda: b.insert_slice(b.zeros(op.source.type), g, *where))


@vjp(T.ConcatOp)
def _concat(b, op, g, needs):
    grads, offset, axis = [], 0, op.axis
    for value, need in zip(op.operands, needs):
        shape = value.type.shape
        if need:
            start = [offset if k == axis else 0 for k in range(len(shape))]
            stop = [offset + shape[axis] if k == axis else d for k, d in enumerate(shape)]
            grads.append(b.slice(g, start, stop, [1] * len(shape)))
        else:
            grads.append(None)
        offset += shape[axis]
    return grads


@vjp(T.Conv2DOp)
def _conv2d(b, op, g, needs):
    x, w = op.input, op.weight
    (n, c, h, wd), (f, cg, kh, kw) = x.type.shape, w.type.shape
    (sh, sw), (ph, pw) = op.stride, op.padding
    groups = op.groups
    oh, ow = g.type.shape[2:]
    # The output gradient spread back to stride 1: row oh lands on row oh * sh.
    dilated = g
    if (sh, sw) != (1, 1):
        dilated_type = g.type.with_shape((n, f, (oh - 1) * sh + 1, (ow - 1) * sw + 1))
        dilated = b.insert_slice(g, b.zeros(dilated_type), (0, 0, 0, 0), dilated_type.shape, (1, 1, sh, sw))
    dh, dw = dilated.type.shape[2:]

    def conv(x, w, padding, groups):
        if groups == 1:
            return b.conv2d(x, w, (1, 1), padding)
        return b.op(T.Conv2DOp, x, w, stride=(1, 1), padding=tuple(padding), groups=groups)

    def d_input():
        # Each group's filters transposed (F/G, C/G) -> (C/G, F/G) and flipped: (C, F/G, KH, KW).
        swapped = b.transpose(w, (1, 0, 2, 3))
        if groups != 1:
            blocks = b.transpose(b.reshape(w, (groups, f // groups, cg, kh, kw)), (0, 2, 1, 3, 4))
            swapped = b.reshape(blocks, (c, f // groups, kh, kw))
        flipped = b.slice(swapped, (0, 0, kh - 1, kw - 1), (c, f // groups, -1, -1), (1, 1, -1, -1))
        full = conv(dilated, flipped, (kh - 1, kw - 1), groups)  # gradient of the padded input
        rows, cols = min(h, dh + kh - 1 - ph), min(wd, dw + kw - 1 - pw)
        if rows <= 0 or cols <= 0:
            return b.zeros(x.type)
        part = b.slice(full, (0, 0, ph, pw), (n, c, ph + rows, pw + cols), (1, 1, 1, 1))
        if (rows, cols) == (h, wd):
            return part
        return b.insert_slice(part, b.zeros(x.type), (0, 0, 0, 0), (n, c, rows, cols), (1, 1, 1, 1))

    def d_weight():
        # The correlation of the input with the output gradient, images as its channels. With
        # groups, the input's channels go (C/G, G*N): group k's images are the channels that
        # group k's filters read, so the correlation stays grouped instead of computing every
        # (channel, filter) pair.
        images = b.transpose(x, (1, 0, 2, 3))
        if groups != 1:
            split = b.transpose(b.reshape(x, (n, groups, cg, h, wd)), (2, 1, 0, 3, 4))
            images = b.reshape(split, (cg, groups * n, h, wd))
        correlation = conv(images, b.transpose(dilated, (1, 0, 2, 3)), (ph, pw), groups)
        return b.transpose(b.slice(correlation, (0, 0, 0, 0), (cg, f, kh, kw), (1, 1, 1, 1)), (1, 0, 2, 3))

    return _when(needs, d_input, d_weight)


# -- float functions: the derivative of each, from its operand x and its result y --------------
def _derivatives(b, x, y):
    def c(value):
        return b.full(value, x.type)

    def sqrt(v):
        return b.op(T.SqrtOp, v)

    def square():
        return b.mul(x, x)

    return {
        T.TanOp: lambda: b.add(c(1), b.mul(y, y)),
        T.SinhOp: lambda: b.op(T.CoshOp, x),
        T.CoshOp: lambda: b.op(T.SinhOp, x),
        T.ArcsinOp: lambda: b.div(c(1), sqrt(b.sub(c(1), square()))),
        T.ArccosOp: lambda: b.div(c(-1), sqrt(b.sub(c(1), square()))),
        T.ArctanOp: lambda: b.div(c(1), b.add(c(1), square())),
        T.ArcsinhOp: lambda: b.div(c(1), sqrt(b.add(square(), c(1)))),
        # sqrt(x - 1) * sqrt(x + 1): no cancellation in x * x - 1 near 1
        T.ArccoshOp: lambda: b.div(c(1), b.mul(sqrt(b.sub(x, c(1))), sqrt(b.add(x, c(1))))),
        T.ArctanhOp: lambda: b.div(c(1), b.sub(c(1), square())),
        T.Log1pOp: lambda: b.div(c(1), b.add(c(1), x)),
        T.Expm1Op: lambda: b.add(y, c(1)),
        T.Exp2Op: lambda: b.mul(y, c(np.log(2))),
        T.Log2Op: lambda: b.div(c(1), b.mul(x, c(np.log(2)))),
        T.Log10Op: lambda: b.div(c(1), b.mul(x, c(np.log(10)))),
        T.CbrtOp: lambda: b.div(c(1), b.mul(c(3), b.mul(y, y))),
    }


def _chain(b, op, g, needs):
    return [b.mul(g, _derivatives(b, op.operand, op.result)[type(op)]())]


vjp(T.TanOp, T.SinhOp, T.CoshOp, T.ArcsinOp, T.ArccosOp, T.ArctanOp, T.ArcsinhOp, T.ArccoshOp)(_chain)
vjp(T.ArctanhOp, T.Log1pOp, T.Expm1Op, T.Exp2Op, T.Log2Op, T.Log10Op, T.CbrtOp)(_chain)


@vjp(T.FloorOp, T.CeilOp, T.TruncOp, T.RintOp, T.FloorDivideOp)
def _piecewise_constant(b, op, g, needs):
    """Zero almost everywhere (and undefined at the steps): no gradient, as in JAX."""
    return [None] * len(op.operands)


@vjp(T.Arctan2Op)
def _arctan2(b, op, g, needs):
    y, x = op.lhs, op.rhs
    scaled = b.div(g, b.add(b.mul(x, x), b.mul(y, y)))
    return _when(needs, lambda: b.mul(scaled, x), lambda: b.neg(b.mul(scaled, y)))


@vjp(T.CopysignOp)
def _copysign(b, op, g, needs):
    """|a| with the sign of s: +-1 times g for a (minus where the signs differ); s only
    chooses a sign, so it gets none."""
    one = b.full(1, op.result.type)
    flips = b.mul(b.op(T.CopysignOp, one, op.lhs), b.op(T.CopysignOp, one, op.rhs))
    return [b.mul(g, flips) if needs[0] else None, None]


@vjp(T.FModOp, T.RemainderOp)
def _remainder(b, op, g, needs):
    """a - q * d with q = trunc(a / d) (fmod) or a // d (remainder), constant between steps."""

    def d_divisor():
        if isinstance(op, T.FModOp):
            quotient = b.op(T.TruncOp, b.div(op.lhs, op.rhs))
        else:
            quotient = b.op(T.FloorDivideOp, op.lhs, op.rhs)
        return b.neg(b.mul(g, quotient))

    return _when(needs, lambda: g, d_divisor)
