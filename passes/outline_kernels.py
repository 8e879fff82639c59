"""``outline-kernels``: each kernel of a scheduled function in a private function of its own.

A kernel's top-level loop nests (those named ``k<n>.*`` that run one after another) move
into ``func.func private @<fn>_k<n>``, called once where they were. Its arguments are what
the nests read from the function (``kernel_inputs.outside_values``): the buffers, as their
bases (an argument of the function, or an arena it allocated), and the scalars computed
before them (a whole-array reduction's result). Views of an arena, globals and constants
are made again inside, so that the callee sees where each view points, and LLVM the same
aliasing facts as when the nest was inline (see ``kiln.codegen.llvm_kernels``). Before::

    func.func @f(%x: memref<16xf32>, %out0: memref<16xf32>) {
      %arena = memref.alloc() {alignment = 64 : i64} : memref<64xi8>
      %c0 = arith.constant 0 : index
      %t = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
      affine.for %k0.i = 0 to 16 {
        %0 = affine.load %x[%k0.i] : memref<16xf32>
        %1 = math.exp %0 : f32
        affine.store %1, %t[%k0.i] : memref<16xf32>
      } {kiln.loop = "k0.i"}
      affine.for %k1.i = 0 to 16 {
        %2 = affine.load %t[%k1.i] : memref<16xf32>
        affine.store %2, %out0[%k1.i] : memref<16xf32>
      } {kiln.loop = "k1.i"}
      memref.dealloc %arena : memref<64xi8>
      func.return
    }

After::

    func.func private @f_k0(%x: memref<16xf32>, %arena: memref<64xi8>) {
      %c0 = arith.constant 0 : index
      %t = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
      affine.for %k0.i = 0 to 16 {
        %0 = affine.load %x[%k0.i] : memref<16xf32>
        %1 = math.exp %0 : f32
        affine.store %1, %t[%k0.i] : memref<16xf32>
      } {kiln.loop = "k0.i"}
      func.return
    }
    func.func private @f_k1(%arena: memref<64xi8>, %out0: memref<16xf32>) {
      %c0 = arith.constant 0 : index
      %t = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
      affine.for %k1.i = 0 to 16 {
        %0 = affine.load %t[%k1.i] : memref<16xf32>
        affine.store %0, %out0[%k1.i] : memref<16xf32>
      } {kiln.loop = "k1.i"}
      func.return
    }
    func.func @f(%x: memref<16xf32>, %out0: memref<16xf32>) {
      %arena = memref.alloc() {alignment = 64 : i64} : memref<64xi8>
      %c0 = arith.constant 0 : index
      %t = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
      func.call @f_k0(%x, %arena) {kiln.kernel = "k0"} : (memref<16xf32>, memref<64xi8>) -> ()
      func.call @f_k1(%arena, %out0) {kiln.kernel = "k1"} : (memref<64xi8>, memref<16xf32>) -> ()
      memref.dealloc %arena : memref<64xi8>
      func.return
    }

The nests are moved, not copied: an op keeps its identity, so what was keyed by the ops of
the function before the pass (the profiler's probes) still finds them, and a walk that
follows each call into its callee (``func.walk_inlined``: a debug build's numbering of
accesses and checks) meets them in the same order. A nest that gives values (a whole-array reduction's loop), allocates, frees or
returns stays where it is: a callee takes buffers and gives nothing back. After MLIR's
``gpu-kernel-outlining`` (KernelOutlining.cpp), which makes a ``gpu.func`` of a launch's body.

With ``launch=true`` (the GPU targets) each nest is a kernel of its own, as a GPU runs it (one
launch a nest: the next reads what the last wrote, after it finished), and its call carries
the launch ``kiln.passes.gpu_launch`` decides, as MLIR's ``gpu.launch_func`` carries its
grid and block sizes::

    func.call @f_k0(%x, %arena) {kiln.block = array<i64: 16, 1, 1>, kiln.cooperative = false,
        kiln.grid = array<i64: 1, 1, 1>, kiln.kernel = "k0"} : (memref<16xf32>, memref<64xi8>) -> ()
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import arith as AR
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects.ir import declare_note
from kiln.dialects.rewriter import InsertPoint, Rewriter

from .gpu_launch import launch_of
from .kernel_inputs import outside_values
from .pass_spec import Option, declare_pass

# Ops a kernel function computes again from its arguments instead of taking their values.
RECOMPUTED = (MR.ViewOp, MR.GetGlobalOp, AR.ConstantOp)
# Ops a kernel function cannot hold: they allocate (and free on failure), or return.
_STAY_INLINE = (MR.AllocOp, MR.DeallocOp, F.ReturnOp)
# The note on a call naming the kernel it runs (the loops' prefix, ``k3``).
KERNEL = declare_note("kiln.kernel")
# With launch=true: the call's grid and block sizes (x, y, z), and whether its block's threads
# cooperate (barriers, a bound reduction's shuffles).
GRID = declare_note("kiln.grid")
BLOCK = declare_note("kiln.block")
COOPERATIVE = declare_note("kiln.cooperative")


def recomputed(op) -> bool:
    return isinstance(op, RECOMPUTED)


def recomputed_on_gpu(op) -> bool:
    """A GPU kernel takes the views it uses as arguments (its parameters are their pointers,
    which the host computes once), and makes again only globals and constants."""
    return isinstance(op, (MR.GetGlobalOp, AR.ConstantOp))


def can_outline(op) -> bool:
    """Whether `op`, a top-level op of a function, is a loop nest a private function can run."""
    return (
        isinstance(op, A.ForOp) and not op.results and not any(isinstance(inner, _STAY_INLINE) for inner in op.walk())
    )


def kernel_runs(function: F.FuncOp, alone: bool = False) -> list:
    """The runs of consecutive outlinable nests of one kernel, in order: [(kernel, [nest, ...])]
    (each nest a run of its own where `alone`)."""
    runs = []
    for op in function.body.ops:
        if not can_outline(op):
            runs.append(None)
            continue
        kernel = A.kernel_of(op)
        if not alone and runs and runs[-1] is not None and runs[-1][0] == kernel:
            runs[-1][1].append(op)
        else:
            runs.append((kernel, [op]))
    return [run for run in runs if run is not None]


def outline(function: F.FuncOp, kernel: str, nests: list, name: str, notes: dict | None = None) -> F.FuncOp:
    """Move `nests` (consecutive top-level nests of `function`) into a new private function
    `name`, called where they were; returns it (not yet in a module). With `notes` (a GPU
    kernel's launch), the call is noted with them and views are taken as arguments."""
    taken, remade = outside_values(nests, recomputed if notes is None else recomputed_on_gpu)
    callee = F.FuncOp.create(name, [v.type for v in taken], [], [getattr(v, "name_hint", None) for v in taken])
    callee.attributes["sym_visibility"] = "private"
    mapping = dict(zip(taken, callee.arguments))
    for op in remade:
        Rewriter.insert(op.clone(mapping), InsertPoint.at_end(callee.body))
    attributes = {"callee": name, KERNEL: kernel, **(notes or {})}
    Rewriter.insert(F.CallOp(list(taken), attributes, []), InsertPoint.before(nests[0]))
    for nest in nests:
        Rewriter.detach(nest)
        Rewriter.insert(nest, InsertPoint.at_end(callee.body))
        for op in nest.walk():
            for k, value in enumerate(op.operands):
                if value in mapping:
                    op.set_operand(k, mapping[value])
    Rewriter.insert(F.ReturnOp([], {}, []), InsertPoint.at_end(callee.body))
    return callee


def launch_notes(nest) -> dict:
    """The notes on the call of a GPU kernel running `nest`: its launch (gpu_launch.launch_of)."""
    launch = launch_of(nest)
    return {GRID: launch.grid, BLOCK: launch.block, COOPERATIVE: launch.cooperative}


@declare_pass(
    "outline-kernels",
    "move each kernel's loop nests into a private function and call it",
    Option("launch", bool, False, "one function a nest, its call noted with its GPU launch (kiln.grid, kiln.block)"),
)
def outline_kernels(module, launch=False):
    """Outline every kernel of every public function of a scheduled module; the callees
    come before their caller (which stays the module's last function, the one readers of a
    scheduled module run), named ``<function>_<kernel>`` (``_1``, ``_2``... for a kernel
    whose nests are not all together, or a name already taken). With `launch`, each nest
    alone, its call noted with the GPU launch that runs it."""
    taken = {op.sym_name for op in module.body.ops if isinstance(op, F.FuncOp)}
    for function in [op for op in module.body.ops if isinstance(op, F.FuncOp) and not op.is_private]:
        point = InsertPoint.before(function)
        for kernel, nests in kernel_runs(function, alone=launch):
            name = base = f"{function.sym_name}_{kernel}"
            count = 0
            while name in taken:
                count += 1
                name = f"{base}_{count}"
            taken.add(name)
            callee = outline(function, kernel, nests, name, launch_notes(nests[0]) if launch else None)
            Rewriter.insert(callee, point)
    return module
