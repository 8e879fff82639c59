"""Schedules: lists of steps that transform a function's loop nests.

A loop is named ``k<kernel>.<loop>`` by its ``kiln.loop`` attribute, which the
affine dump shows after the loop's body and as its induction variable's SSA
name (the attribute counts; SSA names are cosmetic): ``k0.i`` is the loop called
``i`` in the first kernel (the first top-level loop nest).
Lowering names a kernel's result loops ``i, j, k, ...`` and its reduction
loops ``r, s, ...``; a split of ``k0.i`` makes ``k0.i.o`` and ``k0.i.i``, unroll
``k0.i.u`` (and ``k0.i.tail`` for the remainder). A schedule is a
plain list of steps, so it prints, goes to YAML and back, and replays::

    schedule = Schedule()
    schedule.tile(["k0.i", "k0.j"], [32, 64])     # split, split, reorder
    schedule.vectorize("k0.j.i", 16)
    schedule.parallel("k0.i.o")
    schedule.steps   # [("tile", ["k0.i", "k0.j"], [32, 64]), ("vectorize", "k0.j.i", 16), ...]
    apply_schedule(module, schedule)

Each primitive checks that it is legal (ScheduleError otherwise) and keeps
results unchanged on every size: tails are handled, never assumed away.
"""

from __future__ import annotations

import yaml

from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import verify
from kiln.dialects.diagnostics import KilnError
from kiln.dialects.ir import Block, Region
from kiln.dialects.traits import LOOP_LIKE

from . import loop_transforms as T
from .cache_read import cache_read
from .gpu_cache_read import gpu_cache_read
from .loop_transforms import ScheduleError
from .vectorize import vectorize

PRIMITIVES = ("split", "reorder", "tile", "vectorize", "parallel", "unroll", "unroll_jam", "cache_read", "bind")
# What each primitive takes, as a user writes it: checked when a step is added.
SIGNATURES = {
    "split": ("loop", "factor"),
    "reorder": ("loops",),
    "tile": ("loops", "sizes"),
    "vectorize": ("loop", "width"),
    "parallel": ("loop",),
    "unroll": ("loop", "factor"),
    "unroll_jam": ("loop", "factor"),
    "cache_read": ("loop", "buffer", "[layout]"),
    "bind": ("loop", "axis"),
}
GPU_PRIMITIVES = (
    "split",
    "reorder",
    "tile",
    "unroll",
    "unroll_jam",
    "bind",
    "cache_read",
)  # what the CUDA backend can run


class Schedule:
    """A list of loop-nest transformation steps, built by calling the primitives in order.

    Loops are named as the affine dump names them (``k0.i``: loop ``i`` of kernel 0);
    sizes and factors are iteration counts, widths are vector lanes. A malformed step
    raises ``kiln.ScheduleError`` here; a step that does not fit the function raises it
    when the schedule is applied (``kiln.compile(f, schedule=...)``), naming the step.

    >>> s = kiln.Schedule().tile(["k0.i", "k0.j"], [32, 64]).vectorize("k0.j.i", 8)
    >>> s.steps
    [('tile', ['k0.i', 'k0.j'], [32, 64]), ('vectorize', 'k0.j.i', 8)]
    >>> kiln.Schedule([["split", "k0.i", 4]]).steps
    [('split', 'k0.i', 4)]
    """

    def __init__(self, steps=()):
        self.steps = []
        for step in steps:
            if not isinstance(step, (list, tuple)) or not step:
                raise ScheduleError(f"a schedule step is a list like ['split', 'k0.i', 32], not {step!r}")
            self.add(*step)

    def add(self, primitive: str, *args) -> "Schedule":
        if not isinstance(primitive, str) or primitive not in PRIMITIVES:
            raise ScheduleError(f"unknown schedule step {primitive!r} (known: {', '.join(PRIMITIVES)})")
        names = SIGNATURES[primitive]
        required = [n for n in names if not n.startswith("[")]
        if not len(required) <= len(args) <= len(names):
            raise ScheduleError(
                f"{primitive} takes {len(required)}{'' if len(required) == len(names) else ' or ' + str(len(names))} "
                f"argument{'s' if len(names) != 1 else ''} ({', '.join(names)}), got {len(args)}: "
                f"{[primitive, *args]!r}"
            )
        self.steps.append((primitive, *[list(a) if isinstance(a, tuple) else a for a in args]))
        return self

    def split(self, loop: str, factor: int):
        return self.add("split", loop, factor)

    def reorder(self, loops):
        return self.add("reorder", list(loops))

    def tile(self, loops, sizes):
        return self.add("tile", list(loops), list(sizes))

    def vectorize(self, loop: str, width: int):
        return self.add("vectorize", loop, width)

    def parallel(self, loop: str):
        return self.add("parallel", loop)

    def unroll(self, loop: str, factor: int):
        return self.add("unroll", loop, factor)

    def unroll_jam(self, loop: str, factor: int):
        return self.add("unroll_jam", loop, factor)

    def bind(self, loop: str, axis: str):
        return self.add("bind", loop, axis)

    def cache_read(self, loop: str, buffer: str, layout=None):
        return (
            self.add("cache_read", loop, buffer)
            if layout is None
            else self.add("cache_read", loop, buffer, list(layout))
        )

    def __str__(self) -> str:
        return "; ".join(f"{s[0]}({', '.join(_text(a) for a in s[1:])})" for s in self.steps) or "(none)"

    def __repr__(self) -> str:
        return f"Schedule({self.steps!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Schedule) and self.steps == other.steps

    def to_yaml(self) -> str:
        """One step per line: ``- [split, k0.i, 32]``."""
        return "".join(f"- {yaml.safe_dump(list(step), default_flow_style=True).strip()}\n" for step in self.steps)

    @classmethod
    def from_yaml(cls, text: str) -> "Schedule":
        data = yaml.safe_load(text) or []
        if not isinstance(data, list) or not all(isinstance(s, list) and s and isinstance(s[0], str) for s in data):
            raise ScheduleError("a schedule in YAML is a list of steps like [split, k0.i, 32]")
        return cls(data)


