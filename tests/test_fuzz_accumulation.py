"""Differential fuzzing of float16 accumulations, a bounded run: kiln's sums, products,
means and matrix products of random float16 arrays and views, and ufunc.at with repeated
indices in several dtypes, have numpy's bits."""

from fuzz.accumulation import accumulations, at_updates, check_accumulation, check_at
from hypothesis import HealthCheck, given, settings


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(accumulations())
def test_random_float16_accumulations_have_numpys_bits(case):
    check_accumulation(*case)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(at_updates())
def test_random_ufunc_at_updates_with_repeated_indices_have_numpys_bits(case):
    check_at(*case)
