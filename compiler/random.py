"""Random numbers that are drawn each time a compiled function runs: explicit keys, as JAX's
``jax.random``.

numpy's ``np.random`` draws while a function is traced, so a compiled function would reuse
the same numbers on every call; kiln refuses it there (frontend/numpy_random_guard.py). Here a
*key* is a ``uint32[2]`` array, passed to the compiled function as an argument like any
other, and every draw is a pure function of the key: Threefry-2x32 (frontend/threefry.py),
computed in uint32 tensor ops, so interpreter, CPU and CUDA targets give the same bits, and
so does numpy when these functions are called on numpy keys outside ``kiln.compile``. The
same key gives the same numbers; ``split`` makes new independent keys. Draws carry no
gradient (keys are integers).

>>> key = kiln.random.key(0)
>>> key
array([0, 0], dtype=uint32)
>>> noise, mask = kiln.random.split(key)
>>> kiln.random.uniform(noise, (3,)).dtype
dtype('float32')
>>> dropout = kiln.compile(lambda x, key: x * kiln.random.bernoulli(key, 0.5, x.shape) / 0.5)
>>> x = np.ones(1000, np.float32)
>>> bool(np.all(dropout(x, mask) == dropout(x, mask))), bool(np.all(dropout(x, mask) == dropout(x, noise)))
(True, False)
"""

from __future__ import annotations

import operator

import numpy as np

from kiln.errors import ArgumentError, DTypeError, ShapeError
from kiln.frontend.threefry import random_bits, threefry2x32
from kiln.frontend.traced_ops import context_of, lift
from kiln.frontend.tracing import Tracer, user_location

__all__ = ["key", "split", "fold_in", "uniform", "normal", "bernoulli", "randint", "permutation"]

_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_U64 = 2**64


def key(seed):
    """A key (``uint32[2]``) for the non-negative integer `seed` below 2**64: ``[seed >> 32,
    seed & 0xFFFFFFFF]``, as JAX's ``PRNGKey``. `seed` may be a Python or numpy integer, or a
    traced 0-d integer inside ``kiln.compile`` (a negative traced seed wraps modulo 2**64).

    Raises ValueError for a negative seed or one of 2**64 or more (numpy's ``default_rng``
    refuses negative seeds too), ArgumentError for anything but an integer.

    >>> kiln.random.key(2**32 + 5)
    array([1, 5], dtype=uint32)
    """
    if isinstance(seed, Tracer):
        if seed.shape != () or seed.dtype.kind not in "iu":
            raise ArgumentError(f"kiln.random.key takes a 0-d integer seed, got a traced {seed.type}", user_location())
        wide = seed.astype(np.uint64)
        return np.stack([(wide >> 32).astype(np.uint32), wide.astype(np.uint32)])
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ArgumentError(f"kiln.random.key takes an integer seed, got {type(seed).__name__}", user_location())
    seed = int(seed)
    if not 0 <= seed < _U64:
        raise ValueError(f"kiln.random.key: the seed must be in [0, 2**64), got {seed}")
    return np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)


def split(key, n: int = 2):
    """`n` new keys from `key`, as a ``uint32[n, 2]`` array (``a, b = split(key)``); their
    streams are independent of each other and of `key`'s. As JAX's ``threefry_split``: the
    words are Threefry of the counters 0..2n-1.

    >>> kiln.random.split(kiln.random.key(0), 3).shape
    (3, 2)
    """
    _check_key(key, "split")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"kiln.random.split: n must be >= 0, got {n}")
    return random_bits(key, 2 * n).reshape(n, 2)


