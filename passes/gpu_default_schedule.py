"""Default schedules for the CUDA target: what each kernel gets when the user gives none.

Without a schedule a GPU kernel gets one thread per result element (the grid-stride
mapping in ``kiln.codegen.cuda_codegen``). That is right for elementwise work, but a
row reduction then runs a whole row in one thread and a matmul reads every operand from
global memory once per output. Each recipe below recognizes one kind of kernel and
returns the steps that map it onto the GPU's blocks, threads and shared memory; a kernel
no recipe claims keeps the grid-stride mapping.

Every recipe's steps are tried on a copy of the kernel first (``apply_step``): a recipe
that does not apply leaves the kernel as it was. The pass ``gpu-default-schedule`` runs
it on a module lowered by ``lower-tensor-to-affine-gpu``; a row sum, Before::

    func.func @f(%x: memref<64x256xf32>, %out0: memref<64xf32>) attributes {kiln.buffers = ["x", "out0"]} {
      %0 = arith.constant 0.0 : f32
      affine.for %k0.i = 0 to 64 {
        %1 = affine.for %k0.r = 0 to 256 iter_args(%acc0 = %0) -> (f32) {
          %2 = affine.load %x[%k0.i, %k0.r] : memref<64x256xf32>
          %3 = arith.addf %acc0, %2 : f32
          affine.yield %3 : f32
        } {kiln.loop = "k0.r"}
        affine.store %1, %out0[%k0.i] : memref<64xf32>
      } {kiln.loop = "k0.i"}
      func.return
    }

After (the row reduction recipe, a block per row whose threads share the row)::

    func.func @f(%x: memref<64x256xf32>, %out0: memref<64xf32>) attributes {kiln.buffers = ["x", "out0"]} {
      %0 = arith.constant 0.0 : f32
      affine.for %k0.i = 0 to 64 {
        %1 = affine.for %k0.r = 0 to 256 iter_args(%acc0 = %0) -> (f32) {
          %2 = affine.load %x[%k0.i, %k0.r] : memref<64x256xf32>
          %3 = arith.addf %acc0, %2 : f32
          affine.yield %3 : f32
        } {kiln.loop = "k0.r", kiln.bind = "threadIdx.x"}
        affine.store %1, %out0[%k0.i] : memref<64xf32>
      } {kiln.loop = "k0.i", kiln.bind = "blockIdx.x"}
      func.return
    }
"""

from __future__ import annotations

from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import verify
from kiln.dialects.collection import collection_paused
from kiln.dialects.diagnostics import KilnError

from .gpu_matmul_schedule import matmul_recipe
from .gpu_reduction_schedule import row_reduction_recipe
from .pass_spec import declare_pass
from .schedule import Schedule, apply_step, kernels, trial_copy

# Each recipe: (function, kernel name) -> the steps for that kernel, or [] when it does
# not recognize the kernel. The first recipe that returns steps wins.
RECIPES = [
    matmul_recipe,  # passes/gpu_matmul_schedule.py: register tiles fed from shared memory
    row_reduction_recipe,  # passes/gpu_reduction_schedule.py: one block per row
]


def gpu_default_schedule(function, skip=()) -> Schedule:
    """Choose and apply the default GPU schedule to `function` (affine level, in place);
    returns the steps applied. Kernels named in `skip` (``k0``, ...) are left alone."""
    schedule = Schedule()
    with collection_paused():
        for nest in kernels(function):
            kernel = A.kernel_of(nest)
            if kernel in skip:
                continue
            for recipe in RECIPES:
                steps = recipe(function, kernel)
                if steps and _apply_all(function, steps):
                    for step in steps:
                        schedule.add(*step)
                    break
    return schedule


@declare_pass("gpu-default-schedule", "schedule every GPU kernel a recipe recognizes (matmul tiles, a block per row)")
def gpu_default_schedule_pass(module):
    """gpu_default_schedule on each function of an affine-level module (lowered for the GPU)."""
    for function in module.body.ops:
        if isinstance(function, F.FuncOp):
            gpu_default_schedule(function)
    return module


def _apply_all(function, steps) -> bool:
    """Apply `steps` in order, all or none: they are tried first on a copy of the one kernel
    they schedule (trial_copy: copying the whole function per kernel made this quadratic in
    the number of kernels), which must verify."""
    trial = trial_copy(function, steps[0])
    try:
        for step in steps:
            apply_step(trial, step, atomic=False, gpu=True)
        verify(trial)
    except KilnError:  # ScheduleError included: the recipe does not fit this kernel
        return False
    for step in steps:
        apply_step(function, step, atomic=False, gpu=True)
    return True
