"""The exceptions users see. All derive from KilnError and, where it fits, from
the Python exception a numpy user would expect (ValueError, TypeError, ...)."""
from kiln.dialects.diagnostics import DTypeError, KilnError, ParseError, ShapeError, VerificationError


class TracerBoolError(KilnError, TypeError):
    """Python control flow (if, while, bool(), and/or) on a value known only at run time."""


class TracerConversionError(KilnError, TypeError):
    """A traced value was turned into a concrete Python or numpy object."""


class UnsupportedError(KilnError, NotImplementedError):
    """A numpy function, ufunc method or keyword that kiln does not compile."""


class OutOfBoundsError(KilnError, IndexError):
    """An integer index outside its axis."""


class ArgumentError(KilnError, TypeError):
    """An argument that is not an array, a scalar, or a tuple, list or dict of them;
    or one whose shape or dtype does not fit."""


class StageError(KilnError, KeyError):
    """A stage name that the lowered function does not have."""

    def __str__(self):  # KeyError would print the message with quotes around it
        return self.args[0]


__all__ = ["KilnError", "ShapeError", "DTypeError", "VerificationError", "ParseError", "TracerBoolError",
           "TracerConversionError", "UnsupportedError", "OutOfBoundsError", "ArgumentError", "StageError"]


class NonFiniteError(KilnError, FloatingPointError):
    """Debug mode: an op produced NaN or infinity from finite inputs."""
