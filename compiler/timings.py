"""How long each stage of compiling a function took: logged as it ends, collected for tables.

Every stage the compiler runs for one signature is timed where it runs: tracing, each
graph pass, lowering, scheduling, emitting LLVM IR, LLVM's optimization, object code,
the disk cache, loading the code into the process. A stage that is skipped (a cache hit
skips everything from the passes to object code) is not listed.

``KILN_LOG=1`` prints one line per stage to stderr as it ends, through the ``kiln``
logger (``logging.getLogger("kiln")``, level INFO, which an application may configure
itself instead). ``collect()`` gathers the stages timed inside it, in this thread, for
``table()``: what ``kiln dump --timings`` and the other commands print.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import time
from dataclasses import dataclass

from kiln.runtime import config

log = logging.getLogger("kiln")
_collector = contextvars.ContextVar("kiln_timings_collector", default=None)
_handler_lock = threading.Lock()
_handler = None  # the stderr handler KILN_LOG installs, once


@dataclass(frozen=True)
class StageTime:
    """One stage of compiling `function`: its name (``trace``, ``pass cse``, ``llvm optimize``, ...),
    its wall-clock seconds and a note (``hit`` or ``miss`` for the disk cache)."""

    function: str
    stage: str
    seconds: float
    note: str = ""


def record(function: str, stage: str, seconds: float, note: str = "") -> None:
    entry = StageTime(function, stage, seconds, note)
    collected = _collector.get()
    if collected is not None:
        collected.append(entry)
    _install_handler_if_requested()
    log.info("%s: %s %.2f ms%s", function, stage, seconds * 1e3, f" ({note})" if note else "")


@contextlib.contextmanager
def timed(function: str, stage: str):
    """Record the time the block takes, if it finishes (a stage that raises has no time)."""
    start = time.perf_counter()
    yield
    record(function, stage, time.perf_counter() - start)


@contextlib.contextmanager
def collect():
    """A list that fills with the StageTime of every stage timed inside the block."""
    collected = []
    token = _collector.set(collected)
    try:
        yield collected
    finally:
        _collector.reset(token)


def table(entries) -> str:
    """Seconds per stage, one row each in the order they ran, with a total per function."""
    lines = [f"{'function':<20} {'stage':<34} {'seconds':>9}"]
    totals: dict = {}
    for e in entries:
        stage = f"{e.stage} ({e.note})" if e.note else e.stage
        lines.append(f"{e.function:<20} {stage:<34} {e.seconds:>9.4f}")
        totals[e.function] = totals.get(e.function, 0.0) + e.seconds
    for function, seconds in totals.items():
        lines.append(f"{function:<20} {'total':<34} {seconds:>9.4f}")
    return "\n".join(lines)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when it writes (test runners and tools replace it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _install_handler_if_requested() -> None:
    """With KILN_LOG set (not 0 or off), the kiln logger prints INFO to stderr; read at each
    record, so setting it after import works too."""
    global _handler
    if _handler is not None or not config.get("KILN_LOG"):
        return
    with _handler_lock:
        if _handler is None:
            handler = _StderrHandler()
            handler.setFormatter(logging.Formatter("kiln: %(message)s"))
            log.addHandler(handler)
            if log.level == logging.NOTSET or log.level > logging.INFO:
                log.setLevel(logging.INFO)
            _handler = handler
