"""One signature's native code and the checks that guard every call into it.

Native code is never entered with an argument it could read or write out of bounds:
each input is converted to the compiled dtype and made C-contiguous (a copy only when
it is not), its shape must be the compiled one, and an ``out=`` target is written in
place only when it is contiguous, aligned, writable and overlaps no other argument.
The status a compiled function returns becomes a Python exception here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kiln.codegen.llvm_emitter import symbol_name
from kiln.codegen.status import OUT_OF_BOUNDS, STATUS
from kiln.errors import ArgumentError, KilnError
from kiln.runtime import threads
from kiln.runtime.native import LoadedObject


@dataclass(frozen=True)
class Compilation:
    """How one signature's native code was obtained."""

    signature: str
    from_cache: bool
    seconds: float


class Executable:
    """One signature's native code, with the checks that guard it."""

    def __init__(self, pipeline, traced):
        started = time.perf_counter()
        code, self.from_cache = pipeline.object_code()
        self._object = LoadedObject(code)
        function = traced.function
        self.input_specs = [(a.type.shape, a.type.dtype) for a in function.arguments]
        self.output_specs = [(t.shape, t.dtype) for t in function.function_type.results]
        self._native = self._object.function(
            symbol_name(function.sym_name), len(self.input_specs) + len(self.output_specs)
        )
        self.seconds = time.perf_counter() - started

    def run(self, leaves, out_leaves=None) -> list:
        inputs = [prepare_input(leaf, shape, dtype) for leaf, (shape, dtype) in zip(leaves, self.input_specs)]
        outputs, copy_back = [], []
        for k, (shape, dtype) in enumerate(self.output_specs):
            target = None if out_leaves is None else out_leaves[k]
            if target is not None and writable_in_place(target, inputs + outputs):
                outputs.append(target)
            else:
                outputs.append(np.empty(shape, dtype))
                if target is not None:
                    copy_back.append((target, outputs[-1]))
        threads.use_in_this_thread()
        # Results with no elements need no code run; the native code is never handed empty buffers to write.
        status = self._native(inputs + outputs) if any(o.size for o in outputs) else 0
        if status:
            raise status_error(status)
        for target, result in copy_back:
            np.copyto(target, result)
        return outputs


def prepare_input(leaf, shape, dtype) -> np.ndarray:
    """A C-contiguous, aligned array of the compiled shape and dtype; copies what is not."""
    array = np.asarray(leaf, dtype=dtype)
    if array.shape != shape:
        raise ArgumentError(f"an argument has shape {array.shape}, the compiled code expects {shape}")
    if not (array.flags.c_contiguous and array.flags.aligned):
        array = np.array(array, order="C", copy=True)
    return array


def writable_in_place(target: np.ndarray, others) -> bool:
    flags = target.flags
    return (
        flags.c_contiguous
        and flags.aligned
        and flags.writeable
        and not any(np.may_share_memory(target, other) for other in others)
    )


class OutOfBoundsStatus(Exception):
    """A debug build's bounds check fired; the caller turns it into an OutOfBoundsError."""

    def __init__(self, status: int):
        self.status = status


def status_error(status: int) -> Exception:
    if status >= OUT_OF_BOUNDS:
        return OutOfBoundsStatus(status)
    if status == STATUS["out of memory"]:
        return MemoryError("kiln: the compiled function could not allocate its scratch memory")
    if status == STATUS["negative integer power"]:
        return ValueError("Integers to negative integer powers are not allowed.")
    return KilnError(f"the compiled function failed with status {status}")
