"""Model weights in SafeTensors files: ``kiln.save_weights`` and ``kiln.load_weights``.

A file holds named tensors; a dict of parameters, nested or not, is stored with its keys
joined by '.' (``{"layer1": {"w": ...}}`` as ``layer1.w``), the names PyTorch's state dicts
use, so files written by either side read on the other. ``bind_weights`` checks a file's
tensors against the specs of a function's dict parameter, the way ``kiln build --weights``
builds them into a library.

The ``safetensors`` package (a dependency of kiln) is imported only when a file is read or
written, so ``import kiln`` stays fast.
"""

from __future__ import annotations

import os

import numpy as np

from kiln.errors import DTypeError, KilnError, ShapeError

__all__ = ["save_weights", "load_weights", "flatten_weights", "unflatten_weights", "bind_weights"]

SEPARATOR = "."


def _safetensors_numpy():
    try:
        from safetensors import numpy as safetensors_numpy  # noqa: PLC0415 (loaded on first use)
    except ImportError:
        raise KilnError(
            "reading and writing SafeTensors files needs the safetensors package: pip install safetensors"
        ) from None
    return safetensors_numpy


def flatten_weights(params: dict, prefix: str = "") -> dict:
    """`params` with nested dicts flattened into one level of '.'-joined names.

    >>> flatten_weights({"fc": {"w": 1, "b": 2}, "scale": 3})
    {'fc.w': 1, 'fc.b': 2, 'scale': 3}
    """
    if not isinstance(params, dict):
        raise KilnError(f"weights are a dict of arrays (nested dicts allowed), not a {type(params).__name__}")
    flat = {}
    for key, value in params.items():
        if not isinstance(key, str) or not key:
            raise KilnError(f"weight names are non-empty strings, got {prefix}{key!r}")
        name = prefix + key
        items = flatten_weights(value, name + SEPARATOR) if isinstance(value, dict) else {name: value}
        for flat_name, leaf in items.items():
            if flat_name in flat:
                raise KilnError(f"two weights are both named {flat_name!r} once nested names are joined with '.'")
            flat[flat_name] = leaf
    return flat


def unflatten_weights(flat: dict) -> dict:
    """Nested dicts from '.'-joined names, the inverse of `flatten_weights`.

    >>> unflatten_weights({"fc.w": 1, "fc.b": 2, "scale": 3})
    {'fc': {'w': 1, 'b': 2}, 'scale': 3}
    """
    nested: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split(SEPARATOR)
        level = nested
        for depth, part in enumerate(parents):
            level = level.setdefault(part, {})
            if not isinstance(level, dict):
                raise KilnError(f"{name!r} is below {SEPARATOR.join(parents[: depth + 1])!r}, which is a tensor")
        if leaf in level:
            raise KilnError(f"{name!r} is both a tensor and a group of tensors")
        level[leaf] = value
    return nested


def _as_array(name: str, value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise DTypeError(f"weight {name!r} is {array.dtype}; SafeTensors files hold bool, integer and float arrays")
    return array if array.flags.c_contiguous else array.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def save_weights(path, params: dict, metadata: dict | None = None) -> None:
    """Write the arrays of `params` (a dict, nested dicts flattened to '.' names) to the
    SafeTensors file `path`; `metadata` is an optional dict of strings stored beside them.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "mlp.safetensors")
    >>> kiln.save_weights(path, {"fc1": {"w": np.ones((2, 3), np.float32)}, "b": np.zeros(3)})
    >>> {name: array.shape for name, array in kiln.load_weights(path).items()}
    {'b': (3,), 'fc1.w': (2, 3)}
    >>> kiln.load_weights(path, nested=True)["fc1"]["w"].dtype
    dtype('float32')
    """
    flat = {name: _as_array(name, value) for name, value in flatten_weights(params).items()}
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise KilnError("SafeTensors metadata is a dict of strings to strings")
    _safetensors_numpy().save_file(flat, os.fspath(path), metadata=metadata)


def load_weights(path, nested: bool = False) -> dict:
    """The arrays of the SafeTensors file `path`, by name (sorted); with ``nested=True``,
    '.' in the names makes nested dicts (the inverse of `save_weights`). A file that is not
    SafeTensors, or holds a dtype numpy lacks (bfloat16, float8), raises ``kiln.KilnError``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "state.safetensors")
    >>> kiln.save_weights(path, {"fc.weight": np.eye(2, dtype=np.float32), "fc.bias": np.zeros(2, np.float32)})
    >>> kiln.load_weights(path, nested=True)
    {'fc': {'bias': array([0., 0.], dtype=float32), 'weight': array([[1., 0.],
           [0., 1.]], dtype=float32)}}
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise KilnError(f"no such weights file: {path}")
    safetensors_numpy = _safetensors_numpy()
    try:
        flat = safetensors_numpy.load_file(path)
    except Exception as exc:  # the Rust reader's SafetensorError, or numpy refusing a dtype
        raise KilnError(f"could not read {path} as a SafeTensors file: {exc}") from None
    flat = dict(sorted(flat.items()))
    return unflatten_weights(flat) if nested else flat


def bind_weights(specs, weights: dict, what: str = "weights") -> dict:
    """`weights` (flat '.' names or nested) checked against `specs` (a dict of
    ``kiln.TensorSpec``, nested or not) and shaped like it: every spec needs a tensor of its
    shape and dtype, and every tensor a spec. A missing, extra, mis-shaped or mis-typed tensor
    raises an error that names it.

    >>> bind_weights({"w": kiln.f32[2]}, {"w": np.zeros(2, np.float32)})
    {'w': array([0., 0.], dtype=float32)}
    >>> bind_weights({"w": kiln.f32[2]}, {"w": np.zeros(3, np.float32)})
    Traceback (most recent call last):
      ...
    kiln.errors.ShapeError: weights: 'w' has shape (3,), the function expects (2,)
    """
    wanted = flatten_weights(specs)
    given = {name: np.asarray(value) for name, value in flatten_weights(weights).items()}
    missing = [name for name in wanted if name not in given]
    if missing:
        raise KilnError(f"{what}: {_names(missing)} missing: the function needs {_them(missing)}")
    extra = [name for name in given if name not in wanted]
    if extra:
        raise KilnError(f"{what}: {_names(extra)} not a parameter of the function (extra tensors are refused)")
    for name, spec in wanted.items():
        array = given[name]
        if tuple(array.shape) != tuple(spec.shape):
            raise ShapeError(
                f"{what}: {name!r} has shape {tuple(array.shape)}, the function expects {tuple(spec.shape)}"
            )
        if array.dtype != spec.dtype:
            raise DTypeError(f"{what}: {name!r} is {array.dtype}, the function expects {spec.dtype}")
    return _shaped_like(specs, given)


def _shaped_like(specs: dict, flat: dict, prefix: str = "") -> dict:
    """The tensors of `flat` in the nesting of `specs` (whose own keys may hold '.')."""
    return {
        key: _shaped_like(spec, flat, f"{prefix}{key}{SEPARATOR}") if isinstance(spec, dict) else flat[prefix + key]
        for key, spec in specs.items()
    }


def _names(names: list) -> str:
    """'a' is / 'a', 'b' are: the start of a sentence about one or more tensors."""
    shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"the tensor {shown} is" if len(names) == 1 else f"the tensors {shown} are"


def _them(names: list) -> str:
    return "it" if len(names) == 1 else "them"