def fold_in(key, data):
    """A new key from `key` and the integer `data` (0 <= data < 2**32, or a traced 0-d
    uint32): Threefry of the counter (0, data) under `key`, as JAX's ``fold_in``. Different
    data give independent keys: a step number or a layer index folded into one key.

    >>> a, b = kiln.random.fold_in(kiln.random.key(0), 1), kiln.random.fold_in(kiln.random.key(0), 2)
    >>> a.dtype, a.shape, bool(np.array_equal(a, b))
    (dtype('uint32'), (2,), False)
    """
    _check_key(key, "fold_in")
    if isinstance(data, Tracer):
        if data.shape != () or data.dtype != np.uint32:
            raise ArgumentError(
                f"kiln.random.fold_in takes a 0-d uint32 datum, got a traced {data.type}", user_location()
            )
        word = data.reshape(1)
    else:
        if isinstance(data, (bool, np.bool_)) or not isinstance(data, (int, np.integer)) or not 0 <= data < 2**32:
            raise ValueError(f"kiln.random.fold_in: data must be an integer in [0, 2**32), got {data!r}")
        word = np.array([data], np.uint32)
    high, low = threefry2x32(key[0], key[1], np.zeros(1, np.uint32), word)
    return np.concatenate([high, low])


def uniform(key, shape=(), dtype=np.float32, minval=0.0, maxval=1.0):
    """Floats uniform in [minval, maxval), of `shape` and `dtype` (float16, float32 or
    float64). The unit draw keeps as many random bits as the dtype's mantissa holds (11, 24
    or 53), so every value is a multiple of 2**-bits; `minval` and `maxval` may be scalars or
    arrays that broadcast to `shape` (numpy's ``Generator.uniform(low, high, size)``), and a
    result that rounding would put on `maxval` is the float just below it.

    Raises DTypeError for another dtype, ShapeError for a negative size or bounds that do
    not broadcast to `shape`, OverflowError (as numpy) when maxval - minval is not finite in
    `dtype` (infinite or NaN bounds, or a range wider than the largest float).

    >>> u = kiln.random.uniform(kiln.random.key(1), (2, 3), np.float64, -1.0, 1.0)
    >>> u.shape, u.dtype, bool(np.all((-1 <= u) & (u < 1)))
    ((2, 3), dtype('float64'), True)
    """
    _check_key(key, "uniform")
    shape, dtype = _shape(shape, "uniform"), _float_dtype(dtype, "uniform")
    _check_broadcast("uniform", shape, minval=minval, maxval=maxval)
    lo, hi = _as_dtype(minval, dtype), _as_dtype(maxval, dtype)
    if not isinstance(lo, Tracer) and not isinstance(hi, Tracer):
        with np.errstate(over="ignore", invalid="ignore"):
            finite = np.all(np.isfinite(hi - lo))
        if not finite:  # inf * u would be NaN at u = 0: numpy refuses the range instead
            raise OverflowError(f"kiln.random.uniform: maxval - minval exceeds the range of {dtype}")
    result = lo + (hi - lo) * _unit(key, shape, dtype)
    # lo + (hi - lo) * u can round up onto hi; numpy's half-open interval says it may not.
    return np.where(result == hi, np.nextafter(hi, lo), result)


