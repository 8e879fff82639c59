"""Loop vectorization: a loop's iterations, `width` at a time, as explicit vector code.

Every value in the body that depends on the loop variable becomes a vector of
`width` lanes; the rest stay scalars and are broadcast where they meet vectors.
Loads and stores that move along the loop's contiguous (last) memref dimension
become ``affine.vector_load``/``affine.vector_store``; accesses that do not
depend on the loop are scalar; a store that moves along another dimension
is done lane by lane (``vector.extract``, a scatter), which lets a loop
over a column of the output vectorize when its loads are contiguous. Loops inside the vectorized loop stay loops and
carry vectors (a matmul's reduction over k, vectorized along j). A reduction
carried by the vectorized loop itself gets a vector accumulator and one
``vector.reduction`` at the end; one whose order does not matter (a max, an
integer sum) gets STREAMS of them, over consecutive vectors, so that the
additions or comparisons do not wait for one another. The ``N mod width`` last
iterations run in a scalar remainder loop. Before::

    func.func @scale(%x: memref<4x20xf32>, %c: memref<f32>, %out0: memref<4x20xf32>) attributes {kiln.buffers = ["x", "c", "out0"]} {
      affine.for %k0.i = 0 to 4 {
        affine.for %k0.j = 0 to 20 {
          %0 = affine.load %x[%k0.i, %k0.j] : memref<4x20xf32>
          %1 = affine.load %c[] : memref<f32>
          %2 = arith.mulf %0, %1 : f32
          affine.store %2, %out0[%k0.i, %k0.j] : memref<4x20xf32>
        } {kiln.loop = "k0.j"}
      } {kiln.loop = "k0.i"}
      func.return
    }

After ``vectorize(k0.j, 8)``::

    func.func @scale(%x: memref<4x20xf32>, %c: memref<f32>, %out0: memref<4x20xf32>) attributes {kiln.buffers = ["x", "c", "out0"]} {
      affine.for %k0.i = 0 to 4 {
        affine.for %k0.j = 0 to 2 {
          %0 = affine.vector_load %x[%k0.i, %k0.j * 8] : memref<4x20xf32>, vector<8xf32>
          %1 = affine.load %c[] : memref<f32>
          %2 = vector.broadcast %1 : f32 to vector<8xf32>
          %3 = arith.mulf %0, %2 : vector<8xf32>
          affine.vector_store %3, %out0[%k0.i, %k0.j * 8] : memref<4x20xf32>, vector<8xf32>
        } {kiln.loop = "k0.j"}
        affine.for %k0.j.tail = 0 to 4 {
          %4 = affine.load %x[%k0.i, %k0.j.tail + 16] : memref<4x20xf32>
          %5 = affine.load %c[] : memref<f32>
          %6 = arith.mulf %4, %5 : f32
          affine.store %6, %out0[%k0.i, %k0.j.tail + 16] : memref<4x20xf32>
        } {kiln.loop = "k0.j.tail"}
      } {kiln.loop = "k0.i"}
      func.return
    }
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import cf as CF
from kiln.dialects import math as M
from kiln.dialects import memref as MR
from kiln.dialects import vector as V
from kiln.dialects.affine import loop_name
from kiln.dialects.affine_expr import AffineMap, Binary, Dim, dims_of, linear_form, substitute
from kiln.dialects.ir import Operation
from kiln.dialects.rewriter import InsertPoint, OpList, Rewriter
from kiln.dialects.traits import AFFINE_READ
from kiln.dialects.types import VectorType, element_of, i1, index

from .loop_transforms import ScheduleError, remainder_loop, replace_loop

# The combining op of a reduction, and what vector.reduction calls it.
_REDUCTIONS = {
    AR.AddFOp: "add",
    AR.AddIOp: "add",
    AR.MulFOp: "mul",
    AR.MulIOp: "mul",
    AR.MaximumFOp: "maximumf",
    AR.MinimumFOp: "minimumf",
    AR.MaxSIOp: "maxsi",
    AR.MinSIOp: "minsi",
    AR.MaxUIOp: "maxui",
    AR.MinUIOp: "minui",
    AR.AndIOp: "and",
    AR.OrIOp: "or",
}


STREAMS = 4  # independent vector accumulators of a reduction (see vectorize)
# Reductions that give the same result in any order, and float sums: they run in several
# accumulators, so that their dependency chains overlap (a float maximum is several
# instructions on x86; a float add has a latency of 3 or 4 cycles and two adders). A
# float sum's result then differs in its last bits, not in its accuracy: each lane of each
# accumulator still adds a contiguous part of the leaf of kiln's summation tree. A float
# product keeps its one accumulator.
_ORDER_FREE = {"maximumf", "minimumf", "maxsi", "minsi", "maxui", "minui", "and", "or"}


def vectorize(loop, width: int, streams: int | None = None):
    """`streams` accumulators per reduction (default: STREAMS where the order does not
    matter and the loop is long enough, else 1); iteration k of the vector loop reads
    vectors k * streams + s for s < streams, and the vectors left over run in a one-stream
    vector loop before the scalar remainder."""
    name = loop_name(loop)
    if not isinstance(width, int) or width < 2:
        raise ScheduleError(f"vectorize({name}, {width!r}): the width must be an integer >= 2")
    if not loop.constant_bounds or loop.lower != 0 or loop.step != 1:
        raise ScheduleError(f"vectorize({name}): only loops with constant bounds from 0, step 1")
    count = loop.upper  # fewer than `width` iterations: all of them run in the remainder loop
    iv = loop.induction_variable
    dependent = _dependent_values(loop)
    reductions = [_reduction_kind(loop, k) for k in range(len(loop.inits))]
    if streams is None:
        free = all(_order_free(kind, element_of(init.type)) for init, kind in zip(loop.inits, reductions))
        streams = STREAMS if loop.inits and free and count // width >= 2 * STREAMS else 1

    prelude = _Widener(OpList(), iv, None, width, dependent)
    accumulators = [
        prelude.broadcast(prelude.constant(_identity(kind, element_of(init.type)), init.type))
        for _ in range(streams)
        for init, kind in zip(loop.inits, reductions)
    ]
    main = A.ForOp.create(0, count // (width * streams), inits=accumulators, iv_name=name)
    carried, yielded = len(loop.inits), []
    for stream in range(streams):
        widener = _Widener(main.body, iv, main.induction_variable, width, dependent, width * streams, stream * width)
        for old, new in zip(loop.body.args[1:], main.body.args[1 + stream * carried :]):
            widener.values[old] = new
        widener.widen_ops(loop.body.ops[:-1])
        yielded += [widener.vector_of(v) for v in loop.body.ops[-1].operands]
    main.body.append(A.YieldOp(yielded, {}))

    new_ops = prelude.block.ops + [main]
    finals = []
    for k, (init, kind) in enumerate(zip(loop.inits, reductions)):
        partials = list(main.results[k::carried])
        while len(partials) > 1:  # pairwise, lane by lane
            pairs = [
                _combine_op(kind, element_of(init.type))([a, b], {}) for a, b in zip(partials[::2], partials[1::2])
            ]
            new_ops += pairs
            partials = [op.result for op in pairs] + partials[len(pairs) * 2 :]
        total = V.ReductionOp(partials, {"kind": kind})
        combine = _combine_op(kind, element_of(init.type))([init, total.result], {})
        new_ops += [total, combine]
        finals.append(combine.result)
    results, tail = finals, None
    done = count // (width * streams) * width * streams
    if count > done:
        tail = remainder_loop(loop, done, finals)
        new_ops.append(tail)
        results = list(tail.results)
    replace_loop(loop, new_ops, results)
    if streams > 1 and tail is not None and tail.upper >= width:
        vectorize(tail, width, 1)
    if tail is None:
        for result in results:
            _sum_lanes_outside(result)
    return main


def _sum_lanes_outside(value) -> None:
    """A level of a summation tree whose terms are the lane sums of vectors (kiln's float sums:
    passes/kernel_emitter.py) adds the vectors instead, lane by lane, and sums the lanes once
    after its loop; then the level above it, and so on up the tree. Each lane is then a
    summation tree of its own, as deep as before, and a row of 1024 needs one horizontal sum
    instead of eight. Before (a level ``k0.r.b1`` around a vectorized leaf)::

        %s = affine.for %k0.r.b1 = 0 to 4 iter_args(%acc = %zero) -> (f32) {
          %v = affine.for %k0.r = ... -> (vector<16xf32>)
          %t = vector.reduction <add>, %v : vector<16xf32> into f32
          %u = arith.addf %zero, %t : f32
          %w = arith.addf %acc, %u : f32
          affine.yield %w : f32
        }

    After::

        %s4 = affine.for %k0.r.b1 = 0 to 4 iter_args(%acc = %zeros) -> (vector<16xf32>) {
          %v = affine.for %k0.r = ... -> (vector<16xf32>)
          %w = arith.addf %acc, %v : vector<16xf32>
          affine.yield %w : vector<16xf32>
        }
        %t = vector.reduction <add>, %s4 : vector<16xf32> into f32
        %s = arith.addf %zero, %t : f32
    """
    while True:
        lane_sum = _lane_sum(value)
        if lane_sum is None:
            return
        combine, total = lane_sum
        uses = combine.result.uses
        if len(uses) != 1 or not isinstance(uses[0][0], AR.AddFOp):
            return
        add = uses[0][0]
        level = _owner(add)
        yields = add.result.uses
        if not isinstance(level, A.ForOp) or not level.constant_bounds or len(yields) != 1:
            return
        yield_op, k = yields[0]
        accumulator = level.body.args[1 + k] if isinstance(yield_op, A.YieldOp) else None
        if accumulator is None or yield_op.parent is not level.body or combine.parent is not level.body:
            return
        if set(add.operands) != {accumulator, combine.result} or len(accumulator.uses) != 1:
            return
        if not _is_zero(level.inits[k]):
            return
        value = _widen_level(level, k, add, combine, total)


def _owner(op):
    """The op whose region holds `op`'s block, or None."""
    region = getattr(op.parent, "parent", None)
    return getattr(region, "parent", None)


