"""Memory plans: which intermediates share bytes of the arena, checked by running them.

A plan is not checked against its own rule. The planned program is run at the
affine and scheduled stages by the affine interpreter, which places every
buffer at its arena offset (buffers the plan overlaps overwrite each other as
in native code), and natively; both must give numpy's numbers. The programs
read one value through several views (transpose, reversed steps, slices,
reshapes, broadcasts, reductions, matmul), where reusing its buffer in place
would let a kernel read elements it has already overwritten.

Run longer than the bounded test: ``python tests/test_memory_plan.py --examples 2000``.
"""

import argparse
import re
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiln
from kiln.dialects import parse_ir, print_ir
from kiln.interpreters.affine_interpreter import run_affine
from kiln.passes.memory_plan import Buffer, MemoryPlan, plan
from kiln.passes.registry import run_passes

rng = np.random.default_rng(23)


def run_everywhere(fn, *args, interpret=True, rtol=1e-5):
    """Compile `fn`, run its planned affine and scheduled stages in the interpreter
    (unless `interpret` is false: big shapes) and natively; compare each with numpy.
    Returns the lowering, for looking at the plan."""
    want = fn(*args)
    want = list(want) if isinstance(want, tuple) else [want]
    compiled = kiln.compile(fn)
    lowered = compiled.lower(*args)
    runs = {"native": compiled(*args)}
    if interpret:
        for stage in ("affine", "scheduled"):
            runs[stage] = run_affine(lowered.module(stage), list(args))
    for where, got in runs.items():
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            w = np.asarray(w)
            scale = max(1.0, float(np.abs(w).max(initial=0.0)))
            np.testing.assert_allclose(
                np.asarray(g).reshape(w.shape), w, rtol=rtol, atol=rtol * scale, err_msg=f"{where} differs from numpy"
            )
    return lowered


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_an_input_read_through_its_transpose_is_not_overwritten_in_place():
    def f(x, w):
        e = np.exp(x)
        z = e + e.T
        return z @ w

    run_everywhere(f, normal(64, 64), normal(64, 64), interpret=False)
    lowered = run_everywhere(f, normal(8, 8), normal(8, 8))
    exp, add = [b.offset for b in lowered.memory_plan.buffers]
    assert exp != add


# Ways to read a square value `v` other than element for element: each gives
# an array that broadcasts against `v`.
READS = {
    "v.T": lambda v: v.T,
    "v[::-1]": lambda v: v[::-1],
    "v[:, ::-1]": lambda v: v[:, ::-1],
    "v[::-1, ::-1].T": lambda v: v[::-1, ::-1].T,
    "v.reshape(-1)[::-1].reshape(v.shape)": lambda v: v.reshape(-1)[::-1].reshape(v.shape),
    "v.reshape(-1).reshape(v.shape[::-1]).T": lambda v: v.reshape(-1).reshape(v.shape[::-1]).T,
    "v[:1]": lambda v: v[:1],
    "v[:, -1:]": lambda v: v[:, -1:],
    "np.broadcast_to(v[-1], v.shape)": lambda v: np.broadcast_to(v[-1], v.shape),
    "v[::2].sum(axis=0, keepdims=True)": lambda v: v[::2].sum(axis=0, keepdims=True),
    "v.max(axis=1, keepdims=True)": lambda v: v.max(axis=1, keepdims=True),
    "v @ v / len(v)": lambda v: v @ v / len(v),
}
# What computes `v` into a buffer of its own.
PRODUCERS = {"exp": lambda x: np.exp(x), "matmul": lambda x: x @ x.T / len(x)}


@pytest.mark.parametrize("n", [1, 2, 7])
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("read", READS)
def test_a_value_read_directly_and_through_another_view_keeps_its_elements(read, producer, n):
    def f(x, w):
        v = PRODUCERS[producer](x)
        return (v + READS[read](v)) @ w  # the sum is an intermediate the matmul reads

    run_everywhere(f, normal(n, n), normal(n, n))


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_the_rule_holds_for_other_element_types(dtype):
    def f(x, w):
        v = x @ w
        return (v - v.T) @ w

    x, w = (rng.integers(-9, 9, (7, 7)).astype(dtype) for _ in range(2))
    run_everywhere(f, x, w)


def test_a_result_with_wider_elements_never_overwrites_its_input():
    def f(x, w):
        v = x @ x
        return (v.astype(np.float64) * 2 + 1) @ w  # element k of the result spans elements 2k, 2k + 1 of v

    run_everywhere(f, normal(5, 5), rng.standard_normal((5, 5)))


