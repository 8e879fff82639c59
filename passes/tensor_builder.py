"""Emit tensor ops with numpy-like helpers: what autodiff's rules are written in.

Every op gets the builder's location, so backward ops point at the user's
line of the forward op they differentiate.
"""

from __future__ import annotations

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects.ir import Block, Value
from kiln.dialects.types import TensorType


class TensorBuilder:
    def __init__(self, block: Block, loc=None):
        self.block = block
        self.loc = loc

    def op(self, op_class, *operands, result_type=None, **attributes) -> Value:
        op = op_class(list(operands), attributes or None, None if result_type is None else [result_type], loc=self.loc)
        op.verify()
        return self.block.append(op).result

    # -- constants ---------------------------------------------------------------------
    def full(self, value, like: TensorType) -> Value:
        scalar = self.op(T.ConstantOp, value=np.array(value, like.dtype))
        return self.broadcast_to(scalar, like.shape)

    def zeros(self, like: TensorType) -> Value:
        return self.full(0, like)

    # -- elementwise -----------------------------------------------------------------
    def add(self, a, b):
        return self.op(T.AddOp, a, b)

    def sub(self, a, b):
        return self.op(T.SubOp, a, b)

    def mul(self, a, b):
        return self.op(T.MulOp, a, b)

    def div(self, a, b):
        return self.op(T.DivOp, a, b)

    def neg(self, a):
        return self.op(T.NegOp, a)

    def cmp(self, a, b, predicate: str):
        return self.op(T.CmpOp, a, b, predicate=predicate)

    def select(self, condition, a, b):
        return self.op(T.SelectOp, condition, a, b)

    def cast(self, x, dtype):
        t = x.type
        if t.dtype == np.dtype(dtype):
            return x
        return self.op(T.ConvertOp, x, result_type=T.tensor_type(t.shape, dtype))

    # -- layout ------------------------------------------------------------------------
    def broadcast_to(self, x, shape):
        shape = tuple(shape)
        if x.type.shape == shape:
            return x
        return self.op(T.BroadcastToOp, x, result_type=x.type.with_shape(shape))

    def reshape(self, x, shape):
        shape = tuple(shape)
        if x.type.shape == shape:
            return x
        return self.op(T.ReshapeOp, x, result_type=x.type.with_shape(shape))

    def transpose(self, x, permutation):
        permutation = tuple(permutation)
        if permutation == tuple(range(len(permutation))):
            return x
        return self.op(T.TransposeOp, x, permutation=permutation)

    def swap_last_two(self, x):
        rank = x.type.rank
        return self.transpose(x, tuple(range(rank - 2)) + (rank - 1, rank - 2))

    def sum(self, x, axes, keepdims: bool):
        axes = tuple(sorted(axes))
        if not axes:
            return x
        return self.op(T.ReduceSumOp, x, axes=axes, keepdims=keepdims)

    def slice(self, x, start, stop, step):
        if tuple(start) == (0,) * x.type.rank and tuple(stop) == x.type.shape and set(step) <= {1}:
            return x
        return self.op(T.SliceOp, x, start=tuple(start), stop=tuple(stop), step=tuple(step))

    def insert_slice(self, source, dest, start, stop, step):
        return self.op(T.InsertSliceOp, source, dest, start=tuple(start), stop=tuple(stop), step=tuple(step))

    def matmul(self, a, b):
        return self.op(T.MatmulOp, a, b)

    def conv2d(self, x, w, stride, padding):
        return self.op(T.Conv2DOp, x, w, stride=tuple(stride), padding=tuple(padding))
