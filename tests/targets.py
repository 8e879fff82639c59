"""The targets a test can run on here, each skipped with its reason where it cannot."""

import functools
import shutil

import pytest


@functools.lru_cache(maxsize=None)
def gpu_missing() -> str | None:
    """Why target='cuda' cannot run here, or None where a GPU can run it."""
    from kiln.runtime.cuda import CudaUnavailable, check_gpu

    try:
        check_gpu()
    except CudaUnavailable as exc:
        return str(exc)
    return None


NEEDS_GPU = pytest.mark.skipif(gpu_missing() is not None, reason=f"no GPU run here: {gpu_missing()}")
NEEDS_CXX = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the emulation")

# Every target, from the reference interpreter to a real GPU.
TARGETS = ["cpu", "interpret", pytest.param("cuda-emulate", marks=NEEDS_CXX), pytest.param("cuda", marks=NEEDS_GPU)]
