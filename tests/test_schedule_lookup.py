"""The schedule's short cuts stay right as steps rewrite the IR: finding a loop searches only
its kernel's nests, and a step is tried on a copy of only its kernel and what that reads."""

import numpy as np
import pytest

import kiln
from kiln.dialects import affine as A
from kiln.dialects import print_ir, verify
from kiln.passes import schedule as S


def affine_function(fn, *specs):
    return kiln.compile(fn).lower(*specs).module("affine").clone({}).body.ops[-1]


def first_loop_named(function, name):
    """What find_loop means: the first loop of that name in program order."""
    return next(op for op in function.walk() if isinstance(op, (A.ForOp, A.ParallelOp)) and A.loop_name(op) == name)


def all_loop_names(function) -> list:
    return [A.loop_name(op) for op in function.walk() if isinstance(op, (A.ForOp, A.ParallelOp))]


STEPS = [  # k0: tanh(y) * 2, k1: exp(x), k2: the matmul
    ("split", "k2.j", 4),
    ("reorder", ["k2.j.i", "k2.j.o"]),
    ("unroll", "k2.i", 3),  # copies of the loops inside, and a remainder: the first is the one found
    ("vectorize", "k0.j", 8),
    ("unroll_jam", "k0.i", 4),
    ("parallel", "k0.i.u"),
    ("tile", ["k1.i", "k1.j"], [2, 4]),
]


def test_find_loop_finds_what_a_walk_of_the_whole_function_finds_after_every_step():
    function = affine_function(lambda x, y: (np.exp(x) @ y, np.tanh(y) * 2), kiln.f32[5, 6], kiln.f32[6, 20])
    for step in STEPS:
        S.apply_step(function, step)
        assert len(all_loop_names(function)) > len(set(all_loop_names(function))) or step[0] != "unroll"
        for name in set(all_loop_names(function)):
            expected = first_loop_named(function, name)
            if isinstance(expected, A.ParallelOp):
                with pytest.raises(kiln.ScheduleError, match="already parallel"):
                    S.find_loop(function, name)
            else:
                assert S.find_loop(function, name) is expected, (step, name)


def test_a_loop_named_outside_its_kernels_nests_is_still_found():
    function = affine_function(lambda x: np.exp(x) + 1, kiln.f32[4, 8])
    inner = first_loop_named(function, "k0.j")
    A.set_loop_name(inner, "k7.j")  # a hand-written function may name its loops freely
    assert S.find_loop(function, "k7.j") is inner
    with pytest.raises(kiln.ScheduleError, match=r"no loop 'k0.j' \(loops of k0: k0.i\)"):
        S.find_loop(function, "k0.j")


def test_a_trial_copy_holds_its_kernel_and_what_it_reads_and_the_step_gives_the_same_ir():
    """k1 reads the sum k0's loop gives (a top-level loop with a result), and k2 reads k1's output."""
    fn = lambda x: np.tanh(x / x.sum() + 1) * 3  # noqa: E731
    function = affine_function(fn, kiln.f32[4, 20])
    kernels = {A.kernel_of(nest) for nest in S.kernels(function)}
    assert len(kernels) >= 2
    for kernel in sorted(kernels):
        step = ("vectorize", f"{kernel}.j" if f"{kernel}.j" in all_loop_names(function) else f"{kernel}.s", 8)
        trial = S.trial_copy(function, step)
        verify(trial)
        read = {A.kernel_of(op) for op in S.kernels(trial)} - {kernel}
        # Another kernel's nest is there only when its result is read (the sum).
        assert all(any(n.results for n in S.kernels(trial) if A.kernel_of(n) == k) for k in read), read
        S.apply_step(trial, step, atomic=False)
        S.apply_step(function, step)
        assert _nests_text(trial, kernel) == _nests_text(function, kernel)
    verify(function)
    compiled = kiln.compile(fn, schedule=[])
    x = np.random.default_rng(0).standard_normal((4, 20)).astype(np.float32)
    np.testing.assert_allclose(compiled(x), np.tanh(x / x.sum() + 1) * 3, rtol=1e-5, atol=1e-6)


def _nests_text(function, kernel) -> str:
    return "\n".join(print_ir(op) for op in S.kernels(function) if A.kernel_of(op) == kernel)


def test_a_refused_step_on_a_later_kernel_leaves_the_whole_function_as_it_was():
    function = affine_function(lambda x, y: (np.exp(x) @ y, np.tanh(y) * 2), kiln.f32[5, 6], kiln.f32[6, 20])
    before = print_ir(function)
    with pytest.raises(kiln.ScheduleError):
        S.apply_step(function, ("reorder", ["k2.r", "k2.j"]))  # r carries the sum
    assert print_ir(function) == before
