"""Autotuning for the CUDA backend: ``kiln tune --target cuda`` (and ``cuda-emulate``).

The search, the checks and the database are the CPU tuner's (``kiln.tools.tuner``); what
differs is what a candidate is and how it is timed. A candidate maps one extracted kernel
onto the GPU with the GPU schedule steps (``split``, ``reorder``, ``tile``, ``unroll``,
``bind``): a loop split into blocks of ``tx`` threads along ``threadIdx.x``, optionally a
second one into ``ty`` along ``threadIdx.y``, the block loops tiled outside the thread
loops or not, another loop on ``blockIdx.z``, and the innermost reduction unrolled. For
a matmul's kernel (result loops ``k0.i``, ``k0.j``, reduction ``k0.r``), one candidate is::

    unroll(k0.r, 4); tile([k0.i, k0.j], [4, 32]); bind(k0.i.o, blockIdx.y); bind(k0.i.i, threadIdx.y);
    bind(k0.j.o, blockIdx.x); bind(k0.j.i, threadIdx.x)

The kernel is compiled alone (``emit_cuda`` and nvcc), run on arrays kept on the GPU, and
timed with CUDA events around each call; records are keyed by the GPU's name, compute
capability and multiprocessor count (``tuning_db.gpu_fingerprint``). With ``cuda-emulate``
the same source runs on the CPU, timed by the wall clock and keyed as the emulation on this
CPU: the numbers mean little, but every part of the search is exercised without a GPU.
"""

from __future__ import annotations

import time

from kiln.codegen import nvcc
from kiln.codegen.cuda_codegen import emit_cuda, entry_name
from kiln.codegen.cuda_prelude import CUDA_ERROR_BASE
from kiln.dialects import affine as A
from kiln.errors import KilnError
from kiln.runtime import cuda
from kiln.target import TARGETS, gpu_description
from kiln.tools.tuner import KernelBench, schedule_kernel
from kiln.tools.tuning_space import SearchSpace, config_key

THREADS_PER_BLOCK_MAX = 1024  # every NVIDIA GPU since compute capability 2.0


class GpuSearchSpace(SearchSpace):
    """GPU mappings of one extracted kernel, as parameter sets; `steps(config)` spells one out.
    ``GpuSearchSpace.of(module)`` is None for a kernel with no loop a thread index could take
    (a whole-array reduction, which the code generator maps itself). The CPU space's random
    draws and mutations walk it; its own parameters, steps and legality are below."""

    def __init__(self, module, loops: list, reductions: list):  # not the CPU space's: other parameters
        self.module = module
        self.loops = loops  # loops without iter_args, outside any that has them, outermost first
        self.reductions = reductions  # loops with iter_args, innermost last
        self.domains = {
            "x": loops,
            "tx": [32, 64, 128, 256, 512, 1024],
            "y": [None, *loops],
            "ty": [1, 2, 4, 8, 16, 32],
            "blocks_outside": [True, False],
            "z": [False, True],
            "unroll": [1, 2, 4, 8] if reductions else [1],
        }
        self._legal = {}

    @classmethod
    def of(cls, module):
        function = module.body.ops[-1]
        nest = next((op for op in function.body.ops if isinstance(op, A.ForOp)), None)
        if nest is None:
            return None
        loops, reductions = [], []
        work = [(nest, False)]
        while work:  # pre-order, outermost first
            loop, carried = work.pop(0)
            if loop.inits:
                reductions.append(A.loop_name(loop))
            elif not carried:
                loops.append(A.loop_name(loop))
            carried = carried or bool(loop.inits)
            inner = [op for op in loop.body.ops if isinstance(op, A.ForOp)]
            work = [(op, carried) for op in inner] + work
        return cls(module, loops, reductions) if loops else None

    def steps(self, config: dict) -> list:
        x, y = config["x"], config["y"]
        steps = []
        if config["unroll"] > 1:
            steps.append(["unroll", self.reductions[-1], config["unroll"]])
        binds = []
        if y is None or y == x:
            steps.append(["split", x, config["tx"]])
        else:
            outer, inner = (y, x) if self.loops.index(y) < self.loops.index(x) else (x, y)
            sizes = [config["ty"] if name == y else config["tx"] for name in (outer, inner)]
            if config["blocks_outside"]:
                steps.append(["tile", [outer, inner], sizes])
            else:
                steps += [["split", outer, sizes[0]], ["split", inner, sizes[1]]]
            binds += [["bind", f"{y}.o", "blockIdx.y"], ["bind", f"{y}.i", "threadIdx.y"]]
        binds += [["bind", f"{x}.o", "blockIdx.x"], ["bind", f"{x}.i", "threadIdx.x"]]
        rest = [name for name in self.loops if name not in (x, y)]
        if config["z"] and rest:
            binds.append(["bind", rest[0], "blockIdx.z"])
        return steps + binds  # bind last: no other step transforms a bound loop

    def legal(self, config: dict) -> bool:
        key = config_key(config)
        if key not in self._legal:
            threads = config["tx"] * (config["ty"] if config["y"] not in (None, config["x"]) else 1)
            self._legal[key] = threads <= THREADS_PER_BLOCK_MAX and _applies(self.module, self.steps(config))
        return self._legal[key]

    def canonical(self, config: dict) -> dict:
        """`config` with the parameters that make no difference to its steps fixed, so that
        the search does not measure one schedule twice under two names."""
        config = dict(config)
        if config["y"] in (None, config["x"]):
            config.update(y=None, ty=1, blocks_outside=True)
        if len(self.loops) <= (1 if config["y"] is None else 2):
            config["z"] = False
        return config


