"""``@kiln.compile``: trace once per input signature, then run.

A compiled function is specialized on the structure of its arguments and on
each leaf's shape, dtype and weakness (Python scalars are weak, as in numpy 2);
the trace for a signature is cached. Until native code generation exists, the
traced ``tensor`` function runs in the reference interpreter.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import os

import numpy as np

from kiln.dialects import print_ir

from . import pytree
from .errors import ArgumentError, KilnError, StageError
from .frontend import bind, leaf_spec, trace
from .interpreter import run_function
from .specs import TensorSpec
from .tracing import Tracer

TARGETS = ("cpu",)
PLANNED_STAGES = ("tensor", "optimized", "affine", "scheduled", "llvm")


class Lowered:
    """Every stage of one compiled signature, by name."""

    def __init__(self, name: str, modules: dict):
        self.name = name
        self._modules = modules

    @property
    def stages(self) -> list:
        return list(self._modules)

    def module(self, stage: str = "tensor"):
        if stage not in self._modules:
            later = " (it is not built yet in this version of kiln)" if stage in PLANNED_STAGES else ""
            raise StageError(f"no stage {stage!r}{later}; this function has stages: {', '.join(self._modules)}")
        return self._modules[stage]

    def text(self, stage: str = "tensor", locations: bool = True, generic: bool = False) -> str:
        """The IR of `stage` in MLIR syntax; `locations` adds each op's source line."""
        return print_ir(self.module(stage), locations=locations, generic=generic)

    def __repr__(self) -> str:
        return f"<Lowered {self.name}: {', '.join(self.stages)}>"


class CompiledFunction:
    def __init__(self, fn, target: str = "cpu", static_argnames=()):
        if target not in TARGETS:
            raise KilnError(f"unknown target {target!r}; this version of kiln compiles for: {', '.join(TARGETS)}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.target = target
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        unknown = [n for n in self.static_argnames if n not in inspect.signature(fn).parameters]
        if unknown:
            raise KilnError(f"static_argnames {unknown} are not parameters of {fn.__name__}")
        self._traces: dict = {}

    def _specialize(self, args, kwargs, allow_specs: bool):
        call = bind(self.fn, args, kwargs, self.static_argnames)
        specs = []
        for path, leaf in zip(call.paths, call.leaves):
            if isinstance(leaf, TensorSpec) and not allow_specs:
                raise ArgumentError(f"argument '{path}' is a spec ({leaf!r}); specs are for .lower(), "
                                    "calls need arrays")
            specs.append(leaf_spec(path, leaf))
        key = (call.treedef, tuple(specs), call.static)
        if key not in self._traces:
            traced = trace(self.fn, call, specs)
            self._traces[key] = traced
            _dump(self.fn.__name__, traced.module)
        return call, self._traces[key]

    def lower(self, *args, **kwargs) -> Lowered:
        """The stages of this function for arrays or specs like ``kiln.f32[8, 4]``."""
        _, traced = self._specialize(args, kwargs, allow_specs=True)
        return Lowered(self.fn.__name__, {"tensor": traced.module})

    def __call__(self, *args, out=None, **kwargs):
        if any(isinstance(leaf, Tracer) for leaf in pytree.flatten((args, kwargs))[0]):
            return self.fn(*args, **kwargs)  # called from inside another trace: inline it
        call, traced = self._specialize(args, kwargs, allow_specs=False)
        inputs = [np.asarray(leaf) for leaf in call.leaves]
        results = run_function(traced.function, inputs)
        if out is not None:
            return _write_out(out, results, traced.out_treedef)
        # The interpreter may hand back inputs or constants themselves; results are always fresh arrays.
        fresh = [np.array(r, copy=True) for r in results]
        return pytree.unflatten(traced.out_treedef, [r[()] if r.ndim == 0 else r for r in fresh])

    def __repr__(self) -> str:
        return f"<kiln.compile {self.fn.__qualname__} target={self.target}>"


def _write_out(out, results, treedef):
    targets, out_treedef = pytree.flatten(out)
    if out_treedef != treedef:
        raise ArgumentError("out= must have the same structure as the function's results")
    for i, (target, result) in enumerate(zip(targets, results)):
        if not isinstance(target, np.ndarray):
            raise ArgumentError(f"out= leaf #{i} is a {type(target).__name__}, not a numpy array")
        if target.shape != result.shape or target.dtype != result.dtype:
            raise ArgumentError(f"out= leaf #{i} is {target.dtype}{list(target.shape)}, "
                                f"the result is {result.dtype}{list(result.shape)}")
        if not target.flags.writeable:
            raise ArgumentError(f"out= leaf #{i} is read-only")
        np.copyto(target, result)
    return out


def _dump(name: str, module) -> None:
    """With KILN_DUMP_DIR set, write each stage of each new trace to a file."""
    directory = os.environ.get("KILN_DUMP_DIR")
    if not directory:
        return
    text = print_ir(module)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{name}.{digest}.tensor.mlir"), "w") as f:
        f.write(text)


def compile(fn=None, *, target: str = "cpu", static_argnames=()):
    """Compile a numpy function: ``@kiln.compile`` or ``kiln.compile(fn, target="cpu")``.

    Arguments are traced, so the compiled code serves any values of the same
    shapes and dtypes. Parameters named in `static_argnames` (an axis, a flag)
    are passed as Python values instead and compiled in, one trace per value;
    so are parameters left at their defaults.
    """
    if fn is None:
        return lambda f: CompiledFunction(f, target, static_argnames)
    return CompiledFunction(fn, target, static_argnames)
