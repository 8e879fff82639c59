"""The affine interpreter runs every op-table case at the affine and scheduled
stages with numpy's numbers and refuses out-of-bounds accesses; kiln.bisect
names a deliberately broken pass, lowering or schedule step."""

import numpy as np
import pytest
from op_table import CASES
from planted import plant_split_without_partial_tiles
from test_ops import assert_same

import kiln
from kiln.dialects import arith as AR
from kiln.dialects import parse_ir
from kiln.dialects import tensor as T
from kiln.interpreters.affine_interpreter import run_affine
from kiln.passes import registry
from kiln.tools.bisect import computed_tolerance


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_affine_interpreter_gives_numpys_numbers_at_both_loop_stages(case):
    lowered = kiln.compile(case.fn).lower(*case.args)
    function = lowered.module("tensor").body.ops[0]
    inputs = [np.asarray(a, dtype=arg.type.dtype) for a, arg in zip(case.args, function.arguments)]
    want = case.fn(*case.args)
    result_dtypes = [t.dtype for t in function.function_type.results]  # uint8 is signless i8 there
    for stage in ("affine", "scheduled"):
        (out,) = run_affine(lowered.module(stage), inputs, result_dtypes)
        assert_same(out[()] if out.ndim == 0 else out, want)


def test_affine_interpreter_refuses_an_out_of_bounds_load():
    module = parse_ir("""module {
  func.func @f(%x: memref<4xf32>, %out0: memref<4xf32>) {
    affine.for %i = 0 to 4 {
      %0 = affine.load %x[%i + 1] : memref<4xf32>
      affine.store %0, %out0[%i] : memref<4xf32>
    }
    func.return
  }
}""")
    with pytest.raises(kiln.OutOfBoundsError, match=r"affine.load at \[4\] is outside memref<4xf32>"):
        run_affine(module, [np.ones(4, np.float32)])


def scaled_sum(x, y):
    return np.tanh(x * 2.0 + y).sum(axis=1)


def args():
    rng = np.random.default_rng(11)
    return rng.standard_normal((7, 13)).astype(np.float32), rng.standard_normal(13).astype(np.float32)


def test_bisect_finds_nothing_in_a_healthy_pipeline():
    report = kiln.bisect(scaled_sum, *args())
    assert report.first_bad is None
    names = [s.name for s in report.steps]
    assert names[:7] == [
        "emulate-unsupported-floats",
        "canonicalize",
        "cse",
        "dce",
        "fuse",
        "plan-memory",
        "lower-tensor-to-affine",
    ]
    assert names[-1] == "native code"


def test_bisect_names_a_broken_graph_pass(monkeypatch):
    cse = registry.PASSES["cse"]

    def broken_cse(module):  # a plausible bug: a folded constant comes out wrong
        module = cse(module)
        for op in module.body.ops[0].walk():
            if isinstance(op, T.ConstantOp) and op.attributes["value"].dtype.kind == "f":
                op.attributes["value"] = np.asarray(op.attributes["value"] * 1.5)
        return module

    monkeypatch.setitem(registry.PASSES, "cse", broken_cse)
    report = kiln.bisect(scaled_sum, *args())
    assert report.first_bad.name == "cse"
    assert [s.ok for s in report.steps] == [True, True, False]  # emulate-unsupported-floats, canonicalize, cse
    assert "2.0" in report.ir_before and "3.0" in report.ir_after
    assert "first step that changes the numbers: cse" in str(report)


def break_lowering(monkeypatch, name: str) -> None:
    """Plant a fault in the registered lowering `name`: its constant 2.0 comes out 2.5."""
    lower = registry.PASSES[name]

    def broken_lowering(module):
        module = lower(module)
        for op in module.body.ops[-1].walk():
            if isinstance(op, AR.ConstantOp) and op.value == 2.0:
                op.attributes["value"] = 2.5
        return module

    monkeypatch.setitem(registry.PASSES, name, broken_lowering)


