"""Debug mode (``kiln.compile(fn, debug=True)`` or ``KILN_DEBUG=1``).

Native code is built with every load and store bounds-checked: an access
outside its buffer is skipped and its site returned in the status, which
becomes an OutOfBoundsError naming the kernel, the access and the user's line
of the tensor op the kernel computes. After every call, the traced function
runs again in the reference interpreter, op by op, and the first op that
makes NaN or infinity out of finite inputs is reported with the user's line
(NaNs that are in the inputs themselves are passed through, not reported).
Verification after every pass runs in every mode.
"""

from __future__ import annotations

import numpy as np

from kiln.codegen.llvm_emitter import access_sites
from kiln.codegen.status import OUT_OF_BOUNDS
from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import tensor as T
from kiln.dialects.traits import LOOP_LIKE
from kiln.errors import NonFiniteError, OutOfBoundsError
from kiln.runtime import config


def enabled(debug: bool | None) -> bool:
    if debug is not None:
        return bool(debug)
    return config.get("KILN_DEBUG")


def out_of_bounds_error(pipeline, status: int) -> OutOfBoundsError:
    function = pipeline.module("scheduled").body.ops[-1]
    site = access_sites(function)[status - OUT_OF_BOUNDS]
    top = site
    while (
        top.parent is not None and top.parent.parent is not None and not isinstance(top.parent.parent.parent, F.FuncOp)
    ):
        top = top.parent.parent.parent
    kernel = A.kernel_of(top) if top.has_trait(LOOP_LIKE) else "?"
    tensor_kernels = pipeline.kernels()
    number = int(kernel[1:]) if kernel[1:].isdigit() else -1
    source = tensor_kernels[number] if 0 <= number < len(tensor_kernels) else None
    what = ""
    if source is not None:
        ops = [op.name for op in source.body.ops][:-1] if source.name == "kiln.fused" else [source.name]
        what = f" (computing {', '.join(ops)})"
    return OutOfBoundsError(
        f"kernel {kernel}{what}: {site.name} outside {site.memref.type}; "
        "this is a kiln bug: please report it with `kiln bisect`",
        source.loc if source is not None else None,
    )


def check_finite(function, inputs) -> None:
    """Run the traced function op by op (the reference interpreter's semantics); raise at
    the first op that makes NaN/inf from finite operands. Constants may hold inf, and a
    bitcast (x.view(dtype)) may read any bits as NaN or inf: it computes nothing."""
    env = {value: np.asarray(arg) for value, arg in zip(function.arguments, inputs)}
    with np.errstate(all="ignore"):
        for op in function.body.ops:
            if isinstance(op, F.ReturnOp):
                return
            operands = [env[v] for v in op.operands]
            result = np.asarray(op.evaluate(*operands))
            env[op.result] = result
            if (
                operands
                and not isinstance(op, T.BitcastOp)
                and result.dtype.kind == "f"
                and not np.all(np.isfinite(result))
                and all(a.dtype.kind != "f" or np.all(np.isfinite(a)) for a in operands)
            ):
                bad = "NaN" if np.isnan(result).any() else "infinity"
                where = np.argwhere(~np.isfinite(result))[0] if result.ndim else ()
                raise NonFiniteError(
                    f"{op.name} produced {bad} (first at index {tuple(int(i) for i in where)}) from finite inputs",
                    op.loc,
                )
