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
rand``) is an object of its own and is not seen.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import threading

import numpy as np

from kiln.errors import UnsupportedError
from kiln.frontend.tracing import is_tracing, user_location

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
