"""Schedule primitives: results unchanged on sizes no factor divides, steps that
print and replay, and clear refusals of illegal steps."""

import re

import numpy as np
import pytest

import kiln
from kiln import Schedule, ScheduleError
from kiln.codegen import llvm_target
from kiln.dialects import print_ir
from kiln.passes.default_schedule import matmul_rows
from kiln.passes.registry import run_passes

rng = np.random.default_rng(23)

KERNELS = {
    "elementwise": (
        lambda x, y: np.tanh(x) * y + 1,
        (rng.standard_normal((13, 37)).astype(np.float32), rng.standard_normal(37).astype(np.float32)),
    ),
    "row sums": (lambda x: np.exp(x).sum(axis=1), (rng.standard_normal((7, 29)).astype(np.float32),)),
    "matmul": (
        lambda a, b: a @ b,
        (rng.standard_normal((13, 7)).astype(np.float32), rng.standard_normal((7, 41)).astype(np.float32)),
    ),
    "matmul by a transpose": (
        lambda a, b: a @ b.T,
        (rng.standard_normal((19, 5)).astype(np.float32), rng.standard_normal((64, 5)).astype(np.float32)),
    ),
    "int matmul": (
        lambda a, b: a @ b,
        (rng.integers(-5, 5, (11, 3)).astype(np.int32), rng.integers(-5, 5, (3, 19)).astype(np.int32)),
    ),
}

SCHEDULES = [
    ("elementwise", []),
    ("elementwise", [("split", "k0.i", 4)]),
    ("elementwise", [("split", "k0.j", 5), ("split", "k0.j.i", 2)]),
    ("elementwise", [("tile", ["k0.i", "k0.j"], [4, 8])]),
    ("elementwise", [("tile", ["k0.i", "k0.j"], [4, 8]), ("split", "k0.j.o", 2), ("parallel", "k0.i.o")]),
    ("elementwise", [("reorder", ["k0.j", "k0.i"])]),
    ("elementwise", [("unroll", "k0.i", 3), ("unroll", "k0.j", 5)]),
    ("elementwise", [("vectorize", "k0.j", 8), ("parallel", "k0.i")]),
    ("elementwise", [("unroll_jam", "k0.i", 4), ("vectorize", "k0.j", 16)]),
    ("elementwise", [("split", "k0.i", 5), ("parallel", "k0.i.o"), ("vectorize", "k0.j", 4)]),
    ("row sums", [("vectorize", "k0.r", 8)]),
    ("row sums", [("split", "k0.r", 6), ("unroll", "k0.i", 2)]),
    ("row sums", [("parallel", "k0.i"), ("unroll", "k0.r", 4)]),
    (
        "matmul",
        [
            ("unroll_jam", "k0.i", 4),
            ("reorder", ["k0.j", "k0.i.u"]),
            ("vectorize", "k0.j", 8),
            ("unroll_jam", "k0.j", 2),
            ("parallel", "k0.j.u"),
        ],
    ),
    ("matmul", [("tile", ["k0.i", "k0.j"], [5, 16]), ("split", "k0.r", 3)]),
    (
        "matmul",
        [
            ("unroll_jam", "k0.i", 4),
            ("reorder", ["k0.j", "k0.i.u"]),
            ("vectorize", "k0.j", 8),
            ("unroll_jam", "k0.j", 2),
            ("cache_read", "k0.j.u", "b"),
            ("parallel", "k0.j.u"),
        ],
    ),
    ("matmul", [("cache_read", "k0.i", "a"), ("cache_read", "k0.j", "b")]),
    ("matmul by a transpose", []),  # the default: B's rows packed transposed
    (
        "matmul by a transpose",
        [
            ("split", "k0.j", 16),
            ("reorder", ["k0.j.o", "k0.i", "k0.j.i"]),
            ("cache_read", "k0.j.o", "b", [1, 0]),
            ("vectorize", "k0.j.i", 8),
        ],
    ),
    ("int matmul", [("vectorize", "k0.j", 8), ("unroll_jam", "k0.i", 3)]),
]


