"""Module verifier: every op's own checks, plus SSA dominance.

A value may be used only after it is defined, in its own block or in a block
that encloses the use; ops isolated from above (func.func) see nothing from
outside. Run after every pass in tests and in debug mode.
"""

from __future__ import annotations

from .diagnostics import VerificationError
from .ir import Operation


def verify(op: Operation) -> None:
    """Raise VerificationError at the first broken invariant in `op` and below."""
    _verify(op, frozenset())


def _verify(op: Operation, visible) -> None:
    for index, value in enumerate(op.operands):
        if value not in visible:
            raise VerificationError(
                f"{op.name}: operand #{index} is used before it is defined or comes from outside its scope", op.loc
            )
    op.verify()
    outer = frozenset() if op.isolated_from_above else visible
    for region in op.regions:
        for block in region.blocks:
            if block.parent is not region:
                raise VerificationError(f"{op.name}: a block has the wrong parent", op.loc)
            inner = set(outer) | set(block.args)  # children only read it; their regions copy
            for child in block.ops:
                if child.parent is not block:
                    raise VerificationError(f"{child.name}: op has the wrong parent block", child.loc)
                _verify(child, inner)
                inner.update(child.results)
