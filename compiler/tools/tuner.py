"""Autotuning: search each kernel's schedule space, measure, keep what is faster.

A kernel is cut out of its function (``kernels.extract``) and compiled alone
under candidate schedules. A candidate counts only if its outputs equal those
of the kernel under its default schedule on random inputs, and it replaces the
best only if it beats it in an interleaved comparison (``KernelBench.compare``);
the final best must beat the default in two (``confirmed_win``). The search is
evolutionary: candidates are parameter sets of a schedule recipe (rows and
vectors of a register block, packing, loop order, vector width, unrolling,
threads); each new one mutates a good one found so far, with some random ones
mixed in.

What is searched, how it is timed and what keys the records is a tuning target's
(``CpuTuning`` here; ``kiln.tools.gpu_tuner.GpuTuning`` for the CUDA backend, whose
candidates are GPU schedules timed with CUDA events and keyed by the GPU).
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import sys
import time

import numpy as np
from tqdm import tqdm

from kiln.codegen import llvm_codegen, llvm_emitter, llvm_target
from kiln.codegen.constant_pool import ConstantPool, pool_symbol
from kiln.dialects import parse_ir, print_ir
from kiln.dialects.traits import AFFINE_WRITE
from kiln.errors import KilnError
from kiln.passes.kernels import extract, kernel_names, structural_hash
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.registry import run_passes
from kiln.passes.schedule import Schedule
from kiln.pipeline import run_pipeline
from kiln.runtime import threads
from kiln.runtime.native import LoadedObject
from kiln.scheduling import Scheduler
from kiln.target import TARGETS
from kiln.tools.tuning_db import DEFAULT_KEPT
from kiln.tools.tuning_space import SearchSpace, config_digest
from kiln.version import __version__


# -- measuring -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Measurement:
    seconds: float  # median
    spread: float  # relative: (p75 - p25) / median


def _summary(samples) -> Measurement:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [min(samples), 0, max(samples)]
    median = statistics.median(samples)
    return Measurement(median, (q[2] - q[0]) / median if median else 0.0)


@dataclasses.dataclass
class Comparison:
    """Incumbent and candidate timed in alternation (ABAB...): a load that comes and goes
    slows both alike, so only the schedules themselves can make one faster. The candidate
    wins when its median is lower by more than 2% and it was the faster one in at least
    80% of the rounds (a paired sign test: by chance, 17 of 21 happens less than 1% of the
    time). Rounds, not spreads, decide: under load a parallel schedule's times can be
    bimodal, with a spread larger than its median."""

    incumbent: Measurement
    candidate: Measurement
    rounds: int = 0
    candidate_faster: int = 0  # rounds in which the candidate took less time

    @property
    def candidate_wins(self) -> bool:
        return (
            self.candidate.seconds < self.incumbent.seconds * (1 - MIN_GAIN)
            and self.candidate_faster >= 0.8 * self.rounds
        )


MIN_GAIN = 0.02  # smaller differences are not worth a record


def schedule_kernel(module, target, steps):
    """`module` (an extracted kernel at the affine stage, changed in place) through `target`'s
    ``scheduled`` stage: scheduled by `steps` (a list), or by the target's default if None, as
    ``kiln.compile`` schedules it (the same ``run_pipeline``, no tuning records)."""
    schedule = None if steps is None else Schedule(steps)
    return run_pipeline(module, target, "scheduled", start_after="affine", scheduler=Scheduler(target, schedule))


class KernelBench:
    """Compiles an extracted kernel under a schedule, runs it on fixed random inputs.
    `clock` (seconds, like time.perf_counter) is what every measurement reads."""

    target = TARGETS["cpu"]  # whose scheduled stage `build` runs

    def __init__(self, module, seed: int = 0, clock=time.perf_counter):
        self.module = module
        self.clock = clock
        function = module.body.ops[-1]
        rng = np.random.default_rng(seed)
        self.initial = []
        for arg in function.arguments:
            t = arg.type
            if t.dtype.kind == "f":
                self.initial.append(rng.standard_normal(t.shape).astype(t.dtype))
            elif t.dtype.kind == "b":
                self.initial.append(rng.random(t.shape) < 0.5)
            else:
                self.initial.append(rng.integers(-8, 8, t.shape).astype(t.dtype))
        self.written = sorted(
            {
                function.arguments.index(op.memref)
                for op in function.walk()
                if op.has_trait(AFFINE_WRITE) and op.memref in function.arguments
            }
        )

    def build(self, steps):
        """A callable running the kernel scheduled by `steps` (a list), or by the default if None."""
        module = run_passes(schedule_kernel(self.module.clone({}), self.target, steps), self.target.codegen_passes)
        tm = llvm_target.host_target_machine()
        pool = ConstantPool.of(module, pool_symbol(llvm_emitter.symbol_name("kernel")))
        llvm_ir = str(llvm_codegen.emit_module(module, tm.triple, str(tm.target_data), pool=pool))
        code = llvm_target.parse_and_verify(llvm_ir)
        llvm_target.optimize(code)
        loaded = LoadedObject(llvm_target.emit_object(code), {pool.symbol: pool.buffer()} if pool else None)
        native = loaded.function(llvm_emitter.symbol_name("kernel"), len(self.initial))
        return lambda arrays: native(arrays), loaded

    def arrays(self) -> list:
        """Fresh copies of the inputs, for one schedule's runs."""
        return [a.copy() for a in self.initial]

    def host(self, array) -> np.ndarray:
        """An array of `arrays()` as numpy sees it."""
        return array

    def time_calls(self, run, arrays, calls: int = 1) -> float:
        """Seconds that `calls` runs of `run` on `arrays` take, one after the other."""
        start = self.clock()
        for _ in range(calls):
            run(arrays)
        return self.clock() - start

    def outputs(self, run) -> list:
        arrays = self.arrays()
        run(arrays)
        return [self.host(arrays[k]) for k in self.written]

    def measure(self, run, budget: float = 0.25, cutoff: float = None) -> Measurement:
        """One schedule alone: a quick screen, not evidence of a win (see compare)."""
        clock = self.clock
        arrays = self.arrays()
        run(arrays)
        samples, started = [], clock()
        while len(samples) < 5 or (clock() - started < budget and len(samples) < 200):
            samples.append(self.time_calls(run, arrays))
            if cutoff is not None and len(samples) >= 2 and min(samples) > cutoff:
                break  # far slower than the best: no need to know by how much
        return _summary(samples)

    def compare(self, incumbent, candidate, rounds: int = 21, candidate_first: bool = False) -> Comparison:
        """Time the two alternately for `rounds` rounds, each on arrays of its own; each
        sample runs a batch long enough (about a millisecond) for the clock to resolve it."""
        runs = [candidate, incumbent] if candidate_first else [incumbent, candidate]
        arrays = [self.arrays() for _ in runs]
        batch = 1
        for run, own in zip(runs, arrays):
            batch = max(batch, min(1000, int(1e-3 / max(self.time_calls(run, own), 1e-9))))
        samples = [[], []]
        for _ in range(rounds):
            for k, (run, own) in enumerate(zip(runs, arrays)):
                samples[k].append(self.time_calls(run, own, batch) / batch)
        if candidate_first:
            samples.reverse()
        faster = sum(c < i for i, c in zip(*samples))
        return Comparison(_summary(samples[0]), _summary(samples[1]), rounds, faster)

    def confirmed_win(self, incumbent, candidate) -> tuple:
        """(whether `candidate` wins two independent comparisons, the second comparison):
        the second runs in the opposite order, so neither going first nor a passing
        burst of load can produce a win on its own."""
        first = self.compare(incumbent, candidate)
        if not first.candidate_wins:
            return False, first
        second = self.compare(incumbent, candidate, candidate_first=True)
        return second.candidate_wins, second


