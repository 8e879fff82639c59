"""Find the first pass that changes a function's numbers.

``kiln.bisect(fn, *args)`` runs the pipeline one pass (and one schedule step)
at a time and executes the IR after each on the same inputs: the tensor
stages with the tensor interpreter, the affine and scheduled stages with the
affine interpreter, and finally the native code. The reference is the traced
tensor IR, interpreted. The report names the first step whose results drift
from it, with the IR before and after that step.

The affine interpreter runs one scalar op at a time (tens of microseconds
each), so the cost is known before starting: the scalar ops one run executes
(loop trip counts multiplied out) times the runs (the lowering and each
schedule step) times the interpreter's measured speed. ``progress`` hears the
estimate first and then each step as it finishes, with the time left
(``StepBar`` draws the steps as a bar on a terminal, as ``kiln bisect`` does);
``shrink_specs`` finds smaller input shapes, same ranks, whose estimate fits
a budget (what ``kiln bisect`` does by default).
"""

from __future__ import annotations

import functools
import re
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from kiln.dialects import affine as A
from kiln.dialects import parse_ir, print_ir
from kiln.dialects import tensor as T
from kiln.dialects.traits import TERMINATOR
from kiln.errors import ArgumentError, KilnError
from kiln.frontend import pytree
from kiln.frontend.specs import TensorSpec
from kiln.frontend.tracing import is_tracing
from kiln.interpreters.affine_interpreter import run_affine
from kiln.interpreters.tensor_interpreter import run_function
from kiln.jit import CompiledFunction, compile
from kiln.passes.kernels import restore_buffer_names
from kiln.pipeline import run_pipeline
from kiln.scheduling import Scheduler


@dataclass
class Step:
    name: str  # "cse", "lower-tensor-to-affine", "schedule: split(k0.i, 8)", "native code"
    error: float  # the largest difference from the reference, relative to its magnitude
    ok: bool
    failure: str = ""  # what the run raised, if it could not finish (an out-of-bounds access...)


@dataclass
class BisectReport:
    """What ``kiln.bisect`` found: every step it checked (``steps``), the first one whose
    output differed from numpy's (``first_bad``, or None), and the IR around it.

    >>> kiln.bisect(lambda x: x + 1, np.zeros(3, np.float32)).first_bad is None
    True
    """

    function: str
    steps: list = field(default_factory=list)
    first_bad: Step | None = None
    ir_before: str = ""
    ir_after: str = ""

    def __str__(self) -> str:
        lines = [f"kiln bisect of {self.function}: {len(self.steps)} steps checked against the traced IR"]
        for step in self.steps:
            detail = step.failure or f"max error {step.error:.3g}"
            lines.append(f"  {'ok ' if step.ok else 'BAD'}  {step.name:<40s} {detail}")
        if self.first_bad is None:
            lines.append("every step keeps the reference's numbers")
        else:
            lines.append(f"first step that changes the numbers: {self.first_bad.name}")
            lines.append("----- IR before -----")
            lines.append(self.ir_before.rstrip())
            lines.append("----- IR after -----")
            lines.append(self.ir_after.rstrip())
        return "\n".join(lines)


LONG = 60.0  # seconds: a bisection estimated to take longer than this says so before it starts


@dataclass
class Estimate:
    """What a bisection will cost, dominated by the affine interpreter."""

    runs: int  # affine interpreter runs: the lowering, then one per schedule step
    ops: int  # scalar ops one run executes
    seconds_per_op: float

    @property
    def seconds(self) -> float:
        return self.runs * self.ops * self.seconds_per_op

    def __str__(self) -> str:
        return (
            f"about {duration(self.seconds)} ({self.runs} runs of the affine interpreter over "
            f"{self.ops:.3g} scalar ops each, at {self.seconds_per_op * 1e6:.0f} us an op)"
        )


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def interpreter_ops(module) -> int:
    """Ops one run of the affine interpreter executes on `module`'s function, a vector op
    counting as one (a loop bounded by a min counts its longest trip)."""
    total, work = 0, [(op, 1) for op in module.body.ops[-1].body.ops]
    while work:
        op, times = work.pop()
        if op.has_trait(TERMINATOR):  # they end a block rather than run
            continue
        total += times
        if isinstance(op, A.ForOp):
            times *= max(op.trip_count, 0)
        elif isinstance(op, A.ParallelOp):
            times *= max(op.upper, 0)
        work.extend((inner, times) for region in op.regions for block in region.blocks for inner in block.ops)
    return total


