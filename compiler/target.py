"""What compiling for one kind of machine means, declared in one object per target.

``kiln.compile(fn, target="cuda")`` names a target; ``CompiledFunction`` resolves the
name once (``resolve_target``), and every later layer takes the ``Target`` object and
reads its capabilities instead of testing the name: the printed stages, the pipeline
(each stage's pass list, as data), the lowering, the schedule primitives and default
schedule, the code generator, the executable, the key of its tuning records and what
its tuner searches. Passes never see a target: they take plain options (the GPU
lowering's grid sums, a schedule step's ``gpu=True``) that the object decides. After
TVM's ``Target`` with one pipeline per backend, and tinygrad's ``Renderer``, which the
rewrites receive as their context.

    >>> TARGETS["cuda-emulate"].pipeline[1]
    ('affine', ('lower-tensor-to-affine-gpu',))

A new target is one entry of ``TARGETS`` (its pipeline, capabilities and executable)
plus its code generator in ``kiln.codegen``.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Callable

from kiln.codegen import llvm_target
from kiln.cuda_executable import CudaExecutable
from kiln.errors import KilnError
from kiln.executable import Executable
from kiln.passes.default_schedule import default_schedule
from kiln.passes.gpu_default_schedule import gpu_default_schedule
from kiln.passes.schedule import GPU_PRIMITIVES, PRIMITIVES
from kiln.runtime import cuda, threads

# Legalization every function needs, optimized or not: no code generator computes in f16.
LEGALIZE_PASSES = ("emulate-unsupported-floats",)
GRAPH_PASSES = LEGALIZE_PASSES + ("canonicalize", "cse", "dce", "fuse", "plan-memory")
REMAT_PASSES = LEGALIZE_PASSES + ("canonicalize", "cse", "dce", "rematerialize", "fuse", "plan-memory")

# What the code generator's input has that the printed scheduled stage does not: each
# kernel in a private function of its own (see kiln.passes.outline_kernels). Run on a copy
# of the scheduled module right before code generation, so that what reads the scheduled
# function by loop name (the tuner, the profiler, bisect, the debugger) reads it unchanged.
CODEGEN_PASSES = ("outline-kernels",)
# The GPU targets': each nest a kernel of its own, its call noted with the grid and block
# that launch it (kiln.passes.gpu_launch), which the CUDA printer reads.
GPU_CODEGEN_PASSES = ("outline-kernels{launch=true}",)

# The pipeline's step that schedules the loops: not a pass of the registry (it takes the
# schedule to apply, or the tuning records and the target's default recipes), but a stage
# function `kiln.pipeline.run_pipeline` calls with its scheduler.
SCHEDULE = "schedule"


@dataclass(frozen=True)
class Target:
    """One target: `name` as ``kiln.compile`` takes it; `stages`, the stages a function compiled
    for it prints (``Lowered.stages``); `pipeline`, the IR stages after ``tensor`` as
    ``(stage, (pass name, ...))`` pairs, run in order by ``run_pipeline`` (the ``optimized``
    stage's list is the graph passes a function's options pick, GRAPH_PASSES by default);
    `code`, the stage its code generator writes (``llvm``, ``cuda``; None: no native code);
    `gpu`, whether its kernels run on GPU threads (the grid-sum lowering, ``bind``, shared
    memory for ``cache_read``); `emulate`, whether its GPU code runs on the CPU;
    `schedule_primitives`, the steps a given schedule may use; `make_executable(pipeline,
    traced)`, what calls its native code (None: the interpreter runs the traced function);
    `tuning`, which tuner searches its kernels (``cpu``, ``gpu``; None: not tunable);
    `codegen_passes`, the passes its code generator's copy of the scheduled module goes
    through first (``kiln opt -p outline-kernels`` prints what they make)."""

    name: str
    stages: tuple
    pipeline: tuple
    code: str | None
    gpu: bool
    emulate: bool
    schedule_primitives: tuple
    make_executable: Callable | None
    tuning: str | None
    codegen_passes: tuple = ()
    host_options: Callable | None = None  # () -> {pass name: options}, decided on the host at run time

    def pass_spec(self, name: str) -> str:
        """Pass `name` of the pipeline as this target runs it: with the options it decides from
        the host, if any (``lower-tensor-to-affine{vector-bits=512}`` on an AVX-512 CPU)."""
        options = self.host_options().get(name) if self.host_options is not None else None
        return f"{name}{{{options}}}" if options else name

    def __str__(self) -> str:
        return self.name

    def passes(self, stage: str) -> tuple:
        """The pass names of `stage` in this target's pipeline (KeyError for a stage it has not)."""
        return dict(self.pipeline)[stage]

    def default_schedule(self, function, skip=()):
        """Apply this target's default schedule recipes to `function` (affine level, in place),
        leaving the kernels named in `skip` alone; returns the steps applied. The GPU's last
        recipe is a thread per element (the grid-stride mapping of the CUDA printer)."""
        if self.gpu:
            return gpu_default_schedule(function, skip=skip)
        return default_schedule(
            function,
            llvm_target.vector_bits(),
            threads.available(),
            skip=skip,
            registers=llvm_target.vector_registers(),
        )

    def fingerprint(self) -> str:
        """The key of this target's tuning records: the host CPU's (a hash of its triple, name,
        features and cores) for ``cpu``; the current GPU's (a hash of its name, compute capability
        and multiprocessors) for ``cuda``, raising ``kiln.runtime.cuda.CudaUnavailable`` without
        one; for ``cuda-emulate``, the emulation's on this CPU, apart from the CPU's own records
        (its kernels are the GPU's, run on the CPU). ValueError for a target that is not tuned."""
        if self.tuning is None:
            raise ValueError(f"there are no tuning records for target {self.name!r} ({', '.join(TUNED)})")
        if self.gpu and not self.emulate:
            return _digest(gpu_description())
        if self.emulate:
            return _digest(f"{self.name}|{host_fingerprint()}")
        return host_fingerprint()

    def records_key(self) -> str | None:
        """`fingerprint`, or None where it cannot be known (target cuda without a GPU, where
        code is compiled but not run: no record can be for it)."""
        try:
            return self.fingerprint()
        except cuda.CudaUnavailable:
            return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def host_fingerprint() -> str:
    """The key of this CPU's tuning records: a hash of its triple, name, features and cores
    (computed once: none of them changes while a process runs)."""
    return _digest(f"{llvm_target.host_fingerprint()}|cores={threads.usable_cores()}")


