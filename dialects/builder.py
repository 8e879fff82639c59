"""Append verified ops to a block.

The builder verifies each op as it is created, so a bad op fails where it was
built (for traced ops: at the user's line) rather than later in a pass.
"""

from __future__ import annotations

from .ir import Block, Operation


class Builder:
    def __init__(self, block: Block):
        self.block = block

    def create(self, op_class, operands=(), attributes=None, result_types=None, loc=None) -> Operation:
        op = op_class(list(operands), attributes, result_types, loc=loc)
        op.verify()
        return self.block.append(op)
