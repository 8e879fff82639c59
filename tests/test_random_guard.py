"""np.random refuses to draw while a function is traced (its numbers would be frozen into the
compiled code): module functions, a captured Generator or RandomState, and a bit generator's
raw output raise UnsupportedError at the user's line, naming kiln.random's replacement;
outside the trace, and in other threads during it, numpy's random numbers are numpy's."""

import functools
import threading

import numpy as np
import pytest

import kiln

CAPTURED = np.random.default_rng(0)
LEGACY = np.random.RandomState(0)


@pytest.mark.parametrize(
    "draw, named, instead",
    [
        (lambda x: x * (np.random.rand(*x.shape) > 0.5), "np.random.rand()", "kiln.random.uniform"),
        (lambda x: x + np.random.randn(3), "np.random.randn()", "kiln.random.normal"),
        (lambda x: x + np.random.random(3), "np.random.random()", "kiln.random.uniform"),
        (lambda x: x + np.random.normal(0, 1, 3), "np.random.normal()", "kiln.random.normal"),
        (lambda x: x + np.random.randint(0, 5, 3), "np.random.randint()", "kiln.random.randint"),
        (lambda x: x[np.random.permutation(3)], "np.random.permutation()", "kiln.random.permutation"),
        (lambda x: x + np.random.binomial(1, 0.5, 3), "np.random.binomial()", "kiln.random.bernoulli"),
        (lambda x: x + np.random.exponential(1.0, 3), "np.random.exponential()", "kiln.random.uniform or"),
        (lambda x: (np.random.seed(0), x)[1], "np.random.seed()", "kiln.random.key(seed)"),
        (lambda x: x + np.random.default_rng(1).random(3), "np.random.default_rng()", "kiln.random.key(seed)"),
        (lambda x: x + CAPTURED.random(3), "np.random.Generator.random()", "kiln.random.uniform"),
        (lambda x: x + CAPTURED.normal(size=3), "np.random.Generator.normal()", "kiln.random.normal"),
        (lambda x: x + CAPTURED.integers(0, 9, 3), "np.random.Generator.integers()", "kiln.random.randint"),
        (lambda x: CAPTURED.permutation(x), "np.random.Generator.permutation()", "kiln.random.permutation"),
        (lambda x: x + LEGACY.randn(3), "np.random.RandomState.randn()", "kiln.random.normal"),
        (lambda x: x + CAPTURED.bit_generator.random_raw(), "np.random.BitGenerator.random_raw()", "kiln.random"),
    ],
)
def test_drawing_with_numpy_while_tracing_raises_at_the_users_line(draw, named, instead):
    with pytest.raises(kiln.UnsupportedError) as info:
        kiln.compile(draw)(np.ones(3))
    message = str(info.value)
    assert message.startswith(f"tests/test_random_guard.py:{_line_of(draw)}:"), message
    assert named in message and instead in message and "same numbers on every call" in message


def _line_of(fn):
    return fn.__code__.co_firstlineno


def test_gradient_traces_refuse_too():
    def loss(x):
        return np.sum(x * np.random.rand(3))

    with pytest.raises(kiln.UnsupportedError, match="np.random.rand"):
        kiln.compile(kiln.grad(loss))(np.ones(3))


def test_numpy_draws_as_before_once_the_trace_ends_even_with_an_error():
    originals = (np.random.rand, np.random.Generator.__dict__["random"], np.random.RandomState.__dict__["randn"])
    want = np.random.default_rng(7).random(4), np.random.RandomState(7).randn(2)
    with pytest.raises(kiln.UnsupportedError):
        kiln.compile(lambda x: x + CAPTURED.random(3))(np.ones(3))
    assert kiln.compile(lambda x: x + 1)(np.ones(2)).tolist() == [2.0, 2.0]
    assert (
        np.random.rand,
        np.random.Generator.__dict__["random"],
        np.random.RandomState.__dict__["randn"],
    ) == originals
    assert np.array_equal(np.random.default_rng(7).random(4), want[0])
    assert np.array_equal(np.random.RandomState(7).randn(2), want[1])


