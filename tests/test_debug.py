"""Debug mode: bounds-checked native code that gives the same numbers, a planted
out-of-bounds access caught with the kernel and the user's line, and a planted
NaN reported at the op and line that made it."""

import re

import numpy as np
import pytest
from op_table import CASES
from planted import plant_split_without_partial_tiles
from test_ops import assert_same

import kiln


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_debug_builds_give_numpys_numbers(case):
    assert_same(kiln.compile(case.fn, debug=True)(*case.args), case.fn(*case.args))


def test_debug_builds_check_every_access_and_normal_builds_do_not():
    f = lambda x: np.tanh(x) * 3.0  # noqa: E731
    # before LLVM's optimizer, which deletes the checks it can prove always pass
    checked = kiln.compile(f, debug=True).lower(kiln.f32[100]).pipeline.llvm_ir()
    plain = kiln.compile(f).lower(kiln.f32[100]).pipeline.llvm_ir()
    status_code = re.compile(r"\bi32 10\d\d\b")  # OUT_OF_BOUNDS + the access's number
    assert status_code.search(checked) and not status_code.search(plain)


def log_then_scale(x):
    y = np.log(x)  # the planted NaN: log of a negative number
    return y * 2.0


def test_a_nan_is_reported_at_the_op_and_line_that_made_it():
    f = kiln.compile(log_then_scale, debug=True)
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), 2 * np.log([1.0, 2.0]))
    with pytest.raises(kiln.NonFiniteError) as info:
        f(np.array([1.0, -2.0, 3.0]))
    message = str(info.value)
    assert "test_debug.py:" in message and "kiln.log produced NaN (first at index (1,))" in message
    assert "y = np.log(x)" in message
    assert isinstance(info.value, FloatingPointError)


def test_nans_in_the_inputs_are_not_blamed_on_kiln():
    f = kiln.compile(log_then_scale, debug=True)
    out = f(np.array([np.nan, 1.0]))
    assert np.isnan(out[0]) and out[1] == 0.0


def test_without_debug_a_nan_is_just_returned():
    out = kiln.compile(log_then_scale, debug=False)(np.array([-1.0]))
    assert np.isnan(out[0])


def test_kiln_debug_environment_variable_turns_it_on(monkeypatch):
    monkeypatch.setenv("KILN_DEBUG", "1")
    with pytest.raises(kiln.NonFiniteError):
        kiln.compile(log_then_scale)(np.array([-1.0]))


def test_a_planted_out_of_bounds_access_is_caught_not_performed(monkeypatch):
    plant_split_without_partial_tiles(monkeypatch)
    schedule = kiln.Schedule().split("k0.i", 4)
    f = kiln.compile(lambda x: np.tanh(x) * 3.0, debug=True, schedule=schedule)
    with pytest.raises(kiln.OutOfBoundsError) as info:
        f(np.ones(7))
    message = str(info.value)
    assert (
        "kernel k0 (computing kiln.tanh, kiln.constant, kiln.broadcast_to, kiln.mul): "
        "affine.load outside memref<7xf64>" in message
    )
    assert "test_debug.py:" in message and "kiln bisect" in message
