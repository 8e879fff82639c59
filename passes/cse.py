"""Common-subexpression elimination: one op per distinct computation.

Two ops are the same computation when they have the same name, operands,
semantic attributes and result types; locations and the notes among the
attributes (``Operation.semantic_attributes``) do not count.
Constants compare by value. Before::

    %0 = kiln.constant dense<1.0> : tensor<f32>
    %1 = kiln.constant dense<1.0> : tensor<f32>
    %2 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
    %3 = kiln.broadcast_to %1 : (tensor<f32>) -> tensor<4xf32>
    %4 = kiln.add %2, %3 : tensor<4xf32>

After::

    %0 = kiln.constant dense<1.0> : tensor<f32>
    %2 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
    %4 = kiln.add %2, %2 : tensor<4xf32>
"""

from __future__ import annotations

import numpy as np

from .pass_spec import declare_pass, function_pass


def _hashable(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def op_key(op):
    """What makes two ops interchangeable (None for ops with regions, kept as they are)."""
    if op.regions or not op.results:
        return None
    attributes = tuple(sorted((k, _hashable(v)) for k, v in op.semantic_attributes().items()))
    return (op.name, tuple(id(v) for v in op.operands), attributes, tuple(r.type for r in op.results))


def eliminate_common_subexpressions(block) -> int:
    seen, replaced = {}, 0
    for op in list(block.ops):
        key = op_key(op)
        if key is None:
            continue
        if key in seen:
            for old, new in zip(op.results, seen[key].results):
                old.replace_all_uses_with(new)
            op.erase()
            replaced += 1
        else:
            seen[key] = op
    return replaced


@declare_pass("cse", "merge ops that compute the same value (equal constants by value)")
@function_pass
def cse(function):
    eliminate_common_subexpressions(function.body)
