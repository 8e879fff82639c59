"""Arrays handed over through DLPack (``__dlpack__``): PyTorch, CuPy or JAX arrays as
arguments without a copy, and ``kiln.from_dlpack``. Host memory becomes a numpy view,
CUDA memory a ``kiln.DeviceArray`` (the DLPack capsules are ``kiln.runtime.dlpack``'s)."""

from __future__ import annotations

import numpy as np

from kiln.errors import ArgumentError
from kiln.frontend.trace import device_layout
from kiln.runtime import cuda, dlpack


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
        raise ArgumentError(f"kiln.from_dlpack takes an object with __dlpack__, got a value of type {type(x).__name__}")
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
        if isinstance(leaf, np.ndarray) or not hasattr(leaf, "__dlpack__") or device_layout(leaf) is not None:
            continue
        try:
            taken[k] = from_dlpack(leaf)
        except ArgumentError as exc:
            raise ArgumentError(f"argument '{path}': {exc}") from None
    return taken