def _lane_sum(value):
    """(``%zero + %t``, ``%t = vector.reduction <add>``) if `value` is such a sum, else None."""
    combine = getattr(value, "op", None)
    if not isinstance(combine, AR.AddFOp) or not _is_zero(combine.operands[0]):
        return None
    total = getattr(combine.operands[1], "op", None)
    if not isinstance(total, V.ReductionOp) or total.attributes["kind"] != "add" or len(total.result.uses) != 1:
        return None
    return combine, total


def _is_zero(value) -> bool:
    op = getattr(value, "op", None)
    return isinstance(op, AR.ConstantOp) and op.attributes["value"] == 0 and not np.signbit(op.attributes["value"])


def _widen_level(level, k, add, combine, total):
    """`level` carrying the vectors of `total` in its iter_arg k; returns the new lane sum."""
    vector = total.operands[0]
    zero = combine.operands[0]
    prelude = [V.BroadcastOp([zero], {}, [vector.type])]
    inits = list(level.inits)
    inits[k] = prelude[0].result
    widened = A.ForOp.create(level.lower, level.upper, level.step, inits, loop_name(level))
    for old, new in zip(level.body.args, widened.body.args):
        old.replace_all_uses_with(new)
    Rewriter.inline_block(level.body, InsertPoint.at_end(widened.body))
    lanes = AR.AddFOp([widened.body.args[1 + k], vector], {})
    yield_op = widened.body.ops[-1]
    Rewriter.insert(lanes, InsertPoint.before(add))
    yield_op.set_operand(k, lanes.result)
    for op in (add, combine, total):
        op.erase()
    reduced = V.ReductionOp([widened.results[k]], {"kind": "add"})
    final = AR.AddFOp([zero, reduced.result], {})
    results = list(widened.results)
    results[k] = final.result
    replace_loop(level, prelude + [widened, reduced, final], results)
    return final.result


