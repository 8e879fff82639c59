"""Source locations: where in the user's code an operation came from.

Locations are notes, not semantics: they are printed (MLIR ``loc(...)``) and
used in error messages, but never take part in comparing or hashing ops.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        escaped = self.file.replace("\\", "\\\\").replace('"', '\\"')
        return f'loc("{escaped}":{self.line}:{self.col})'
