"""Build affine loop nests: the small vocabulary lowering and schedules share.

b = AffineBuilder(function.body)
with b.loops((4, 8)) as ivs:                       # affine.for %i, affine.for %j
    x = b.load(view, [Dim(0), Dim(1)], ivs)        # affine.load %A[%i, %j]
    b.store(b.op(arith.NegFOp, x), out, [Dim(0), Dim(1)], ivs)
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from kiln.dialects import affine as A
from kiln.dialects.affine_expr import AffineMap, Dim, dims_of, substitute
from kiln.dialects.ir import Block, Value

LOOP_NAMES = "ijklmnpq"
REDUCTION_NAMES = "rstuvw"


@dataclass(frozen=True)
class View:
    """How a tensor's logical index reaches memory: buffer index i is exprs[i] of the logical dims.

    Broadcasts, transposes, slices and reshapes only change `exprs`; no data moves."""

    buffer: Value
    exprs: tuple

    @classmethod
    def identity(cls, buffer: Value) -> "View":
        return cls(buffer, tuple(Dim(k) for k in range(buffer.type.rank)))

    def through(self, exprs) -> "View":
        """The view whose logical dims map to this view's logical dims by `exprs`."""
        return View(self.buffer, tuple(substitute(e, list(exprs)) for e in self.exprs))


class AffineBuilder:
    def __init__(self, block: Block):
        self.block = block

    def emit(self, op_class, operands=(), attributes=None, result_types=None):
        op = op_class(list(operands), attributes, result_types)
        self.block.append(op)
        return op

    def op(self, op_class, *operands, result_type=None, **attributes) -> Value:
        """Emit a one-result op and return its result."""
        return self.emit(op_class, operands, attributes or None, None if result_type is None else [result_type]).result

    @contextmanager
    def loops(self, extents, names=LOOP_NAMES):
        """Nested affine.for loops from 0 to each extent; yields their induction variables."""
        saved, loops = self.block, []
        for k, extent in enumerate(extents):
            loop = A.ForOp.create(0, extent, iv_name=names[k] if k < len(names) else f"{names[0]}{k}")
            self.block.append(loop)
            loops.append(loop)
            self.block = loop.body
        try:
            yield [loop.induction_variable for loop in loops]
        finally:
            for loop in loops:
                loop.body.append(A.YieldOp([], {}))
            self.block = saved

    def reduction(self, extents, inits, body) -> list:
        """Nested affine.for loops carrying `inits` through iter_args.

        `body(ivs, accumulators)` emits one step and returns the new accumulators;
        the result is the accumulators after the last iteration."""
        if not extents:
            return list(body([], list(inits)))
        saved, loops, carried = self.block, [], list(inits)
        for k, extent in enumerate(extents):
            loop = A.ForOp.create(
                0, extent, inits=carried, iv_name=REDUCTION_NAMES[k] if k < len(REDUCTION_NAMES) else f"r{k}"
            )
            self.block.append(loop)
            loops.append(loop)
            self.block = loop.body
            carried = loop.body.args[1:]
        new = list(body([loop.induction_variable for loop in loops], list(carried)))
        for loop in reversed(loops):
            loop.body.append(A.YieldOp(new, {}))
            new = loop.results
        self.block = saved
        return list(new)

    def load(self, view: View, logical, ivs) -> Value:
        """affine.load of `view` at the logical index `logical` (expressions of `ivs`)."""
        operands, amap = access(view.through(logical).exprs, ivs)
        return self.emit(A.LoadOp, [view.buffer, *operands], {"map": amap}).result

    def store(self, value: Value, buffer: Value, logical, ivs) -> None:
        operands, amap = access(tuple(logical), ivs)
        self.emit(A.StoreOp, [value, buffer, *operands], {"map": amap})


def access(exprs, ivs):
    """Index operands and map for `exprs` over `ivs`, keeping only the ivs they use."""
    used = sorted(dims_of(*exprs))
    renumber = [Dim(used.index(d)) if d in used else None for d in range(len(ivs))]
    return [ivs[d] for d in used], AffineMap(len(used), tuple(substitute(e, renumber) for e in exprs))
