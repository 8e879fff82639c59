"""Loop transformations on affine IR: the library the schedule primitives call.

Each function rewrites one loop (an ``affine.for`` found by its name, the ``kiln.loop``
attribute) in place
and raises ScheduleError, naming the loop, when the change would be illegal.
Tails are always handled: a split's inner loop ends at
``min(factor, N - outer * factor)`` and unroll keeps a remainder loop, so no
size has to be a multiple of any factor. Before::

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

After ``split(k0.j, 8)``::

    func.func @scale(%x: memref<4x20xf32>, %c: memref<f32>, %out0: memref<4x20xf32>) attributes {kiln.buffers = ["x", "c", "out0"]} {
      affine.for %k0.i = 0 to 4 {
        affine.for %k0.j.o = 0 to 3 {
          affine.for %k0.j.i = 0 to min affine_map<(d0) -> (8, d0 * -8 + 20)>(%k0.j.o) {
            %0 = affine.load %x[%k0.i, %k0.j.o * 8 + %k0.j.i] : memref<4x20xf32>
            %1 = affine.load %c[] : memref<f32>
            %2 = arith.mulf %0, %1 : f32
            affine.store %2, %out0[%k0.i, %k0.j.o * 8 + %k0.j.i] : memref<4x20xf32>
          } {kiln.loop = "k0.j.i"}
        } {kiln.loop = "k0.j.o"}
      } {kiln.loop = "k0.i"}
      func.return
    }
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects.affine import loop_name
from kiln.dialects.affine_expr import AffineMap, Const, Dim, dims_of, substitute
from kiln.dialects.diagnostics import KilnError
from kiln.dialects.ir import Block
from kiln.dialects.rewriter import InsertPoint, OpList, Rewriter

# What reads loop variables through an affine map (AFFINE_MAPPED): the accesses, and the
# affine.apply whose result indexes a memref.load or memref.store, rewritten with them.
from kiln.dialects.traits import AFFINE_MAPPED, AFFINE_WRITE, LOOP_LIKE


class ScheduleError(KilnError, ValueError):
    """A schedule step that cannot apply: an unknown loop, or an illegal change."""


# -- rewriting index expressions ----------------------------------------------------------
def replace_index(ops, old, new_values, expr) -> None:
    """In every access and loop bound nested in `ops`, read `old` (an index value) as `expr`,
    an affine expression over `new_values` (Dim(k) is new_values[k])."""
    for top in ops:
        for op in top.walk():
            if op.has_trait(AFFINE_MAPPED):
                head = op.operands[: op.memref_position + 1]
                indices, amap = _rewrite(list(op.indices), op.map.results, old, new_values, expr)
                if indices is not None:
                    op.set_operands(head + indices)
                    op.attributes["map"] = AffineMap(len(indices), amap)
            elif isinstance(op, A.ForOp) and not op.constant_bounds:
                operands, results = _rewrite(list(op.bound_operands), op.upper_map.results, old, new_values, expr)
                if operands is not None:
                    op.set_operands(operands + list(op.inits))
                    op.attributes["upper_map"] = AffineMap(len(operands), results)
                    op.attributes["bound_count"] = len(operands)


def _rewrite(operands, results, old, new_values, expr):
    if old not in operands:
        return None, None
    k = operands.index(old)
    kept = [v for v in operands if v is not old]
    for v in new_values:
        if v not in kept:
            kept.append(v)
    mapping = [Dim(kept.index(v)) if i != k else None for i, v in enumerate(operands)]
    mapping[k] = substitute(expr, [Dim(kept.index(v)) for v in new_values])
    return kept, tuple(substitute(r, mapping) for r in results)


def _move_body(source: Block, target: Block, iv_expr, new_ivs) -> None:
    """Move `source`'s ops into `target`; `source`'s iv reads as iv_expr over new_ivs;
    its iter_args become `target`'s."""
    old_iv = source.args[0]
    for old, new in zip(source.args[1:], target.args[1:]):
        old.replace_all_uses_with(new)
    ops = Rewriter.inline_block(source, InsertPoint.at_end(target))
    replace_index(ops, old_iv, new_ivs, iv_expr)


def replace_loop(old, new, results=None) -> None:
    """Put `new` (an op, or a list of ops) where loop `old` was; `results` (by default the
    last new op's) take the place of its results."""
    Rewriter.replace(old, new, results)


