"""Autotuning: legal search spaces, rejected wrong candidates, the database, the CLI."""
import random
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import yaml

import kiln
from kiln.kernels import absolute_steps, extract, kernel_names, relative_steps, structural_hash
from kiln.passes.schedule import Schedule, apply_schedule
from kiln.tuner import KernelBench, SearchSpace, tune_kernel
from kiln.tuning_db import TuningDB, host_fingerprint


def affine(fn, *specs):
    return kiln.compile(fn).lower(*specs).module("affine").body.ops[-1]


@pytest.mark.parametrize("fn, specs", [
    (lambda a, b: a @ b, (kiln.f32[37, 13], kiln.f32[13, 70])),
    (lambda x, y: np.tanh(x) * y, (kiln.f32[9, 41], kiln.f32[41])),
    (lambda x: x.sum(axis=1), (kiln.f64[5, 66],)),
])
def test_the_search_space_only_holds_legal_schedules(fn, specs):
    module = extract(affine(fn, *specs), "k0")
    space = SearchSpace(module, 512, True)
    rng = random.Random(1)
    for _ in range(25):
        config = space.random(rng)
        apply_schedule(module.clone({}), Schedule(space.steps(config)))  # raises if illegal
        child = space.mutate(config, rng)
        apply_schedule(module.clone({}), Schedule(space.steps(child)))


def test_a_candidate_with_wrong_results_is_rejected():
    module = extract(affine(lambda x, y: x * y + 1, kiln.f32[16, 64], kiln.f32[64]), "k0")
    bench = KernelBench(module)
    original_build = bench.build

    def planted(steps):
        run, keep = original_build(steps)
        if steps is None:
            return run, keep

        def wrong(arrays):  # a miscompiled candidate: its output is off
            run(arrays)
            arrays[-1] += 1
        return wrong, keep
    bench.build = planted
    result = tune_kernel(module, trials=6, seed=0, bench=bench)
    assert result.rejected == result.trials == 6 and result.steps is None


def test_kernels_are_identified_by_structure_not_by_names():
    first = extract(affine(lambda a, b: a @ b, kiln.f32[8, 4], kiln.f32[4, 8]), "k0")
    second = extract(affine(lambda p, q: p @ q, kiln.f32[8, 4], kiln.f32[4, 8]), "k0")
    other = extract(affine(lambda a, b: a @ b, kiln.f32[8, 5], kiln.f32[5, 8]), "k0")
    assert structural_hash(first) == structural_hash(second) != structural_hash(other)
    steps = [["vectorize", "k2.j", 8], ["tile", ["k2.i", "k2.j"], [4, 4]]]
    assert relative_steps(steps, "k2") == [["vectorize", "k0.j", 8], ["tile", ["k0.i", "k0.j"], [4, 4]]]
    assert absolute_steps(relative_steps(steps, "k2"), "k2") == steps


def _record(fn, specs, steps, function_name="f"):
    function = affine(fn, *specs)
    module = extract(function, kernel_names(function)[0])
    return {"kernel": structural_hash(module), "host": host_fingerprint(), "function": function_name,
            "steps": steps, "default_ms": 1.0, "tuned_ms": 0.5, "seed": 0, "trials": 3}


def test_the_database_round_trips_and_compile_uses_it(tmp_path):
    fn = lambda x, y: np.tanh(x) * y + 2  # noqa: E731
    specs = (kiln.f32[12, 40], kiln.f32[40])
    path = tmp_path / "tuning.yaml"
    db = TuningDB(str(path))
    db.put(_record(fn, specs, [["split", "k0.i", 5], ["vectorize", "k0.j", 8]]))
    db.save()
    again = TuningDB(str(path))
    assert again.records == db.records
    compiled = kiln.compile(fn, tuning_db=str(path))
    text = compiled.lower(*specs).text("scheduled")
    assert text.startswith("// schedule (default; k0 from the tuning database): split(k0.i, 5); vectorize(k0.j, 8)")
    x, y = np.ones((12, 40), np.float32), np.arange(40, dtype=np.float32)
    np.testing.assert_allclose(compiled(x, y), fn(x, y), rtol=1e-6)
    untuned = kiln.compile(fn, tuning_db=False).lower(*specs).text("scheduled")
    assert "tuning database" not in untuned


@pytest.mark.parametrize("content, warning", [
    ("{not: [valid", "cannot read the tuning database"),
    ("just a string", "is not a list of records"),
    ("- {kernel: 12}\n- 7\n", "ignoring record #0"),
])
def test_a_malformed_database_is_survived_with_a_warning(tmp_path, content, warning):
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    with pytest.warns(RuntimeWarning, match=warning):
        compiled = kiln.compile(lambda v: v * 3, tuning_db=str(path))
        np.testing.assert_array_equal(compiled(np.arange(4.0)), np.arange(4.0) * 3)


def test_a_stale_record_falls_back_to_the_default_schedule(tmp_path):
    fn = lambda x: x + 1  # noqa: E731
    path = tmp_path / "tuning.yaml"
    db = TuningDB(str(path))
    db.put(_record(fn, (kiln.f32[9],), [["split", "k0.nothing", 2]]))
    db.save()
    with pytest.warns(RuntimeWarning, match="no longer applies"):
        out = kiln.compile(fn, tuning_db=str(path))(np.zeros(9, np.float32))
    np.testing.assert_array_equal(out, np.ones(9))


def test_tuning_end_to_end_through_the_command_line(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(textwrap.dedent("""
        import numpy as np
        import kiln

        def step(x: kiln.f32[24, 40], w: kiln.f32[40, 33]):
            return np.tanh(x @ w) * 2
    """))
    db = tmp_path / "tuning.yaml"
    run = [sys.executable, "-m", "kiln.cli", "tune"]
    result = subprocess.run(run + [f"{source}:step", "--trials", "6", "--db", str(db), "--seed", "3"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "trial 6/6" in result.stderr and "default" in result.stderr
    report = subprocess.run(run + ["--report", "--db", str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert report.returncode == 0 and "default ms" in report.stdout
    verify = subprocess.run(run + ["--verify", "--db", str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert "stale record(s)" in verify.stdout
    if db.exists():  # a faster schedule was found and recorded: it is valid YAML with the promised fields
        records = yaml.safe_load(db.read_text())
        assert {"kernel", "host", "steps", "default_ms", "tuned_ms", "seed", "trials"} <= set(records[0])


def test_tune_kernel_returns_the_default_or_a_schedule_with_its_numbers():
    # Which schedule wins depends on timing, so the test checks what cannot: the result is
    # either "keep the default" (no steps, one measurement) or steps that compute the same.
    module = extract(affine(lambda a, b: a @ b, kiln.f32[64, 64], kiln.f32[64, 64]), "k0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_kernel(module, trials=5, seed=0)
    assert 1 <= result.trials <= 5 and 0 <= result.rejected <= result.trials
    bench = KernelBench(module, seed=0)
    default_run, keep_default = bench.build(None)
    if result.steps is None:
        assert result.best_seconds == result.default_seconds
    else:
        tuned_run, keep_tuned = bench.build(result.steps)
        for got, want in zip(bench.outputs(tuned_run), bench.outputs(default_run)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
