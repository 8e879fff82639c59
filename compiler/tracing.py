"""The tracing front end: run the user's Python once with stand-in values
(Tracers) and record every numpy operation on them as a ``tensor`` op.

A Tracer looks like a numpy array (shape, dtype, operators, methods) and
implements numpy's ``__array_ufunc__`` and ``__array_function__`` protocols, so
plain numpy code runs unchanged. Every recorded op remembers the line of the
user's code that made it; errors point there.
"""
from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from kiln.dialects import Builder, Location, Value
from kiln.dialects import tensor as T
from kiln.dialects.types import tensor_type

from .errors import KilnError, TracerBoolError, TracerConversionError


def _package_dirs() -> tuple:
    import kiln.dialects
    import kiln.passes
    import kiln.runtime

    dirs = {os.path.dirname(m.__file__) for m in (sys.modules["kiln"], kiln.dialects, kiln.passes, kiln.runtime)}
    dirs.add(os.path.dirname(np.__file__))
    return tuple(os.path.join(d, "") for d in dirs)


_SKIPPED_DIRS: tuple = ()


def user_location() -> Location | None:
    """The innermost stack frame outside kiln and numpy: the user's line."""
    global _SKIPPED_DIRS
    if not _SKIPPED_DIRS:
        _SKIPPED_DIRS = _package_dirs()
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIPPED_DIRS) and not filename.startswith("<frozen"):
            return Location(_display_path(filename), frame.f_lineno, _column(frame))
        frame = frame.f_back
    return None


def _display_path(filename: str) -> str:
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative


def _column(frame) -> int:
    """1-based column of the expression being executed, as MLIR counts."""
    try:
        positions = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        return (positions[2] or 0) + 1
    except (AttributeError, IndexError):  # Python < 3.11 has no column information
        return 0


_ACTIVE: list = []  # the traces being recorded, innermost last (grad traces nest inside compile traces)


def current_context() -> "TraceContext":
    if not _ACTIVE:
        raise KilnError("a traced value was used after the function that made it finished tracing "
                        "(was it stored in a global or an attribute?)", user_location())
    return _ACTIVE[-1]


class TraceContext:
    """Owns the function being built: emits ops, interns constants, captures outer values."""

    def __init__(self, func):
        self.func = func
        self.builder = Builder(func.body)
        self._constants: dict = {}
        self.captures: list = []  # Tracers of enclosing traces this function reads
        self._captured: dict = {}
        self.closed = False

    @contextlib.contextmanager
    def active(self):
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.pop()
            self.closed = True

    def emit(self, op_class, operands, attributes=None, result_type=None, weak=False, loc=None) -> "Tracer":
        values = [self.value_of(t) for t in operands]
        op = self.builder.create(op_class, values, attributes, None if result_type is None else [result_type],
                                 loc=loc or user_location())
        return Tracer(op.result, self, weak)

    def constant(self, array: np.ndarray, weak: bool = False) -> "Tracer":
        """A tensor.constant for `array`; one op per distinct captured array or scalar."""
        array = np.asarray(array)
        key = (array.dtype.str, array.shape, array.tobytes()) if array.size <= 16 else id(array)
        if key not in self._constants:
            # A copy: the trace must not change if the caller mutates the array later.
            value = self.emit(T.ConstantOp, [], {"value": np.array(array, copy=True)}).value
            self._constants[key] = (value, array)  # keeping `array` alive keeps id() unique
        return Tracer(self._constants[key][0], self, weak)

    def value_of(self, tracer: "Tracer"):
        """The IR value standing for `tracer` in this function; a value of an enclosing
        trace becomes an extra argument (a capture)."""
        if tracer.ctx is self and not self.closed:
            return tracer.value
        if tracer.ctx in _ACTIVE[:-1] and not tracer.ctx.closed:
            key = id(tracer.value)
            if key not in self._captured:
                self._captured[key] = self.func.body.add_argument(tracer.value.type, "captured")
                self.captures.append(tracer)
            return self._captured[key]
        raise KilnError("a traced value escaped the function that made it (stored in a global, "
                        "an attribute or a closure?) and was used in another trace", user_location())


class Tracer(np.lib.mixins.NDArrayOperatorsMixin):
    """A stand-in for a numpy array while a function is traced."""

    __slots__ = ("value", "ctx", "weak")
    # A Python scalar argument is "weak": like a Python float in numpy 2 (NEP 50),
    # it takes the dtype of the array it meets instead of forcing float64.

    def __init__(self, value: Value, ctx: TraceContext, weak: bool = False):
        self.value = value
        self.ctx = ctx
        self.weak = weak

    # -- what numpy code reads --------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self.value.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.value.type.size

    @property
    def type(self):
        return self.value.type

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"Tracer({tensor_type(self.shape, self.dtype)})"

    # -- numpy's protocols --------------------------------------------------------
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from .numpy_api import apply_ufunc
        return apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from .numpy_api import apply_function
        return apply_function(func, args, kwargs)

    # -- things that need a concrete value --------------------------------------
    def __bool__(self):
        raise TracerBoolError(
            "the truth value of a traced array is not known while tracing (Python if, while, "
            "and/or, bool()); choose between values with np.where(condition, x, y) instead",
            user_location())

    def _concrete(self, what: str):
        raise TracerConversionError(
            f"cannot convert a traced array to {what} inside a compiled function: its value is known "
            "only at run time; keep computing with numpy operations on it", user_location())

    def __array__(self, dtype=None, copy=None):
        self._concrete("a numpy array (np.asarray, np.array)")

    def __float__(self):
        self._concrete("a Python float")

    def __int__(self):
        self._concrete("a Python int")

    def __index__(self):
        self._concrete("an index (use it with np.where or slicing by Python ints)")

    def __complex__(self):
        self._concrete("a Python complex")

    def item(self, *args):
        self._concrete("a Python scalar (.item())")

    def tolist(self):
        self._concrete("a list (.tolist())")

    def __setitem__(self, key, value):
        raise TracerConversionError(
            "traced arrays are immutable: x[...] = v cannot be compiled; build the new array with "
            "np.where, np.concatenate or arithmetic instead", user_location())

    # -- indexing and methods ------------------------------------------------------
    def __getitem__(self, key):
        from .traced_ops import getitem
        return getitem(self, key)

    @property
    def T(self):
        return np.transpose(self)

    def transpose(self, *axes):
        return np.transpose(self, _varargs(axes))

    def reshape(self, *shape, order="C"):
        return np.reshape(self, _varargs(shape), order=order)

    def astype(self, dtype, copy=True):
        from .traced_ops import astype
        return astype(self, dtype)

    def sum(self, axis=None, dtype=None, keepdims=False):
        return np.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return np.mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return np.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return np.min(self, axis=axis, keepdims=keepdims)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return np.var(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return np.std(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def squeeze(self, axis=None):
        return np.squeeze(self, axis=axis)

    def swapaxes(self, axis1, axis2):
        return np.swapaxes(self, axis1, axis2)

    def ravel(self):
        return np.ravel(self)

    def flatten(self):
        return np.ravel(self)

    def clip(self, min=None, max=None):
        return np.clip(self, min, max)

    def dot(self, other):
        return np.dot(self, other)

    def copy(self):
        return self  # traced values are immutable, so sharing is a copy


def _varargs(args):
    """x.reshape(2, 3) and x.reshape((2, 3)) mean the same."""
    if len(args) == 1 and (args[0] is None or isinstance(args[0], (tuple, list))):
        return args[0]
    return args or None
