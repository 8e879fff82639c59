"""The host CPU as an LLVM target: optimize LLVM IR for it and make object code.

The target machine is built for the host's CPU name and features, so LLVM's
vectorizers use the widest vector units the machine has. Each function here runs
under ``LLVM_LOCK`` (LLVM's global context and the shared target machine serve one
thread at a time); a caller that keeps a parsed module holds the lock until it is
closed, as the pipeline does.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from kiln.runtime import native
from kiln.runtime.native import LLVM_LOCK


@functools.lru_cache(maxsize=None)
def host_target_machine():
    """The one target machine code generation shares (the loader makes its own of the same
    definition, since each MCJIT engine takes ownership of one)."""
    with LLVM_LOCK:
        return native.host_target_machine()


@functools.lru_cache(maxsize=None)
def host_features() -> str:
    llvm.initialize_native_target()
    return llvm.get_host_cpu_features().flatten()


@functools.lru_cache(maxsize=None)
def host_fingerprint() -> str:
    """What object code depends on: triple, CPU and its features (computed once: none of them
    changes while a process runs). The key of tuning records is made from it
    (``kiln.target.host_fingerprint``)."""
    return f"{llvm.get_process_triple()}|{llvm.get_host_cpu_name()}|{host_features()}"


def parse_and_verify(llvm_ir: str):
    with LLVM_LOCK:
        module = llvm.parse_assembly(llvm_ir)
        module.verify()
        return module


# O2, not O3: the two differ mainly in how far LLVM unrolls, and kiln's schedules have
# already unrolled and jammed what pays (a matmul's register block). O3 then fully unrolled
# loops around those blocks into straight-line code of thousands of instructions, whose
# instruction schedulers are quadratic in a block's length: SqueezeNet's code generation
# took 17 s at O3 and 1 s at O2 for object code 2.5 times smaller that runs as fast
# (ResNet-50, SqueezeNet and the MLP training step measured alike).
SPEED_LEVEL = 2


def optimize(module) -> None:
    """LLVM's O2 pipeline for the host, with loop and SLP vectorization."""
    with LLVM_LOCK:
        tuning = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL)
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
        builder = llvm.create_pass_builder(host_target_machine(), tuning)
        builder.getModulePassManager().run(module, builder)


def emit_object(module) -> bytes:
    with LLVM_LOCK:
        return host_target_machine().emit_object(module)


def vector_bits() -> int:
    """The width of the host's vector registers, from its features."""
    features = host_features()
    if "+avx512f" in features:
        return 512
    if "+avx" in features or "+avx2" in features:
        return 256
    return 128


def vector_registers() -> int:
    """How many vector registers the host's instruction set names: 32 with AVX-512 (zmm0-31)
    and on AArch64 (v0-v31), 16 on x86 without it (xmm/ymm0-15). A matmul's register block
    must fit in them: 16 accumulators on a 16-register machine spill every k step."""
    if "+avx512f" in host_features() or llvm.get_process_triple().startswith(("aarch64", "arm64")):
        return 32
    return 16
