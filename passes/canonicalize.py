"""Constant folding and algebraic simplification of tensor IR.

Each rewrite is a row of the rule table ``PATTERNS``, which
``kiln.dialects.patterns.apply_patterns`` runs to a fixed point:

- An op whose operands are all constants is computed now, with the op's own
  numpy semantics, when that does not make a larger constant; elementwise ops
  of splats (a scalar constant broadcast) fold to a splat.
- ``x + (-0.0)``, ``x - 0.0``, ``x * 1``, ``x / 1``, ``x ** 1`` become ``x``
  (``x + 0`` and ``x - 0`` on integers); ``x ** 2`` becomes ``x * x``. Every
  rewrite is exact for signed zeros, NaN, infinities and integer wrap-around:
  ``x + 0.0`` stays, because ``-0.0 + 0.0`` is ``+0.0``, and so does ``x * 0``
  (``-x``, NaN or inf times zero is not ``0.0``). Constants are compared bit for
  bit, so ``[0.0, -0.0]`` is not a splat and a NaN is a splat only of itself.
- Folding computes exactly what the generated code computes: each op's
  ``evaluate`` (for float-to-int casts ``kiln.dialects.arith.float_to_int``, as
  every target does). So only ops whose result IEEE 754 (or integer wrap-around)
  fixes bit for bit are folded. Float results of the math library (exp, log,
  tanh, sin, cos, pow: each target has its own approximation, within a few ulp
  of numpy's) and of sums, matmuls and convolutions (their order of additions
  is the schedule's) are left to the run time. An op whose evaluation raises (an
  integer to a negative power, a kiln.check_index of an index out of range) is left
  for the run time to report; one in range folds to its index.
- Transpose of transpose, reshape of reshape and broadcast of broadcast become
  one op; reshapes, transposes, broadcasts, casts and slices that change nothing
  disappear.
- A slice of the first k (at most 16) positions of a sort becomes a sort with
  ``count = k``: a top-k, selected in O(n k) instead of sorted in O(n log n);
  a slice of a one-operand elementwise op becomes the op of the slice.

Before::

    %0 = kiln.constant dense<1.0> : tensor<f32>
    %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
    %2 = kiln.mul %x, %1 : tensor<4xf32>
    %3 = kiln.transpose %y {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %4 = kiln.transpose %3 {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
    func.return %2, %4 : tensor<4xf32>, tensor<2x3xf32>

After (and DCE)::

    func.return %x, %y : tensor<4xf32>, tensor<2x3xf32>
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects import tensor_sort as TS
from kiln.dialects.ir import Operation
from kiln.dialects.patterns import Pattern, apply_patterns
from kiln.dialects.traits import ELEMENTWISE, TARGET_DEPENDENT_FLOAT

from .dce import eliminate_dead_code
from .pass_spec import Option, declare_pass, function_pass, positive
from .tensor_builder import TensorBuilder

MAX_ROUNDS = 20  # rounds before canonicalization gives up with an error (the max-iterations option)


def constant_value(value):
    op = getattr(value, "op", None)
    return op.value if isinstance(op, T.ConstantOp) else None


def splat_value(value):
    """The scalar every element of `value` equals, if it is a constant or a broadcast constant."""
    op = getattr(value, "op", None)
    if isinstance(op, T.BroadcastToOp):
        return splat_value(op.operand)
    array = constant_value(value)
    if array is None or array.size == 0:
        return None
    flat = array.reshape(-1)
    bits = flat.view(f"u{flat.itemsize}") if flat.dtype.kind == "f" else flat  # -0.0 is not 0.0
    return flat[0] if (bits == bits[0]).all() else None


def _is(value, scalar) -> bool:
    """Whether every element of `value` is `scalar` of its dtype, bit for bit."""
    splat = splat_value(value)
    return splat is not None and np.array(splat).tobytes() == np.array(scalar, splat.dtype).tobytes()


def _additive_identity(value):
    """The z with x + z == x for every x: -0.0 for floats (x + 0.0 turns -0.0 into 0.0)."""
    return -0.0 if value.type.element.is_float else 0


# -- the rules: each is rule(op, b) -> a value replacing op's result, or None ----------------
def add_identity(op, b):
    if _is(op.rhs, _additive_identity(op.result)):
        return op.lhs
    return op.rhs if _is(op.lhs, _additive_identity(op.result)) else None


def sub_zero(op, b):
    return op.lhs if _is(op.rhs, 0) else None


def times_or_over_one(op, b):
    return op.lhs if _is(op.rhs, 1) else None


def one_times(op, b):
    return op.rhs if _is(op.lhs, 1) else None


def small_float_power(op, b):
    """x ** 1 is x and x ** 2 is x * x, for floats (integer powers keep numpy's overflow checks)."""
    if not op.result.type.element.is_float:
        return None
    if _is(op.rhs, 1):
        return op.lhs
    return b.mul(op.lhs, op.lhs) if _is(op.rhs, 2) else None


def same_type_is_a_no_op(op, b):
    return op.operand if op.operand.type == op.result.type else None


def transpose_rules(op, b):
    """The identity permutation does nothing; two transposes are one."""
    if op.permutation == tuple(range(len(op.permutation))):
        return op.operand
    inner = getattr(op.operand, "op", None)
    if isinstance(inner, T.TransposeOp):
        return b.transpose(inner.operand, [inner.permutation[p] for p in op.permutation])
    return None


def twice_is_once(op, b):
    """A reshape of a reshape (a broadcast of a broadcast) is one reshape (broadcast)."""
    inner = getattr(op.operand, "op", None)
    if type(inner) is type(op):
        return (b.reshape if isinstance(op, T.ReshapeOp) else b.broadcast_to)(inner.operand, op.result.type.shape)
    return None


def whole_slice(op, b):
    return op.operand if op.operand.type == op.result.type and set(op.step) == {1} else None


SELECTION_MAX = 16  # a sorted prefix this short is selected (O(n k) a row), not sorted (O(n log n))


def sorted_prefix(op, b):
    """The first k <= SELECTION_MAX positions of a sort that nothing else reads become a sort
    with ``count = k``, which runs as a selection (``np.argsort(-s, axis=1)[:, :5]``,
    kiln.top_k): the same elements in the same order, stable ties included. The slice's lead
    axes stay a slice of the result."""
    sort = getattr(op.operand, "op", None)
    if not isinstance(sort, TS.SortOp) or len(op.operand.uses) != 1:
        return None
    n, k = sort.count, len(range(op.start[-1], op.stop[-1], op.step[-1]))
    if op.start[-1] != 0 or op.step[-1] != 1 or not 0 < k <= SELECTION_MAX or k >= n:
        return None
    selected = b.op(TS.SortOp, sort.operand, order=sort.order, returns=sort.returns_kind, count=k)
    start, stop, step = (tuple(v)[:-1] for v in (op.start, op.stop, op.step))
    return b.slice(selected, start + (0,), stop + (k,), step + (1,))


# Ops that cannot fail, so computing fewer elements changes nothing but the work (a
# kiln.check_index of the dropped elements must still raise; an integer power too).
_SLICED_FIRST = (T.ConvertOp, T.NegOp)


def slice_first(op, b):
    """A slice of a convert or a negation that nothing else reads
    is the op of the slice: it computes only the elements kept, and a slice of a sort then
    meets the sort (float16 sorts run widened: convert(sort(convert(x))))."""
    inner = getattr(op.operand, "op", None)
    if not isinstance(inner, _SLICED_FIRST) or len(op.operand.uses) != 1:
        return None
    if inner.operands[0].type.shape != op.operand.type.shape:
        return None
    sliced = b.slice(inner.operands[0], tuple(op.start), tuple(op.stop), tuple(op.step))
    attributes = {k: v for k, v in inner.attributes.items() if k != "arena_offset"}
    return b.op(type(inner), sliced, result_type=inner.result.type.with_shape(op.result.type.shape), **attributes)


def fold_constants(op, b):
    """An op of splats computed to a splat; an op of constants computed to a constant no
    larger than its largest operand; None for ops numpy does not compute bit for bit."""
    if len(op.results) != 1 or op.regions or not _folds_exactly(op):
        return None
    result = op.result
    if op.has_trait(ELEMENTWISE):
        splats = [splat_value(v) for v in op.operands]
        if all(s is not None for s in splats) and not all(
            constant_value(v) is not None and constant_value(v).shape == result.type.shape for v in op.operands
        ):
            scalar = _evaluate(op, [np.array(s, v.type.dtype) for s, v in zip(splats, op.operands)])
            return None if scalar is None else b.full(scalar.astype(result.type.dtype), result.type)
    if not isinstance(op, T.ConstantOp) and op.operands and all(constant_value(v) is not None for v in op.operands):
        if result.type.size <= max(constant_value(v).size for v in op.operands):
            value = _evaluate(op, [constant_value(v) for v in op.operands])
            return None if value is None else b.op(T.ConstantOp, value=np.array(value, dtype=result.type.dtype))
    return None


# Tried in order; for one op, the first rule that returns a value wins (identities, then
# layout ops that do nothing or come twice, then folding).
PATTERNS = (
    Pattern(T.AddOp, add_identity),
    Pattern(T.SubOp, sub_zero),
    Pattern((T.MulOp, T.DivOp), times_or_over_one),
    Pattern(T.MulOp, one_times),
    Pattern(T.PowOp, small_float_power),
    Pattern((T.ReshapeOp, T.BroadcastToOp, T.ConvertOp, T.BitcastOp), same_type_is_a_no_op),
    Pattern(T.TransposeOp, transpose_rules),
    Pattern((T.ReshapeOp, T.BroadcastToOp), twice_is_once),
    Pattern(T.SliceOp, whole_slice),
    Pattern(T.SliceOp, sorted_prefix),
    Pattern(T.SliceOp, slice_first),
    Pattern(Operation, fold_constants),
)


def _folds_exactly(op) -> bool:
    """Whether numpy's value of `op` is bit for bit what every target computes."""
    return not (op.has_trait(TARGET_DEPENDENT_FLOAT) and op.results[0].type.element.is_float)


def _evaluate(op, inputs):
    """`op` on constant inputs, as an array; None where numpy raises (the run time reports it:
    an integer to a negative power, a kiln.check_index of an index out of range)."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(op.evaluate(*inputs))
    except (ValueError, ArithmeticError, IndexError):
        return None


def canonicalize_function(function, max_iterations: int = MAX_ROUNDS) -> int:
    """Apply PATTERNS to `function`'s body until none applies; returns how many rewrites.
    Raises VerificationError when rules still fire after `max_iterations` rounds."""
    return apply_patterns(
        function,
        PATTERNS,
        max_iterations=max_iterations,
        builder=lambda site, op: TensorBuilder(site, op.loc),
        cleanup=eliminate_dead_code,
    )


@declare_pass(
    "canonicalize",
    "fold constants and simplify algebra, exactly (signed zeros, NaN, wrap-around)",
    Option(
        "max-iterations",
        int,
        MAX_ROUNDS,
        "rounds of rewriting after which a function that still changes is an error",
        positive,
    ),
)
@function_pass
def canonicalize(function, max_iterations: int = MAX_ROUNDS):
    canonicalize_function(function, max_iterations)