def test_bisect_names_a_broken_lowering(monkeypatch):
    break_lowering(monkeypatch, "lower-tensor-to-affine")
    report = kiln.bisect(scaled_sum, *args())
    assert report.first_bad.name == "lower-tensor-to-affine"


def test_bisect_names_a_broken_schedule_step(monkeypatch):
    plant_split_without_partial_tiles(monkeypatch)
    f = kiln.compile(scaled_sum, schedule=kiln.Schedule().split("k0.i", 4))
    report = kiln.bisect(f, *args())
    assert report.first_bad.name == "schedule: split(k0.i, 4)"
    assert "OutOfBoundsError" in report.first_bad.failure  # rows 7 of 7: caught, not read


def row_sums(x, y):
    return (x * 2.0).sum(axis=1) + y


def row_args():
    return np.random.default_rng(3).standard_normal((5, 70)).astype(np.float32), np.ones(5, np.float32)


def test_a_cuda_emulate_function_is_bisected_through_the_gpu_lowering_and_schedule():
    # The pipeline kiln.compile runs for the target: the GPU lowering, then the GPU default
    # schedule's steps (a block per row, a thread per element of its sum), then the CUDA code.
    report = kiln.bisect(kiln.compile(row_sums, target="cuda-emulate"), *row_args())
    names = [s.name for s in report.steps]
    assert report.first_bad is None, str(report)
    assert "lower-tensor-to-affine-gpu" in names and "lower-tensor-to-affine" not in names
    assert "schedule: bind(k0.i, blockIdx.x)" in names and names[-1] == "native code"


def test_bisect_of_a_cuda_emulate_function_names_a_broken_gpu_lowering(monkeypatch):
    break_lowering(monkeypatch, "lower-tensor-to-affine-gpu")
    assert kiln.bisect(kiln.compile(row_sums), *row_args()).first_bad is None  # the CPU's lowering is not it
    report = kiln.bisect(kiln.compile(row_sums, target="cuda-emulate"), *row_args())
    assert report.first_bad.name == "lower-tensor-to-affine-gpu"
    assert "2.5" in report.ir_after and "2.5" not in report.ir_before


def test_bisect_reports_its_estimate_and_every_step_as_it_goes():
    lines = []
    report = kiln.bisect(scaled_sum, *args(), progress=lines.append)
    assert report.first_bad is None
    total = len(report.steps)
    assert lines[0].startswith(f"kiln bisect of scaled_sum: {total} steps; about ")
    assert "runs of the affine interpreter" in lines[0]
    assert len(lines) == 1 + total
    for n, (line, step) in enumerate(zip(lines[1:], report.steps), start=1):
        assert line.startswith(f"[{n}/{total}] {step.name}: ok, ") and "elapsed" in line
    assert "left" in lines[1] and "left" not in lines[-1]


def test_bisect_progress_stops_at_the_first_bad_step(monkeypatch):
    plant_split_without_partial_tiles(monkeypatch)
    lines = []
    kiln.bisect(kiln.compile(scaled_sum, schedule=kiln.Schedule().split("k0.i", 4)), *args(), progress=lines.append)
    assert lines[-1].split("] ")[1].startswith("schedule: split(k0.i, 4): BAD")


@pytest.mark.parametrize(
    "fn, shapes",
    [
        (lambda a, b: a @ b, [(5, 7), (7, 3)]),
        (lambda a, b: a @ b, [(0, 7), (7, 3)]),
        (lambda a, b: a @ b, [(1, 1), (1, 1)]),
        (lambda a, b: np.tanh(a).sum(axis=0) + b, [(13, 11), (11,)]),
        (lambda a, b: np.exp(a.T) * b, [(6, 9), (6,)]),
    ],
    ids=["matmul", "empty", "one", "reduction", "transposed"],
)
@pytest.mark.parametrize("stage", ["affine", "scheduled"])
def test_the_estimate_counts_the_ops_the_interpreter_runs(monkeypatch, fn, shapes, stage):
    from kiln.interpreters import affine_interpreter
    from kiln.tools.bisect import interpreter_ops

    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    module = kiln.compile(fn).lower(*arrays).module(stage)
    ran = []
    original = affine_interpreter._Runner.run
    monkeypatch.setattr(affine_interpreter._Runner, "run", lambda self, op: (ran.append(op), original(self, op))[1])
    run_affine(module, arrays)
    assert interpreter_ops(module) == len(ran)


