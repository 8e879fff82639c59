"""Dense constants printed without their elements.

MLIR's printer, given ``--mlir-elide-elementsattrs-if-larger=N``, writes an elements
attribute of more than N elements as ``dense_resource<__elided__> : tensor<...>``: the
type stays, the data does not, and the text still parses (its value is then unknown).
kiln prints and parses the same form. Parsing gives an `ElidedElements` in place of the
numpy array: it has the constant's shape and dtype, so types infer and the module
verifies, but anything that reads its elements raises `ElidedConstantError` instead of
computing with made-up data.
"""

from __future__ import annotations

import numpy as np

from .diagnostics import KilnError

ELIDED = "dense_resource<__elided__>"


class ElidedConstantError(KilnError, ValueError):
    """The elements of a constant that was printed elided are needed (to fold, run or compile it)."""


class ElidedElements:
    """A constant's shape and dtype, its elements left out when its IR was printed. Reading the
    elements (``np.asarray``, arithmetic, ``.tobytes()``, any array attribute beyond ``shape``,
    ``dtype``, ``ndim`` and ``size``) raises ElidedConstantError. Two elided constants are never
    equal: their values are unknown, so CSE keeps them apart."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def _unknown(self) -> ElidedConstantError:
        shape = "x".join(map(str, self.shape))
        return ElidedConstantError(
            f"a constant of shape {shape or '()'} and dtype {self.dtype} was printed as {ELIDED}, so its "
            "elements are unknown: IR parsed from elided text verifies and prints but cannot fold, run or "
            "compile; print it in full (print_ir's elide_constants=None, Lowered.text(..., "
            "elide_constants=None), kiln dump --print-large-constants)"
        )

    def __array__(self, *args, **kwargs):
        raise self._unknown()

    def __array_ufunc__(self, *args, **kwargs):
        raise self._unknown()

    def __array_function__(self, *args, **kwargs):
        raise self._unknown()

    def __getattr__(self, name):  # only for names the class lacks: tobytes, astype, reshape, ...
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._unknown()

    def __getitem__(self, index):
        raise self._unknown()

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __repr__(self) -> str:
        return f"ElidedElements(shape={self.shape}, dtype={self.dtype})"


def _refuse(self, *args):
    raise self._unknown()


# Arithmetic reads the elements too: an operator on an elided value raises, as numpy's functions do.
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor"):
    setattr(ElidedElements, f"__{_name}__", _refuse)
    setattr(ElidedElements, f"__r{_name}__", _refuse)
for _name in ("neg", "pos", "abs", "invert", "lt", "le", "gt", "ge", "bool", "float", "int", "iter"):
    setattr(ElidedElements, f"__{_name}__", _refuse)
del _name


def is_elements(value) -> bool:
    """Whether `value` can be a dense attribute's value: a numpy array, or one printed elided."""
    return isinstance(value, (np.ndarray, ElidedElements))