def _text(arg) -> str:
    return "[" + ", ".join(map(str, arg)) + "]" if isinstance(arg, list) else str(arg)


def kernels(function: F.FuncOp) -> list:
    """The function's top-level loop nests, in order."""
    return [op for op in function.body.ops if op.has_trait(LOOP_LIKE)]


def find_loop(function: F.FuncOp, name: str):
    """The loop called `name` (the first in program order). A loop's name begins with its
    kernel's (lowering names loops ``k<n>.*`` and every transform derives new names from old
    ones), so only that kernel's nests are searched: walking the whole function for every
    lookup made scheduling quadratic in the number of kernels. A name not found there is
    looked for in the whole function, where a hand-written function may have put it."""
    if isinstance(name, str):
        kernel = name.split(".")[0]
        for nest in function.body.ops:
            if nest.has_trait(LOOP_LIKE) and A.kernel_of(nest) == kernel:
                for op in nest.walk():
                    if op.has_trait(LOOP_LIKE) and A.loop_name(op) == name:
                        return _unless_parallel(op, name)
    loops = [op for op in function.walk() if op.has_trait(LOOP_LIKE)]
    for op in loops:
        if A.loop_name(op) == name:
            return _unless_parallel(op, name)
    kernel = name.split(".")[0]
    names = sorted(A.loop_name(op) for op in loops if A.kernel_of(op) == kernel)
    known = f"loops of {kernel}: {', '.join(names)}" if names else "loops are named like k0.i"
    raise ScheduleError(f"no loop {name!r} ({known})")


def _unless_parallel(op, name: str):
    if isinstance(op, A.ParallelOp):
        raise ScheduleError(f"loop {name} is already parallel")
    return op


def step_text(step) -> str:
    """A step as the schedule prints it: ``split(k0.i, 32)``."""
    return f"{step[0]}({', '.join(_text(a) for a in step[1:])})"


def apply_step(function: F.FuncOp, step, atomic: bool = True, gpu: bool = False) -> None:
    """Apply one step whole or not at all: it runs first on a copy of the function, which
    must verify; only then on the function itself. A step that does not apply raises
    ScheduleError naming the step and leaves the function as it was.

    ``atomic=False`` skips the copy (copying the function is most of a step's cost), for
    callers whose function is itself a throwaway trial, or that just ran the same steps
    on a verified copy: there a failure may leave the function half-rewritten.

    ``gpu`` applies the step as the CUDA backend means it: ``cache_read`` stages its tile
    in a block's shared memory (``passes/gpu_cache_read.py``)."""
    if not atomic:
        _apply(function, step, gpu)
        return
    trial = trial_copy(function, step)
    try:
        _apply(trial, step, gpu)
        verify(trial)
    except ScheduleError:
        raise
    except KilnError as exc:
        raise ScheduleError(f"{step_text(step)}: the step would make invalid IR ({exc}); it is refused") from None
    _apply(function, step, gpu)


