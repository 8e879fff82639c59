"""CUDA C for an affine-level module: one ``__global__`` function per kernel and an
``extern "C"`` host entry that launches them in order.

GPU mapping: each kernel's perfectly nested result loops are flattened into
one index that a grid-stride loop spreads over every thread of every block
(one thread per output element); what is inside them (reductions, a matmul's
k loop, a row's inner loops) runs sequentially in that thread. A reduction of a
whole tensor to a scalar is a two-level tree over the grid instead
(``reduction_kernel``). The host entry
allocates the memory arena with ``cudaMalloc``, checks every CUDA call and the
last error after each launch, synchronizes, and returns 0 or an error code.

The same source compiles as plain C++ with ``KILN_EMULATE`` defined: the grid
and block loops are then explicit loops on the CPU (kiln's tests check the
kernels' numbers that way on machines without a GPU).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

from kiln.codegen.cuda_ops import EXPRESSIONS, literal
from kiln.codegen.cuda_prelude import (
    C_TYPES,
    CUDA_ERROR_BASE,
    PRELUDE,
    REDUCTION_BLOCKS,
    REDUCTION_SHARE,
    STORED,
)
from kiln.codegen.status import STATUS, check_status
from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import cf as CF
from kiln.dialects import func as F
from kiln.dialects import gpu as G
from kiln.dialects import memref as MR
from kiln.dialects.affine import BIND
from kiln.dialects.affine_expr import Binary, Const, Dim
from kiln.dialects.traits import LOOP_LIKE
from kiln.dialects.types import MemRefType
from kiln.passes.gpu_launch import (
    KILN_WARP,
    THREADS_PER_BLOCK,
    THREADS_PER_BLOCK_MAX,
    Launch,
    bound,
    bound_launch,
    bound_reductions,
    flat_extent,
    plain_launch,
    thread_loops,
)
from kiln.passes.kernel_inputs import outside_values
from kiln.passes.outline_kernels import BLOCK, COOPERATIVE, GRID, KERNEL, RECOMPUTED


def emit_cuda(module, prefix: str = "", prelude: bool = True) -> str:
    """CUDA C source for `module` (affine level: scheduled, or with each nest outlined by
    ``outline-kernels{launch=true}``, whose callees become the ``__global__`` functions their
    calls launch with the call's ``kiln.grid`` and ``kiln.block``). `prefix` keeps names
    unique when several modules share one file (then only the first needs the prelude)."""
    parts = [PRELUDE] if prelude else []
    for op in module.body.ops:
        if isinstance(op, MR.GlobalOp):
            parts.append(_global(op, prefix))
    functions = [op for op in module.body.ops if isinstance(op, F.FuncOp)]
    called = {inner.attributes["callee"] for op in functions for inner in op.body.ops if isinstance(inner, F.CallOp)}
    callees = {op.sym_name: op for op in functions if op.sym_name in called}
    for op in functions:
        if op.sym_name not in callees:  # a kernel's function is printed where it is launched
            parts.append(_FunctionEmitter(op, prefix, callees).emit())
    return "\n".join(parts)


def entry_name(function_name: str, prefix: str = "") -> str:
    return "kiln_" + prefix + re.sub(r"\W", "_", function_name)


def _global(op, prefix) -> str:
    t = op.type
    values = op.initial_value.reshape(-1)
    data = ", ".join(literal(v, t.element.name) for v in values) or "0"
    return f"__device__ const {STORED[t.element.name]} {prefix}{op.sym_name}[{max(1, values.size)}] = {{{data}}};"


class _FunctionEmitter:
    def __init__(self, function: F.FuncOp, prefix: str, callees: dict):
        self.function = function
        self.prefix = prefix
        self.callees = callees  # name -> the private function a kernel's func.call runs
        self.names = {}
        self.counter = 0
        self.kernels = []
        self._active = None  # in a cooperative kernel: the C condition that this thread has work
        # In a kernel whose block shares rows (a bound reduction), a store outside the
        # thread-bound loops is the block's: thread 0 writes it, not every thread the same value.
        self.block_stores = False
        self.thread_depth = 0  # thread-bound loops around the statement being emitted
        self._compensated = {}  # a bound float sum's update -> (its accumulator, the lost-bits variable)

    def name(self, value) -> str:
        if value not in self.names:
            self.names[value] = f"v{self.counter}"
            self.counter += 1
        return self.names[value]

    def emit(self) -> str:
        fn = self.function
        host, kernel_sources = [], []
        params = [f"{STORED[a.type.element.name]} *{self.name(a)}" for a in fn.arguments]
        host.append(f'extern "C" int {entry_name(fn.sym_name, self.prefix)}({", ".join(params) or "void"}) {{')
        host.append("    cudaError_t error = cudaSuccess;")
        host.append("    int status = 0;")
        for op in fn.body.ops:  # every buffer declared before the first goto
            if isinstance(op, (MR.AllocOp, MR.ViewOp)):
                t = op.result.type
                host.append(f"    {STORED[t.element.name]} *{self.name(op.result)} = 0;")
            elif isinstance(op, AR.ConstantOp):
                self.names[op.result] = literal(op.value, op.result.type.name)
        allocations, loose = [], []
        # Scalars computed at top level (a full reduction, a 0-d result) and read by a later
        # kernel live in __device__ variables: kernels cannot see each other's locals.
        self.shared = {
            v: f"{entry_name(fn.sym_name, self.prefix)}_s{k}" for k, v in enumerate(_crossing_scalars(fn.body.ops))
        }
        shared_declarations = [f"__device__ {C_TYPES[v.type.name]} {g};" for v, g in self.shared.items()]
        for op in fn.body.ops:
            launched = isinstance(op, F.CallOp) and KERNEL in op.attributes
            parallel = launched or (op.has_trait(LOOP_LIKE) and not op.results)
            reduction = _full_reduction(op)
            if loose and (parallel or reduction or not _is_device(op)):
                kernel_sources.append(self.kernel(None, host, loose))
                loose = []
            if launched:
                kernel_sources.append(self.launched_kernel(op, host))
            elif parallel and bound(op):
                kernel_sources.append(self.bound_kernel(op, host))
            elif parallel:
                kernel_sources.append(self.kernel(op, host))
            elif reduction:
                kernel_sources.append(self.reduction_kernel(reduction, host))
            elif _is_device(op):  # scalar work (a full reduction, a 0-d result): one thread
                loose.append(op)
            else:
                self.host_statement(op, host, allocations)
        if loose:
            kernel_sources.append(self.kernel(None, host, loose))
        host.append("    error = cudaDeviceSynchronize();")
        host.append("    if (error == cudaSuccess) error = KILN_READ_STATUS(status);")
        host.append("done:")
        for v in reversed(allocations):
            host.append(f"    if ({v}) cudaFree({v});")
        host.append(f"    return error != cudaSuccess ? {CUDA_ERROR_BASE} + (int)error : status;")
        host.append("}")
        return "\n".join(shared_declarations + kernel_sources + host) + "\n"

    def host_statement(self, op, host, allocations) -> None:
        if isinstance(op, MR.AllocOp):
            t = op.result.type
            v = self.name(op.result)
            host.append(
                f"    if (cudaMalloc((void **)&{v}, {max(1, t.size) * t.dtype.itemsize}) != cudaSuccess) "
                f"{{ status = {STATUS['out of memory']}; goto done; }}"
            )
            allocations.append(v)
        elif isinstance(op, MR.ViewOp):
            shift = op.byte_shift.op.value
            t = op.result.type
            host.append(
                f"    {self.name(op.result)} = "
                f"({STORED[t.element.name]} *)((unsigned char *){self.name(op.source)} + {shift});"
            )
        elif isinstance(op, MR.GetGlobalOp):
            self.names[op.result] = self.prefix + op.attributes["name"]
        elif not isinstance(op, (AR.ConstantOp, MR.DeallocOp, F.ReturnOp)):
            raise NotImplementedError(f"no CUDA host code for {op.name}")

    # -- one kernel ------------------------------------------------------------------------
    def launched_kernel(self, call, host) -> str:
        """The __global__ function of the kernel `call` runs (its callee holds one loop nest),
        launched with the call's sizes. The callee's arguments name what the call passes
        (buffers, views, scalars) and the constants and globals it makes again are named as
        the host's are, so the kernel's text is the one the nest printed inline gives."""
        callee = self.callees[call.attributes["callee"]]
        nests = [op for op in callee.body.ops if not isinstance(op, (*RECOMPUTED, F.ReturnOp))]
        if len(nests) != 1 or not isinstance(nests[0], A.ForOp) or GRID not in call.attributes:
            raise NotImplementedError(
                f"@{callee.sym_name}: a CUDA kernel's function runs one loop nest, its call notes its launch "
                "(outline-kernels{launch=true})"
            )
        for value, operand in zip(callee.arguments, call.operands):
            self.names[value] = self.expr(operand)
            if operand in self.shared:
                self.shared[value] = self.shared[operand]
        for op in callee.body.ops:
            if isinstance(op, AR.ConstantOp):
                self.names[op.result] = literal(op.value, op.result.type.name)
            elif isinstance(op, MR.GetGlobalOp):
                self.names[op.result] = self.prefix + op.attributes["name"]
        cooperative = bool(call.attributes.get(COOPERATIVE, False))
        launch = Launch(tuple(call.attributes[GRID]), tuple(call.attributes[BLOCK]), cooperative)
        nest = nests[0]
        return self.bound_kernel(nest, host, launch) if bound(nest) else self.kernel(nest, host, launch=launch)

    def kernel(self, nest, host, statements=None, launch=None) -> str:
        """A __global__ function for a loop nest (or for loose statements, run by one thread),
        launched with `launch` (by default ``plain_launch``'s: one thread an iteration of its
        ``thread_loops``)."""
        number = len(self.kernels)
        self.kernels.append(nest)
        chain = thread_loops(nest) if nest is not None else []
        extents = [l.upper for l in chain]
        total = flat_extent(chain)
        launch = launch or (plain_launch(nest) if nest is not None else Launch((1, 1, 1), (1, 1, 1)))
        if launch.empty:  # an empty tensor: nothing to launch
            return ""
        used = self._external_buffers(statements if nest is None else [nest])
        name = f"{entry_name(self.function.sym_name, self.prefix)}_k{number}"
        params = ", ".join(f"{STORED[v.type.element.name]} *{self.name(v)}" for v in used) or "void"
        lines = [f"__global__ void {name}({params}) {{"] + self._grid_stride(chain, extents, total)
        inner = chain[-1].body.ops if chain else (statements if nest is None else [nest])
        self.lines = lines
        self.indent = 2
        self._read_shared(statements if nest is None else [nest])
        self._carried = []  # the values an affine.yield assigns, in the loop being emitted
        self.block(inner)
        lines.append("    }")
        lines.append("}")
        args = ", ".join(self.name(v) for v in used)
        host.append(f"    KILN_LAUNCH({name}, {launch.grid[0]}, {launch.block[0]}{', ' if args else ''}{args});")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        return "\n".join(lines) + "\n"

    def bound_kernel(self, nest, host, launch=None) -> str:
        """A kernel whose schedule binds loops to block and thread indices: each bound loop
        strides over its index, the others run in every thread; launched with `launch` (by
        default ``bound_launch``'s)."""
        number = len(self.kernels)
        self.kernels.append(nest)
        name = f"{entry_name(self.function.sym_name, self.prefix)}_k{number}"
        launch = launch or bound_launch(nest)
        reductions = bound_reductions(nest)
        used = self._external_buffers([nest])
        params = ", ".join(f"{STORED[v.type.element.name]} *{self.name(v)}" for v in used) or "void"
        self.lines, self.indent, self._carried = [f"__global__ void {name}({params}) {{"], 1, []
        self._read_shared([nest])
        self.block_stores = reductions
        self.block([nest])
        self.block_stores = False
        self.lines.append("}")
        args = ", ".join(self.name(v) for v in used)
        config = ", ".join(str(d) for d in (*launch.grid, *launch.block))
        macro = "KILN_LAUNCH_COOP" if launch.cooperative else "KILN_LAUNCH3"
        host.append(f"    {macro}({name}, {config}{', ' if args else ''}{args});")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        return "\n".join(self.lines) + "\n"

    def reduction_kernel(self, reduction, host) -> str:
        """A reduction of a whole tensor to one scalar as a two-level tree: each thread combines
        a strided share of the elements (coalesced reads), each block combines its threads'
        partial results (kiln_block_allreduce: warp shuffles, then the warps in order) into one
        partial per block, and a second launch of one block combines those the same way into
        the result. No atomics: every combine's order follows from the thread and block
        indices, so the result has the same bits on every run, and a float sum's error grows
        with the share per thread and the log of the thread count, as a pairwise sum's does."""
        loops, tree = reduction
        init = loops[0].inits[0]
        result = loops[0].results[0]
        target = self.shared[result]
        number = len(self.kernels)
        self.kernels.append(loops[0])
        name = f"{entry_name(self.function.sym_name, self.prefix)}_k{number}"
        extents = [l.upper for l in loops]
        total = int(np.prod(extents, dtype=np.int64))
        used = self._external_buffers([loops[0]])
        params = ", ".join(f"{STORED[v.type.element.name]} *{self.name(v)}" for v in used) or "void"
        partial = self.name(loops[-1].body.args[1])
        for loop in loops:  # every level's accumulator is the thread's partial result
            self.names[loop.body.args[1]] = partial
        # Whole warps (the shuffles need them); an empty reduction still launches: its
        # identity is the result.
        threads = min(THREADS_PER_BLOCK, max(KILN_WARP, -(-total // KILN_WARP) * KILN_WARP))
        blocks = max(1, min(REDUCTION_BLOCKS, -(-total // (threads * REDUCTION_SHARE))))
        finishers = min(THREADS_PER_BLOCK_MAX, -(-blocks // KILN_WARP) * KILN_WARP)
        allreduce = f"kiln_block_allreduce<{tree.c_type}, {tree.combine}>"
        c_type = C_TYPES[result.type.name]
        narrow = "v" if c_type == tree.c_type else f"({c_type})v"
        lines = [
            f"__device__ {tree.c_type} {name}_blocks[{blocks}];",
            f"__global__ void {name}({params}) {{",
            f"    {c_type} {partial} = {self.expr(init)};",
        ] + self._grid_stride(loops, extents, total)
        self.lines, self.indent, self._carried = lines, 2, [partial]
        self._read_shared([loops[0]])
        self.block(loops[-1].body.ops)
        lines += [
            "    }",
            f"    {tree.c_type} block = {allreduce}({tree.widen(partial, c_type)});",
            f"    if (threadIdx.x == 0) {name}_blocks[blockIdx.x] = block;",
            "}",
            f"__global__ void {name}_total(void) {{",
            f"    {tree.c_type} v = {tree.widen(self.expr(init), c_type)};",
            f"    for (int b = threadIdx.x; b < {blocks}; b += blockDim.x) v = {tree.combine}(v, {name}_blocks[b]);",
            f"    v = {allreduce}(v);",
            f"    if (threadIdx.x == 0) {target} = {narrow};",
            "}",
        ]
        args = ", ".join(self.name(v) for v in used)
        host.append(f"    KILN_LAUNCH_COOP({name}, {blocks}, 1, 1, {threads}, 1, 1{', ' if args else ''}{args});")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        host.append(f"    KILN_LAUNCH_COOP({name}_total, 1, 1, 1, {finishers}, 1, 1);")
        host.append("    if ((error = cudaGetLastError()) != cudaSuccess) goto done;")
        self.names[result] = self.name(result)
        return "\n".join(lines) + "\n"

    def _grid_stride(self, loops, extents, total) -> list:
        """The grid-stride loop over `total` flattened iterations, and each loop's index
        recovered from the flat one (the last loop varies fastest)."""
        lines = [
            "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
            f"t < {total}LL; t += (long long)gridDim.x * blockDim.x) {{"
        ]
        remaining = "t"
        for loop, extent in reversed(list(zip(loops, extents))):
            lines.append(f"        long long {self.name(loop.induction_variable)} = {remaining} % {extent}LL;")
            remaining = f"({remaining} / {extent}LL)"
        return lines

    def _read_shared(self, roots) -> None:
        """Load the top-level scalars these ops read from their __device__ variables."""
        for value in self._shared_reads(roots):
            self.line(f"{C_TYPES[value.type.name]} {self.name(value)} = {self.shared[value]};")

    def _shared_reads(self, roots) -> list:
        return _read_from_outside(roots, lambda v: v in self.shared)

    def _external_buffers(self, roots) -> list:
        """The buffers these ops use, made outside them: the kernel's parameters (globals
        are visible to every kernel, so they are not passed)."""
        return _read_from_outside(
            roots, lambda v: isinstance(v.type, MemRefType) and not isinstance(getattr(v, "op", None), MR.GetGlobalOp)
        )

    # -- statements ---------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def block(self, ops) -> None:
        for op in ops:
            self.statement(op)

    def statement(self, op) -> None:
        self._statement(op)
        for result in op.results:
            if result in self.shared:
                self.line(f"{self.shared[result]} = {self.expr(result)};")

    def _statement(self, op) -> None:
        if isinstance(op, A.YieldOp):
            for target, value in zip(self._carried, op.operands):
                self.line(f"{target} = {self.expr(value)};")
            return
        if isinstance(op, A.ForOp) and op.inits and BIND in op.attributes:
            self._bound_reduction(op)
            return
        if isinstance(op, A.ForOp):
            self._loop(op)
            return
        if isinstance(op, (A.LoadOp, MR.LoadOp)):
            t = op.result.type
            load = f"{self.name(op.memref)}[{self.offset(op)}]{' != 0' if t.name == 'i1' else ''}"
            if self._active:  # an idle thread reads nothing (its indices may be past the buffer)
                load = f"{self._active} ? ({load}) : ({C_TYPES[t.name]})0"
            self.line(f"{C_TYPES[t.name]} {self.name(op.result)} = {load};")
            return
        if isinstance(op, A.ApplyOp):
            self.line(f"long long {self.name(op.result)} = {self.index(op.map.results[0], op.operands)};")
            return
        if isinstance(op, (A.StoreOp, MR.StoreOp)):
            conditions = [self._active] if self._active else []
            if self.block_stores and not self.thread_depth:  # the block's store: one thread writes it
                conditions.append("threadIdx.x == 0")
            guard = f"if ({' && '.join(conditions)}) " if conditions else ""
            self.line(f"{guard}{self.name(op.memref)}[{self.offset(op)}] = {self.expr(op.operands[0])};")
            return
        if isinstance(op, AR.ConstantOp):
            self.names[op.result] = literal(op.value, op.result.type.name)
            return
        if isinstance(op, MR.AllocaOp) and op.result.type.memory_space == "workgroup":
            t = op.result.type
            # __shared__ on the GPU; the emulation also poisons it for each block (a missing barrier reads NaN)
            self.line(f"KILN_SHARED({STORED[t.element.name]}, {self.name(op.result)}, {max(1, t.size)})")
            return
        if isinstance(op, G.BarrierOp):
            self.line("__syncthreads();")
            return
        if isinstance(op, CF.AssertOp):  # a failed check records its status and the kernel goes on
            active = f"{self._active} && " if self._active else ""
            self.line(
                f"if ({active}!{self.expr(op.condition)}) kiln_status = {check_status(self.function, op, self.callees)};"
            )
            return
        if op in self._compensated:
            acc, lost = self._compensated.pop(op)
            term = op.operands[1] if op.operands[0] is acc else op.operands[0]
            c_type = C_TYPES[acc.type.name]
            self.line(
                f"{c_type} {self.name(op.result)} = kiln_kahan_add({self.expr(acc)}, {self.expr(term)}, &{lost});"
            )
            return
        value = EXPRESSIONS.get(type(op))
        if value is None:
            raise NotImplementedError(f"no CUDA code for {op.name}")
        t = op.results[0].type
        self.line(f"{C_TYPES[t.name]} {self.name(op.results[0])} = {value(self, op)};")

    def _bound_reduction(self, op) -> None:
        """A reduction loop bound to threadIdx.x (checked by the bind step): each thread combines
        a strided share of the iterations into partial results that start at the combine's
        identity (a float sum's with compensation: kiln_kahan_add), kiln_block_allreduce
        combines the block's partials (every thread gets them), and the loop's inits are
        combined in last, once."""
        if self._active:
            raise NotImplementedError("a bound reduction where some threads of the block are idle")
        trees, lost = [], {}
        for acc, value in zip(op.body.args[1:], op.body.ops[-1].operands):
            update = value.op
            tree, identity = _COMBINE[type(update), acc.type.name]  # the bind step checked the kind
            trees.append(tree)
            c_type = C_TYPES[acc.type.name]
            # -0.0, not 0.0, is a float sum's identity: -0.0 + -0.0 is -0.0
            start = literal(-0.0, acc.type.name) if isinstance(update, AR.AddFOp) else literal(identity, acc.type.name)
            self.line(f"{c_type} {self.name(acc)} = {start};")
            if isinstance(update, AR.AddFOp):  # a float sum: compensated (see kiln_kahan_add)
                lost[acc] = f"{self.name(acc)}_lost"
                self._compensated[update] = (acc, lost[acc])
                self.line(f"{c_type} {lost[acc]} = 0;")
        iv = self.name(op.induction_variable)
        bound = str(op.upper) if op.constant_bounds else self._min(op)
        self.line(f"for (long long {iv} = threadIdx.x; {iv} < {bound}; {iv} += blockDim.x) {{")
        self.indent += 1
        self.thread_depth += 1
        saved, self._carried = self._carried, [self.name(a) for a in op.body.args[1:]]
        self.block(op.body.ops)
        self._carried = saved
        self.thread_depth -= 1
        self.indent -= 1
        self.line("}")
        for acc, init, result, tree in zip(op.body.args[1:], op.inits, op.results, trees):
            c_type = C_TYPES[acc.type.name]
            partial = self.name(acc)
            if acc in lost:  # the rounding the thread's share dropped, taken back once more
                partial = f"{'kiln_fsub' if c_type == 'float' else 'kiln_dsub'}({partial}, {lost[acc]})"
            # narrow integers and booleans combine widened, as the whole-tensor trees do
            total = f"kiln_block_allreduce<{tree.c_type}, {tree.combine}>({tree.widen(partial, c_type)})"
            combined = f"{tree.combine}({tree.widen(self.expr(init), c_type)}, {total})"
            narrow = combined if c_type == tree.c_type else f"({c_type}){combined}"
            self.line(f"{c_type} {self.name(result)} = {narrow};")

    def _loop(self, op) -> None:
        """A for loop. In a kernel whose threads cooperate, a thread loop around barriers
        whose bound is not constant runs to its constant limit (the block's size: every
        thread reaches the barriers), and what its idle threads must not do (reads,
        writes, loops without barriers) is predicated on the real bound."""
        carried = [self.name(a) for a in op.body.args[1:]]
        for var, init, result in zip(carried, op.inits, op.results):
            self.line(f"{C_TYPES[init.type.name]} {var} = {self.expr(init)};")
            self.names[result] = var
        iv = self.name(op.induction_variable)
        bound = str(op.upper) if op.constant_bounds else self._min(op)
        axis = str(op.attributes.get(BIND, ""))
        barriers = any(isinstance(inner, G.BarrierOp) for inner in op.walk())
        # A loop around a cooperative copy (a batch dimension of the tile, say) is one every
        # thread runs, like the copy's thread loops themselves: guarding it would leave the
        # idle threads' share of the tile uncopied.
        copies = any(
            str(inner.attributes.get(BIND, "")).startswith("threadIdx") for inner in op.walk() if inner is not op
        )
        saved_active = self._active
        guarded = self._active and not barriers and not axis.startswith("threadIdx") and not copies
        if guarded:
            self.line(f"if ({self._active}) {{")
            self.indent += 1
        if axis:  # checked by the bind step: from 0 by 1, no iter_args
            size = axis.replace("blockIdx", "gridDim").replace("threadIdx", "blockDim")
            limit = str(A.constant_limit(op)) if barriers and axis.startswith("threadIdx") else bound
            self.line(f"for (long long {iv} = {axis}; {iv} < {limit}; {iv} += {size}) {{")
        else:
            self.line(f"for (long long {iv} = {op.lower}; {iv} < {bound}; {iv} += {op.step}) {{")
        self.indent += 1
        if guarded or (axis.startswith("threadIdx") and not barriers):
            self._active = None  # already guarded, or a cooperative copy every thread runs
        elif barriers and axis.startswith("threadIdx") and not op.constant_bounds:
            flag = f"{iv}_active"
            self.line(f"const bool {flag} = {iv} < {bound};")
            self._active = f"{self._active} && {flag}" if self._active else flag
        threads = int(axis.startswith("threadIdx"))
        self.thread_depth += threads
        saved, self._carried = self._carried, carried
        self.block(op.body.ops)
        self._carried = saved
        self.thread_depth -= threads
        self._active = saved_active
        self.indent -= 1
        self.line("}")
        if guarded:
            self.indent -= 1
            self.line("}")

    def expr(self, value) -> str:
        return self.names.get(value) or self.name(value)

    def offset(self, access) -> str:
        strides = access.memref.type.strides
        terms = [f"({self.index(e, access.indices)}) * {s}LL" for e, s in zip(access.map.results, strides)]
        return " + ".join(terms) or "0"

    def index(self, expr, operands) -> str:
        if isinstance(expr, Const):
            return f"{expr.value}LL"
        if isinstance(expr, Dim):
            return self.expr(operands[expr.index])
        assert isinstance(expr, Binary)
        a, b = self.index(expr.lhs, operands), self.index(expr.rhs, operands)
        if expr.kind == "+":
            return f"({a} + {b})"
        if expr.kind == "*":
            return f"({a} * {b})"
        if expr.kind == "floordiv":
            return f"kiln_floordiv({a}, {b})"
        if expr.kind == "ceildiv":
            return f"(-kiln_floordiv(-({a}), {b}))"
        return f"kiln_mod({a}, {b})"

    def _min(self, op) -> str:
        values = [self.index(e, op.bound_operands) for e in op.upper_map.results]
        text = values[0]
        for v in values[1:]:
            text = f"(({text}) < ({v}) ? ({text}) : ({v}))"
        return text


def _read_from_outside(roots, wanted) -> list:
    """The values, in order of first use, that ops in `roots` read, are `wanted`, and are
    not made inside `roots`."""
    return [v for v in outside_values(roots).taken if wanted(v)]


def _is_device(op) -> bool:
    """Whether a top-level op runs on the GPU (loops and loose scalar work) rather than the host."""
    return not isinstance(op, (MR.AllocOp, MR.ViewOp, MR.GetGlobalOp, MR.DeallocOp, AR.ConstantOp, F.ReturnOp))


class _Tree(NamedTuple):
    """How the block trees of a whole-tensor reduction combine its partial results."""

    c_type: str  # warp shuffles move 32- and 64-bit values: narrower integers are widened
    combine: str  # a prelude function c_type(c_type, c_type)
    unsigned: str | None  # the accumulator's unsigned type where the combine compares unsigned

    def widen(self, value: str, accumulator: str) -> str:
        """`value`, of C type `accumulator`, in the tree's type (zero-extended if unsigned)."""
        if self.unsigned:
            return f"({self.c_type})({self.unsigned}){value}"
        return value if accumulator == self.c_type else f"({self.c_type}){value}"


_INTEGERS = ("i8", "i16", "i32", "i64")
_SIGNED = {"i8": "int", "i16": "int", "i32": "int", "i64": "long long"}
_UNSIGNED = {"i1": "unsigned", "i8": "unsigned", "i16": "unsigned", "i32": "unsigned", "i64": "unsigned long long"}
_NARROW_UNSIGNED = {
    "i1": "bool",
    "i8": "unsigned char",
    "i16": "unsigned short",
    "i32": "unsigned",
    "i64": "unsigned long long",
}


def _unsigned_tree(combine, t):
    return _Tree(_UNSIGNED[t], combine, _NARROW_UNSIGNED[t])


# The accumulator updates of kiln's reductions (passes.scalar_rules.REDUCTION_COMBINE), by
# accumulator type: how their block trees combine, and the identity the accumulator starts at
# (an integer as the signless constant prints it: all ones is -1, true is 1).
_COMBINE = {
    (AR.AddFOp, "f32"): (_Tree("float", "kiln_add", None), 0.0),
    (AR.AddFOp, "f64"): (_Tree("double", "kiln_add", None), 0.0),
    (AR.MaximumFOp, "f32"): (_Tree("float", "kiln_maxf", None), -math.inf),
    (AR.MaximumFOp, "f64"): (_Tree("double", "kiln_max", None), -math.inf),
    (AR.MinimumFOp, "f32"): (_Tree("float", "kiln_minf", None), math.inf),
    (AR.MinimumFOp, "f64"): (_Tree("double", "kiln_min", None), math.inf),
    # a wrapping sum's low bits are the narrow sum's, so narrow sums add in int
    **{(AR.AddIOp, t): (_Tree(_SIGNED[t], "kiln_add", None), 0) for t in _INTEGERS},
    **{(AR.MaxSIOp, t): (_Tree(_SIGNED[t], "kiln_maxi", None), -(2 ** (int(t[1:]) - 1))) for t in _INTEGERS},
    **{(AR.MinSIOp, t): (_Tree(_SIGNED[t], "kiln_mini", None), 2 ** (int(t[1:]) - 1) - 1) for t in _INTEGERS},
    **{(AR.MaxUIOp, t): (_unsigned_tree("kiln_maxi", t), 0) for t in _INTEGERS},
    **{(AR.MinUIOp, t): (_unsigned_tree("kiln_mini", t), -1) for t in _INTEGERS},
    (AR.OrIOp, "i1"): (_unsigned_tree("kiln_maxi", "i1"), 0),  # any: the maximum of 0s and 1s
    (AR.AndIOp, "i1"): (_unsigned_tree("kiln_mini", "i1"), 1),  # all: their minimum
}


def _full_reduction(op):
    """(the loops, how the block trees combine) when `op` reduces a whole iteration space to
    one scalar (``sum``, ``max``, ``min``, ``any``, ``all`` of a tensor), else None.

    The shape: perfectly nested affine.for loops from 0 by 1 to constants, one accumulator
    threaded through all of them, started at the combine's identity, and updated by one
    ``acc = combine(acc, x)`` (or ``combine(x, acc)``) in the innermost body that nothing else reads.
    """
    if not isinstance(op, A.ForOp) or len(op.inits) != 1:
        return None
    loops = [op]
    while True:
        loop = loops[-1]
        if not (loop.constant_bounds and loop.lower == 0 and loop.step == 1 and len(loop.inits) == 1):
            return None
        body = loop.body.ops
        inner = body[0] if len(body) == 2 and isinstance(body[0], A.ForOp) else None
        if inner is None or inner.inits[:1] != [loop.body.args[1]] or body[1].operands != [inner.results[0]]:
            break
        loops.append(inner)
    accumulator = loops[-1].body.args[1]
    yielded = loops[-1].body.ops[-1].operands[0]
    update = getattr(yielded, "op", None)
    combine = _COMBINE.get((type(update), accumulator.type.name))
    if combine is None or [v is accumulator for v in update.operands].count(True) != 1:
        return None
    if any(v is accumulator for inner in loops[-1].body.ops if inner is not update for v in inner.operands):
        return None
    if A.partials_escape(loops[-1], update):  # a scan stores every step: one thread runs it in order
        return None
    tree, identity = combine
    producer = getattr(op.inits[0], "op", None)
    if not isinstance(producer, AR.ConstantOp) or producer.value != identity:
        return None
    return loops, tree


def _crossing_scalars(ops) -> list:
    """Scalar results of top-level ops that another top-level op reads."""
    producer = {r: op for op in ops if _is_device(op) for r in op.results if not isinstance(r.type, MemRefType)}
    found = []
    for op in ops:
        for inner in op.walk():
            for v in inner.operands:
                if v in producer and producer[v] is not op and v not in found:
                    found.append(v)
    return found
