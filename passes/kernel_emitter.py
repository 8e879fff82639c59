"""Emit one kernel: a loop nest over its result that computes every value of
the group where it is needed.

The nest has one loop per result dimension. A value is computed at an index
(affine expressions of loop variables), at the outermost loop level that
index depends on, and at most once per level and index: a row reduction
consumed through a broadcast lands in the row loop before the column loop, and
``exp(x - m)`` needed by a sum and by a division is computed in each. Reductions
and matmuls open loops of their own, carrying accumulators in ``iter_args``.

A float sum longer than 63 becomes a summation tree (``float_sum``): a row of 64 to
512 elements in 4 accumulators over its quarters; a longer axis in leaves of 128
contiguous elements, with at most 8 block sums a level above them and tails in
loops of their own. docs/ir.md shows the loops of ``x.sum()`` of 4099 float32, as
kiln prints them (its examples are tests). For the CUDA target (``grid_sums``) a
whole-tensor sum, and a row's sum that reads along memory rows, stay one plain loop:
the GPU spreads those over its threads (see kiln.codegen.cuda_codegen and
passes/gpu_reduction_schedule.py).
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import cf as CF
from kiln.dialects import memref as MR
from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.dialects.affine_expr import Const, Dim, ceildiv, dims_of
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import ELEMENTWISE, REDUCTION, VIEW
from kiln.dialects.types import MemRefType, i64
from kiln.dialects.types import index as index_type

from .affine_builder import LOOP_NAMES, REDUCTION_NAMES, View, access
from .index_maps import operand_index
from .lower_indexed import indexed_address
from .scalar_rules import REDUCTION_COMBINE, SCALAR_RULES, reduction_identity

# The summation tree of float sums (see KernelEmitter.float_sum).
STREAMS = 4  # interleaved accumulators in a leaf
STREAM_MIN = 16  # shorter axes are one plain loop
LEAF = 512  # STREAMS * 128 elements at most in a leaf: 16 per lane of 8
FANOUT = 8  # at most this many block sums added per level
CHUNKS = 16  # a whole-tensor sum runs in up to this many slices, in parallel (see _chunked_sum)
CHUNK_MIN = 1 << 16  # elements in a slice at least: smaller sums stay on one thread


class Level:
    """Where ops computed at one loop depth go: in `block`, before the nested loop."""

    def __init__(self, block, position: int):
        self.block = block
        self.position = position
        self.memo = {}

    def insert(self, op):
        Rewriter.insert(op, InsertPoint.at_index(self.block, self.position))
        self.position += 1
        return op


class KernelEmitter:
    """Lower one group. `outside(value)` gives the View of a value the group reads."""

    def __init__(self, function_block, members, outside, constant_view, grid_sums=False):
        self.function_block = function_block
        self.members = members  # the ops computed inside this kernel
        self.outside = outside  # value -> View, for everything else it reads
        self.constant_view = constant_view  # constant op -> an op reading its memref.global
        self.ivs = []  # loop variables; Dim(k) in an index means ivs[k]
        self.loop_names = set()  # unique within the kernel, so schedules can name loops
        # A GPU backend spreads a whole-tensor sum over its threads and combines their partial
        # sums pairwise (see cuda_codegen): it wants the plain loop nest, not the tree.
        self.grid_sums = grid_sums
        self.row_buffers = 0  # named row0, row1, ... (see row_buffer)

    # -- the loop nest -------------------------------------------------------------
    def emit(self, root, buffer) -> None:
        shape = root.type.shape
        outer = Level(self.function_block, len(self.function_block.ops))
        chain, block, loops = [], self.function_block, []
        for k, extent in enumerate(shape):
            loop = A.ForOp.create(0, extent, iv_name=self.fresh_name(LOOP_NAMES[k] if k < len(LOOP_NAMES) else f"i{k}"))
            block.append(loop)
            loops.append(loop)
            self.ivs.append(loop.induction_variable)
            block = loop.body
            chain.append((len(self.ivs) - 1, Level(block, 0)))
        self.outer = outer
        self.result_levels = [level for _, level in chain]
        index = tuple(Dim(k) for k in range(len(shape)))
        value = self.value(root, index, chain)
        operands, amap = access(index, self.ivs)
        (chain[-1][1] if chain else outer).insert(A.StoreOp([value, buffer, *operands], {"map": amap}))
        for loop in loops:
            loop.body.append(A.YieldOp([], {}))

    def fresh_name(self, base: str) -> str:
        name, k = base, 1
        while name in self.loop_names:
            name, k = f"{base}{k}", k + 1
        self.loop_names.add(name)
        return name

    def level_for(self, index, chain) -> Level:
        used = dims_of(*index)
        deepest = max((k for k, (dim, _) in enumerate(chain) if dim in used), default=-1)
        return chain[deepest][1] if deepest >= 0 else self.outer

    # -- values ----------------------------------------------------------------------
    def value(self, value, index, chain):
        """The scalar `value` at `index` (a tuple of expressions over self.ivs).

        Views and elementwise ops are evaluated from an explicit work list, in the order a
        depth-first walk of the operands gives, not by recursion: a fused chain of thousands
        of ops must not reach Python's recursion limit. Reductions and matmuls, which open
        loops of their own, call back in here for their operands."""
        pending = [(value, index)]
        while pending:
            v, idx = self.through_views(*pending[-1])
            level = self.level_for(idx, chain)
            if (v, idx) in level.memo:
                pending.pop()
                continue
            op = getattr(v, "op", None)
            if op is not None and self.inside(op) and "row_buffer" in op.attributes and not self.grid_sums:
                level.memo[(v, idx)] = self.row_buffer(op, idx, chain, level)
            elif op is not None and self.inside(op) and op.has_trait(ELEMENTWISE):
                missing = [(o, idx) for o in op.operands if self.known(o, idx, chain) is None]
                if missing:
                    pending.extend(reversed(missing))  # the first operand is computed first
                    continue
                scalars = [self.known(o, idx, chain) for o in op.operands]
                builder = _LevelBuilder(level)
                level.memo[(v, idx)] = SCALAR_RULES[type(op)](builder, op, op.operands[0].type.element, *scalars)
            else:
                level.memo[(v, idx)] = self._compute(v, idx, chain, level)
            pending.pop()
        return self.known(value, index, chain)

    def row_buffer(self, op, index, chain, level):
        """`op` at `index`, read from its row buffer: the row through `index` along the axis
        fusion marked, computed once per row into a stack buffer by a loop of its own, so
        that every place that needs it (a row sum, then the division) reads it from L1
        instead of computing exp again. Before the row loop, at the level of the rest of
        the index::

            %row = memref.alloca() : memref<1024xf32>
            affine.for %k0.row = 0 to 1024 {
              ... exp(x[i, row] - m) ...
              affine.store %e, %row[%k0.row] : memref<1024xf32>
            }

        The buffer is allocated on the stack of the thread that runs the row."""
        axis = op.attributes["row_buffer"]
        rest = index[:axis] + index[axis + 1 :]
        at = self.level_for(rest, chain)
        key = ("row_buffer", op, rest)
        if key not in at.memo:
            t = op.results[0].type
            row = at.insert(MR.AllocaOp([], {}, [MemRefType((t.shape[axis],), t.element)])).result
            MR.set_buffer_name(row, f"row{self.row_buffers}")
            self.row_buffers += 1

            def body(i, inner, inner_chain, _):
                at_i = index[:axis] + (i,) + index[axis + 1 :]
                scalars = [self.value(o, at_i, inner_chain) for o in op.operands]
                value = SCALAR_RULES[type(op)](_LevelBuilder(inner), op, op.operands[0].type.element, *scalars)
                operands, amap = access((i,), self.ivs)
                inner.insert(A.StoreOp([value, row, *operands], {"map": amap}))
                return []

            self._loop(t.shape[axis], [], at, chain, "row", body)
            at.memo[key] = View.identity(row)
        return self.load(at.memo[key], (index[axis],), level)

    def through_views(self, value, index):
        """`value` at `index` with the views of this kernel followed to what they read: a
        view is index arithmetic, never a computed value."""
        op = getattr(value, "op", None)
        while op is not None and self.inside(op) and op.has_trait(VIEW):
            value, index = op.operand, operand_index(op, index)
            op = getattr(value, "op", None)
        return value, index

    def known(self, value, index, chain):
        """The scalar already computed for `value` at `index`, or None."""
        value, index = self.through_views(value, index)
        return self.level_for(index, chain).memo.get((value, index))

    def _compute(self, value, index, chain, level):
        op = getattr(value, "op", None)
        if op is None or not self.inside(op):
            return self.load(self.outside(value), index, level)
        if isinstance(op, T.ConstantOp):
            flat = op.value.reshape(-1)
            if flat.size and (flat == flat[0]).all() and not _negative_zero_mix(flat):
                return self.scalar_constant(flat[0], value.type.element)
            return self.load(self.constant_buffer(op), index, level)
        if op.has_trait(REDUCTION):
            return self.reduction(op, index, chain, level)
        if isinstance(op, T.MatmulOp):
            return self.matmul(op, index, chain, level)
        if isinstance(op, TI.GatherOp):
            return self.gather(op, index, chain, level)
        raise NotImplementedError(f"{op.name} cannot be computed inside a kernel")

    def gather(self, op, index, chain, level):
        """`op` (a kiln.gather) at `index`: its index operand at the gathered axes of `index`
        (computed in the kernel where fusion put it there), clamped into the axis as
        lower_indexed's gathers are (a failed check records its status and the code runs on),
        then one memref.load of the source, which is memory of its own (fusion.fusable)."""
        axis, rank = op.gather_axis, op.index.type.rank
        position = self.value(op.index, index[axis : axis + rank], chain)
        b = _LevelBuilder(level)
        size = op.source.type.shape[axis]
        position = b.op(AR.MaxSIOp, position, b.op(AR.ConstantOp, result_type=i64, value=0))
        position = b.op(AR.MinSIOp, position, b.op(AR.ConstantOp, result_type=i64, value=max(size - 1, 0)))
        position = b.op(AR.IndexCastOp, position, result_type=index_type)
        source = op.source
        producer = getattr(source, "op", None)
        if producer is not None and self.inside(producer):  # a constant, copied into the kernel
            view = self.constant_buffer(producer)
        else:
            view = self.outside(source)
        where = indexed_address(b, view, index[:axis], self.ivs, position, index[axis + rank :])
        return b.op(MR.LoadOp, view.buffer, *where)

    def constant_buffer(self, op) -> View:
        """The memref.global of constant `op`, read once per kernel at its outermost level."""
        if op not in self.outer.memo:
            self.outer.memo[op] = View.identity(self.outer.insert(self.constant_view(op)).result)
        return self.outer.memo[op]

    def inside(self, op) -> bool:
        return op in self.members

    def load(self, view: View, index, level):
        operands, amap = access(view.through(index).exprs, self.ivs)
        return level.insert(A.LoadOp([view.buffer, *operands], {"map": amap})).result

    def scalar_constant(self, scalar, element):
        value = bool(scalar) if element.is_bool else (float(scalar) if element.is_float else int(scalar))
        value, element = AR.signless_value(value, element), element.signless
        key = ("constant", element, value if not (element.is_float and np.signbit(scalar)) else ("neg", value))
        if key not in self.outer.memo:
            self.outer.memo[key] = self.outer.insert(AR.ConstantOp([], {"value": value}, [element])).result
        return self.outer.memo[key]

    # -- loops of their own ------------------------------------------------------------
    def accumulate(self, extents, init, level, chain, step):
        """Nested loops over `extents` carrying one accumulator; `step(index_dims, chain, acc)`
        returns the next value. Returns the final accumulator."""
        loops, carried, block = [], init, None
        new_chain = list(chain[: _position(level, chain) + 1])
        dims = []
        for k, extent in enumerate(extents):
            loop = A.ForOp.create(
                0,
                extent,
                inits=[carried],
                iv_name=self.fresh_name(REDUCTION_NAMES[k] if k < len(REDUCTION_NAMES) else "r"),
            )
            if block is not None:
                block.append(loop)
            loops.append(loop)
            self.ivs.append(loop.induction_variable)
            dims.append(len(self.ivs) - 1)
            block = loop.body
            carried = loop.body.args[1]
            new_chain.append((dims[-1], Level(block, 0)))
        # The body first: what it needs at outer levels (a row maximum, say) is inserted
        # there before the reduction loop itself is.
        new = step([Dim(d) for d in dims], new_chain, carried)
        for loop in reversed(loops):
            loop.body.append(A.YieldOp([new], {}))
            new = loop.results[0]
        if loops:
            level.insert(loops[0])
        return new

    def reduction(self, op, index, chain, level):
        source, axes, element = op.operand.type, op.axes, op.operand.type.element

        def element_at(reduced, inner_chain):
            fresh = iter(reduced)
            operand_index_ = []
            kept_iter = iter(index)
            for axis in range(source.rank):
                if axis in axes:
                    operand_index_.append(next(fresh))
                    if op.keepdims:
                        next(kept_iter)
                else:
                    operand_index_.append(next(kept_iter))
            return self.value(op.operand, tuple(operand_index_), inner_chain)

        extents = [source.shape[a] for a in axes]
        whole = level is self.outer  # the whole kernel is this one sum
        # A GPU spreads a row's sum over a block's threads (passes/gpu_reduction_schedule.py):
        # a strided share per thread, then a tree across them, from the plain loop.
        row = (
            self.grid_sums
            and axes == (source.rank - 1,)
            and level in self.result_levels
            and self._reads_along_rows(op.operand, source.rank)
        )
        if isinstance(op, T.ReduceSumOp) and element.is_float and not (whole and self.grid_sums) and not row:
            return self.float_sum(extents, level, chain, element_at, element)
        init = self.scalar_constant(reduction_identity(type(op), element), element)

        def step(reduced, inner_chain, acc):
            element_value = element_at(reduced, inner_chain)
            builder = _LevelBuilder(inner_chain[-1][1] if reduced else level)
            return REDUCTION_COMBINE[type(op)](builder, op, element, acc, element_value)

        return self.accumulate(extents, init, level, chain, step)

    def _reads_along_rows(self, value, rank) -> bool:
        """Whether `value` (of `rank` dims), at any index, reads memory only where its last
        dim moves along the last axis of each buffer: a row of memory, which a block's
        threads read coalesced. Computed only from elementwise ops and views of inputs."""
        last = Dim(rank - 1)
        pending, seen = [(value, tuple(Dim(k) for k in range(rank)))], set()
        while pending:
            v, index = self.through_views(*pending.pop())
            if (v, index) in seen:
                continue
            seen.add((v, index))
            op = getattr(v, "op", None)
            if op is None or not self.inside(op):
                exprs = self.outside(v).through(index).exprs
            elif isinstance(op, T.ConstantOp):
                exprs = index
            elif op.has_trait(ELEMENTWISE):
                pending.extend((o, index) for o in op.operands)
                continue
            elif last.index not in dims_of(*index):  # computed once a row (softmax's maximum)
                continue
            else:  # a reduction or matmul per element of the sum: keep the tree
                return False
            if any(last.index in dims_of(e) for e in exprs[:-1]):
                return False
        return True

    # -- float sums: a summation tree -----------------------------------------------------
    def float_sum(self, extents, level, chain, element_at, element):
        """The float sum of `element_at(index, chain)` over `extents`, as a tree of loops.

        Adding n numbers one after another into one accumulator loses about n/2 ulp when
        they share a sign; numpy's pairwise summation about log2(n). Here no accumulator
        takes more than a few hundred additions: each reduced axis is its own level (a
        fresh accumulator per iteration of the loops outside it), an axis of
        STREAMS * STREAM_MIN to LEAF elements runs in STREAMS interleaved accumulators over
        contiguous quarters (independent chains: they also keep the adder busy), and an
        axis longer than LEAF is cut into blocks of LEAF * FANOUT**k elements, FANOUT at most per
        level (an axis with reduced axes inside it into min-bounded levels, so those are
        written once). Every level starts at zero and adds the sum of the level below, so the
        error grows with the number of levels, O(log n), whatever the schedule does with
        the loops inside a level."""
        zero = self.scalar_constant(0.0, element)

        def add(at, a, b):
            return at.insert(AR.AddFOp([a, b], {})).result

        def axes_from(k, offsets, at, at_chain, extent=None, offset=0):
            """The sum over axes k and after; axis k over [offset, offset + extent) (default: all)."""
            if k == len(extents):
                return element_at(offsets, at_chain)
            sum_axis = self._axis_sum if k == len(extents) - 1 else self._outer_axis_sum
            return sum_axis(
                extents[k] if extent is None else extent,
                offset,
                at,
                at_chain,
                zero,
                add,
                lambda i, lv, ch: axes_from(k + 1, offsets + [i], lv, ch),
                k,
            )

        if not extents:  # a sum over no axes still starts at 0.0, as numpy's: -0.0 sums to 0.0
            return add(level, zero, element_at([], chain))
        chunks = _chunks(extents) if level is self.outer else 0
        if chunks:
            return self._chunked_sum(extents, chunks, level, chain, add, axes_from, element)
        if level is self.outer and len(extents) == 1 and extents[0] >= STREAMS * STREAM_MIN:
            # A whole-tensor sum: one top-level nest (kernels are numbered by their nests),
            # so the tree goes in a loop of one iteration.
            (total,) = self._loop(
                1, [zero], level, chain, "sum", lambda i, lv, ch, accs: [add(lv, accs[0], axes_from(0, [], lv, ch))]
            )
            return total
        return axes_from(0, [], level, chain)

    def _chunked_sum(self, extents, chunks, level, chain, add, axes_from, element):
        """A whole-tensor sum in `chunks` equal slices of its first axis, each a summation tree
        of its own stored to a small buffer by one iteration of a loop with no iter_args (so
        the default schedule runs it on the thread pool), then the slices' sums added
        pairwise; a sum of 1e7 float32::

            %partials = memref.alloca() : memref<16xf32>
            affine.for %k0.sum = 0 to 16 {
              ... the tree over x[%k0.sum * 625000 + ...] ...
              affine.store %s, %partials[%k0.sum] : memref<16xf32>
            }
            %a = affine.load %partials[0] : memref<16xf32>
            ... 15 more, added pairwise ...
        """
        size = extents[0] // chunks
        partials = level.insert(MR.AllocaOp([], {}, [MemRefType((chunks,), element)])).result
        MR.set_buffer_name(partials, "partials")

        def body(i, inner, inner_chain, _):
            total = axes_from(0, [], inner, inner_chain, size, i * size)
            operands, amap = access((i,), self.ivs)
            inner.insert(A.StoreOp([total, partials, *operands], {"map": amap}))
            return []

        self._loop(chunks, [], level, chain, "sum", body)
        sums = [self.load(View.identity(partials), (Const(k),), level) for k in range(chunks)]
        while len(sums) > 1:
            sums = [add(level, a, b) for a, b in zip(sums[::2], sums[1::2])] + sums[len(sums) // 2 * 2 :]
        return sums[0]

    def _axis_sum(self, extent, offset, level, chain, zero, add, term, axis, streams=STREAMS):
        """Sum of `term(i, level, chain)` for i in [offset, offset + extent), computed at `level`.
        The leaves of a longer axis read one contiguous stream (`streams` 1): four streams
        512 bytes apart halved the speed of sums that stream from memory, as the
        hardware prefetcher follows them worse; an axis that fits one leaf (a row) keeps
        its four accumulators, whose independent chains are what pays in cache."""
        name = REDUCTION_NAMES[axis] if axis < len(REDUCTION_NAMES) else "r"
        leaf = LEAF // STREAMS * streams  # each accumulator adds at most LEAF // STREAMS terms
        if extent < streams * STREAM_MIN:
            (total,) = self._loop(
                extent, [zero], level, chain, name, lambda i, lv, ch, accs: [add(lv, accs[0], term(i + offset, lv, ch))]
            )
            return total
        if extent <= leaf:
            length = extent // streams
            partials = self._loop(
                length,
                [zero] * streams,
                level,
                chain,
                name,
                lambda i, lv, ch, accs: [
                    add(lv, acc, term(i + (offset + k * length), lv, ch)) for k, acc in enumerate(accs)
                ],
            )
            while len(partials) > 1:  # pairwise: (a0 + a1) + (a2 + a3)
                partials = [add(level, a, b) for a, b in zip(partials[::2], partials[1::2])]
            total, done = partials[0], streams * length
        else:
            size = leaf
            while size * FANOUT < extent:
                size *= FANOUT
            blocks, done = extent // size, extent // size * size

            def block(i, lv, ch, accs):
                inner = self._axis_sum(size, i * size + offset, lv, ch, zero, add, term, axis, 1)
                return [add(lv, accs[0], inner)]

            if blocks == 1:
                total = self._axis_sum(size, offset, level, chain, zero, add, term, axis, 1)
            else:
                (total,) = self._loop(blocks, [zero], level, chain, f"{name}.b", block)
        if done < extent:
            total = add(
                level, total, self._axis_sum(extent - done, offset + done, level, chain, zero, add, term, axis, streams)
            )
        return total

    def _outer_axis_sum(self, extent, offset, level, chain, zero, add, term, axis):
        """Sum of `term(i, level, chain)` for i in [offset, offset + extent), for an axis with
        more reduced axes inside: levels of FANOUT blocks whose last block ends at a ``min``
        bound, so the loops inside (the term) are written once, with no tail loops."""
        name = REDUCTION_NAMES[axis] if axis < len(REDUCTION_NAMES) else "r"
        sizes = [1]
        while sizes[-1] * FANOUT < extent:
            sizes.append(sizes[-1] * FANOUT)
        sizes.reverse()

        def nest(k, base, at, at_chain):
            size, operands = sizes[k], []
            if k == 0:
                bound = -(-extent // size)
            else:  # min(FANOUT, ceil((extent - base) / size))
                operands, amap = access((ceildiv(base * -1 + extent, size),), self.ivs)
                bound = (Const(FANOUT),) + amap.results

            def body(i, lv, ch, accs):
                start = base + i * size
                value = term(start + offset, lv, ch) if size == 1 else nest(k + 1, start, lv, ch)
                return [add(lv, accs[0], value)]

            (total,) = self._loop(bound, [zero], at, at_chain, name if size == 1 else f"{name}.b", body, operands)
            return total

        return nest(0, Const(0), level, chain)

    def _loop(self, count, inits, level, chain, name, body, bound_operands=()):
        """One affine.for over [0, count) carrying `inits`, inserted at `level` (`count` an int,
        or bounds over `bound_operands` as in ForOp.create); `body(iv_expr, level, chain,
        accumulators)` fills it and returns what it yields."""
        loop = A.ForOp.create(
            0, count, inits=list(inits), iv_name=self.fresh_name(name), bound_operands=list(bound_operands)
        )
        self.ivs.append(loop.induction_variable)
        inner = Level(loop.body, 0)
        inner_chain = list(chain[: _position(level, chain) + 1]) + [(len(self.ivs) - 1, inner)]
        new = body(Dim(len(self.ivs) - 1), inner, inner_chain, list(loop.body.args[1:]))
        loop.body.append(A.YieldOp(new, {}))
        level.insert(loop)
        return list(loop.results)

    def matmul(self, op, index, chain, level):
        """Sum of products; for bools numpy's OR of ANDs (an i1 add would be XOR)."""
        element = op.result.type.element
        init = self.scalar_constant(reduction_identity(T.ReduceSumOp, element), element)
        batch, m, n = list(index[:-2]), index[-2], index[-1]

        def step(reduced, inner_chain, acc):
            (k,) = reduced
            a = self.value(op.lhs, tuple(batch + [m, k]), inner_chain)
            b = self.value(op.rhs, tuple(batch + [k, n]), inner_chain)
            builder = _LevelBuilder(inner_chain[-1][1])
            if element.is_bool:
                return builder.op(AR.OrIOp, acc, builder.op(AR.AndIOp, a, b))
            product = SCALAR_RULES[T.MulOp](builder, op, element, a, b)
            return SCALAR_RULES[T.AddOp](builder, op, element, acc, product)

        return self.accumulate([op.lhs.type.shape[-1]], init, level, chain, step)


