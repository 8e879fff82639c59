"""A traced index outside its axis raises OutOfBoundsError when the compiled function runs,
as numpy raises IndexError: for every form of indexing that takes an index array, on
every target. The oracle is numpy: the same function run on numpy arrays gives the
values for indices in range (negative ones too), and for one out of range the axis and
size its IndexError names, which kiln's error must name as well, with the user's line."""

import os
import re

import numpy as np
import pytest
from targets import NEEDS_CXX

import kiln
from kiln.interpreters.affine_interpreter import run_affine

TARGETS = ["cpu", "interpret", pytest.param("cuda-emulate", marks=NEEDS_CXX)]
HUGE = 2**62


def _line(marker: str) -> int:
    """The line of this file that ends with the comment `# marker`."""
    with open(__file__) as source:
        return next(n for n, text in enumerate(source, 1) if text.rstrip().endswith(f"# {marker}"))


def gather(x, i):
    return x[i] * 2.0  # gather


def gather_mixed(x, i, j):
    return x[i, 1:, j]  # gather_mixed


def gather_after_none(x, i):
    return x[None, :, i]  # gather_after_none


def assign(x, i, v):
    y = x.copy()
    y[i] = v  # assign
    return y


def add_assign(x, i, v):
    y = x.copy()
    y[:, i] += v  # add_assign
    return y


def take(x, i):
    return np.take(x, i, axis=1)  # take


def take_flat(x, i):
    return np.take(x, i)  # take_flat


def take_along(x, i):
    return np.take_along_axis(x, i, axis=1)  # take_along


def put(x, i, v):
    y = x.copy()
    np.put(y, i, v)  # put
    return y


def add_at(x, i, v):
    y = x.copy()
    np.add.at(y, (slice(None), i), v)  # add_at
    return y


_rng = np.random.default_rng(7)
X2 = _rng.standard_normal((4, 5)).astype(np.float32)
X3 = _rng.standard_normal((3, 4, 6))


# (function, arguments before the index, the index in range, arguments after it,
#  where the bad value goes in the index, the axis size it must stay within)
FORMS = {
    "gather": (gather, [X2[0]], np.array([0, -1, 4, -5, 2]), [], (2,), 5),
    "gather_int32": (gather, [X2[0]], np.array([3, -2, 0], np.int32), [], (1,), 5),
    "gather_mixed": (gather_mixed, [X3, np.array([[0], [-3], [2]])], np.array([5, -6, 0, 3]), [], (1,), 6),
    "gather_after_none": (gather_after_none, [X2], np.array([[4, -5], [1, 0]]), [], (1, 0), 5),
    "assign": (assign, [X2[1]], np.array([1, -1, 3]), [np.float32(7.0)], (1,), 5),
    "add_assign": (add_assign, [X2], np.array([0, 4, -2, 0]), [np.ones(4, np.float32)], (2,), 5),
    "take": (take, [X2], np.array([[4, -5], [2, 1]]), [], (0, 1), 5),
    "take_flat": (take_flat, [X2], np.array([19, -20, 7]), [], (1,), 20),
    "take_along": (take_along, [X2], np.array([[0, -1], [4, 2], [-5, 3], [1, 1]]), [], (2, 1), 5),
    "put": (put, [X2], np.array([0, 19, -20, 5]), [np.float32(3.0)], (2,), 20),
    "add_at": (add_at, [X2], np.array([0, 4, 0, -1]), [np.float32(1.0)], (1,), 5),
}


def _arguments(form, index):
    fn, before, _, after, _, _ = FORMS[form]
    if form == "gather_mixed":  # the first index array stays valid, the second takes the bad value
        return [before[0], before[1], index]
    return [*before, index, *after]


