"""kiln's environment variables, declared once: name, default, parser and help.

Every ``KILN_*`` variable is read through ``get`` (never ``os.environ`` directly), so
the table below is the whole list: ``kiln --help`` prints it and ``docs/runtime.md``
carries it (a test checks the two agree). A variable is read each time it is asked
for, so a change of the environment is seen by the next compile; ``update`` sets a
value for this process without writing the environment (``kiln tune --threads``), as
JAX's ``jax.config.update`` does. An unset or empty variable takes its default; a
value its parser refuses raises ValueError naming the variable. The runtime sits
below every other layer, so all of them may read it.

    >>> get("KILN_NUM_THREADS") is None or get("KILN_NUM_THREADS") >= 1
    True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

EMULATE_THREADS_MAX = 64  # host threads the CUDA emulation may run blocks on


@dataclass(frozen=True)
class Variable:
    """One environment variable: `parse` turns its text (not empty) into its value; `help` says
    what it does, in one line; `from_environment_only` marks the ones native code reads itself
    (the CUDA emulation, at each launch), which ``update`` cannot set."""

    name: str
    default: object
    parse: Callable[[str], object]
    help: str
    from_environment_only: bool = False


def _flag(off: tuple) -> Callable[[str], bool]:
    return lambda text: text.lower() not in off


def _path(text: str) -> str:
    return text


def _positive(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            count = int(text)
        except ValueError:
            raise ValueError(f"{name} must be a positive integer, got {text!r}") from None
        if count < 1:
            raise ValueError(f"{name} must be a positive integer, got {text!r}")
        return count

    return parse


def _arch(text: str) -> str | None:
    return text.strip() or None  # checked against what nvcc's -arch takes where it is used


def _order(text: str) -> str:
    if text not in ("forward", "reverse"):
        raise ValueError(f"KILN_EMULATE_ORDER must be 'forward' or 'reverse', not {text!r}")
    return text


def _emulate_threads(text: str) -> int:
    if not (text.isdigit() and 1 <= int(text) <= EMULATE_THREADS_MAX):
        raise ValueError(
            f"KILN_EMULATE_THREADS must be a number of host threads from 1 to {EMULATE_THREADS_MAX}, not {text!r}"
        )
    return int(text)


VARIABLES = {
    v.name: v
    for v in (
        Variable(
            "KILN_CACHE_DIR",
            None,
            _path,
            "directory of the compile cache (default: the user's cache directory, ~/.cache/kiln on Linux)",
        ),
        Variable(
            "KILN_TUNING_DB",
            None,
            _path,
            "tuning database file (default: tuning.yaml in the user's data directory, ~/.local/share/kiln on Linux)",
        ),
        Variable(
            "KILN_NUM_THREADS",
            None,
            _positive("KILN_NUM_THREADS"),
            "threads parallel loops run on (default: the CPUs this process may use)",
        ),
        Variable("KILN_DUMP_DIR", None, _path, "write every stage of each new signature to files in this directory"),
        Variable(
            "KILN_DEBUG",
            False,
            _flag(("0",)),
            "debug mode for every function (1): bounds-checked code, the first op that makes a NaN named",
        ),
        Variable(
            "KILN_LOG", False, _flag(("0", "off", "false", "no")), "log each compile stage to stderr as it ends (1)"
        ),
        Variable(
            "KILN_TRACEBACK_FILTERING",
            True,
            _flag(("off", "0", "false", "no")),
            "off keeps kiln's own frames in the tracebacks of errors in your code (default: on)",
        ),
        Variable(
            "KILN_CUDA_ARCH",
            None,
            _arch,
            "the GPU architecture nvcc builds for, as its -arch takes it: sm_90, native, ... (default: nvcc's)",
        ),
        Variable(
            "KILN_EMULATE_THREADS",
            None,
            _emulate_threads,
            f"host threads the CUDA emulation runs blocks on, 1 to {EMULATE_THREADS_MAX} (default: up to 4)",
            from_environment_only=True,
        ),
        Variable(
            "KILN_EMULATE_ORDER",
            "forward",
            _order,
            "reverse runs the CUDA emulation's threads and blocks in reverse order (default: forward)",
            from_environment_only=True,
        ),
    )
}

_updates: dict = {}  # name -> the value `update` set for this process


def get(name: str):
    """The value of variable `name` (KeyError for a name not declared): what `update` set,
    else the environment's text parsed, else the default. ValueError names a bad value."""
    variable = VARIABLES[name]
    if name in _updates:
        return _updates[name]
    text = os.environ.get(name, "")
    return variable.parse(text) if text else variable.default


def update(name: str, value) -> None:
    """Set variable `name` to `value` (already parsed: an int for KILN_NUM_THREADS) for this process,
    over the environment; None goes back to the environment. ValueError for a variable that native
    code reads from the environment itself."""
    variable = VARIABLES[name]
    if variable.from_environment_only:
        raise ValueError(f"{name} is read from the environment by native code; set it there")
    if value is None:
        _updates.pop(name, None)
    else:
        _updates[name] = value


def help_text() -> str:
    """The variables as ``kiln --help`` lists them: one line each, name and help."""
    width = max(map(len, VARIABLES))
    return "\n".join(f"  {v.name:<{width}}  {v.help}" for v in VARIABLES.values())


def markdown_table() -> str:
    """The variables as docs/runtime.md's table."""
    rows = ["| variable | what it sets |", "| --- | --- |"]
    rows += [f"| `{v.name}` | {v.help} |" for v in VARIABLES.values()]
    return "\n".join(rows)
