"""``kiln.load``: call a library made by ``kiln build`` from Python, through cffi.

Each entry point of such a library comes with a JSON description of itself
(``<name>_kiln_signature``), so the loaded callable checks shapes and dtypes
before it calls into native code, as a compiled function does.
"""

from __future__ import annotations

import json
import os

import cffi
import numpy as np

from . import threads


class LoadError(Exception):
    """A file that is not a kiln-built library, or has no such function."""


def load(path: str, name: str | None = None, status_error=None) -> "LibraryFunction":
    """The function `name` of a kiln-built library (by default the one it is named after:
    ``libmlp.so`` holds ``mlp``), callable with numpy arrays of the shapes and dtypes it was
    built for. `status_error(status, signature)` is the exception a nonzero status raises
    (the compiler's ``kiln.load`` passes the one that decodes kiln's statuses; by default a
    ``RuntimeError`` naming the status). A missing file, a library kiln did not build or a
    missing function raise ``LoadError``."""
    if not os.path.exists(path):
        raise LoadError(f"no such library: {path}")
    base = os.path.basename(path)
    if name is None:
        if not (base.startswith("lib") and base.endswith(".so")):
            raise LoadError(f"{base} is not named lib<name>.so: pass name=")
        name = base[3:-3]
    ffi = cffi.FFI()
    ffi.cdef(f"extern const char {name}_kiln_signature[];")
    try:
        lib = ffi.dlopen(os.path.abspath(path))
        signature = json.loads(ffi.string(getattr(lib, f"{name}_kiln_signature")).decode())
    except (OSError, AttributeError, KeyError, cffi.FFIError) as exc:
        raise LoadError(f"{path} has no kiln function {name!r} ({exc})") from None
    if signature.get("target") == "cuda":
        raise LoadError(
            f"{path} was built with --target cuda: its {name} takes device pointers; call it from C or CUDA "
            "with cudaMalloc'd memory, or build with --target cuda-emulate to call it here"
        )
    count = len(signature["inputs"]) + len(signature["outputs"])
    ffi.cdef(f"int32_t {name}({', '.join(['void *'] * count) or 'void'});")
    return LibraryFunction(ffi, lib, signature, status_error or _unknown_status)


def _unknown_status(status: int, signature: dict) -> Exception:
    return RuntimeError(f"{signature['entry']} failed with status {status}")


class LibraryFunction:
    def __init__(self, ffi, lib, signature: dict, status_error):
        self._ffi, self._lib = ffi, lib  # the library stays loaded while this object lives
        self.signature = signature
        self._status_error = status_error
        self.__name__ = signature["entry"]
        self._fn = getattr(lib, signature["entry"])

    def __call__(self, *args, **kwargs):
        inputs = self.signature["inputs"]
        names = [a["name"] for a in inputs]
        if len(args) + len(kwargs) != len(inputs):
            raise TypeError(
                f"{self.__name__} takes {len(inputs)} arrays ({', '.join(names)}), got {len(args) + len(kwargs)}"
            )
        values = list(args) + [None] * (len(inputs) - len(args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{self.__name__} has no input {key!r} (its inputs: {', '.join(names)})")
            values[names.index(key)] = value
        arrays = []
        for spec, value in zip(inputs, values):
            array = np.asarray(value)
            if array.dtype != np.dtype(spec["dtype"]) or list(array.shape) != spec["shape"]:
                raise TypeError(
                    f"{self.__name__}: input {spec['name']} must be {spec['dtype']}{spec['shape']}, "
                    f"got {array.dtype}{list(array.shape)}"
                )
            arrays.append(np.ascontiguousarray(array))
        outputs = [np.empty(o["shape"], np.dtype(o["dtype"])) for o in self.signature["outputs"]]
        status = 0
        if any(o.size for o in outputs):  # results with no elements need no code run
            threads.use_in_this_thread()
            status = self._fn(*[self._ffi.from_buffer(a, require_writable=False) for a in arrays + outputs])
        if status:
            raise self._status_error(status, self.signature)
        results = [o[()] if o.ndim == 0 else o for o in outputs]
        return results[0] if len(results) == 1 else tuple(results)
