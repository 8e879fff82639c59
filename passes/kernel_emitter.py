"""Emit one kernel: a loop nest over its result that computes every value of
the group where it is needed.

The nest has one loop per result dimension. A value is computed at an index
(affine expressions of loop variables), at the outermost loop level that
index depends on, and at most once per level and index: a row reduction
consumed through a broadcast lands in the row loop before the column loop, and
``exp(x - m)`` needed by a sum and by a division is computed in each. Reductions
and matmuls open loops of their own, carrying accumulators in ``iter_args``.
"""
from __future__ import annotations

import numpy as np

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import tensor as T
from kiln.dialects.affine_expr import Dim, dims_of

from .affine_builder import REDUCTION_NAMES, LOOP_NAMES, View, access
from .index_maps import operand_index
from .scalar_rules import REDUCTION_COMBINE, SCALAR_RULES, reduction_identity


class Level:
    """Where ops computed at one loop depth go: in `block`, before the nested loop."""

    def __init__(self, block, position: int):
        self.block = block
        self.position = position
        self.memo = {}

    def insert(self, op):
        self.block.ops.insert(self.position, op)
        op.parent = self.block
        self.position += 1
        return op


class KernelEmitter:
    """Lower one group. `outside(value)` gives the View of a value the group reads."""

    def __init__(self, function_block, members, outside, constant_view):
        self.function_block = function_block
        self.members = members          # the ops computed inside this kernel
        self.outside = outside          # value -> View, for everything else it reads
        self.constant_view = constant_view  # constant op -> an op reading its memref.global
        self.ivs = []  # loop variables; Dim(k) in an index means ivs[k]
        self.loop_names = set()  # unique within the kernel, so schedules can name loops

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
        """The scalar `value` at `index` (a tuple of expressions over self.ivs)."""
        level = self.level_for(index, chain)
        key = (value, index)
        if key not in level.memo:
            level.memo[key] = self._compute(value, index, chain, level)
        return level.memo[key]

    def _compute(self, value, index, chain, level):
        op = getattr(value, "op", None)
        if op is None or not self.inside(op):
            return self.load(self.outside(value), index, level)
        if isinstance(op, T.ConstantOp):
            flat = op.value.reshape(-1)
            if flat.size and (flat == flat[0]).all() and not _negative_zero_mix(flat):
                return self.scalar_constant(flat[0], value.type.element)
            if op not in self.outer.memo:
                self.outer.memo[op] = View.identity(self.outer.insert(self.constant_view(op)).result)
            return self.load(self.outer.memo[op], index, level)
        if isinstance(op, T.VIEW_OPS):
            return self.value(op.operand, operand_index(op, index), chain)
        if isinstance(op, T.ELEMENTWISE_OPS):
            scalars = [self.value(v, index, chain) for v in op.operands]
            builder = _LevelBuilder(level)
            return SCALAR_RULES[type(op)](builder, op, op.operands[0].type.element, *scalars)
        if isinstance(op, T.REDUCTION_OPS):
            return self.reduction(op, index, chain, level)
        if isinstance(op, T.MatmulOp):
            return self.matmul(op, index, chain, level)
        raise NotImplementedError(f"{op.name} cannot be computed inside a kernel")

    def inside(self, op) -> bool:
        return op in self.members

    def load(self, view: View, index, level):
        operands, amap = access(view.through(index).exprs, self.ivs)
        return level.insert(A.LoadOp([view.buffer, *operands], {"map": amap})).result

    def scalar_constant(self, scalar, element):
        value = bool(scalar) if element.is_bool else (float(scalar) if element.is_float else int(scalar))
        key = ("constant", element, value if not (element.is_float and np.signbit(scalar)) else ("neg", value))
        if key not in self.outer.memo:
            self.outer.memo[key] = self.outer.insert(AR.ConstantOp([], {"value": value}, [element])).result
        return self.outer.memo[key]

    # -- loops of their own ------------------------------------------------------------
    def accumulate(self, extents, init, level, chain, step):
        """Nested loops over `extents` carrying one accumulator; `step(index_dims, chain, acc)`
        returns the next value. Returns the final accumulator."""
        loops, carried, block = [], init, None
        new_chain = list(chain[:_position(level, chain) + 1])
        dims = []
        for k, extent in enumerate(extents):
            loop = A.ForOp.create(0, extent, inits=[carried],
                                  iv_name=self.fresh_name(REDUCTION_NAMES[k] if k < len(REDUCTION_NAMES) else "r"))
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
        init = self.scalar_constant(reduction_identity(type(op), element), element)

        def step(reduced, inner_chain, acc):
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
            element_value = self.value(op.operand, tuple(operand_index_), inner_chain)
            builder = _LevelBuilder(inner_chain[-1][1] if reduced else level)
            return REDUCTION_COMBINE[type(op)](builder, op, element, acc, element_value)

        return self.accumulate([source.shape[a] for a in axes], init, level, chain, step)

    def matmul(self, op, index, chain, level):
        element = op.result.type.element
        init = self.scalar_constant(reduction_identity(T.ReduceSumOp, element), element)
        batch, m, n = list(index[:-2]), index[-2], index[-1]

        def step(reduced, inner_chain, acc):
            (k,) = reduced
            a = self.value(op.lhs, tuple(batch + [m, k]), inner_chain)
            b = self.value(op.rhs, tuple(batch + [k, n]), inner_chain)
            builder = _LevelBuilder(inner_chain[-1][1])
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


def _position(level, chain) -> int:
    for k, (_, candidate) in enumerate(chain):
        if candidate is level:
            return k
    return -1


def _negative_zero_mix(flat) -> bool:
    return flat.dtype.kind == "f" and bool(np.signbit(flat).any() != np.signbit(flat).all())
