"""kiln's version and where its source lives, in a module of its own so that any module
may read them without importing the rest of kiln."""

from __future__ import annotations

import functools
import importlib.util
import os

__version__ = "0.1.0"


@functools.lru_cache(maxsize=None)
def source_roots() -> tuple:
    """The directories of kiln's four packages (``kiln`` and its ``dialects``, ``passes`` and
    ``runtime``, which setuptools maps from separate folders), each ending in a separator."""
    roots = [os.path.dirname(__file__)]
    roots += [
        importlib.util.find_spec(f"kiln.{name}").submodule_search_locations[0]
        for name in ("dialects", "passes", "runtime")
    ]
    return tuple(os.path.join(root, "") for root in roots)
