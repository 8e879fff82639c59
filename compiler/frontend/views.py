"""numpy's views among traced arrays, so that item assignment aliases as numpy's does.

Inside a traced function ``x[k] = v``, ``x += v`` and ``np.add.at(x, k, v)`` are functional
updates: the Tracer ``x`` is rebound to a new value (``Tracer.assign``). In numpy a view shares
memory with its base, so the rebinding must reach every array that aliases the elements:

- a view (basic indexing, transpose, broadcast_to, and reshape where numpy does not copy)
  records its base, how to recompute it from the base, and how to write it back into the
  base (None where numpy's view is read-only);
- writing a view writes its base through it: ``row = x[0]; row[:] = 1`` changes ``x``;
- reading a view whose base was written since recomputes it from the base:
  ``row = x[0]; x[0, 0] = 5`` and then ``row[0]`` is 5, as numpy shows.

Only numpy's view functions return views (``numpy_api.VIEW_FUNCTIONS``); every other function
returns a fresh array, as numpy's copies are. The caller's arrays are never written: an
argument's Tracer is rebound, its memory is the caller's and stays as it was.
"""

from __future__ import annotations

import math

from kiln.errors import InvalidValueError, UnsupportedError
from kiln.frontend.tracing import Tracer, user_location


class View:
    """What makes a Tracer a view of `base`: `recompute(base)` gives its value from the base's,
    `write_back(base, view)` the base's value with the view's elements written into it (None:
    read-only, as numpy's broadcast_to), `strides` its element strides in the memory of the
    array that owns it (numpy's rule for whether a reshape copies reads them), and `seen` the
    base's value it was last computed from."""

    __slots__ = ("base", "recompute", "write_back", "strides", "seen")

    def __init__(self, base: Tracer, recompute, write_back, strides: tuple):
        self.base, self.recompute, self.write_back, self.strides = base, recompute, write_back, strides
        self.seen = base.value


def c_strides(shape) -> tuple:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def strides_of(x: Tracer) -> tuple:
    """x's element strides in the memory of the array that owns it (C order for a fresh array)."""
    return x.view_of.strides if x.view_of is not None else c_strides(x.shape)


def mark(result: Tracer, base: Tracer, recompute, write_back, strides) -> Tracer:
    """Record `result` as a view of `base` (unless it is `base` itself). A view of a view is
    recorded as a view of the array that owns the memory, as numpy's ``.base`` is, so that no
    chain of views (``x = x.T`` in a loop of 10000) makes reading a value walk the chain."""
    if result is base or base.weak:
        return result
    parent = base.view_of
    if parent is not None:
        recompute, write_back, base = _through(parent, recompute), _written_through(parent, write_back), parent.base
    result.view_of = View(base, recompute, write_back, tuple(strides))
    return result


def _through(parent: View, recompute):
    """recompute of a view of `parent`'s view, from the owner: the parent's value first."""
    return lambda owner: recompute(parent.recompute(owner))


def _written_through(parent: View, write_back):
    """write_back of a view of `parent`'s view, into the owner: the view's elements written into
    the parent's current value, and that written into the owner."""
    return lambda owner, view: parent.write_back(owner, write_back(parent.recompute(owner), view))


def fresh(x):
    """`x` as a new array of its own (numpy's copy): not a view, not aliased by any other Tracer."""
    return Tracer(x.value, x.ctx, x.weak) if isinstance(x, Tracer) else x


def read_only(name: str):
    """The write_back of a read-only view: numpy's error for writing one."""

    def refuse(base, view):
        raise InvalidValueError(
            f"assignment destination is read-only (the result of {name} is a read-only view)", user_location()
        )

    return refuse


def is_c_contiguous(shape, strides) -> bool:
    if math.prod(shape) == 0:
        return True
    return all(s == c for d, s, c in zip(shape, strides, c_strides(shape)) if d != 1)


def reshape_strides(shape, strides, new_shape):
    """The strides of `new_shape` as a view of an array of `shape` and `strides`, or None where
    numpy's reshape copies (numpy's _attempt_nocopy_reshape, C order)."""
    if is_c_contiguous(shape, strides):
        return c_strides(new_shape)
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    dims, olds = [d for d, _ in old], [s for _, s in old]
    new = [0] * len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new_shape) and oi < len(dims):
        np_, op = new_shape[ni], dims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= new_shape[nj]
                nj += 1
            else:
                op *= dims[oj]
                oj += 1
        if any(olds[k] != dims[k + 1] * olds[k + 1] for k in range(oi, oj - 1)):
            return None
        new[nj - 1] = olds[oj - 1]
        for nk in range(nj - 1, ni, -1):
            new[nk - 1] = new[nk] * new_shape[nk]
        ni, oi = nj, oj
        nj, oj = nj + 1, oj + 1
    last = new[ni - 1] if ni >= 1 else 1
    for nk in range(ni, len(new_shape)):
        new[nk] = last
    return tuple(new)


def assign(x, new: Tracer) -> None:
    """numpy's in-place write of all of `x`: `x` now holds `new` (already of x's shape and
    dtype), and if `x` is a view, its base is written through it."""
    if not isinstance(x, Tracer) or x.weak:
        raise UnsupportedError("only arrays can be assigned to in place (not Python scalars)", user_location())
    x.assign(new)
