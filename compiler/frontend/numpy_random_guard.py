"""np.random refuses to draw while a function is traced.

A function is traced once and its numpy results become constants of the compiled code, so
``np.random.rand(n)`` (or a captured ``np.random.default_rng(0)``) inside ``kiln.compile``
would draw once and give the same "random" numbers on every call: dropout with a frozen
mask, silently. While any thread traces, numpy's module-level random functions and every
method of ``Generator``, ``RandomState`` and ``BitGenerator.random_raw`` are replaced by
wrappers that raise UnsupportedError at the user's line, naming the kiln.random function to
use instead, when the calling thread is tracing, and call numpy's own otherwise: other
threads, and this one outside a trace, are not affected. The originals are put back when
the last trace ends, even when it ends with an exception.

numpy's random types are immutable extension types, so their methods are swapped in the
type's own dict and CPython told through ``PyType_Modified`` (which drops its method
cache). A method bound before the trace (``draw = rng.normal``, ``from numpy.random import
rand``) is an object of its own that the swap cannot reach, so ``watching_bound_draws``
finds the generators such methods belong to among what the traced function can name (its
globals, closure cells and defaults, and those of the Python functions it names, a few
levels deep, looking through ``functools.partial``) and compares their states before and
after the trace: a state that moved is a draw, refused when the trace ends, at the
function's line.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import inspect
import threading
import types

import numpy as np

from kiln.errors import UnsupportedError
from kiln.frontend.tracing import code_location, is_tracing, user_location

# What to call instead, by numpy's name; anything else is built from uniform or normal draws.
_ALTERNATIVES = (
    (("rand", "random", "random_sample", "ranf", "sample", "uniform", "random_raw", "bytes"), "kiln.random.uniform"),
    (("randn", "normal", "standard_normal"), "kiln.random.normal"),
    (("integers", "randint", "random_integers", "tomaxint", "choice"), "kiln.random.randint"),
    (("permutation", "shuffle", "permuted"), "kiln.random.permutation"),
    (("binomial",), "kiln.random.bernoulli"),
)
# Calls that seed or make generators: the key is what replaces them.
_KEY_MAKERS = frozenset(
    ("seed", "default_rng", "get_state", "set_state", "spawn", "get_bit_generator", "set_bit_generator")
)
_MODULES = (np.random, np.random.mtrand)
_TYPES = (np.random.Generator, np.random.RandomState)

_LOCK = threading.Lock()
_traces = 0  # traces running in all threads; the wrappers are installed while it is > 0
_saved: list = []  # (namespace dict, name, original, owner type or None), to put back


def _alternative(name: str) -> str:
    hint = next((alt for names, alt in _ALTERNATIVES if name in names), None)
    return hint or "kiln.random.uniform or kiln.random.normal, transformed with numpy operations"


def _refusal(what: str, name: str) -> UnsupportedError:
    if name in _KEY_MAKERS:
        instead = "make a key with kiln.random.key(seed), pass it as an argument, and draw with kiln.random"
    else:
        instead = f"draw them per call with {_alternative(name)}, from a key passed as an argument"
    return UnsupportedError(
        f"{what}() was called while tracing: numpy draws its numbers once, when the function is traced, "
        f"and the compiled function would return the same numbers on every call; {instead} "
        "(kiln.random.key(seed), kiln.random.split)",
        user_location(),
    )


def _wrap_function(original, what: str, name: str):
    @functools.wraps(original)
    def refuse_while_tracing(*args, **kwargs):
        if is_tracing():
            raise _refusal(what, name)
        return original(*args, **kwargs)

    return refuse_while_tracing


def _wrap_method(original, what: str, name: str):
    @functools.wraps(original)
    def refuse_while_tracing(self, *args, **kwargs):
        if is_tracing():
            raise _refusal(what, name)
        return original(self, *args, **kwargs)

    return refuse_while_tracing


def _type_dict(cls) -> dict:
    """The dict behind ``cls.__dict__`` (a read-only proxy for an extension type)."""
    return next(r for r in gc.get_referents(cls.__dict__) if isinstance(r, dict))


def _replacements():
    for module in _MODULES:
        for name, value in vars(module).items():
            if not name.startswith("_") and callable(value) and not isinstance(value, type) and name != "test":
                yield vars(module), name, value, _wrap_function(value, f"np.random.{name}", name), None
    for cls, names in [(c, None) for c in _TYPES] + [(np.random.BitGenerator, ("random_raw",))]:
        namespace = _type_dict(cls)
        for name, value in list(namespace.items()):
            if not name.startswith("_") and callable(value) and (names is None or name in names):
                yield namespace, name, value, _wrap_method(value, f"np.random.{cls.__name__}.{name}", name), cls


def _install():
    touched = set()
    for namespace, name, original, wrapper, cls in _replacements():
        namespace[name] = wrapper
        _saved.append((namespace, name, original, cls))
        touched.add(cls)
    _types_modified(touched)


def _restore():
    touched = set()
    for namespace, name, original, cls in reversed(_saved):
        namespace[name] = original
        touched.add(cls)
    _saved.clear()
    _types_modified(touched)


def _types_modified(types) -> None:
    for cls in types:
        if cls is not None:
            ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


@contextlib.contextmanager
def refusing_numpy_random():
    """While the body runs (one trace), numpy's random functions raise in tracing threads."""
    global _traces
    with _LOCK:
        if _traces == 0:
            _install()
        _traces += 1
    try:
        yield
    finally:
        with _LOCK:
            _traces -= 1
            if _traces == 0:
                _restore()