def _numpy_refusal(fn, args) -> str:
    """numpy's 'for axis k with size n' for an out-of-range index (its IndexError)."""
    with pytest.raises(IndexError) as refused:
        fn(*[np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args])
    return re.search(r"out of bounds for axis \d+ with size \d+", str(refused.value)).group(0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", FORMS)
def test_indices_in_range_give_numpy_values(form, target):
    fn, _, index, _, _, _ = FORMS[form]
    args = _arguments(form, index)
    np.testing.assert_array_equal(kiln.compile(fn, target=target)(*args), fn(*args))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bad", ["size", "below", "huge"])
@pytest.mark.parametrize("form", FORMS)
def test_an_index_out_of_range_raises_naming_axis_size_and_line(form, bad, target):
    fn, _, index, _, at, size = FORMS[form]
    wrong = index.astype(np.int64)
    wrong[at] = {"size": size, "below": -size - 1, "huge": HUGE}[bad]
    wrong = wrong.astype(index.dtype) if bad != "huge" else wrong
    args = _arguments(form, wrong)
    expected = _numpy_refusal(fn, args)
    assert expected.endswith(f"with size {size}")
    compiled = kiln.compile(fn, target=target)
    with pytest.raises(kiln.OutOfBoundsError, match=expected) as raised:
        compiled(*args)
    assert isinstance(raised.value, IndexError)
    assert os.path.samefile(raised.value.loc.file, __file__) and raised.value.loc.line == _line(fn.__name__)
    good = _arguments(form, index)  # the function stays usable
    np.testing.assert_array_equal(compiled(*good), fn(*good))


@pytest.mark.parametrize("mode", ["wrap", "clip"])
def test_take_wrap_and_clip_do_not_check(mode):
    x, index = X2, np.array([[7, -9], [2, 1003]])  # numpy's 'wrap' subtracts the size in a loop: no HUGE

    def f(x, i):
        return np.take(x, i, axis=1, mode=mode)

    for target in ("cpu", "interpret"):
        np.testing.assert_array_equal(kiln.compile(f, target=target)(x, index), f(x, index))


def test_the_affine_interpreter_raises_at_the_users_line_before_and_after_scheduling():
    index = np.array([0, -1, 4, -5, 2])
    lowered = kiln.compile(gather).lower(X2[0], index)
    bad = index.copy()
    bad[3] = 5
    for stage in ("affine", "scheduled"):
        np.testing.assert_array_equal(run_affine(lowered.module(stage), [X2[0], index])[0], gather(X2[0], index))
        with pytest.raises(kiln.OutOfBoundsError, match="out of bounds for axis 0 with size 5") as raised:
            run_affine(lowered.module(stage), [X2[0], bad])
        assert raised.value.loc.line == _line("gather")


@pytest.mark.parametrize("schedule", ["vectorize", "parallel"])
def test_vectorized_and_parallel_checks_raise(schedule):
    """A vectorized check asserts every lane; a parallel one reports from whichever thread."""
    steps = kiln.Schedule().vectorize("k0.i", 4) if schedule == "vectorize" else kiln.Schedule().parallel("k0.i")
    compiled = kiln.compile(gather, schedule=steps)
    index = np.arange(18) % 5 - 2
    np.testing.assert_array_equal(compiled(X2[0], index), gather(X2[0], index))
    for k in (0, 9, 17):  # a vector lane, the middle, the scalar remainder
        bad = index.copy()
        bad[k] = 5
        with pytest.raises(kiln.OutOfBoundsError, match="out of bounds for axis 0 with size 5"):
            compiled(X2[0], bad)
    np.testing.assert_array_equal(compiled(X2[0], index), gather(X2[0], index))


def test_the_check_is_in_the_ir_at_the_users_line_and_survives_the_graph_passes():
    lowered = kiln.compile(gather).lower(X2[0], np.array([0, 1]))
    for stage in ("tensor", "optimized"):
        assert "kiln.check_index" in lowered.text(stage) and "size = 5, axis = 0" in lowered.text(stage)
    scheduled = lowered.text("scheduled")
    assert re.search(
        rf'cf\.assert %\w+, "index is out of bounds for axis 0 with size 5" loc\(".*":{_line("gather")}:', scheduled
    )


def test_a_constant_index_is_still_refused_while_tracing():
    with pytest.raises(kiln.OutOfBoundsError, match="index 5 is out of bounds for axis 0 with size 5"):
        kiln.compile(lambda x: x[np.array([0, 5])])(X2[0])


def test_any_traced_index_into_an_empty_axis_is_refused_while_tracing():
    with pytest.raises(kiln.OutOfBoundsError, match="axis 0 with size 0"):
        kiln.compile(assign)(np.zeros(0, np.float32), np.array([0]), np.float32(1.0))


def test_gradient_of_a_gather_with_indices_in_range_matches_finite_differences():
    index = np.array([[0, -1], [4, 2], [-5, 3], [1, 1]])
    weights = _rng.standard_normal((4, 2))

    def loss(x, i):
        return np.sum(np.take_along_axis(x, i, axis=1) ** 2 * weights) + np.sum(np.tanh(x[:, i[:, 0]]))

    x = X2.astype(np.float64)
    grad = kiln.grad(loss)(x, index)
    eps, numeric = 1e-6, np.zeros_like(x)
    for position in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[position] += eps
        down[position] -= eps
        numeric[position] = (loss(up, index) - loss(down, index)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
