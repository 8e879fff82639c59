"""One signature's native code and the checks that guard every call into it.

Native code is never entered with an argument it could read or write out of bounds:
each input is converted to the compiled dtype and made C-contiguous (a copy only when
it is not), its shape must be the compiled one, and an ``out=`` target is written in
place only when it is contiguous, aligned, writable and overlaps no other argument.
The status a compiled function returns becomes a Python exception here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kiln import debug as debug_mode
from kiln import timings
from kiln.codegen.llvm_emitter import symbol_name
from kiln.codegen.status import FAILED_CHECK, OUT_OF_BOUNDS, STATUS, check_sites
from kiln.dialects import tensor as T
from kiln.errors import ArgumentError, KilnError, OutOfBoundsError
from kiln.frontend import pytree
from kiln.interpreters.tensor_interpreter import run_function
from kiln.runtime import threads
from kiln.runtime.native import LoadedObject


@dataclass(frozen=True)
class Compilation:
    """How one signature's native code was obtained."""

    signature: str
    from_cache: bool
    seconds: float


class Executable:
    """One signature's native code, with the checks that guard it."""

    def __init__(self, pipeline, traced):
        started = time.perf_counter()
        code = pipeline.object_code()
        self.from_cache = code.from_cache
        function = traced.function
        self.input_specs = [(a.type.shape, a.type.dtype) for a in function.arguments]
        self.output_specs = [(t.shape, t.dtype) for t in function.function_type.results]
        with timings.timed(pipeline.name, "load"):
            self._object = LoadedObject(code.object, code.symbols)
            self.native = self._object.function(
                symbol_name(function.sym_name), len(self.input_specs) + len(self.output_specs)
            )
        self.seconds = time.perf_counter() - started

    def run(self, leaves, out_leaves=None) -> list:
        inputs = [prepare_input(leaf, shape, dtype) for leaf, (shape, dtype) in zip(leaves, self.input_specs)]
        outputs, copy_back = [], []
        for k, (shape, dtype) in enumerate(self.output_specs):
            target = None if out_leaves is None else out_leaves[k]
            if target is not None and writable_in_place(target, inputs + outputs):
                outputs.append(target)
            else:
                outputs.append(np.empty(shape, dtype))
                if target is not None:
                    copy_back.append((target, outputs[-1]))
        threads.use_in_this_thread()
        # Results with no elements need no code run; the native code is never handed empty buffers to write.
        status = self.native(inputs + outputs) if any(o.size for o in outputs) else 0
        if status:
            raise status_error(status)
        for target, result in copy_back:
            np.copyto(target, result)
        return outputs


def call_signature(traced, pipeline, executable, debug: bool, leaves, out=None):
    """Run one compiled signature on its argument leaves (already checked against it) and
    return the results in the function's structure, or `out` after writing them there.
    `executable` is None for the reference interpreter."""
    for check in traced.int_checks:  # numpy's checks on the values of Python int arguments
        check.run(leaves)
    out_leaves = None if out is None else check_out(out, traced)
    if executable is None:
        results = run_function(traced.function, [np.asarray(leaf) for leaf in leaves])
        # The interpreter may hand back inputs or constants themselves; results are always fresh arrays.
        results = [np.array(r, copy=True) for r in results]
        if out_leaves is not None:
            for target, result in zip(out_leaves, results):
                np.copyto(target, result)
    else:
        try:
            results = executable.run(leaves, out_leaves)  # native: CPU or CUDA
        except OutOfBoundsStatus as exc:
            if exc.status <= FAILED_CHECK:
                raise with_index_value(failed_check_error(pipeline, exc.status), traced.function, leaves) from None
            raise debug_mode.out_of_bounds_error(pipeline, exc.status) from None
        if debug:
            debug_mode.check_finite(traced.function, [np.asarray(leaf) for leaf in leaves])
    if out is not None:
        return out
    return pytree.unflatten(
        traced.out_treedef, [r[()] if isinstance(r, np.ndarray) and r.ndim == 0 else r for r in results]
    )


