"""The affine interpreter runs every op-table case at the affine and scheduled
stages with numpy's numbers and refuses out-of-bounds accesses; kiln.bisect
names a deliberately broken pass, lowering or schedule step."""
import numpy as np
import pytest

import kiln
from kiln.affine_interpreter import run_affine
from kiln.dialects import arith as AR
from kiln.dialects import parse_ir
from kiln.dialects import tensor as T
from kiln.passes import registry
from op_table import CASES
from planted import plant_split_without_partial_tiles
from test_ops import assert_same


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_affine_interpreter_gives_numpys_numbers_at_both_loop_stages(case):
    lowered = kiln.compile(case.fn).lower(*case.args)
    function = lowered.module("tensor").body.ops[0]
    inputs = [np.asarray(a, dtype=arg.type.dtype) for a, arg in zip(case.args, function.arguments)]
    want = case.fn(*case.args)
    for stage in ("affine", "scheduled"):
        (out,) = run_affine(lowered.module(stage), inputs)
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
    assert names[:6] == ["canonicalize", "cse", "dce", "fuse", "plan-memory", "lower-tensor-to-affine"]
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
    assert [s.ok for s in report.steps] == [True, False]
    assert "2.0" in report.ir_before and "3.0" in report.ir_after
    assert "first step that changes the numbers: cse" in str(report)


def test_bisect_names_a_broken_lowering(monkeypatch):
    lower = registry.PASSES["lower-tensor-to-affine"]

    def broken_lowering(module):
        module = lower(module)
        for op in module.body.ops[-1].walk():
            if isinstance(op, AR.ConstantOp) and op.value == 2.0:
                op.attributes["value"] = 2.5
        return module
    monkeypatch.setitem(registry.PASSES, "lower-tensor-to-affine", broken_lowering)
    report = kiln.bisect(scaled_sum, *args())
    assert report.first_bad.name == "lower-tensor-to-affine"


def test_bisect_names_a_broken_schedule_step(monkeypatch):
    plant_split_without_partial_tiles(monkeypatch)
    f = kiln.compile(scaled_sum, schedule=kiln.Schedule().split("k0.i", 4))
    report = kiln.bisect(f, *args())
    assert report.first_bad.name == "schedule: split(k0.i, 4)"
    assert "OutOfBoundsError" in report.first_bad.failure  # rows 7 of 7: caught, not read
