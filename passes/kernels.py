"""Kernels as units of their own: find a function's kernels, cut one out into a
standalone function, and give it a structural hash.

Tuning measures and records one kernel at a time. A kernel is every top-level
loop nest whose loops are named ``k<n>.*`` (their ``kiln.loop`` attribute;
remainder nests included). Cut out, it becomes ``func.func @kernel`` whose
arguments are every buffer the nests touch, with its loops renamed to
``k0.*``; the hash of that function's text (SSA names made positional, loop
and buffer names left out) identifies the kernel wherever it appears.
Schedules for it (tuning records) name its loops ``k0.*`` and its buffers
``a<k>``, as its arguments are named; ``absolute_steps`` maps both back onto
the kernel's place in a whole function.
"""

from __future__ import annotations

import hashlib
import re

from kiln.dialects import affine as A
from kiln.dialects import builtin, print_ir
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import AffineMap
from kiln.dialects.traits import LOOP_LIKE
from kiln.dialects.types import MemRefType
from kiln.passes.kernel_inputs import OutsideValues, outside_values


def kernel_names(function: F.FuncOp) -> list:
    names = []
    for op in function.body.ops:
        if op.has_trait(LOOP_LIKE):
            name = A.kernel_of(op)
            if name not in names:
                names.append(name)
    return names


def nests_of(function: F.FuncOp, kernel: str) -> list:
    return [op for op in function.body.ops if op.has_trait(LOOP_LIKE) and A.kernel_of(op) == kernel]


def _recomputed(op) -> bool:
    """A scalar computed before the nests (a load of a 0-d buffer that loop-invariant code
    motion hoisted out of them, and arithmetic on it): the cut-out kernel recomputes it, so
    what it reads comes first. A loop's result (a whole-array reduction) is passed instead."""
    return not op.regions and not any(isinstance(r.type, MemRefType) for r in op.results)


def _outside_values(function: F.FuncOp, kernel: str) -> OutsideValues:
    return outside_values(nests_of(function, kernel), _recomputed)


def kernel_buffers(function: F.FuncOp, kernel: str) -> list:
    """The buffers `kernel` touches, in the order of the extracted kernel's arguments a0, a1, ..."""
    return [v for v in _outside_values(function, kernel).taken if isinstance(v.type, MemRefType)]


def extract(function: F.FuncOp, kernel: str) -> builtin.ModuleOp:
    """A module whose one function runs just `kernel`, over arguments for every buffer it uses.

    Scalars computed before the nests are recomputed in it; one that another kernel's loop
    computes (a whole-array reduction, which stays in a register) becomes a 0-d argument of
    its own, after the buffers, so the buffers keep their numbers a0, a1, ...
    """
    nests = nests_of(function, kernel)
    taken, recomputed = _outside_values(function, kernel)
    buffers = [v for v in taken if isinstance(v.type, MemRefType)]
    passed = [v for v in taken if not isinstance(v.type, MemRefType)]
    types = [v.type for v in buffers] + [MemRefType((), v.type) for v in passed]
    names = [f"a{k}" for k in range(len(types))]
    new = F.FuncOp.create("kernel", types, [], names)
    new.attributes[MR.ARGUMENT_BUFFERS] = tuple(names)
    mapping = dict(zip(buffers, new.arguments))
    for value, argument in zip(passed, new.arguments[len(buffers) :]):
        load = A.LoadOp([argument], {"map": AffineMap(0, ())})
        new.body.append(load)
        mapping[value] = load.result
    for op in recomputed:  # in the order they are computed
        new.body.append(op.clone(mapping))
    for nest in nests:
        copy = nest.clone(mapping)
        new.body.append(copy)
        for op in copy.walk():
            if op.has_trait(LOOP_LIKE):
                A.set_loop_name(op, "k0" + A.loop_name(op)[len(kernel) :])
    new.body.append(F.ReturnOp([], {}))
    module = builtin.ModuleOp.empty()
    module.body.append(new)
    return module


def structural_hash(module: builtin.ModuleOp) -> str:
    """What identifies a kernel: its extracted text with SSA names made positional, and
    without its notes, the loop and buffer names (which say where a kernel sits, not what it
    does; leaving them out keeps the hashes tuning databases were recorded under)."""
    module = module.clone({})
    for op in module.walk():
        op.attributes = op.semantic_attributes()
    text = print_ir(module, locations=False)
    names = {}
    canonical = re.sub(r"%[A-Za-z0-9_$.]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def relative_steps(steps, kernel: str, function: F.FuncOp) -> list:
    """Steps for `kernel` of `function`, rewritten as the extracted kernel's: loops named k0.*,
    buffers named a<k> like its arguments (and back with absolute_steps)."""
    names = {}
    for k, buffer in enumerate(kernel_buffers(function, kernel)):
        names.setdefault(MR.buffer_name(buffer), f"a{k}")
    return [_rename(step, kernel, "k0", names) for step in steps]


def absolute_steps(steps, kernel: str, function: F.FuncOp) -> list:
    """Kernel-relative steps (a tuning record's) for `kernel` of `function`. A buffer the
    steps name that has no name of its own there, or shares it, is given one, so that the
    step finds exactly the buffer the record means."""
    buffers = kernel_buffers(function, kernel)
    current = [MR.buffer_name(v) for v in buffers]
    taken = set(current)
    names = {}
    for k, buffer in enumerate(buffers):
        if f"a{k}" not in _buffer_names(steps):
            continue
        if current[k] is None or current.count(current[k]) > 1:
            fresh = f"{kernel}_a{k}"
            while fresh in taken:
                fresh += "_"
            MR.set_buffer_name(buffer, fresh)
            current[k] = fresh
            taken.add(fresh)
        names[f"a{k}"] = MR.buffer_name(buffer)
    return [_rename(step, "k0", kernel, names) for step in steps]


def restore_buffer_names(function: F.FuncOp, steps) -> None:
    """Give the buffers of another copy of a function (lowered again, as kiln.bisect does)
    the names absolute_steps gave them (``k<n>_a<k>``), so that `steps` find them there too."""
    for name in _buffer_names(steps):
        match = re.fullmatch(r"(k\d+)_a(\d+)_*", str(name))
        if match is None:
            continue
        buffers = kernel_buffers(function, match[1])
        if int(match[2]) < len(buffers) and all(MR.buffer_name(v) != name for v in buffers):
            MR.set_buffer_name(buffers[int(match[2])], name)


# Which items of a step (a list, the primitive first) name a buffer rather than a loop.
_BUFFER_ARGUMENTS = {"cache_read": (2,)}


def _buffer_names(steps) -> set:
    return {step[i] for step in steps for i in _BUFFER_ARGUMENTS.get(step[0], ()) if i < len(step)}


def _rename(step, old: str, new: str, buffers: dict):
    def fix(arg):
        if isinstance(arg, str) and arg.split(".")[0] == old:
            return new + arg[len(old) :]
        if isinstance(arg, list):
            return [fix(a) for a in arg]
        return arg

    buffer_positions = _BUFFER_ARGUMENTS.get(step[0], ())
    return [step[0]] + [buffers.get(a, a) if i in buffer_positions else fix(a) for i, a in enumerate(step[1:], start=1)]
