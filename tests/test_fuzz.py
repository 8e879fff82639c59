"""Differential fuzzing, a bounded run: random tensor programs compiled by kiln give
numpy's numbers (tests/fuzz/run.py runs the same check for as long as you like)."""

import shutil

import numpy as np
import pytest
from fuzz.programs import DTYPES, Input, check, check_concurrently, check_gradient, compare, program_of, programs
from fuzz.schedules import check_schedule
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# every dtype, scalar arguments, views, size-0 dimensions, NaN/inf/-0.0/huge values and integer limits
EVERYTHING = programs(dtypes=DTYPES, mixed=True, views=True, scalars=True, specials=True, empty=True)
INTEGERS = tuple(d for d in DTYPES if d.kind in "iub")
F32, F64, I32, I64 = (np.dtype(d) for d in (np.float32, np.float64, np.int32, np.int64))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_compile_to_numpys_numbers(program, seed):
    check(program, seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(EVERYTHING, st.integers(0, 2**32 - 1))
def test_random_programs_of_every_dtype_layout_and_special_value_give_numpys_numbers(program, seed):
    check(program, seed)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.lists(EVERYTHING, min_size=4, max_size=4), st.integers(0, 2**32 - 1))
def test_random_programs_traced_and_run_from_four_threads_at_once_give_numpys_numbers(batch, seed):
    check_concurrently([(program, seed + k) for k, program in enumerate(batch)])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(dtypes=(np.float64,), smooth=True, views=True, empty=True), st.integers(0, 2**32 - 1))
def test_gradients_of_random_programs_match_finite_differences(program, seed):
    check_gradient(program, seed)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the CUDA host emulation")
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(EVERYTHING, st.integers(0, 2**32 - 1))
def test_random_programs_give_numpys_numbers_through_the_cuda_backend(program, seed):
    check(program, seed, target="cuda-emulate")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler (g++) for the CUDA host emulation")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(dtypes=INTEGERS, mixed=True, views=True, specials=True), st.integers(0, 2**32 - 1))
def test_integer_programs_at_their_limits_wrap_like_numpy_through_the_cuda_backend(program, seed):
    check(program, seed, target="cuda-emulate")


def test_python_ints_past_narrow_dtypes_give_numpys_answer_or_its_overflow_error():
    """Awkward Python int arguments meet uint8 and int16 arrays: comparisons answer exactly,
    arithmetic either gives numpy's numbers or raises numpy's OverflowError."""
    outcomes = {}
    for dtype in (np.uint8, np.int16):
        for name in ("greater", "less_equal", "add", "multiply"):
            inputs = [Input((5,), np.dtype(dtype), fill="special"), Input((), I64, form="python", fill="special")]
            program = program_of(inputs, [(name, [0, 1], {})])
            for seed in range(8):
                outcomes.setdefault(name, set()).add(check(program, seed))
    assert outcomes["greater"] == outcomes["less_equal"] == {"checked"}, outcomes
    assert outcomes["add"] == outcomes["multiply"] == {"checked", "overflow"}, outcomes


# The faults of issue 13, written as fuzzer programs: each must now give numpy's numbers.
ISSUE_PROGRAMS = {
    "reuse_through_transpose": (
        [Input((5, 5), F64), Input((5, 3), F64)],  # e = exp(x); (e + e.T) @ w
        [("exp", [0], {}), ("plus_transpose", [2], {}), ("matmul", [3, 1], {})],
    ),
    "plus_zero_keeps_sign": ([Input((7,), F32, fill="special")], [("add_c", [0], {"c": 0.0})]),
    "zero_row_is_not_a_splat": (
        [Input((4, 2), F64, fill="special")],
        [("add_row", [0], {"row": (0.0, -0.0), "dtype": "float64"})],
    ),
    "int32_square_wraps": (
        [Input((7,), I32, fill="special")],
        [("square", [0], {}), ("sum", [1], {"axis": None, "keepdims": False})],
    ),
    "int64_negative_wraps": ([Input((2, 3), I64, layout="reversed", fill="special")], [("negative", [0], {})]),
    "empty_sum": ([Input((0, 3), F32)], [("sum", [0], {"axis": 0, "keepdims": False})]),
    "ufunc_of_python_scalar_is_strong": (
        [Input((3,), I32), Input((), I64, form="python")],
        [("add", [1, 1], {}), ("add", [0, 2], {})],
    ),
}


@pytest.mark.parametrize(
    "target",
    [
        "cpu",
        pytest.param(
            "cuda-emulate",
            marks=pytest.mark.skipif(
                shutil.which("g++") is None, reason="no C++ compiler (g++) for the CUDA host emulation"
            ),
        ),
    ],
)
@pytest.mark.parametrize("name", sorted(ISSUE_PROGRAMS))
def test_the_fuzzers_findings_stay_fixed(name, target):
    program = program_of(*ISSUE_PROGRAMS[name])
    for seed in range(3):
        assert check(program, seed, target) == "checked"


@pytest.mark.parametrize(
    "got, why",
    [
        (np.array([0.0, 1.0, np.nan, np.inf], np.float32), "a zero of the wrong sign"),
        (np.array([-0.0, 1.001, np.nan, np.inf], np.float32), "a float32 off by 1e-3"),
        (np.array([-0.0, 1.0, 1.0, np.inf], np.float32), "a number for NaN"),
        (np.array([-0.0, 1.0, np.nan, -np.inf], np.float32), "an infinity of the wrong sign"),
        (np.array([-0.0, 1.0, np.nan, np.inf], np.float64), "the wrong dtype"),
    ],
)
def test_the_comparison_refuses_what_numpy_would_not_give(got, why):
    want = [np.array([-0.0, 1.0, np.nan, np.inf], np.float32)]
    with pytest.raises(AssertionError):
        compare(got, want, [np.zeros(4)], [np.zeros(4, bool)], why)
    compare(want[0].copy(), want, [np.zeros(4)], [np.zeros(4, bool)], "the same numbers")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_legal_schedules_keep_numpys_numbers(program, seed):
    check_schedule(program, seed)
