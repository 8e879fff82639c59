"""cache_read: copy the tile of a buffer that one iteration of a loop reads into a
contiguous local buffer first (packing), and read from that instead.

For a matmul's column panel of B (32 columns of a 1024-wide matrix, rows 4 KB
apart) the copy makes the k loop walk one contiguous block instead of a new
page per row. The tile is the box spanned by every read of the buffer in one
iteration: per dimension, a part fixed during the iteration (terms in the
loop's own variable and in loops around it) plus a part that varies (terms in
loops inside it), whose range gives the tile's extent. Before (a matmul after
``split(k0.j, 4); reorder([k0.j.o, k0.i])``)::

    func.func @mm(%a: memref<4x6xf32>, %b: memref<6x8xf32>, %out0: memref<4x8xf32>) attributes {kiln.buffers = ["a", "b", "out0"]} {
      %0 = arith.constant 0.0 : f32
      affine.for %k0.j.o = 0 to 2 {
        affine.for %k0.i = 0 to 4 {
          affine.for %k0.j.i = 0 to 4 {
            %1 = affine.for %k0.r = 0 to 6 iter_args(%acc0 = %0) -> (f32) {
              %2 = affine.load %a[%k0.i, %k0.r] : memref<4x6xf32>
              %3 = affine.load %b[%k0.r, %k0.j.o * 4 + %k0.j.i] : memref<6x8xf32>
              %4 = arith.mulf %2, %3 : f32
              %5 = arith.addf %acc0, %4 : f32
              affine.yield %5 : f32
            } {kiln.loop = "k0.r"}
            affine.store %1, %out0[%k0.i, %k0.j.o * 4 + %k0.j.i] : memref<4x8xf32>
          } {kiln.loop = "k0.j.i"}
        } {kiln.loop = "k0.i"}
      } {kiln.loop = "k0.j.o"}
      func.return
    }

After ``cache_read(k0.j.o, b)``::

    func.func @mm(%a: memref<4x6xf32>, %b: memref<6x8xf32>, %out0: memref<4x8xf32>) attributes {kiln.buffers = ["a", "b", "out0"]} {
      %0 = arith.constant 0.0 : f32
      affine.for %k0.j.o = 0 to 2 {
        %b_tile = memref.alloca() {alignment = 64 : i64, kiln.buffer = "b_tile"} : memref<6x4xf32>
        affine.for %k0.j.o.copy0 = 0 to 6 {
          affine.for %k0.j.o.copy1 = 0 to 4 {
            %1 = affine.load %b[%k0.j.o.copy0, %k0.j.o * 4 + %k0.j.o.copy1] : memref<6x8xf32>
            affine.store %1, %b_tile[%k0.j.o.copy0, %k0.j.o.copy1] : memref<6x4xf32>
          } {kiln.loop = "k0.j.o.copy1"}
        } {kiln.loop = "k0.j.o.copy0"}
        affine.for %k0.i = 0 to 4 {
          affine.for %k0.j.i = 0 to 4 {
            %2 = affine.for %k0.r = 0 to 6 iter_args(%acc0 = %0) -> (f32) {
              %3 = affine.load %a[%k0.i, %k0.r] : memref<4x6xf32>
              %4 = affine.load %b_tile[%k0.r, %k0.j.i] : memref<6x4xf32>
              %5 = arith.mulf %3, %4 : f32
              %6 = arith.addf %acc0, %5 : f32
              affine.yield %6 : f32
            } {kiln.loop = "k0.r"}
            affine.store %2, %out0[%k0.i, %k0.j.o * 4 + %k0.j.i] : memref<4x8xf32>
          } {kiln.loop = "k0.j.i"}
        } {kiln.loop = "k0.i"}
      } {kiln.loop = "k0.j.o"}
      func.return
    }
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import memref as MR
from kiln.dialects.affine import loop_name
from kiln.dialects.affine_expr import AffineMap, Const, Dim, bounds, linear_form
from kiln.dialects.ir import BlockArgument
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import AFFINE_READ, AFFINE_WRITE
from kiln.dialects.types import MemRefType

from .loop_transforms import ScheduleError

MAX_TILE_BYTES = 256 * 1024  # the copy lives on the (thread's) stack


def cache_read(loop, buffer_name: str, layout=None, spanning=(), memory_space: str = "", max_bytes=MAX_TILE_BYTES):
    """`layout`, a permutation of the buffer's dimensions, orders the tile's: [1, 0] stores a
    tile of B transposed, so that reads along B's columns become contiguous.

    The tile's box is sized for full inner loops; where an iteration's box can reach
    past the buffer (the partial last tile of a split), only the part inside the buffer
    is copied, and the reads never reach the rest.

    `spanning` are loops around `loop` whose whole range the tile covers too (a GPU block's
    thread loops: the block shares one tile); `memory_space` is the tile's; returns the
    tile's allocation and its copy nest's loops, outermost first."""
    name = loop_name(loop)
    step = f"cache_read({name}, {buffer_name})"
    named = [op for op in loop.walk() if op.has_trait(AFFINE_READ) and MR.buffer_name(op.memref) == buffer_name]
    if not named:
        raise ScheduleError(f"{step}: the loop reads no buffer named {buffer_name}")
    source = named[0].memref
    if any(op.memref is not source for op in named):
        raise ScheduleError(f"{step}: the loop reads several buffers named {buffer_name}")
    reads = named
    if any(op.has_trait(AFFINE_WRITE) and op.memref is source for op in loop.walk()):
        raise ScheduleError(f"{step}: the loop also writes it")
    inner = {op.induction_variable: op for op in loop.walk() if isinstance(op, A.ForOp) and op is not loop}
    inner.update((op.induction_variable, op) for op in spanning)
    if any(op.lower != 0 or op.step != 1 for op in inner.values()):
        raise ScheduleError(f"{step}: a loop inside it does not run from 0 by 1")
    rank = source.type.rank
    fixed, low, high = [None] * rank, [None] * rank, [None] * rank
    for op in reads:
        lanes = op.result.type.lanes if isinstance(op, A.VectorLoadOp) else 1
        for d, expr in enumerate(op.map.results):
            form = linear_form(expr)
            if form is None:
                raise ScheduleError(f"{step}: an index is not linear")
            terms, constant = form
            outside = {}
            for k, c in terms.items():
                if op.indices[k] not in inner:
                    outside[op.indices[k]] = outside.get(op.indices[k], 0) + c
            varying = [(inner[op.indices[k]], c) for k, c in terms.items() if op.indices[k] in inner]
            if any(owner.trip_count < 0 for owner, _ in varying):
                raise ScheduleError(f"{step}: an inner loop has no constant bound")
            expr_varying = Const(constant)
            for k, (_, c) in enumerate(varying):
                expr_varying = expr_varying + Dim(k) * c
            lo, hi = bounds(expr_varying, [owner.trip_count for owner, _ in varying])
            hi += lanes - 1 if d == rank - 1 else 0
            if fixed[d] is None:
                fixed[d], low[d], high[d] = outside, lo, hi
            elif fixed[d] != outside:
                raise ScheduleError(f"{step}: the reads do not share one tile")
            else:
                low[d], high[d] = min(low[d], lo), max(high[d], hi)
    shape = tuple(h - l + 1 for l, h in zip(low, high))
    order = list(range(rank)) if layout is None else list(layout)
    if sorted(order) != list(range(rank)):
        raise ScheduleError(f"{step}: layout {layout} is not a permutation of {rank} dimensions")
    if any(isinstance(op, A.VectorLoadOp) for op in reads) and order[-1] != rank - 1:
        raise ScheduleError(f"{step}: vector reads need the last dimension to stay last")
    tile_type = MemRefType(tuple(shape[d] for d in order), source.type.element, memory_space)
    if tile_type.size * tile_type.dtype.itemsize > max_bytes:
        where = "the stack" if not memory_space else f"the {max_bytes // 1024} KiB of shared memory left"
        raise ScheduleError(
            f"{step}: a {'x'.join(map(str, shape))} tile of {tile_type.size * tile_type.dtype.itemsize} bytes "
            f"is too large for {where}"
        )
    directions = [_direction(step, d, fixed[d], low[d], high[d], source.type.shape[d]) for d in range(rank)]
    tile = MR.AllocaOp([], {}, [tile_type])
    MR.set_buffer_name(tile.result, f"{buffer_name}_tile")
    copy = _copy_nest(source, tile.result, fixed, low, high, shape, directions, name, order)
    Rewriter.insert([tile] + copy, InsertPoint.at_start(loop.body))
    for op in reads:  # read the tile: what is left of each index once the tile's corner is subtracted
        results = []
        for d, expr in enumerate(op.map.results):
            terms, constant = linear_form(expr)
            relative = Const(constant - low[d])
            for k, c in sorted(terms.items()):
                if op.indices[k] in inner:
                    relative = relative + Dim(k) * c
            results.append(relative)
        head = op.operands[: op.memref_position]
        op.set_operands(head + [tile.result] + list(op.indices))
        op.attributes["map"] = AffineMap(len(op.indices), tuple(results[d] for d in order))
    return tile, copy


def _value_range(value):
    """(least, greatest) value of a loop variable, or None if it is not one."""
    owner = value.block.parent.parent if isinstance(value, BlockArgument) and value.index == 0 else None
    if isinstance(owner, A.ParallelOp):
        return 0, max(owner.upper - 1, 0)
    if isinstance(owner, A.ForOp) and owner.trip_count >= 0:
        return owner.lower, owner.lower + max(owner.trip_count - 1, 0) * owner.step
    return None


def _direction(step, d, fixed, low, high, extent) -> str:
    """How to copy dimension `d`: "all" of the box (it always lies inside the buffer), "up"
    from the box's low corner (it may end past the buffer: a partial tile), or "down" from
    its high corner (it may start before the buffer: a partial tile read backwards)."""
    least, greatest = low, high
    for value, c in fixed.items():
        span = _value_range(value)
        if span is None:
            least, greatest = None, None
            break
        least += min(c * span[0], c * span[1])
        greatest += max(c * span[0], c * span[1])
    below = least is None or least < 0
    above = greatest is None or greatest >= extent
    if below and above:
        raise ScheduleError(f"{step}: the tile may reach past both ends of dimension {d}")
    return "down" if below else "up" if above else "all"


def _copy_nest(source, tile, fixed, low, high, shape, directions, name, order):
    """Loops copying source[fixed + low + t] to tile[t permuted by `order`] for every index t
    of the box that lies inside the source (a load and a store for a 0-d buffer)."""
    outer = []
    for terms in fixed:
        for value in terms:
            if value not in outer:
                outer.append(value)
    loops, block = [], None
    for d, extent in enumerate(shape):
        corner = [Dim(outer.index(v)) * c for v, c in fixed[d].items()]
        if directions[d] == "all":
            copy_loop = A.ForOp.create(0, extent, iv_name=f"{name}.copy{d}")
        else:  # as far as the buffer's end (up) or start (down), at most the box
            limit = Const(source.type.shape[d] - low[d]) if directions[d] == "up" else Const(high[d] + 1)
            sign = -1 if directions[d] == "up" else 1
            for term in corner:
                limit = limit + term * sign
            copy_loop = A.ForOp.create(0, (Const(extent), limit), iv_name=f"{name}.copy{d}", bound_operands=outer)
        if block is not None:
            block.append(copy_loop)
        loops.append(copy_loop)
        block = copy_loop.body
    ivs = [l.induction_variable for l in loops]
    sources, targets = [], []
    for d in range(len(shape)):
        t = Dim(len(outer) + d)
        if directions[d] == "down":  # t counts back from the high corner
            sources.append(Const(high[d]) + t * -1)
            targets.append(Const(shape[d] - 1) + Dim(d) * -1)
        else:
            sources.append(t + low[d])
            targets.append(Dim(d))
        for value, c in fixed[d].items():
            sources[d] = sources[d] + Dim(outer.index(value)) * c
    operands = outer + ivs
    load = A.LoadOp([source, *operands], {"map": AffineMap(len(operands), tuple(sources))})
    store = A.StoreOp([load.result, tile, *ivs], {"map": AffineMap(len(ivs), tuple(targets[d] for d in order))})
    if not loops:
        return [load, store]
    block.append(load)
    block.append(store)
    for copy_loop in reversed(loops):
        copy_loop.body.append(A.YieldOp([], {}))
    return [loops[0]]
