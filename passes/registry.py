"""Passes by name. A pass is a function from module to module; the driver
runs a list of them, verifying after each."""

from __future__ import annotations

import functools

from kiln.dialects import func as F
from kiln.dialects import verify
from kiln.dialects.collection import collection_paused

PASSES: dict = {}


def register_pass(name: str):
    def register(fn):
        if name in PASSES:
            raise ValueError(f"pass {name!r} is registered twice")
        PASSES[name] = fn
        fn.pass_name = name
        return fn

    return register


def function_pass(fn):
    """A module pass from `fn(function)`, which edits one func.func in place: the pass runs
    it on every function of the module, in order, and returns the module (as MLIR nests a
    function pass in a module's pass manager)."""

    @functools.wraps(fn)
    def on_module(module):
        for function in list(module.body.ops):
            if isinstance(function, F.FuncOp):
                fn(function)
        return module

    return on_module


def run_passes(module, names, after_each=None):
    """Run the named passes in order; `after_each(name, module)` sees every intermediate module."""
    for name in names:
        if name not in PASSES:
            raise KeyError(f"unknown pass {name!r}; known passes: {', '.join(sorted(PASSES))}")
        with collection_paused():
            module = PASSES[name](module)
            verify(module)
        if after_each is not None:
            after_each(name, module)
    return module
