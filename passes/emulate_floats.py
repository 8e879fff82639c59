"""Emulate float16 arithmetic in float32, as numpy computes it.

numpy stores float16 but computes most of its float16 ufuncs in float32: each
input is widened, the float32 operation runs, and the result is rounded back
to float16 (numpy/_core/src/umath/loops*.c.src, ``npy_half_to_float`` and
``npy_float_to_half`` around the float32 loop). Sums, means and matrix
products of float16 accumulate in float32 too and round once at the end.
This pass makes that explicit in the tensor IR, as upstream MLIR's
``arith-emulate-unsupported-floats`` does for arith: every op that computes
with float16 operands or a float16 result is rewritten to convert its float16
operands to f32, compute in f32, and convert a float16 result back. Ops that
only move elements (views, slices, concatenation, select, constants and the
conversions themselves) keep float16, so float16 data is still stored and
moved at half the bytes. After it no kernel computes in f16, and no code
generator needs half-precision arithmetic: only conversions and loads/stores.

Each op rounds its own result, as numpy rounds each ufunc's (a ``kiln.scan`` rounds its
running value at every step, ``rounding = f16``, as numpy's float16 accumulate does):
fusion later puts the conversions in one kernel, and canonicalization never folds a
rounding ``f32 -> f16 -> f32`` pair away (only widenings are exact).

Before::

    %0 = kiln.add %x, %y : tensor<4xf16>
    %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<4xf16>) -> tensor<f16>

After::

    %0 = kiln.convert %x : tensor<4xf16> to tensor<4xf32>
    %1 = kiln.convert %y : tensor<4xf16> to tensor<4xf32>
    %2 = kiln.add %0, %1 : tensor<4xf32>
    %3 = kiln.convert %2 : tensor<4xf32> to tensor<4xf16>
    %4 = kiln.convert %3 : tensor<4xf16> to tensor<4xf32>
    %5 = kiln.reduce_sum %4 {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    %6 = kiln.convert %5 : tensor<f32> to tensor<f16>
"""

from __future__ import annotations

from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import MOVES_ELEMENTS
from kiln.dialects.types import TensorType, f16, f32

from .pass_spec import declare_pass, function_pass


# Left in float16: ops that move elements without computing with them (MOVES_ELEMENTS:
# views, conversions, constants, select, concatenation, gathers), and the in-order scatter,
# which rounds each of its updates to float16 itself (dialects/tensor_indexed.py):
# computing it in f32 and rounding once would round differently from numpy's ufunc.at.
def _keeps_float16(op) -> bool:
    return op.has_trait(MOVES_ELEMENTS) or isinstance(op, TI.ScatterAtOp)


def _is_f16(value) -> bool:
    return isinstance(value.type, TensorType) and value.type.element == f16


def _convert(value, element, loc, point: InsertPoint):
    op = T.ConvertOp([value], None, [value.type.with_element(element)], loc=loc)
    Rewriter.insert(op, point)
    return op.result


def emulate_f16(block) -> int:
    """Rewrite the ops of `block` that compute in float16 to compute in f32; returns how
    many were rewritten."""
    rewritten = 0
    for op in list(block.ops):
        computes = isinstance(op, T.TensorOp) and not _keeps_float16(op)  # not func.return
        if not computes or not any(_is_f16(v) for v in op.operands + op.results):
            continue
        for index, value in enumerate(op.operands):
            if _is_f16(value):
                op.set_operand(index, _convert(value, f32, op.loc, InsertPoint.before(op)))
        narrowed = []
        for result in op.results:
            if _is_f16(result):
                result.type = result.type.with_element(f32)
                narrowed.append(result)
        if isinstance(op, T.ScanOp) and narrowed:
            # numpy's float16 accumulate rounds its running value at every step, not once.
            op.attributes["rounding"] = f16
        after = InsertPoint.after(op)  # the conversions back, in order, right after op
        for result in narrowed:
            uses = list(result.uses)
            back = _convert(result, f16, op.loc, after)
            for user, index in uses:
                user.set_operand(index, back)
        rewritten += 1
    return rewritten


@declare_pass(
    "emulate-unsupported-floats", "compute float16 in float32, rounding each op's result to float16 as numpy does"
)
@function_pass
def emulate_unsupported_floats(function):
    emulate_f16(function.body)
