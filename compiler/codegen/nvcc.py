"""CUDA C to a loadable shared library: ``nvcc`` for the GPU, or the host C++ compiler
for the CPU emulation (``-DKILN_EMULATE``: the grid and block loops explicit, each
float operation rounded on its own as numpy's are).

Libraries are cached on disk under the SHA-256 of compiler, target GPU and source, with
the SHA-256 of the built file recorded beside it and compared before one is reused.

nvcc builds for its default GPU architecture (the driver compiles the embedded PTX for a
newer GPU when a library is loaded) unless ``KILN_CUDA_ARCH`` names one: ``sm_90`` for an
H100, ``native`` for the GPUs of the machine that builds, or any other value nvcc's
``-arch`` takes (``sm_XY``, ``sm_XYa``, ``compute_XY``, ``all``, ``all-major``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import warnings

from kiln.dialects.diagnostics import KilnError
from kiln.runtime import config
from kiln.runtime.cache import DiskCache
from kiln.runtime.cuda import CudaUnavailable


def check_compiler() -> None:
    """Raise CudaUnavailable if nvcc, the CUDA compiler, is not on PATH."""
    if shutil.which("nvcc") is None:
        raise CudaUnavailable("target='cuda' needs nvcc, the CUDA compiler, and it is not on PATH")


# What nvcc's -arch takes: a real or virtual architecture, or one of its named sets.
_ARCH = re.compile(r"(sm|compute)_\d+[af]?|native|all|all-major")


class CudaArchError(KilnError, ValueError):
    """``KILN_CUDA_ARCH`` names an architecture nvcc's -arch does not take, or that this nvcc
    cannot build for."""


def arch_flags() -> list[str]:
    """nvcc's ``-arch`` option from ``KILN_CUDA_ARCH``, or no option where it is unset or empty
    (nvcc's default architecture). ``ValueError`` naming the variable for a value nvcc's -arch
    does not take."""
    arch = config.get("KILN_CUDA_ARCH")
    if not arch:
        return []
    if not _ARCH.fullmatch(arch):
        raise CudaArchError(
            f"KILN_CUDA_ARCH={arch!r} is not a GPU architecture nvcc's -arch takes: give sm_XY "
            "(sm_90 for an H100, the compute capability without its dot), compute_XY, native, all or all-major"
        )
    return [f"-arch={arch}"]


def build(source: str, emulate: bool, cache: DiskCache | None = None) -> str:
    """A shared library built from `source`; returns its path. Libraries are cached on disk
    with the SHA-256 of the file as built, compared before one is reused. For the GPU, nvcc
    builds for ``KILN_CUDA_ARCH`` where it is set (see ``arch_flags``: ``ValueError`` for a
    value nvcc does not take)."""
    cache = cache or DiskCache()
    compiler = shutil.which(os.environ.get("CXX", "g++")) if emulate else shutil.which("nvcc")
    if compiler is None:
        raise CudaUnavailable("building CUDA C needs " + ("a C++ compiler (g++)" if emulate else "nvcc"))
    arch = [] if emulate else arch_flags()
    key = hashlib.sha256(f"{'emulate' if emulate else 'nvcc'}\n{compiler}\n{arch}\n{source}".encode()).hexdigest()
    with cache.writing("cuda-" + key):  # threads building one library: the first builds it, the rest reuse it
        return _cached_or_built(source, emulate, cache, compiler, key, arch)


def _cached_or_built(source: str, emulate: bool, cache: DiskCache, compiler: str, key: str, arch: list) -> str:
    library = os.path.join(cache.directory, "cuda", f"{key}.so")
    if os.path.exists(library):
        recorded = cache.load("cuda-" + key)
        if recorded is not None and recorded == _file_digest(library):
            return library
        if recorded is not None:  # changed on disk since it was built: never load it
            warnings.warn(
                f"kiln: the cached CUDA library {library} does not match the SHA-256 recorded when "
                "it was built (changed or damaged on disk); rebuilding it",
                RuntimeWarning,
                stacklevel=3,
            )
    os.makedirs(os.path.dirname(library), exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        source_path = os.path.join(work, "kernels.cu")
        with open(source_path, "w") as f:
            f.write(source)
        output = os.path.join(work, "kernels.so")
        if emulate:
            # each operation rounded on its own, as numpy's are, also where the host has FMA
            command = [
                compiler,
                "-DKILN_EMULATE",
                "-x",
                "c++",
                "-O2",
                "-ffp-contract=off",
                "-fPIC",
                "-pthread",  # blocks run on several host threads (kiln.codegen.cuda_emulation)
                "-shared",
                source_path,
                "-o",
                output,
            ]
        else:
            # The shared CUDA runtime: the one kiln's Python side allocates device memory with.
            command = [
                compiler,
                *arch,
                "-O3",
                "-shared",
                "-Xcompiler",
                "-fPIC",
                "-cudart",
                "shared",
                "-diag-suppress",
                "177",
                source_path,
                "-o",
                output,
            ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            arch = config.get("KILN_CUDA_ARCH")
            if not emulate and arch and "Unsupported gpu architecture" in result.stderr:
                raise CudaArchError(
                    f"KILN_CUDA_ARCH={arch!r}: this nvcc cannot build for that architecture "
                    f"({result.stderr.strip().splitlines()[-1]}); `nvcc --list-gpu-arch` lists the ones it can"
                )
            raise RuntimeError(f"compiling CUDA C failed:\n{result.stderr[-4000:]}")
        with open(output, "rb") as f:
            payload = f.read()
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(library), prefix=".tmp-")  # one per builder, threads too
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(temporary, library)
        cache.store("cuda-" + key, hashlib.sha256(payload).digest())
    return library


def _file_digest(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).digest()
    except OSError:
        return None
