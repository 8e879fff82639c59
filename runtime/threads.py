"""The thread pool compiled code runs its parallel loops on: OpenMP's (libgomp).

libgomp keeps its threads alive between calls, so a parallel loop costs a
wake-up, not a thread start. ``KILN_NUM_THREADS`` sets how many threads run
(default: the machine's cores). Where libgomp is missing, parallel loops are
compiled as ordinary loops, ``available()`` says so, and the first time kiln
looks for it a RuntimeWarning says what is missing and what it costs.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import threading
import warnings

import llvmlite.binding as llvm

from kiln.runtime import config

# OpenMP keeps the thread count per calling thread (omp_set_num_threads sets the caller's
# only; other threads start from OMP_NUM_THREADS or every core), so each thread that runs
# compiled code applies the process's count itself: see use_in_this_thread.
_count = 0  # the process's count; one int, replaced whole, so it needs no lock
_this_thread = threading.local()  # .count: what this thread last gave omp_set_num_threads
# The same count where generated code reads it (runtime/cpython_entry.py applies it on every call).
_count_cell = ctypes.c_int32(0)


# libgomp's default spin is 300,000 `pause`s (9 ms at the 30 ns a `pause` takes on Zen 5) after every
# parallel loop. A process that also runs numpy pays for it: kiln's idle thread keeps a core from
# the OpenBLAS call that follows, and on a loaded machine a spinning thread starves the one it waits
# for. Too short a spin costs more: a worker that sleeps between calls is woken by the calling
# thread, and Linux often wakes it on the caller's own core (measured on a 2-core machine:
# np.convolve of 10 000 points took 35 us a call with the worker on the other core and 250 us once
# they shared one, each thread then spinning at the join while the other waited for the core).
# 30,000 (~0.9 ms) keeps the worker awake, and on its own core, across the calls of a loop and the
# serial gaps between the parallel loops of one call; a loop alternating kiln and numpy's BLAS pays
# the same as with 3,000 (bench/targets_threads.py, beside_numpy: 1.12x against 1.15x).
SPIN_COUNT = 30000
_loading = threading.Lock()  # the environment is the process's: one loader changes it at a time


_policy = "libgomp not loaded"  # what libgomp's idle threads do, in words: see wait_policy()


def _wait_policy(path: str) -> dict:
    """The environment libgomp should initialise with: nothing where the user set a wait policy
    (theirs stands) or where libgomp is loaded already (it read its environment then: torch
    loads it on import), else the bounded spin."""
    global _policy
    chosen = [f"{name}={os.environ[name]}" for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if name in os.environ]
    if chosen:
        _policy = f"{', '.join(chosen)} (the user's)"
        return {}
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        _policy = "libgomp's own: it was loaded before kiln (torch loads it), 300,000 pauses unless set then"
        return {}
    except OSError:  # not loaded yet
        _policy = f"GOMP_SPINCOUNT={SPIN_COUNT} (kiln's)"
        return {"GOMP_SPINCOUNT": str(SPIN_COUNT)}


@contextlib.contextmanager
def _environment(settings: dict):
    """`settings` in the environment while libgomp loads, then gone again, so that programs the
    user starts later inherit the environment they set, not kiln's."""
    os.environ.update(settings)
    try:
        yield
    finally:
        for name in settings:
            del os.environ[name]


@functools.lru_cache(maxsize=None)
def _library():
    with _loading:
        return _load()


# libgomp by the name glibc's loader finds without a search; elsewhere ctypes.util.find_library
# names it (it runs ldconfig, milliseconds of every warm start otherwise).
_GLIBC_NAME = "libgomp.so.1"


def _locate():
    """A name or path that dlopen loads libgomp by, without loading it (its environment must be
    set first); None where it is not installed."""
    try:
        ctypes.CDLL(_GLIBC_NAME, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # loaded already (torch)
        return _GLIBC_NAME
    except OSError:
        pass
    for directory in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if os.path.exists(os.path.join(directory, _GLIBC_NAME)):
            return _GLIBC_NAME
    return ctypes.util.find_library("gomp")


def _load():
    path = _locate()
    if path is None:
        warnings.warn(
            "kiln: libgomp (the OpenMP runtime) is not installed, so parallel loops run serially on "
            f"one thread instead of {thread_count()}; install it (Debian/Ubuntu: apt install libgomp1) "
            "to use every core",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    with _environment(_wait_policy(path)):
        llvm.load_library_permanently(path)  # so loaded code finds GOMP_parallel and friends
    library = ctypes.CDLL(path)
    _set_count(thread_count())
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_serial_after_fork)
    return library


_forked = False  # whether this process is a fork() child of one that had loaded libgomp


def _serial_after_fork() -> None:
    """In a fork() child: parallel loops run on the calling thread alone. libgomp's thread pool
    does not survive fork(), and a child whose parent had started it hangs in its first
    parallel region with more than one thread (multiprocessing's fork pools do this); with one
    thread libgomp starts no team. torch makes the same choice for its children."""
    global _forked
    _forked = True
    _set_count(1)
    use_in_this_thread()


def _set_count(count: int) -> None:
    global _count
    _count = _count_cell.value = count


def count_cell():
    """``(address of the process's thread count as an int32, address of omp_set_num_threads)``
    for generated code that applies the count itself; None without libgomp."""
    library = _library()
    if library is None:
        return None
    return ctypes.addressof(_count_cell), ctypes.cast(library.omp_set_num_threads, ctypes.c_void_p).value


def use_in_this_thread() -> None:
    """Give the calling thread the process's thread count, once per thread and again after
    set_thread_count; called before compiled code runs."""
    library = _library()
    if library is not None and getattr(_this_thread, "count", None) != _count:
        library.omp_set_num_threads(_count)
        _this_thread.count = _count


def available() -> bool:
    return _library() is not None


def wait_policy() -> str:
    """How long libgomp's idle threads spin before they sleep, in words, and whose choice it is."""
    _library()
    return _policy


def full_team_limit() -> int:
    """The most threads a parallel region started outside any other is sure to get: libgomp's
    thread limit (OMP_THREAD_LIMIT), or 1 where OMP_DYNAMIC lets it give fewer than asked."""
    library = _library()
    if library is None or library.omp_get_dynamic():
        return 1
    return library.omp_get_thread_limit()


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def thread_count() -> int:
    count = config.get("KILN_NUM_THREADS")
    if count is not None:
        return count
    return usable_cores()


def set_thread_count(count: int) -> None:
    """Change the number of threads parallel loops use from now on, in every thread. In a fork()
    child of a process that had loaded libgomp, parallel loops stay on one thread (see
    _serial_after_fork) and a larger count raises RuntimeError instead of hanging."""
    if _forked and int(count) > 1:
        raise RuntimeError(
            "kiln: this process was forked from one that had started OpenMP's thread pool, which does "
            "not survive fork(); parallel loops run on one thread here. Start worker processes with "
            "multiprocessing's 'spawn' or 'forkserver' method to use more threads in them"
        )
    if _library() is not None:
        _set_count(int(count))
        use_in_this_thread()
