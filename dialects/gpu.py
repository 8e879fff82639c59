"""The ``gpu`` dialect's ``gpu.barrier``, as in upstream MLIR: every thread of a GPU block
waits here until all of them have arrived, so what one thread wrote to the block's shared
memory (a ``memref<..., #gpu.address_space<workgroup>>``) before the barrier, every thread
reads after it.

    gpu.barrier

Every thread of a block must reach the same barriers (uniform control flow); the CUDA
backend prints it as ``__syncthreads()``. Run on one thread (the affine interpreter, the
CPU) it does nothing.
"""

from __future__ import annotations

from .ir import Operation


class BarrierOp(Operation):
    name = "gpu.barrier"
    operand_names = ()

    def infer_result_types(self):
        return []

    def print_custom(self, printer):
        printer.write("gpu.barrier")

    @classmethod
    def parse_custom(cls, parser, num_results):
        return cls([], {})
