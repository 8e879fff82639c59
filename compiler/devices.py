"""Arrays placed on a GPU target's device once, for calls that take them without copies."""

from __future__ import annotations

import numpy as np

from kiln.codegen import nvcc
from kiln.errors import KilnError
from kiln.runtime import cuda
from kiln.target import TARGETS


def to_device(array, target="cuda") -> cuda.DeviceArray:
    """Copy `array` to the GPU once, so that compiled functions take it without copies and
    return their results there (``.numpy()`` copies back). ``target="cuda-emulate"`` keeps
    it in host memory for the emulated backend. Without a GPU, ``target="cuda"`` raises
    ``kiln.KilnError`` saying what is missing (nvcc, the CUDA runtime or a device).

    >>> d = kiln.to_device(np.arange(4.0, dtype=np.float32), target="cuda-emulate")
    >>> d.shape, d.numpy()
    ((4,), array([0., 1., 2., 3.], dtype=float32))
    """
    resolved = TARGETS.get(target) if isinstance(target, str) else target
    if resolved is None or not resolved.gpu:
        raise KilnError(f"to_device: target must be 'cuda' or 'cuda-emulate', got {target!r}")
    emulate = resolved.emulate
    if not emulate:
        try:
            nvcc.check_compiler()
            cuda.check_gpu()
        except cuda.CudaUnavailable as exc:
            raise KilnError(str(exc)) from None
    return cuda.DeviceArray.from_numpy(np.asarray(array), emulate)
