"""Python ints passed as arguments: numpy's checks on their values, made at call time.

A Python int argument is traced as a weak int64 (uint64 from 2**63 on), one trace for
every value, so what numpy decides from the value itself is decided when the compiled
function is called, before its native code runs:

- a ufunc converts a Python int to the integer dtype of the array it meets
  (``uint8_array + s``) and raises OverflowError where it does not fit (NEP 50; numpy's
  message "Python integer 300 out of bounds for uint8");
- Python's own arithmetic on Python ints (``s * s``) is exact, and kiln computes it in
  int64, so a result that leaves int64 is an OverflowError, never a wrapped value.

Comparisons need no check: numpy_api compares a Python int exactly, in a type that holds
both operands. Each check keeps the user's line that made it, and raises there.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kiln.errors import IntegerOverflowError
from kiln.frontend.tracing import Tracer, user_location

# Past this many bits a result cannot fit any dtype: Python's exact power and shift are then
# not computed (3 ** 10**12 would take the call's time and memory) but stood in for.
_BITS = 128


@dataclass(frozen=True)
class IntCheck:
    """`exact(leaves)` (the Python int, None where Python's arithmetic gives none) must fit
    `dtype`; else IntegerOverflowError at `loc`."""

    exact: Callable
    dtype: np.dtype
    loc: object
    arithmetic: bool  # a result of Python-int arithmetic, not a conversion numpy makes

    def run(self, leaves) -> None:
        value = self.exact(leaves)
        info = np.iinfo(self.dtype)
        if value is None or int(info.min) <= value <= int(info.max):
            return
        if self.arithmetic:
            message = (
                f"Python int arithmetic gives {_shown(value)}, which does not fit in {self.dtype}, the dtype kiln "
                "computes Python int arguments in (make the argument static, static_argnames=..., to compute "
                "with it in Python)"
            )
        else:
            message = f"Python integer {_shown(value)} out of bounds for {self.dtype}"
        raise IntegerOverflowError(message, self.loc)


def _shown(value: int) -> str:
    return str(value) if abs(value) < 2**_BITS else ("-" if value < 0 else "") + f"2**{_BITS} or more"


def fits(value: int, dtype) -> bool:
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)


def out_of_bounds(value: int, dtype) -> IntegerOverflowError:
    """numpy's OverflowError for a Python int constant that `dtype` cannot hold, at the user's line."""
    return IntegerOverflowError(f"Python integer {value} out of bounds for {np.dtype(dtype)}", user_location())


def is_python_int(x) -> bool:
    return type(x) is int


def exact(x):
    """How to get `x`'s exact Python value from a call's argument leaves: for a Python int
    constant and a weak int Tracer whose value kiln follows; else None."""
    if is_python_int(x):
        return lambda leaves: x
    if isinstance(x, Tracer) and x.weak and x.dtype.kind in "iu":
        return x.ctx.exact_ints.get(x.value)
    return None


def check_conversion(x, dtype) -> None:
    """numpy's conversion of the Python int `x` to the integer `dtype` of the array it meets:
    an error now for a constant, a check at call time for an argument."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        return
    if is_python_int(x):
        if not fits(x, dtype):
            raise out_of_bounds(x, dtype)
        return
    value = exact(x)
    if value is None:
        return
    info, held = np.iinfo(x.dtype), np.iinfo(dtype)
    if not (held.min <= info.min and info.max <= held.max):  # else every value it can have fits
        x.ctx.int_checks.append(IntCheck(value, dtype, user_location(), arithmetic=False))


def computing_dtype(operands) -> np.dtype:
    """The dtype kiln computes Python-int-only arithmetic in: int64, or uint64 where an
    operand is a Python int of 2**63 or more (an argument traced as uint64, or a constant).
    Either holds the exact result of 2**63 * 0 or (2**64 - 1) % 7; one outside it is an error."""
    for x in operands:
        if is_python_int(x) and x >= 2**63 or isinstance(x, Tracer) and x.weak and x.dtype == np.uint64:
            return np.dtype(np.uint64)
    return np.dtype(np.int64)


# Python's operators whose result modulo 2**64 is that of their operands modulo 2**64: computed
# on 64-bit operands of either sign, they give the exact result whenever its dtype holds it.
_MODULAR = {np.add, np.subtract, np.multiply, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.negative, np.positive}


def is_modular(ufunc) -> bool:
    return ufunc in _MODULAR


def wrapped(x, dtype):
    """A Python int constant `x` as the integer `dtype` holds it modulo 2**64 (-1 as uint64 is
    2**64 - 1); anything else as it is."""
    if not is_python_int(x) or np.dtype(dtype).kind not in "iu":
        return x
    value = x % 2**64
    return value - 2**64 if np.dtype(dtype).kind == "i" and value >= 2**63 else value


def _power(a, b):
    if b < 0:
        return None  # Python gives a float; kiln's integer power refuses it on its own
    if abs(a) <= 1 or b * max(abs(a).bit_length() - 1, 1) <= _BITS:
        return a**b
    return (-1 if a < 0 and b % 2 else 1) * 2**_BITS


def _left_shift(a, b):
    if b < 0:
        return None
    return a << b if b <= _BITS or a == 0 else (-1 if a < 0 else 1) * 2**_BITS


def _divides(op):
    return lambda a, b: None if b == 0 else op(a, b)


def _right_shift(a, b):
    return None if b < 0 else a >> b


# numpy's integer ufunc -> Python's operator on ints, for the ufuncs Python's operators call.
PYTHON_OPERATORS = {
    np.add: operator.add,
    np.subtract: operator.sub,
    np.multiply: operator.mul,
    np.floor_divide: _divides(operator.floordiv),
    np.remainder: _divides(operator.mod),
    np.power: _power,
    np.left_shift: _left_shift,
    np.right_shift: _right_shift,
    np.bitwise_and: operator.and_,
    np.bitwise_or: operator.or_,
    np.bitwise_xor: operator.xor,
    np.negative: operator.neg,
    np.positive: operator.pos,
    np.absolute: abs,
}


def python_arithmetic(ufunc, operands, result: Tracer) -> None:
    """Follow `result`, Python's operator `ufunc` on Python ints, exactly: at call time its
    exact value must fit the dtype kiln computed it in."""
    op = PYTHON_OPERATORS.get(ufunc)
    parts = [exact(x) for x in operands]
    if op is None or result.dtype.kind not in "iu" or any(p is None for p in parts):
        return

    def value(leaves):
        values = [p(leaves) for p in parts]
        return None if any(v is None for v in values) else op(*values)

    result.ctx.exact_ints[result.value] = value
    result.ctx.int_checks.append(IntCheck(value, result.dtype, user_location(), arithmetic=True))


def clamped(x: Tracer, low: int | None = None, high: int | None = None) -> Tracer:
    """The Python int argument `x` clamped into [low, high], still weak and followed exactly:
    numpy's np.clip ignores a bound at or past its array's extreme, which for an argument is
    known only at call time, and clamping it there is the same."""
    exact_value = exact(x)
    result = x
    info = np.iinfo(x.dtype)
    for bound, ufunc, pick in ((low, np.maximum, max), (high, np.minimum, min)):
        if bound is None or not info.min <= bound <= info.max:
            continue  # every value x can hold is already on the right side of it
        result = Tracer(ufunc(result, x.dtype.type(bound)).value, x.ctx, weak=True)
    if exact_value is not None:

        def value(leaves):
            v = exact_value(leaves)
            v = v if low is None else max(v, low)
            return v if high is None else min(v, high)

        x.ctx.exact_ints[result.value] = value
    return result