def _order_free(kind: str, element) -> bool:
    """Whether the reduction may run in several accumulators."""
    return kind in _ORDER_FREE or kind == "add" or (kind == "mul" and not element.is_float)


def _dependent_values(loop) -> set:
    """Values in the loop that differ from one iteration to the next (fixed point over iter_args)."""
    iv = loop.induction_variable
    dependent = set(loop.body.args[1:])  # the loop's own accumulators
    changed = True
    while changed:
        changed = False
        for op in loop.walk():
            if op is loop:
                continue
            grows = any(v in dependent for v in op.operands)
            if op.has_trait(AFFINE_READ) and iv in op.indices:
                grows = True
            if isinstance(op, A.ApplyOp) and iv in op.operands:  # a computed index along the loop
                grows = True
            if isinstance(op, A.ForOp):
                for arg, init, result, yielded in zip(op.body.args[1:], op.inits, op.results, op.body.ops[-1].operands):
                    if (init in dependent or yielded in dependent) and arg not in dependent:
                        dependent.update((arg, result))
                        changed = True
                continue
            if grows:
                for r in op.results:
                    if r not in dependent:
                        dependent.add(r)
                        changed = True
    return dependent


def _reduction_kind(loop, k: int) -> str:
    arg = loop.body.args[1 + k]
    yielded = loop.body.ops[-1].operands[k]
    op = getattr(yielded, "op", None)
    if type(op) in _REDUCTIONS and arg in op.operands and all(u is op for u, _ in arg.uses):
        if A.partials_escape(loop, op):
            raise ScheduleError(f"vectorize({loop_name(loop)}): its iter_arg #{k} is a scan, whose every step is read")
        return _REDUCTIONS[type(op)]
    raise ScheduleError(
        f"vectorize({loop_name(loop)}): its iter_arg #{k} is not a sum, product, "
        "max, min, and or or of the values it carries"
    )


