"""Passes by name, and pass pipelines as MLIR writes them. A pass is a function from module
to module (pass_table lists them all); the driver runs a list of them, verifying after each.

A pipeline is pass entries separated by commas, each a pass name with its options in
braces, as ``mlir-opt --pass-pipeline`` reads them (a ``builtin.module(...)`` around the
list is accepted too)::

    canonicalize,cse,fuse{max-places=4 row-buffer-bytes=0},plan-memory

parses to four PassEntry values; the third runs ``fuse(module, max_places=4,
row_buffer_bytes=0)``. An option left out keeps the pass function's own default. A boolean
option written alone (``default-schedule{threads}``) is true.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from kiln.dialects import verify
from kiln.dialects.collection import collection_paused
from kiln.dialects.diagnostics import KilnError

from .pass_table import PASSES, SPECS

__all__ = ["PASSES", "SPECS", "PassEntry", "PassPipelineError", "parse_pipeline", "run_passes"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_BARE_VALUE = re.compile(r"[^\s{}\"]+")
_QUOTED = re.compile(r'"([^"]*)"')
_ANCHOR = "builtin.module"


class PassPipelineError(KilnError, ValueError):
    """A pass pipeline that names an unknown pass or option, or gives an option a bad value."""


@dataclass(frozen=True)
class PassEntry:
    """One pass of a pipeline: its name and the options given, ((Option, value), ...)."""

    name: str
    options: tuple = ()

    @property
    def text(self) -> str:
        """The entry as a pipeline writes it: ``fuse`` or ``fuse{max-places=4}``."""
        if not self.options:
            return self.name
        values = " ".join(f"{o.name}={o.spell(v)}" for o, v in self.options)
        return f"{self.name}{{{values}}}"

    def keywords(self) -> dict:
        return {option.keyword: value for option, value in self.options}


def parse_pipeline(text: str) -> list:
    """The PassEntry list `text` spells (empty for empty text). Raises PassPipelineError naming
    the column: for an unknown pass, the known ones; for an unknown option, the pass's options."""
    return _PipelineParser(text).pipeline()


class _PipelineParser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, message: str, at: int | None = None):
        column = (self.pos if at is None else at) + 1
        raise PassPipelineError(f"pass pipeline {self.text!r}, column {column}: {message}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def accept(self, literal: str) -> bool:
        self.skip()
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def match(self, pattern):
        self.skip()
        found = pattern.match(self.text, self.pos)
        if found:
            self.pos = found.end()
        return found

    def pipeline(self) -> list:
        self.skip()
        if self.pos == len(self.text):
            return []
        start = self.pos
        if self.text.startswith(_ANCHOR, start) and self.text[start + len(_ANCHOR) :].lstrip().startswith("("):
            self.match(_NAME)
            self.accept("(")
            entries = [] if self.accept(")") else self.entries(close=")")
        else:
            entries = self.entries(close=None)
        self.skip()
        if self.pos != len(self.text):
            self.fail(f"unexpected {self.text[self.pos]!r} after the pipeline")
        return entries

    def entries(self, close) -> list:
        """Entries separated by commas, up to the end of the text or (consumed) `close`."""
        entries = [self.entry()]
        while True:
            if self.accept(","):
                entries.append(self.entry())
            elif close and self.accept(close):
                return entries
            elif self.pos == len(self.text):
                if close:
                    self.fail(f"expected {close!r} to end {_ANCHOR}(...)")
                return entries
            else:
                self.fail("expected ',' between passes")

    def entry(self) -> PassEntry:
        self.skip()
        start = self.pos
        name = self.match(_NAME)
        if name is None:
            self.fail("expected a pass name")
        name = name.group(0)
        self.skip()
        if self.text.startswith("(", self.pos):
            self.fail(
                f"{name}(...) nests a pipeline; kiln's passes run on the whole module, so only "
                f"{_ANCHOR}(...) may hold one, around the whole list",
                start,
            )
        if name not in PASSES:
            close = difflib.get_close_matches(name, PASSES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(f"unknown pass {name!r}{hint}; the passes: {', '.join(sorted(PASSES))}", start)
        options = self.options(name) if self.text.startswith("{", self.pos) else ()
        return PassEntry(name, options)

    def options(self, name: str) -> tuple:
        self.accept("{")
        spec = SPECS.get(name)
        given = {}
        while not self.accept("}"):
            at = self.pos
            key = self.match(_NAME)
            if key is None:
                self.fail(f"expected an option of {name} or '}}'" if self.pos < len(self.text) else "expected '}'")
            option = spec.option(key.group(0)) if spec else None
            if option is None:
                self.fail(f"pass {name} has no option {key.group(0)!r}; {_options_of(name)}", at)
            if option in given:
                self.fail(f"option {option.name} of pass {name} is given twice", at)
            if self.text.startswith("=", self.pos):
                self.pos += 1
                raw = self.match(_QUOTED) if self.text.startswith('"', self.pos) else self.match(_BARE_VALUE)
                if raw is None:
                    self.fail(f"option {option.name} of pass {name} has no value after '='")
                raw = raw.group(1) if raw.group(0).startswith('"') else raw.group(0)
            elif option.type is bool:
                raw = "true"  # a boolean option alone is true, as LLVM's command-line flags are
            else:
                self.fail(f"option {option.name} of pass {name} needs a value ({option.describe()})")
            try:
                given[option] = option.parse(raw)
            except ValueError as exc:
                self.fail(f"option {option.name} of pass {name} {exc}, not {raw!r}", at)
        return tuple(given.items())


def _options_of(name: str) -> str:
    spec = SPECS.get(name)
    if spec is None or not spec.options:
        return "it takes no options"
    return "its options: " + ", ".join(o.describe() for o in spec.options)


def pass_entries(names) -> list:
    """The PassEntry list of `names`: a pipeline text, or a list of pass names, pipeline texts
    and PassEntry values."""
    if isinstance(names, str):
        names = [names]
    entries = []
    for name in names:
        if isinstance(name, PassEntry):
            entries.append(name)
        else:
            entries += [PassEntry(name)] if name in PASSES else parse_pipeline(name)
    return entries


def run_passes(module, names, after_each=None):
    """Run the passes `names` gives, in order, on `module`, verifying after each; each item of
    `names` is a pass name, a pipeline (``"fuse{max-places=4}"``, ``"cse,dce"``) or a PassEntry, and all are
    parsed before any runs. `after_each(text, module)` sees every intermediate module, `text`
    being the entry as written (the plain name for a pass without options). Raises
    PassPipelineError for an unknown pass or option, VerificationError when a pass's result
    does not verify."""
    for entry in pass_entries(names):
        with collection_paused():
            module = PASSES[entry.name](module, **entry.keywords())
            verify(module)
        if after_each is not None:
            after_each(entry.text, module)
    return module
