"""Autotuning: legal search spaces, rejected wrong candidates, the database, the CLI."""

import io
import multiprocessing
import os
import random
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import yaml

import kiln
from kiln.dialects import print_ir
from kiln.passes.kernels import absolute_steps, extract, kernel_names, relative_steps, structural_hash
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.schedule import Schedule, apply_schedule
from kiln.tools import tuner
from kiln.tools.tuner import KernelBench, SearchSpace, tune_kernel
from kiln.tools.tuning_db import TuningDB, find_path, host_fingerprint


def affine(fn, *specs):
    return kiln.compile(fn).lower(*specs).module("affine").body.ops[-1]


@pytest.mark.parametrize(
    "fn, specs",
    [
        (lambda a, b: a @ b, (kiln.f32[37, 13], kiln.f32[13, 70])),
        (lambda x, y: np.tanh(x) * y, (kiln.f32[9, 41], kiln.f32[41])),
        (lambda x: x.sum(axis=1), (kiln.f64[5, 66],)),
    ],
)
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
    function = affine(lambda x, a, b: (np.tanh(x), np.tanh(a @ b)), kiln.f32[8, 8], kiln.f32[8, 4], kiln.f32[4, 8])
    kernel = kernel_names(function)[-1]
    assert "%a0[%k0.i, %k0.r]" in print_ir(extract(function, kernel))  # the kernel's arguments: a0 = a, a1 = b
    steps = [
        ["vectorize", f"{kernel}.j", 8],
        ["tile", [f"{kernel}.i", f"{kernel}.j"], [4, 4]],
        ["cache_read", f"{kernel}.j", "b"],
    ]
    relative = relative_steps(steps, kernel, function)
    assert relative == [["vectorize", "k0.j", 8], ["tile", ["k0.i", "k0.j"], [4, 4]], ["cache_read", "k0.j", "a1"]]
    assert absolute_steps(relative, kernel, function) == steps


def _record(fn, specs, steps, function_name="f"):
    function = affine(fn, *specs)
    module = extract(function, kernel_names(function)[0])
    return {
        "kernel": structural_hash(module),
        "host": host_fingerprint(),
        "function": function_name,
        "steps": steps,
        "default_ms": 1.0,
        "tuned_ms": 0.5,
        "seed": 0,
        "trials": 3,
    }


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