@pytest.mark.parametrize("target", ["cpu", "interpret"])
def test_a_conversion_between_types_of_one_width_works_in_place(target):
    """The count (i64) converted to f64 takes the count's bytes, element by element."""

    def mean_of_rows_below_3(x):
        counts = np.sum(x < 3, axis=1)
        return np.sum(np.where(counts > 0, np.sum(x, axis=1) / counts, 0.0))

    x = np.array([[1.0, 0.3, 4.0, 2.0], [0.5, 1.5, 0.7, 3.0]])
    value, grad = kiln.compile(kiln.value_and_grad(mean_of_rows_below_3), target=target)(x)
    counts = np.sum(x < 3, axis=1)
    want = 1 / counts  # d/dx of (row sum / count)
    np.testing.assert_allclose(value, mean_of_rows_below_3(x))
    np.testing.assert_allclose(grad, np.broadcast_to(want[:, None], x.shape))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_arrays_with_no_elements(shape):
    def f(x, w):
        v = np.exp(x)
        return (v + v[::-1]) @ w

    run_everywhere(f, np.zeros(shape, np.float32), normal(shape[1], 2))


def test_a_value_read_through_views_by_two_kernels_lives_until_the_second():
    def f(x, w):
        e = np.exp(x)
        a = (e + 1) @ w
        b = np.tanh(a) @ w
        return (b + e[::-1]) @ w  # e's lifetime runs to here, through the reversed view

    run_everywhere(f, normal(5, 5), normal(5, 5))


def test_a_value_returned_through_a_view_is_never_overwritten():
    def f(x, w):
        e = np.exp(x)
        return (e * 3) @ w, e.T

    run_everywhere(f, normal(6, 6), normal(6, 6))


def test_elementwise_chains_still_work_in_place():
    def f(x, w):
        e = np.exp(x)
        return (np.tanh(e) * 2 + e / e.sum(axis=0, keepdims=True)) @ w

    lowered = run_everywhere(f, normal(4, 4), normal(4, 4))
    exp, column_sums, chain = lowered.memory_plan.buffers
    assert exp.offset == chain.offset != column_sums.offset  # the chain reads e element by element


def test_memory_plan_reuses_dead_buffers_and_works_in_place():
    module = parse_ir("""
        func.func @f(%x: tensor<256xf32>) -> tensor<256xf32> {
          %0 = kiln.exp %x : tensor<256xf32>
          %1 = kiln.neg %0 : tensor<256xf32>
          %2 = kiln.sqrt %1 : tensor<256xf32>
          %3 = kiln.tanh %2 : tensor<256xf32>
          func.return %3 : tensor<256xf32>
        }""")
    text = print_ir(run_passes(module, ["plan-memory"]), locations=False)
    assert (
        "func.func @f(%x: tensor<256xf32>) -> tensor<256xf32> attributes {arena_bytes = 1024, "
        "unplanned_bytes = 3072} {" in text
    )
    assert text.count("{arena_offset = 0}") == 3


def planned(text):
    module = run_passes(parse_ir(textwrap.dedent(text)), ["plan-memory"])
    return print_ir(module, locations=False)


def test_reads_through_a_view_keep_the_result_off_the_input():
    for view in (
        "%1 = kiln.transpose %0 {permutation = array<i64: 1, 0>} : tensor<16x16xf32>",
        "%1 = kiln.slice %0 {start = array<i64: 15, 0>, stop = array<i64: -1, 16>, "
        "step = array<i64: -1, 1>} : tensor<16x16xf32>",
    ):
        text = planned(f"""
            func.func @f(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<16x16xf32> {{
              %0 = kiln.exp %x : tensor<16x16xf32>
              {view}
              %2 = kiln.add %0, %1 : tensor<16x16xf32>
              %3 = kiln.matmul %2, %w : tensor<16x16xf32>
              func.return %3 : tensor<16x16xf32>
            }}""")
        assert "{arena_offset = 0}" in text and "{arena_offset = 1024}" in text, text


def test_conflicts_allow_in_place_only_at_the_same_offset():
    def pair(offset):
        dying = Buffer("%0", 128, 0, 1, offset=0)
        result = Buffer("%1", 128, 1, 2, offset=offset, in_place_of=["%0"])
        return MemoryPlan([dying, result], 128 + offset, 256)

    assert pair(0).conflicts() == []
    assert pair(64).conflicts() == [("%0", "%1")]  # writing element k would clobber element k + 16


