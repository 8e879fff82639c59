"""Module verifier: every op's own checks, SSA dominance, and the memory plan.

A value may be used only after it is defined, in its own block or in a block
that encloses the use; ops isolated from above (func.func) see nothing from
outside. Run after every pass in tests and in debug mode.

The memory plan is a fact of the affine IR, checked from the IR alone: each
function's intermediates are ``memref.view``s at constant byte offsets of one
``i8`` arena (``memref.alloc``). Each view must lie inside its arena, and two
views live at once (from the first top-level op that uses one to the last, in
program order) must not share bytes::

    %arena = memref.alloc() {alignment = 64 : i64, kiln.buffer = "arena"} : memref<2048xi8>
    %buf0 = memref.view %arena[%c0][] {kiln.buffer = "buf0"} : memref<2048xi8> to memref<256xf32>
    %buf1 = memref.view %arena[%c0][] {kiln.buffer = "buf1", kiln.in_place_of = "buf0"} : ...

The one exception is a result written in place of an input (``kiln.in_place_of``,
set where the plan chose it): same offset and size, the input's last use is the
kernel that first writes the result, and there every read of the input is
followed, in the same block, by a write of the result at the same index (or fills
a packed tile, ``memref.alloca``, that the iteration then reads). That is how an
elementwise kernel reads each element before it overwrites it; the check is of
that shape, not a proof about every index function.
"""

from __future__ import annotations

from . import affine as A
from . import arith as AR
from . import memref as MR
from .diagnostics import VerificationError
from .ir import Operation
from .traits import AFFINE_READ, AFFINE_WRITE
from .types import VectorType, element_of


def verify(op: Operation) -> None:
    """Raise VerificationError at the first broken invariant in `op` and below."""
    _verify(op, frozenset())
    # Functions are `op` itself or the ops of a module's body.
    candidates = [op] + [child for region in op.regions for block in region.blocks for child in block.ops]
    functions = {f.sym_name: f for f in candidates if f.name == "func.func"}
    for candidate in candidates:
        if candidate.name == "func.func":
            verify_memory_plan(candidate)
            if op is not candidate:  # a function alone: its callees are elsewhere
                for inner in candidate.walk():
                    if inner.name == "func.call":
                        inner.verify_callee(functions)


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


class _Placement:
    """One view of an arena: its bytes, and the top-level ops from its first use to its last."""

    def __init__(self, view, offset: int):
        self.view = view
        self.name = MR.buffer_name(view.result) or "an unnamed view"
        self.start = offset
        self.end = offset + view.result.type.size * view.result.type.dtype.itemsize
        self.first = self.last = None

    def describe(self) -> str:
        return f"{self.name} (bytes {self.start} to {self.end}, used by top-level ops {self.first} to {self.last})"


def verify_memory_plan(function) -> None:
    """Raise VerificationError if a view of an arena in `function` lies outside it, or two
    views live at the same time share bytes (other than in place: see the module doc)."""
    top = function.body.ops if function.regions and function.regions[0].blocks else []
    placements = {}
    for op in top:
        if isinstance(op, MR.ViewOp):
            offset = getattr(op.byte_shift, "op", None)
            if not isinstance(offset, AR.ConstantOp):
                raise op.error("memref.view: the offset in the arena must be an arith.constant")
            placement = _Placement(op, offset.value)
            arena = op.source.type.size
            if placement.start < 0 or placement.end > arena:
                raise op.error(
                    f"memref.view {placement.name}: bytes {placement.start} to {placement.end} "
                    f"lie outside its arena of {arena} bytes"
                )
            placements[op.result] = placement
    if len(placements) < 2:
        return
    for position, op in enumerate(top):
        for inner in op.walk():
            for value in inner.operands:
                placement = placements.get(value)
                if placement is not None:
                    placement.first = position if placement.first is None else placement.first
                    placement.last = position
    used = [p for p in placements.values() if p.first is not None]
    for k, a in enumerate(used):
        for b in used[k + 1 :]:
            live_together = a.first <= b.last and b.first <= a.last
            share = a.start < b.end and b.start < a.end and a.view.source is b.view.source
            if not (live_together and share):
                continue
            old, new = (a, b) if b.view.attributes.get(MR.IN_PLACE_OF) == a.name else (b, a)
            problem = _not_in_place(old, new, top)
            if problem:
                raise b.view.error(
                    f"memory plan: views {a.describe()} and {b.describe()} are live at the same time "
                    f"and share bytes{problem}"
                )


def _not_in_place(old: _Placement, new: _Placement, top) -> str:
    """Why `new` does not overwrite `old` in place (see the module doc); "" when it does."""
    if new.view.attributes.get(MR.IN_PLACE_OF) != old.name:
        return " (neither is marked kiln.in_place_of the other)"
    if (old.start, old.end) != (new.start, new.end):
        return f" ({new.name} is marked in place of {old.name} but its bytes are not the same)"
    if old.last != new.first:
        return f" ({new.name} is marked in place of {old.name}, which is still used after the op that first writes it)"
    for op in top[old.last].walk():
        if op.has_trait(AFFINE_READ) and op.memref is old.view.result:
            if not (_written_after(op, new.view.result) or _packs(op)):
                return (
                    f" ({new.name} is marked in place of {old.name}, but the kernel reads {old.name} "
                    f"where it does not then write {new.name} at the same index)"
                )
    return ""


def _written_after(load, buffer) -> bool:
    """Whether a store to `buffer` at `load`'s index follows `load` in its block."""
    block = load.parent
    after = block.ops[block.ops.index(load) + 1 :]
    store_kind = A.VectorStoreOp if isinstance(load, A.VectorLoadOp) else A.StoreOp
    return any(
        isinstance(op, store_kind)
        and op.memref is buffer
        and op.map == load.map
        and list(op.indices) == list(load.indices)
        and _same_bytes(op.operands[0].type, load.result.type)
        for op in after
    )


def _same_bytes(stored, loaded) -> bool:
    """Whether a store of `stored` covers exactly the bytes a load of `loaded` read: a convert
    between element types of one width (i64 to f64) is computed in place too."""
    return _lanes(stored) == _lanes(loaded) and element_of(stored).dtype.itemsize == element_of(loaded).dtype.itemsize


def _lanes(t) -> int:
    return t.lanes if isinstance(t, VectorType) else 1


def _packs(load) -> bool:
    """Whether `load` only copies into a stack tile (a cache_read's packing copy)."""
    users = [user for user, _ in load.result.uses]
    return bool(users) and all(
        user.has_trait(AFFINE_WRITE)
        and user.operands[0] is load.result
        and isinstance(getattr(user.memref, "op", None), MR.AllocaOp)
        for user in users
    )
