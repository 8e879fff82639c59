"""Every pass kiln runs by name, in one table: the set of passes is this list, whatever
modules happen to have been imported (a pass declared with ``declare_pass`` but missing
here is not runnable, and tests/test_passes.py fails naming it).

    PASSES["fuse"]     the function: module -> module, options as keyword arguments
    SPECS["fuse"]      its declaration: summary and options (pass_spec.PassSpec)

The order is the order `kiln opt --list-passes` prints: the graph passes in the order the
``optimized`` stage runs them, autodiff, the lowerings, then the schedules. Adding a pass
means declaring it beside its code and adding its function here.
"""

from __future__ import annotations

from . import (
    autodiff,
    canonicalize,
    cse,
    dce,
    default_schedule,
    emulate_floats,
    fusion,
    gpu_default_schedule,
    memory_plan,
    outline_kernels,
    remat,
)
from . import lower_tensor_to_affine as lowering

PASS_TABLE = (
    emulate_floats.emulate_unsupported_floats,
    canonicalize.canonicalize,
    cse.cse,
    dce.dce,
    remat.rematerialize,
    fusion.fuse,
    memory_plan.plan_memory,
    autodiff.value_and_grad_pass,
    lowering.lower_tensor_to_affine,
    lowering.lower_tensor_to_affine_gpu,
    default_schedule.default_schedule_pass,
    gpu_default_schedule.gpu_default_schedule_pass,
    outline_kernels.outline_kernels,
)


def _specs(table) -> dict:
    specs = {}
    for fn in table:
        spec = fn.pass_spec
        if spec.name in specs:
            raise ValueError(f"pass {spec.name!r} is in the pass table twice")
        specs[spec.name] = spec
    return specs


SPECS: dict = _specs(PASS_TABLE)
# name -> the function run_passes calls (a test may replace one to plant a fault).
PASSES: dict = {name: spec.function for name, spec in SPECS.items()}
