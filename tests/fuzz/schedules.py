"""Random schedules for differential testing: a random program, lowered, gets random
steps of every CPU kind (split, reorder, tile, unroll, unroll_jam, vectorize, parallel,
cache_read) on random loops, with factors that mostly do not divide the loops' extents;
the steps that apply are kept. The program then runs under that schedule, in release
and in bounds-checked debug mode, against numpy.

Every refused step must leave the IR exactly as it was (steps are atomic).
"""

from __future__ import annotations

import random

import kiln
from kiln.dialects import affine as A
from kiln.dialects import memref as MR
from kiln.dialects import print_ir
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.schedule import apply_step

from .programs import Program, _quietly, _show, _spread, compare, inputs_for, reference, run

CPU_STEPS = ("split", "reorder", "tile", "unroll", "unroll_jam", "vectorize", "parallel", "cache_read")
# 1, primes and powers of two: most divide no extent, some exceed the extent they split
FACTORS = (1, 2, 3, 4, 5, 7, 8, 11, 16, 32)
WIDTHS = (2, 3, 4, 8, 16)


def random_schedule(module, rng: random.Random, length: int = 6) -> list:
    """Apply up to `length` random steps to the module's function; returns those that
    applied. Raises AssertionError if a refused step changed the IR."""
    function = module.body.ops[-1]
    applied = []
    for _ in range(length * 4):
        if len(applied) == length:
            break
        loops = [op for op in function.walk() if isinstance(op, A.ForOp)]
        if not loops:
            break
        step = _draw_step(rng, rng.choice(CPU_STEPS), rng.choice(loops))
        if step is None:
            continue
        before = print_ir(function, locations=False)
        try:
            apply_step(function, step)
        except ScheduleError as exc:
            after = print_ir(function, locations=False)
            assert after == before, f"the refused step {step} ({exc}) changed the IR:\n{before}\n---\n{after}"
            continue
        applied.append(step)
    return applied


def _draw_step(rng: random.Random, primitive: str, loop):
    name = A.loop_name(loop)
    if primitive in ("split", "unroll", "unroll_jam"):
        return [primitive, name, rng.choice(FACTORS)]
    if primitive == "vectorize":  # often a width that leaves whole vectors, sometimes none
        fits = [w for w in WIDTHS if w <= loop.trip_count]
        return [primitive, name, rng.choice(fits if fits and rng.random() < 0.7 else WIDTHS)]
    if primitive == "parallel":
        return [primitive, name]
    if primitive == "cache_read":
        buffers = sorted(
            {
                MR.buffer_name(op.memref)
                for op in loop.walk()
                if isinstance(op, (A.LoadOp, A.VectorLoadOp)) and MR.buffer_name(op.memref)
            }
        )
        if not buffers:
            return None
        buffer = rng.choice(buffers)
        rank = next(
            op.memref.type.rank
            for op in loop.walk()
            if isinstance(op, (A.LoadOp, A.VectorLoadOp)) and MR.buffer_name(op.memref) == buffer
        )
        if rank >= 2 and rng.random() < 0.3:
            return [primitive, name, buffer, list(range(rank))[::-1]]
        return [primitive, name, buffer]
    chain = [loop]
    while len(chain) < 3:
        body = [op for op in chain[-1].body.ops if not isinstance(op, A.YieldOp)]
        if len(body) != 1 or not isinstance(body[0], A.ForOp):
            break
        chain.append(body[0])
    if len(chain) < 2:
        return None
    chain = chain[: rng.choice(range(2, len(chain) + 1))]
    names = [A.loop_name(l) for l in chain]
    if primitive == "reorder":
        order = names[:]
        while order == names:
            rng.shuffle(order)
        return ["reorder", order]
    return ["tile", names, [rng.choice(FACTORS) for _ in names]]


def check_schedule(program: Program, seed: int) -> str:
    """Compile the program under a random schedule, in release and in debug mode (every
    access bounds-checked, the IR verified after every step), and compare both with numpy
    as `check` does; returns what `check` returns."""
    inputs = inputs_for(program, seed)
    want = reference(program, inputs)
    if want is None:
        return "invalid"
    fn = lambda *xs: run(program, xs)  # noqa: E731
    try:
        lowered = kiln.compile(fn).lower(*inputs)
        steps = random_schedule(lowered.module("affine").clone({}), random.Random(seed))
    except kiln.UnsupportedError as exc:
        return f"unsupported: {exc.message}"
    spread = _quietly(_spread, program, inputs, want, seed)
    for debug in (False, True):
        what = (
            f"under schedule {steps}{' in debug mode' if debug else ''} for seed {seed}:\n"
            f"{program.describe()}\n{_show(inputs)}"
        )
        try:
            got = _quietly(kiln.compile(fn, schedule=kiln.Schedule(steps), debug=debug), *inputs)
        except kiln.NonFiniteError:
            continue  # debug mode's report of an overflow the program makes: numbers checked in release
        except Exception as exc:
            raise AssertionError(f"kiln raised {type(exc).__name__} {what}\n{exc}") from exc
        _quietly(compare, got, want, *spread, what)
    return "checked"