ARENA_PROGRAM = """module {
  func.func @f(%x: memref<4xf32>, %out0: memref<4xf32>) {
    %0 = memref.alloc() {alignment = 64 : i64} : memref<32xi8>
    %1 = arith.constant SHIFT_A : index
    %2 = memref.view %0[%1][] : memref<32xi8> to memref<4xf32>
    %3 = arith.constant SHIFT_B : index
    %4 = memref.view %0[%3][] : memref<32xi8> to memref<4xf32>
    affine.for %i = 0 to 4 {
      %5 = affine.load %x[%i] : memref<4xf32>
      affine.store %5, %2[%i] : memref<4xf32>
    }
    affine.for %i = 0 to 4 {
      %6 = affine.load %4[%i] : memref<4xf32>
      affine.store %6, %out0[%i] : memref<4xf32>
    }
    memref.dealloc %0 : memref<32xi8>
    func.return
  }
}"""


def run_arena_program(shift_a, shift_b):
    text = ARENA_PROGRAM.replace("SHIFT_A", str(shift_a)).replace("SHIFT_B", str(shift_b))
    (out,) = run_affine(parse_ir(text), [np.array([1.5, -2.0, 3.25, 0.0], np.float32)])
    return out


def test_the_affine_interpreter_places_buffers_at_their_arena_offsets():
    np.testing.assert_array_equal(run_arena_program(0, 0), [1.5, -2.0, 3.25, 0.0])  # one buffer, two names
    np.testing.assert_array_equal(run_arena_program(0, 8), [3.25, 0.0, np.nan, np.nan])  # overlapping by half
    assert np.isnan(run_arena_program(0, 16)).all()  # bytes nobody wrote read as NaN


@pytest.mark.parametrize(
    "shift, problem",
    [
        (20, r"bytes \[20, 36\) is outside memref<32xi8>"),
        (-4, r"bytes \[-4, 12\) is outside"),
        (2, "at byte 2 is not aligned for f32"),
    ],
)
def test_the_affine_interpreter_refuses_a_view_outside_or_across_the_arena(shift, problem):
    with pytest.raises(kiln.OutOfBoundsError, match=problem):
        run_arena_program(0, shift)


def test_the_plan_is_visible_in_the_dump_and_in_code():
    def layers(x, w):
        h1 = np.tanh(x @ w)
        h2 = np.tanh(h1 @ w)
        h3 = np.tanh(h2 @ w)  # h1 is dead by now: h3 takes its place
        return h3 @ w

    lowered = kiln.compile(layers).lower(kiln.f32[16, 8], kiln.f32[8, 8])
    assert lowered.text("optimized").startswith(
        "// 4 kernels; memory plan: 3 buffers, arena 1024 bytes (without reuse 1536 bytes, 512 saved)\n"
    )
    memory = lowered.memory_plan
    assert (memory.arena_bytes, memory.unplanned_bytes) == (1024, 1536)
    assert [b.offset for b in memory.buffers] == [0, 512, 0]
    run_everywhere(layers, normal(16, 8), normal(8, 8))


