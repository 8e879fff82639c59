"""What a set of loop nests reads from around it: the one walk behind every kernel boundary.

A kernel cut out of its function (the tuner's ``extract``, the ``outline-kernels`` pass, the
CUDA printer's ``__global__`` functions) takes as parameters the values its nests use but do
not define. Some of those are cheaper, or more informative, made again inside than passed:
a constant, a ``memref.get_global``, a view of an arena at a constant offset (LLVM then sees
the view's base, and so what it may alias). The caller says which producers those are::

    %arena = memref.alloc() : memref<4096xi8>
    %c0 = arith.constant 0 : index
    %v = memref.view %arena[%c0][] : memref<4096xi8> to memref<16xf32>
    affine.for %i = 0 to 16 { ... affine.store %x, %v[%i] ... }

    outside_values([nest], recompute=is_view_or_constant)
        -> taken [%arena], recomputed [arith.constant (%c0), memref.view (%v)]

Both lists are in order of first use; a recomputed op's operands are taken or recomputed
before it, so the recomputed ops can be cloned in the order given.
"""

from __future__ import annotations

from typing import Callable, NamedTuple


class OutsideValues(NamedTuple):
    """`taken`: values the nests use, made outside them and not recomputed (parameters), in
    order of first use; `recomputed`: the producers to clone inside instead, in an order that
    defines every operand before its use."""

    taken: list
    recomputed: list


def _never(op) -> bool:
    return False


def outside_values(nests, recompute: Callable = _never) -> OutsideValues:
    """The values the ops of `nests` (a list of ops, walked in order) use but do not define,
    results of ops and block arguments inside them excluded. A value whose producer satisfies
    `recompute(op)` is not taken: its producer is recomputed, after what it reads in turn."""
    inside = set()
    for nest in nests:
        for op in nest.walk():
            inside.update(op.results)
            for region in op.regions:
                for block in region.blocks:
                    inside.update(block.args)
    taken, recomputed, seen, seen_ops = [], [], set(), set()

    def use(value):
        if value in inside or value in seen:
            return
        seen.add(value)
        producer = getattr(value, "op", None)
        if producer is not None and recompute(producer):
            if id(producer) in seen_ops:
                return
            seen_ops.add(id(producer))
            for operand in producer.operands:
                use(operand)
            recomputed.append(producer)
        else:
            taken.append(value)

    for nest in nests:
        for op in nest.walk():
            for value in op.operands:
                use(value)
    return OutsideValues(taken, recomputed)
