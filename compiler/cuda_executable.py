"""Running a compiled function through the CUDA backend (or its CPU emulation)."""

from __future__ import annotations

import time

import numpy as np

from kiln.codegen import nvcc
from kiln.codegen.cuda_codegen import entry_name
from kiln.codegen.cuda_prelude import CUDA_ERROR_BASE
from kiln.errors import ArgumentError, KilnError
from kiln.executable import prepare_input, status_error
from kiln.runtime import cuda


class CudaExecutable:
    def __init__(self, pipeline, traced, emulate: bool):
        started = time.perf_counter()
        function = traced.function
        self.input_specs = [(a.type.shape, a.type.dtype) for a in function.arguments]
        self.output_specs = [(t.shape, t.dtype) for t in function.function_type.results]
        try:
            # Checked here, when code is about to run, not at kiln.compile: tracing, lowering
            # and printing the CUDA C (.lower(), kiln dump --target cuda) need no GPU.
            if not emulate:
                nvcc.check_compiler()
                cuda.check_gpu()
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
        if status:
            raise cuda_status_error(status)
        if out_leaves is not None:
            for target, result in zip(out_leaves, outputs):
                np.copyto(target, np.asarray(result))
        return outputs


def cuda_status_error(status: int) -> Exception:
    """What a nonzero status of CUDA host code means: a CUDA runtime error above
    CUDA_ERROR_BASE, else one of kiln's own statuses (``status_error``)."""
    if status >= CUDA_ERROR_BASE:
        return KilnError(f"the CUDA kernels failed: {cuda.error_string(status - CUDA_ERROR_BASE)}")
    return status_error(status)
