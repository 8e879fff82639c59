"""Reference interpreter: run a ``tensor``-level function with numpy.

Each op's ``evaluate`` holds its numpy semantics; the interpreter only walks
the function's block in order. It is the oracle compiled code is tested
against, so it checks every result against the op's declared type.
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import func as F
from kiln.dialects.diagnostics import VerificationError


def run_function(function: F.FuncOp, args) -> list:
    """Evaluate `function` on numpy arrays; returns its results as arrays."""
    if len(args) != len(function.arguments):
        raise ValueError(f"@{function.sym_name} takes {len(function.arguments)} arguments, got {len(args)}")
    env = {value: np.asarray(arg) for value, arg in zip(function.arguments, args)}
    with np.errstate(all="ignore"):  # compiled code does not warn on inf/nan; neither does its oracle
        for op in function.body.ops:
            if isinstance(op, F.ReturnOp):
                return [env[v] for v in op.operands]
            result = np.asarray(op.evaluate(*(env[v] for v in op.operands)))
            expected = op.result.type
            if result.shape != expected.shape or result.dtype != expected.dtype:
                raise VerificationError(
                    f"{op.name} evaluated to {result.dtype}{list(result.shape)}, but its type is {expected}", op.loc
                )
            env[op.result] = result
    raise VerificationError(f"@{function.sym_name} has no func.return", function.loc)
