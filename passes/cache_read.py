"""cache_read: copy the tile of a buffer that one iteration of a loop reads into a
contiguous local buffer first (packing), and read from that instead.

For a matmul's column panel of B (32 columns of a 1024-wide matrix, rows 4 KB
apart) the copy makes the k loop walk one contiguous block instead of a new
page per row. The tile is the box spanned by every read of the buffer in one
iteration: per dimension, a part fixed during the iteration (terms in the
loop's own variable and in loops around it) plus a part that varies (terms in
loops inside it), whose range gives the tile's extent.
"""
from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import AffineMap, Const, Dim, bounds, linear_form
from kiln.dialects.types import MemRefType

from .loop_transforms import ScheduleError, loop_name

MAX_TILE_BYTES = 256 * 1024  # the copy lives on the (thread's) stack


def cache_read(loop, buffer_name: str, layout=None):
    """`layout`, a permutation of the buffer's dimensions, orders the tile's: [1, 0] stores a
    tile of B transposed, so that reads along B's columns become contiguous."""
    name = loop_name(loop)
    reads = [op for op in loop.walk() if isinstance(op, (A.LoadOp, A.VectorLoadOp))
             and op.memref.name_hint == buffer_name]
    if not reads:
        raise ScheduleError(f"cache_read({name}, {buffer_name}): the loop reads no buffer named {buffer_name}")
    source = reads[0].memref
    if any(isinstance(op, (A.StoreOp, A.VectorStoreOp)) and op.memref is source for op in loop.walk()):
        raise ScheduleError(f"cache_read({name}, {buffer_name}): the loop also writes it")
    inner = {op.induction_variable: op for op in loop.walk() if isinstance(op, A.ForOp) and op is not loop}
    rank = source.type.rank
    fixed, low, high = [None] * rank, [None] * rank, [None] * rank
    for op in reads:
        lanes = op.result.type.lanes if isinstance(op, A.VectorLoadOp) else 1
        for d, expr in enumerate(op.map.results):
            form = linear_form(expr)
            if form is None:
                raise ScheduleError(f"cache_read({name}, {buffer_name}): an index is not linear")
            terms, constant = form
            outside = tuple(sorted(((op.indices[k], c) for k, c in terms.items() if op.indices[k] not in inner),
                                   key=lambda t: id(t[0])))
            varying = [(inner[op.indices[k]], c) for k, c in terms.items() if op.indices[k] in inner]
            if any(owner.trip_count < 0 for owner, _ in varying):
                raise ScheduleError(f"cache_read({name}, {buffer_name}): an inner loop has no constant bound")
            expr_varying = Const(constant)
            for k, (_, c) in enumerate(varying):
                expr_varying = expr_varying + Dim(k) * c
            lo, hi = bounds(expr_varying, [owner.trip_count for owner, _ in varying])
            hi += lanes - 1 if d == rank - 1 else 0
            if fixed[d] is None:
                fixed[d], low[d], high[d] = outside, lo, hi
            elif fixed[d] != outside:
                raise ScheduleError(f"cache_read({name}, {buffer_name}): the reads do not share one tile")
            else:
                low[d], high[d] = min(low[d], lo), max(high[d], hi)
    shape = tuple(h - l + 1 for l, h in zip(low, high))
    order = list(range(rank)) if layout is None else list(layout)
    if sorted(order) != list(range(rank)):
        raise ScheduleError(f"cache_read({name}, {buffer_name}): layout {layout} is not a permutation of "
                            f"{rank} dimensions")
    tile_type = MemRefType(tuple(shape[d] for d in order), source.type.element)
    if tile_type.size * tile_type.dtype.itemsize > MAX_TILE_BYTES:
        raise ScheduleError(f"cache_read({name}, {buffer_name}): a {shape} tile is too large for the stack")
    tile = MR.AllocaOp([], {}, [tile_type])
    tile.result.name_hint = f"{buffer_name}_tile"
    copy = _copy_nest(source, tile.result, fixed, low, shape, name, order)
    for position, op in enumerate((tile, copy)):
        loop.body.ops.insert(position, op)
        op.parent = loop.body
    for op in reads:  # read the tile: what is left of each index once the tile's corner is subtracted
        results = []
        for d, expr in enumerate(op.map.results):
            terms, constant = linear_form(expr)
            relative = Const(constant - low[d])
            for k, c in sorted(terms.items()):
                if op.indices[k] in inner:
                    relative = relative + Dim(k) * c
            results.append(relative)
        head = op.operands[:op.memref_position]
        op.set_operands(head + [tile.result] + list(op.indices))
        op.attributes["map"] = AffineMap(len(op.indices), tuple(results[d] for d in order))
        if isinstance(op, A.VectorLoadOp) and order[-1] != rank - 1:
            raise ScheduleError(f"cache_read({name}, {buffer_name}): vector reads need the last dimension "
                                "to stay last")
    return tile


def _copy_nest(source, tile, fixed, low, shape, name, order):
    """Loops copying source[fixed + low + t] to tile[t permuted by `order`] for every index t."""
    loops, block = [], None
    for d, extent in enumerate(shape):
        copy_loop = A.ForOp.create(0, extent, iv_name=f"{name}.copy{d}")
        if block is not None:
            block.append(copy_loop)
        loops.append(copy_loop)
        block = copy_loop.body
    outer = []
    for terms in fixed:
        for value, _ in terms:
            if value not in outer:
                outer.append(value)
    ivs = [l.induction_variable for l in loops]
    exprs = []
    for d, terms in enumerate(fixed):
        expr = Dim(len(outer) + d) + low[d]
        for value, c in terms:
            expr = expr + Dim(outer.index(value)) * c
        exprs.append(expr)
    operands = outer + ivs
    load = A.LoadOp([source, *operands], {"map": AffineMap(len(operands), tuple(exprs))})
    block.append(load)
    block.append(A.StoreOp([load.result, tile, *ivs], {"map": AffineMap(len(ivs), tuple(Dim(d) for d in order))}))
    for copy_loop in reversed(loops):
        copy_loop.body.append(A.YieldOp([], {}))
    return loops[0]
