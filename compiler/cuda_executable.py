"""Running a compiled function through the CUDA backend (or its CPU emulation)."""

from __future__ import annotations

import time

import numpy as np

from kiln.codegen import nvcc
from kiln.codegen.cuda_codegen import entry_name
from kiln.codegen.cuda_prelude import CUDA_ERROR_BASE
from kiln.errors import ArgumentError, KilnError
from kiln.executable import prepare_input, status_error
from kiln.frontend.trace import device_layout
from kiln.runtime import cuda, dlpack


class CudaExecutable:
    def __init__(self, pipeline, traced, emulate: bool):
        started = time.perf_counter()
        function = traced.function
        self.input_specs = [(a.type.shape, a.type.dtype) for a in function.arguments]
        self.output_specs = [(t.shape, t.dtype) for t in function.function_type.results]
        try:
            library = nvcc.build(pipeline.cuda_source(), emulate)
        except cuda.CudaUnavailable as exc:
            raise KilnError(str(exc)) from None
        self._native = cuda.CudaFunction(
            library, entry_name(function.sym_name), len(self.input_specs) + len(self.output_specs), emulate
        )
        self.emulate = emulate
        self.from_cache = False
        self.seconds = time.perf_counter() - started

    def run(self, leaves, out_leaves=None) -> list:
        """Host arrays are copied in and out; device arrays are used in place, and then the
        results stay on the device too (as DeviceArrays)."""
        try:
            pointers = [
                cuda.device_pointer(leaf, shape, dtype) for leaf, (shape, dtype) in zip(leaves, self.input_specs)
            ]
        except ValueError as exc:
            raise ArgumentError(str(exc)) from None
        on_device = any(p is not None for p in pointers)
        inputs = [
            p if p is not None else prepare_input(leaf, shape, dtype)
            for p, leaf, (shape, dtype) in zip(pointers, leaves, self.input_specs)
        ]
        if on_device:
            outputs = [cuda.DeviceArray(shape, dtype, self.emulate) for shape, dtype in self.output_specs]
            addresses = [o.pointer for o in outputs]
        else:
            outputs = addresses = [np.empty(shape, dtype) for shape, dtype in self.output_specs]
        # Results with no elements need no kernels run, nor buffers handed to them.
        status = self._native(inputs, addresses) if any(int(np.prod(s)) for s, _ in self.output_specs) else 0
        if status >= CUDA_ERROR_BASE:
            raise KilnError(f"the CUDA kernels failed: {cuda.error_string(status - CUDA_ERROR_BASE)}")
        if status:
            raise status_error(status)
        if out_leaves is not None:
            for target, result in zip(out_leaves, outputs):
                np.copyto(target, np.asarray(result))
        return outputs


def to_device(array, target: str = "cuda") -> cuda.DeviceArray:
    """Copy `array` to the GPU once, so that compiled functions take it without copies and
    return their results there (``.numpy()`` copies back). ``target="cuda-emulate"`` keeps
    it in host memory for the emulated backend. Without a GPU, ``target="cuda"`` raises
    ``kiln.KilnError`` saying what is missing (nvcc, the CUDA runtime or a device).

    >>> d = kiln.to_device(np.arange(4.0, dtype=np.float32), target="cuda-emulate")
    >>> d.shape, d.numpy()
    ((4,), array([0., 1., 2., 3.], dtype=float32))
    """
    if target not in ("cuda", "cuda-emulate"):
        raise KilnError(f"to_device: target must be 'cuda' or 'cuda-emulate', got {target!r}")
    emulate = target == "cuda-emulate"
    if not emulate:
        try:
            nvcc.check_compiler()
            cuda.check_gpu()
        except cuda.CudaUnavailable as exc:
            raise KilnError(str(exc)) from None
    return cuda.DeviceArray.from_numpy(np.asarray(array), emulate)


def from_dlpack(x):
    """The array behind `x`, any object with ``__dlpack__`` (a numpy array, a PyTorch tensor,
    a CuPy array, a JAX array), without a copy: a numpy array viewing its memory when that is
    host memory, a ``kiln.DeviceArray`` over it when it is CUDA memory. The shape, dtype and
    strides are `x`'s own; compiled functions copy only what is not C-contiguous.

    Raises ``kiln.ArgumentError`` for an object without ``__dlpack__``, memory on another
    device, or a CUDA array that is not C-contiguous or of a dtype numpy lacks, and
    ``kiln.CudaUnavailable`` for CUDA memory where the CUDA runtime cannot be loaded.

    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> v = kiln.from_dlpack(a)
    >>> v.shape, v.dtype, np.shares_memory(a, v)
    ((2, 3), dtype('float32'), True)
    """
    if not hasattr(x, "__dlpack__"):
        raise ArgumentError(f"kiln.from_dlpack takes an object with __dlpack__, not a {type(x).__name__}")
    device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (dlpack.CPU, 0)
    if device[0] == dlpack.CUDA:
        try:  # before the capsule is taken: refused then, it could not be handed back
            cuda.check_gpu()
        except cuda.CudaUnavailable as exc:
            raise cuda.CudaUnavailable(f"kiln.from_dlpack: a {type(x).__name__} in CUDA memory, and {exc}") from None
        try:
            # kiln's CUDA code runs on the legacy default stream (1): the producer orders its work before it.
            return cuda.DeviceArray.adopt(dlpack.Imported(x.__dlpack__(stream=1)))
        except (BufferError, ValueError) as exc:
            raise ArgumentError(f"kiln.from_dlpack: {exc}") from None
    try:
        return np.from_dlpack(x)
    except (BufferError, TypeError, ValueError, RuntimeError) as exc:
        raise ArgumentError(f"kiln.from_dlpack cannot take this {type(x).__name__}: {exc}") from None


def dlpack_leaves(paths, leaves) -> list:
    """`leaves` with every DLPack object that is not an array kiln already takes (a PyTorch
    tensor, a JAX array) replaced by its ``from_dlpack`` view; ``ArgumentError`` naming the
    argument for one that cannot be taken."""
    taken = list(leaves)
    for k, (path, leaf) in enumerate(zip(paths, leaves)):
        if type(leaf) is np.ndarray or not hasattr(leaf, "__dlpack__") or device_layout(leaf) is not None:
            continue
        try:
            taken[k] = from_dlpack(leaf)
        except ArgumentError as exc:
            raise ArgumentError(f"argument '{path}': {exc}") from None
    return taken