def test_other_threads_draw_from_numpy_while_one_traces():
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def traced(x):
        inside.set()  # the trace is running (and numpy's functions are wrapped) until released
        release.wait(30)
        return x * 2

    def trace():
        seen["result"] = kiln.compile(traced)(np.ones(2))

    worker = threading.Thread(target=trace)
    worker.start()
    try:
        assert inside.wait(30)
        assert hasattr(np.random.Generator.__dict__["random"], "__wrapped__")  # numpy's methods are wrapped now
        seen["generator"] = np.random.default_rng(3).random(3)
        seen["legacy"] = np.random.RandomState(3).rand(2)
        seen["captured"] = np.random.default_rng(0).normal(size=2)
    finally:
        release.set()
        worker.join(30)
    assert seen["result"].tolist() == [2.0, 2.0]
    assert not hasattr(np.random.Generator.__dict__["random"], "__wrapped__")
    assert np.array_equal(seen["generator"], np.random.default_rng(3).random(3))
    assert np.array_equal(seen["legacy"], np.random.RandomState(3).rand(2))
    assert np.array_equal(seen["captured"], np.random.default_rng(0).normal(size=2))


def test_a_trace_that_ends_in_one_thread_leaves_another_threads_trace_guarded():
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def traced(x):
        inside.set()
        release.wait(30)
        return x + CAPTURED.random(2)  # after the other thread's trace has ended

    def trace():
        try:
            kiln.compile(traced)(np.ones(2))
        except kiln.UnsupportedError as exc:
            seen["error"] = str(exc)

    worker = threading.Thread(target=trace)
    worker.start()
    try:
        assert inside.wait(30)
        assert kiln.compile(lambda x: x - 1)(np.ones(2)).tolist() == [0.0, 0.0]  # a whole trace here
    finally:
        release.set()
        worker.join(30)
    assert "np.random.Generator.random()" in seen["error"]


# Methods bound before tracing are objects of their own: caught by the generators' states.
BOUND_NORMAL = np.random.default_rng(3).normal
BOUND_RAND = np.random.rand  # numpy's module function is itself a method bound to its global RandomState
BOUND_RAW = np.random.PCG64(5).random_raw
NOISE = functools.partial(functools.partial(np.random.default_rng(8).normal, 0.0), size=3)


def _noisy_helper(x):
    return x + BOUND_NORMAL(size=x.shape)


def _make_closure():
    from numpy.random import randn

    return lambda x: x + randn(3)


@pytest.mark.parametrize(
    "draw, bound",
    [
        (lambda x: x + BOUND_NORMAL(size=3), "BOUND_NORMAL"),
        (lambda x: x * (BOUND_RAND(3) > 0.5), "BOUND_RAND"),
        (lambda x: x + BOUND_RAW(3), "BOUND_RAW"),
        (lambda x: x + NOISE(), "NOISE"),  # functools.partial of a bound method
        (lambda x: _noisy_helper(x) * 2, "BOUND_NORMAL"),  # in a function the traced one calls
        (_make_closure(), "randn"),  # a closure cell
        (lambda x, draw=np.random.default_rng(4).random: x + draw(3), "draw"),  # a default argument
    ],
)
def test_a_method_bound_before_tracing_is_refused_when_the_trace_ends(draw, bound):
    with pytest.raises(kiln.UnsupportedError) as info:
        kiln.compile(draw)(np.ones(3))
    message = str(info.value)
    assert message.startswith(f"tests/test_random_guard.py:{_line_of(draw)}:"), message
    # (a bound method that calls another of its generator's methods is refused at that call)
    assert repr(bound) in message or "was called while tracing" in message, message
    assert "same numbers on every call" in message and "kiln.random" in message


def test_a_bound_method_the_trace_does_not_call_is_no_error():
    def scaled(x, noisy=False):
        return _noisy_helper(x) if noisy else x * 2

    f = kiln.compile(scaled, static_argnames="noisy")
    before = BOUND_NORMAL(size=2)  # drawing between traces is numpy's business
    np.testing.assert_array_equal(f(np.arange(3.0)), np.arange(3.0) * 2)
    assert before.shape == (2,)
    with pytest.raises(kiln.UnsupportedError, match="BOUND_NORMAL"):
        f(np.arange(3.0), noisy=True)
