"""Rematerialization: recompute cheap values instead of keeping them alive.

A training step computes activations in the forward pass and reads them again
in the backward pass, so they stay in memory across everything in between. An
elementwise value whose next use comes more than GAP ops after the previous
one is recomputed right before that use instead, when its operands are alive
there anyway (arguments, constants, or values still to be read later): memory
for compute. Fusion then usually folds the copy into the kernel that reads it.
Before::

    %0 = kiln.tanh %x : tensor<64x64xf32>        // forward
    %1 = kiln.matmul %0, %w ...                   // ... many ops ...
    %9 = kiln.mul %g, %0 : tensor<64x64xf32>      // backward reads tanh(x) again

After::

    %0 = kiln.tanh %x : tensor<64x64xf32>
    %1 = kiln.matmul %0, %w ...
    %8 = kiln.tanh %x : tensor<64x64xf32>         // recomputed where it is needed
    %9 = kiln.mul %g, %8 : tensor<64x64xf32>
"""

from __future__ import annotations

from kiln.dialects import tensor as T
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import ELEMENTWISE

from .dce import eliminate_dead_code
from .pass_spec import Option, declare_pass, function_pass, positive

GAP = 4


def rematerialize_block(block, gap: int = GAP) -> int:
    """Recompute long-lived elementwise values near their late uses (a use more than `gap` ops
    after the previous one); returns how many copies were made."""
    copies = 0
    for op in list(block.ops):
        if not op.has_trait(ELEMENTWISE) or op.parent is None:
            continue
        position = {o: k for k, o in enumerate(block.ops)}
        uses = sorted(
            ((position[user], user, index) for user, index in op.results[0].uses if user.parent is block),
            key=lambda u: u[0],
        )
        previous = position[op]
        for where, user, index in uses:
            if where - previous > gap and _operands_alive_at(op, where, position, block):
                clone = op.clone({})
                Rewriter.insert(clone, InsertPoint.before(user))
                user.set_operand(index, clone.results[0])
                for later_user, later_index in list(op.results[0].uses):  # later uses share the copy
                    if later_user.parent is block and block.ops.index(later_user) > where:
                        later_user.set_operand(later_index, clone.results[0])
                copies += 1
                break
            previous = where
    eliminate_dead_code(block)
    return copies


def _operands_alive_at(op, where, position, block) -> bool:
    for value in op.operands:
        producer = getattr(value, "op", None)
        if producer is None or isinstance(producer, T.ConstantOp):
            continue  # arguments and constants are always there
        last_use = max(position.get(user, -1) for user, _ in value.uses)
        if last_use < where:
            return False
    return True


@declare_pass(
    "rematerialize",
    "recompute cheap elementwise values near late uses instead of keeping them alive",
    Option("gap", int, GAP, "a value is recomputed for a use more than this many ops after its previous one", positive),
)
@function_pass
def rematerialize(function, gap: int = GAP):
    rematerialize_block(function.body, gap)
