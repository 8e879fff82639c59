"""Python's cyclic garbage collector, paused while a compiler stage builds IR.

IR is a web of reference cycles (an op and its blocks, a value and its use list), and a
stage allocates tens of thousands of such objects that stay alive until it ends. The
collector runs whenever allocations outnumber deallocations by a threshold, and each of
its full passes walks every live object again: a fifth of the CPU time of compiling a
training step. Paused, the stage's garbage waits for the first collection after it.

    with collection_paused():
        module = lower(module)

Threads share the collector: it is paused while any thread is inside, and resumes (if it
was running when the first entered) when the last leaves.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_resume = False


@contextlib.contextmanager
def collection_paused():
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
