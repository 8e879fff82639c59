"""``kiln.load``: a library made by ``kiln build``, called from Python, whose statuses raise the
errors the compiled function raises in process (an index out of range is an ``IndexError``
naming the axis, its size and the user's line), decoded from the table the library carries."""

from __future__ import annotations

from kiln.errors import user_facing
from kiln.executable import library_status_error
from kiln.runtime import library


@user_facing
def load(path: str, name: str | None = None) -> library.LibraryFunction:
    """The function `name` of a kiln-built library (by default the one it is named after:
    ``libmlp.so`` holds ``mlp``; its gradient, if built, is ``mlp_grad``), callable with numpy
    arrays of the shapes and dtypes it was built for (others raise ``TypeError`` or
    ``ValueError`` naming the argument). A status the library returns raises what the compiled
    function raises in process: ``kiln.OutOfBoundsError`` (an ``IndexError``) for an index
    outside its axis, ``MemoryError``, ``ValueError`` for an integer to a negative power. A
    missing file, a library kiln did not build or a missing function raise ``kiln.LoadError``.

    >>> kiln.load("no/such/libmlp.so")
    Traceback (most recent call last):
    kiln.errors.LoadError: no such library: no/such/libmlp.so
    """
    return library.load(path, name, status_error=_status_error)


def _status_error(status: int, signature: dict) -> Exception:
    # a library built before it carried its checks has none: its index statuses stay unnamed
    return library_status_error(status, signature.get("checks", ()))