class _LevelBuilder:
    """The slice of AffineBuilder the scalar rules use, inserting at a Level."""

    def __init__(self, level: Level):
        self.level = level

    def op(self, op_class, *operands, result_type=None, **attributes):
        op = op_class(list(operands), attributes or None, None if result_type is None else [result_type])
        return self.level.insert(op).result

    def check(self, condition, message: str, loc) -> None:
        """A cf.assert at the user's `loc`: the run time reports `message` where `condition` is false."""
        self.level.insert(CF.AssertOp([condition], {"msg": message}, loc=loc))


def _chunks(extents) -> int:
    """How many equal slices of its first axis a whole-tensor sum over `extents` runs in: the
    largest divisor of that axis up to CHUNKS that leaves CHUNK_MIN elements a slice; 0 (one
    tree, on one thread) when none does, a prime length say."""
    count = int(np.prod(extents)) if extents else 0
    for chunks in range(min(CHUNKS, extents[0] if extents else 0), 1, -1):
        if extents[0] % chunks == 0 and count // chunks >= CHUNK_MIN:
            return chunks
    return 0


def _position(level, chain) -> int:
    for k, (_, candidate) in enumerate(chain):
        if candidate is level:
            return k
    return -1


def _negative_zero_mix(flat) -> bool:
    return flat.dtype.kind == "f" and bool(np.signbit(flat).any() != np.signbit(flat).all())
