"""Where a compiled function's time goes, kernel by kernel.

The scheduled function is compiled once more with a cycle counter read around each
kernel (each run of top-level loop nests of one kernel, ``k<n>``; see
``kiln.codegen.llvm_probes``) and around the whole body, and run on the caller's own
arrays in rounds interleaved with calls from Python, so the kernels see the caches they
see in a real call. A kernel's time is the median over the calls of its counter's ticks,
turned into seconds by the counter's rate (measured against ``time.perf_counter``);
``outside`` is the median of what each call's body spends out of its kernels (the arena,
allocations), and the native time the median wall time of the instrumented function
called from Python, so the rows add up to it only on a quiet machine. One compilation
serves every kernel: timing a model of 300 kernels costs one build, not 300.

Each kernel is labelled with the tensor ops it computes, found by which op's lowering
made its nest (``nest_origins``): a convolution lowers to several nests (packing, the
matmul, the epilogue), each labelled ``conv2d``. Rates are shown as '-' where there is no
time or no work to divide, and a kernel the counter saw take no time as "~0".
"""

from __future__ import annotations

import ctypes
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from kiln.codegen import llvm_codegen, llvm_emitter, llvm_target
from kiln.codegen.constant_pool import ConstantPool, pool_symbol
from kiln.codegen.llvm_probes import NOW, TICKS
from kiln.dialects import affine as A
from kiln.dialects import tensor as T
from kiln.errors import KilnError
from kiln.passes.cost_analysis import buffer_bytes, count_flops, kernel_units
from kiln.passes.lower_tensor_to_affine import nest_origins
from kiln.passes.memory_plan import is_kernel
from kiln.passes.registry import run_passes
from kiln.pipeline import run_pipeline
from kiln.runtime import threads
from kiln.runtime.native import LoadedObject

from .peak import Peak, measure_peak


