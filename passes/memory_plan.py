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
Offsets are chosen first-fit, 64-byte aligned (the alignment option). The plan is recorded as
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

import graphlib
from dataclasses import dataclass, field

from kiln.dialects import func as F
from kiln.dialects import tensor as T
from kiln.dialects.diagnostics import VerificationError
from kiln.dialects.rewriter import Rewriter
from kiln.dialects.traits import ELEMENTWISE

from .fusion import computing_uses, free
from .lower_conv import SCRATCH_OFFSET, planned_scratch_bytes
from .pass_spec import Option, declare_pass, function_pass, power_of_two_from

ALIGNMENT = 64
# Loads and stores are aligned to their element (8 bytes at most): every offset must be too.
WIDEST_ELEMENT = 8


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
        """Pairs of buffers that are live together and share bytes (a correct plan has none),
        in the order of `buffers`. A sweep over the starts meets only the pairs that are live
        together, not all n² of them."""
        pairs, live = [], []
        for j in sorted(range(len(self.buffers)), key=lambda k: self.buffers[k].start):
            b = self.buffers[j]
            live = [i for i in live if self.buffers[i].end >= b.start]  # the rest end before b
            for i in live:
                a = self.buffers[i]
                in_place = (
                    a.offset == b.offset
                    and a.size == b.size
                    and (
                        (b.name in a.in_place_of and b.end == a.start) or (a.name in b.in_place_of and a.end == b.start)
                    )
                )
                share = a.offset < b.offset + b.size and b.offset < a.offset + a.size
                if a.start <= b.end and share and not in_place:
                    pairs.append((min(i, j), max(i, j)))
            live.append(j)
        return [(self.buffers[i].name, self.buffers[j].name) for i, j in sorted(pairs)]

    def __str__(self) -> str:
        saved = self.unplanned_bytes - self.arena_bytes
        return (
            f"memory plan: {len(self.buffers)} buffers, arena {self.arena_bytes} bytes "
            f"(without reuse {self.unplanned_bytes} bytes, {saved} saved)"
        )


