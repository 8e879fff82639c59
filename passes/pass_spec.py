"""What a pass declares about itself: its name, a one-line summary and its options.

A pass is a function from module to module. ``declare_pass`` attaches a PassSpec to it
in the module that defines it, where its options' meaning is; ``pass_table`` lists every
declared pass, and ``registry`` parses pipelines and runs them. An option is written as
MLIR writes pass options, ``name{key=value key2=value2}``, and reaches the function as a
keyword argument (``max-places`` as ``max_places``) only when the pipeline gives it: the
function's own keyword default is the option's default, and the table's test checks that
the two agree. For example::

    @declare_pass("fuse", "group ops into kernels", Option("max-places", int, 8, "..."))
    def fuse(module, max_places=8): ...

declares the pass that the pipeline ``fuse{max-places=4}`` calls as ``fuse(module, max_places=4)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from kiln.dialects import func as F

_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
_TYPE_NAMES = {int: "int", bool: "bool", float: "float", str: "string"}


@dataclass(frozen=True)
class Option:
    """One pass option: `type` is int, bool, float or str; `check(value)` returns None for an
    accepted value, else the rule it breaks (``"a power of two"``)."""

    name: str
    type: type
    default: object
    help: str
    check: Callable | None = None

    @property
    def keyword(self) -> str:
        """The Python keyword the pass function takes it as: ``max-places`` -> ``max_places``."""
        return self.name.replace("-", "_")

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES[self.type]

    def parse(self, text: str):
        """The value `text` spells. Raises ValueError with the reason (its type, or `check`'s rule).
        Booleans are ``true``/``false`` (or ``1``/``0``), as LLVM's option parser reads them."""
        if self.type is bool:
            if text not in _BOOLEANS:
                raise ValueError("takes true or false")
            value = _BOOLEANS[text]
        elif self.type is str:
            value = text
        else:
            try:
                value = self.type(text)
            except ValueError:
                raise ValueError(f"takes {'an' if self.type is int else 'a'} {self.type_name}") from None
        rule = self.check(value) if self.check else None
        if rule is not None:
            raise ValueError(f"must be {rule}")
        return value

    def spell(self, value) -> str:
        """`value` as a pipeline writes it (booleans in lower case)."""
        return str(value).lower() if self.type is bool else str(value)

    def describe(self) -> str:
        """``max-places: int (default 8)``."""
        return f"{self.name}: {self.type_name} (default {self.spell(self.default)})"


def positive(value):
    return None if value > 0 else "positive"


def power_of_two_from(least: int):
    """A check: a power of two no smaller than `least`."""

    def check(value):
        return None if value >= least and value & (value - 1) == 0 else f"a power of two, {least} or more"

    return check


@dataclass(frozen=True)
class PassSpec:
    name: str
    summary: str
    options: tuple
    function: Callable

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


def declare_pass(name: str, summary: str, *options: Option):
    """Declare the decorated function a pass named `name` (it is run by name once
    ``pass_table.PASS_TABLE`` lists it)."""

    def declare(fn):
        fn.pass_spec = PassSpec(name, summary, options, fn)
        fn.pass_name = name
        return fn

    return declare


def function_pass(fn):
    """A module pass from `fn(function, **options)`, which edits one func.func in place: the
    pass runs it on every function of the module, in order, and returns the module (as MLIR
    nests a function pass in a module's pass manager). Options pass through as keywords, and
    ``functools.wraps`` keeps `fn`'s signature, whose keyword defaults are the options'."""

    @functools.wraps(fn)
    def on_module(module, **options):
        for function in list(module.body.ops):
            if isinstance(function, F.FuncOp):
                fn(function, **options)
        return module

    return on_module
