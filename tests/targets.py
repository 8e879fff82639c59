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


# The gpu marker: `pytest -m gpu` selects these tests (bench/gpu_check.sh runs them on a GPU),
# and conftest.py skips them, with gpu_missing()'s reason, where target='cuda' cannot run.
NEEDS_GPU = pytest.mark.gpu
NEEDS_CXX = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the emulation")

# Every target, from the reference interpreter to a real GPU.
TARGETS = ["cpu", "interpret", pytest.param("cuda-emulate", marks=NEEDS_CXX), pytest.param("cuda", marks=NEEDS_GPU)]
