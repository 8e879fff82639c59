"""Memory planning: every intermediate buffer at an offset of one arena.

First the kernels are put in an order that keeps memory low: among the
kernels whose inputs are ready, the next one is the one that frees the most
bytes net of what it allocates (a training step computes each weight gradient
as soon as it can, letting activations die early). Then a buffer is live from
the kernel that writes it to the last kernel that reads it (directly or
through views); two buffers share bytes only if their lifetimes do not
overlap, or in place: a kernel may write its result over an input that dies at
it when every read of that input in the kernel is of the element being
written, at the iteration that writes it (an elementwise chain reading the
input directly). A read through any view (transpose, slice, reversed step,
reshape, broadcast) or by a reduction or matmul reads other elements, some
already overwritten, so it forbids reuse in place; and in place means at the
same offset, since a partial overlap would overwrite elements not yet read.
Offsets are chosen first-fit, 64-byte aligned. The plan is recorded as
attributes: ``arena_offset`` on each kernel whose result is planned,
``arena_bytes`` and ``unplanned_bytes`` (the total without any reuse) on the
function. Before::

    %0 = kiln.exp %x : tensor<256xf32>
    %1 = kiln.neg %0 : tensor<256xf32>
    %2 = kiln.sqrt %1 : tensor<256xf32>
    %3 = kiln.tanh %2 : tensor<256xf32>

After: ``%0`` at offset 0, ``%1`` in place of it (offset 0), ``%2`` likewise,
``arena_bytes = 1024``, ``unplanned_bytes = 3072``. Had ``%1`` been
``kiln.add %0, %t`` with ``%t = kiln.transpose %0``, it would get bytes of
its own: computing element (i, j) reads ``%0`` at (j, i), overwritten earlier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from kiln.dialects import func as F
from kiln.dialects import tensor as T
from kiln.dialects.diagnostics import VerificationError

from .fusion import FREE, computing_uses
from .registry import register_pass

ALIGNMENT = 64


@dataclass
class Buffer:
    name: str
    size: int  # bytes, rounded up to the alignment
    start: int  # index of the kernel that writes it
    end: int  # index of the last kernel that reads it
    offset: int = -1
    in_place_of: list = field(default_factory=list)  # buffers it may overlap: inputs dying where it is made


@dataclass
class MemoryPlan:
    buffers: list
    arena_bytes: int
    unplanned_bytes: int

    def conflicts(self) -> list:
        """Pairs of buffers that are live together and share bytes (a correct plan has none)."""
        found = []
        for i, a in enumerate(self.buffers):
            for b in self.buffers[i + 1 :]:
                live_together = a.start <= b.end and b.start <= a.end
                in_place = (
                    a.offset == b.offset
                    and a.size == b.size
                    and (
                        (b.name in a.in_place_of and b.end == a.start) or (a.name in b.in_place_of and a.end == b.start)
                    )
                )
                share = a.offset < b.offset + b.size and b.offset < a.offset + a.size
                if live_together and share and not in_place:
                    found.append((a.name, b.name))
        return found

    def __str__(self) -> str:
        saved = self.unplanned_bytes - self.arena_bytes
        return (
            f"memory plan: {len(self.buffers)} buffers, arena {self.arena_bytes} bytes "
            f"(without reuse {self.unplanned_bytes} bytes, {saved} saved)"
        )


def _aligned(n: int) -> int:
    return max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT)


def is_kernel(op) -> bool:
    return not isinstance(op, FREE + (F.ReturnOp,))


def schedule_for_memory(function: F.FuncOp) -> None:
    """Reorder `function`'s kernels (a topological order of their dependence graph)
    greedily to free memory early; free ops go right before their first reader."""
    block = function.body
    kernels = [op for op in block.ops if is_kernel(op)]
    returned = set(block.ops[-1].operands)
    graph = nx.DiGraph()
    graph.add_nodes_from(kernels)
    readers = {}
    for op in kernels:
        for user, _, _ in computing_uses(op.results[0]):
            if user in graph.nodes and user is not op:
                graph.add_edge(op, user)
                readers.setdefault(op, set()).add(user)

    def size(op):
        t = op.results[0].type
        return 0 if op.results[0] in returned else t.size * t.dtype.itemsize

    def gain(op):
        freed = sum(size(p) for p in graph.predecessors(op) if readers.get(p, set()) - scheduled == {op})
        return freed - size(op)

    original = {op: k for k, op in enumerate(kernels)}
    scheduled, order = set(), []
    ready = [op for op in kernels if graph.in_degree(op) == 0]
    while ready:
        best = max(ready, key=lambda op: (gain(op), -original[op]))
        ready.remove(best)
        scheduled.add(best)
        order.append(best)
        for user in graph.successors(best):
            if all(p in scheduled for p in graph.predecessors(user)):
                ready.append(user)
    if len(order) != len(kernels):
        raise VerificationError("kernels depend on each other in a cycle")
    new_ops, placed = [], set()

    def place(op):
        if op in placed:
            return
        for value in op.operands:
            producer = getattr(value, "op", None)
            if producer is not None and producer.parent is block and not is_kernel(producer):
                place(producer)
        placed.add(op)
        new_ops.append(op)

    for op in order + [block.ops[-1]]:
        place(op)
    block.ops[:] = new_ops


def plan(function: F.FuncOp) -> MemoryPlan:
    """Place every intermediate; records the plan as attributes and returns it."""
    kernels = [op for op in function.body.ops if is_kernel(op)]
    position = {op: k for k, op in enumerate(kernels)}
    returned = set(function.body.ops[-1].operands)
    buffers, by_value = [], {}
    for k, op in enumerate(kernels):
        value = op.results[0]
        op.attributes.pop("arena_offset", None)
        if value in returned:
            continue
        # Returned through a view, it is read when the outputs are copied, after every kernel.
        readers = [position.get(user, len(kernels)) for user, _, _ in computing_uses(value)]
        t = value.type
        buffer = Buffer(f"%{k}", _aligned(t.size * t.dtype.itemsize), k, max(readers, default=k))
        buffer.in_place_of = [by_value[v].name for v in _in_place_inputs(op) if v in by_value]
        by_value[value] = buffer
        buffers.append(buffer)
    placed = []
    for buffer in sorted(buffers, key=lambda b: (b.start, -b.size)):
        buffer.offset = _first_fit(buffer, placed)
        placed.append(buffer)
    result = MemoryPlan(buffers, max((b.offset + b.size for b in buffers), default=0), sum(b.size for b in buffers))
    if result.conflicts():
        raise VerificationError(f"memory plan overlaps live buffers: {result.conflicts()}")
    for value, buffer in by_value.items():
        value.op.attributes["arena_offset"] = buffer.offset
    function.attributes["arena_bytes"] = result.arena_bytes
    function.attributes["unplanned_bytes"] = result.unplanned_bytes
    return result


def _first_fit(buffer, placed) -> int:
    replaceable = {
        b.name: b.offset
        for b in placed
        if b.name in buffer.in_place_of and b.end == buffer.start and b.size == buffer.size
    }
    blocking = [b for b in placed if b.start <= buffer.end and buffer.start <= b.end]
    for offset in list(replaceable.values()) + [0] + sorted(b.offset + b.size for b in blocking):
        # An input dying here may be overwritten only exactly, element over element.
        if all(
            offset + buffer.size <= b.offset or b.offset + b.size <= offset or replaceable.get(b.name) == offset
            for b in blocking
        ):
            return offset
    raise AssertionError("unreachable: the end of the last blocking buffer is always free")


def _in_place_inputs(op) -> list:
    """Inputs of kernel `op` whose buffer its result may overwrite: of the result's shape
    and element size, and read by `op` only at the index it writes (see the module doc)."""
    result = op.results[0].type
    found = []
    for value in dict.fromkeys(op.operands):
        if (
            value.type.shape == result.shape
            and value.type.dtype.itemsize == result.dtype.itemsize
            and all(
                _reads_only_written_element(op, position, views)
                for user, position, views in computing_uses(value)
                if user is op
            )
        ):
            found.append(value)
    return found


def _reads_only_written_element(op, position, views) -> bool:
    """Whether kernel `op` reads operand `position` (reached through `views`) only at
    the index of the result element it is computing."""
    if views:
        return False
    if isinstance(op, T.ELEMENTWISE_OPS):
        return True
    if not isinstance(op, T.FusedOp):
        return False
    body = op.body.ops[:-1]
    # With a reduction or matmul in the group, lowering computes in stages; keep to plain chains.
    if not all(isinstance(m, T.ELEMENTWISE_OPS + (T.ConstantOp, T.BroadcastToOp)) for m in body):
        return False
    # Every op the argument flows into must be elementwise up to the result: a broadcast
    # or any other view in between would read it at another index.
    stack, seen = [op.body.args[position]], set()
    while stack:
        for user, _ in stack.pop().uses:
            if isinstance(user, T.YieldOp) or user in seen:
                continue
            if not isinstance(user, T.ELEMENTWISE_OPS):
                return False
            seen.add(user)
            stack.append(user.results[0])
    return True


def read_plan(function: F.FuncOp) -> MemoryPlan | None:
    """The plan recorded on `function` by the pass, if it ran."""
    if "arena_bytes" not in function.attributes:
        return None
    kernels = [op for op in function.body.ops if is_kernel(op)]
    buffers = [
        Buffer(f"%{k}", 0, k, k, op.attributes["arena_offset"])
        for k, op in enumerate(kernels)
        if "arena_offset" in op.attributes
    ]
    return MemoryPlan(buffers, function.attributes["arena_bytes"], function.attributes["unplanned_bytes"])


@register_pass("plan-memory")
def plan_memory(module):
    for function in module.body.ops:
        if isinstance(function, F.FuncOp):
            schedule_for_memory(function)
            plan(function)
    return module
