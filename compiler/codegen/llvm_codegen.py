"""Emit LLVM IR (through ``llvmlite.ir``) for an affine-level module.

Every ``func.func @f`` becomes ``i32 @kiln_f(ptr noalias %in..., ptr noalias %out...)``
returning a status: 0, or one of STATUS's codes. Memrefs are bare pointers
to row-major data (their static shapes give the strides); ``index`` is i64;
``i1`` is stored in memory as one byte, like numpy's bool. Loops become the
usual header/body/latch blocks with phis for induction variables and
iter_args. Float ops carry no fast-math flags: results match numpy's
elementwise semantics (reductions add in loop order).
"""

from __future__ import annotations

import string

import llvmlite.ir as ir
import numpy as np

# (they register the arith, math, vector, parallel and func.call handlers)
from kiln.codegen import llvm_alloc, llvm_kernels, llvm_ops, llvm_parallel  # noqa: F401
from kiln.codegen.constant_pool import ConstantPool
from kiln.codegen.llvm_emitter import (
    I1,
    I8,
    I32,
    I64,
    FunctionEmitter,
    access_sites,
    handles,
    scalar,
    stored,
    top_level_ops,
)
from kiln.codegen.llvm_probes import Probes
from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects import vector as V
from kiln.dialects.collection import collection_paused


def emit_module(
    module,
    triple: str = "",
    data_layout: str = "",
    bounds_checks: bool = False,
    pool: ConstantPool | None = None,
    probes: dict | None = None,
) -> ir.Module:
    """LLVM IR for an affine-level module; `bounds_checks` guards every load and store
    (an access outside its buffer is skipped and reported through the status). The globals
    `pool` lays out are read from its symbol, declared external (see constant_pool); the
    others are initializers in the module. `probes` times regions of top-level ops with the
    CPU's cycle counter (see kiln.codegen.llvm_probes). Each private function (a kernel that
    ``outline-kernels`` outlined: ``Pipeline.codegen_module()``) becomes an LLVM function of
    its own where it is called (see kiln.codegen.llvm_kernels); nests left in a function are
    emitted inline."""
    with collection_paused():  # llvmlite's instructions are cycles too
        return _emit_module(module, triple, data_layout, bounds_checks, pool, probes)


def _emit_module(module, triple: str, data_layout: str, bounds_checks: bool, pool, probes: dict | None) -> ir.Module:
    llvm_module = ir.Module(name="kiln")
    llvm_module.triple = triple
    llvm_module.data_layout = data_layout
    globals_ = {}
    base = _declare_pool(llvm_module, pool) if pool else None
    for op in module.body.ops:
        if isinstance(op, MR.GlobalOp):
            if base is not None and op.sym_name in pool.offsets:
                globals_[op.sym_name] = base.gep([ir.Constant(I64, 0), ir.Constant(I64, pool.offsets[op.sym_name])])
            else:
                globals_[op.sym_name] = _emit_global(llvm_module, op)
    callees = {op.sym_name: op for op in module.body.ops if isinstance(op, F.FuncOp) and op.is_private}
    for op in module.body.ops:
        if isinstance(op, F.FuncOp) and not op.is_private:  # a private one is emitted at its call
            emitter = FunctionEmitter(llvm_module, globals_, op)
            emitter.callees = callees
            if bounds_checks:
                emitter.sites = {id(site): k for k, site in enumerate(access_sites(op, callees))}
            if probes and any(id(inner) in probes for inner in top_level_ops(op, callees)):
                emitter.probes = Probes(llvm_module, probes)
            emitter.emit()
    return llvm_module


def _declare_pool(llvm_module, pool: ConstantPool):
    """``@"<symbol>" = external constant [N x i8], align 64``: defined where the code is linked."""
    base = ir.GlobalVariable(llvm_module, ir.ArrayType(I8, pool.nbytes), name=pool.symbol)
    base.global_constant = True
    base.align = MR.ALIGNMENT
    return base


def _emit_global(llvm_module, op):
    data = op.initial_value.astype(op.initial_value.dtype.newbyteorder("<")).tobytes()
    array_type = ir.ArrayType(I8, len(data))
    variable = ir.GlobalVariable(llvm_module, array_type, name=op.sym_name)
    variable.initializer = ir.FormattedConstant(array_type, f'c"{escape_bytes(data)}"')
    variable.global_constant = True
    variable.linkage = "private"
    variable.align = MR.ALIGNMENT
    return variable