def _identity(kind: str, t):
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if kind in ("and", "or"):
        return kind == "and"
    if t.is_float:
        return -np.inf if kind == "maximumf" else np.inf
    if kind in ("maxui", "minui"):  # the signless bits of 0 and of the unsigned maximum
        return 0 if kind == "maxui" else -1
    info = np.iinfo(t.dtype)
    return int(info.min if kind == "maxsi" else info.max)


def _combine_op(kind: str, t):
    for cls, name in _REDUCTIONS.items():
        if name == kind and (cls.allowed == AR.FLOATS) == t.is_float:
            return cls
    raise AssertionError(kind)


class _Widener:
    """Widens a loop body: the old loop variable reads as new_iv * stride + offset + lane."""

    def __init__(self, block, old_iv, new_iv, width, dependent, stride=None, offset=0):
        self.block = block
        self.old_iv = old_iv
        self.new_iv = new_iv
        self.width = width
        self.stride = width if stride is None else stride
        self.offset = offset
        self.dependent = dependent
        self.values = {}
        # affine.apply results along the loop, as their lane-0 index: only a memref.load's
        # last index may use one (a vector.load of consecutive elements)
        self.lane_indices = {}

    def emit(self, op):
        self.block.append(op)
        return op

    def constant(self, value, t):
        element = element_of(t)
        value = bool(value) if element == i1 else (float(value) if element.is_float else int(value))
        return self.emit(AR.ConstantOp([], {"value": value}, [element])).result

    def broadcast(self, scalar):
        return self.emit(V.BroadcastOp([scalar], {}, [VectorType(self.width, scalar.type)])).result

    def get(self, value):
        return self.values.get(value, value)

    def vector_of(self, value):
        new = self.get(value)
        return new if isinstance(new.type, VectorType) else self.broadcast(new)

    def widen_ops(self, ops) -> None:
        for op in ops:
            self.widen(op)

    def widen(self, op) -> None:
        if isinstance(op, A.ApplyOp) and self.old_iv in op.operands:
            return self.lane_index(op)
        if isinstance(op, MR.LoadOp) and op.indices[-1] in self.lane_indices:
            return self.row_load(op)
        if isinstance(op, MR.LoadOp) and self._gathered(op):
            return self.gather(op)
        if any(v in self.lane_indices for v in op.operands):
            raise ScheduleError(f"cannot vectorize a loop indexing memory through a computed index ({op.name})")
        if isinstance(op, A.LoadOp):
            return self.load(op)
        if isinstance(op, A.StoreOp):
            return self.store(op)
        if isinstance(op, A.ForOp):
            return self.nested_loop(op)
        if isinstance(op, (A.VectorLoadOp, A.VectorStoreOp, A.ParallelOp, V.BroadcastOp, V.ReductionOp, V.ExtractOp)):
            raise ScheduleError(f"cannot vectorize a loop containing {op.name}")
        indexed = op.name in ("memref.load", "memref.store", "affine.apply")
        if indexed and (op.name == "memref.store" or any(v is self.old_iv or v in self.dependent for v in op.operands)):
            # a load or store through a computed index has no contiguous vector form
            raise ScheduleError(f"cannot vectorize a loop indexing memory through a computed index ({op.name})")
        if not any(v in self.dependent for v in op.operands):
            copy = op.clone(self.values)
            return self.emit(copy)
        if isinstance(op, M.IPowIOp):
            raise ScheduleError("cannot vectorize math.ipowi (integer powers)")
        if isinstance(op, CF.AssertOp):  # every lane must hold
            every = self.emit(V.ReductionOp([self.vector_of(op.condition)], {"kind": "and"})).result
            self.emit(CF.AssertOp([every], dict(op.attributes), loc=op.loc))
            return None
        operands = [self.vector_of(v) for v in op.operands]
        if isinstance(op, AR.SelectOp):
            operands[0] = self.vector_of(op.operands[0])
        result = op.results[0]
        t = VectorType(self.width, result.type)
        copy = type(op)(operands, dict(op.attributes), None if _inferred(op) else [t])
        copy.verify()
        self.emit(copy)
        self.values[result] = copy.result

    def lane_index(self, op) -> None:
        """An affine.apply of the loop variable (a gather's position along a row) at lane 0;
        its lanes must be consecutive (coefficient 1), for a vector.load to read them."""
        if any(v in self.dependent for v in op.operands) or len(op.map.results) != 1:
            raise ScheduleError(f"cannot vectorize a loop indexing memory through a computed index ({op.name})")
        k = op.operands.index(self.old_iv)
        if _coefficient(op.map.results[0], k) != 1 or op.operands.count(self.old_iv) != 1:
            raise ScheduleError("cannot vectorize: a computed index is strided along the loop (not contiguous)")
        result = substitute(
            op.map.results[0],
            [Dim(d) * self.stride + self.offset if d == k else Dim(d) for d in range(len(op.operands))],
        )
        operands = [self.new_iv if v is self.old_iv else self.get(v) for v in op.operands]
        copy = self.emit(A.ApplyOp(operands, {"map": AffineMap(len(operands), (result,))}))
        self.lane_indices[op.result] = copy.result

    def row_load(self, op) -> None:
        """memref.load whose last index moves with the loop (and no other does): a vector.load
        of `width` consecutive elements from the lane-0 index."""
        if any(v is self.old_iv or v in self.dependent for v in [op.memref, *op.indices[:-1]]):
            raise ScheduleError(f"cannot vectorize a loop indexing memory through a computed index ({op.name})")
        indices = [self.get(v) for v in op.indices[:-1]] + [self.lane_indices[op.indices[-1]]]
        copy = MR.VectorLoadOp([self.get(op.memref), *indices], {}, [VectorType(self.width, op.result.type)])
        self.emit(copy)
        self.values[op.result] = copy.result

    def _gathered(self, op) -> bool:
        """A memref.load whose position the loop computes (an index read from memory, in
        some lanes' dims) from a memref it does not: a vector.gather."""
        moving = [v for v in op.indices if v is self.old_iv or v in self.dependent]
        return bool(moving) and op.memref not in self.dependent and not any(v in self.lane_indices for v in op.indices)

    def gather(self, op) -> None:
        """vector.gather of a memref.load through computed indices: the dims whose index is
        the same in every lane stay the base's indices, the others (vectors of index)
        become each lane's offset, index times the dim's stride, summed."""
        t = op.memref.type
        zero, offsets, indices = None, None, []
        for value, stride in zip(op.indices, t.strides):
            if value is not self.old_iv and value not in self.dependent:
                indices.append(self.get(value))
                continue
            if zero is None:
                zero = self.emit(AR.ConstantOp([], {"value": 0}, [index])).result
            indices.append(zero)
            term = self.vector_of(value)
            if stride != 1:
                scale = self.broadcast(self.emit(AR.ConstantOp([], {"value": stride}, [index])).result)
                term = self.emit(AR.MulIOp([term, scale], {})).result
            offsets = term if offsets is None else self.emit(AR.AddIOp([offsets, term], {})).result
        true = self.emit(AR.ConstantOp([], {"value": True}, [i1])).result
        mask = self.broadcast(true)
        pass_thru = self.broadcast(self.constant(0, t.element))
        copy = self.emit(V.GatherOp([self.get(op.memref), offsets, mask, pass_thru, *indices], {}))
        self.values[op.result] = copy.result

    def _index(self, op, lane=0, contiguous=True):
        """The access's index with the loop variable read as new_iv * stride + offset + lane."""
        indices = [self.get(v) for v in op.indices]
        results = op.map.results
        if self.old_iv not in op.indices:
            return indices, results, False
        k = op.indices.index(self.old_iv)
        indices[k] = self.new_iv
        results = tuple(
            substitute(
                r, [Dim(d) * self.stride + (self.offset + lane) if d == k else Dim(d) for d in range(len(indices))]
            )
            for r in results
        )
        if contiguous:
            for r in results[:-1]:
                if _coefficient(r, k) != 0 and not self._lane_invariant(r, k):
                    raise ScheduleError("cannot vectorize: an access moves along a non-contiguous dimension")
            if _coefficient(results[-1], k) != self.stride and not self._lanes_in_one_row(results[-1], k):
                raise ScheduleError("cannot vectorize: an access is strided along the loop (not contiguous)")
        return indices, results, True

    # A reshape's index splits a loop variable q into (q floordiv n, q mod n) (see
    # kiln.dialects.affine_expr.divide_in_range). Where n holds whole vectors and lane 0 sits
    # at a multiple of the width, a vector's lanes share q floordiv n and take consecutive
    # q mod n: the vector is contiguous, within one row.

    def _aligned(self, expr, k) -> bool:
        """`expr` (lane 0's, the loop variable substituted) is linear, moves one element a
        lane, and is a multiple of the width for every value of the other dimensions."""
        form = linear_form(expr)
        if form is None or form[0].get(k, 0) != self.stride:
            return False
        return form[1] % self.width == 0 and all(c % self.width == 0 for c in form[0].values())

    def _lane_invariant(self, expr, k) -> bool:
        """Whether `expr` has one value in every lane: the loop variable appears in it only
        inside floordivs, by multiples of the width, of aligned expressions."""
        if k not in dims_of(expr):
            return True
        if not isinstance(expr, Binary):
            return False
        if expr.kind == "floordiv" and expr.rhs.value % self.width == 0 and self._aligned(expr.lhs, k):
            return True
        return expr.kind != "ceildiv" and all(self._lane_invariant(c, k) for c in expr.children())

    def _lanes_in_one_row(self, expr, k) -> bool:
        """Whether `expr` is `e mod n` whose lanes are consecutive: e aligned, n whole vectors."""
        return (
            isinstance(expr, Binary)
            and expr.kind == "mod"
            and expr.rhs.value % self.width == 0
            and self._aligned(expr.lhs, k)
        )

    def load(self, op):
        indices, results, moves = self._index(op)
        amap = AffineMap(len(indices), results)
        if not moves:
            copy = A.LoadOp([self.get(op.memref), *indices], {"map": amap})
        else:
            copy = A.VectorLoadOp(
                [self.get(op.memref), *indices], {"map": amap}, [VectorType(self.width, op.result.type)]
            )
        self.emit(copy)
        self.values[op.result] = copy.result

    def store(self, op):
        try:
            indices, results, moves = self._index(op)
        except ScheduleError:  # not contiguous: one store per lane (a scatter)
            value = self.vector_of(op.operands[0])
            for lane in range(self.width):
                indices, results, _ = self._index(op, lane, contiguous=False)
                scalar = self.emit(V.ExtractOp([value], {"position": lane})).result
                self.emit(A.StoreOp([scalar, self.get(op.memref), *indices], {"map": AffineMap(len(indices), results)}))
            return
        if not moves:
            raise ScheduleError("cannot vectorize: every iteration would store to the same element")
        value = self.vector_of(op.operands[0])
        self.emit(A.VectorStoreOp([value, self.get(op.memref), *indices], {"map": AffineMap(len(indices), results)}))

    def nested_loop(self, op):
        if any(v is self.old_iv or v in self.dependent for v in op.bound_operands):
            # Each lane would run its own number of iterations (a split's partial tile).
            raise ScheduleError(f"cannot vectorize: the bounds of {loop_name(op)}, inside it, depend on it")
        inits = [
            self.vector_of(v) if (a in self.dependent) else self.get(v) for a, v in zip(op.body.args[1:], op.inits)
        ]
        bounds = op.upper if op.constant_bounds else op.upper_map.results
        inner = A.ForOp.create(
            op.lower, bounds, op.step, inits, loop_name(op), [self.get(v) for v in op.bound_operands]
        )
        self.values[op.induction_variable] = inner.induction_variable
        for old, new in zip(op.body.args[1:], inner.body.args[1:]):
            self.values[old] = new
        outer_block, self.block = self.block, inner.body
        self.widen_ops(op.body.ops[:-1])
        yielded = [
            self.vector_of(v) if a in self.dependent else self.get(v)
            for a, v in zip(op.body.args[1:], op.body.ops[-1].operands)
        ]
        inner.body.append(A.YieldOp(yielded, {}))
        self.block = outer_block
        self.emit(inner)
        for old, new in zip(op.results, inner.results):
            self.values[old] = new


def _inferred(op) -> bool:
    return type(op).infer_result_types is not Operation.infer_result_types


def _coefficient(expr, k) -> int:
    form = linear_form(expr)
    if form is None:
        return -1
    return form[0].get(k, 0)