def test_shrinking_keeps_ranks_and_equal_extents_and_fits_the_budget():
    from kiln.tools.bisect import estimate, shrink_specs

    f = kiln.compile(lambda x, w, b: np.maximum(x @ w + b, 0))
    specs = [kiln.f32[96, 200], kiln.f32[200, 200], kiln.f32[200]]
    full = estimate(f.lower(*specs).pipeline)
    # The budget is in the estimate's model (interpreter ops at one calibrated rate), not a clock.
    shrunk, cost = shrink_specs(f, specs, full.seconds / 50)
    assert cost.runs * cost.ops <= full.runs * full.ops / 50
    assert cost.runs == estimate(f.lower(*shrunk).pipeline).runs
    (m, k), (k2, n), (n2,) = (s.shape for s in shrunk)
    assert k == k2 == n == n2 and 3 <= m < 96 and 3 <= k < 200
    assert all(s.dtype == np.float32 for s in shrunk)
    assert shrink_specs(f, specs, full.seconds * 2) == (specs, full)  # fits already: unchanged


def test_shapes_the_function_refuses_are_not_used():
    from kiln.tools.bisect import shrink_specs

    f = kiln.compile(lambda x: x.reshape(40, 60) @ np.ones((60, 50), np.float32))
    specs = [kiln.f32[2400]]
    shrunk, cost = shrink_specs(f, specs, 1e-6)
    assert shrunk == specs and cost.seconds > 1e-6


def test_bisect_compares_structured_results_leaf_by_leaf():
    def step(p, x):
        return (x * p["w"]).sum(), {"w": p["w"] - x, "v": p["v"] * 2}

    rng = np.random.default_rng(4)
    p = {"w": rng.standard_normal(5).astype(np.float32), "v": rng.standard_normal(3).astype(np.float32)}
    report = kiln.bisect(step, p, rng.standard_normal(5).astype(np.float32))
    assert report.first_bad is None and report.steps[-1].name == "native code"


def _write_model(tmp_path, size):
    source = tmp_path / "model.py"
    source.write_text(
        f"import numpy as np\nimport kiln\n\n"
        f"def f(a: kiln.f32[{size}, {size}], b: kiln.f32[{size}]):\n    return np.tanh(a @ a) + b\n"
    )
    return f"{source}:f"


def test_kiln_bisect_shrinks_inputs_that_would_take_too_long(tmp_path, capsys):
    from kiln.tools.cli import main

    assert main(["bisect", _write_model(tmp_path, 160), "--budget", "3"]) == 0
    captured = capsys.readouterr()
    assert "running on smaller inputs of the same ranks" in captured.err
    assert "a: kiln.f32[160, 160] -> kiln.f32[" in captured.err and "b: kiln.f32[160] -> kiln.f32[" in captured.err
    assert "steps; about" in captured.err and "ok   native code" in captured.out
    assert "every step keeps the reference's numbers" in captured.out


def test_kiln_bisect_no_shrink_keeps_the_shapes(tmp_path, capsys):
    from kiln.tools.cli import main

    assert main(["bisect", _write_model(tmp_path, 6), "--budget", "0", "--no-shrink"]) == 0
    captured = capsys.readouterr()
    assert "smaller" not in captured.err and "steps; about" in captured.err