@dataclass
class KernelProfile:
    name: str  # k<n>, as in the scheduled IR and schedules
    seconds: float
    share: float  # of the native total
    bytes: int  # every buffer the kernel loads or stores, counted once
    flops: int  # floating-point operations its loops execute
    ops: list  # the tensor ops fused into it
    cores: int = 1  # the cores it runs on: the thread pool's for a kernel with a parallel loop

    @property
    def gb_per_s(self) -> float | None:
        """None when the kernel's time is below the noise (no rate can be told)."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else None

    @property
    def gflop_per_s(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else None

    def of_peak(self, peak: float) -> float | None:
        """Its GFLOP/s as a fraction of `peak` GFLOP/s a core times the cores it ran on."""
        rate = self.gflop_per_s
        return rate / (peak * self.cores) if rate is not None and self.flops and peak > 0 else None


@dataclass
class Profile:
    """``kiln.profile``'s measurements: one ``KernelProfile`` per kernel (time in seconds,
    bytes moved, FLOPs, the fused ops), the native call's time outside the kernels, and
    the arena size in bytes; ``print(profile)`` shows them as a table.

    >>> f = kiln.compile(lambda x, y: np.maximum(x @ y, 0))
    >>> p = kiln.profile(f, np.ones((64, 64), np.float32), np.ones((64, 64), np.float32), seconds=0.05)
    >>> p.kernels_before_fusion, p.kernels_after_fusion
    (2, 1)
    """

    function: str
    kernels: list = field(default_factory=list)
    outside_seconds: float = 0.0  # the native body out of its kernels: allocations, the arena
    native_seconds: float = 0.0  # the whole native function's median wall time, called through cffi
    call_seconds: float = 0.0  # a call from Python: argument checks, results, the native function
    arena_bytes: int | None = None
    kernels_before_fusion: int = 0
    kernels_after_fusion: int = 0
    peak: Peak | None = None  # the host's measured float32 FMA peak, one core

    def __str__(self) -> str:
        lines = [
            f"kiln profile of {self.function}: {_count(self.kernels_after_fusion, 'kernel')} "
            f"({self.kernels_before_fusion} before fusion) in {_count(len(self.kernels), 'timed region')}, "
            + (f"arena {_size(self.arena_bytes)}" if self.arena_bytes is not None else "no arena"),
            f"{'kernel':8s} {'time':>10s} {'share':>7s} {'bytes':>9s} {'GB/s':>7s} {'GFLOP':>8s} "
            f"{'GFLOP/s':>8s} {'peak':>5s}  tensor ops",
        ]
        if self.peak is not None:
            lines.insert(1, f"{self.peak}; a kernel's peak column is its share of it, times its cores")
        peak = self.peak.gflop_per_s if self.peak is not None else 0.0
        for k in self.kernels:
            ops = ", ".join(k.ops)
            time = _ms(k.seconds) if k.seconds > 0 else "~0"
            share = k.of_peak(peak)
            lines.append(
                f"{k.name:8s} {time:>10s} {k.share:7.1%} {_size(k.bytes):>9s} "
                f"{_rate(k.gb_per_s):>7s} {k.flops / 1e9:8.3f} {_rate(k.gflop_per_s):>8s} "
                f"{'-' if share is None else f'{share:.0%}':>5s}  {ops}"
            )
        share = self.outside_seconds / self.native_seconds if self.native_seconds > 0 else 0.0
        lines.append(
            f"{'outside':8s} {_ms(self.outside_seconds):>10s} {share:7.1%}  "
            "(the native body out of its kernels: allocations, the arena)"
        )
        lines.append(f"{'native':8s} {_ms(self.native_seconds):>10s}  the native function's median wall time")
        lines.append(f"{'call':8s} {_ms(self.call_seconds):>10s}  from Python, with argument checks and results")
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.2f} us"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def profile(compiled, *args, seconds: float = 2.0, **kwargs) -> Profile:
    """Time every kernel of `compiled` (a ``kiln.compile``d function, CPU target; others raise
    ``kiln.KilnError``) on these arguments for about `seconds` of wall time in all, and return
    a ``Profile`` (see the module docstring for how kernels are timed).

    >>> f = kiln.compile(lambda x, y: np.maximum(x @ y, 0))
    >>> p = kiln.profile(f, np.ones((64, 64), np.float32), np.ones((64, 64), np.float32), seconds=0.05)
    >>> [k.ops for k in p.kernels]  # one fused kernel: the matmul with max(., 0) as its epilogue
    [['matmul', 'constant', 'broadcast_to', 'maximum']]
    >>> p.kernels[0].flops >= 2 * 64**3  # the matmul's multiply-adds, and then the epilogue's
    True
    """
    if compiled.target_info.code != "llvm":
        raise KilnError(f"kiln.profile times native CPU code; this function's target is {compiled.target!r}")
    compiled(*args, **kwargs)  # compile, and check the arguments the usual way
    lowered = compiled.lower(*args, **kwargs)
    pipeline = lowered.pipeline
    signature = lowered.module("tensor").body.ops[0].function_type
    inputs = [
        np.ascontiguousarray(np.asarray(leaf, dtype=t.dtype)) for leaf, t in zip(lowered.arguments, signature.inputs)
    ]
    outputs = [np.empty(t.shape, t.dtype) for t in signature.results]
    arrays = inputs + outputs

    module = pipeline.module("scheduled").clone({})  # outlined for the code generator, in place
    function = module.body.ops[-1]
    units = kernel_units(function)
    costs = [(buffer_bytes(ops)[2], sum(count_flops(op) for op in ops)) for _, ops in units]  # before outlining
    parallels = [any(isinstance(o, A.ParallelOp) for op in ops for o in op.walk()) for _, ops in units]
    loaded, native = _compile_probed(module, units, len(arrays), pipeline.target.codegen_passes)
    ticks, rate = _ticks(loaded, len(units) + 1), _counter_rate(loaded)
    native_seconds, call_seconds, per_call = _measure(
        lambda: native(arrays), lambda: compiled(*args, **kwargs), ticks, seconds
    )
    spent = [statistics.median(row) / rate for row in zip(*per_call)][: len(units)]
    # Outside, per call: the whole body's ticks less its kernels' (a sum of medians would not be
    # the median of the sum on a loaded machine, whose delays come in bursts).
    outside = statistics.median(max(int(t[-1]) - int(t[:-1].sum()), 0) for t in per_call) / rate

    origins = nest_origins(pipeline.module("optimized").body.ops[0])
    result = Profile(
        compiled.fn.__name__,
        outside_seconds=outside,
        native_seconds=native_seconds,
        call_seconds=call_seconds,
        kernels_after_fusion=pipeline.kernel_count(),
        kernels_before_fusion=_kernels_without_fusion(pipeline),
    )
    plan = pipeline.memory_plan()
    result.arena_bytes = plan.arena_bytes if plan is not None else None
    result.peak = measure_peak()
    # A parallel kernel's share of the peak is of the cores its threads can run on, no more.
    pool = min(threads.thread_count(), threads.usable_cores()) if threads.available() else 1
    for (name, _), (accessed, flops), seconds_spent, parallel in zip(units, costs, spent, parallels):
        result.kernels.append(
            KernelProfile(
                name,
                seconds_spent,
                seconds_spent / native_seconds if native_seconds > 0 else 0.0,
                accessed,
                flops,
                _tensor_ops(name, origins),
                cores=pool if parallel else 1,
            )
        )
    return result


def probe_regions(function, units) -> dict:
    """The regions `kiln.codegen.llvm_probes` times: slot j from the first to the last top-level
    op of unit j, and slot len(units) the whole body, up to its return."""
    body = function.body.ops
    regions = {id(body[0]): [("before", "start", len(units))]}
    regions.setdefault(id(body[-1]), []).append(("before", "stop", len(units)))
    for j, (_, ops) in enumerate(units):
        regions.setdefault(id(ops[0]), []).append(("before", "start", j))
        regions.setdefault(id(ops[-1]), []).append(("after", "stop", j))
    return regions


def _compile_probed(module, units, num_args: int, codegen_passes=()):
    """The scheduled function compiled with its kernels' probes; (object, callable). The probes
    are keyed by the function's top-level ops, which `codegen_passes` (outline-kernels) then
    move, in place, into the callees where the code generator finds them."""
    function = module.body.ops[-1]
    tm = llvm_target.host_target_machine()
    pool = ConstantPool.of(module, pool_symbol(llvm_emitter.symbol_name(function.sym_name)))
    regions = probe_regions(function, units)
    module = run_passes(module, list(codegen_passes))
    llvm_ir = llvm_codegen.emit_module(module, tm.triple, str(tm.target_data), pool=pool, probes=regions)
    code = llvm_target.parse_and_verify(str(llvm_ir))
    llvm_target.optimize(code)
    loaded = LoadedObject(llvm_target.emit_object(code), {pool.symbol: pool.buffer()} if pool else None)
    return loaded, loaded.function(llvm_emitter.symbol_name(function.sym_name), num_args)


def _ticks(loaded, slots: int) -> np.ndarray:
    """The probes' counters, a view of the loaded object's kiln_profile_ticks."""
    return np.ctypeslib.as_array((ctypes.c_int64 * slots).from_address(loaded.global_address(TICKS)))


def _counter_rate(loaded, seconds: float = 0.02) -> float:
    """Ticks a second of the counter the probes read, measured against time.perf_counter."""
    now = ctypes.CFUNCTYPE(ctypes.c_int64)(loaded.global_address(NOW))
    start, ticks = time.perf_counter(), now()
    while time.perf_counter() - start < seconds:
        pass
    return (now() - ticks) / (time.perf_counter() - start)


def _measure(run_native, run_call, ticks, seconds: float):
    """Medians of the native call's and the Python call's wall time, and each call's ticks per
    slot, from rounds that run both in turn for about `seconds` (5 rounds at least)."""
    run_native(), run_call()  # warm: caches, pages, the thread pool
    natives, calls, per_call = [], [], []
    started = time.perf_counter()
    while len(natives) < 5 or (time.perf_counter() - started < seconds and len(natives) < 2000):
        before = ticks.copy()
        start = time.perf_counter()
        run_native()
        natives.append(time.perf_counter() - start)
        per_call.append(ticks - before)
        start = time.perf_counter()
        run_call()
        calls.append(time.perf_counter() - start)
    return statistics.median(natives), statistics.median(calls), per_call


def _tensor_ops(name: str, origins) -> list:
    """The tensor ops kernel `name` (``k<n>``) computes: its fused group's members, the one op
    that made it, or ``copy`` for a nest that copies a result to its output."""
    if not (name.startswith("k") and name[1:].isdigit()) or int(name[1:]) >= len(origins):
        return []
    origin = origins[int(name[1:])]
    if origin is None:
        return ["copy"]
    if isinstance(origin, T.FusedOp):
        return [op.name.removeprefix("kiln.") for op in origin.body.ops if not isinstance(op, T.YieldOp)]
    return [origin.name.removeprefix("kiln.")]


def _kernels_without_fusion(pipeline) -> int:
    passes = [p for p in pipeline.graph_passes if p != "fuse"]
    module = run_pipeline(pipeline.module("tensor").clone({}), pipeline.target, "optimized", graph_passes=passes)
    function = module.body.ops[0]
    return sum(1 for op in function.body.ops if is_kernel(op))
