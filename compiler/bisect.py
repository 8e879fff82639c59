"""Find the first pass that changes a function's numbers.

``kiln.bisect(fn, *args)`` runs the pipeline one pass (and one schedule step)
at a time and executes the IR after each on the same inputs: the tensor
stages with the tensor interpreter, the affine and scheduled stages with the
affine interpreter, and finally the native code. The reference is the traced
tensor IR, interpreted. The report names the first step whose results drift
from it, with the IR before and after that step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kiln.dialects import print_ir
from kiln.passes.registry import run_passes
from kiln.passes.schedule import apply_step

from .affine_interpreter import run_affine
from .errors import KilnError
from .interpreter import run_function
from .jit import CompiledFunction, compile


@dataclass
class Step:
    name: str           # "cse", "lower-tensor-to-affine", "schedule: split(k0.i, 8)", "native code"
    error: float        # the largest difference from the reference, relative to its magnitude
    ok: bool
    failure: str = ""   # what the run raised, if it could not finish (an out-of-bounds access...)


@dataclass
class BisectReport:
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


def bisect(fn, *args, rtol: float | None = None) -> BisectReport:
    """Check every pass and schedule step of `fn` (compiled or plain) on these arguments."""
    compiled = fn if isinstance(fn, CompiledFunction) else compile(fn)
    call, key = compiled._specialize(args, {}, allow_specs=False)  # checks the arguments like a call
    if key is None:
        raise KilnError("kiln.bisect runs on arrays, not inside a traced function")
    _, pipeline = compiled._traces[key]
    traced = pipeline.module("tensor")
    function = traced.body.ops[0]
    inputs = [np.asarray(a, dtype=arg.type.dtype) for a, arg in zip(call.leaves, function.arguments)]
    reference = run_function(function, inputs)
    if rtol is None:
        rtol = 1e-4 if any(r.dtype == np.float32 for r in reference) else 1e-9
    report = BisectReport(function.sym_name)

    def check(name, run, before, after) -> bool:
        try:
            results = run()
        except Exception as exc:  # the IR after this step cannot even run: that is a finding too
            step = Step(name, float("inf"), False, f"{type(exc).__name__}: {exc}")
        else:
            error = max((_error(r, w) for r, w in zip(results, reference)), default=0.0)
            step = Step(name, error, error <= rtol)
        report.steps.append(step)
        if not step.ok and report.first_bad is None:
            report.first_bad, report.ir_before, report.ir_after = step, before(), after()
        return step.ok

    module = traced.clone({})
    for name in pipeline.graph_passes:
        before = print_ir(module, locations=False)
        module = run_passes(module.clone({}), [name])
        if not check(name, lambda m=module: run_function(m.body.ops[0], inputs), lambda b=before: b,
                     lambda m=module: print_ir(m, locations=False)):
            return report
    before = print_ir(module, locations=False)
    affine = run_passes(module.clone({}), ["lower-tensor-to-affine"])
    if not check("lower-tensor-to-affine", lambda: run_affine(affine, inputs), lambda: before,
                 lambda: print_ir(affine, locations=False)):
        return report
    pipeline.module("scheduled")  # decides the schedule (default, tuned or given)
    for step in pipeline.schedule.steps:
        before = print_ir(affine, locations=False)
        affine = affine.clone({})
        apply_step(affine.body.ops[-1], step)
        label = f"schedule: {step[0]}({', '.join(map(str, step[1:]))})"
        if not check(label, lambda m=affine: run_affine(m, inputs), lambda b=before: b,
                     lambda m=affine: print_ir(m, locations=False)):
            return report
    def native():
        results = compiled(*args)
        return [np.asarray(r) for r in (results if isinstance(results, (tuple, list)) else [results])]
    check("native code", native, lambda: print_ir(affine, locations=False), lambda: pipeline.optimized_llvm())
    return report


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