def normal(key, shape=(), dtype=np.float32, loc=0.0, scale=1.0):
    """Normally distributed floats with mean `loc` and standard deviation `scale` (numpy's
    ``Generator.normal(loc, scale, size)``), of `shape` and `dtype` (float16, float32, float64).
    Box-Muller on two uniform draws, computed in float64 and rounded once to `dtype`; the tails
    stop at about 5.8 (float16, float32) or 8.6 (float64) standard deviations, where the unit
    draw's resolution ends. float16 and float32 results agree across targets unless a target's
    float64 log, sqrt or cos differs in its last bit right at a rounding boundary (about one
    value in 2**29); float64 results may differ in the last bit. A concrete negative `scale`
    is a ValueError, as numpy's.

    >>> z = kiln.random.normal(kiln.random.key(0), (10000,))
    >>> bool(abs(z.mean()) < 0.05), bool(abs(z.std() - 1) < 0.05)
    (True, True)
    """
    _check_key(key, "normal")
    shape, dtype = _shape(shape, "normal"), _float_dtype(dtype, "normal")
    _check_broadcast("normal", shape, loc=loc, scale=scale)
    if not isinstance(scale, Tracer) and np.any(np.asarray(scale) < 0):
        raise ValueError("kiln.random.normal: scale < 0")  # numpy's check
    # The unit draws keep the dtype's resolution; log, sqrt and cos run in float64 for every
    # dtype and are rounded once, so the targets' math libraries, which may differ in the last
    # float64 bit, agree on the float32 and float16 result (all but ~2**-29 of the time).
    unit = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    pair = _unit(key, (2,) + shape, unit).astype(np.float64)
    radius = np.sqrt(-2.0 * np.log(1.0 - pair[0]))  # 1 - u is in (0, 1]
    z = radius * np.cos((2 * np.pi) * pair[1])
    return _as_dtype(loc, dtype) + _as_dtype(scale, dtype) * z.astype(dtype)


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability `p` (a scalar or an array broadcasting to
    `shape`; `shape` defaults to `p`'s), as JAX's ``bernoulli``; numpy's
    ``Generator.binomial(1, p, size)`` as bool. A concrete `p` outside [0, 1] or NaN is a
    ValueError, as numpy's.

    >>> kiln.random.bernoulli(kiln.random.key(0), 1.0, (3,))
    array([ True,  True,  True])
    """
    _check_key(key, "bernoulli")
    if not isinstance(p, Tracer):
        concrete = np.asarray(p)
        if concrete.dtype.kind not in "biuf" or not np.all((concrete >= 0) & (concrete <= 1)):
            raise ValueError(f"kiln.random.bernoulli: p must be in [0, 1], got {p!r}")
    shape = _shape(_shape_of(p) if shape is None else shape, "bernoulli")
    _check_broadcast("bernoulli", shape, p=p)
    # A float64 array p is compared at float64 resolution; a Python float is weak (NEP 50).
    work = np.float64 if getattr(p, "dtype", None) == np.float64 else np.float32
    return _unit(key, shape, np.dtype(work)) < p


def randint(key, low, high=None, shape=(), dtype=np.int64):
    """Integers uniform in [low, high) (or [0, low) when `high` is None), of `shape` and the
    integer `dtype`: numpy's ``randint(low, high, size, dtype)``. The bounds are Python
    ints, known while tracing. Each value is 64 random bits reduced modulo high - low, so the
    bias is at most (high - low) / 2**64 (none when high - low is a power of two).

    Raises ValueError when low >= high or a bound is outside `dtype` (numpy's messages),
    DTypeError for a dtype that is not an integer, ArgumentError for traced bounds.

    >>> kiln.random.randint(kiln.random.key(0), 5, 6, (4,))
    array([5, 5, 5, 5])
    """
    _check_key(key, "randint")
    shape, dtype = _shape(shape, "randint"), np.dtype(dtype)
    if dtype.kind not in "iu":
        raise DTypeError(f"kiln.random.randint: dtype must be an integer type, got {dtype}", user_location())
    if high is None:
        low, high = 0, low
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, (int, np.integer)):
            raise ArgumentError(
                f"kiln.random.randint: {name} must be a Python int, known while tracing; got {type(bound).__name__}",
                user_location(),
            )
    low, high = int(low), int(high)
    info = np.iinfo(dtype)
    if low < info.min:
        raise ValueError(f"low is out of bounds for {dtype}")
    if high > info.max + 1:
        raise ValueError(f"high is out of bounds for {dtype}")
    if low >= high:
        raise ValueError("low >= high")
    n = _size(shape)
    words = random_bits(key, 2 * n).astype(np.uint64)
    drawn = (words[:n] << 32) | words[n:]
    span = high - low
    if span & (span - 1) == 0:
        drawn = drawn & np.uint64((span - 1) % _U64)  # a power of two: the low bits, no bias
    else:
        drawn = drawn % np.uint64(span)
    # low + drawn in modulo-2**64 arithmetic: the cast keeps the low bits, where the value fits.
    return (drawn + np.uint64(low % _U64)).astype(dtype).reshape(shape)


def permutation(key, x):
    """A random permutation (numpy's ``Generator.permutation``): of ``arange(x)`` (int64)
    for an integer `x`, else a copy of the array `x` shuffled along its first axis. Each
    position gets a 64-bit random sort key; ties (probability about n**2 / 2**65) keep
    their order.

    Raises ValueError for a negative count, ShapeError for a 0-d array.

    >>> np.sort(kiln.random.permutation(kiln.random.key(0), 5))
    array([0, 1, 2, 3, 4])
    """
    _check_key(key, "permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        if x < 0:
            raise ValueError(f"kiln.random.permutation: negative count {x}")
        n, values = int(x), None
    else:
        values = x if isinstance(x, Tracer) else np.asarray(x)
        if values.ndim == 0:
            raise ShapeError("kiln.random.permutation: x must be an integer or at least 1-dimensional", user_location())
        n = values.shape[0]
    words = random_bits(key, 2 * n).astype(np.uint64)
    order = np.argsort((words[:n] << 32) | words[n:], kind="stable")
    if values is None:
        return order
    if isinstance(order, Tracer) and not isinstance(values, Tracer):
        values = lift(context_of([order]), values, values.dtype)  # a captured array: a constant of the trace
    return values[order]


def _check_key(key, fn: str) -> None:
    if not isinstance(key, (np.ndarray, Tracer)) or key.shape != (2,) or key.dtype != np.uint32:
        what = f"{key.dtype}{list(key.shape)}" if isinstance(key, (np.ndarray, Tracer)) else type(key).__name__
        raise ArgumentError(
            f"kiln.random.{fn} takes a key (uint32[2], from kiln.random.key(seed) or kiln.random.split) "
            f"as its first argument, got {what}",
            user_location(),
        )


def _shape(shape, fn: str) -> tuple:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    shape = tuple(operator.index(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"kiln.random.{fn}: negative dimensions are not allowed, got shape {shape}", user_location())
    return shape


def _shape_of(value) -> tuple:
    return value.shape if isinstance(value, Tracer) else np.shape(value)


def _check_broadcast(fn: str, shape: tuple, **parameters) -> None:
    """Parameters broadcast to the draw's shape, never the draw to theirs (numpy's `size`)."""
    for name, value in parameters.items():
        try:
            fits = np.broadcast_shapes(_shape_of(value), shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ShapeError(
                f"kiln.random.{fn}: {name} of shape {_shape_of(value)} does not broadcast to shape {shape}",
                user_location(),
            )


def _size(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _float_dtype(dtype, fn: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in _FLOATS:
        raise DTypeError(f"kiln.random.{fn}: dtype must be float16, float32 or float64, got {dtype}", user_location())
    return dtype


def _as_dtype(value, dtype):
    """A bound or parameter in the draw's dtype (a Python float would be weak anyway; an array
    of another float type must not promote the result)."""
    return value.astype(dtype) if isinstance(value, Tracer) else np.asarray(value, dtype)


def _unit(key, shape: tuple, dtype: np.dtype):
    """Floats in [0, 1) of `shape`: the top 11, 24 or 53 random bits of the dtype's mantissa,
    scaled by a power of two (exact), so each value is k * 2**-bits."""
    n = _size(shape)
    if dtype == np.float64:
        words = random_bits(key, 2 * n)
        high, low = (words[:n] >> 5).astype(np.float64), (words[n:] >> 6).astype(np.float64)
        unit = (high * np.float64(2**26) + low) * np.float64(2**-53)
    else:
        bits = 11 if dtype == np.float16 else 24
        unit = (random_bits(key, n) >> (32 - bits)).astype(np.float32) * np.float32(2.0**-bits)
    return unit.astype(dtype).reshape(shape)