def trial_copy(function: F.FuncOp, step) -> F.FuncOp:
    """A copy of `function` to try `step` on. A step acts within the one kernel its loops
    belong to, so the copy holds that kernel's loop nests, the top-level ops they read
    (views of the arena, constants, a whole-array reduction's loop and what those read in
    turn) and the return, in their order; nothing of the other kernels. Copying the whole
    function per step made scheduling quadratic in the number of kernels."""
    names = step[1] if isinstance(step, (list, tuple)) and len(step) > 1 else None
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return function.clone({})  # malformed: _apply names the problem
    wanted = {n.split(".")[0] for n in names}
    body = function.body
    roots = [
        op for op in body.ops if isinstance(op, F.ReturnOp) or (op.has_trait(LOOP_LIKE) and A.kernel_of(op) in wanted)
    ]
    keep = top_level_inputs(body, roots) | set(roots)
    block = Block([a.type for a in body.args], [a.name_hint for a in body.args])
    mapping = dict(zip(body.args, block.args))
    for op in body.ops:
        if op in keep:
            block.append(op.clone(mapping))
    return type(function)([], dict(function.attributes), [], [Region([block])], loc=function.loc)


def top_level_inputs(body: Block, roots) -> set:
    """The ops of `body` whose results `roots` (ops of `body`) read, directly or through
    other such ops."""
    found, work = set(), list(roots)
    while work:
        for op in work.pop().walk():
            for value in op.operands:
                producer = getattr(value, "op", None)
                if producer is not None and producer.parent is body and producer not in found:
                    found.add(producer)
                    work.append(producer)
    return found


def _apply(function: F.FuncOp, step, gpu: bool = False) -> None:
    primitive = step[0] if isinstance(step, (list, tuple)) and step else step
    try:
        _dispatch(function, step, gpu)
    except ScheduleError as exc:
        # Name the step, unless the transform already did.
        if isinstance(primitive, str) and str(exc).startswith(f"{primitive}("):
            raise
        raise ScheduleError(f"{step_text(step)}: {exc}") from None
    except (IndexError, TypeError, ValueError) as exc:
        raise ScheduleError(f"malformed schedule step {list(step)!r}: {exc}") from None


def _dispatch(function: F.FuncOp, step, gpu: bool = False) -> None:
    primitive, *args = step
    # cache_read names the loop whose iterations reuse a tile: its own check says why a
    # bound one cannot be (bind first, stage last).
    if primitive not in ("bind", "cache_read") and args and isinstance(args[0], (str, list)):
        for name in [args[0]] if isinstance(args[0], str) else args[0]:
            axis = find_loop(function, name).attributes.get(A.BIND)
            if axis is not None:
                raise ScheduleError(
                    f"{primitive}({name}): the loop is bound to {axis}; bind loops after the other steps"
                )
    if primitive == "split":
        T.split(find_loop(function, args[0]), args[1])
    elif primitive == "reorder":
        T.reorder([find_loop(function, n) for n in args[0]])
    elif primitive == "tile":
        loops, sizes = args
        if len(loops) != len(sizes):
            raise ScheduleError("tile needs one size per loop")
        for name, size in zip(loops, sizes):
            T.split(find_loop(function, name), size)
        order = [f"{n}.o" for n in loops] + [f"{n}.i" for n in loops]
        T.reorder([find_loop(function, n) for n in order])
    elif primitive == "vectorize":
        vectorize(find_loop(function, args[0]), args[1])
    elif primitive == "parallel":
        T.parallel(find_loop(function, args[0]))
    elif primitive == "unroll":
        T.unroll(find_loop(function, args[0]), args[1])
    elif primitive == "unroll_jam":
        T.unroll_jam(find_loop(function, args[0]), args[1])
    elif primitive == "bind":
        T.bind(find_loop(function, args[0]), args[1])
    elif primitive == "cache_read" and gpu:
        gpu_cache_read(find_loop(function, args[0]), args[1], args[2] if len(args) > 2 else None)
    elif primitive == "cache_read":
        cache_read(find_loop(function, args[0]), args[1], args[2] if len(args) > 2 else None)
    else:
        raise ScheduleError(f"unknown schedule step {primitive!r}")


def apply_schedule(module, schedule: Schedule, verify_each: bool = False, gpu: bool = False) -> None:
    """Apply every step to the module's (single) function, in order. Each step verifies
    what it made before it commits; `verify_each` (debug mode) verifies the whole module
    after every step too. `gpu`: the steps are the CUDA backend's (see apply_step)."""
    function = next(op for op in module.body.ops if isinstance(op, F.FuncOp))
    for step in schedule.steps:
        apply_step(function, step, gpu=gpu)
        if verify_each:
            try:
                verify(module)
            except KilnError as exc:
                raise ScheduleError(f"the IR is invalid after {step_text(step)}: {exc}") from None
