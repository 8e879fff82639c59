"""The tracing front end: run the user's Python once with stand-in values
(Tracers) and record every numpy operation on them as a ``tensor`` op.

A Tracer looks like a numpy array (shape, dtype, operators, methods) and
implements numpy's ``__array_ufunc__`` and ``__array_function__`` protocols, so
plain numpy code runs unchanged. Every recorded op remembers the line of the
user's code that made it; errors point there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading

import numpy as np

from kiln.dialects import Builder, Location, Value
from kiln.dialects import tensor as T
from kiln.dialects.types import tensor_type
from kiln.errors import (
    ArgumentError,
    KilnError,
    TracerBoolError,
    TracerConversionError,
    UnsupportedAttributeError,
    UnsupportedError,
)
from kiln.version import source_roots


@functools.lru_cache(maxsize=None)
def _skipped_dirs() -> tuple:
    return source_roots() + (os.path.join(os.path.dirname(np.__file__), ""),)


def user_location() -> Location | None:
    """The innermost stack frame outside kiln and numpy: the user's line; or, while a front
    end that has no Python source (the ONNX importer) says where it is, that place."""
    if _STACK.location is not None:
        return _STACK.location
    skipped = _skipped_dirs()
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(skipped) and not filename.startswith("<frozen"):
            return Location(_display_path(filename), frame.f_lineno, _column(frame))
        frame = frame.f_back
    return None


def code_location(code) -> Location:
    """Where a Python function (its code object) begins, as errors show the user's lines."""
    return Location(_display_path(code.co_filename), code.co_firstlineno)


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


def immutable(array: np.ndarray) -> bool:
    """Whether no one can change `array`'s elements: a read-only view, through read-only views
    only, of a ``bytes`` object (what ``np.frombuffer`` gives, and ONNX's initializers are).
    A read-only array that owns its memory does not count: its owner may make it writable."""
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        array = array.base
    return isinstance(array, bytes)


class _TraceStack(threading.local):
    """The traces this thread is recording, innermost last (grad traces nest inside compile
    traces). Each thread has its own, as in JAX: threads trace their functions independently."""

    def __init__(self):
        self.active = []
        self.location = None  # set by source_location()


_STACK = _TraceStack()


@contextlib.contextmanager
def source_location(location: Location | None):
    """Record ops (and raise errors) at `location` instead of the Python line that makes them:
    the ONNX importer says which node of the model it is importing."""
    saved, _STACK.location = _STACK.location, location
    try:
        yield
    finally:
        _STACK.location = saved


def is_tracing() -> bool:
    """Whether this thread is recording a trace."""
    return bool(_STACK.active)


def current_context() -> "TraceContext":
    if not _STACK.active:
        raise KilnError(
            "a traced value was used after the function that made it finished tracing "
            "(was it stored in a global or an attribute, or used from another thread?)",
            user_location(),
        )
    return _STACK.active[-1]