# How llvmlite writes each byte in an LLVM c"..." literal: letters, digits and most
# punctuation as they are, the rest as \xx (lower-case hex); as three-byte rows padded
# with NULs, which escape_bytes drops.
_KEPT = set(string.ascii_letters + string.digits + " !#$%&'()*+,-./:;<=>?@[]^_`{|}~")
_ESCAPES = np.array(
    [[c, 0, 0] if chr(c) in _KEPT else list(b"\\%02x" % c) for c in range(256)],
    np.uint8,
)


def escape_bytes(data: bytes) -> str:
    """`data` as the body of an LLVM string literal, exactly as llvmlite writes it, but
    computed with numpy: llvmlite's loop over every byte took seconds for a model's
    constants (ResNet-50's are 100 MB)."""
    rows = _ESCAPES[np.frombuffer(data, np.uint8)]
    return rows[rows != 0].tobytes().decode("ascii")


@handles(F.ReturnOp)
def _return(e: FunctionEmitter, op):
    e.b.ret(e.b.load(e.status))


@handles(A.ForOp)
def _for(e: FunctionEmitter, op):
    if op.constant_bounds and op.trip_count == 1:
        _once(e, op)
        return
    upper = upper_bound(e, op)
    before = e.b.block
    header = e.function.append_basic_block("loop")
    body = e.function.append_basic_block("body")
    exit_ = e.function.append_basic_block("done")
    e.b.branch(header)
    e.b.position_at_end(header)
    iv = e.b.phi(I64, name="iv")
    iv.add_incoming(ir.Constant(I64, op.lower), before)
    carried = []
    for init in op.inits:
        phi = e.b.phi(e.get(init).type)
        phi.add_incoming(e.get(init), before)
        carried.append(phi)
    e.b.cbranch(e.b.icmp_signed("<", iv, upper), body, exit_)
    e.b.position_at_end(body)
    e.values[op.induction_variable] = iv
    for arg, phi in zip(op.body.args[1:], carried):
        e.values[arg] = phi
    e.emit_block(op.body)  # its affine.yield records the next values in e.yielded
    latch = e.b.block
    iv.add_incoming(e.b.add(iv, ir.Constant(I64, op.step), flags=["nsw"]), latch)
    for phi, value in zip(carried, e.yielded):
        phi.add_incoming(value, latch)
    e.b.branch(header)
    e.b.position_at_end(exit_)
    for result, phi in zip(op.results, carried):
        e.values[result] = phi


def _once(e: FunctionEmitter, op):
    """A loop of one iteration is its body, run with the induction variable at the lower
    bound: no header, latch and phis for LLVM to fold away again. Models have hundreds of
    them (a batch of one, the window loops of 1x1 convolutions); each cost LLVM's loop
    passes as much as a real loop."""
    e.values[op.induction_variable] = ir.Constant(I64, op.lower)
    for arg, init in zip(op.body.args[1:], op.inits):
        e.values[arg] = e.get(init)
    e.emit_block(op.body)  # its affine.yield records the results in e.yielded
    for result, value in zip(op.results, e.yielded):
        e.values[result] = value


def upper_bound(e: FunctionEmitter, op):
    """The loop's upper bound as an i64: a constant, or the minimum of its map's results."""
    if op.constant_bounds:
        return ir.Constant(I64, op.upper)
    values = [e.index_value(expr, op.bound_operands) for expr in op.upper_map.results]
    bound = values[0]
    for value in values[1:]:
        bound = e.b.select(e.b.icmp_signed("<", value, bound), value, bound)
    return bound


@handles(A.YieldOp)
def _yield(e: FunctionEmitter, op):
    e.yielded = [e.get(v) for v in op.operands]


@handles(A.LoadOp, MR.LoadOp)
def _load(e: FunctionEmitter, op):
    element = op.memref.type.element
    llvm_type = stored(element)
    value = e.guarded(op, 1, lambda: e.b.load(e.address(op), align=element.dtype.itemsize), ir.Constant(llvm_type, 0))
    e.values[op.result] = e.b.trunc(value, I1) if element.name == "i1" else value