_CALIBRATION = """module {
  func.func @f(%a: memref<12x12xf32>, %b: memref<12x12xf32>, %out0: memref<12x12xf32>) {
    %0 = arith.constant 0.0 : f32
    affine.for %i = 0 to 12 {
      affine.for %j = 0 to 12 {
        %1 = affine.for %r = 0 to 12 iter_args(%acc = %0) -> (f32) {
          %2 = affine.load %a[%i, %r] : memref<12x12xf32>
          %3 = affine.load %b[%r, %j] : memref<12x12xf32>
          %4 = arith.mulf %2, %3 : f32
          %5 = arith.addf %acc, %4 : f32
          affine.yield %5 : f32
        }
        affine.store %1, %out0[%i, %j] : memref<12x12xf32>
      }
    }
    func.return
  }
}"""


@functools.lru_cache(maxsize=None)
def seconds_per_op() -> float:
    """The affine interpreter's speed on this machine, from a small matmul (the fastest of three)."""
    module = parse_ir(_CALIBRATION)
    inputs = [np.ones((12, 12), np.float32)] * 2
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        run_affine(module, inputs)
        best = min(best, time.perf_counter() - started)
    return best / interpreter_ops(module)


def estimate(pipeline) -> Estimate:
    """The cost of bisecting `pipeline`'s function (its schedule is decided on the way)."""
    pipeline.module("scheduled")
    return Estimate(1 + len(pipeline.schedule.steps), interpreter_ops(pipeline.module("affine")), seconds_per_op())


def shrink_specs(compiled, specs, seconds: float) -> tuple:
    """(specs, their estimate): `specs` themselves if bisecting at them is estimated to take at
    most `seconds`, else the same ranks with smaller extents. Every extent above 3 is scaled by
    one factor, so extents that were equal stay equal (the shapes of a matmul or a broadcast
    still agree) and ones stay ones; the factor falls until the estimate fits, or until the
    function refuses the shapes (then the last shapes it took are returned)."""
    current = estimate(compiled.lower(*specs).pipeline)
    best = (specs, current)
    leaves, treedef = pytree.flatten(list(specs))
    scale = 1.0
    for _ in range(12):
        if current.seconds <= seconds:
            break
        # loop nests are up to three deep (a matmul): cost ~ scale**3
        scale *= min(0.9, max(0.1, (seconds / current.seconds) ** (1 / 3)))
        shrunk = [
            TensorSpec(tuple(e if e <= 3 else max(3, round(e * scale)) for e in leaf.shape), leaf.dtype)
            for leaf in leaves
        ]
        candidate = pytree.unflatten(treedef, shrunk)
        try:
            current = estimate(compiled.lower(*candidate).pipeline)
        except KilnError:
            break
        best = (candidate, current)
        if all(max(leaf.shape, default=0) <= 3 for leaf in shrunk):
            break
    return best


# How far a step may move a result computed in each float type (relative to 1 + |value|): a few
# hundred units in the last place, the room reassociated sums and fused multiply-adds take.
TOLERANCES = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-9}


