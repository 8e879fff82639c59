"""The host's floating-point peak, measured: what ``kiln profile`` reports kernels against.

A data sheet's peak (cores x FMA units x lanes x 2 x clock) is not what one core of a
shared or virtual machine delivers: the clock under load, how many FMA units a vector
width really has (Zen 4 splits a 512-bit FMA in two; Zen 5 does not) and what the
hypervisor leaves all differ. So kiln measures it, as the figure every kernel's GFLOP/s
is a fraction of: one loop of independent fused multiply-adds on the widest vectors the
host has, enough chains to cover the FMA latency on every unit (latency 4 x 2 units = 8
in flight on Zen 3 and Zen 5; 12 on 16 registers, 16 on 32), with nothing else in the
loop but its counter. The best of a dozen short timed runs is the peak of one core (on a
machine busy throughout, every run is slowed, and kernels can show above 100% of it); it
is measured once per process (about 0.15 s) on the calling thread.

>>> print(measure_peak())  # doctest: +SKIP
peak 97.7 GFLOP/s a core (float32 FMA, measured: 12 chains of 8-lane vectors)
"""

from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass

from kiln.codegen import llvm_target
from kiln.runtime.native import LoadedObject

_SYMBOL = "kiln_fma_peak"


@dataclass(frozen=True)
class Peak:
    gflop_per_s: float  # float32, one core
    lanes: int  # float32 lanes of the vectors the loop used
    chains: int  # independent FMA chains in flight

    def __str__(self) -> str:
        return (
            f"peak {self.gflop_per_s:.1f} GFLOP/s a core (float32 FMA, measured: "
            f"{self.chains} chains of {self.lanes}-lane vectors)"
        )


def fma_loop_ir(lanes: int, chains: int, triple: str) -> str:
    """LLVM IR of ``void kiln_fma_peak(i64 n, float *io)``: `chains` accumulators of
    <lanes x float> each do n fused multiply-adds by two vectors read from io (so LLVM can
    fold nothing), and their sum goes back to io (so nothing is dead)."""
    v = f"<{lanes} x float>"
    lines = [
        f'target triple = "{triple}"',
        f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})",
        f"define void @{_SYMBOL}(i64 %n, ptr %io) {{",
        "entry:",
        f"  %a = load {v}, ptr %io, align 4",
        f"  %bp = getelementptr {v}, ptr %io, i64 1",
        f"  %b = load {v}, ptr %bp, align 4",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]",
    ]
    for c in range(chains):
        lines.append(f"  %acc{c} = phi {v} [ %a, %entry ], [ %acc{c}.next, %loop ]")
    for c in range(chains):
        lines.append(f"  %acc{c}.next = call {v} @llvm.fma.v{lanes}f32({v} %acc{c}, {v} %a, {v} %b)")
    lines += [
        "  %i.next = add i64 %i, 1",
        "  %more = icmp ult i64 %i.next, %n",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    total = "%acc0.next"
    for c in range(1, chains):
        lines.append(f"  %sum{c} = fadd {v} {total}, %acc{c}.next")
        total = f"%sum{c}"
    lines += [f"  store {v} {total}, ptr %io, align 4", "  ret void", "}"]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=None)
def measure_peak(seconds: float = 0.01, rounds: int = 12) -> Peak:
    """The float32 FMA peak of one core of this host, in GFLOP/s (each FMA lane counts two
    operations), as a ``Peak``: the best of `rounds` runs of about `seconds` each."""
    import numpy as np

    lanes = llvm_target.vector_bits() // 32
    chains = min(16, llvm_target.vector_registers() - 4)
    code = llvm_target.parse_and_verify(fma_loop_ir(lanes, chains, llvm_target.host_target_machine().triple))
    loaded = LoadedObject(llvm_target.emit_object(code))
    run = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(loaded.global_address(_SYMBOL))
    io = np.full(2 * lanes, 0.5, np.float32)  # a = b = 0.5: acc approaches 1/3, never overflows
    n = 1000
    while True:  # grow the count until a run takes about `seconds`
        start = time.perf_counter()
        run(n, io.ctypes.data)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 4 or n > 1 << 40:
            break
        n *= 4
    n = max(1, int(n * seconds / max(elapsed, 1e-9)))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run(n, io.ctypes.data)
        best = min(best, time.perf_counter() - start)
    return Peak(2 * lanes * chains * n / best / 1e9, lanes, chains)
