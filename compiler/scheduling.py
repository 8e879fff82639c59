"""The ``scheduled`` stage: which schedule each kernel of a function gets, and applying it.

    affine --(a given schedule, else tuned records, else the target's recipes)--> scheduled

A given schedule (``kiln.compile(f, schedule=...)``, or the one a tool replays) is
applied step by step, each step seen by the pipeline's ``after_each`` as
``schedule: split(k0.i, 8)``; without one, kernels with a record for this target in
the tuning database get its steps and the others the target's default recipes
(``Target.default_schedule``). The scheduler is the stage function ``run_pipeline``
calls for the pipeline step named ``schedule`` (``kiln.target.SCHEDULE``).
"""

from __future__ import annotations

import warnings

from kiln.dialects import verify
from kiln.dialects.affine import BIND, loop_name
from kiln.errors import KilnError
from kiln.passes.kernels import absolute_steps, extract, kernel_names, structural_hash
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.schedule import Schedule, apply_step, step_text
from kiln.target import resolve_target
from kiln.tools.tuning_db import DEFAULT_KEPT


class Scheduler:
    """Schedules one function for `target`: `requested`, a ``Schedule`` to apply (None: the tuning
    records of `tuning_db`, a ``TuningDB`` or None for none, then the default recipes); `verify_each`
    verifies the module after every step of a requested schedule (debug mode); `name` is the
    function's, for warnings. After a call, `schedule` is the schedule applied and `tuned_kernels`
    the kernels whose steps came from the database."""

    def __init__(self, target, requested=None, tuning_db=None, verify_each: bool = False, name: str = ""):
        self.target = resolve_target(target)
        self.requested = requested
        self.tuning_db = tuning_db
        self.verify_each = verify_each
        self.name = name
        self.schedule = None
        self.tuned_kernels = []

    def __call__(self, module, after_each=None):
        """Schedule `module`'s function in place and return the module. `after_each(name, module)`
        sees the module after each step of a requested schedule, or once (``schedule``) after the
        default. Raises ``kiln.ScheduleError`` for a step the target cannot run or that does not
        fit the function."""
        self.tuned_kernels = []
        function = module.body.ops[-1]
        if self.requested is None:
            self.schedule = Schedule()
            key = self.target.records_key() if self.tuning_db is not None else None
            if key is not None:
                self._apply_tuned(function, key)
            for step in self.target.default_schedule(function, skip=set(self.tuned_kernels)).steps:
                self.schedule.add(*step)
            verify(module)
            if after_each is not None:
                after_each("schedule", module)
            return module
        self.schedule = self.requested
        allowed = self.target.schedule_primitives
        for step in self.schedule.steps:
            if step[0] not in allowed:
                raise ScheduleError(f"{step[0]} is a CPU schedule step; the CUDA backend runs {', '.join(allowed)}")
        for step in self.schedule.steps:
            apply_step(function, step, gpu=self.target.gpu)
            if self.verify_each:
                try:
                    verify(module)
                except KilnError as exc:
                    raise ScheduleError(f"the IR is invalid after {step_text(step)}: {exc}") from None
            if after_each is not None:
                after_each(f"schedule: {step[0]}({', '.join(map(str, step[1:]))})", module)
        bound = [op for op in function.walk() if BIND in op.attributes] if not self.target.gpu else []
        if bound:
            raise ScheduleError(
                f"bind is a GPU schedule step ({loop_name(bound[0])} is bound "
                f"to {bound[0].attributes[BIND]}); compile with target='cuda' to use it"
            )
        verify(module)
        return module

    def _apply_tuned(self, function, host: str) -> None:
        """Kernels with a record for `host` get its steps; the others the default."""
        db = self.tuning_db
        found = {k: db.lookup(structural_hash(extract(function, k)), host) for k in kernel_names(function)}
        gpu = self.target.gpu  # a GPU record's cache_read stages in shared memory
        for kernel, record in found.items():
            if record is None or record.get("schedule") == DEFAULT_KEPT:  # searched; the default was kept
                continue
            trial = function.clone({})
            steps = absolute_steps(record["steps"], kernel, trial)
            try:
                for step in steps:
                    apply_step(trial, step, gpu=gpu)
            except ScheduleError as exc:
                warnings.warn(
                    f"kiln: the tuning record for kernel {kernel} of {self.name} no longer applies "
                    f"({exc}); using the default schedule",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            for step in absolute_steps(record["steps"], kernel, function):
                apply_step(function, step, gpu=gpu)
                self.schedule.add(*step)
            self.tuned_kernels.append(kernel)
