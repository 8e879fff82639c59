"""``kiln.gradcheck``: kiln's gradients against central finite differences in float64.

The analytic side is kiln (a compiled ``value_and_grad``); the numeric side
runs the plain Python function with numpy, so the two share no code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kiln.errors import GradientMismatchError, user_facing
from kiln.frontend import pytree
from kiln.transforms import value_and_grad


@dataclass
class LeafCheck:
    """The worst element of one differentiated argument leaf."""

    path: str
    shape: tuple
    index: tuple
    analytic: float
    numeric: float
    error: float
    allowed: float

    @property
    def ok(self) -> bool:
        return self.error <= self.allowed


@dataclass
class GradcheckReport:
    """``kiln.gradcheck``'s findings: one ``LeafCheck`` per differentiated argument leaf (its
    path, shape, worst element's index, analytic and numeric values and error); ``ok`` when
    every leaf is within tolerance.

    >>> kiln.gradcheck(lambda x: np.sum(x * x), np.arange(3.0)).checks[0].shape
    (3,)
    """

    checks: list

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [f"{'argument':<24}{'shape':<14}{'worst at':<14}{'analytic':>14}{'numeric':>14}{'|error|':>11}  ok"]
        for c in self.checks:
            lines.append(
                f"{c.path:<24}{str(c.shape):<14}{str(c.index):<14}{c.analytic:>14.6g}{c.numeric:>14.6g}"
                f"{c.error:>11.2e}  {'yes' if c.ok else 'NO'}"
            )
        return "\n".join(lines)


@user_facing
def gradcheck(
    fn, *args, argnums=0, eps: float = 1e-6, atol: float = 1e-6, rtol: float = 1e-5, raise_on_failure: bool = True
) -> GradcheckReport:
    """Compare kiln's gradient of scalar `fn` at `args` with central differences.

    The differentiated arguments (`argnums`: an int or a tuple) are converted to float64
    and each element is moved by ``eps`` both ways (the step, in the argument's own units).
    Returns a ``GradcheckReport`` with the worst element per argument leaf; raises
    ``kiln.GradientMismatchError`` when an element is off by more than
    ``atol + rtol * |numeric|`` (unless `raise_on_failure` is false).

    >>> report = kiln.gradcheck(lambda w, x: np.sum(np.tanh(x @ w)), np.ones((3, 2)), np.eye(3))
    >>> report.ok
    True
    """
    single = isinstance(argnums, int)
    argnums = (argnums,) if single else tuple(argnums)
    args = list(args)
    for i in argnums:
        args[i] = pytree.unflatten(
            pytree.flatten(args[i])[1], [np.array(leaf, dtype=np.float64) for leaf in pytree.flatten(args[i])[0]]
        )
    _, analytic = value_and_grad(fn, argnums[0] if single else argnums)(*args)
    analytic = [analytic] if single else list(analytic)

    checks = []
    for i, grads in zip(argnums, analytic):
        entries, _ = pytree.flatten_with_paths(args[i], prefix=f"args[{i}]")
        for (path, leaf), grad in zip(entries, pytree.flatten(grads)[0]):
            numeric = _central_differences(fn, args, leaf, eps)
            grad = np.asarray(grad, dtype=np.float64)
            excess = np.abs(grad - numeric) - (atol + rtol * np.abs(numeric))
            worst = np.unravel_index(int(np.argmax(excess)), leaf.shape) if leaf.size else ()
            checks.append(
                LeafCheck(
                    path,
                    leaf.shape,
                    tuple(int(k) for k in worst),
                    float(grad[worst]) if leaf.size else 0.0,
                    float(numeric[worst]) if leaf.size else 0.0,
                    float(abs(grad[worst] - numeric[worst])) if leaf.size else 0.0,
                    float(atol + rtol * abs(numeric[worst])) if leaf.size else atol,
                )
            )
    report = GradcheckReport(checks)
    if raise_on_failure and not report.ok:
        raise GradientMismatchError(
            f"gradient of {getattr(fn, '__name__', 'fn')} does not match finite differences:\n{report}"
        )
    return report


def _central_differences(fn, args, leaf: np.ndarray, eps: float) -> np.ndarray:
    """d fn / d leaf, one element at a time; `leaf` is perturbed in place and restored."""
    numeric = np.zeros(leaf.shape)
    with np.errstate(all="ignore"):
        for index in np.ndindex(leaf.shape):
            original = leaf[index]
            leaf[index] = original + eps
            above = float(fn(*args))
            leaf[index] = original - eps
            below = float(fn(*args))
            leaf[index] = original
            numeric[index] = (above - below) / (2 * eps)
    return numeric
