"""``kiln.grad`` and ``kiln.value_and_grad``: function transforms users call directly.

Inside a compiled function a gradient is traced into the enclosing graph
(``kiln.frontend.grad``). Called on arrays outside any trace, it compiles itself once,
on first call, and runs natively; concurrent first calls compile it once.
"""

from __future__ import annotations

import threading

from kiln.errors import user_facing
from kiln.frontend.grad import GradFunction
from kiln.frontend.tracing import is_tracing
from kiln.jit import CompiledFunction


class Gradient(GradFunction):
    """A ``GradFunction`` that compiles itself when called outside a trace."""

    def __init__(self, fn, argnums, with_value: bool):
        super().__init__(fn, argnums, with_value)
        self._compiled = None
        self._lock = threading.Lock()

    @user_facing
    def __call__(self, *args, **kwargs):
        if is_tracing():
            return super().__call__(*args, **kwargs)
        with self._lock:
            if self._compiled is None:
                self._compiled = CompiledFunction(self)
        return self._compiled(*args, **kwargs)


def grad(fn, argnums=0) -> Gradient:
    """The gradient of scalar-valued `fn` with respect to the arguments `argnums` (an int or
    a tuple of ints). Each gradient has its argument's structure, shape and dtype (float32 or
    float64 only; integer arguments raise ``DTypeError``). `fn` must return one scalar
    (``KilnError`` otherwise); a bad `argnums` raises ``ArgumentError``.

    >>> dloss = kiln.grad(lambda w, x: np.sum((x @ w) ** 2))
    >>> dloss(np.ones(3), np.eye(3))
    array([2., 2., 2.])
    """
    return Gradient(fn, argnums, with_value=False)


def value_and_grad(fn, argnums=0) -> Gradient:
    """Like `grad`, but the function returns ``(fn(*args), gradients)``.

    >>> kiln.value_and_grad(lambda x: np.sum(x * x))(np.array([1.0, 2.0]))
    (np.float64(5.0), array([2., 4.]))
    """
    return Gradient(fn, argnums, with_value=True)
