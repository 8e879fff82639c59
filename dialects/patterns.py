"""Rewrite patterns and the driver that applies them until nothing changes.

A pattern is a row of a rule table: the op classes it matches and a rule
``rule(op, b)`` that returns what replaces ``op`` (a value, a list of values, one
per result) or None when it does not apply. ``b`` is a builder whose ops go right
before ``op``; when the rule returns None, the driver erases whatever it built. As
tinygrad's ``PatternMatcher`` and MLIR's greedy pattern driver
(``GreedyPatternRewriteDriver.cpp``) do, the rules state local facts and the driver
finds the fixed point::

    PATTERNS = (
        Pattern(T.MulOp, mul_by_one),          # x * 1 -> x
        Pattern((T.ReshapeOp, T.BroadcastToOp), same_type_is_a_no_op),
    )
    apply_patterns(function, PATTERNS, max_iterations=20)

Each iteration sweeps the ops of the function's body in order; of the patterns
that match an op (by ``isinstance``, in table order), the first whose rule
returns a replacement wins, and the replacement takes effect at once, so later
ops of the sweep see it. Ops created in a sweep are visited in the next one. An
iteration that rewrites nothing ends the run; ``max_iterations`` sweeps that all
rewrite something mean the rules undo each other (a pattern loop), and the driver
raises VerificationError naming the rules still firing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .builder import Builder
from .diagnostics import VerificationError
from .ir import Operation, Value
from .rewriter import InsertPoint, Rewriter


@dataclass(frozen=True)
class Pattern:
    """`rule(op, b)` for ops that are instances of `matches` (a class or a tuple of them)."""

    matches: type | tuple
    rule: Callable

    @property
    def name(self) -> str:
        return getattr(self.rule, "__name__", repr(self.rule))


class RewriteSite:
    """Where a rule's builder puts new ops: right before the matched op. It keeps what
    was built, so the driver can erase it when the rule does not apply after all."""

    def __init__(self, op: Operation):
        self.point = InsertPoint.before(op)
        self.built: list = []

    def append(self, op: Operation) -> Operation:
        Rewriter.insert(op, self.point)
        self.built.append(op)
        return op


def apply_patterns(function, patterns, max_iterations: int = 20, builder=None, cleanup=None) -> int:
    """Rewrite the ops of `function`'s body (a func.func; nested regions are left as they
    are) with `patterns` until none applies; returns how many rewrites were made.

    `builder(site, op)` makes the `b` a rule gets (by default a Builder over the site);
    `cleanup(block)`, if given, runs after every iteration (dead-code elimination, say).
    Raises VerificationError when `max_iterations` sweeps do not settle."""
    block = function.body
    make_builder = builder or (lambda site, op: Builder(site))
    total = 0
    for _ in range(max_iterations):
        fired = []
        for op in list(block.ops):
            if op.parent is not block:  # erased earlier in this sweep
                continue
            pattern = _rewrite(op, patterns, make_builder)
            if pattern is not None:
                fired.append((pattern, op.name))
        if cleanup is not None:
            cleanup(block)
        total += len(fired)
        if not fired:
            return total
    still = ", ".join(sorted({f"{pattern.name} ({name})" for pattern, name in fired}))
    raise VerificationError(
        f"rewrite patterns did not settle after {max_iterations} iterations (a pattern loop?); still firing: {still}"
    )


def _rewrite(op, patterns, make_builder):
    """Apply the first pattern whose rule replaces `op`; returns it, or None."""
    for pattern in patterns:
        if not isinstance(op, pattern.matches):
            continue
        site = RewriteSite(op)
        replacement = pattern.rule(op, make_builder(site, op))
        values = [replacement] if isinstance(replacement, Value) else replacement
        if values is None or list(values) == list(op.results):
            for built in reversed(site.built):  # nothing uses them: the rule built and then declined
                Rewriter.erase(built)
            continue
        Rewriter.replace(op, list(values))
        return pattern
    return None
