"""numpy's BLAS on kiln's threads: one pool for both, where OpenBLAS allows it.

OpenBLAS (numpy's BLAS) keeps its own threads, which spin, yielding, for ~0.1 s after each
call: through the whole of a kiln step that follows, in a loop that alternates the two. Since
0.3.27 OpenBLAS lets the program run its parallel jobs instead
(``openblas_set_threads_callback_function``); ``share()`` hands them to libgomp, the pool
kiln's parallel loops run on, so the two libraries take turns on the same threads and only
libgomp's bounded spin (``threads.SPIN_COUNT``) is left between them. Opt-in: it changes how
numpy runs in the whole process (docs/runtime.md, "Beside numpy and torch").

The callback, in LLVM IR: OpenBLAS gives ``numjobs`` jobs (one per BLAS thread) of
``elsize`` bytes each; every job runs on its own thread of one libgomp team, thread ``t``
running job ``t`` with ``t`` as its thread number, since a threaded GEMM's jobs wait for each
other and so must all run at once. One call runs at a time: OpenBLAS's threaded code keeps
scratch buffers per thread number, not per caller, so two Python threads calling BLAS at once
would share them (OpenBLAS serializes its threaded GEMMs anyway). A forked child gets
OpenBLAS's own threads back: libgomp's pool does not survive fork(), OpenBLAS's does.
"""

from __future__ import annotations

import ctypes
import os
import threading

import llvmlite.binding as llvm

from kiln.runtime import threads
from kiln.runtime.native import LLVM_LOCK, host_target_machine, make_c_libraries_visible

CALLBACK_IR = r"""
%jobs = type { ptr, i64, ptr, i32, i32 }  ; dojob, elsize, jobdata, dojob_data, numjobs

@one_at_a_time = internal global [64 x i8] zeroinitializer, align 16  ; a pthread_mutex_t, unlocked

declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()

; Thread t runs jobs t, t + team, ...: one job each in a full team. In a smaller one (a BLAS
; call from inside a parallel region) every job still runs, in turn; share() refuses the
; settings that make every team smaller, since a threaded GEMM's jobs cannot run in turn.
define internal void @run_jobs(ptr %jobs) {
entry:
  %dojob = load ptr, ptr %jobs
  %elsize.at = getelementptr %jobs, ptr %jobs, i32 0, i32 1
  %elsize = load i64, ptr %elsize.at
  %data.at = getelementptr %jobs, ptr %jobs, i32 0, i32 2
  %data = load ptr, ptr %data.at
  %arg.at = getelementptr %jobs, ptr %jobs, i32 0, i32 3
  %arg = load i32, ptr %arg.at
  %numjobs.at = getelementptr %jobs, ptr %jobs, i32 0, i32 4
  %numjobs = load i32, ptr %numjobs.at
  %me = call i32 @omp_get_thread_num()
  %team = call i32 @omp_get_num_threads()
  br label %next.job

next.job:
  %i = phi i32 [ %me, %entry ], [ %after, %run ]
  %more = icmp slt i32 %i, %numjobs
  br i1 %more, label %run, label %done

run:
  %i.wide = sext i32 %i to i64
  %offset = mul i64 %i.wide, %elsize
  %job = getelementptr i8, ptr %data, i64 %offset
  call void %dojob(i32 %i, ptr %job, i32 %arg)
  %after = add i32 %i, %team
  br label %next.job

done:
  ret void
}

define void @kiln_blas_callback(i32 %sync, ptr %dojob, i32 %numjobs, i64 %elsize, ptr %data, i32 %arg) {
entry:
  %jobs = alloca %jobs
  store ptr %dojob, ptr %jobs
  %elsize.at = getelementptr %jobs, ptr %jobs, i32 0, i32 1
  store i64 %elsize, ptr %elsize.at
  %data.at = getelementptr %jobs, ptr %jobs, i32 0, i32 2
  store ptr %data, ptr %data.at
  %arg.at = getelementptr %jobs, ptr %jobs, i32 0, i32 3
  store i32 %arg, ptr %arg.at
  %numjobs.at = getelementptr %jobs, ptr %jobs, i32 0, i32 4
  store i32 %numjobs, ptr %numjobs.at
  call i32 @pthread_mutex_lock(ptr @one_at_a_time)
  call void @GOMP_parallel(ptr @run_jobs, ptr %jobs, i32 %numjobs, i32 0)
  call i32 @pthread_mutex_unlock(ptr @one_at_a_time)
  ret void
}
"""

# numpy's wheels carry OpenBLAS with its symbols renamed (scipy-openblas, 64-bit integers).
NAMINGS = (("openblas_", ""), ("scipy_openblas_", "64_"), ("scipy_openblas_", ""))

_lock = threading.Lock()
_engine = None  # the loaded callback; lives as long as the process, since OpenBLAS keeps its address
_shared = []  # the setters of the OpenBLAS libraries that run on kiln's threads now


def openblas_libraries() -> list:
    """(set_threads_callback_function, get_num_threads) of each OpenBLAS loaded in this process
    (numpy's, scipy's ...) that takes a threads callback."""
    found, seen = [], set()
    try:
        with open("/proc/self/maps") as maps:  # Linux: where each loaded library lives
            paths = [line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()]
    except OSError:
        return []
    for path in paths:
        if path in seen:
            continue
        seen.add(path)
        library = ctypes.CDLL(path)
        for prefix, suffix in NAMINGS:
            if hasattr(library, f"{prefix}set_threads_callback_function{suffix}"):
                setter = getattr(library, f"{prefix}set_threads_callback_function{suffix}")
                found.append((setter, getattr(library, f"{prefix}get_num_threads{suffix}")))
                break
    return found


def _callback_address() -> int:
    global _engine
    with LLVM_LOCK:
        if _engine is None:
            make_c_libraries_visible()  # pthread_mutex_lock
            os.register_at_fork(after_in_child=_give_back)
            module = llvm.parse_assembly(CALLBACK_IR)
            module.verify()
            engine = llvm.create_mcjit_compiler(module, host_target_machine())
            engine.finalize_object()
            _engine = engine
        return _engine.get_function_address("kiln_blas_callback")


def share() -> bool:
    """Run the parallel jobs of every loaded OpenBLAS on kiln's libgomp threads from now on.
    False, changing nothing, where there is no libgomp, no OpenBLAS that takes a callback
    (numpy built with MKL or Accelerate, OpenBLAS before 0.3.27), or where libgomp may give a
    team fewer threads than OpenBLAS has (OMP_THREAD_LIMIT, OMP_DYNAMIC): a threaded GEMM's
    jobs wait for each other, so run in turn they would wait forever."""
    with _lock:
        libraries = openblas_libraries() if threads.available() else []
        if not libraries or any(count() > threads.full_team_limit() for _, count in libraries):
            return False
        setters = [setter for setter, _ in libraries]
        address = _callback_address()
        for setter in setters:
            setter(ctypes.c_void_p(address))
        _shared[:] = setters
        return True


def unshare() -> None:
    """OpenBLAS's own threads again."""
    with _lock:
        _give_back()


def _give_back() -> None:
    for setter in _shared:
        setter(ctypes.c_void_p(None))
    _shared.clear()
