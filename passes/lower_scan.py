"""Lower ``kiln.scan`` to a loop nest: the other axes are ordinary loops, the scan axis one
sequential ``affine.for`` innermost, carrying the running value through iter_args and
storing it at every step, in numpy's order (``out[..., j] = combine(out[..., j - 1],
x[..., j])``). The running value starts at the kind's identity, so the first step stores
x[..., 0] exactly and an empty axis runs no step. Before::

    func.func @f(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = kiln.scan %x {axis = 1, kind = "add", rounding = f16} : tensor<3x4xf32>
      func.return %0 : tensor<3x4xf32>
    }

After (with ``rounding = f16`` each step is rounded to float16 and widened again, as numpy's
float16 accumulate rounds every step)::

    func.func @f(%x: memref<3x4xf32>, %out0: memref<3x4xf32>) attributes {kiln.buffers = ["x", "out0"]} {
      affine.for %k0.i = 0 to 3 {
        %0 = arith.constant -0.0 : f32
        %1 = affine.for %k0.r = 0 to 4 iter_args(%acc0 = %0) -> (f32) {
          %2 = affine.load %x[%k0.i, %k0.r] : memref<3x4xf32>
          %3 = arith.addf %acc0, %2 : f32
          %4 = arith.truncf %3 : f32 to f16
          %5 = arith.extf %4 : f16 to f32
          affine.store %5, %out0[%k0.i, %k0.r] : memref<3x4xf32>
          affine.yield %5 : f32
        } {kiln.loop = "k0.r"}
      } {kiln.loop = "k0.i"}
      func.return
    }

The carried value keeps the scan axis out of every schedule's reach: ``parallel``,
``unroll_jam`` and ``reorder`` refuse loops with iter_args, and ``vectorize`` and GPU
``bind`` refuse a carried value that is read besides the yield (loop_transforms.
partials_escape), which is what sets a scan apart from a reduction. The loops around it
are free: vectorizing the column loop of an axis-0 scan runs a vector of columns at a
time, each lane its own sequential scan.
"""

from __future__ import annotations

from kiln.dialects import tensor as T
from kiln.dialects.affine_expr import Dim

from .scalar_rules import SCALAR_RULES, constant, convert


def lower_scan(L, op) -> None:
    """One nest for `op` (a ``kiln.scan``) in FunctionLowering `L`."""
    shape, axis = op.result.type.shape, op.axis
    element, rounding = op.result.type.element, op.rounding
    source = L.views[op.operand]  # read before destination() rebinds anything
    out = L.destination(op.result)
    combine = SCALAR_RULES[T.SCAN_KINDS[op.kind][0]]
    outer = [extent for k, extent in enumerate(shape) if k != axis]
    logical = [Dim(k) for k in range(axis)] + [Dim(len(outer))] + [Dim(k) for k in range(axis, len(outer))]
    with L.b.loops(outer) as ivs:
        start = constant(L.b, T.scan_identity(op.kind, element.dtype).item(), element)

        def step(reduced, running):
            at = ivs + reduced
            value = combine(L.b, op, element, running[0], L.b.load(source, logical, at))
            if rounding != element:
                value = convert(L.b, convert(L.b, value, element, rounding), rounding, element)
            L.b.store(value, out, logical, at)
            return [value]

        L.b.reduction([shape[axis]], [start], step)