def test_a_long_bisection_says_so_before_it_starts(monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["kiln.tools.bisect"], "LONG", 0.0)  # every bisection counts as long
    with pytest.warns(RuntimeWarning, match=r"kiln.bisect of scaled_sum will take about .* pass smaller arrays"):
        report = kiln.bisect(scaled_sum, *args())
    assert report.first_bad is None


def matmul_up(a, b):
    return (a @ b).astype(np.float64)


def half_sum_up(a, b):
    return np.tanh(a * b).sum(axis=0).astype(np.float32)


def exp_up(a, b):
    return np.exp(np.sum(a, axis=1, dtype=np.float32)).astype(np.float64) + b.astype(np.float64)[:1]


RNG = np.random.default_rng(23)
CAST_UP = {  # computed in float32 or float16, returned in a wider type
    "float32_matmul_to_float64": (matmul_up, RNG.standard_normal((6, 97)), RNG.standard_normal((97, 5)), np.float32),
    "float16_sum_to_float32": (half_sum_up, RNG.standard_normal((257, 3)), RNG.standard_normal((257, 3)), np.float16),
    "float32_row_sum_to_float64": (exp_up, RNG.standard_normal((4, 1031)) * 0.05, RNG.standard_normal(3), np.float32),
}


@pytest.mark.parametrize("name", CAST_UP)
def test_a_result_cast_up_is_judged_at_the_precision_it_was_computed_in(name):
    fn, a, b, dtype = CAST_UP[name]
    report = kiln.bisect(fn, a.astype(dtype), b.astype(dtype))
    assert report.first_bad is None, str(report)


def test_the_tolerance_is_that_of_the_least_precise_type_computed_in():
    def tolerance(fn, *specs):
        return computed_tolerance(kiln.compile(fn).lower(*specs).module("tensor").body.ops[0])

    assert tolerance(matmul_up, kiln.f32[3, 4], kiln.f32[4, 2]) == 1e-4
    assert tolerance(half_sum_up, kiln.f16[5, 3], kiln.f16[5, 3]) == 1e-2
    # float32 arguments cast up first and float32 constants are not float32 arithmetic
    assert tolerance(lambda a, b: a.astype(np.float64) @ b.astype(np.float64), kiln.f32[3, 4], kiln.f32[4, 2]) == 1e-9
    assert tolerance(lambda a: a * np.float32(3.0), kiln.f64[3]) == 1e-9
    assert tolerance(lambda a: a.astype(np.float32).astype(np.float64) * 2, kiln.f64[3]) == 1e-4  # rounded to float32


def test_a_planted_fault_in_a_result_cast_up_is_still_found(monkeypatch):
    plant_split_without_partial_tiles(monkeypatch)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((7, 9)).astype(np.float32), rng.standard_normal((9, 3)).astype(np.float32)
    f = kiln.compile(lambda a, b: (a @ b * 2.0).astype(np.float64), schedule=kiln.Schedule().split("k0.i", 4))
    report = kiln.bisect(f, a, b)
    assert report.first_bad is not None and report.first_bad.name == "schedule: split(k0.i, 4)"


def test_a_planted_constant_fault_in_a_result_cast_up_is_found_at_the_lowering(monkeypatch):
    lower = registry.PASSES["lower-tensor-to-affine"]

    def broken_lowering(module):
        module = lower(module)
        for op in module.body.ops[-1].walk():
            if isinstance(op, AR.ConstantOp) and op.value == 2.0:
                op.attributes["value"] = 2.0 + 2.0**-10  # 1e-3 off: above float32's tolerance, within float16's
        return module

    monkeypatch.setitem(registry.PASSES, "lower-tensor-to-affine", broken_lowering)
    x, y = args()
    report = kiln.bisect(lambda x, y: scaled_sum(x, y).astype(np.float64), x, y)
    assert report.first_bad is not None and report.first_bad.name == "lower-tensor-to-affine"
