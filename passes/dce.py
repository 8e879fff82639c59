"""Dead-code elimination: remove ops whose results nobody uses.

Ops here have no side effects, so an op is dead when none of its results has
a use; removing it can make its operands' producers dead in turn, which a
single backward walk catches. Before::

    %0 = kiln.exp %x : tensor<4xf32>
    %1 = kiln.neg %x : tensor<4xf32>
    func.return %1 : tensor<4xf32>

After::

    %1 = kiln.neg %x : tensor<4xf32>
    func.return %1 : tensor<4xf32>
"""

from __future__ import annotations

from kiln.dialects import func as F

from .pass_spec import declare_pass, function_pass


def eliminate_dead_code(block) -> int:
    """Erase dead ops of `block`, last first; returns how many were erased."""
    erased = 0
    for op in reversed(list(block.ops)):
        if isinstance(op, F.ReturnOp) or op.name.endswith(".yield"):
            continue
        if all(not r.uses for r in op.results):
            op.erase()
            erased += 1
    return erased


@declare_pass("dce", "erase ops whose results nobody uses")
@function_pass
def dce(function):
    eliminate_dead_code(function.body)