def _aligned(n: int, alignment: int) -> int:
    return max(alignment, -(-n // alignment) * alignment)


def is_kernel(op) -> bool:
    return not (free(op) or isinstance(op, F.ReturnOp))


def schedule_for_memory(function: F.FuncOp) -> None:
    """Reorder `function`'s kernels (a topological order of their dependence graph)
    greedily to free memory early; free ops go right before their first reader."""
    block = function.body
    kernels = [op for op in block.ops if is_kernel(op)]
    returned = set(block.ops[-1].operands)
    readers = {op: set() for op in kernels}
    producers = {op: set() for op in kernels}
    for op in kernels:
        for user, _, _ in computing_uses(op.results[0]):
            if user in readers and user is not op:
                readers[op].add(user)
                producers[user].add(op)

    def size(op):
        t = op.results[0].type
        return 0 if op.results[0] in returned else t.size * t.dtype.itemsize

    def gain(op):
        freed = sum(size(p) for p in producers[op] if readers[p] - scheduled == {op})
        return freed - size(op)

    # The sorter keeps the set of kernels whose producers are all scheduled; of those, the
    # greedy rule picks one at a time (the earliest in the original order among equals).
    sorter = graphlib.TopologicalSorter(producers)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = " -> ".join(op.name for op in exc.args[1])
        raise VerificationError(f"kernels depend on each other in a cycle: {cycle}") from None
    original = {op: k for k, op in enumerate(kernels)}
    scheduled, order, ready = set(), [], list(sorter.get_ready())
    while ready:
        best = max(ready, key=lambda op: (gain(op), -original[op]))
        ready.remove(best)
        scheduled.add(best)
        order.append(best)
        sorter.done(best)
        ready.extend(sorter.get_ready())
    _reorder(block, _with_free_ops(block, order + [block.ops[-1]]))


def _reorder(block, ops) -> None:
    """Put `block`'s ops in the order of `ops` (its terminator last); erase the ops left out
    (free ops nothing in `ops` reads), last first."""
    kept = set(ops)
    for op in reversed(list(block.ops)):
        if op not in kept:
            Rewriter.erase(op)
    Rewriter.reorder(block, ops)


def _with_free_ops(block, order) -> list:
    """`order` with the free ops (views, constants) each of its ops reads, directly or through
    other free ops, placed right before it: a depth-first post-order from each op in turn."""
    import networkx as nx  # here, not at import: a warm start from the disk cache never plans memory

    needs = nx.DiGraph()
    needs.add_nodes_from(order)  # first: the search starts from each of them in this order
    for op in reversed(block.ops):  # users before producers: only free ops something needs join
        if op in needs:
            for value in op.operands:
                producer = getattr(value, "op", None)
                if producer is not None and producer.parent is block and not is_kernel(producer):
                    needs.add_edge(op, producer)
    return list(nx.dfs_postorder_nodes(needs))


def plan(function: F.FuncOp, alignment: int = ALIGNMENT) -> MemoryPlan:
    """Place every intermediate at an offset that is a multiple of `alignment` bytes (a power of
    two, 8 or more); records the plan as attributes and returns it."""
    kernels = [op for op in function.body.ops if is_kernel(op)]
    position = {op: k for k, op in enumerate(kernels)}
    returned = set(function.body.ops[-1].operands)
    buffers, by_value, scratch = [], {}, {}
    for k, op in enumerate(kernels):
        value = op.results[0]
        op.attributes.pop("arena_offset", None)
        op.attributes.pop(SCRATCH_OFFSET, None)
        wide, panel = planned_scratch_bytes(op) if isinstance(op, T.Conv2DOp) else (0, 0)
        if panel:  # a convolution's packed input: needed only while the convolution runs
            scratch[op] = Buffer(f"%{k}.panel", _aligned(panel, alignment), k, k)
            buffers.append(scratch[op])
        if value in returned:
            continue
        # Returned through a view, it is read when the outputs are copied, after every kernel.
        readers = [position.get(user, len(kernels)) for user, _, _ in computing_uses(value)]
        t = value.type
        # A convolution's result stays in its wide columns (see lower_conv): reserve those.
        size = max(t.size * t.dtype.itemsize, wide)
        buffer = Buffer(f"%{k}", _aligned(size, alignment), k, max(readers, default=k))
        buffer.in_place_of = [by_value[v].name for v in _in_place_inputs(op, by_value)]
        by_value[value] = buffer
        buffers.append(buffer)
    live = []  # placed buffers still live where the next one starts, in the order placed
    for buffer in sorted(buffers, key=lambda b: (b.start, -b.size)):
        live = [b for b in live if b.end >= buffer.start]  # later buffers start later still
        buffer.offset = _first_fit(buffer, live)
        live.append(buffer)
    result = MemoryPlan(buffers, max((b.offset + b.size for b in buffers), default=0), sum(b.size for b in buffers))
    if result.conflicts():
        raise VerificationError(f"memory plan overlaps live buffers: {result.conflicts()}")
    for value, buffer in by_value.items():
        value.op.attributes["arena_offset"] = buffer.offset
    for op, buffer in scratch.items():
        op.attributes[SCRATCH_OFFSET] = buffer.offset
    function.attributes["arena_bytes"] = result.arena_bytes
    function.attributes["unplanned_bytes"] = result.unplanned_bytes
    return result


def _first_fit(buffer, live) -> int:
    """Where `buffer` goes: exactly over an input it may replace if it can, else at the lowest
    offset clear of the `live` buffers (placed ones that start no later and end no earlier
    than it starts)."""
    replaceable = {
        b.name: b.offset
        for b in live
        if b.name in buffer.in_place_of and b.end == buffer.start and b.size == buffer.size
    }
    for offset in list(replaceable.values()) + [0] + sorted(b.offset + b.size for b in live):
        # An input dying here may be overwritten only exactly, element over element.
        if all(
            offset + buffer.size <= b.offset or b.offset + b.size <= offset or replaceable.get(b.name) == offset
            for b in live
        ):
            return offset
    raise AssertionError("unreachable: the end of the last live buffer is always free")


def _in_place_inputs(op, planned) -> list:
    """Inputs of kernel `op` with a buffer in the arena (among `planned`) that its result may
    overwrite: of the result's shape and element size, and read by `op` only at the index it
    writes (see the module doc). Others (arguments, constants) are not looked at: their uses
    may be many (a weight read by every step of a long chain)."""
    result = op.results[0].type
    found = []
    for value in dict.fromkeys(op.operands):
        if (
            value in planned
            and not isinstance(getattr(value, "op", None), T.Conv2DOp)  # its bytes hold the wide layout
            and value.type.shape == result.shape
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
    if op.has_trait(ELEMENTWISE):
        return True
    if not isinstance(op, T.FusedOp):
        return False
    body = op.body.ops[:-1]
    # With a reduction or matmul in the group, lowering computes in stages; keep to plain chains.
    if not all(m.has_trait(ELEMENTWISE) or isinstance(m, (T.ConstantOp, T.BroadcastToOp)) for m in body):
        return False
    # Every op the argument flows into must be elementwise up to the result: a broadcast
    # or any other view in between would read it at another index.
    stack, seen = [op.body.args[position]], set()
    while stack:
        for user, _ in stack.pop().uses:
            if isinstance(user, T.YieldOp) or user in seen:
                continue
            if not user.has_trait(ELEMENTWISE):
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


@declare_pass(
    "plan-memory",
    "order kernels to keep memory low and place every intermediate in one arena",
    Option(
        "alignment",
        int,
        ALIGNMENT,
        "bytes every buffer's offset and size are a multiple of",
        power_of_two_from(WIDEST_ELEMENT),
    ),
)
@function_pass
def plan_memory(function, alignment: int = ALIGNMENT):
    schedule_for_memory(function)
    plan(function, alignment)
