"""Index keys as numpy reads them: a key (ints, slices, None, Ellipsis, index arrays, boolean
masks, traced or constant) normalized to one entry per axis, with numpy's errors for a key
that does not fit the array (IndexError-kind OutOfBoundsError, at the user's line). Gathers
(numpy_indexing) and item assignment read keys through this module; rules from numpy's
"Indexing on ndarrays" (basic and advanced indexing, boolean arrays).
"""

from __future__ import annotations

import numpy as np

from kiln.errors import InvalidValueError, OutOfBoundsError, UnsupportedError
from kiln.frontend.tracing import Tracer, user_location

# What to write instead of a traced mask whose result would be data-sized.
MASK_ALTERNATIVE = "use np.where(mask, x, 0) (or x * mask) to keep the shape, or make the mask a constant"


class Advanced:
    """An index array in a key: a numpy int64 array (constant) or a traced integer array."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class Key:
    """An index after numpy's normalization: one entry per axis of the result of its basic part
    (None, a slice, an int, or an Advanced standing for its axis), and the traced boolean
    mask, if the key is one."""

    def __init__(self, entries, mask=None):
        self.entries = entries
        self.mask = mask

    @property
    def advanced(self) -> list:
        return [k for k, e in enumerate(self.entries) if isinstance(e, Advanced)]


# -- the key -------------------------------------------------------------------------------------
def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def entry(k):
    """One entry of a key as numpy reads it: None, Ellipsis, a slice, an int, a constant array
    (int64 or bool), or a Tracer."""
    if k is None or k is Ellipsis or _is_int(k) or isinstance(k, Tracer):
        return k
    if isinstance(k, slice):
        if any(isinstance(p, Tracer) for p in (k.start, k.stop, k.step)):
            raise UnsupportedError(
                "a slice with traced bounds has a size known only at run time; use static bounds, "
                "or np.where with a comparison against np.arange to select the elements",
                user_location(),
            )
        return k
    if isinstance(k, (bool, np.bool_)):
        raise UnsupportedError(
            f"indexing with a scalar boolean ({k!r}) is not supported; use x[None] (True) or x[None][:0] (False)",
            user_location(),
        )
    if isinstance(k, (list, tuple, np.ndarray, np.generic)):
        if not entry_free(k):
            raise UnsupportedError("an index list may not hold traced values; use np.stack of them", user_location())
        array = np.asarray(k)
        if array.size == 0 and array.dtype == np.float64 and not isinstance(k, np.ndarray):
            array = array.astype(np.int64)  # numpy reads an empty list as an empty integer index
        if array.dtype.kind in "iu":
            return int(array) if array.ndim == 0 else array.astype(np.int64)
        if array.dtype == np.bool_:
            return array
    raise OutOfBoundsError(
        f"only integers, slices (':'), ellipsis ('...'), None and integer or boolean arrays are "
        f"valid indices, got {k!r}",
        user_location(),
    )


def check_index_dtype(index: Tracer) -> None:
    if index.dtype.kind not in "iub":
        raise OutOfBoundsError(
            f"arrays used as indices must be of integer (or boolean) type, got {index.dtype}", user_location()
        )


def parse_key(x: Tracer, key, check: bool = True) -> Key:
    """numpy's reading of `key` on `x`: Ellipsis expanded, missing trailing axes sliced whole,
    constant masks replaced by their nonzero positions, constant indices checked against their
    axes and wrapped, and ints made index arrays when any array is present (numpy then treats
    them as advanced indices, which decides where the broadcast axes go)."""
    raw = [entry(k) for k in (key if isinstance(key, tuple) else (key,))]
    for k in raw:
        if isinstance(k, Tracer):
            check_index_dtype(k)
    if sum(k is Ellipsis for k in raw) > 1:
        raise OutOfBoundsError("an index can only have a single ellipsis ('...')", user_location())
    consumed = sum(
        k.ndim if _is_array(k) and k.dtype == np.bool_ else 0 if k is None or k is Ellipsis else 1 for k in raw
    )
    if consumed > x.ndim:
        raise OutOfBoundsError(
            f"too many indices for array: array is {x.ndim}-dimensional, but {consumed} were indexed", user_location()
        )
    at = next((i for i, k in enumerate(raw) if k is Ellipsis), len(raw))
    raw = raw[:at] + [slice(None)] * (x.ndim - consumed) + raw[at + 1 :]
    traced_masks = [k for k in raw if isinstance(k, Tracer) and k.dtype == np.bool_]
    if traced_masks and any(not (isinstance(k, slice) and k == slice(None)) for k in raw if k is not traced_masks[0]):
        raise UnsupportedError(
            f"a traced boolean mask mixed with other indices is not supported; {MASK_ALTERNATIVE}", user_location()
        )
    entries, axis, mask = [], 0, None
    any_array = any(_is_array(k) for k in raw)
    for k in raw:
        if k is None:
            entries.append(None)
            continue
        if _is_array(k) and k.dtype == np.bool_:
            shape = x.shape[axis : axis + k.ndim]
            if k.size == 0 and k.ndim and k.shape != shape:
                # numpy reads an empty boolean array that does not fit as an empty integer index
                entries.extend(Advanced(np.zeros(0, np.int64)) for _ in range(k.ndim))
                axis += k.ndim
                continue
            if isinstance(k, Tracer) and k.size == 0 and k.ndim:
                k = np.zeros(k.shape, bool)  # no element is selected, whatever the data
            if isinstance(k, Tracer):
                if k.ndim == 0:
                    raise UnsupportedError(
                        f"x[mask] with a traced 0-d mask: the result's size depends on its value; {MASK_ALTERNATIVE}",
                        user_location(),
                    )
                _check_mask_shape(k, shape, axis)
                mask = (len(entries), k)
                entries.extend(Advanced(None) for _ in range(k.ndim))
            else:
                _check_mask_shape(k, shape, axis)
                if k.ndim == 0:
                    raise UnsupportedError(
                        "indexing with a 0-d boolean array is not supported; use x[None] (True) or x[None][:0]",
                        user_location(),
                    )
                entries.extend(Advanced(p.astype(np.int64)) for p in np.nonzero(k))
            axis += k.ndim
            continue
        size = x.shape[axis]
        if isinstance(k, slice):
            entries.append(k)
        elif isinstance(k, Tracer):
            entries.append(Advanced(k))
        else:
            array = np.asarray(k, np.int64)
            bad = (array < -size) | (array >= size)
            if bad.any() and check:
                raise OutOfBoundsError(
                    f"index {int(array[bad].flat[0])} is out of bounds for axis {axis} with size {size}",
                    user_location(),
                )
            array = np.where(array < 0, array + size, array)
            entries.append(Advanced(array) if any_array else int(array))
        axis += 1
    return Key(entries, mask)


def entry_free(values) -> bool:
    """Whether a list holds no traced values (np.asarray can take it)."""
    return not any(isinstance(e, Tracer) for e in np.ravel(np.asarray(values, dtype=object)))


def _check_mask_shape(mask, shape, axis: int) -> None:
    for d, (got, size) in enumerate(zip(mask.shape, shape)):
        if got != size:
            raise OutOfBoundsError(
                f"boolean index did not match indexed array along axis {axis + d}; size of axis is "
                f"{size} but size of corresponding boolean axis is {got}",
                user_location(),
            )


def broadcast_indices(shapes) -> tuple:
    """The shape index arrays broadcast to; numpy's IndexError where they do not."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " ".join(str(tuple(s)).replace(" ", "") for s in shapes)
        raise OutOfBoundsError(
            f"shape mismatch: indexing arrays could not be broadcast together with shapes {listed}", user_location()
        ) from None


def _is_array(k) -> bool:
    return isinstance(k, (np.ndarray, Tracer))


def slice_indices(k: slice, size: int) -> tuple:
    """`k.indices(size)`; numpy's ValueError for a zero step, at the user's line."""
    if k.step is not None and not isinstance(k.step, Tracer) and k.step == 0:
        raise InvalidValueError("slice step cannot be zero", user_location())
    return k.indices(size)