class TraceContext:
    """Owns the function being built: emits ops, interns constants, captures outer values."""

    def __init__(self, func):
        self.func = func
        self.builder = Builder(func.body)
        self._constants: dict = {}
        self.captures: list = []  # Tracers of enclosing traces this function reads
        # Python int values followed exactly (python_ints): IR value -> its exact value from
        # the call's argument leaves; and the checks numpy makes on them, run at call time.
        self.exact_ints: dict = {}
        self.int_checks: list = []
        self._captured: dict = {}
        self.closed = False
        # The last conversion of a Tracer to a Python number refused: numpy replaces that error
        # with its own when storing into an ndarray (y[0] = traced), and the trace puts it back.
        self.refused_conversion = None

    @contextlib.contextmanager
    def active(self):
        _STACK.active.append(self)
        try:
            yield self
        finally:
            _STACK.active.pop()
            self.closed = True

    def emit(self, op_class, operands, attributes=None, result_type=None, weak=False, loc=None) -> "Tracer":
        values = [self.value_of(t) for t in operands]
        op = self.builder.create(
            op_class, values, attributes, None if result_type is None else [result_type], loc=loc or user_location()
        )
        return Tracer(op.result, self, weak)

    def constant(self, array: np.ndarray, weak: bool = False) -> "Tracer":
        """A kiln.constant for `array`; one op per distinct captured array or scalar."""
        array = np.asarray(array)
        if any(stride == 0 and n > 1 for stride, n in zip(array.strides, array.shape)):
            return self._broadcast_constant(array, weak)
        key = (array.dtype.str, array.shape, array.tobytes()) if array.size <= 16 else id(array)
        if key not in self._constants:
            self._constants[key] = (self._constant_value(array), array)  # keeping `array` alive keeps id() unique
        return Tracer(self._constants[key][0], self, weak)

    def _constant_value(self, array: np.ndarray):
        """The IR value of a kiln.constant holding `array`'s elements in C order. A copy: the
        trace must not change if the caller mutates the array later. An array nobody can
        change (a model's weights) is kept as it is instead, and its transpose (Gemm's
        ``transB``) as a kiln.transpose of it, which constant folding makes C-ordered once: a
        constant in any other order would be copied again by everything that reads its bytes."""
        if immutable(array) and array.flags.c_contiguous:
            return self.emit(T.ConstantOp, [], {"value": array}).value
        if immutable(array) and array.T.flags.c_contiguous:
            base = self.emit(T.ConstantOp, [], {"value": array.T})
            return self.emit(T.TransposeOp, [base], {"permutation": tuple(reversed(range(array.ndim)))}).value
        return self.emit(T.ConstantOp, [], {"value": np.array(array, copy=True, order="C")}).value

    def _broadcast_constant(self, array: np.ndarray, weak: bool) -> "Tracer":
        """A zero-stride array (np.broadcast_to, a filled weight) as a constant of its distinct
        elements and a broadcast, so that a large splat is never copied out in full."""
        key = ("broadcast", id(array))
        if key not in self._constants:
            distinct = array[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in array.strides)]
            # a splat is a scalar constant, kiln's own spelling of a filled array
            source = self.constant(np.array(distinct.reshape(()) if distinct.size == 1 else distinct, copy=True))
            result_type = tensor_type(array.shape, array.dtype)
            value = self.emit(T.BroadcastToOp, [source], result_type=result_type).value
            self._constants[key] = (value, array)
        return Tracer(self._constants[key][0], self, weak)

    def value_of(self, tracer: "Tracer"):
        """The IR value standing for `tracer` in this function; a value of an enclosing
        trace becomes an extra argument (a capture)."""
        if tracer.ctx is self and not self.closed:
            return tracer.value
        if tracer.ctx in _STACK.active[:-1] and not tracer.ctx.closed:
            key = id(tracer.value)
            if key not in self._captured:
                self._captured[key] = self.func.body.add_argument(tracer.value.type, "captured")
                self.captures.append(tracer)
            return self._captured[key]
        raise KilnError(
            "a traced value escaped the function that made it (stored in a global, "
            "an attribute or a closure?) and was used in another trace",
            user_location(),
        )


# The numpy layer (numpy_api, traced_ops) is built on Tracer, so Tracer cannot import it: it
# registers here how a Tracer answers numpy's protocols ("ufunc", "function") and its own
# indexing, item assignment, in-place operators and casting ("getitem", "setitem", "in_place",
# "astype"). Importing kiln.frontend registers them.
NUMPY_PROTOCOL: dict = {}


def _operator(ufunc, *inputs):
    if any(getattr(type(x), "__array_ufunc__", True) is None for x in inputs):
        return NotImplemented  # the other operand opts out of numpy's operators
    return NUMPY_PROTOCOL["ufunc"](ufunc, "__call__", inputs, {}, operator=True)


def _binary(ufunc):
    """x op y, y op x, and x op= y, which writes x in place as numpy does (a new value for
    the same Tracer, seen through every alias of x; see frontend/views.py)."""

    def forward(self, other):
        return _operator(ufunc, self, other)

    def reflected(self, other):
        return _operator(ufunc, other, self)

    def in_place(self, other):
        return NUMPY_PROTOCOL["in_place"](ufunc, self, other)

    return forward, reflected, in_place


def _unary(ufunc):
    return lambda self: _operator(ufunc, self)