def remainder_loop(loop, start: int, inits):
    """Iterations `start` to the end of `loop`, as a loop ``<name>.tail`` carrying `inits`."""
    tail = A.ForOp.create(0, loop.upper - start, inits=list(inits), iv_name=f"{loop_name(loop)}.tail")
    carried = _clone_body(loop, tail.body, list(tail.body.args[1:]), [tail.induction_variable], Dim(0) + start)
    tail.body.append(A.YieldOp(carried, {}))
    return tail


# -- split ----------------------------------------------------------------------------------
def split(loop, factor: int):
    """``for x in [0, N)`` -> ``for xo in [0, ceil(N/f)): for xi in [0, min(f, N - xo*f))``."""
    name = loop_name(loop)
    if not is_positive_int(factor):
        raise ScheduleError(f"split({name}, {factor!r}): the factor must be a positive integer")
    if loop.lower != 0 or loop.step != 1:
        raise ScheduleError(f"split({name}): only loops from 0 with step 1")
    if loop.constant_bounds:
        count = loop.upper
        inner_bound = factor if count % factor == 0 else None
        bounds = (Const(factor), Dim(0) * -factor + count)
        outer_operands = []
    else:
        constants = [e.value for e in loop.upper_map.results if isinstance(e, Const)]
        if not constants:
            raise ScheduleError(f"split({name}): its bound has no constant limit")
        count = min(constants)
        inner_bound = None
        nb = len(loop.bound_operands)
        bounds = (Const(factor),) + tuple(
            substitute(e, [Dim(k) for k in range(nb)]) + Dim(nb) * -factor for e in loop.upper_map.results
        )
        outer_operands = list(loop.bound_operands)
    outer = A.ForOp.create(0, -(-count // factor), inits=list(loop.inits), iv_name=f"{name}.o")
    outer_iv = outer.induction_variable
    if inner_bound is not None:
        inner = A.ForOp.create(0, inner_bound, inits=list(outer.body.args[1:]), iv_name=f"{name}.i")
    else:
        inner = A.ForOp.create(
            0, bounds, inits=list(outer.body.args[1:]), iv_name=f"{name}.i", bound_operands=outer_operands + [outer_iv]
        )
    _move_body(loop.body, inner.body, Dim(0) * factor + Dim(1), [outer_iv, inner.induction_variable])
    outer.body.append(inner)
    outer.body.append(A.YieldOp(list(inner.results), {}))
    replace_loop(loop, outer)
    return outer, inner


# -- reorder ----------------------------------------------------------------------------------
def perfect_chain(outermost, count: int) -> list:
    chain = [outermost]
    while len(chain) < count:
        body = [op for op in chain[-1].body.ops if not isinstance(op, A.YieldOp)]
        if len(body) != 1 or not isinstance(body[0], A.ForOp):
            raise ScheduleError(f"loops under {loop_name(chain[-1])} are not perfectly nested")
        chain.append(body[0])
    return chain


def reorder(loops: list) -> None:
    """Permute perfectly nested loops (given in their new order, outermost first)."""
    names = [loop_name(l) for l in loops]
    outermost = [l for l in loops if not any(a in loops for a in _ancestors(l))]
    if len(outermost) != 1:
        raise ScheduleError(f"reorder({', '.join(names)}): these loops are not one nest")
    chain = perfect_chain(outermost[0], len(loops))
    if set(chain) != set(loops):
        raise ScheduleError(f"reorder({', '.join(names)}): these loops are not one perfect nest")
    for loop in loops:
        if loop.inits:
            raise ScheduleError(f"reorder: {loop_name(loop)} carries a reduction (iter_args); it cannot move")
    position = {loop: k for k, loop in enumerate(loops)}
    for loop in loops:
        for operand in loop.bound_operands:
            owner = operand.block.parent.parent if hasattr(operand, "block") else None
            if owner in position and position[owner] > position[loop]:
                raise ScheduleError(
                    f"reorder: the bound of {loop_name(loop)} depends on {loop_name(owner)}, which must stay outside it"
                )
    innermost_body = chain[-1].body
    # Build the new nest, outermost first, reusing each loop's header.
    new_loops = []
    for loop in loops:
        bounds = loop.upper if loop.constant_bounds else loop.upper_map.results
        new_loops.append(A.ForOp.create(0, bounds, iv_name=loop_name(loop), bound_operands=list(loop.bound_operands)))
    for old, new in zip(loops, new_loops):
        old.induction_variable.replace_all_uses_with(new.induction_variable)
    for outer, inner in zip(new_loops, new_loops[1:]):
        outer.body.append(inner)
        outer.body.append(A.YieldOp([], {}))
    Rewriter.inline_block(innermost_body, InsertPoint.at_end(new_loops[-1].body))
    replace_loop(chain[0], new_loops[0])


def is_positive_int(value) -> bool:
    """A factor: an int of at least 1, and not a bool (True is an int to Python)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# -- unroll -----------------------------------------------------------------------------------
def unroll(loop, factor: int):
    """``factor`` copies of the body per iteration, and a remainder loop for the rest."""
    name = loop_name(loop)
    if not loop.constant_bounds or loop.lower != 0 or loop.step != 1:
        raise ScheduleError(f"unroll({name}): only loops with constant bounds from 0, step 1")
    if not is_positive_int(factor):
        raise ScheduleError(f"unroll({name}, {factor!r}): the factor must be a positive integer")
    count = loop.upper
    factor = max(1, min(factor, count))  # more copies than iterations unroll it fully, no more
    main = A.ForOp.create(0, count // factor, inits=list(loop.inits), iv_name=f"{name}.u")
    carried = list(main.body.args[1:])
    for copy in range(factor):
        carried = _clone_body(loop, main.body, carried, [main.induction_variable], Dim(0) * factor + copy)
    main.body.append(A.YieldOp(carried, {}))
    new_ops = [main]
    if count % factor:
        new_ops.append(remainder_loop(loop, count // factor * factor, main.results))
    replace_loop(loop, new_ops)
    return main


def unroll_jam(loop, factor: int):
    """Unroll by `factor` and jam: the copies' inner loops with equal bounds merge into one
    loop doing all copies' work per iteration (a matmul's register block: several rows of
    accumulators in one k loop). Iterations must be independent: no iter_args here."""
    name = loop_name(loop)
    if loop.inits:
        raise ScheduleError(f"unroll_jam({name}): it carries values (iter_args); use unroll")
    if not loop.constant_bounds or loop.lower != 0 or loop.step != 1:
        raise ScheduleError(f"unroll_jam({name}): only loops with constant bounds from 0, step 1")
    if not is_positive_int(factor):
        raise ScheduleError(f"unroll_jam({name}, {factor!r}): the factor must be a positive integer")
    count = loop.upper
    factor = max(1, min(factor, count))  # more copies than iterations jam them all, no more
    main = A.ForOp.create(0, count // factor, iv_name=f"{name}.u")
    copies = []
    for copy in range(factor):
        scratch = OpList()
        _clone_body(loop, scratch, [], [main.induction_variable], Dim(0) * factor + copy)
        copies.append(list(scratch.ops))
    for op in _jam(copies):
        main.body.append(op)
    main.body.append(A.YieldOp([], {}))
    new_ops = [main]
    if count % factor:
        tail = A.ForOp.create(0, count % factor, iv_name=f"{name}.tail")
        _clone_body(loop, tail.body, [], [tail.induction_variable], Dim(0) + (count // factor) * factor)
        tail.body.append(A.YieldOp([], {}))
        new_ops.append(tail)
    Rewriter.replace(loop, new_ops, results=[])
    return main


def _same_bounds(a, b) -> bool:
    if a.constant_bounds != b.constant_bounds or a.lower != b.lower or a.step != b.step:
        return False
    if a.constant_bounds:
        return a.upper == b.upper
    return a.upper_map == b.upper_map and list(a.bound_operands) == list(b.bound_operands)


def _jam(copies: list) -> list:
    """Merge structurally equal op lists position by position; loops with equal bounds become one."""
    merged = []
    for ops in zip(*copies):
        first = ops[0]
        if isinstance(first, A.ForOp) and all(isinstance(o, A.ForOp) and _same_bounds(o, first) for o in ops):
            bounds = first.upper if first.constant_bounds else first.upper_map.results
            inits = [v for o in ops for v in o.inits]
            loop = A.ForOp.create(first.lower, bounds, first.step, inits, loop_name(first), list(first.bound_operands))
            offset = 0
            for o in ops:
                o.induction_variable.replace_all_uses_with(loop.induction_variable)
                for arg in o.body.args[1:]:
                    arg.replace_all_uses_with(loop.body.args[1 + offset])
                    offset += 1
            for op in _jam([o.body.ops[:-1] for o in ops]):
                loop.body.append(op)
            # Read the yields only now: jamming inner loops rewired what they yield.
            yielded = [v for o in ops for v in o.body.ops[-1].operands]
            for o in ops:
                o.body.ops[-1].set_operands([])
            loop.body.append(A.YieldOp(yielded, {}))
            offset = 0
            for o in ops:
                for result in o.results:
                    result.replace_all_uses_with(loop.results[offset])
                    offset += 1
                o.set_operands([])
            merged.append(loop)
        else:
            merged.extend(ops)
    return merged


def _clone_body(loop, target: Block, carried, new_ivs, expr) -> list:
    """Copy `loop`'s body (not its yield) into `target`, the iv read as `expr`; returns the yielded values."""
    mapping = dict(zip(loop.body.args[1:], carried))
    copies = []
    for op in loop.body.ops[:-1]:
        copy = op.clone(mapping)
        target.append(copy)
        copies.append(copy)
    replace_index(copies, loop.induction_variable, new_ivs, expr)
    return [mapping.get(v, v) for v in loop.body.ops[-1].operands]


# -- parallel ---------------------------------------------------------------------------------
def parallel(loop):
    """Run the loop's iterations on the thread pool."""
    name = loop_name(loop)
    if loop.inits or not loop.constant_bounds or loop.lower != 0 or loop.step != 1:
        raise ScheduleError(f"parallel({name}): only loops without iter_args, with constant bounds")
    if loop.parent is None or not _at_top_level(loop):
        raise ScheduleError(f"parallel({name}): only an outermost loop of a kernel can be parallel")
    iv = loop.induction_variable
    private = {op.results[0] for op in loop.walk() if op.name == "memref.alloca"}  # each thread has its own
    _refuse_indexed_stores(loop, f"parallel({name})")
    for op in loop.walk():
        if op.has_trait(AFFINE_WRITE) and op.memref not in private and not _writes_depend_on(op, iv):
            raise ScheduleError(
                f"parallel({name}): iterations would write the same element (a store that does not depend on {name})"
            )
    new = A.ParallelOp.create(loop.upper, iv_name=name)
    _move_body(loop.body, new.body, Dim(0), [new.induction_variable])
    replace_loop(loop, new)
    return new


def _refuse_indexed_stores(loop, step: str) -> None:
    """A store through a computed index (a scatter's memref.store) may write one element from
    several iterations (repeated indices), in an order numpy's unbuffered ufunc.at fixes: its
    loops stay sequential."""
    if any(op.name == "memref.store" for op in loop.walk()):
        raise ScheduleError(f"{step}: iterations may write the same element through a computed index (memref.store)")


def bind(loop, axis: str) -> None:
    """Run the loop's iterations on a GPU hardware index (``blockIdx.x`` ... ``threadIdx.z``):
    iteration i goes to the block or thread i, striding by the grid or block size.

    A reduction loop (iter_args, each updated by one ``acc = combine(acc, x)``: addf,
    maximumf, minimumf on floats; addi, maxsi, minsi, maxui, minui on integers; ori, andi on
    booleans) can be bound to ``threadIdx.x``: each thread of the
    block combines a strided share of the iterations, the block combines the threads'
    partial results, and every thread gets the result (see docs/cuda.md). Its threads meet
    at barriers, so it must run in every thread of the block alike: it may not sit inside a
    thread-bound loop or a loop that carries a value, nor share its block with ``threadIdx.y``
    or ``threadIdx.z`` loops. ScheduleError names the loop when any rule is broken."""
    name = loop_name(loop)
    if axis not in A.GPU_AXES:
        raise ScheduleError(f"bind({name}, {axis}): the axis must be one of {', '.join(A.GPU_AXES)}")
    if loop.trip_count < 0 or loop.lower != 0 or loop.step != 1:
        raise ScheduleError(f"bind({name}, {axis}): only loops from 0 by 1 to a known bound")
    _refuse_indexed_stores(loop, f"bind({name}, {axis})")
    if loop.inits:
        _check_bound_reduction(loop, axis)
    for outer in _ancestors(loop):
        if isinstance(outer, A.ForOp) and outer.inits:
            raise ScheduleError(
                f"bind({name}, {axis}): it is inside {loop_name(outer)}, which carries a value "
                "from one iteration to the next (bind the outermost loop of a reduction)"
            )
        if outer.attributes.get(A.BIND) == axis:
            raise ScheduleError(f"bind({name}, {axis}): {loop_name(outer)} is already bound to {axis}")
    for inner in loop.walk():
        if inner is not loop and inner.attributes.get(A.BIND) == axis:
            raise ScheduleError(f"bind({name}, {axis}): {loop_name(inner)} is already bound to {axis}")
    if axis in ("threadIdx.y", "threadIdx.z"):
        for other in _kernel_root(loop).walk():
            if isinstance(other, A.ForOp) and other.inits and A.BIND in other.attributes:
                raise ScheduleError(
                    f"bind({name}, {axis}): the reduction {loop_name(other)} is bound to threadIdx.x in this "
                    "kernel, and its block-wide combine takes one value from every thread; use threadIdx.x only"
                )
    iv = loop.induction_variable
    for op in loop.walk():
        if op.has_trait(AFFINE_WRITE) and not _writes_depend_on(op, iv):
            raise ScheduleError(
                f"bind({name}, {axis}): iterations would write the same element "
                f"(a store that does not depend on {name})"
            )
    loop.attributes[A.BIND] = axis


# The combines a block of threads can apply to a bound reduction's partial results, by the
# accumulator's type: those of kiln's reductions (passes.scalar_rules.REDUCTION_COMBINE),
# which kiln.codegen.cuda_codegen prints as block trees.
_INTEGERS = ("i8", "i16", "i32", "i64")
BLOCK_COMBINES = {
    AR.AddFOp: ("f32", "f64"),
    AR.MaximumFOp: ("f32", "f64"),
    AR.MinimumFOp: ("f32", "f64"),
    AR.AddIOp: _INTEGERS,
    AR.MaxSIOp: _INTEGERS,
    AR.MinSIOp: _INTEGERS,
    AR.MaxUIOp: _INTEGERS,
    AR.MinUIOp: _INTEGERS,
    AR.OrIOp: ("i1",),  # any
    AR.AndIOp: ("i1",),  # all
}


def reduction_combines(loop) -> list:
    """The op that updates each of `loop`'s accumulators, ``acc' = combine(acc, x)`` with `x`
    not depending on acc and acc used by nothing else; None if some accumulator is not so."""
    yielded = loop.body.ops[-1].operands
    combines = []
    for acc, value in zip(loop.body.args[1:], yielded):
        update = getattr(value, "op", None)
        if (
            update is None
            or update.parent is not loop.body
            or acc.type.name not in BLOCK_COMBINES.get(type(update), ())
        ):
            return None
        if list(update.operands).count(acc) != 1 or A.partials_escape(loop, update):
            return None
        users = [op for op in loop.walk() if op is not loop and acc in op.operands]
        if users != [update]:
            return None
        combines.append(update)
    return combines


def _check_bound_reduction(loop, axis) -> None:
    name = loop_name(loop)
    if axis != "threadIdx.x":
        raise ScheduleError(
            f"bind({name}, {axis}): it carries a value (a reduction), which only threadIdx.x can combine "
            "(the block's threads); bind the loops around it to blocks"
        )
    if reduction_combines(loop) is None:
        allowed = ", ".join(sorted(op.name for op in BLOCK_COMBINES))
        raise ScheduleError(
            f"bind({name}, {axis}): only loops without iter_args, or reductions whose every accumulator is "
            f"updated by one {allowed} (acc = combine(acc, x), x not depending on acc)"
        )
    for outer in _ancestors(loop):
        if outer.attributes.get(A.BIND, "").startswith("threadIdx"):
            raise ScheduleError(
                f"bind({name}, {axis}): it is inside {loop_name(outer)}, bound to {outer.attributes[A.BIND]}: "
                "the threads would reach the block's combine unevenly"
            )
    for inner in loop.walk():
        if inner is not loop and A.BIND in inner.attributes:
            raise ScheduleError(
                f"bind({name}, {axis}): {loop_name(inner)} inside it is bound to {inner.attributes[A.BIND]}; "
                "a bound reduction's body runs in one thread"
            )
    for other in _kernel_root(loop).walk():
        if other.attributes.get(A.BIND) in ("threadIdx.y", "threadIdx.z"):
            raise ScheduleError(
                f"bind({name}, {axis}): {loop_name(other)} is bound to {other.attributes[A.BIND]} in this kernel, "
                "and the block-wide combine takes one value from every thread; use threadIdx.x only"
            )


def _kernel_root(loop):
    """The top-level loop nest `loop` is in."""
    loops = [op for op in _ancestors(loop) if op.has_trait(LOOP_LIKE)]
    return loops[-1] if loops else loop


def _ancestors(op):
    while op.parent is not None and op.parent.parent is not None and op.parent.parent.parent is not None:
        op = op.parent.parent.parent
        yield op


def _at_top_level(loop) -> bool:
    owner = loop.parent.parent.parent if loop.parent.parent else None
    return owner is not None and owner.name == "func.func"


def _writes_depend_on(store, iv) -> bool:
    if iv not in store.indices:
        return False
    k = store.indices.index(iv)
    return k in dims_of(*store.map.results)
