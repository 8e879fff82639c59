"""Errors that point at the user's code.

Every error a user can cause carries an optional source location. The message
then reads like a compiler diagnostic::

    model.py:12: shapes (3, 4) and (5,) do not broadcast
        y = x + b
"""

from __future__ import annotations

import linecache


class KilnError(Exception):
    """Base class of every error kiln raises on purpose."""

    def __init__(self, message: str, loc=None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None or not getattr(self.loc, "file", None):
            return self.message
        text = f"{self.loc.file}:{self.loc.line}: {self.message}"
        source = linecache.getline(self.loc.file, self.loc.line).strip()
        if source:
            text += f"\n    {source}"
        return text


class ShapeError(KilnError, ValueError):
    """Shapes that do not fit together (broadcasting, matmul, reshape, axes)."""


class DTypeError(KilnError, TypeError):
    """A dtype kiln does not support, or an op applied to the wrong kind of dtype."""


class VerificationError(KilnError):
    """IR that breaks an op's or the module's invariants."""


class ParseError(KilnError):
    """Text that is not valid kiln IR."""


class OutOfBoundsError(KilnError, IndexError):
    """An integer index outside its axis (also raised by kiln.check_index's reference semantics)."""
