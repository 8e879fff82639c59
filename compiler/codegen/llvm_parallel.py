"""LLVM code for ``affine.parallel``: the loop body outlined into a function that
each OpenMP thread runs on its own contiguous chunk of iterations.

    void body(i8 *ctx)        // ctx: one i64 slot per value the body reads from outside
      n = omp_get_num_threads(); t = omp_get_thread_num()
      chunk = ceil(upper / n); for i in [t * chunk, min((t + 1) * chunk, upper)): ...
    ...
    GOMP_parallel(body, ctx, 0 /* the pool's thread count */, 0)

Without libgomp the loop is emitted as an ordinary loop (and kiln.runtime.threads warns,
once, that parallel loops run on one thread).
"""

from __future__ import annotations

import llvmlite.ir as ir

from kiln.codegen.llvm_emitter import I8, I32, I64, FunctionEmitter, handles
from kiln.dialects import affine as A
from kiln.runtime import threads

_VOID_FN = ir.FunctionType(ir.VoidType(), [I8.as_pointer()])


class OutlinedEmitter(FunctionEmitter):
    """Emits into an outlined function; values of the enclosing function become ctx slots."""

    def __init__(self, parent: FunctionEmitter, function: ir.Function):
        self.share_function_state(parent, function)
        self.parent = parent
        self.captured = []  # parent LLVM values, in slot order
        self.prologue = ir.IRBuilder(function.append_basic_block("captures"))
        self.alloca_builder = self.prologue  # stack slots: per thread
        self.slots = self.prologue.bitcast(function.args[0], I64.as_pointer())
        self.status = self.capture(parent.status)

    def get(self, value):
        if value not in self.values:
            outer = self.parent.get(value)
            self.values[value] = outer if isinstance(outer, (ir.Constant, ir.GlobalValue)) else self.capture(outer)
        return self.values[value]

    def capture(self, outer):
        slot = self.prologue.gep(self.slots, [ir.Constant(I64, len(self.captured))])
        self.captured.append(outer)
        raw = self.prologue.load(slot)
        t = outer.type
        if isinstance(t, ir.PointerType):
            return self.prologue.inttoptr(raw, t)
        if isinstance(t, ir.IntType):
            return self.prologue.trunc(raw, t) if t.width < 64 else raw
        bits = ir.IntType(32 if isinstance(t, ir.FloatType) else 64)
        return self.prologue.bitcast(self.prologue.trunc(raw, bits) if bits.width < 64 else raw, t)


def _to_slot(b: ir.IRBuilder, value):
    t = value.type
    if isinstance(t, ir.PointerType):
        return b.ptrtoint(value, I64)
    if isinstance(t, ir.IntType):
        return b.zext(value, I64) if t.width < 64 else value
    raw = b.bitcast(value, ir.IntType(32 if isinstance(t, ir.FloatType) else 64))
    return b.zext(raw, I64) if raw.type.width < 64 else raw


@handles(A.ParallelOp)
def emit_parallel(e: FunctionEmitter, op) -> None:
    if not threads.available():
        _emit_serial(e, op)
        return
    count = sum(1 for g in e.module.globals.values() if g.name.startswith(f"{e.function.name}.parallel"))
    function = ir.Function(e.module, _VOID_FN, name=f"{e.function.name}.parallel{count}")
    function.linkage = "internal"
    inner = OutlinedEmitter(e, function)
    body_block = function.append_basic_block("chunk")
    inner.b = ir.IRBuilder(body_block)
    b = inner.b
    threads_fn = inner.declare("omp_get_num_threads", I32, [])
    thread_fn = inner.declare("omp_get_thread_num", I32, [])
    total = b.sext(b.call(threads_fn, []), I64)
    me = b.sext(b.call(thread_fn, []), I64)
    upper = ir.Constant(I64, op.upper)
    chunk = b.sdiv(b.add(upper, b.sub(total, ir.Constant(I64, 1))), total)
    lower = b.mul(me, chunk)
    end = b.add(lower, chunk)
    end = b.select(b.icmp_signed("<", end, upper), end, upper)
    _emit_loop(inner, op, lower, end)
    b.ret_void()
    inner.prologue.branch(body_block)
    # In the caller: fill the slots, then run the body on every thread of the pool.
    slots = e.alloca_builder.alloca(I64, size=max(1, len(inner.captured)))
    for k, value in enumerate(inner.captured):
        e.b.store(_to_slot(e.b, value), e.b.gep(slots, [ir.Constant(I64, k)]))
    gomp = e.declare("GOMP_parallel", ir.VoidType(), [_VOID_FN.as_pointer(), I8.as_pointer(), I32, I32])
    e.b.call(gomp, [function, e.b.bitcast(slots, I8.as_pointer()), ir.Constant(I32, 0), ir.Constant(I32, 0)])


def _emit_serial(e: FunctionEmitter, op) -> None:
    _emit_loop(e, op, ir.Constant(I64, 0), ir.Constant(I64, op.upper))


def _emit_loop(e: FunctionEmitter, op, lower, upper) -> None:
    before = e.b.block
    header = e.function.append_basic_block("ploop")
    body = e.function.append_basic_block("pbody")
    exit_ = e.function.append_basic_block("pdone")
    e.b.branch(header)
    e.b.position_at_end(header)
    iv = e.b.phi(I64, name="iv")
    iv.add_incoming(lower, before)
    e.b.cbranch(e.b.icmp_signed("<", iv, upper), body, exit_)
    e.b.position_at_end(body)
    e.values[op.induction_variable] = iv
    e.emit_block(op.body)
    iv.add_incoming(e.b.add(iv, ir.Constant(I64, 1), flags=["nsw"]), e.b.block)
    e.b.branch(header)
    e.b.position_at_end(exit_)