@pytest.mark.parametrize("kernel, steps", SCHEDULES, ids=[f"{k}:{Schedule(s)}" for k, s in SCHEDULES])
def test_every_schedule_keeps_the_results(kernel, steps):
    fn, args = KERNELS[kernel]
    compiled = (
        kiln.compile(fn, schedule=steps or None)
        if kernel == "matmul by a transpose"
        else kiln.compile(fn, schedule=steps)
    )
    got, want = compiled(*args), fn(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    else:
        np.testing.assert_array_equal(got, want)
    text = compiled.lower(*args).text("scheduled", locations=False)
    assert text.startswith(f"// schedule (given): {Schedule(steps)}\n") or compiled.schedule is None


def test_split_ends_the_inner_loop_at_an_affine_min():
    text = (
        kiln.compile(lambda x: x + 1, schedule=[("split", "k0.i", 8)])
        .lower(kiln.f32[37])
        .text("scheduled", locations=False)
    )
    assert "affine.for %k0.i.o = 0 to 5 {" in text
    assert "affine.for %k0.i.i = 0 to min affine_map<(d0) -> (8, d0 * -8 + 37)>(%k0.i.o) {" in text
    assert "affine.load %x[%k0.i.o * 8 + %k0.i.i]" in text


def test_vectorize_makes_explicit_vector_code_and_a_scalar_remainder():
    text = (
        kiln.compile(lambda x: x * 2, schedule=[("vectorize", "k0.i", 8)])
        .lower(kiln.f32[20])
        .text("scheduled", locations=False)
    )
    assert "affine.vector_load %x[%k0.i * 8] : memref<20xf32>, vector<8xf32>" in text
    assert "affine.vector_store" in text and "affine.for %k0.i.tail = 0 to 4 {" in text


def test_default_schedules_vectorize_and_register_block_a_matmul():
    text = kiln.compile(lambda a, b: a @ b).lower(kiln.f32[64, 64], kiln.f32[64, 64]).text("scheduled")
    rows = matmul_rows(llvm_target.vector_registers())
    tail = f"unroll_jam(k0.i.tail, {64 % rows}); " if 64 % rows > 1 else ""
    assert text.startswith(
        f"// schedule (default): reorder([k0.j, k0.i]); unroll_jam(k0.i, {rows}); {tail}vectorize(k0.j, "
    )
    assert "iter_args(%acc0 = " in text and "vector<" in text


@pytest.mark.parametrize("registers,rows", [(8, 2), (16, 6), (32, 8), (64, 8)])
def test_a_matmuls_register_block_fits_the_vector_registers(registers, rows):
    """rows x 2 accumulators, 2 loaded vectors of B and a broadcast of A: at most `registers`.
    AVX2 has 16 (a 6 x 2 block, BLIS's), AVX-512 32; 16 accumulators on 16 registers spill."""
    assert matmul_rows(registers) == rows
    assert rows * 2 + 2 + 1 <= registers
    module = kiln.compile(lambda a, b: a @ b).lower(kiln.f32[64, 64], kiln.f32[64, 64]).module("affine")
    header = f"default-schedule{{vector-bits=256 threads=false vector-registers={registers}}}"
    scheduled = print_ir(run_passes(module, [header]), locations=False)
    # 64 rows in blocks of `rows`, the rest a block of its own in the same column loop
    assert re.findall(r"affine.for %k0.i.u = 0 to (\d+) ", scheduled) == [str(64 // rows)]
    assert ("%k0.i.tail.u = 0 to 1 " in scheduled) == (64 % rows != 0)
    assert len(re.findall(r"affine.for %k0.j.u = ", scheduled)) == 1  # one column loop: B packed once


@pytest.mark.parametrize("m", [1, 5, 6, 7, 13, 64, 97])
def test_matmuls_whose_rows_the_block_does_not_divide_match_numpy(m):
    rng = np.random.default_rng(m)
    a, b = rng.standard_normal((m, 37)).astype(np.float32), rng.standard_normal((37, 50)).astype(np.float32)
    np.testing.assert_allclose(kiln.compile(lambda a, b: a @ b)(a, b), a @ b, rtol=1e-5, atol=1e-4)


def test_a_remainder_nest_stays_on_one_thread_beside_its_parallel_main_nest():
    """Each nest is its own fork and join: the default schedule parallelizes a nest by its own
    work (passes/default_schedule.py, PARALLEL_MIN_WORK), so the few elements a vector loop
    leaves over do not wake the thread pool a second time."""
    from kiln.passes.default_schedule import PARALLEL_MIN_WORK

    size = 8 * PARALLEL_MIN_WORK + 3  # float32 in 256-bit vectors: 8 lanes, three left over
    text = kiln.compile(lambda x: np.sqrt(x) * 2 + 1).lower(kiln.f32[size]).text("scheduled", locations=False)
    if "affine.parallel" not in text:
        pytest.skip("no thread pool: the default schedule parallelizes nothing")
    assert "affine.parallel (%k0.i) = (0) to" in text
    assert "affine.for %k0.i.tail = 0 to 3 {" in text and "affine.parallel (%k0.i.tail)" not in text


def test_schedules_print_go_to_yaml_and_replay():
    schedule = Schedule().tile(["k0.i", "k0.j"], [4, 8]).split("k0.j.o", 2).parallel("k0.i.o")
    text = schedule.to_yaml()
    assert text == "- [tile, [k0.i, k0.j], [4, 8]]\n- [split, k0.j.o, 2]\n- [parallel, k0.i.o]\n"
    again = Schedule.from_yaml(text)
    assert again == schedule and str(again) == "tile([k0.i, k0.j], [4, 8]); split(k0.j.o, 2); parallel(k0.i.o)"
    fn, args = KERNELS["elementwise"]
    first = kiln.compile(fn, schedule=schedule).lower(*args).text("scheduled")
    second = kiln.compile(fn, schedule=text).lower(*args).text("scheduled")
    assert first == second


def test_a_schedule_from_a_yaml_file(tmp_path):
    path = tmp_path / "schedule.yaml"
    path.write_text("- [vectorize, k0.j, 8]\n")
    fn, args = KERNELS["elementwise"]
    np.testing.assert_allclose(kiln.compile(fn, schedule=str(path))(*args), fn(*args), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(
    "steps, message",
    [
        ([("split", "k0.q", 4)], r"no loop 'k0.q' \(loops of k0: k0.i, k0.j, k0.r\)"),
        ([("split", "k0.i", 0)], "the factor must be a positive integer"),
        ([("reorder", ["k0.r", "k0.j"])], "not perfectly nested"),
        ([("reorder", ["k0.i", "k0.r"])], "not one perfect nest"),
        ([("vectorize", "k0.i", 4)], "non-contiguous"),
        ([("parallel", "k0.j")], "only an outermost loop"),
        ([("unroll_jam", "k0.r", 2)], "carries values"),
        ([("frobnicate", "k0.i")], "unknown schedule step 'frobnicate'"),
        ([("split", "k0.i")], r"split takes 2 arguments \(loop, factor\), got 1"),
    ],
)
def test_illegal_steps_are_refused_with_the_reason(steps, message):
    fn, args = KERNELS["matmul"]
    with pytest.raises(ScheduleError, match=message):
        kiln.compile(fn, schedule=steps)(*args)


def test_malformed_yaml_is_refused():
    with pytest.raises(ScheduleError, match="a list of steps"):
        Schedule.from_yaml("split: k0.i")


def _ulps(got, want):
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_inline_float32_math_is_within_two_ulp_and_ieee_at_the_edges(name):
    fn = {"exp": np.exp, "tanh": np.tanh}[name]
    x = np.linspace(-110, 95, 100_003, dtype=np.float32)
    got = kiln.compile(lambda v: fn(v))(x)
    with np.errstate(over="ignore"):
        want = fn(x.astype(np.float64))
    normal = np.isfinite(want) & (np.abs(want) > np.finfo(np.float32).tiny) & (np.abs(want) < 3e38)
    assert _ulps(got[normal], want[normal]).max() <= 2
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -103.9, -104.5], np.float32)
    with np.errstate(over="ignore", under="ignore"):
        np.testing.assert_array_equal(kiln.compile(lambda v: fn(v))(edges), fn(edges))
        assert np.signbit(kiln.compile(lambda v: fn(v))(edges)[1]) == np.signbit(fn(edges)[1])


def test_thread_count_comes_from_the_environment(monkeypatch):
    from kiln.runtime import threads

    monkeypatch.setenv("KILN_NUM_THREADS", "3")
    assert threads.thread_count() == 3
    monkeypatch.setenv("KILN_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="KILN_NUM_THREADS must be a positive integer"):
        threads.thread_count()


def test_conv2d_with_the_matmul_recipe_jams_nested_reductions_correctly():
    x = rng.standard_normal((2, 3, 19, 37)).astype(np.float32)
    w = rng.standard_normal((13, 3, 3, 2)).astype(np.float32)  # 8 filters jammed and 5 left over
    compiled = kiln.compile(lambda x, w: kiln.conv2d(x, w, padding=1))
    assert "unroll_jam" in compiled.lower(x, w).text("scheduled").splitlines()[0]
    np.testing.assert_allclose(compiled(x, w), kiln.conv2d(x, w, padding=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,k,n", [(256, 512, 10), (13, 7, 5), (37, 11, 17), (8, 3, 31), (9, 2, 4)])
def test_narrow_matmuls_get_a_row_jammed_vector_schedule_and_numpys_numbers(m, k, n):
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    f = kiln.compile(lambda a, b: a @ b)
    header = f.lower(a, b).text("scheduled").splitlines()[0]
    lanes = llvm_target.vector_bits() // 32  # float32 lanes of this host's vectors
    if n >= 2 * lanes:  # not narrow on this host: the general recipe, two vectors jammed
        assert f"vectorize(k0.j, {lanes}); unroll_jam(k0.j, 2)" in header
    else:
        width = 1 << (min(n, lanes).bit_length() - 1)
        assert f"unroll_jam(k0.i, 8); vectorize(k0.j, {width})" in header
    np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-5, atol=4e-6 * k)  # float32 sums of k terms


# -- every step on sizes its factors do not divide, in release and bounds-checked debug mode --
def _check_both_modes(fn, args, steps):
    want = fn(*args)
    for debug in (False, True):
        got = kiln.compile(fn, schedule=steps, debug=debug)(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6 * (1 + args[0].shape[-1]))


def test_cache_read_of_a_partial_tile_stays_inside_the_buffer():
    a, b = rng.standard_normal((5, 16)).astype(np.float32), rng.standard_normal((16, 100)).astype(np.float32)
    steps = [("split", "k0.j", 32), ("cache_read", "k0.j.o", "b")]
    _check_both_modes(lambda a, b: a @ b, (a, b), steps)
    text = kiln.compile(lambda a, b: a @ b, schedule=steps).lower(a, b).text("scheduled", locations=False)
    assert "affine.for %k0.j.o.copy1 = 0 to min affine_map<(d0) -> (32, d0 * -32 + 100)>(%k0.j.o) {" in text


def _in_place_chain(x, w):
    e = np.exp(x)
    return (np.tanh(e) * 2 + e / e.sum(axis=0, keepdims=True)) @ w


@pytest.mark.parametrize(
    "steps",
    [
        [("vectorize", "k2.j", 8)],
        [("tile", ["k2.i", "k2.j"], [4, 8]), ("unroll", "k2.j.i", 3)],
        [("split", "k2.j", 8), ("vectorize", "k2.j.i", 4), ("cache_read", "k2.j.o", "buf0")],
        [("parallel", "k2.i"), ("unroll_jam", "k2.j", 2)],
    ],
    ids=str,
)
def test_a_kernel_writing_over_its_input_in_place_keeps_numpys_results_under_schedules(steps):
    """The memory verifier accepts in-place writes after every step (it runs on each) and
    the numbers stay numpy's."""
    x, w = rng.standard_normal((37, 24)).astype(np.float32), rng.standard_normal((24, 5)).astype(np.float32)
    text = kiln.compile(_in_place_chain).lower(x, w).text("affine")
    assert 'kiln.in_place_of = "buf0"' in text  # kernel 2 computes its chain over exp(x)
    _check_both_modes(_in_place_chain, (x, w), steps)


EDGE_STEPS = [
    [("split", "k0.j", 32)],
    [("split", "k0.i", 1), ("split", "k0.j", 3)],
    [("tile", ["k0.i", "k0.j"], [5, 32])],
    [("reorder", ["k0.j", "k0.i"]), ("unroll", "k0.i", 4)],
    [("unroll", "k0.j", 32), ("unroll", "k0.i", 1)],
    [("unroll_jam", "k0.i", 3)],
    [("unroll_jam", "k0.i", 64), ("vectorize", "k0.j", 16)],
    [("vectorize", "k0.j", 4), ("parallel", "k0.i")],
    [("split", "k0.i", 7), ("parallel", "k0.i.o"), ("vectorize", "k0.j", 8)],
    [("split", "k0.j", 5), ("cache_read", "k0.j.o", "x")],
    [("split", "k0.j", 4), ("cache_read", "k0.j.o", "y")],
    [("tile", ["k0.i", "k0.j"], [3, 8]), ("cache_read", "k0.j.o", "x", [1, 0]), ("cache_read", "k0.j.o", "y")],
    [("cache_read", "k0.i", "x"), ("vectorize", "k0.j", 2)],
]
EDGE_SHAPES = [(1, 1), (17, 37)]
# Plain, transposed and reversed reads, so that tiles are read forwards and backwards.
EDGE_KERNELS = {
    "plain": lambda x, y: np.tanh(x) * y + 1,
    "reversed": lambda x, y: x[::-1, ::-1] - 2 * y,
    "transposed": lambda x, y: x * y.T[::-1].T,
}


@pytest.mark.parametrize("steps", EDGE_STEPS, ids=[str(Schedule(s)) for s in EDGE_STEPS])
@pytest.mark.parametrize("shape", EDGE_SHAPES, ids=[f"{m}x{n}" for m, n in EDGE_SHAPES])
def test_every_step_gives_numpys_numbers_on_sizes_no_factor_divides(steps, shape):
    x, y = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    for kernel in EDGE_KERNELS.values():
        try:
            _check_both_modes(kernel, (x, y), steps)
        except ScheduleError as exc:  # a refusal is fine; it must name the step
            assert any(str(exc).startswith(f"{s[0]}(") for s in steps), exc


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 100])
def test_cache_read_of_a_matmul_panel_read_backwards(n):
    a, b = rng.standard_normal((3, 7)).astype(np.float32), rng.standard_normal((7, n)).astype(np.float32)
    _check_both_modes(lambda a, b: a @ b[:, ::-1], (a, b), [("split", "k0.j", 32), ("cache_read", "k0.j.o", "b")])
    _check_both_modes(
        lambda a, b: a @ b, (a, b), [("tile", ["k0.i", "k0.j"], [2, 32]), ("cache_read", "k0.j.o", "b", [1, 0])]
    )


# -- a step applies whole or raises ScheduleError and leaves the IR as it was --------------
def test_vectorizing_around_a_partial_tile_is_refused_with_the_reason():
    fn = lambda a: np.broadcast_to(a, (3, 3)) + 1  # noqa: E731
    steps = [("tile", ["k0.i", "k0.j"], [2, 2]), ("vectorize", "k0.i.o", 2)]
    with pytest.raises(ScheduleError, match=r"vectorize\(k0.i.o, 2\): .*bounds of k0.i.i, inside it, depend on it"):
        kiln.compile(fn, schedule=steps)(np.arange(3, dtype=np.float32))


def _affine(fn, *args):
    return kiln.compile(fn).lower(*args).module("affine").clone({})


@pytest.mark.parametrize(
    "steps, refused",
    [
        ([("tile", ["k0.i", "k0.j"], [2, 2])], ("vectorize", "k0.i.o", 2)),
        ([("unroll_jam", "k0.i", 2), ("vectorize", "k0.j", 4)], ("cache_read", "k0.j", "b", [1, 0])),
        ([], ("cache_read", "k0.i", "b", [0, 0])),
        ([], ("tile", ["k0.i", "k0.r"], [2, 2])),
        ([], ("reorder", ["k0.j", "k0.r"])),
        ([("split", "k0.j", 4)], ("unroll", "k0.j.i", 2)),
        ([], ("parallel", "k0.r")),
    ],
)
def test_a_refused_step_leaves_the_ir_as_it_was(steps, refused):
    from kiln.dialects import print_ir, verify
    from kiln.passes.schedule import apply_step

    module = _affine(lambda a, b: a @ b, kiln.f32[6, 5], kiln.f32[5, 9])
    function = module.body.ops[-1]
    for step in steps:
        apply_step(function, step)
    before = print_ir(module, locations=False)
    with pytest.raises(ScheduleError, match=f"^{refused[0]}\\("):
        apply_step(function, refused)
    assert print_ir(module, locations=False) == before
    verify(module)


def test_the_schedule_fuzzer_draws_every_cpu_step():
    import random

    from fuzz.schedules import CPU_STEPS, random_schedule

    drawn = set()
    for seed in range(6):
        module = _affine(lambda a, b: np.tanh(a @ b) + b.sum(), kiln.f32[13, 7], kiln.f32[7, 19])
        drawn.update(step[0] for step in random_schedule(module, random.Random(seed), length=8))
    assert drawn == set(CPU_STEPS)


@pytest.mark.parametrize(
    "schedule, message",
    [
        ([("split", "k0.j", True)], "positive integer"),
        ([("tile", ["k0.i", "k0.j"], [True, 2])], "positive integer"),
        ([("unroll", "k0.r", False)], "positive integer"),
        ([()], "a schedule step is a list"),
        (["split k0.j 2"], "a schedule step is a list"),
        ([("tile", "k0.i", "k0.j", 7, 300)], r"tile takes 2 arguments \(loops, sizes\), got 4"),
        ([("parallel",)], r"parallel takes 1 argument \(loop\), got 0"),
        ([("cache_read", "k0.i", "x", "a", "b")], r"cache_read takes 2 or 3 arguments"),
    ],
)
def test_malformed_steps_are_refused_by_name(schedule, message):
    a, b = np.ones((7, 13), np.float32), np.ones((13, 11), np.float32)
    with pytest.raises(ScheduleError, match=message):
        kiln.compile(lambda a, b: a @ b, schedule=schedule)(a, b)


@pytest.mark.parametrize("step", [("unroll", "k0.r", 100_000), ("unroll_jam", "k0.i", 100_000)])
def test_factors_past_the_trip_count_unroll_fully_at_once(step):
    """More copies than iterations would only be empty copies (compile time grew with the factor)."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((7, 13)).astype(np.float32), rng.standard_normal((13, 11)).astype(np.float32)
    got = kiln.compile(lambda a, b: a @ b, schedule=[step])(a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_the_default_matmul_recipe_is_tried_on_a_copy_of_its_own_kernel(monkeypatch):
    """Trying a recipe copies only the kernel it schedules: copying the whole function per
    kernel made scheduling quadratic in the number of kernels (minutes for a CNN)."""
    from kiln.passes import default_schedule, schedule

    trials = []

    def recording_trial_copy(function, step):
        trial = schedule.trial_copy(function, step)
        trials.append({schedule.A.kernel_of(nest) for nest in schedule.kernels(trial)})
        return trial

    monkeypatch.setattr(default_schedule, "trial_copy", recording_trial_copy)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    fn = kiln.compile(lambda a: np.tanh((np.tanh(a @ a) + 1) @ a) @ a)
    text = fn.lower(a).text("scheduled")
    assert len(trials) >= 3 and all(len(kernels) == 1 for kernels in trials), trials
    assert text.count("unroll_jam(") >= 3
    np.testing.assert_allclose(fn(a), np.tanh((np.tanh(a @ a) + 1) @ a) @ a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m", [1, 7, 8, 13])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_a_matmul_with_no_columns_is_empty(m, dtype):
    """(m, k) @ (k, 0): no columns to block or vectorize (8 rows or more used to reach the
    narrow recipe with a width of 1 << -1)."""
    a, b = np.ones((m, 3), dtype), np.ones((3, 0), dtype)
    got = kiln.compile(lambda a, b: a @ b)(a, b)
    assert got.shape == (m, 0) and got.dtype == dtype
    assert kiln.compile(lambda a, b: a @ b.T + 1)(a, b.T.copy()).shape == (m, 0)


@pytest.mark.parametrize("m", [2, 13, 60, 64])
def test_a_product_with_b_transposed_keeps_leftover_rows_in_the_packed_column_block(m):
    """a @ b.T packs each block of B's rows transposed; the rows a register block leaves over
    run in that same column block, not in a nest of their own reading B unpacked."""
    rng = np.random.default_rng(m)
    a, b = rng.standard_normal((m, 40)).astype(np.float32), rng.standard_normal((64, 40)).astype(np.float32)
    f = kiln.compile(lambda a, b: a @ b.T)
    np.testing.assert_allclose(f(a, b), a @ b.T, rtol=1e-5, atol=1e-4)
    scheduled = f.lower(a, b).text("scheduled", locations=False)
    if "cache_read(k0.j.o, b, [1, 0])" in scheduled.splitlines()[0]:
        assert len(re.findall(r"affine\.(for|parallel) \(?%k0\.j\.o\)? = ", scheduled)) == 1
