"""Lower the ``tensor`` dialect to affine loop nests over memrefs.

Each function becomes a ``func.func`` of the same name taking one memref per
input and then one per output (destination-passing style), returning nothing.
Every computing op becomes one loop nest (fusion comes later); broadcasts,
transposes, slices and reshapes move no data: they become index arithmetic in
the loads of whoever reads them (see ``View``). Before::

    func.func @f(%x: tensor<3x4xf32>) -> tensor<4xf32> {
      %0 = kiln.transpose %x {permutation = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
      %1 = kiln.reduce_sum %0 {axes = array<i64: 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<4xf32>
      func.return %1 : tensor<4xf32>
    }

After::

    func.func @f(%x: memref<3x4xf32>, %out0: memref<4xf32>) attributes {kiln.buffers = ["x", "out0"]} {
      %0 = arith.constant 0.0 : f32
      affine.for %k0.i = 0 to 4 {
        %1 = affine.for %k0.r = 0 to 3 iter_args(%acc0 = %0) -> (f32) {
          %2 = affine.load %x[%k0.r, %k0.i] : memref<3x4xf32>
          %3 = arith.addf %acc0, %2 : f32
          affine.yield %3 : f32
        } {kiln.loop = "k0.r"}
        affine.store %1, %out0[%k0.i] : memref<4xf32>
      } {kiln.loop = "k0.i"}
      func.return
    }
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import builtin
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects import tensor as T
from kiln.dialects import tensor_sort as TS
from kiln.dialects.affine_expr import Dim
from kiln.dialects.rewriter import InsertPoint, Rewriter
from kiln.dialects.traits import LOOP_LIKE
from kiln.dialects.types import MemRefType, i8, index, memref_of

from .affine_builder import AffineBuilder, View
from .index_maps import operand_index
from .kernel_emitter import KernelEmitter
from .lower_conv import lower_conv2d
from .lower_indexed import LOWERINGS as INDEXED_LOWERINGS
from .lower_scan import lower_scan
from .lower_sort import lower_sort
from .pass_spec import Option, declare_pass, power_of_two_from

LOWERINGS: dict = {}


def lowers(*op_classes):
    def register(fn):
        for cls in op_classes:
            LOWERINGS[cls] = fn
        return fn

    return register


@declare_pass(
    "lower-tensor-to-affine",
    "lower tensor ops to affine loop nests over memrefs, one nest per kernel",
    Option("grid-sums", bool, False, "leave a whole-tensor float sum one loop, for a GPU to spread over its grid"),
    Option(
        "vector-bits",
        int,
        256,
        "the width of the target's vector registers: a convolution's columns round up to whole vectors "
        "(kiln.compile: the host CPU's)",
        power_of_two_from(64),
    ),
)
def lower_tensor_to_affine(
    module: builtin.ModuleOp, grid_sums: bool = False, vector_bits: int = 256
) -> builtin.ModuleOp:
    """Float sums become summation trees (see KernelEmitter.float_sum), except, with
    `grid_sums`, a whole-tensor sum, which a GPU backend spreads over its threads."""
    lowered = builtin.ModuleOp.empty()
    for function in module.body.ops:
        FunctionLowering(function, lowered, grid_sums, vector_bits).run()
    return lowered


@declare_pass("lower-tensor-to-affine-gpu", "the CUDA targets' lowering: lower-tensor-to-affine{grid-sums=true}")
def lower_tensor_to_affine_gpu(module: builtin.ModuleOp) -> builtin.ModuleOp:
    return lower_tensor_to_affine(module, grid_sums=True)


class FunctionLowering:
    def __init__(self, function: F.FuncOp, module: builtin.ModuleOp, grid_sums: bool = False, vector_bits: int = 256):
        self.source = function
        self.module = module
        self.grid_sums = grid_sums
        self.vector_bits = vector_bits
        results = function.function_type.results
        inputs = [memref_of(a.type) for a in function.arguments]
        outputs = [memref_of(t) for t in results]
        names = [a.name_hint for a in function.arguments] + [f"out{k}" for k in range(len(outputs))]
        self.function = F.FuncOp.create(function.sym_name, inputs + outputs, [], names, loc=function.loc)
        self.function.attributes[MR.ARGUMENT_BUFFERS] = tuple(n or f"in{k}" for k, n in enumerate(names))
        module.body.append(self.function)
        self.b = AffineBuilder(self.function.body)
        self.views = {arg: View.identity(new) for arg, new in zip(function.arguments, self.function.arguments)}
        self.outputs = self.function.arguments[len(inputs) :]
        self.allocated = []
        self.destinations = {}  # tensor value -> the output memref its op writes straight into
        self.arena = None
        self.buffer_count = 0
        self.view_offsets = {}  # arena view -> its byte offset
        self.nest_origins = []  # the tensor op (None: an output copy) that made each top-level nest, in order
        arena_bytes = function.attributes.get("arena_bytes", 0)
        if arena_bytes:  # the memory plan: one buffer for every intermediate
            self.arena = self.b.op(MR.AllocOp, result_type=MemRefType((arena_bytes,), i8))
            MR.set_buffer_name(self.arena, "arena")
            self.allocated.append(self.arena)

    def run(self) -> None:
        ret = self.source.body.ops[-1]
        copies = []
        for k, value in enumerate(ret.operands):
            producer = getattr(value, "op", None)
            writes_memory = producer is not None and LOWERINGS.get(type(producer)) not in VIEW_LOWERINGS
            if writes_memory and value not in self.destinations:
                self.destinations[value] = self.outputs[k]
            else:
                copies.append(k)
        for op in self.source.body.ops[:-1]:
            lowering = LOWERINGS.get(type(op))
            if lowering is None:
                raise op.error(f"no lowering from {op.name} to the affine dialect")
            lowering(self, op)
            self._note_nests(op)
        for k in copies:
            value = ret.operands[k]
            self.copy(self.views[value], self.outputs[k], value.type.shape)
            self._note_nests(None)
        for buffer in self.allocated:
            self.b.emit(MR.DeallocOp, [buffer], {})
        self.b.emit(F.ReturnOp, [], {})
        name_loops(self.function)

    def _note_nests(self, origin) -> None:
        nests = sum(op.has_trait(LOOP_LIKE) for op in self.function.body.ops)
        self.nest_origins += [origin] * (nests - len(self.nest_origins))

    # -- helpers ----------------------------------------------------------------------
    def destination(self, value):
        """The memref `value` is computed into: an output, or a new buffer."""
        offset = value.op.attributes.get("arena_offset") if hasattr(value, "op") else None
        if value in self.destinations:
            buffer = self.destinations[value]
        elif offset is not None and self.arena is not None:
            buffer = self.arena_view(offset, memref_of(value.type))
        else:
            buffer = self.b.op(MR.AllocOp, result_type=memref_of(value.type))
            self.allocated.append(buffer)
        if buffer not in self.outputs:
            self.name_buffer(buffer)
        if buffer in self.view_offsets:
            self.mark_in_place(value, buffer, offset)
        self.views[value] = View.identity(buffer)
        return buffer

    def arena_view(self, offset: int, memref_type):
        """A view of the arena at byte `offset`, of `memref_type` (named by the caller)."""
        shift = self.b.op(AR.ConstantOp, result_type=index, value=offset)
        buffer = self.b.op(MR.ViewOp, self.arena, shift, result_type=memref_type)
        self.view_offsets[buffer] = offset
        return buffer

    def mark_in_place(self, value, buffer, offset: int) -> None:
        """The plan puts a result at the offset of an input only to overwrite it in place
        (element by element: see passes/memory_plan.py); say so on the view, for the
        verifier, which otherwise refuses live views that share bytes."""
        for operand in value.op.operands:
            source = self.views.get(operand)
            if source is not None and self.view_offsets.get(source.buffer) == offset:
                buffer.op.attributes[MR.IN_PLACE_OF] = MR.buffer_name(source.buffer)

    def name_buffer(self, buffer) -> None:
        """Intermediates are named buf0, buf1, ... in the order they are made."""
        MR.set_buffer_name(buffer, f"buf{self.buffer_count}")
        self.buffer_count += 1

    def copy(self, view: View, buffer, shape) -> None:
        with self.b.loops(shape) as ivs:
            dims = [Dim(k) for k in range(len(shape))]
            self.b.store(self.b.load(view, dims, ivs), buffer, dims, ivs)

    def declare_global(self, array) -> MR.GetGlobalOp:
        """A memref.global for `array`, and an (unplaced) op that reads it."""
        count = sum(isinstance(op, MR.GlobalOp) for op in self.module.body.ops)
        name = f"cst_{count}"
        t = memref_of(T.tensor_type(array.shape, array.dtype))
        array = array.view(t.dtype)  # unsigned data as its signless bits
        constant = MR.GlobalOp([], {"sym_name": name, "type": t, "initial_value": array})
        Rewriter.insert(constant, InsertPoint.at_index(self.module.body, count))  # globals first, in order of use
        return MR.GetGlobalOp([], {"name": name}, [t])

    def global_constant(self, array) -> View:
        return View.identity(self.b.block.append(self.declare_global(array)).result)


def nest_origins(function: F.FuncOp, grid_sums: bool = False) -> list:
    """The tensor op that makes each loop nest of `function` (an optimized ``tensor``-level
    function) once lowered, in order: entry k is kernel ``k<k>``'s. A convolution lowers to
    several nests (packing, the matmul, the epilogue), all of them its; None marks a nest
    that copies a result to its output. Found by lowering `function` again, so that which
    op made which nest need not be kept in the IR, where it would print in every loop."""
    lowering = FunctionLowering(function, builtin.ModuleOp.empty(), grid_sums)
    lowering.run()
    return lowering.nest_origins


def name_loops(function) -> None:
    """Prefix every loop's name with its kernel: the loop i of the third loop nest is k2.i,
    the name schedules use."""
    nests = [op for op in function.body.ops if op.has_trait(LOOP_LIKE)]
    for number, nest in enumerate(nests):
        for op in nest.walk():
            if op.has_trait(LOOP_LIKE):
                A.set_loop_name(op, f"k{number}.{A.loop_name(op)}")


# -- kernels --------------------------------------------------------------------------------
@lowers(T.FusedOp, *T.ELEMENTWISE_OPS, *T.REDUCTION_OPS, T.MatmulOp)
def lower_kernel(L: FunctionLowering, op) -> None:
    """One loop nest for a kiln.fused group, or for a single computing op."""
    if isinstance(op, T.FusedOp):
        body = op.body
        members = set(body.ops[:-1])
        root = body.ops[-1].operands[0]
        bound = dict(zip(body.args, op.operands))

        def outside(value):
            return L.views[bound.get(value, value)]
    else:
        members, root = {op}, op.result

        def outside(value):
            return L.views[value]

    buffer = L.destination(op.result)
    emitter = KernelEmitter(L.function.body, members, outside, lambda c: L.declare_global(c.value), L.grid_sums)
    emitter.emit(root, buffer)


lowers(T.Conv2DOp)(lower_conv2d)  # passes/lower_conv.py
LOWERINGS.update(INDEXED_LOWERINGS)  # gathers and scatters: passes/lower_indexed.py
lowers(T.ScanOp)(lower_scan)  # passes/lower_scan.py
lowers(TS.SortOp)(lower_sort)  # passes/lower_sort.py


@lowers(T.ConcatOp)
def lower_concat(L: FunctionLowering, op) -> None:
    out, axis, offset = L.destination(op.result), op.axis, 0
    for value in op.operands:
        shape = value.type.shape
        with L.b.loops(shape) as ivs:
            dims = [Dim(d) for d in range(len(shape))]
            target = [d + offset if k == axis else d for k, d in enumerate(dims)]
            L.b.store(L.b.load(L.views[value], dims, ivs), out, target, ivs)
        offset += shape[axis]


@lowers(T.InsertSliceOp)
def lower_insert_slice(L: FunctionLowering, op) -> None:
    shape = op.result.type.shape
    dest_view = L.views[op.dest]  # read before destination() rebinds anything
    out = L.destination(op.result)
    L.copy(dest_view, out, shape)
    with L.b.loops(op.source.type.shape) as ivs:
        dims = [Dim(d) for d in range(len(shape))]
        target = [d * s + a for d, a, s in zip(dims, op.start, op.step)]
        L.b.store(L.b.load(L.views[op.source], dims, ivs), out, target, ivs)


@lowers(T.ConstantOp)
def lower_constant(L: FunctionLowering, op) -> None:
    L.views[op.result] = L.global_constant(op.value)


# -- views: index arithmetic, no code ---------------------------------------------------------
@lowers(*T.VIEW_OPS)
def lower_view(L: FunctionLowering, op) -> None:
    identity = [Dim(k) for k in range(op.result.type.rank)]
    L.views[op.result] = L.views[op.operand].through(operand_index(op, identity))


VIEW_LOWERINGS = (lower_view, lower_constant)