class Tracer:
    """A stand-in for a numpy array while a function is traced."""

    __slots__ = ("_value", "ctx", "weak", "view_of")
    # A Python scalar argument is "weak": like a Python float in numpy 2 (NEP 50),
    # it takes the dtype of the array it meets instead of forcing float64. `view_of` is None
    # for an array of its own, else what makes it a view of another (frontend/views.py).

    def __init__(self, value: Value, ctx: TraceContext, weak: bool = False):
        self._value = value
        self.ctx = ctx
        self.weak = weak
        self.view_of = None

    @property
    def value(self) -> Value:
        """The IR value the array holds now. A view whose base was assigned to since is
        recomputed from the base first, as numpy's view shows the base's new elements."""
        view = self.view_of
        if view is not None and view.base.value is not view.seen:
            view.seen = view.base.value
            self._value = view.recompute(view.base).value
        return self._value

    def assign(self, new: "Tracer") -> None:
        """Hold `new` (of this shape and dtype) from now on: numpy's in-place write of the
        whole array. A view writes its base through it."""
        assert new.shape == self.shape and new.dtype == self.dtype, (new.type, self.type)
        view = self.view_of
        self._value = new.value
        if view is not None:
            view.base.assign(view.write_back(view.base, self))
            view.seen = view.base.value

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

    # -- Python's operators ----------------------------------------------------------
    # Not numpy's NDArrayOperatorsMixin: an operator on weak scalars stays weak (n + 1 is a
    # Python int), while the ufunc called directly gives a strong numpy scalar (NEP 50), so
    # apply_ufunc has to know which of the two it serves.
    __add__, __radd__, __iadd__ = _binary(np.add)
    __sub__, __rsub__, __isub__ = _binary(np.subtract)
    __mul__, __rmul__, __imul__ = _binary(np.multiply)
    __matmul__, __rmatmul__, __imatmul__ = _binary(np.matmul)
    __truediv__, __rtruediv__, __itruediv__ = _binary(np.true_divide)
    __floordiv__, __rfloordiv__, __ifloordiv__ = _binary(np.floor_divide)
    __mod__, __rmod__, __imod__ = _binary(np.remainder)
    __divmod__, __rdivmod__ = _binary(np.divmod)[:2]
    __pow__, __rpow__, __ipow__ = _binary(np.power)

    def __pow__(self, other, modulo=None):  # noqa: F811 (pow(x, y, m) too)
        if modulo is not None:
            raise UnsupportedError(
                "pow(x, y, modulo) on a traced array is not a numpy operation; write (x ** y) % modulo",
                user_location(),
            )
        return _operator(np.power, self, other)

    __lshift__, __rlshift__, __ilshift__ = _binary(np.left_shift)
    __rshift__, __rrshift__, __irshift__ = _binary(np.right_shift)
    __and__, __rand__, __iand__ = _binary(np.bitwise_and)
    __xor__, __rxor__, __ixor__ = _binary(np.bitwise_xor)
    __or__, __ror__, __ior__ = _binary(np.bitwise_or)
    __lt__, __gt__ = _binary(np.less)[0], _binary(np.greater)[0]
    __le__, __ge__ = _binary(np.less_equal)[0], _binary(np.greater_equal)[0]
    __eq__, __ne__ = _binary(np.equal)[0], _binary(np.not_equal)[0]
    __hash__ = None  # unhashable, like numpy arrays (== is elementwise)
    __neg__, __pos__, __abs__, __invert__ = (_unary(u) for u in (np.negative, np.positive, np.absolute, np.invert))

    # -- numpy's protocols --------------------------------------------------------
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NUMPY_PROTOCOL["ufunc"](ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return NUMPY_PROTOCOL["function"](func, args, kwargs)

    # -- things that need a concrete value --------------------------------------
    def __bool__(self):
        raise TracerBoolError(
            "the truth value of a traced array is not known while tracing (Python if, while, "
            "and/or, bool()); choose between values with np.where(condition, x, y) instead",
            user_location(),
        )

    def _concrete(self, what: str):
        error = TracerConversionError(
            f"cannot convert a traced array to {what} inside a compiled function: its value is known "
            "only at run time; keep computing with numpy operations on it",
            user_location(),
        )
        self.ctx.refused_conversion = error
        raise error

    def __array__(self, dtype=None, copy=None):
        # Also what np.full(shape, traced) and np.array([traced, ...]) meet: numpy makes an array
        # of the argument before any protocol could pass it to kiln.
        self._concrete(
            "a numpy array (np.asarray, np.array, np.full; build arrays of traced values with "
            "np.full_like, np.broadcast_to or np.stack; to index a numpy array by a traced index, "
            "table[i], pass the table as an argument of the compiled function)"
        )

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

    def __format__(self, spec):
        if not spec:
            return repr(self)
        self._concrete(f"a formatted string ('{{:{spec}}}')")

    def __reduce__(self):
        self._concrete("a pickle")

    def __round__(self, ndigits=None):
        raise ArgumentError(
            "round() of an array is a TypeError in numpy (ndarray has no __round__); use np.round(x, decimals)",
            user_location(),
        )

    def __contains__(self, item):
        raise TracerBoolError(
            "'v in x' needs the values of a traced array, known only at run time; use np.any(x == v) instead",
            user_location(),
        )

    def __setitem__(self, key, value):
        NUMPY_PROTOCOL["setitem"](self, key, value)

    def __delitem__(self, key):
        raise TracerConversionError(
            "del x[...] cannot be compiled: numpy arrays do not delete elements", user_location()
        )

    # -- indexing and methods ------------------------------------------------------
    def __getitem__(self, key):
        return NUMPY_PROTOCOL["getitem"](self, key)

    @property
    def T(self):
        return np.transpose(self)

    @property
    def mT(self):
        return np.swapaxes(self, -1, -2)

    @property
    def real(self):
        return np.real(self)

    @property
    def imag(self):
        return np.imag(self)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def transpose(self, *axes):
        return np.transpose(self, _varargs(axes))

    def reshape(self, *shape, order="C", copy=None):
        return np.reshape(self, _varargs(shape), order=order)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        result = NUMPY_PROTOCOL["astype"](self, dtype, casting)
        return result.copy() if result is self and copy else result  # numpy copies unless copy=False

    def view(self, dtype=None, type=None):
        """ndarray.view(dtype): the elements' bits read as `dtype` (numpy_ufuncs.view)."""
        return NUMPY_PROTOCOL["view"](self, dtype, type)

    def fill(self, value):
        """numpy's x.fill(v): x[...] = v."""
        self[...] = value

    def flatten(self, order="C"):
        return np.ravel(self, order).copy()  # a copy, where ravel may give a view

    def sort(self, axis=-1, kind=None, order=None, *, stable=None):
        """ndarray.sort: sorts in place, as numpy does (every alias and view of it sees the order)."""
        self[...] = np.sort(self, axis=axis, kind=kind, order=order, stable=stable)

    def partition(self, kth, axis=-1, kind="introselect", order=None):
        """ndarray.partition, in place."""
        self[...] = np.partition(self, kth, axis=axis, kind=kind, order=order)

    def copy(self, order="C"):
        """A new array of its own: item assignment to it leaves this one as it is."""
        return Tracer(self.value, self.ctx, self.weak)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __getattr__(self, name):
        """ndarray methods that are numpy functions of the array go through those functions
        (so a method works exactly when its function does); any other public ndarray
        attribute raises an error naming it at the user's line."""
        if name in ("conj", "conjugate"):
            return lambda: self  # ndarray.conj of a real array is the array (np.conj of bool is int8)
        if name in _FUNCTION_METHODS:
            return functools.partial(getattr(np, name), self)
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'Tracer' object has no attribute '{name}'")
        hint = next((h for names, h in _METHOD_HINTS if name in names), "")
        raise UnsupportedAttributeError(f"ndarray.{name} is not supported on traced arrays{hint}", user_location())


# ndarray methods whose arguments are those of the numpy function of the same name after the array.
_FUNCTION_METHODS = frozenset(
    (
        "all",
        "any",
        "argmax",
        "argmin",
        "argpartition",
        "argsort",
        "choose",
        "clip",
        "cumprod",
        "cumsum",
        "diagonal",
        "dot",
        "max",
        "mean",
        "min",
        "nonzero",
        "prod",
        "put",
        "ravel",
        "repeat",
        "round",
        "searchsorted",
        "squeeze",
        "std",
        "sum",
        "swapaxes",
        "take",
        "trace",
        "var",
    )
)

_METHOD_HINTS = (
    (
        ("resize", "setfield", "setflags", "byteswap"),
        ": it rewrites the array's memory in place (its size, fields or bytes), which a traced array does "
        "not have; build a new array instead (np.resize is np.tile and a slice, np.pad, np.concatenate)",
    ),
    (
        ("base", "ctypes", "data", "flags", "strides", "flat", "getfield", "device", "to_device"),
        ": a traced array has no memory of its own while the function is traced",
    ),
    (("tobytes", "tofile", "dump", "dumps"), ": its values are known only when the compiled function runs"),
)


def _varargs(args):
    """x.reshape(2, 3) and x.reshape((2, 3)) mean the same."""
    if len(args) == 1 and (args[0] is None or isinstance(args[0], (tuple, list))):
        return args[0]
    return args or None
