"""The thread pool compiled code runs its parallel loops on: OpenMP's (libgomp).

libgomp keeps its threads alive between calls, so a parallel loop costs a
wake-up, not a thread start. ``KILN_NUM_THREADS`` sets how many threads run
(default: the machine's cores). Where libgomp is missing, parallel loops are
compiled as ordinary loops, ``available()`` says so, and the first time kiln
looks for it a RuntimeWarning says what is missing and what it costs.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import warnings

import llvmlite.binding as llvm


@functools.lru_cache(maxsize=None)
def _library():
    path = ctypes.util.find_library("gomp")
    if path is None:
        warnings.warn("kiln: libgomp (the OpenMP runtime) is not installed, so parallel loops run serially on "
                      f"one thread instead of {thread_count()}; install it (Debian/Ubuntu: apt install libgomp1) "
                      "to use every core", RuntimeWarning, stacklevel=2)
        return None
    llvm.load_library_permanently(path)  # so loaded code finds GOMP_parallel and friends
    library = ctypes.CDLL(path)
    library.omp_set_num_threads(thread_count())
    return library


def available() -> bool:
    return _library() is not None


def thread_count() -> int:
    value = os.environ.get("KILN_NUM_THREADS", "")
    if value:
        try:
            count = int(value)
        except ValueError:
            raise ValueError(f"KILN_NUM_THREADS must be a positive integer, got {value!r}") from None
        if count < 1:
            raise ValueError(f"KILN_NUM_THREADS must be a positive integer, got {value!r}")
        return count
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def set_thread_count(count: int) -> None:
    """Change the number of threads parallel loops use from now on."""
    library = _library()
    if library is not None:
        library.omp_set_num_threads(int(count))