def random_program(seed):
    """A random DAG of elementwise ops, broadcasts, row and column reductions and matmuls.
    Its shape is drawn here, before tracing: numpy's generators refuse to draw in a trace."""
    r = np.random.default_rng(seed)
    n, m = int(r.integers(1, 9)), int(r.integers(1, 9))
    steps = []
    for k in range(int(r.integers(3, 12))):
        steps.append((int(r.integers(3 + k)), int(r.integers(3 + k)), int(r.integers(8))))
    picks = [int(p) for p in r.choice(3 + len(steps), size=3, replace=False)]

    def program(x, row, col):
        values = [x, np.tanh(x), x * 2]
        for ia, ib, choice in steps:
            a, b = values[ia], values[ib]
            if choice == 0:
                values.append(a + b)
            elif choice == 1:
                values.append(np.exp(-a * a) * b)
            elif choice == 2:
                values.append(a - a.max(axis=1, keepdims=True))
            elif choice == 3:
                values.append(b / (1 + a.sum(axis=0, keepdims=True) ** 2))
            elif choice == 4:
                values.append(a * row + col)
            elif choice == 5:
                values.append(np.maximum(a, b) @ np.ones((m, m), np.float32) / m)
            elif choice == 6:
                values.append(np.where(a > 0, a, b))
            else:
                values.append((a.T @ b)[:1] + a)
        return tuple(values[p] for p in picks)

    args = (
        r.standard_normal((n, m)).astype(np.float32),
        r.standard_normal(m).astype(np.float32),
        r.standard_normal((n, 1)).astype(np.float32),
    )
    return program, args


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_plan_memory_without_overlap_and_keep_their_results(seed):
    program, args = random_program(seed)
    want = program(*args)
    program, _ = random_program(seed)  # the same choices again, for tracing
    lowered = kiln.compile(program).lower(*args)
    function = lowered.module("optimized").body.ops[0]
    checked = plan(function)
    assert checked.conflicts() == [] and checked.arena_bytes <= checked.unplanned_bytes
    program, _ = random_program(seed)
    got = kiln.compile(program)(*args)
    for stage in ("affine", "scheduled"):
        interpreted = run_affine(lowered.module(stage), list(args))
        for g, i, w in zip(got, interpreted, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(i, w, rtol=1e-4, atol=1e-4)


# -- programs that read values through several views, drawn by hypothesis ------------------

COMBINE = {
    "a + b": lambda a, b, n: a + b,
    "a - b": lambda a, b, n: a - b,
    "a * b": lambda a, b, n: a * b,
    "np.maximum(a, b)": lambda a, b, n: np.maximum(a, b),
    "np.where(a > b, a, b)": lambda a, b, n: np.where(a > b, a, b),
    "np.tanh(a) + b": lambda a, b, n: np.tanh(a) + b,
    "np.broadcast_to(a, (n, n)) @ np.broadcast_to(b, (n, n)) / n": lambda a, b, n: (
        np.broadcast_to(a, (n, n)) @ np.broadcast_to(b, (n, n)) / n
    ),
}
ALL_READS = {"v": lambda v: v, **READS}


@st.composite
def view_programs(draw):
    """(n, steps, outputs) over n x n values: value 0 is the input x, value 1 exp(x),
    value k + 2 step k's result. A step is (combine, (value, read), (value, read), then
    a matmul by w or not); an output is (value, read)."""
    n = draw(st.sampled_from([1, 2, 3, 5, 7]))
    reads = st.sampled_from(sorted(ALL_READS))
    steps = []
    for k in range(draw(st.integers(1, 6))):
        # Mostly one value read twice, once element for element, and a result that a
        # matmul reads from memory: where reusing a buffer in place can go wrong.
        i = draw(st.integers(0, k + 1))
        j = draw(st.one_of(st.just(i), st.just(i), st.just(i), st.integers(0, k + 1)))
        read_a = draw(st.one_of(st.just("v"), reads))
        then_matmul = draw(st.one_of(st.just(True), st.booleans()))
        steps.append((draw(st.sampled_from(sorted(COMBINE))), (i, read_a), (j, draw(reads)), then_matmul))
    last = len(steps) + 1
    outputs = [(last, "v")] + draw(st.lists(st.tuples(st.integers(1, last), reads), max_size=2))
    return n, steps, outputs


def build(steps, outputs):
    def program(x, w):
        n = len(x)
        values = [x, np.exp(x)]
        for combine, (i, read_a), (j, read_b), then_matmul in steps:
            value = np.broadcast_to(
                COMBINE[combine](ALL_READS[read_a](values[i]), ALL_READS[read_b](values[j]), n), (n, n)
            )
            values.append(value @ w if then_matmul else value)
        return tuple(ALL_READS[read](values[i]) for i, read in outputs)

    return program


def source(steps, outputs) -> str:
    """The program as numpy code, to show with a failing example."""

    def read(i, how):
        return re.sub(r"\bv\b", f"v{i}", how)

    lines = ["v0 = x", "v1 = np.exp(x)"]
    for k, (combine, (i, read_a), (j, read_b), then_matmul) in enumerate(steps):
        operands = {"a": read(i, read_a), "b": read(j, read_b)}
        value = re.sub(r"\b[ab]\b", lambda m: operands[m.group()], combine)
        lines.append(f"v{k + 2} = ({value}) @ w" if then_matmul else f"v{k + 2} = {value}")
    lines.append("return " + ", ".join(read(i, how) for i, how in outputs))
    return "\n".join(lines)


def check_view_program(n, steps, outputs):
    program = build(steps, outputs)
    try:
        run_everywhere(program, normal(n, n), normal(n, n), rtol=1e-4)
    except AssertionError as error:
        raise AssertionError(f"n = {n}\n{source(steps, outputs)}\n{error}") from None


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(view_programs())
def test_programs_reading_values_through_several_views_give_numpys_numbers(program):
    check_view_program(*program)


def main():
    parser = argparse.ArgumentParser(description="Run the memory-plan fuzzing for longer.")
    parser.add_argument("--examples", type=int, default=500, help="how many programs to try")
    examples = parser.parse_args().examples

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(view_programs())
    def long_run(program):
        check_view_program(*program)

    long_run()
    print(f"{examples} programs: the native code and the interpreted plan gave numpy's numbers")


if __name__ == "__main__":
    main()
