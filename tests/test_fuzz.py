"""Differential fuzzing, a bounded run: random tensor programs compiled by kiln give
numpy's numbers (tests/fuzz/run.py runs the same check for as long as you like)."""
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.programs import check, check_gradient, check_schedule, programs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_compile_to_numpys_numbers(program, seed):
    check(program, seed)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(dtypes=(np.float64,), smooth=True), st.integers(0, 2**32 - 1))
def test_gradients_of_random_programs_match_finite_differences(program, seed):
    check_gradient(program, seed)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the CUDA host emulation")
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_give_numpys_numbers_through_the_cuda_backend(program, seed):
    check(program, seed, target="cuda-emulate")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_legal_schedules_keep_numpys_numbers(program, seed):
    check_schedule(program, seed)