def computed_tolerance(function) -> float:
    """The tolerance for `function`'s results: that of the least precise float type any op
    on the way to them computes in, not that of the results' own types.
    ``(a @ b).astype(np.float64)`` of float32 matrices is a float32 matmul: its float64 result
    carries float32's rounding, which lowering and schedules may change (summation order,
    fused multiply-adds). Arguments and constants are given, not computed: float32 arguments
    cast to float64 first are a float64 computation."""
    precise = TOLERANCES[np.dtype(np.float64)]
    work, seen, tolerance = list(function.body.ops[-1].operands), set(), precise
    while work:  # from the returned values back through every operand that reaches them
        value = work.pop()
        producer = getattr(value, "op", None)
        if id(value) in seen or producer is None or isinstance(producer, T.ConstantOp):
            continue
        seen.add(id(value))
        tolerance = max(tolerance, TOLERANCES.get(np.dtype(value.type.dtype), precise))
        work.extend(producer.operands)
    return tolerance


def bisect(fn, *args, rtol: float | None = None, progress=None) -> BisectReport:
    """Check every pass and schedule step of `fn` (compiled or plain) on these arguments.

    Runs the IR after each graph pass, the lowering and each schedule step (in the reference
    interpreters) against numpy's answer for `args`, and returns a ``BisectReport`` naming the
    first step whose output differs, with the IR before and after it (``first_bad`` is None
    when every step agrees). `progress`, a callable taking a line of text, hears the estimated
    cost before the first step and then every step as it finishes: which, n of m, time
    elapsed and left. `rtol`, the largest error allowed relative to 1 + |value|, defaults to
    that of the least precise float type the results are computed in (``computed_tolerance``).
    Arguments kiln cannot trace raise ``kiln.ArgumentError``.

    >>> report = kiln.bisect(lambda x: np.tanh(x) * 2, np.linspace(-1, 1, 8, dtype=np.float32))
    >>> report.first_bad is None
    True"""
    compiled = fn if isinstance(fn, CompiledFunction) else compile(fn)
    if is_tracing():
        raise KilnError("kiln.bisect runs on arrays, not inside a traced function")
    lowered = compiled.lower(*args)  # checks the arguments like a call
    specs = [repr(leaf) for leaf in lowered.arguments if isinstance(leaf, TensorSpec)]
    if specs:
        raise ArgumentError(
            f"an argument is a spec ({specs[0]}); kiln.bisect runs on arrays: it compares every step with numpy"
        )
    pipeline = lowered.pipeline
    traced = pipeline.module("tensor")
    function = traced.body.ops[0]
    inputs = [np.asarray(a, dtype=arg.type.dtype) for a, arg in zip(lowered.arguments, function.arguments)]
    result_dtypes = [t.dtype for t in function.function_type.results]
    reference = run_function(function, inputs)
    if rtol is None:
        rtol = computed_tolerance(function)
    report = BisectReport(function.sym_name)
    cost = estimate(pipeline)  # decides the schedule (default, tuned or given)
    total = len(pipeline.graph_passes) + 1 + len(pipeline.schedule.steps) + 1
    started = time.perf_counter()
    affine_runs = []  # seconds each interpreter run took: the best guide to the ones left
    if progress is not None:
        progress(f"kiln bisect of {function.sym_name}: {total} steps; {cost}")
    elif cost.seconds > LONG:
        warnings.warn(
            f"kiln.bisect of {function.sym_name} will take {cost}; pass smaller arrays (the same ranks "
            "usually show the same fault), or progress=print to follow it; 'kiln bisect' shrinks "
            "annotated inputs by itself",
            RuntimeWarning,
            stacklevel=2,
        )

    def check(name, run, before, after, interpreted=False) -> bool:
        step_started = time.perf_counter()
        try:
            results = run()
        except Exception as exc:  # the IR after this step cannot even run: that is a finding too
            step = Step(name, float("inf"), False, f"{type(exc).__name__}: {exc}")
        else:
            error = max((_error(r, w) for r, w in zip(results, reference)), default=0.0)
            step = Step(name, error, error <= rtol)
        if interpreted:
            affine_runs.append(time.perf_counter() - step_started)
        report.steps.append(step)
        if not step.ok and report.first_bad is None:
            report.first_bad, report.ir_before, report.ir_after = step, before(), after()
        if progress is not None:
            done = len(report.steps)
            runs_left = cost.runs - len(affine_runs)
            per_run = sum(affine_runs) / len(affine_runs) if affine_runs else cost.ops * cost.seconds_per_op
            elapsed = time.perf_counter() - started
            left = f", ~{duration(runs_left * per_run)} left" if step.ok and done < total else ""
            verdict = "ok" if step.ok else "BAD"
            progress(_step_line(done, total, f"{name}: {verdict}, {duration(elapsed)} elapsed{left}"))
        return step.ok

    # The pipeline kiln.compile runs, for this function's target, replaying the schedule the
    # compiled code got: each pass and schedule step is checked as it finishes, and the first
    # bad one stops the run.
    target = pipeline.target
    lowering = target.passes("affine")
    previous = [print_ir(traced, locations=False)]

    def after_each(name, module):
        if name in lowering:
            restore_buffer_names(module.body.ops[-1], pipeline.schedule.steps)  # as a tuning record named them
        if name in pipeline.graph_passes:  # still tensor IR
            run = lambda: run_function(module.body.ops[0], inputs)  # noqa: E731
        else:
            run = lambda: run_affine(module, inputs, result_dtypes)  # noqa: E731
        text = print_ir(module, locations=False)
        ok = check(name, run, lambda b=previous[0]: b, lambda: text, interpreted=name not in pipeline.graph_passes)
        previous[0] = text
        if not ok:
            raise _FirstBad

    replay = Scheduler(target, pipeline.schedule, name=function.sym_name)
    try:
        run_pipeline(
            traced.clone({}), target, after_each=after_each, graph_passes=pipeline.graph_passes, scheduler=replay
        )
    except _FirstBad:
        return report

    def native():
        return [np.asarray(r) for r in pytree.flatten(compiled(*args))[0]]  # leaves, as the IR returns them

    code = pipeline.optimized_llvm if target.code == "llvm" else pipeline.cuda_source
    check("native code", native, lambda: previous[0], code)
    return report


