"""Where a compiled function's time goes, kernel by kernel.

The scheduled function is compiled again in prefixes: variant j runs the
first j kernels (every allocation and free always runs). Each kernel's time
is the difference between consecutive prefixes, timed in interleaved rounds
on the caller's own arrays, so the kernels see the caches they see in a real
call and the rows add up to the full call's native time by construction.

Each prefix's median carries the timer's and the machine's noise, so for a
kernel far shorter than that noise the raw difference can come out negative.
A kernel cannot make the call faster, so the prefix times must not decrease:
they are fitted by the closest non-decreasing sequence (pool adjacent
violators), and a kernel whose time vanishes in the fit is shown as below the
noise ("~0"), never as a negative time. Rates are shown as '-' where there is
no time or no work to divide.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from kiln.codegen import llvm_codegen, llvm_emitter, llvm_target
from kiln.dialects import tensor as T
from kiln.errors import KilnError
from kiln.passes.cost_analysis import buffer_bytes, count_flops, kernel_units
from kiln.passes.memory_plan import is_kernel
from kiln.passes.registry import run_passes
from kiln.runtime.native import LoadedObject


@dataclass
class KernelProfile:
    name: str  # k<n>, as in the scheduled IR and schedules
    seconds: float
    share: float  # of the native total
    bytes: int  # every buffer the kernel loads or stores, counted once
    flops: int  # floating-point operations its loops execute
    ops: list  # the tensor ops fused into it

    @property
    def gb_per_s(self) -> float | None:
        """None when the kernel's time is below the noise (no rate can be told)."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else None

    @property
    def gflop_per_s(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else None


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
    outside_seconds: float = 0.0  # the native call with no kernel run: argument passing, the arena
    native_seconds: float = 0.0  # the whole native function (= outside + every kernel)
    call_seconds: float = 0.0  # a call from Python: argument checks, results, the native function
    arena_bytes: int | None = None
    kernels_before_fusion: int = 0
    kernels_after_fusion: int = 0

    def __str__(self) -> str:
        lines = [
            f"kiln profile of {self.function}: {self.kernels_after_fusion} kernels "
            f"({self.kernels_before_fusion} before fusion), "
            + (f"arena {_size(self.arena_bytes)}" if self.arena_bytes is not None else "no arena"),
            f"{'kernel':8s} {'time':>10s} {'share':>7s} {'bytes':>9s} {'GB/s':>7s} {'GFLOP':>8s} "
            f"{'GFLOP/s':>8s}  tensor ops",
        ]
        for k in self.kernels:
            ops = ", ".join(k.ops)
            time = _ms(k.seconds) if k.seconds > 0 else "~0"
            lines.append(
                f"{k.name:8s} {time:>10s} {k.share:7.1%} {_size(k.bytes):>9s} "
                f"{_rate(k.gb_per_s):>7s} {k.flops / 1e9:8.3f} {_rate(k.gflop_per_s):>8s}  {ops}"
            )
        share = self.outside_seconds / self.native_seconds if self.native_seconds > 0 else 0.0
        lines.append(
            f"{'outside':8s} {_ms(self.outside_seconds):>10s} {share:7.1%}  "
            "(the native call with no kernel: arguments, arena)"
        )
        lines.append(f"{'native':8s} {_ms(self.native_seconds):>10s}  = the rows above")
        lines.append(f"{'call':8s} {_ms(self.call_seconds):>10s}  from Python, with argument checks and results")
        return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


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
    if compiled.target != "cpu":
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

    module = pipeline.module("scheduled")
    function = module.body.ops[-1]
    units = kernel_units(function)
    variants = [_compile_prefix(module, units, count, len(arrays)) for count in range(len(units) + 1)]
    medians = _interleaved([lambda v=v: v[1](arrays) for v in variants] + [lambda: compiled(*args, **kwargs)], seconds)
    timings = non_decreasing(medians[:-1]) + medians[-1:]

    tensor_kernels = pipeline.kernels()
    result = Profile(
        compiled.fn.__name__,
        outside_seconds=timings[0],
        native_seconds=timings[len(units)],
        call_seconds=timings[-1],
        kernels_after_fusion=len(tensor_kernels),
        kernels_before_fusion=_kernels_without_fusion(pipeline),
    )
    plan = pipeline.memory_plan()
    result.arena_bytes = plan.arena_bytes if plan is not None else None
    for j, (name, ops) in enumerate(units):
        spent = timings[j + 1] - timings[j]
        result.kernels.append(
            KernelProfile(
                name,
                spent,
                spent / result.native_seconds if result.native_seconds > 0 else 0.0,
                buffer_bytes(ops)[2],
                sum(count_flops(op) for op in ops),
                _tensor_ops(name, tensor_kernels),
            )
        )
    return result


def _compile_prefix(module, units, count: int, num_args: int):
    """The function with only the first `count` units of device work; (object, callable)."""
    copy = module.clone({})
    function = copy.body.ops[-1]
    drop = {id(op) for _, ops in units[count:] for op in ops}
    original = module.body.ops[-1].body.ops
    for op_copy, op in reversed(list(zip(function.body.ops, original))):
        if id(op) in drop:
            for inner in op_copy.walk():  # later dropped ops may use its results: unlink all at once
                for index, value in enumerate(inner.operands):
                    value.uses.remove((inner, index))
            function.body.ops.remove(op_copy)
    tm = llvm_target.host_target_machine()
    code = llvm_target.parse_and_verify(str(llvm_codegen.emit_module(copy, tm.triple, str(tm.target_data))))
    llvm_target.optimize(code)
    loaded = LoadedObject(llvm_target.emit_object(code))
    return loaded, loaded.function(llvm_emitter.symbol_name(function.sym_name), num_args)


def _interleaved(calls, seconds: float) -> list:
    """The median time of each call, from rounds that run every call once in turn."""
    for c in calls:
        c()
    samples = [[] for _ in calls]
    started = time.perf_counter()
    while len(samples[0]) < 5 or (time.perf_counter() - started < seconds and len(samples[0]) < 2000):
        for k, c in enumerate(calls):
            start = time.perf_counter()
            c()
            samples[k].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def non_decreasing(values) -> list:
    """The non-decreasing sequence closest to `values` in least squares (pool adjacent
    violators): a run that decreases is replaced by its mean."""
    blocks = []  # [mean, count]
    for v in values:
        blocks.append([float(v), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, n2), (m1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return [mean for mean, count in blocks for _ in range(count)]


def _tensor_ops(name: str, tensor_kernels) -> list:
    if not (name.startswith("k") and name[1:].isdigit()) or int(name[1:]) >= len(tensor_kernels):
        return []
    kernel = tensor_kernels[int(name[1:])]
    if isinstance(kernel, T.FusedOp):
        return [op.name.removeprefix("kiln.") for op in kernel.body.ops if not isinstance(op, T.YieldOp)]
    return [kernel.name.removeprefix("kiln.")]


def _kernels_without_fusion(pipeline) -> int:
    passes = [p for p in pipeline.graph_passes if p != "fuse"]
    function = run_passes(pipeline.module("tensor").clone({}), passes).body.ops[0]
    return sum(1 for op in function.body.ops if is_kernel(op))
