"""The exceptions users see, all in one public home: every exception kiln raises on
purpose is importable from here and prints as ``kiln.errors.<Name>``, wherever the
layer that raises it defines it (the IR core, the schedules, the runtime). All derive
from KilnError (except LoadError and CudaUnavailable, which the runtime raises
without knowing the IR) and, where it fits, from the Python exception a numpy user
would expect (ValueError, TypeError, ...).

A KilnError leaving a compiled function carries a traceback without kiln's own
frames (as JAX filters its tracebacks): the user sees their call and the line of
their function that caused the error. So does any other exception the user's own
code raised while kiln ran it (a NameError in a traced function): see
`raised_by_user`. ``KILN_TRACEBACK_FILTERING=off`` keeps every frame, for
debugging kiln itself.
"""

import functools
import os
import sysconfig
import types

from kiln.dialects import Location
from kiln.dialects.diagnostics import DTypeError, KilnError, OutOfBoundsError, ParseError, ShapeError, VerificationError
from kiln.dialects.elided import ElidedConstantError
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.registry import PassPipelineError
from kiln.runtime import config
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
    ElidedConstantError,
    OutOfBoundsError,
    ScheduleError,
    PassPipelineError,
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


class SpecError(ShapeError, TypeError):
    """An input spec whose dimensions are not non-negative ints (``kiln.f32["n", 3]``,
    ``kiln.f32[-1, 3]``). Also a TypeError, as a non-integer index is in Python."""


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
    "ElidedConstantError",
    "TracerBoolError",
    "TracerConversionError",
    "UnsupportedError",
    "UnsupportedAttributeError",
    "OutOfBoundsError",
    "ArgumentError",
    "IntegerOverflowError",
    "InvalidValueError",
    "StageError",
    "SpecError",
    "NonFiniteError",
    "GradientMismatchError",
    "ScheduleError",
    "LoadError",
    "CudaUnavailable",
]


def filtering_off() -> bool:
    """``KILN_TRACEBACK_FILTERING=off`` (or 0, false, no): keep every frame."""
    return not config.get("KILN_TRACEBACK_FILTERING")


@functools.lru_cache(maxsize=None)
def _library_dirs() -> tuple:
    """Directories whose frames are neither kiln's nor the user's: Python's own library
    (site-packages included, so numpy) and its frozen modules."""
    paths = sysconfig.get_paths()
    dirs = {os.path.join(paths[key], "") for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(dirs)) + ("<frozen",)


def raised_by_user(tb) -> bool:
    """Whether the exception whose traceback is `tb` was raised by the user's code rather
    than by kiln: some frame after kiln's innermost one is the user's (not kiln's, not
    Python's library). A NameError in a traced function qualifies (kiln called the function,
    the function raised); an exception raised inside kiln does not, even when the user's
    frames are above it, since that is kiln's fault and its frames are the ones to read."""
    kiln_dirs, library = source_roots(), _library_dirs()
    user_after_kiln = False
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(kiln_dirs):
            user_after_kiln = False
        elif not filename.startswith(library):
            user_after_kiln = True
        tb = tb.tb_next
    return user_after_kiln


def user_frame(tb):
    """The innermost frame of `tb` that is the user's (neither kiln's nor Python's library),
    as (file, line), or None."""
    kiln_dirs, library = source_roots(), _library_dirs()
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(kiln_dirs) and not filename.startswith(library):
            found = (filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def as_user_error(exc: BaseException) -> KilnError | None:
    """`exc`, raised by the user's own code (`raised_by_user`; a SyntaxError in their file is
    too), as a KilnError located at the user's innermost line, so that a command line can print
    it as one ``file:line: NameError: ...`` line; None for an exception that is kiln's."""
    if isinstance(exc, KilnError):
        return exc
    if isinstance(exc, SyntaxError) and exc.filename and not exc.filename.startswith(source_roots()):
        return KilnError(f"{type(exc).__name__}: {exc.msg}", Location(display_path(exc.filename), exc.lineno or 0))
    if not isinstance(exc, Exception) or not raised_by_user(exc.__traceback__):
        return None
    filename, line = user_frame(exc.__traceback__)
    return KilnError(f"{type(exc).__name__}: {exc}", Location(display_path(filename), line))


def display_path(filename: str) -> str:
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative


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
    """Decorate a public entry point: a KilnError, or any exception the user's own code
    raised while kiln ran it (`raised_by_user`), leaves it with kiln's frames filtered out."""

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (pytest hides this frame too)
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if filtering_off() or not (isinstance(exc, KilnError) or raised_by_user(exc.__traceback__)):
                raise
            raise exc.with_traceback(filter_traceback(exc.__traceback__))

    return entry