def check_out(out, traced) -> list:
    """The leaves of an ``out=`` structure, each a writable numpy array of its result's
    shape and dtype, no two overlapping; ``ArgumentError`` otherwise."""
    targets, out_treedef = pytree.flatten(out)
    if out_treedef != traced.out_treedef:
        raise ArgumentError("out= must have the same structure as the function's results")
    for i, (target, t) in enumerate(zip(targets, traced.function.function_type.results)):
        if not isinstance(target, np.ndarray):
            raise ArgumentError(f"out= leaf #{i} is a {type(target).__name__}, not a numpy array")
        if target.shape != t.shape or target.dtype != t.dtype:
            raise ArgumentError(
                f"out= leaf #{i} is {target.dtype}{list(target.shape)}, the result is {t.dtype}{list(t.shape)}"
            )
        if not target.flags.writeable:
            raise ArgumentError(f"out= leaf #{i} is read-only")
    # Two results written into one memory cannot both be delivered: which survives would
    # depend on the order kiln happens to write them in.
    for i, a in enumerate(targets):
        for j in range(i):
            if np.shares_memory(a, targets[j]):
                raise ArgumentError(f"out= leaves #{j} and #{i} overlap in memory; give each result its own array")
    return targets


def prepare_input(leaf, shape, dtype) -> np.ndarray:
    """A C-contiguous, aligned array of the compiled shape and dtype; copies what is not."""
    array = np.asarray(leaf, dtype=dtype)
    if array.shape != shape:
        raise ArgumentError(f"an argument has shape {array.shape}, the compiled code expects {shape}")
    if not (array.flags.c_contiguous and array.flags.aligned):
        array = np.array(array, order="C", copy=True)
    return array


def writable_in_place(target: np.ndarray, others) -> bool:
    flags = target.flags
    return (
        flags.c_contiguous
        and flags.aligned
        and flags.writeable
        and not any(np.may_share_memory(target, other) for other in others)
    )


class OutOfBoundsStatus(Exception):
    """An index check (kiln.check_index) or a debug build's bounds check fired; the caller,
    which has the pipeline that names the site, turns it into an OutOfBoundsError."""

    def __init__(self, status: int):
        self.status = status


def failed_check_error(pipeline, status: int) -> OutOfBoundsError:
    """The error of the check whose failure the status FAILED_CHECK - k reports: its message
    at the user's line of the indexing it guards."""
    site = check_sites(pipeline.module("scheduled").body.ops[-1])[FAILED_CHECK - status]
    return OutOfBoundsError(site.msg, site.loc)


def with_index_value(error: OutOfBoundsError, function, leaves) -> OutOfBoundsError:
    """`error`, a failed index check's, with numpy's first offending value ("index 7 is out of
    bounds for axis 0 with size 5"), found by evaluating again, with numpy, the ops the checked
    index is computed from (only after a failure: the successful call pays nothing). The error
    as it is where the index cannot be recomputed or no value is out of range there."""
    try:
        checks = [
            op
            for op in function.body.ops
            if isinstance(op, T.CheckIndexOp)
            and not op.attributes.get("msg")
            and op.message == error.message
            and op.loc == error.loc
        ]
        if not checks:
            return error
        producers = {r: op for op in function.body.ops for r in op.results}
        args = dict(zip(function.arguments, (np.asarray(leaf) for leaf in leaves)))
        env: dict = {}

        def value(v):
            if v in args:
                return args[v]
            if v not in env:
                op = producers[v]
                env[v] = np.asarray(op.evaluate(*(value(u) for u in op.operands)))
            return env[v]

        with np.errstate(all="ignore"):
            for check in checks:
                index = value(check.operands[0])
                bad = (index < -check.size) | (index >= check.size)
                if np.any(bad):
                    first = int(index[bad].flat[0])
                    return OutOfBoundsError(
                        f"index {first} is out of bounds for axis {check.axis} with size {check.size}", error.loc
                    )
    except Exception:  # noqa: BLE001 - the message without the value is still right
        pass
    return error


def status_error(status: int) -> Exception:
    if status >= OUT_OF_BOUNDS or status <= FAILED_CHECK:
        return OutOfBoundsStatus(status)
    if status == STATUS["out of memory"]:
        return MemoryError("kiln: the compiled function could not allocate its scratch memory")
    if status == STATUS["negative integer power"]:
        return ValueError("Integers to negative integer powers are not allowed.")
    if status == STATUS["barrier divergence"]:
        return KilnError(
            "a CUDA kernel's threads did not all reach the same barrier (the emulation found the block "
            "deadlocked, which is undefined behaviour on a GPU); this is a bug in kiln's CUDA code generator"
        )
    return KilnError(f"the compiled function failed with status {status}")
