"""Fuzzing kiln.random: draws of random shapes, dtypes and bounds, compiled, have numpy's
dtype and shape and stay in range, give the bits numpy computes from the same key, repeat for
one key and differ across keys."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiln

R = kiln.random
SHAPES = st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple)
FLOATS = st.sampled_from([np.float16, np.float32, np.float64]).map(np.dtype)
INTEGERS = st.sampled_from([np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64]).map(np.dtype)


@st.composite
def draws(draw):
    """(a function of a key, a check of its result, whether two keys can give equal results)."""
    kind = draw(st.sampled_from(["uniform", "normal", "bernoulli", "randint", "permutation"]))
    shape = draw(SHAPES)
    size = int(np.prod(shape))
    if kind == "uniform":
        dtype = draw(FLOATS)
        lo = draw(st.floats(-100, 100, width=16))
        hi = lo + draw(st.floats(1, 100, width=16))
        bounds = np.asarray(lo, dtype), np.asarray(hi, dtype)  # the interval in the draw's dtype
        return (
            lambda key: R.uniform(key, shape, dtype, lo, hi),
            lambda r: r.dtype == dtype and r.shape == shape and np.all((r >= bounds[0]) & (r < bounds[1])),
            size >= 4,
        )
    if kind == "normal":
        dtype = draw(FLOATS)
        return (
            lambda key: R.normal(key, shape, dtype),
            lambda r: r.dtype == dtype and r.shape == shape and np.all(np.abs(r) < 9),
            size >= 4,
        )
    if kind == "bernoulli":
        p = draw(st.floats(0.25, 0.75))
        return lambda key: R.bernoulli(key, p, shape), lambda r: r.dtype == bool and r.shape == shape, size >= 64
    if kind == "randint":
        dtype = draw(INTEGERS)
        info = np.iinfo(dtype)
        low = draw(st.integers(int(info.min), int(info.max) - 1))
        high = draw(st.integers(low + 1, int(info.max) + 1))
        distinct = size >= 64 and high - low >= 2 or size >= 4 and high - low >= 2**16
        return (
            lambda key: R.randint(key, low, high, shape, dtype),
            lambda r: r.dtype == dtype and r.shape == shape and np.all((r >= low) & (r < high)),
            distinct,
        )
    n = draw(st.integers(0, 12))
    return lambda key: R.permutation(key, n), lambda r: sorted(r.tolist()) == list(range(n)), n >= 8


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(draws(), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_random_draws_are_in_range_repeat_per_key_and_differ_across_keys(case, seed, other):
    fn, valid, distinct = case
    compiled = kiln.compile(fn)
    key, other_key = R.key(seed), R.key(other)
    result = compiled(key)
    assert valid(result)
    assert result.tobytes() == fn(key).tobytes()  # numpy, running the same uint32 arithmetic
    assert result.tobytes() == compiled(key).tobytes()
    if distinct and seed != other:
        assert compiled(other_key).tobytes() != result.tobytes()
