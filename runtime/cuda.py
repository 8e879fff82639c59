"""Build and call CUDA C: nvcc to a shared library, loaded through cffi, with
device memory and host<->device copies through libcudart.

``emulate=True`` builds the same source as C++ for the CPU (the grid and block
loops explicit) and calls it on host memory: how kiln checks its CUDA kernels
on machines without a GPU.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

import cffi

from .cache import DiskCache


class CudaUnavailable(Exception):
    """target='cuda' on a machine without nvcc or without an NVIDIA GPU."""


def nvcc() -> str | None:
    return shutil.which("nvcc")


@functools.lru_cache(maxsize=None)
def _cudart():
    path = ctypes.util.find_library("cudart")
    candidates = [path] if path else []
    candidates += ["libcudart.so", "/usr/local/cuda/lib64/libcudart.so"]
    for candidate in candidates:
        try:
            runtime = ctypes.CDLL(candidate)
        except OSError:
            continue
        # Without argtypes ctypes passes Python ints as 32-bit C ints: host pointers would be cut.
        runtime.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        runtime.cudaFree.argtypes = [ctypes.c_void_p]
        runtime.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        runtime.cudaGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
        runtime.cudaGetErrorString.restype = ctypes.c_char_p
        return runtime
    return None


def error_string(error: int) -> str:
    runtime = _cudart()
    message = runtime.cudaGetErrorString(error).decode() if runtime is not None else "no CUDA runtime"
    return f"CUDA error {error} ({message})"


def _check(runtime, error: int, what: str) -> None:
    if error:
        raise RuntimeError(f"{what} failed: {error_string(error)}")


def check_gpu() -> None:
    """Raise CudaUnavailable saying what is missing: nvcc, the CUDA runtime, or a GPU."""
    if nvcc() is None:
        raise CudaUnavailable("target='cuda' needs nvcc, the CUDA compiler, and it is not on PATH")
    runtime = _cudart()
    if runtime is None:
        raise CudaUnavailable("target='cuda' needs the CUDA runtime (libcudart), and it cannot be loaded")
    count = ctypes.c_int(0)
    error = runtime.cudaGetDeviceCount(ctypes.byref(count))
    if error != 0 or count.value == 0:
        raise CudaUnavailable(f"target='cuda' needs an NVIDIA GPU, and none is available "
                              f"(cudaGetDeviceCount: error {error}, {count.value} devices)")


def build(source: str, emulate: bool, cache: DiskCache | None = None) -> str:
    """A shared library built from `source` (cached on disk); returns its path."""
    cache = cache or DiskCache()
    compiler = shutil.which(os.environ.get("CXX", "g++")) if emulate else nvcc()
    if compiler is None:
        raise CudaUnavailable("building CUDA C needs " + ("a C++ compiler (g++)" if emulate else "nvcc"))
    key = hashlib.sha256(f"{'emulate' if emulate else 'nvcc'}\n{compiler}\n{source}".encode()).hexdigest()
    library = os.path.join(cache.directory, "cuda", f"{key}.so")
    if os.path.exists(library) and cache.load("cuda-" + key) is not None:
        return library
    os.makedirs(os.path.dirname(library), exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        source_path = os.path.join(work, "kernels.cu")
        with open(source_path, "w") as f:
            f.write(source)
        output = os.path.join(work, "kernels.so")
        if emulate:
            command = [compiler, "-DKILN_EMULATE", "-x", "c++", "-O2", "-fPIC", "-shared", source_path, "-o", output]
        else:
            command = [compiler, "-O3", "-shared", "-Xcompiler", "-fPIC", "-diag-suppress", "177",
                       source_path, "-o", output]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"compiling CUDA C failed:\n{result.stderr[-4000:]}")
        with open(output, "rb") as f:
            payload = f.read()
        temporary = library + f".tmp{os.getpid()}"
        with open(temporary, "wb") as f:
            f.write(payload)
        os.replace(temporary, library)
        cache.store("cuda-" + key, hashlib.sha256(payload).digest())
    return library


class CudaFunction:
    """The host entry of a built library, called with numpy arrays."""

    def __init__(self, library_path: str, entry: str, num_args: int, emulate: bool):
        self.ffi = cffi.FFI()
        self.ffi.cdef(f"int {entry}({', '.join(['void *'] * num_args) or 'void'});")
        self.lib = self.ffi.dlopen(library_path)
        self.entry = getattr(self.lib, entry)
        self.emulate = emulate

    def __call__(self, inputs, outputs) -> int:
        if self.emulate:
            return self.entry(*[self.ffi.from_buffer(a, require_writable=False) for a in inputs + outputs])
        runtime = _cudart()
        pointers = []
        try:
            for array in inputs + outputs:
                pointer = ctypes.c_void_p()
                _check(runtime, runtime.cudaMalloc(ctypes.byref(pointer), max(1, array.nbytes)), "cudaMalloc")
                pointers.append(pointer)
            for array, pointer in zip(inputs, pointers):
                _check(runtime, runtime.cudaMemcpy(pointer, array.ctypes.data, array.nbytes, 1), "cudaMemcpy to the GPU")
            status = self.entry(*[self.ffi.cast("void *", p.value or 0) for p in pointers])
            if status == 0:
                for array, pointer in zip(outputs, pointers[len(inputs):]):
                    _check(runtime, runtime.cudaMemcpy(array.ctypes.data, pointer, array.nbytes, 2),
                           "cudaMemcpy from the GPU")
            return status
        finally:
            for pointer in pointers:
                runtime.cudaFree(pointer)
