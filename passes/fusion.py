"""Fusion: group ops into kernels that each become one loop nest.

A producer joins the group of its consumers when every use of its result is
inside that one group (so it never needs memory of its own). Inside a group,
lowering computes every value where it is needed, hoisted to the outermost
loop it depends on; so a row reduction consumed through a broadcast is
computed once per row, and a matmul's bias and activation are applied to its
accumulator. Recomputation is the price: an elementwise value used in several
places is computed in each. Two rules keep that cheap:

- a value joins only where its index depends on every loop around the place
  it is computed (a row reduction inside a row loop, not a column reduction
  inside it; not a hidden layer inside the next matmul's column loop);
- an expensive op (reduction, matmul, a math-library call like exp) joins
  only if it is computed in one place, and no value in more than MAX_PLACES
  places (the pass's max-places option);
- except a math-library call needed in several places along one row (the
  same index but for one axis, in loops that agree outside it): it joins
  marked ``row_buffer``, and lowering computes the row once into a small
  buffer (ROW_BUFFER_BYTES at most, the row-buffer-bytes option) that every
  place reads (see KernelEmitter.row_buffer). A row softmax is therefore one
  kernel: per row, the maximum, exp into the row buffer, its
  sum, the division; x is read and the result written once.

A gather joins like an elementwise op (its index computed in the group, where it
is read), but its source never does: it is read at positions the data gives, so
it must be memory of its own (numpy's histogram is one kernel: each value's bin,
the two edges around it gathered, the correction).

Broadcasts, transposes, reshapes, slices and constants are free: they are
copied into every group that reads them and are never materialized. conv2d,
concat and insert_slice are kernels of their own. Before::

    %0 = kiln.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
    %1 = kiln.broadcast_to %b : (tensor<3xf32>) -> tensor<8x3xf32>
    %2 = kiln.add %0, %1 : tensor<8x3xf32>
    %3 = kiln.tanh %2 : tensor<8x3xf32>
    func.return %3 : tensor<8x3xf32>

After::

    %0 = kiln.fused(%in0 = %x, %in1 = %w, %in2 = %b) -> tensor<8x3xf32> {
      %1 = kiln.matmul %in0, %in1 : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
      %2 = kiln.broadcast_to %in2 : (tensor<3xf32>) -> tensor<8x3xf32>
      %3 = kiln.add %1, %2 : tensor<8x3xf32>
      %4 = kiln.tanh %3 : tensor<8x3xf32>
      kiln.yield %4 : tensor<8x3xf32>
    }
    func.return %0 : tensor<8x3xf32>
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.dialects.affine_expr import Dim, dims_of
from kiln.dialects.diagnostics import VerificationError
from kiln.dialects.ir import Block, Region
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import CONSTANT_LIKE, CONTRACTION, ELEMENTWISE, REDUCTION, TRANSCENDENTAL, VIEW

from .dce import eliminate_dead_code
from .index_maps import operand_index
from .pass_spec import Option, declare_pass, function_pass, positive


def fusable(op) -> bool:
    """Whether `op` may join a group: elementwise ops, reductions, matmuls and gathers whose
    source is computed elsewhere (an argument, a constant, another kernel's result)."""
    return op.has_trait(ELEMENTWISE) or expensive(op) or _fusable_gather(op)


def _fusable_gather(op) -> bool:
    """A kiln.gather reads its source at positions only known at run time, so the source must
    be memory of its own: not a value of the group, and not a view (which the kernel would
    compute as index arithmetic of the element it reads). Its index, read at the result's
    index, may be computed in the group (numpy's histogram: edges[bin of x])."""
    if not isinstance(op, TI.GatherOp):
        return False
    producer = getattr(op.source, "op", None)
    return producer is None or not producer.has_trait(VIEW)


def expensive(op) -> bool:
    """Reductions and matmuls: loops of their own inside each result element."""
    return op.has_trait(REDUCTION) or op.has_trait(CONTRACTION)


def free(op) -> bool:
    """Views and constants: copied into every group that reads them, never materialized."""
    return op.has_trait(VIEW) or op.has_trait(CONSTANT_LIKE)


MAX_PLACES = 8
ROW_BUFFER_BYTES = 16384  # a row buffer stays in L1 and on the stack of the thread that runs it
# The most a pipeline may ask for: a row buffer is on the stack of an OpenMP thread, whose
# stack is a few MiB (libomp's default is 4 MiB), and a kernel may hold several.
ROW_BUFFER_BYTES_LIMIT = 1 << 20


@dataclass(frozen=True)
class Limits:
    """How much recomputation fusion accepts: `max_places` places at most for one value, and
    row buffers of at most `row_buffer_bytes` (0: none)."""

    max_places: int = MAX_PLACES
    row_buffer_bytes: int = ROW_BUFFER_BYTES


def _row_buffer_bytes_rule(value):
    return None if 0 <= value <= ROW_BUFFER_BYTES_LIMIT else f"between 0 and {ROW_BUFFER_BYTES_LIMIT}"


def computing_uses(value):
    """(user, operand position, views between) for each use, looking through free ops."""
    found, stack = [], [(value, ())]
    while stack:
        current, views = stack.pop()
        for user, position in current.uses:
            if free(user):
                stack.append((user.results[0], views + (user,)))
            else:
                found.append((user, position, views))
    return found


class Group:
    def __init__(self, root):
        self.root = root
        self.members = [root]
        shape = root.results[0].type.shape
        self.extents = {k: n for k, n in enumerate(shape)}
        # Where each member is computed: a list of (index, enclosing loops), one per
        # distinct place; lowering computes a value once per place (and per element there).
        self.placements = {root: [(tuple(Dim(k) for k in range(len(shape))), tuple(range(len(shape))))]}

    def operand_placement(self, user, placement, position):
        """(index, loops) at which `user`, computed at `placement`, reads operand `position`."""
        index, loops = placement
        if user.has_trait(ELEMENTWISE):
            return index, loops
        if isinstance(user, TI.GatherOp):  # the index operand (the source never joins: _joinable_group)
            axis = user.gather_axis
            return index[axis : axis + user.index.type.rank], loops
        level = _level(index, loops)
        fresh = []
        if isinstance(user, T.MatmulOp):
            k = self._new_dim(user.lhs.type.shape[-1])
            batch = list(index[:-2])
            index = tuple(batch + ([index[-2], Dim(k)] if position == 0 else [Dim(k), index[-1]]))
            fresh = [k]
        else:  # a reduction: its axes become new loops inside it
            source = user.operand.type
            kept = iter(index)
            new = []
            for axis in range(source.rank):
                if axis in user.axes:
                    d = self._new_dim(source.shape[axis])
                    fresh.append(d)
                    new.append(Dim(d))
                    if user.keepdims:
                        next(kept)
                else:
                    new.append(next(kept))
            index = tuple(new)
        return index, loops[: level + 1] + tuple(fresh)

    def _new_dim(self, extent):
        d = len(self.extents)
        self.extents[d] = extent
        return d

    def recomputes(self, index, loops) -> bool:
        """Would a value at `index` be computed more than once per element in `loops`?"""
        used = dims_of(*index)
        level = _level(index, loops)
        return any(d not in used and self.extents[d] > 1 for d in loops[: level + 1])


def _level(index, loops) -> int:
    used = dims_of(*index)
    return max((k for k, d in enumerate(loops) if d in used), default=-1)


def plan_groups(body, limits: Limits = Limits()) -> dict:
    """op -> Group, for every computing op of `body` (consumers decide first)."""
    computing = [op for op in body.ops[:-1] if not free(op)]
    group_of = {}
    for op in reversed(computing):
        group = _joinable_group(op, group_of, limits)
        if group is None:
            group_of[op] = Group(op)
        else:
            group.members.append(op)
            group_of[op] = group
    return group_of


def _joinable_group(op, group_of, limits: Limits):
    if not fusable(op):
        return None
    uses = computing_uses(op.results[0])
    if not uses or any(user not in group_of or not fusable(user) for user, _, _ in uses):
        return None
    if any(isinstance(user, TI.GatherOp) and position == 0 for user, position, _ in uses):
        return None  # a gather's source is read where the data says: it needs memory of its own
    groups = {id(group_of[user]) for user, _, _ in uses}
    if len(groups) != 1:
        return None
    group = group_of[uses[0][0]]
    places = {}
    for user, position, views in uses:
        for placement in group.placements[user]:
            index, loops = group.operand_placement(user, placement, position)
            for view in reversed(views):  # from the use back towards op
                index = operand_index(view, index)
            places.setdefault((index, loops[: _level(index, loops) + 1]), (index, loops))
    places = list(places.values())
    if len(places) > limits.max_places or any(group.recomputes(*place) for place in places):
        return None
    if isinstance(op, T.CheckIndexOp) and not _every_element(group, op, places):
        return None
    if (expensive(op) or op.has_trait(TRANSCENDENTAL)) and len(places) != 1:
        row = _row_of(group, op, places, limits.row_buffer_bytes)
        if row is None:
            return None
        op.attributes["row_buffer"] = row
        places = places[:1]
    group.placements[op] = places
    return group


def _every_element(group, op, places) -> bool:
    """Whether the group computes every element of `op`: one place, its index a distinct loop
    of the group's for each axis, over the axis' whole extent. A kiln.check_index must see
    every index, as numpy gathers them all before any slice of the result: computed only where
    a slice of a gather downstream reads it, an index outside the axis in the dropped part
    would not raise."""
    if len(places) != 1:
        return False
    index = places[0][0]
    shape = op.results[0].type.shape
    if not all(isinstance(e, Dim) for e in index) or len({e.index for e in index}) != len(index):
        return False
    return len(index) == len(shape) and all(group.extents[e.index] == n for e, n in zip(index, shape))


def _row_of(group, op, places, row_buffer_bytes: int):
    """The axis along which `op`'s places differ, when it is computed once into a row buffer
    (see the module docstring), else None. Every place must read the whole row in a loop of
    its own (index[axis] the innermost loop, over the whole axis), and agree on the rest of
    the index and on the loops outside."""
    if not op.has_trait(TRANSCENDENTAL) or op.results[0].type.rank == 0:
        return None
    shape = op.results[0].type.shape
    axes = {k for k in range(len(shape)) if len({place[0][k] for place in places}) > 1}
    if len(axes) != 1:
        return None
    (axis,) = axes
    if shape[axis] * op.results[0].type.element.dtype.itemsize > row_buffer_bytes:
        return None
    outside = {(place[0][:axis] + place[0][axis + 1 :], place[1][:-1]) for place in places}
    if len(outside) != 1:
        return None
    rest, loops = next(iter(outside))
    for index, place_loops in places:
        if not place_loops:  # a row of one read at a constant index, outside every loop: no row loop
            return None
        d = place_loops[-1]
        if index[axis] != Dim(d) or group.extents[d] != shape[axis] or d in dims_of(*rest):
            return None
    if group.recomputes(rest, loops) or not set(dims_of(*rest)) <= set(loops):
        return None
    return axis


def _check_acyclic(body, group_of) -> None:
    """Kernels must form a DAG: fusion may never make a group depend on itself."""
    import networkx as nx  # here, not at import: a warm start from the disk cache never fuses

    graph = nx.DiGraph()
    for op, group in group_of.items():
        graph.add_node(id(group))
        for value in op.operands:
            producer = _computing_producer(value)
            if producer is not None and group_of[producer] is not group:
                graph.add_edge(id(group_of[producer]), id(group))
    if not nx.is_directed_acyclic_graph(graph):
        raise VerificationError("fusion made a cycle between kernels")


def _computing_producer(value):
    op = getattr(value, "op", None)
    while op is not None and op.has_trait(VIEW):
        op = getattr(op.operand, "op", None)
    return None if op is None or isinstance(op, T.ConstantOp) else op


def fuse_block(body, limits: Limits = Limits()) -> int:
    """Replace each group of two or more ops by a kiln.fused; returns the number of groups."""
    group_of = plan_groups(body, limits)
    _check_acyclic(body, group_of)
    groups = {id(g): g for g in group_of.values() if len(g.members) > 1}
    for group in groups.values():
        _outline(body, group)
    eliminate_dead_code(body)
    return len(groups)


def _outline(body, group) -> None:
    members = set(group.members)
    ordered = [op for op in body.ops if op in members]
    inner = Block()
    mapping, inputs = {}, []

    def resolve(value):
        # Depth first, operands in order, with a work list: a chain of views may be
        # thousands long, deeper than Python's recursion limit.
        work = [value]
        while work:
            current = work[-1]
            if current in mapping:
                work.pop()
                continue
            producer = getattr(current, "op", None)
            if producer is None or not free(producer):  # a value computed elsewhere becomes an input
                mapping[current] = inner.add_argument(current.type, f"in{len(inputs)}")
                inputs.append(current)
                work.pop()
                continue
            pending = [v for v in producer.operands if v not in mapping]
            if pending:
                work.extend(reversed(pending))
                continue
            clone = type(producer)(  # copy views and constants in
                [mapping[v] for v in producer.operands],
                dict(producer.attributes),
                [producer.results[0].type],
                loc=producer.loc,
            )
            inner.append(clone)
            mapping[current] = clone.results[0]
            work.pop()
        return mapping[value]

    for op in ordered:
        clone = type(op)([resolve(v) for v in op.operands], dict(op.attributes), [op.results[0].type], loc=op.loc)
        inner.append(clone)
        mapping[op.results[0]] = clone.results[0]
    root = group.root.results[0]
    inner.append(T.YieldOp([mapping[root]], {}))
    fused = T.FusedOp(inputs, {}, [root.type], [Region([inner])], loc=group.root.loc)
    Rewriter.insert(fused, InsertPoint.before(group.root))
    root.replace_all_uses_with(fused.results[0])


@declare_pass(
    "fuse",
    "group ops into kernels, each one loop nest (kiln.fused)",
    Option("max-places", int, MAX_PLACES, "the most places one value may be computed in, fused", positive),
    Option(
        "row-buffer-bytes",
        int,
        ROW_BUFFER_BYTES,
        "the largest row a math-library call is computed once into (0: none)",
        _row_buffer_bytes_rule,
    ),
)
@function_pass
def fuse(function, max_places: int = MAX_PLACES, row_buffer_bytes: int = ROW_BUFFER_BYTES):
    fuse_block(function.body, Limits(max_places, row_buffer_bytes))
