"""Ahead-of-time objects, as JAX names them: ``f.lower(...)`` -> ``Lowered`` -> ``.compile()`` -> ``Compiled``.

``Lowered`` is one signature of a compiled function with every stage of its IR
(printed on demand); ``Compiled`` is that signature's native code, callable
with arguments of exactly that signature and nothing else, which also reports
what it costs (FLOPs and bytes per kernel) and how much memory it needs.
Both are views of a ``Signature``, which the compiled function shares with its
own calls: a signature lowered and compiled ahead of time is not compiled
again when the function is called with such arguments.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kiln import plain_call
from kiln.dialects.printer import ELIDE_CONSTANTS_OVER
from kiln.dlpack import dlpack_leaves
from kiln.errors import ArgumentError, StageError, user_facing
from kiln.executable import call_signature
from kiln.frontend.specs import TensorSpec
from kiln.frontend.trace import BoundCall, LeafSpec, TracedFunction, bind, leaf_spec
from kiln.passes.cost_analysis import cost_analysis
from kiln.pipeline import Pipeline


@dataclass
class Signature:
    """One traced signature of a compiled function: its arguments' structure (`call`, with
    the static values), each leaf's spec, the traced function, its pipeline of stages, and
    `executable`, which builds the native code once (None for the interpreter)."""

    fn: Callable
    python_signature: inspect.Signature
    static_argnames: tuple
    call: BoundCall
    specs: list  # LeafSpec per leaf
    traced: TracedFunction
    pipeline: Pipeline
    target: str
    debug: bool
    stages: tuple
    executable: Callable


class Lowered:
    """One signature of a compiled function, with every stage of its IR by name.

    Made by ``kiln.compile(f).lower(*args)`` from arrays or specs (``kiln.f32[8, 4]``).
    ``stages`` lists the stage names (``tensor``, ``optimized``, ``affine``, ``scheduled``,
    then ``llvm`` on the CPU or ``cuda``; the interpreter has only ``tensor``);
    ``text(stage)`` prints one, ``module(stage)`` gives its IR, ``compile()`` makes the
    signature's native code. A stage it does not have raises ``kiln.StageError``.

    >>> f = kiln.compile(lambda x, y: x @ y + 1.0)
    >>> low = f.lower(kiln.f32[4, 8], kiln.f32[8, 2])
    >>> low
    <Lowered <lambda>: tensor, optimized, affine, scheduled, llvm>
    >>> print(low.text("tensor", locations=False))
    module {
      func.func @"<lambda>"(%x: tensor<4x8xf32>, %y: tensor<8x2xf32>) -> tensor<4x2xf32> {
        %0 = kiln.matmul %x, %y : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
        %1 = kiln.constant dense<1.0> : tensor<f32>
        %2 = kiln.broadcast_to %1 : (tensor<f32>) -> tensor<4x2xf32>
        %3 = kiln.add %0, %2 : tensor<4x2xf32>
        func.return %3 : tensor<4x2xf32>
      }
    }
    >>> low.kernel_count
    1
    """

    def __init__(self, signature: Signature):
        self._signature = signature
        # The stages themselves, for kiln's tools (bisect's cost estimate, build's object code).
        self.pipeline = signature.pipeline
        # The argument leaves it was lowered with (arrays, or specs), flattened in the order of
        # the function's inputs: what the tools run it on.
        self.arguments = list(signature.call.leaves)
        self.name = signature.pipeline.name
        self.stages = list(signature.stages)

    def module(self, stage: str = "tensor"):
        """The IR module of an MLIR-level stage (every stage but ``llvm`` and ``cuda``, which are text)."""
        self._check(stage)
        if stage in ("llvm", "cuda"):
            raise StageError(f"the {stage} stage is text: use .text({stage!r})")
        return self.pipeline.module(stage)

    def text(
        self,
        stage: str = "tensor",
        locations: bool = True,
        generic: bool = False,
        elide_constants: int | None = ELIDE_CONSTANTS_OVER,
    ) -> str:
        """The IR of `stage`: MLIR syntax, LLVM IR for ``llvm``, CUDA C for ``cuda``;
        `locations` adds the source lines, `generic` MLIR's generic op form. A constant of more
        than `elide_constants` elements (1024 by default; a splat excepted) prints as MLIR's
        ``dense_resource<__elided__> : tensor<...>``, as ``mlir-opt
        --mlir-elide-elementsattrs-if-larger`` does, so weights do not flood the text; the text
        still parses, to IR that cannot run. None prints every element (the MLIR stages only:
        ``llvm`` and ``cuda`` text is never elided)."""
        self._check(stage)
        return self.pipeline.text(stage, locations, generic, elide_constants)

    def as_text(self) -> str:
        """The last stage's text, as JAX's ``Lowered.as_text()``."""
        return self.text(self.stages[-1])

    @property
    def call_checks(self) -> list:
        """numpy's checks on the values of Python int arguments that this signature runs in
        Python before its native code (``python_ints.IntCheck``: the dtype the value must fit
        and the user's line); a library built by ``kiln build`` has no Python to run them."""
        return list(self._signature.traced.int_checks)

    @property
    def kernel_count(self) -> int:
        """How many kernels (loop nests, before output copies) the optimized function has."""
        return self.pipeline.kernel_count()

    @property
    def memory_plan(self):
        """The arena layout of intermediates (``arena_bytes``, ``unplanned_bytes``, ``buffers``),
        or None when the graph passes did not run (``optimize=False``)."""
        return self.pipeline.memory_plan()

    @user_facing
    def compile(self) -> Compiled:
        """This signature's native code (built now, or found in the disk cache), as a ``Compiled``."""
        return Compiled(self, self._signature.executable())

    def _check(self, stage: str) -> None:
        if stage not in self.stages:
            raise StageError(f"no stage {stage!r}; this function has stages: {', '.join(self.stages)}")

    def __repr__(self) -> str:
        return f"<Lowered {self.name}: {', '.join(self.stages)}>"


class Compiled:
    """One signature's native code, callable with arguments of exactly that signature.

    Made by ``kiln.compile(f).lower(*args).compile()``. A call takes arguments of the
    structure, shapes and dtypes it was lowered for (arrays, Python scalars where it was
    lowered with Python scalars, DeviceArrays or DLPack objects of that shape and
    dtype, and ``out=`` as a compiled function does) and returns what ``f`` returns;
    anything else raises ``kiln.ArgumentError`` naming the argument and what was
    expected (it is never traced again). ``text(stage)`` and ``as_text()`` print the
    stages; ``cost_analysis()`` gives FLOPs and bytes per kernel, ``memory_analysis()``
    the bytes of arguments, results and scratch memory.

    >>> f = kiln.compile(lambda x, y: x @ y)
    >>> c = f.lower(kiln.f32[4, 8], kiln.f32[8, 2]).compile()
    >>> c(np.ones((4, 8), np.float32), np.ones((8, 2), np.float32))[0]
    array([8., 8.], dtype=float32)
    >>> c.cost_analysis()["flops"]  # 2 * 4 * 8 * 2
    128
    >>> c(np.ones((4, 8)), np.ones((8, 2), np.float32))
    Traceback (most recent call last):
    kiln.errors.ArgumentError: argument 'x' is kiln.f64[4, 8]; this function was compiled for kiln.f32[4, 8]
    """

    def __init__(self, lowered: Lowered, executable):
        self._lowered = lowered
        self._signature = lowered._signature
        self._executable = executable
        self.name = lowered.name
        self.stages = lowered.stages
        sig = self._signature
        plain = None if sig.debug else plain_call.PlainCall.of_signature(sig.call, sig.specs, executable, sig.traced)
        self._plain_calls = plain_call.PlainCalls()  # the fast path, as CompiledFunction's
        if plain is not None:
            self._plain_calls.add(plain)

    @user_facing
    def __call__(self, *args, out=None, **kwargs):
        result = self._plain_calls.call(args, kwargs, out)
        return self._checked_call(args, kwargs, out) if result is plain_call.MISS else result

    def _checked_call(self, args, kwargs, out):
        """A call with every check, each failure named (kiln.ArgumentError)."""
        sig = self._signature
        call = bind(sig.fn, args, kwargs, sig.static_argnames, sig.python_signature)
        leaves = dlpack_leaves(call.paths, call.leaves)
        self._check_arguments(call, leaves)
        return call_signature(sig.traced, sig.pipeline, self._executable, sig.debug, leaves, out)

    def _check_arguments(self, call: BoundCall, leaves) -> None:
        want = self._signature.call
        got_static, want_static = dict(call.static), dict(want.static)
        for name in sorted(set(got_static) | set(want_static)):
            got, expected = got_static.get(name, _NOT_GIVEN), want_static.get(name, _NOT_GIVEN)
            if got is not expected and got != expected:
                raise ArgumentError(
                    f"static argument '{name}' is {got!r}; this function was compiled for {expected!r} "
                    "(lower it again for another value)"
                )
        if call.treedef != want.treedef:
            missing = [p for p in want.paths if p not in call.paths]
            extra = [p for p in call.paths if p not in want.paths]
            detail = "; ".join(
                f"{what} {_some(paths)}" for what, paths in (("missing", missing), ("unexpected", extra)) if paths
            )
            raise ArgumentError(
                "the arguments' structure differs from the one this function was compiled for"
                + (f": {detail}" if detail else f" (compiled for {want.treedef}, called with {call.treedef})")
            )
        for path, leaf, spec in zip(call.paths, leaves, self._signature.specs):
            if (
                type(leaf) is np.ndarray
                and not spec.weak
                and (leaf.shape, leaf.dtype) == (spec.spec.shape, spec.spec.dtype)
            ):
                continue
            if isinstance(leaf, TensorSpec):
                raise ArgumentError(
                    f"argument '{path}' is a spec ({leaf!r}); specs are for .lower(), calls need arrays"
                )
            got = leaf_spec(path, leaf)
            if got != spec:
                raise ArgumentError(
                    f"argument '{path}' is {_describe(got)}; this function was compiled for {_describe(spec)}"
                )

    def text(
        self,
        stage: str | None = None,
        locations: bool = True,
        generic: bool = False,
        elide_constants: int | None = ELIDE_CONSTANTS_OVER,
    ) -> str:
        """The text of `stage` (by default the last: ``llvm`` on the CPU, ``cuda`` for CUDA), as
        ``Lowered.text`` prints it."""
        return self._lowered.text(stage or self.stages[-1], locations, generic, elide_constants)

    def as_text(self) -> str:
        """The last stage's text, as JAX's ``Compiled.as_text()``."""
        return self.text()

    def cost_analysis(self) -> dict:
        """What one call does, counted statically from the scheduled IR::

            {"flops": int, "bytes_read": int, "bytes_written": int, "bytes_accessed": int,
             "kernels": [{"name": "k0", "flops": ..., "bytes_read": ..., "bytes_written": ...,
                          "bytes_accessed": ...}, ...]}

        `flops`: floating-point operations the loops execute (a matmul of M x K by K x N
        does 2*M*K*N). Bytes are of the buffers each kernel loads (`bytes_read`) and stores
        (`bytes_written`), each buffer counted once per kernel however often it is touched;
        `bytes_accessed` counts a buffer both read and written once. Totals sum the kernels.
        The interpreter has no scheduled IR: ``kiln.StageError``.
        """
        self._require("scheduled", "cost_analysis")
        function = self._signature.pipeline.module("scheduled").body.ops[-1]
        keys = ("flops", "bytes_read", "bytes_written", "bytes_accessed")
        kernels = [{"name": c.name, **{k: getattr(c, k) for k in keys}} for c in cost_analysis(function)]
        return {**{k: sum(c[k] for c in kernels) for k in keys}, "kernels": kernels}

    def memory_analysis(self) -> dict:
        """Bytes one call needs::

            {"argument_bytes": int, "output_bytes": int, "arena_bytes": int | None,
             "bytes_without_reuse": int | None}

        `argument_bytes` and `output_bytes` are the sizes of the argument and result arrays;
        `arena_bytes` is the one block of scratch memory holding every intermediate (buffers
        whose lifetimes do not overlap share bytes), `bytes_without_reuse` what the
        intermediates would take each in its own 64-byte-aligned block. Both are None with
        ``optimize=False``, which plans no memory. The interpreter: ``kiln.StageError``.
        """
        self._require("optimized", "memory_analysis")
        function_type = self._signature.traced.function.function_type
        plan = self._signature.pipeline.memory_plan()
        return {
            "argument_bytes": sum(_nbytes(t) for t in function_type.inputs),
            "output_bytes": sum(_nbytes(t) for t in function_type.results),
            "arena_bytes": None if plan is None else plan.arena_bytes,
            "bytes_without_reuse": None if plan is None else plan.unplanned_bytes,
        }

    def _require(self, stage: str, what: str) -> None:
        if stage not in self.stages:
            raise StageError(f"{what} reads the {stage} stage; this function has stages: {', '.join(self.stages)}")

    def __repr__(self) -> str:
        inputs = ", ".join(_describe(s) for s in self._signature.specs)
        return f"<Compiled {self.name}({inputs}) target={self._signature.target}>"


class _NotGiven:
    def __repr__(self) -> str:
        return "(not given)"


_NOT_GIVEN = _NotGiven()


def _describe(spec: LeafSpec) -> str:
    if spec.weak:
        kind = {"b": "bool", "i": "int", "u": "int", "f": "float"}[spec.spec.dtype.kind]
        return f"a Python {kind}" + (" from 2**63 on" if spec.spec.dtype == np.uint64 else "")
    return repr(spec.spec)


def _some(paths: list) -> str:
    shown = ", ".join(paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _nbytes(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
