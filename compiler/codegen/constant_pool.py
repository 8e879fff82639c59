"""Large constants (a model's weights) outside the object code: one pool of bytes, one symbol.

A ``memref.global`` of more than LARGE_CONSTANT_BYTES is not written into the LLVM module
as an initializer. The module declares one external array instead,

    @"kiln_f.constants" = external constant [N x i8], align 64

and each large global becomes a constant address in it (``getelementptr`` at the global's
offset). The bytes live in a buffer the executable owns: laid out here once, at compile
time, written to the disk cache beside the object code and mapped from there, and bound to
the symbol when the object code is linked (``LoadedObject(code, symbols=...)``). A built
library (``kiln build``) links the same bytes in as a data section of its own.

Why: object code linked in process by LLVM's loader maps each section where it finds room,
and its code reaches its data with 32-bit PC-relative offsets. Hundreds of MB of weights in
a data section of the object put it more than 2 GB from the code once the address space
fills (the second AlexNet, the first VGG-19 after any other compile), and LLVM's loader
aborts the process on the overflow. Through the symbol, the code holds a 64-bit address of
the pool in its global offset table, so the pool may be anywhere; LLVM also no longer
parses, optimizes and emits hundreds of MB of escaped bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kiln.dialects import memref as MR

# Globals up to this size stay initializers in the module, where LLVM may fold their values
# (a small lookup table, a 3x3 kernel); weights are far larger.
LARGE_CONSTANT_BYTES = 16 * 1024


@dataclass(frozen=True)
class ConstantPool:
    """The layout of a module's large globals in one buffer: `offsets` (global name -> byte
    offset, each a multiple of ``MR.ALIGNMENT``), `nbytes` in all, read through `symbol`."""

    symbol: str
    offsets: dict
    nbytes: int
    arrays: tuple  # the globals' values, in offset order

    @classmethod
    def of(cls, module, symbol: str, threshold: int = LARGE_CONSTANT_BYTES) -> "ConstantPool":
        """The pool of `module`'s globals over `threshold` bytes, in the order they are declared."""
        offsets, arrays, end = {}, [], 0
        for op in module.body.ops:
            if isinstance(op, MR.GlobalOp) and op.initial_value.nbytes > threshold:
                offsets[op.sym_name] = end
                arrays.append(op.initial_value)
                end += -(-op.initial_value.nbytes // MR.ALIGNMENT) * MR.ALIGNMENT
        return cls(symbol, offsets, end, tuple(arrays))

    def __bool__(self) -> bool:
        return bool(self.offsets)

    def chunks(self):
        """The pool's bytes as consecutive pieces (each global's little-endian bytes, then
        zeros up to the next offset), for writing it without one copy of it all in memory."""
        for array in self.arrays:
            data = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).view(np.uint8).reshape(-1)
            yield data
            padding = -len(data) % MR.ALIGNMENT
            if padding:
                yield bytes(padding)

    def buffer(self) -> np.ndarray:
        """The pool in a new uint8 array aligned to ``MR.ALIGNMENT``."""
        raw = np.empty(self.nbytes + MR.ALIGNMENT, np.uint8)
        start = -raw.ctypes.data % MR.ALIGNMENT
        pool = raw[start : start + self.nbytes]
        at = 0
        for chunk in self.chunks():
            pool[at : at + len(chunk)] = np.frombuffer(chunk, np.uint8)
            at += len(chunk)
        return pool


def pool_symbol(native_name: str) -> str:
    """The pool's symbol for a function whose native symbol is `native_name`: the dot keeps it
    apart from every C identifier, so no user function can be named the same."""
    return f"{native_name}.constants"