def gpu_description() -> str:
    """The current GPU as its records describe it: ``NVIDIA H100 80GB HBM3, compute capability 9.0,
    132 SMs`` (a MIG slice of a GPU has the name but not the multiprocessors of the whole). Raises
    ``kiln.runtime.cuda.CudaUnavailable`` where there is no GPU; asked each time, not remembered."""
    p = cuda.device_properties()
    return f"{p['name']}, compute capability {p['major']}.{p['minor']}, {p['multiprocessors']} SMs"


def _cpu_pass_options() -> dict:
    """The CPU's lowering rounds a convolution's columns to whole vectors of the host's width;
    256 bits (AVX2) is the pass's default, so only another width is written out."""
    bits = llvm_target.vector_bits()
    return {} if bits == 256 else {"lower-tensor-to-affine": f"vector-bits={bits}"}


def _cuda(emulate: bool) -> Target:
    return Target(
        name="cuda-emulate" if emulate else "cuda",
        stages=("tensor", "optimized", "affine", "scheduled", "cuda"),
        pipeline=(
            ("optimized", GRAPH_PASSES),
            ("affine", ("lower-tensor-to-affine-gpu",)),  # reductions over the grid: cross-block sums
            ("scheduled", (SCHEDULE,)),
        ),
        code="cuda",
        gpu=True,
        emulate=emulate,
        schedule_primitives=GPU_PRIMITIVES,
        make_executable=functools.partial(CudaExecutable, emulate=emulate),
        tuning="gpu",
        codegen_passes=GPU_CODEGEN_PASSES,
    )


TARGETS = {
    "cpu": Target(
        name="cpu",
        stages=("tensor", "optimized", "affine", "scheduled", "llvm"),
        pipeline=(
            ("optimized", GRAPH_PASSES),
            ("affine", ("lower-tensor-to-affine",)),
            ("scheduled", (SCHEDULE,)),
        ),
        code="llvm",
        gpu=False,
        emulate=False,
        schedule_primitives=PRIMITIVES,
        make_executable=Executable,
        tuning="cpu",
        codegen_passes=CODEGEN_PASSES,
        host_options=_cpu_pass_options,
    ),
    "interpret": Target(
        name="interpret",
        stages=("tensor",),
        pipeline=(),
        code=None,
        gpu=False,
        emulate=False,
        schedule_primitives=(),
        make_executable=None,
        tuning=None,
    ),
    "cuda": _cuda(emulate=False),
    "cuda-emulate": _cuda(emulate=True),
}
TUNED = tuple(name for name, target in TARGETS.items() if target.tuning is not None)


def resolve_target(target) -> Target:
    """The Target named `target` (a Target is returned as it is); an unknown name raises
    ``kiln.KilnError`` listing the known ones."""
    if isinstance(target, Target):
        return target
    if target not in TARGETS:
        raise KilnError(f"unknown target {target!r}; this version of kiln compiles for: {', '.join(TARGETS)}")
    return TARGETS[target]