# -- methods bound before the trace: found by what the function names, caught by state ---------
_GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator)
_DEPTH = 3  # helper functions followed from the traced one (fn -> helper -> helper's helper)


@contextlib.contextmanager
def watching_bound_draws(fn):
    """Refuse (UnsupportedError at `fn`'s line) a trace of `fn` that advanced a numpy
    generator reachable from it: the draws of methods bound before the trace."""
    watched = _reachable_generators(fn)
    before = {name: _state(g) for name, g in watched.items()}
    yield
    for name, generator in watched.items():
        if not _same(before[name], _state(generator)):
            code = _code_of(fn)
            where = code_location(code) if code is not None else user_location()
            raise UnsupportedError(
                f"{getattr(fn, '__name__', 'the function')} drew numbers from the numpy generator behind "
                f"{name!r} while it was traced: numpy draws once, when the function is traced, and the compiled "
                "function would return the same numbers on every call; draw them per call with kiln.random "
                "(kiln.random.uniform, kiln.random.normal, ...) from a key passed as an argument",
                where,
            )


def _code_of(fn):
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    return getattr(fn, "__code__", None)


def _reachable_generators(fn) -> dict:
    """{the name it is reached by: generator} for the numpy generators `fn` can name."""
    found, seen, work = {}, set(), [(fn, 0)]
    while work:
        function, depth = work.pop()
        function = inspect.unwrap(getattr(function, "__func__", function))
        code = getattr(function, "__code__", None)
        if code is None or id(function) in seen:
            continue
        seen.add(id(function))
        for name, value in _named_by(function, code):
            while isinstance(value, functools.partial):  # partial(rng.normal, size=4): what it calls
                value = value.func
            bound = isinstance(value, (types.BuiltinMethodType, types.MethodType))
            owner = getattr(value, "__self__", None) if bound else value
            if isinstance(owner, _GENERATORS):
                found.setdefault(name, owner)
            elif isinstance(value, types.FunctionType) and depth < _DEPTH:
                work.append((value, depth + 1))
    return found


def _named_by(function, code):
    """(name, value) of the globals `code` and its nested code names, its closure cells and defaults."""
    names, codes = set(), [code]
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    scope = getattr(function, "__globals__", {})
    yield from ((n, scope[n]) for n in names if n in scope)
    for name, cell in zip(code.co_freevars, getattr(function, "__closure__", None) or ()):
        with contextlib.suppress(ValueError):  # a cell not yet filled
            yield name, cell.cell_contents
    defaults = getattr(function, "__defaults__", None) or ()
    yield from zip(code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount], defaults)
    yield from (getattr(function, "__kwdefaults__", None) or {}).items()


def _state(generator):
    if isinstance(generator, np.random.RandomState):
        return generator.get_state(legacy=False)
    bits = generator if isinstance(generator, np.random.BitGenerator) else generator.bit_generator
    return bits.state


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b