def _applies(module, steps) -> bool:
    try:
        schedule_kernel(module.clone({}), TARGETS["cuda"], steps)  # scheduling is the same emulated or not
    except KilnError:  # ScheduleError included
        return False
    return True


class GpuKernelBench(KernelBench):
    """An extracted kernel built as CUDA C under a schedule (the default GPU schedule for
    None), run on fixed random inputs: on the GPU, in device memory and timed with CUDA
    events (`timer`, a ``cuda.EventTimer`` unless given); emulated, in host memory and timed
    by `clock`."""

    def __init__(self, module, emulate: bool, seed: int = 0, clock=time.perf_counter, timer=None):
        super().__init__(module, seed, clock)
        self.emulate = emulate
        self.target = TARGETS["cuda-emulate" if emulate else "cuda"]
        self.timer = None if emulate else timer or cuda.EventTimer()

    def build(self, steps):
        module = schedule_kernel(self.module.clone({}), self.target, steps)
        function = module.body.ops[-1]
        library = nvcc.build(emit_cuda(module), self.emulate)
        native = cuda.CudaFunction(library, entry_name(function.sym_name), len(self.initial), self.emulate)

        def run(arrays):
            status = native([a if self.emulate else a.pointer for a in arrays], [])
            if status >= CUDA_ERROR_BASE:
                raise RuntimeError(f"the kernel failed: {cuda.error_string(status - CUDA_ERROR_BASE)}")
            if status:
                raise RuntimeError(f"the kernel failed with status {status}")

        return run, native

    def arrays(self) -> list:
        if self.emulate:
            return super().arrays()
        return [cuda.DeviceArray.from_numpy(a) for a in self.initial]

    def host(self, array):
        return array if self.emulate else array.numpy()

    def time_calls(self, run, arrays, calls: int = 1) -> float:
        if self.emulate:
            return super().time_calls(run, arrays, calls)

        def batch():
            for _ in range(calls):
                run(arrays)

        return self.timer(batch)


class GpuTuning:
    """``tuner.CpuTuning`` for target cuda (on the current GPU) or cuda-emulate (on the CPU).
    Raises ``KilnError`` saying what is missing for cuda: nvcc, the runtime or a GPU."""

    def __init__(self, target):
        resolved = TARGETS.get(target) if isinstance(target, str) else target
        if resolved is None or resolved.tuning != "gpu":
            raise KilnError(f"GpuTuning tunes target 'cuda' or 'cuda-emulate', not {target!r}")
        self.target = resolved
        self.emulate = resolved.emulate
        if self.emulate:
            self.description = "the CUDA emulation on this CPU (wall-clock times, not a GPU's)"
        else:
            try:
                nvcc.check_compiler()
                self.description = gpu_description()  # checks for a GPU
            except cuda.CudaUnavailable as exc:
                raise KilnError(
                    f"kiln tune --target cuda times schedules on a GPU: {exc} "
                    "(--target cuda-emulate runs the same search on the CPU)"
                ) from None

    def host(self) -> str:
        return self.target.fingerprint()

    def space(self, module):
        return GpuSearchSpace.of(module)

    def bench(self, module, seed: int = 0) -> GpuKernelBench:
        return GpuKernelBench(module, self.emulate, seed)

    def notes(self) -> dict:
        return {"target": self.target.name, "device": self.description if not self.emulate else "emulation"}
