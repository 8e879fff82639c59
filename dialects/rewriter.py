"""Editing IR in place: insertion points and the rewriter.

Passes change IR only through these calls, never by editing ``block.ops`` or
``op.parent`` themselves (``tests/test_layering.py`` checks it), so an op's block,
its place there and every value's use list stay consistent. The names and
semantics follow xDSL's ``xdsl/rewriter.py`` and MLIR's ``RewriterBase``::

    point = InsertPoint.before(op)            # or .after(op), .at_start(block), .at_end(block)
    Rewriter.insert([a, b], point)            # a, then b, right before op
    Rewriter.replace(op, [a, b])              # b's results take the place of op's; op is erased
    Rewriter.replace(op, value)               # op's one result becomes an existing value
    Rewriter.erase(op)                        # VerificationError if a result is still used
    Rewriter.move_before(op, other)
    Rewriter.inline_block(block, point)       # move all of block's ops to point

An insertion point names the op it inserts before (None: at the block's end), so
several inserts at one point keep their order and a point stays valid while ops
are inserted elsewhere in the block.
"""

from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import VerificationError
from .ir import Block, Operation, Value


@dataclass(frozen=True)
class InsertPoint:
    """Where new ops go in `block`: right before `anchor`, or at the end when it is None."""

    block: Block
    anchor: Operation | None = None

    @staticmethod
    def before(op: Operation) -> "InsertPoint":
        return InsertPoint(_block_of(op), op)

    @staticmethod
    def after(op: Operation) -> "InsertPoint":
        block = _block_of(op)
        index = block.ops.index(op)
        return InsertPoint(block, block.ops[index + 1] if index + 1 < len(block.ops) else None)

    @staticmethod
    def at_start(block: Block) -> "InsertPoint":
        return InsertPoint(block, block.ops[0] if block.ops else None)

    @staticmethod
    def at_end(block: Block) -> "InsertPoint":
        return InsertPoint(block, None)

    @staticmethod
    def at_index(block: Block, index: int) -> "InsertPoint":
        """Before the op now at `index` of `block` (at the end when `index` is its length)."""
        if not 0 <= index <= len(block.ops):
            raise VerificationError(f"no place {index} in a block of {len(block.ops)} ops")
        return InsertPoint(block, block.ops[index] if index < len(block.ops) else None)


def _block_of(op: Operation) -> Block:
    if op.parent is None:
        raise VerificationError(f"{op.name} is in no block: there is no place next to it", op.loc)
    return op.parent


class OpList:
    """Where a builder puts ops whose place is not known yet: it keeps them, in order, for
    Rewriter.insert or Rewriter.replace to place (as an MLIR builder with no insertion
    point creates unlinked ops). The IR is untouched until then, so a transform can still
    give up halfway and leave it as it was."""

    def __init__(self):
        self.ops: list = []

    def append(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op


def _as_list(ops_or_values) -> list:
    if isinstance(ops_or_values, (Operation, Value)):
        return [ops_or_values]
    return list(ops_or_values)


class Rewriter:
    """The edits of IR; stateless, so a pass calls them on the class."""

    @staticmethod
    def insert(ops, point: InsertPoint) -> list:
        """Put `ops` (an op or a list, in order) at `point`; returns them as a list.
        Raises VerificationError for an op already in a block (move it instead)."""
        ops = _as_list(ops)
        block = point.block
        index = len(block.ops) if point.anchor is None else block.ops.index(point.anchor)
        for op in ops:
            if op.parent is not None:
                raise VerificationError(f"{op.name} is already in a block; move it rather than insert it", op.loc)
            op.parent = block
        block.ops[index:index] = ops
        return ops

    @staticmethod
    def detach(op: Operation) -> Operation:
        """Take `op` out of its block, keeping its uses (to insert it elsewhere)."""
        _block_of(op).ops.remove(op)
        op.parent = None
        return op

    @staticmethod
    def move_before(op: Operation, other: Operation) -> None:
        """Move `op` (in a block) to right before `other`."""
        if op is other:
            return
        Rewriter.detach(op)
        Rewriter.insert(op, InsertPoint.before(other))

    @staticmethod
    def inline_block(source: Block, point: InsertPoint) -> list:
        """Move every op of `source`, in order, to `point`; `source` is left empty.
        Its arguments are not touched: replace their uses first."""
        ops = list(source.ops)
        for op in ops:
            Rewriter.detach(op)
        return Rewriter.insert(ops, point)

    @staticmethod
    def reorder(block: Block, order) -> None:
        """Put `block`'s ops in `order`, a permutation of them (a scheduler's choice).
        Raises VerificationError when `order` adds, drops or repeats an op."""
        order = list(order)
        if len(order) != len(block.ops) or {id(op) for op in order} != {id(op) for op in block.ops}:
            raise VerificationError(f"a new order of a block's {len(block.ops)} ops must name each of them once")
        block.ops[:] = order

    @staticmethod
    def erase(op: Operation) -> None:
        """Remove `op` and the ops nested in it; each drops its operands' uses.
        Raises VerificationError if a result of `op` is still used."""
        for result in op.results:
            if result.uses:
                raise VerificationError(f"cannot erase {op.name}: its result is still used", op.loc)
        if op.parent is not None:
            Rewriter.detach(op)
        for nested in op.walk():
            nested.set_operands([])

    @staticmethod
    def replace(op: Operation, new, results=None) -> list:
        """Replace `op` by `new`: new ops (inserted before `op`; by default the last one's
        results take the place of `op`'s) or existing values (one per result of `op`).
        Every use of `op`'s results moves to the replacements, then `op` is erased.
        Returns the new ops inserted. Raises VerificationError when the counts differ."""
        new = _as_list(new)
        ops = [item for item in new if isinstance(item, Operation)]
        if ops and len(ops) != len(new):
            raise VerificationError(f"{op.name} is replaced by ops or by values, not both", op.loc)
        if results is None:
            results = list(ops[-1].results) if ops else new
        results = list(results)
        if len(results) != len(op.results):
            raise VerificationError(f"{op.name} has {len(op.results)} results but {len(results)} replacements", op.loc)
        if ops:
            Rewriter.insert(ops, InsertPoint.before(op))
        for old, value in zip(op.results, results):
            old.replace_all_uses_with(value)
        Rewriter.erase(op)
        return ops