class _FirstBad(Exception):
    """Raised by bisect's check of a pass to stop the pipeline at the first bad step."""


def _step_line(done: int, total: int, text: str) -> str:
    return f"[{done}/{total}] {text}"


_STEP_LINE = re.compile(r"\[(\d+)/(\d+)\] (.*)")  # what _step_line writes


class StepBar(tqdm):
    """``kiln bisect``'s progress on `stream`: `say` is `bisect`'s `progress`. Step lines
    ("[3/9] cse: ok, 2 s elapsed, ~5 s left") move a bar, drawn only if `stream` is a
    terminal; every other line (the estimate before the first step) is printed as it is.

    >>> with StepBar() as bar:
    ...     report = bisect(f, x, progress=bar.say)
    """

    def __init__(self, stream=sys.stderr):
        # A step runs an interpreter over the whole function (a second or more): draw every one.
        super().__init__(
            file=stream,
            disable=None,
            leave=False,
            dynamic_ncols=True,
            mininterval=0,
            unit="step",
            bar_format="{bar:20}| {n_fmt}/{total_fmt}{postfix}",  # the step says the time left itself
        )
        self.stream = stream

    def say(self, line: str) -> None:
        step = _STEP_LINE.fullmatch(line)
        if step is None:
            self.write(line, file=self.stream)
            self.stream.flush()
            return
        self.total = int(step[2])
        self.set_postfix_str(step[3], False)
        self.update(int(step[1]) - self.n)


def _error(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(want) & (got == want)
    difference = np.where(both_nan | same_inf, 0.0, np.abs(got - want))
    difference = np.where(np.isnan(difference), np.inf, difference)
    scale = 1.0 + np.abs(np.where(np.isfinite(want), want, 0.0))
    return float(np.max(difference / scale)) if difference.size else 0.0