def same_outputs(a, b) -> bool:
    for x, y in zip(a, b):
        if x.dtype.kind == "f":
            if not np.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


# -- the search ----------------------------------------------------------------------------------
@dataclasses.dataclass
class TuneResult:
    steps: list  # kernel-relative (k0) steps of the best schedule found
    default_seconds: float
    best_seconds: float
    trials: int
    rejected: int  # wrong results or failed compilations
    interrupted: bool = False
    failures: list = dataclasses.field(default_factory=list)  # why candidates failed to build, one line each
    stopped: str = ""  # why the search ended before its trials were done ("" when they were)
    tried: list = dataclasses.field(default_factory=list)  # config_digest of every candidate, earlier runs' too

    @property
    def speedup(self) -> float:
        return self.default_seconds / self.best_seconds


def tune_kernel(
    module,
    trials: int = 50,
    seed: int = 0,
    strategy: str = "evolution",
    time_budget: float = None,
    progress=None,
    bench: KernelBench = None,
    initial_steps=None,
    space=None,
    tried=(),
) -> TuneResult:
    """Search `module`'s (one extracted kernel's) schedules; `initial_steps` (a previous
    record) is the best to beat from the start, and `tried` (its ``tried``) the candidates an
    earlier run measured, which this one skips: a second run resumes the search. `space` and `bench` are the CPU's
    (``SearchSpace``, ``KernelBench``) unless given (``kiln.tools.gpu_tuner``'s for the GPU).

    A candidate is screened alone; one that looks faster than the best so far must beat it
    in an interleaved comparison to take its place, and the final best must beat the
    default schedule in two independent interleaved comparisons (`confirmed_win`) before
    it is returned: otherwise the result is the default (steps None)."""
    space = space or SearchSpace(module, llvm_target.vector_bits(), threads.available())
    bench = bench or KernelBench(module, seed)
    # A resumed search draws a stream of its own: the first run's stream would offer again the
    # candidates it already measured, and only those, for as long as that run went.
    rng = random.Random(f"{seed}:{len(tried)}" if tried else seed)
    run, keep_default = bench.build(None)
    reference = bench.outputs(run)
    default = bench.measure(run)
    best_steps, best, best_run, keep = None, default, run, keep_default
    speedup = 1.0  # of the best over the default, from interleaved comparisons only
    measured, rejected, seen, failures = [], 0, set(tried), []
    stopped = "" if trials > 0 else "the trial count is 0"
    if initial_steps:
        try:
            candidate, keep_initial = bench.build(initial_steps)
            outputs = bench.outputs(candidate)
        except (ScheduleError, KilnError, ValueError, RuntimeError) as exc:
            failures.append(f"the previous record no longer builds or runs ({type(exc).__name__}: {exc})")
        else:
            comparison = bench.compare(run, candidate) if same_outputs(outputs, reference) else None
            if comparison is not None and comparison.candidate_wins:
                best, best_steps, best_run, keep = comparison.candidate, list(initial_steps), candidate, keep_initial
                speedup = comparison.incumbent.seconds / comparison.candidate.seconds
    started = time.perf_counter()
    interrupted = False
    try:
        for trial in range(1, trials + 1):
            if time_budget is not None and time.perf_counter() - started > time_budget:
                stopped = f"the time budget ({time_budget:.3g} s for this kernel) ran out"
                break
            config = _next_config(space, measured, rng, strategy, seen)
            if config is None:
                stopped = (
                    "the search space holds no schedule to try"
                    if not seen
                    else f"every schedule drawn was tried already ({len(seen)} so far, earlier runs' included)"
                )
                break
            seen.add(config_digest(config))
            steps = space.steps(config)
            try:
                candidate, keep_candidate = bench.build(steps)
                outputs = bench.outputs(candidate)
            except (ScheduleError, KilnError, ValueError, RuntimeError) as exc:
                # The space holds legal schedules only, so this is a fault in kiln (or, on a GPU,
                # a launch the device refuses, such as too many registers for its threads): say it.
                rejected += 1
                failures.append(f"{_spell(steps)}: {type(exc).__name__}: {exc}")
                continue
            if not same_outputs(outputs, reference):
                rejected += 1
                continue
            result = bench.measure(candidate, cutoff=4 * best.seconds)
            measured.append((result.seconds, config))
            if result.seconds < best.seconds * (1 - MIN_GAIN):  # a screen: the comparison decides
                comparison = bench.compare(best_run, candidate)
                if comparison.candidate_wins:
                    speedup *= comparison.incumbent.seconds / comparison.candidate.seconds
                    best, best_steps, best_run, keep = comparison.candidate, steps, candidate, keep_candidate
                else:  # the best's own screen may have caught a burst of load: keep the fresher time
                    best = comparison.incumbent
                    if best_steps is None:
                        default = best
            if progress is not None:
                progress(
                    trial, trials, best.seconds, best.seconds * speedup, time.perf_counter() - started, time_budget
                )
    except KeyboardInterrupt:
        interrupted = True
    if best_steps is not None:
        won, final = bench.confirmed_win(run, best_run)
        default, best = final.incumbent, final.candidate
        if not won:
            best_steps, best = None, default
    del keep, keep_default
    return TuneResult(
        best_steps,
        default.seconds,
        best.seconds,
        len(measured) + rejected,
        rejected,
        interrupted,
        failures,
        "interrupted" if interrupted else stopped,
        sorted(seen),
    )


