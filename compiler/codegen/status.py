"""The status codes compiled functions return (0 is success), shared by every backend
and by the code that calls them."""

from kiln.dialects import cf as CF
from kiln.dialects.func import walk_inlined

STATUS = {"out of memory": 1, "negative integer power": 2, "barrier divergence": 3}
OUT_OF_BOUNDS = 1000  # debug builds: status OUT_OF_BOUNDS + k means access_sites(...)[k] went out of bounds
FAILED_CHECK = -1  # status FAILED_CHECK - k means check_sites(...)[k], a cf.assert, found its condition false


def check_sites(function, callees=None) -> list:
    """Every cf.assert of a scheduled function, in a fixed order: the numbering its
    FAILED_CHECK statuses use (the same once its kernels are outlined into `callees`)."""
    return [op for op in walk_inlined(function, callees) if isinstance(op, CF.AssertOp)]


def check_status(function, site, callees=None) -> int:
    """The status that says `site`, a cf.assert of `function` (or of one of its `callees`), failed."""
    return FAILED_CHECK - next(k for k, op in enumerate(check_sites(function, callees)) if op is site)


def check_table(function) -> list:
    """Each cf.assert of a scheduled `function` as a library carries it (``kiln build``), so that
    ``kiln.load`` raises the error a compiled function raises in process: its status, message,
    and the user's file and line (or none)."""
    return [
        {
            "status": FAILED_CHECK - k,
            "message": site.msg,
            **({"file": site.loc.file, "line": site.loc.line} if getattr(site.loc, "file", None) else {}),
        }
        for k, site in enumerate(check_sites(function))
    ]
