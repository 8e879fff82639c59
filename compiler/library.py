"""``kiln.load``: a library made by ``kiln build``, called from Python, whose statuses raise the
errors the compiled function raises in process (an index out of range is an ``IndexError``
naming the axis, its size and the user's line), decoded from the table the library carries."""

from __future__ import annotations

from kiln.codegen.cuda_prelude import CUDA_ERROR_BASE
from kiln.cuda_executable import cuda_status_error
from kiln.dialects.location import Location
from kiln.errors import KilnError, OutOfBoundsError, user_facing
from kiln.executable import OutOfBoundsStatus, status_error
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
    return library.load(path, name, status_error=library_status_error)


def library_status_error(status: int, signature: dict) -> Exception:
    """The error a nonzero `status` of the library entry described by `signature` stands for,
    the one the compiled function raises in process: a failed index check is looked up in the
    library's table of checks (``kiln.codegen.status.check_table``; a library built before it
    carried one has none), a CUDA error of an emulated CUDA library is named, and any other
    status means what it means in process (``kiln.executable.status_error``)."""
    if signature.get("target") == "cuda-emulate" and status >= CUDA_ERROR_BASE:
        return cuda_status_error(status)
    for check in signature.get("checks", ()):
        if check["status"] == status:
            loc = Location(check["file"], check["line"]) if "file" in check else None
            return OutOfBoundsError(check["message"], loc)
    error = status_error(status)
    if isinstance(error, OutOfBoundsStatus):
        return KilnError(
            f"{signature['entry']} failed with status {status}, which its table of index checks does not list"
        )
    return error
