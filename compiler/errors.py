"""The exceptions users see, all in one public home: every exception kiln raises on
purpose is importable from here and prints as ``kiln.errors.<Name>``, wherever the
layer that raises it defines it (the IR core, the schedules, the runtime). All derive
from KilnError (except LoadError and CudaUnavailable, which the runtime raises
without knowing the IR) and, where it fits, from the Python exception a numpy user
would expect (ValueError, TypeError, ...).

A KilnError leaving a compiled function carries a traceback without kiln's own
frames (as JAX filters its tracebacks): the user sees their call and the line of
their function that caused the error. ``KILN_TRACEBACK_FILTERING=off`` keeps
every frame, for debugging kiln itself.
"""

import functools
import os
import types

from kiln.dialects.diagnostics import DTypeError, KilnError, OutOfBoundsError, ParseError, ShapeError, VerificationError
from kiln.passes.loop_transforms import ScheduleError
from kiln.runtime.cuda import CudaUnavailable
from kiln.runtime.library import LoadError
from kiln.version import source_roots

# Users meet these as kiln.errors.ShapeError (the name a traceback prints), wherever the
# lower layer that raises them defines them.
for _cls in (
    KilnError,
    ShapeError,
    DTypeError,
    VerificationError,
    ParseError,
    OutOfBoundsError,
    ScheduleError,
    LoadError,
    CudaUnavailable,
):
    _cls.__module__ = __name__
del _cls


class TracerBoolError(KilnError, TypeError):
    """Python control flow (if, while, bool(), and/or) on a value known only at run time."""


class TracerConversionError(KilnError, TypeError):
    """A traced value was turned into a concrete Python or numpy object."""


class UnsupportedError(KilnError, NotImplementedError):
    """A numpy function, ufunc method or keyword that kiln does not compile."""


class UnsupportedAttributeError(UnsupportedError, AttributeError):
    """An ndarray attribute or method that traced arrays lack. Also an AttributeError, so
    hasattr() and getattr(x, name, default) still answer instead of raising."""


class ArgumentError(KilnError, TypeError):
    """An argument that is not an array, a scalar, or a tuple, list or dict of them;
    or one whose shape or dtype does not fit."""


class InvalidValueError(KilnError, ValueError):
    """A value numpy refuses with a ValueError where no shape is at fault: a slice step of
    zero, an integer to a negative integer power, NaN stored into an integer array."""


class IntegerOverflowError(KilnError, OverflowError):
    """A Python int that does not fit the integer dtype numpy converts it to (NEP 50:
    ``int8_array + 300``; numpy's OverflowError), or Python-int arithmetic whose exact
    result leaves the int64 kiln computes it in. Raised while tracing for a constant, and
    when the compiled function is called for a Python int argument, at the user's line."""


class StageError(KilnError, KeyError):
    """A stage name that the lowered function does not have."""

    def __str__(self):  # KeyError would print the message with quotes around it
        return self.args[0]


class NonFiniteError(KilnError, FloatingPointError):
    """Debug mode: an op produced NaN or infinity from finite inputs."""


class GradientMismatchError(KilnError, AssertionError):
    """kiln.gradcheck: kiln's gradient and the finite-difference estimate disagree."""


__all__ = [
    "KilnError",
    "ShapeError",
    "DTypeError",
    "VerificationError",
    "ParseError",
    "TracerBoolError",
    "TracerConversionError",
    "UnsupportedError",
    "UnsupportedAttributeError",
    "OutOfBoundsError",
    "ArgumentError",
    "IntegerOverflowError",
    "InvalidValueError",
    "StageError",
    "NonFiniteError",
    "GradientMismatchError",
    "ScheduleError",
    "LoadError",
    "CudaUnavailable",
]


def filter_traceback(tb):
    """`tb` without the frames of kiln's own files."""
    dirs = source_roots()
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(dirs):
            kept.append(tb)
        tb = tb.tb_next
    filtered = None
    for entry in reversed(kept):
        filtered = types.TracebackType(filtered, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return filtered


def user_facing(fn):
    """Decorate a public entry point: a KilnError leaves it with kiln's frames filtered out."""

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (pytest hides this frame too)
        try:
            return fn(*args, **kwargs)
        except KilnError as exc:
            if os.environ.get("KILN_TRACEBACK_FILTERING", "on").lower() in ("off", "0", "false", "no"):
                raise
            raise exc.with_traceback(filter_traceback(exc.__traceback__))

    return entry
