"""Advanced indexing (gathers), masks and functional item assignment (scatters)."""

from __future__ import annotations

from kiln.frontend.numpy_api import FUNCTION_RULES

FUNCTION_RULES.update({})