@handles(A.StoreOp, MR.StoreOp)
def _store(e: FunctionEmitter, op):
    value = e.get(op.operands[0])
    if op.memref.type.element.name == "i1":
        value = e.b.zext(value, I8)
    e.guarded(op, 1, lambda: e.b.store(value, e.address(op), align=op.memref.type.element.dtype.itemsize))


@handles(A.ApplyOp)
def _apply(e: FunctionEmitter, op):
    e.values[op.result] = e.index_value(op.map.results[0], op.operands)


@handles(A.VectorLoadOp, MR.VectorLoadOp)
def _vector_load(e: FunctionEmitter, op):
    t = op.result.type
    value = e.guarded(
        op,
        t.lanes,
        lambda: e.b.load(e.b.bitcast(e.address(op), stored(t).as_pointer()), align=t.element.dtype.itemsize),
        ir.Constant(stored(t), None),
    )
    e.values[op.result] = e.b.trunc(value, scalar(t)) if t.element.name == "i1" else value


@handles(V.GatherOp)
def _vector_gather(e: FunctionEmitter, op):
    """llvm.masked.gather of one pointer a lane: the base element's address plus each lane's
    offset (in elements) as integers, then as a vector of pointers."""
    t = op.result.type
    memory = stored(t)
    offset = ir.Constant(I64, 0)
    for value, stride in zip(op.indices, op.base.type.strides):
        offset = e.b.add(offset, e.b.mul(e.get(value), ir.Constant(I64, stride), flags=["nsw"]), flags=["nsw"])
    base = e.b.ptrtoint(e.b.gep(e.get(op.base), [offset], inbounds=True), I64)
    lanes = ir.VectorType(I64, t.lanes)
    spread = e.b.insert_element(ir.Constant(lanes, ir.Undefined), base, ir.Constant(I32, 0))
    spread = e.b.shuffle_vector(
        spread, ir.Constant(lanes, ir.Undefined), ir.Constant(ir.VectorType(I32, t.lanes), None)
    )
    size = ir.Constant(lanes, [t.element.dtype.itemsize] * t.lanes)
    addresses = e.b.add(spread, e.b.mul(e.get(op.offsets), size))
    pointers = e.b.inttoptr(addresses, ir.VectorType(memory.element.as_pointer(), t.lanes))
    passthru = e.get(op.pass_thru)
    if t.element.name == "i1":
        passthru = e.b.zext(passthru, memory)
    gather = e.declare(
        f"llvm.masked.gather.v{t.lanes}{_lane_suffix(memory.element)}.v{t.lanes}p0",
        memory,
        [pointers.type, I32, ir.VectorType(I1, t.lanes), memory],
    )
    align = ir.Constant(I32, t.element.dtype.itemsize)
    value = e.b.call(gather, [pointers, align, e.get(op.mask), passthru])
    e.values[op.result] = e.b.trunc(value, scalar(t)) if t.element.name == "i1" else value


def _lane_suffix(element: ir.Type) -> str:
    if isinstance(element, ir.FloatType):
        return "f32"
    if isinstance(element, ir.DoubleType):
        return "f64"
    return f"i{element.width}"


@handles(A.VectorStoreOp)
def _vector_store(e: FunctionEmitter, op):
    t = op.operands[0].type
    value = e.get(op.operands[0])
    if t.element.name == "i1":
        value = e.b.zext(value, stored(t))
    e.guarded(
        op,
        t.lanes,
        lambda: e.b.store(value, e.b.bitcast(e.address(op), stored(t).as_pointer()), align=t.element.dtype.itemsize),
    )


@handles(MR.AllocaOp)
def _alloca(e: FunctionEmitter, op):
    # In the entry block, so a loop does not grow the stack on every iteration.
    t = op.result.type
    buffer = e.alloca_builder.alloca(stored(t.element), size=max(t.size, 1))
    buffer.align = MR.ALIGNMENT
    e.values[op.result] = buffer


@handles(MR.ViewOp)
def _view(e: FunctionEmitter, op):
    byte = e.b.gep(e.b.bitcast(e.get(op.source), I8.as_pointer()), [e.get(op.byte_shift)], inbounds=True)
    e.values[op.result] = e.b.bitcast(byte, stored(op.result.type.element).as_pointer())


@handles(MR.GetGlobalOp)
def _get_global(e: FunctionEmitter, op):
    variable = e.globals[op.attributes["name"]]
    e.values[op.result] = e.b.bitcast(variable, stored(op.result.type.element).as_pointer())