def _spell(steps) -> str:
    return "; ".join(f"{s[0]}({', '.join(map(str, s[1:]))})" for s in steps) or "no steps"


def _next_config(space, measured, rng, strategy, seen):
    for _ in range(20):
        if strategy == "random" or len(measured) < 4 or rng.random() < 0.2:
            config = space.random(rng)
        else:
            ranked = sorted(measured, key=lambda m: m[0])[: max(2, len(measured) // 4)]
            config = space.mutate(rng.choice(ranked)[1], rng)
        if config is None:
            return None
        if config_digest(config) not in seen:
            return config
    return None


class TrialBar(tqdm):
    """A bar over one kernel's `trials` on `stream`, silent unless `stream` is a terminal.
    `show` is `tune_kernel`'s `progress`: trial k of N, the best time and its speed-up over
    the default schedule, and with a time budget the seconds left of it.

    >>> with TrialBar(100, label="k0") as bar:
    ...     tune_kernel(module, 100, progress=bar.show)
    """

    def __init__(self, trials: int, stream=sys.stderr, label: str = ""):
        # A trial takes a quarter of a second or more (build, check, measure): draw every one.
        super().__init__(
            total=trials,
            desc=label,
            unit="trial",
            file=stream,
            disable=None,
            leave=False,
            dynamic_ncols=True,
            mininterval=0,
            bar_format="{desc}: {bar:20}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]{postfix}",
        )

    def show(self, trial, trials, best, default, elapsed, budget) -> None:
        left = f", {max(0.0, budget - elapsed):.0f} s of the budget left" if budget else ""
        self.set_postfix_str(f"best {best * 1e3:.3f} ms ({default / best:.2f}x the default schedule){left}", False)
        self.update(trial - self.n)


class CpuTuning:
    """What tuning for the host CPU searches and measures with, and what keys its records.
    ``kiln.tools.gpu_tuner.GpuTuning`` is the same for target cuda and cuda-emulate."""

    target = TARGETS["cpu"]
    description = "this CPU"

    def host(self) -> str:
        return self.target.fingerprint()

    def space(self, module):
        """The kernel's search space, or None when it has nothing to search."""
        return SearchSpace(module, llvm_target.vector_bits(), threads.available())

    def bench(self, module, seed: int = 0) -> KernelBench:
        return KernelBench(module, seed)

    def notes(self) -> dict:
        """Fields a record keeps about how it was measured."""
        return {"threads": threads.thread_count() if threads.available() else 1}


def _trials_text(result: TuneResult, trials: int) -> str:
    """The search's numbers, and why it stopped early when it did (0 trials says why)."""
    text = (
        f"default {result.default_seconds * 1e3:.3f} ms, best {result.best_seconds * 1e3:.3f} ms "
        f"({result.speedup:.2f}x), {result.trials} trial{'' if result.trials == 1 else 's'}, "
        f"{result.rejected} rejected"
    )
    if result.stopped and result.stopped != "interrupted":
        text += f"; no trial: {result.stopped}" if result.trials == 0 else f"; stopped early: {result.stopped}"
    return text


def tune_function(
    compiled,
    specs,
    db,
    trials: int,
    seed: int = 0,
    time_budget: float = None,
    strategy: str = "evolution",
    out=None,
    tuning=None,
) -> list:
    """Tune every kernel of `compiled` at `specs`, recording each search in `db` (saved after each):
    the schedule found, or the default kept (``schedule: default``), with the candidates tried,
    which a later run skips.
    `tuning` is ``CpuTuning()`` unless given (``gpu_tuner.GpuTuning`` for a function compiled
    for the GPU, whose affine kernels it searches)."""
    out = out or sys.stderr  # looked up at call time, so a redirected stderr gets the report
    tuning = tuning or CpuTuning()
    function = compiled.lower(*specs).module("affine").body.ops[-1]
    host = tuning.host()
    names = kernel_names(function)
    budget = None if time_budget is None else time_budget / max(1, len(names))
    results = []
    if tuning.target.gpu:
        out.write(f"tuning for {tuning.description}\n")
    for kernel in names:
        module = extract(function, kernel)
        key = structural_hash(module)
        previous = db.lookup(key, host)
        out.write(f"{compiled.__name__} {kernel} ({key}){' resuming from the database' if previous else ''}\n")
        space = tuning.space(module)
        if space is None:
            out.write("  nothing to search: no loop of this kernel can be mapped differently\n")
            continue
        kept_default = previous is not None and previous.get("schedule") == DEFAULT_KEPT
        with TrialBar(trials, out, f"  {kernel}") as bar:
            result = tune_kernel(
                module,
                trials,
                seed,
                strategy,
                budget,
                bar.show,
                initial_steps=previous["steps"] if previous and not kept_default else None,
                space=space,
                bench=tuning.bench(module, seed),
                tried=(previous or {}).get("tried", []),
            )
        out.write(f"  {_trials_text(result, trials)}\n")
        if result.failures:
            out.write(f"  {len(result.failures)} schedule(s) failed to build; the first: {result.failures[0]}\n")
        record = {
            "kernel": key,
            "host": host,
            "function": compiled.__name__,
            "schedule": DEFAULT_KEPT if result.steps is None else "tuned",
            "steps": result.steps or [],
            "default_ms": round(result.default_seconds * 1e3, 6),
            "tuned_ms": round(result.best_seconds * 1e3, 6),
            "seed": seed,
            "trials": result.trials + (previous or {}).get("trials", 0),
            "tried": result.tried,
            "kiln": __version__,
            **tuning.notes(),
            "kernel_ir": print_ir(module, locations=False),
        }
        db.put(record)
        db.save()
        if result.steps is not None:
            out.write(
                f"  recorded the schedule found ({result.speedup:.2f}x; {record['trials']} trials in all) "
                f"in {db.path}\n"
            )
        else:
            if previous and not kept_default:  # compile would go on using a schedule that no longer wins
                out.write("  the previous record's schedule no longer beats the default: replaced\n")
            why = "nothing was tried" if result.trials == 0 else "no schedule beat it in two interleaved comparisons"
            out.write(
                f"  kept the default schedule ({result.default_seconds * 1e3:.3f} ms): {why}; "
                f"{record['trials']} trials tried in all; recorded in {db.path}\n"
            )
        results.append((kernel, result))
        if result.interrupted:
            out.write("interrupted: what was found so far is saved\n")
            break
    return results


def verify_records(db, out=sys.stdout, tuning=None) -> list:
    """Re-measure and re-check every record for this host (for `tuning`'s target: the CPU
    unless given); returns the stale ones' keys."""
    tuning = tuning or CpuTuning()
    stale = []
    for record in db.for_host(tuning.host()):
        try:
            module = parse_ir(record.get("kernel_ir", ""))
            bench = tuning.bench(module)
            run, keep = bench.build(None)
            tuned_run, keep2 = (run, keep) if record.get("schedule") == DEFAULT_KEPT else bench.build(record["steps"])
        except (ScheduleError, KilnError, ValueError, RuntimeError) as exc:  # cannot even be rebuilt
            verdict = f"STALE: {type(exc).__name__}: {exc}"
        else:
            verdict = None
        if verdict is None and record.get("schedule") == DEFAULT_KEPT:
            # Nothing to re-measure: the record says the search found nothing faster than the
            # default, which compile applies anyway; a new search (kiln tune) re-examines it.
            verdict = f"ok (the default schedule, kept after {record.get('trials', 0)} trials)"
        elif verdict is None:
            if not same_outputs(bench.outputs(tuned_run), bench.outputs(run)):
                verdict = "STALE: wrong results"
            else:
                # The same interleaved comparison that recorded the win, so a verdict of
                # "stale" means the win is gone, not that the load changed between the two.
                comparison = bench.compare(run, tuned_run)
                default, tuned = comparison.incumbent.seconds, comparison.candidate.seconds
                verdict = (
                    f"ok ({default / tuned:.2f}x)"
                    if comparison.candidate_wins
                    else f"STALE: no longer faster ({default * 1e3:.3f} vs {tuned * 1e3:.3f} ms)"
                )
        now = tuning.notes().get("threads")
        if record.get("threads", now) != now:  # parallel schedules' times depend on it
            verdict += f" (tuned with {record['threads']} threads, measured with {now}: --threads {record['threads']})"
        if verdict.startswith("STALE"):
            stale.append(record["kernel"])
        out.write(f"{record.get('function', '?'):<20} {record['kernel']}  {verdict}\n")
    return stale