@pytest.mark.parametrize(
    "content, warning",
    [
        ("{not: [valid", "cannot read the tuning database"),
        ("just a string", "is not a list of records"),
        ("- {kernel: 12}\n- 7\n", "ignoring record #0"),
    ],
)
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
    source.write_text(
        textwrap.dedent("""
        import numpy as np
        import kiln

        def step(x: kiln.f32[24, 40], w: kiln.f32[40, 33]):
            return np.tanh(x @ w) * 2
    """)
    )
    db = tmp_path / "tuning.yaml"
    run = [sys.executable, "-m", "kiln", "tune"]
    result = subprocess.run(
        run + [f"{source}:step", "--trials", "6", "--db", str(db), "--seed", "3"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    # Not a terminal: no live bar, only the summary of each kernel.
    assert re.search(r"k0 \(\w+\)\n  default [\d.]+ ms, best [\d.]+ ms \([\d.]+x\), \d+ trials", result.stderr)
    assert "\r" not in result.stderr and "trial/s" not in result.stderr
    report = subprocess.run(run + ["--report", "--db", str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert report.returncode == 0 and "default ms" in report.stdout
    verify = subprocess.run(run + ["--verify", "--db", str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert "stale record(s)" in verify.stdout
    # Whether or not a faster schedule was found, the search is recorded: valid YAML with the promised fields.
    records = yaml.safe_load(db.read_text())
    fields = {"kernel", "host", "schedule", "steps", "default_ms", "tuned_ms", "seed", "trials", "tried"}
    assert len(records) == 1 and fields <= set(records[0]) and records[0]["trials"] == 6
    assert f"recorded in {db}" in result.stdout


@pytest.mark.parametrize(
    "fn, specs",
    [
        (lambda x: x - np.mean(x), (kiln.f32[16, 64],)),  # k1 reads the 0-d mean k0 wrote
        (lambda x, s: np.exp(x * s), (kiln.f32[16, 64], kiln.f32[()])),  # a 0-d input
    ],
)
def test_a_kernel_reading_a_hoisted_0d_load_is_cut_out_with_the_load(tmp_path, monkeypatch, fn, specs):
    function = affine(fn, *specs)
    kernel = kernel_names(function)[-1]
    module = extract(function, kernel)  # once a ValueError: "reads a scalar that is not a constant"
    text = print_ir(module)
    assert re.search(r"affine\.load %a\d+\[\] : memref<f32>", text), text
    result = tune_kernel(module, trials=2, seed=0)  # the cut-out kernel builds, runs and checks
    assert result.trials >= 1
    # Compiling with a tuning database that has records for this host cuts out every kernel.
    db = TuningDB(str(tmp_path / "tuning.yaml"))
    db.put({"kernel": "0" * 16, "host": host_fingerprint(), "steps": [], "default_ms": 1.0, "tuned_ms": 0.5})
    db.save()
    compiled = kiln.compile(fn, tuning_db=str(tmp_path / "tuning.yaml"))
    args = [np.linspace(-1, 1, 1024, dtype=np.float32).reshape(16, 64), np.float32(0.5)][: len(specs)]
    np.testing.assert_allclose(compiled(*args), fn(*args), rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a @ b,  # the packed panel is an argument, named b
        lambda a, b: a @ np.tanh(b),  # ... or an intermediate buffer, with no name of its own
        lambda a, b: (a + 1) @ np.tanh(b),
    ],
    ids=["argument", "intermediate", "two-intermediates"],
)
@pytest.mark.parametrize("shape", [(24, 40, 64), (7, 13, 48)])
def test_a_record_that_packs_a_buffer_is_applied_by_compile(tmp_path, fn, shape):
    m, k, n = shape
    specs = (kiln.f32[m, k], kiln.f32[k, n])
    function = affine(fn, *specs)
    matmul = [name for name in kernel_names(function) if SearchSpace(extract(function, name), 256, False).matmul_like][
        0
    ]
    module = extract(function, matmul)
    space = SearchSpace(module, 256, False)
    config = {"rows": 4, "vectors": 2, "lanes": 8, "pack": True, "columns_outside": True, "parallel": False}
    steps = space.steps(config)
    assert steps[-1] == ["cache_read", "k0.j.u", "a1"] and space.legal(config)
    path = tmp_path / "tuning.yaml"
    db = TuningDB(str(path))
    db.put(
        {
            "kernel": structural_hash(module),
            "host": host_fingerprint(),
            "function": "f",
            "steps": steps,
            "default_ms": 1.0,
            "tuned_ms": 0.5,
        }
    )
    db.save()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "no longer applies" would be an error here
        compiled = kiln.compile(fn, tuning_db=str(path))
        header = compiled.lower(*specs).text("scheduled").splitlines()[0]
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        got = compiled(a, b)
    assert f"{matmul} from the tuning database" in header and f"cache_read({matmul}.j.u, " in header
    np.testing.assert_allclose(got, fn(a.astype(np.float64), b.astype(np.float64)), rtol=1e-4, atol=1e-4)


class FakeClock:
    """Time that passes only when a run says so: timings are whatever the test decides."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _fake_bench(module, candidate_seconds):
    """A bench on a fake clock: the default schedule takes 1 ms a call, any other schedule
    `candidate_seconds(comparisons so far)`; the kernels still run, so results are checked."""
    clock = FakeClock()
    bench = KernelBench(module, clock=clock)
    real_build, real_compare, comparisons = bench.build, bench.compare, []

    def build(steps):
        run, keep = real_build(steps)

        def timed(arrays):
            run(arrays)
            clock.now += 1e-3 if steps is None else candidate_seconds(len(comparisons))

        return timed, keep

    def compare(*args, **kwargs):
        comparisons.append(args)
        return real_compare(*args, **kwargs)

    bench.build, bench.compare = build, compare
    return bench, comparisons


def _elementwise_kernel():
    return extract(affine(lambda x, y: x * y + 1, kiln.f32[16, 64], kiln.f32[64]), "k0")


def test_a_win_seen_only_in_the_first_measurement_is_not_recorded():
    module = _elementwise_kernel()
    bench, comparisons = _fake_bench(module, lambda done: 0.4e-3 if done <= 1 else 1.2e-3)
    result = tune_kernel(module, trials=4, seed=0, bench=bench)
    assert len(comparisons) >= 2  # the win was measured again before being believed
    assert result.steps is None and result.best_seconds == result.default_seconds


def test_a_steady_win_is_confirmed_and_recorded():
    module = _elementwise_kernel()
    bench, comparisons = _fake_bench(module, lambda done: 0.5e-3)
    result = tune_kernel(module, trials=4, seed=0, bench=bench)
    assert result.steps is not None and result.speedup == pytest.approx(2.0)
    # confirmed by two interleaved comparisons against the default, in opposite orders
    assert [c[-1] if len(c) > 2 else None for c in comparisons[-2:]] == [None, None]


@pytest.mark.parametrize(
    "seconds",
    [
        lambda done: 0.5e-3 if done == 0 else 1e-3,  # fast until it is compared with the incumbent
        lambda done: 1e-3,  # never faster
        lambda done: 0.99e-3,  # faster by less than the noise floor
    ],
)
def test_no_win_without_an_interleaved_confirmation(seconds):
    module = _elementwise_kernel()
    bench, _ = _fake_bench(module, seconds)
    assert tune_kernel(module, trials=3, seed=1, bench=bench).steps is None


def test_comparisons_interleave_the_two_schedules():
    order, clock = [], FakeClock()

    def run(name):
        def call(arrays):
            order.append(name)
            clock.now += 2e-3  # long enough that each sample is one call

        return call

    bench = KernelBench(_elementwise_kernel(), clock=clock)
    bench.compare(run("A"), run("B"), rounds=4)
    assert "".join(order) == "AB" + "AB" * 4  # one warm-up call each, then ABAB...
    order.clear()
    bench.compare(run("A"), run("B"), rounds=4, candidate_first=True)
    assert "".join(order) == "BA" + "BA" * 4


def test_a_candidate_that_fails_to_build_is_reported_not_hidden():
    module = _elementwise_kernel()
    bench = KernelBench(module)
    real_build = bench.build

    def broken(steps):
        if steps is None:
            return real_build(steps)
        raise ScheduleError("planted: this schedule cannot be built")

    bench.build = broken
    result = tune_kernel(module, trials=3, seed=0, bench=bench)
    assert result.steps is None and result.rejected == result.trials == len(result.failures) == 3
    assert "planted: this schedule cannot be built" in result.failures[0]

    def crashing(steps):
        if steps is None:
            return real_build(steps)
        raise TypeError("planted bug")

    bench.build = crashing
    with pytest.raises(TypeError, match="planted bug"):  # a fault in kiln itself is not swallowed
        tune_kernel(module, trials=3, seed=0, bench=bench)


def test_verify_names_why_a_record_is_stale(tmp_path):
    import io

    from kiln.tools.tuner import verify_records

    module = _elementwise_kernel()
    db = TuningDB(str(tmp_path / "tuning.yaml"))
    db.put(
        {
            "kernel": structural_hash(module),
            "host": host_fingerprint(),
            "function": "f",
            "steps": [["split", "k0.nothing", 2]],
            "default_ms": 1.0,
            "tuned_ms": 0.5,
            "kernel_ir": print_ir(module, locations=False),
        }
    )
    out = io.StringIO()
    assert verify_records(db, out) == [structural_hash(module)]
    assert "STALE: ScheduleError" in out.getvalue() and "k0.nothing" in out.getvalue()


def test_an_incumbent_with_a_spread_larger_than_its_median_can_still_be_beaten():
    # A parallel default on a loaded machine: most calls fast, some stalled for a whole
    # time slice, so its interquartile spread exceeds its median. A candidate faster in
    # every round is a win all the same (a spread-based noise margin would forbid any).
    module = _elementwise_kernel()
    clock = FakeClock()
    bench = KernelBench(module, clock=clock)
    calls = []

    def incumbent(arrays):
        calls.append(1)
        clock.now += 30e-3 if len(calls) % 3 == 0 else 2e-3

    def candidate(arrays):  # over a millisecond, like the incumbent: one call a sample
        clock.now += 1.5e-3

    comparison = bench.compare(incumbent, candidate)
    assert comparison.incumbent.spread > 1 and comparison.candidate_faster == comparison.rounds
    assert comparison.candidate_wins
    assert not bench.compare(candidate, incumbent).candidate_wins


def test_a_candidate_faster_only_in_some_rounds_does_not_win():
    clock = FakeClock()
    bench = KernelBench(_elementwise_kernel(), clock=clock)
    calls = []

    def incumbent(arrays):  # fast two rounds in five, stalled otherwise: its median is the stall
        calls.append(1)
        clock.now += 1.1e-3 if len(calls) % 5 in (1, 3) else 48e-3

    def candidate(arrays):
        clock.now += 1.5e-3

    comparison = bench.compare(incumbent, candidate)
    assert comparison.candidate.seconds < comparison.incumbent.seconds / 10
    assert comparison.candidate_faster < 0.8 * comparison.rounds and not comparison.candidate_wins


def test_bisect_replays_a_record_that_packs_an_intermediate_buffer(tmp_path):
    fn = lambda a, b: a @ np.tanh(b)  # noqa: E731
    specs = (kiln.f32[9, 12], kiln.f32[12, 32])
    function = affine(fn, *specs)
    module = extract(function, "k1")
    config = {"rows": 4, "vectors": 2, "lanes": 8, "pack": True, "columns_outside": True, "parallel": False}
    path = tmp_path / "tuning.yaml"
    db = TuningDB(str(path))
    db.put(
        {
            "kernel": structural_hash(module),
            "host": host_fingerprint(),
            "function": "f",
            "steps": SearchSpace(module, 256, False).steps(config),
            "default_ms": 1.0,
            "tuned_ms": 0.5,
        }
    )
    db.save()
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((9, 12)).astype(np.float32), rng.standard_normal((12, 32)).astype(np.float32)
    compiled = kiln.compile(fn, tuning_db=str(path))
    report = kiln.bisect(compiled, a, b)
    assert any("cache_read(k1.j.u, buf0)" in step.name for step in report.steps)  # tanh(b), named by the lowering
    assert report.first_bad is None, str(report)


def test_tuning_again_removes_a_record_that_no_longer_wins(tmp_path, monkeypatch):
    import io

    from kiln.tools import tuner

    fn = lambda x, y: x * y + 1  # noqa: E731
    specs = (kiln.f32[16, 64], kiln.f32[64])
    path = tmp_path / "tuning.yaml"
    db = TuningDB(str(path))
    db.put(_record(fn, specs, [["split", "k0.nothing", 2]]))  # cannot even be built any more
    db.save()
    monkeypatch.setattr(tuner, "tune_kernel", lambda *args, **kwargs: tuner.TuneResult(None, 1e-3, 1e-3, 2, 0))
    out = io.StringIO()
    tuner.tune_function(kiln.compile(fn), specs, db, trials=2, out=out)
    assert "no longer beats the default: replaced" in out.getvalue()
    (record,) = TuningDB(str(path)).records  # the search is recorded: the default, kept
    assert record["schedule"] == "default" and record["steps"] == [] and record["trials"] == 3 + 2


def test_verify_says_when_the_thread_count_differs_from_the_tuning_run(tmp_path, monkeypatch):
    import io

    from kiln.runtime import threads
    from kiln.tools.tuner import verify_records

    module = _elementwise_kernel()
    db = TuningDB(str(tmp_path / "tuning.yaml"))
    db.put(
        {
            "kernel": structural_hash(module),
            "host": host_fingerprint(),
            "function": "f",
            "threads": 3,
            "steps": [["split", "k0.nothing", 2]],
            "default_ms": 1.0,
            "tuned_ms": 0.5,
            "kernel_ir": print_ir(module, locations=False),
        }
    )
    monkeypatch.setattr(threads, "available", lambda: True)
    monkeypatch.setenv("KILN_NUM_THREADS", "2")
    out = io.StringIO()
    verify_records(db, out)
    assert "tuned with 3 threads, measured with 2: --threads 3" in out.getvalue()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _fake_tune_kernel(module, trials, seed, strategy, budget, progress, **_):
    for trial in range(1, trials + 1):
        progress(trial, trials, 2e-3, 3e-3, 0.1 * trial, budget)
    return tuner.TuneResult(None, 3e-3, 3e-3, trials, 0)


@pytest.mark.parametrize("stream", [Terminal, io.StringIO], ids=["terminal", "pipe"])
def test_the_progress_bar_shows_on_a_terminal_only_and_the_summary_always(tmp_path, monkeypatch, stream):
    fn = lambda x: np.tanh(x) * 2  # noqa: E731
    monkeypatch.setattr(tuner, "tune_kernel", _fake_tune_kernel)
    out = stream()
    tuner.tune_function(kiln.compile(fn), (kiln.f32[8, 8],), TuningDB(str(tmp_path / "t.yaml")), trials=4, out=out)
    text = out.getvalue()
    assert "default 3.000 ms, best 3.000 ms (1.00x), 4 trials, 0 rejected" in text
    bar = "4/4" in text and "best 2.000 ms (1.50x the default schedule)" in text
    assert bar == (stream is Terminal)


def test_the_database_is_found_in_the_documented_order(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kiln-tuning.yaml").write_text("[]\n")  # the working directory is not consulted
    monkeypatch.delenv("KILN_TUNING_DB", raising=False)
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda name, appauthor=None: str(tmp_path / "data" / name))
    assert find_path() == str(tmp_path / "data" / "kiln" / "tuning.yaml")
    assert TuningDB().path == find_path()
    monkeypatch.setenv("KILN_TUNING_DB", str(tmp_path / "env.yaml"))
    assert TuningDB().path == str(tmp_path / "env.yaml")
    assert TuningDB(str(tmp_path / "given.yaml")).path == str(tmp_path / "given.yaml")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG directories are Linux's")
def test_the_default_database_is_in_the_users_data_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("KILN_TUNING_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert find_path() == os.path.join(str(tmp_path), "kiln", "tuning.yaml")


def _record_in_own_process(path, k, barrier):
    db = TuningDB(path)  # read before any other process has saved: each sees an empty file
    barrier.wait()
    db.put({"kernel": f"kernel{k}", "host": "h", "steps": [["split", "k0.i", k + 2]], "default_ms": 1, "tuned_ms": 0.5})
    db.save()


def test_processes_saving_at_once_keep_every_record(tmp_path):
    path = str(tmp_path / "deep" / "tuning.yaml")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(6)
    processes = [context.Process(target=_record_in_own_process, args=(path, k, barrier)) for k in range(6)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0
    records = yaml.safe_load(open(path))  # one well-formed YAML list
    assert sorted(r["kernel"] for r in records) == [f"kernel{k}" for k in range(6)]
    assert {r["kernel"]: r["steps"] for r in records} == {f"kernel{k}": [["split", "k0.i", k + 2]] for k in range(6)}


def test_save_merges_with_what_another_process_wrote_meanwhile(tmp_path):
    path = str(tmp_path / "tuning.yaml")
    first, second = TuningDB(path), TuningDB(path)
    first.put({"kernel": "a", "host": "h", "steps": [], "default_ms": 1, "tuned_ms": 0.5})
    first.put({"kernel": "b", "host": "h", "steps": [], "default_ms": 1, "tuned_ms": 0.5})
    first.save()
    second.put({"kernel": "c", "host": "h", "steps": [], "default_ms": 1, "tuned_ms": 0.5})
    second.remove("a", "h")
    second.save()
    assert [r["kernel"] for r in yaml.safe_load(open(path))] == ["b", "c"]
    assert [r["kernel"] for r in second.records] == ["b", "c"]


# ----- a search that keeps the default is recorded, says why it stopped, and resumes -----


class TinySpace:
    """A search space of `size` schedules (split k0.i by 2, 4, ...), or none at all."""

    def __init__(self, size):
        self.configs = [{"split": 2 ** (k + 1)} for k in range(size)]

    def random(self, rng):
        return rng.choice(self.configs) if self.configs else None

    mutate = lambda self, config, rng: self.random(rng)  # noqa: E731

    def steps(self, config):
        return [["split", "k0.i", config["split"]]]


@pytest.mark.parametrize(
    "trials, budget, space, stopped",
    [
        (0, None, 5, "the trial count is 0"),
        (5, 0.0, 5, "the time budget (0 s for this kernel) ran out"),
        (5, None, 0, "the search space holds no schedule to try"),
        (7, None, 2, "every schedule drawn was tried already (2 so far, earlier runs' included)"),
        (2, None, 5, ""),  # it ran its trials
    ],
)
def test_a_search_says_why_it_stopped(trials, budget, space, stopped):
    module = _elementwise_kernel()
    bench, _ = _fake_bench(module, lambda done: 1e-3)  # never faster
    result = tune_kernel(module, trials, seed=0, time_budget=budget, bench=bench, space=TinySpace(space))
    assert result.stopped == stopped and result.steps is None
    assert result.trials == (min(trials, space) if budget is None else 0) == len(result.tried)
    text = tuner._trials_text(result, trials)
    assert (f"; no trial: {stopped}" in text) == (result.trials == 0 and bool(stopped)), text


def test_a_resumed_search_skips_what_the_first_run_tried():
    module = _elementwise_kernel()
    bench, _ = _fake_bench(module, lambda done: 1e-3)
    first = tune_kernel(module, 3, seed=0, bench=bench, space=TinySpace(8))
    second = tune_kernel(module, 3, seed=0, bench=bench, space=TinySpace(8), tried=first.tried)
    assert len(first.tried) == 3 and second.trials == 3
    assert set(first.tried) < set(second.tried) and len(second.tried) == 6  # three new candidates
    third = tune_kernel(module, 5, seed=0, bench=bench, space=TinySpace(8), tried=second.tried)
    assert third.trials == 2 and "tried already (8 so far" in third.stopped


def test_kiln_tune_records_the_default_kept_and_a_second_run_resumes(tmp_path, monkeypatch, capsys):
    from kiln.tools import cli

    calls = []

    def no_win(module, trials, seed, strategy, budget, progress, initial_steps=None, tried=(), **_):
        calls.append((initial_steps, list(tried)))
        return tuner.TuneResult(
            None, 2e-3, 2e-3, trials, 0, tried=[*tried, *(f"c{len(tried) + k}" for k in range(trials))]
        )

    monkeypatch.setattr(tuner, "tune_kernel", no_win)
    source = tmp_path / "model.py"
    source.write_text("import numpy as np\nimport kiln\n\ndef f(x: kiln.f32[16, 64]):\n    return np.tanh(x) * 2\n")
    db = tmp_path / "db.yaml"
    for _ in range(2):
        assert cli.main(["tune", f"{source}:f", "--trials", "3", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert "kept the default schedule (2.000 ms): no schedule beat it in two interleaved comparisons; " in err
    assert "3 trials tried in all" in err and "6 trials tried in all" in err and "resuming from the database" in err
    assert (
        out.splitlines() == [f"1 kernel searched: 0 with a faster schedule, 1 kept the default; recorded in {db}"] * 2
    )
    (record,) = yaml.safe_load(db.read_text())
    assert (record["schedule"], record["steps"], record["trials"]) == ("default", [], 6)
    assert record["default_ms"] == record["tuned_ms"] == 2.0 and len(record["tried"]) == 6
    assert calls == [(None, []), (None, ["c0", "c1", "c2"])]  # the second run starts where the first stopped


def test_kiln_tune_with_no_trials_says_so(tmp_path, capsys):
    from kiln.tools import cli

    source = tmp_path / "model.py"
    source.write_text("import numpy as np\nimport kiln\n\ndef f(x: kiln.f32[16, 64]):\n    return np.tanh(x) * 2\n")
    db = tmp_path / "db.yaml"
    assert cli.main(["tune", f"{source}:f", "--trials", "0", "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert "0 trials, 0 rejected; no trial: the trial count is 0" in err
    assert "kept the default schedule (" in err and "): nothing was tried; 0 trials tried in all" in err
    assert db.exists()


def test_compile_applies_the_default_for_a_record_that_kept_it(tmp_path):
    fn = lambda x, y: np.tanh(x) * y + 2  # noqa: E731
    specs = (kiln.f32[16, 64], kiln.f32[64])
    path = tmp_path / "tuning.yaml"
    db = TuningDB(str(path))
    db.put({**_record(fn, specs, []), "schedule": "default", "tuned_ms": 1.0})
    db.save()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned = kiln.compile(fn, tuning_db=str(path))
        header = tuned.lower(*specs).text("scheduled").splitlines()[0]
        x, y = np.random.default_rng(0).standard_normal((16, 64), np.float32), np.linspace(-2, 2, 64, dtype=np.float32)
        got = tuned(x, y)
    plain = kiln.compile(fn, tuning_db=False).lower(*specs).text("scheduled").splitlines()[0]
    assert header == plain and "tuning database" not in header  # the default schedule, as without a record
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64)) * y + 2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"schedule": "best"}, "'schedule' is neither tuned nor default"),
        ({"schedule": "default", "steps": [["split", "k0.i", 2]]}, "kept the default schedule has steps"),
        ({"tried": "abc"}, "'tried' is not a list"),
    ],
)
def test_a_malformed_default_record_is_ignored_with_a_warning(tmp_path, fields, problem):
    path = tmp_path / "tuning.yaml"
    record = {"kernel": "k", "host": "h", "steps": [], "default_ms": 1.0, "tuned_ms": 1.0, **fields}
    path.write_text(yaml.safe_dump([record]))
    with pytest.warns(RuntimeWarning, match=re.escape(problem)):
        assert TuningDB(str(path)).records == []
