"""numpy's linear algebra beyond matmul: einsum, tensordot, inner, outer, vdot, kron, cross,
matrix_power, multi_dot, norms.

Each is lowered to transposes, broadcasts, multiplies, reductions and matmul: einsum takes
diagonals of repeated labels, sums away labels no other operand or the output needs, and
contracts the operands pairwise, each pair with a contracted label as one batched matmul
(much faster than a multiply and a sum), a pair without one as a broadcast multiply.

What needs a matrix decomposition (inv, solve, svd, eigh, det, the 2-norm of a matrix, ...)
is registered to say so by name.
"""

from __future__ import annotations

import string

import numpy as np

from kiln.errors import ArgumentError, DTypeError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.numpy_shapes import as_array, static_int, static_ints
from kiln.frontend.tracing import Tracer, user_location

# numpy's labels for the integer subscripts of einsum's interleaved form: 0-25 are A-Z, 26-51 a-z
_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase


# -- einsum -------------------------------------------------------------------------------------
def _sum_over(x: Tracer, axes) -> Tracer:
    """x summed over `axes` in its own dtype, as einsum sums (no widening; bools by 'or')."""
    if not axes:
        return x
    if x.dtype == np.bool_:
        return ops.any_all("any", x, tuple(axes))
    return ops.reduce("sum", x, tuple(axes), False, x.dtype)


def _term_labels(term: str, ndim: int, position: int, ellipsis_rank: int) -> list:
    """The labels of one operand: its letters, and for '...' ints counting the broadcast
    dimensions from the left of all operands' (right-aligned) broadcast dimensions."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise ArgumentError(f"np.einsum: invalid subscripts {term!r} (one '...' at most)", user_location())
    head, dots, tail = term.partition("...")
    for c in head + tail:
        if c not in string.ascii_letters:
            raise ArgumentError(f"np.einsum: invalid subscript {c!r} in {term!r} (letters only)", user_location())
    broadcast = ndim - len(head) - len(tail)
    if broadcast < 0 or (broadcast > 0 and not dots):
        raise ShapeError(
            f"np.einsum: operand {position} has {ndim} dimensions, but its subscripts {term!r} give "
            f"{len(head) + len(tail)}",
            user_location(),
        )
    return list(head) + list(range(ellipsis_rank - broadcast, ellipsis_rank)) + list(tail)


def _parse(subscripts: str, operands: list):
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    if "->" in output or "-" in inputs or ">" in inputs:
        raise ArgumentError(f"np.einsum: invalid subscripts {subscripts!r} (one '->' at most)", user_location())
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ArgumentError(
            f"np.einsum: the subscripts {subscripts!r} name {len(terms)} operands, {len(operands)} were given",
            user_location(),
        )
    fixed = [len(t.replace("...", "")) for t in terms]
    ellipsis_rank = max([x.ndim - f for x, f, t in zip(operands, fixed, terms) if "..." in t], default=0)
    labels = [_term_labels(t, x.ndim, i, ellipsis_rank) for i, (t, x) in enumerate(zip(terms, operands))]
    letters = [c for ls in labels for c in ls if isinstance(c, str)]
    if not arrow:
        # implicit output: the broadcast dimensions, then the letters used once, in ASCII order
        return labels, list(range(ellipsis_rank)) + sorted(c for c in set(letters) if letters.count(c) == 1)
    head, dots, tail = output.partition("...")
    if ellipsis_rank and not dots:
        raise ShapeError(
            f"np.einsum: the output {output!r} has no '...' for the {ellipsis_rank} broadcast dimension(s) "
            "of the inputs (numpy does not sum them away)",
            user_location(),
        )
    out = list(head) + (list(range(ellipsis_rank)) if dots else []) + list(tail)
    for c in head + tail:
        if c not in letters:
            raise ArgumentError(
                f"np.einsum: output subscript {c!r} never appeared in an input ({subscripts!r})", user_location()
            )
    if len(set(out)) != len(out) or "..." in tail:
        raise ArgumentError(f"np.einsum: the output subscripts {output!r} repeat a label", user_location())
    return labels, out


def _interleaved(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [sublistout]) as subscripts and operands."""

    def term(sublist):
        parts = []
        for s in sublist:
            if s is Ellipsis:
                parts.append("...")
            elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and 0 <= s < 52:
                parts.append(_SUBLIST_LETTERS[s])
            else:
                raise ArgumentError(f"np.einsum: subscripts must be ints in [0, 52) or ..., got {s!r}", user_location())
        return "".join(parts)

    output = args[-1] if len(args) % 2 else None
    args = args[:-1] if len(args) % 2 else args
    operands, sublists = list(args[0::2]), list(args[1::2])
    if len(sublists) != len(operands):
        raise ArgumentError("np.einsum: every operand needs its list of subscripts", user_location())
    subscripts = ",".join(term(s) for s in sublists) + ("" if output is None else "->" + term(output))
    return subscripts, operands


def _diagonals(x: Tracer, labels: list, position: int):
    """x with each repeated label taken along its diagonal (the label then comes last)."""
    while len(set(labels)) != len(labels):
        label = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(label)
        j = labels.index(label, i + 1)
        if x.shape[i] != x.shape[j]:
            raise ShapeError(
                f"np.einsum: dimensions in operand {position} for collapsing index {label!r} don't match "
                f"({x.shape[i]} != {x.shape[j]})",
                user_location(),
            )
        x = ops.diagonal(x, 0, i, j)
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [label]
    return x, labels


def _sum_unneeded(x: Tracer, labels: list, needed) -> tuple:
    axes = [k for k, c in enumerate(labels) if c not in needed]
    return _sum_over(x, axes), [c for c in labels if c in needed]


def _arranged(x: Tracer, labels: list, order: list, sizes: dict) -> Tracer:
    """x transposed to the labels `order` (a label x lacks becomes a 1), its 1s broadcast
    to `sizes` where given."""
    x = ops.transpose(x, [labels.index(c) for c in order if c in labels])
    x = ops.reshape(x, tuple(x.shape[[c for c in order if c in labels].index(c)] if c in labels else 1 for c in order))
    return ops.broadcast_to(x, tuple(sizes.get(c, d) for c, d in zip(order, x.shape)))


def _contract(a: Tracer, la: list, b: Tracer, lb: list, needed) -> tuple:
    """a and b multiplied, summing the labels they share that nothing later needs."""
    a, la = _sum_unneeded(a, la, set(needed) | set(lb))
    b, lb = _sum_unneeded(b, lb, set(needed) | set(la))
    shared = [c for c in la if c in lb]
    sizes = {}
    for c in shared:
        # numpy's broadcasting across operands: a 1 takes the other's size (0 included), else equal
        size_a, size_b = a.shape[la.index(c)], b.shape[lb.index(c)]
        sizes[c] = size_b if size_a == 1 else size_a
        if size_a != size_b and 1 not in (size_a, size_b):
            raise ShapeError(
                f"np.einsum: label {c!r} has sizes {size_a} and {size_b}, which do not broadcast",
                user_location(),
            )
    batch = [c for c in shared if c in needed]
    summed = [c for c in shared if c not in needed]
    a_only, b_only = [c for c in la if c not in lb], [c for c in lb if c not in la]
    out = batch + a_only + b_only
    if not summed:
        return np.multiply(_arranged(a, la, out, sizes), _arranged(b, lb, out, sizes)), out
    a = _arranged(a, la, batch + a_only + summed, sizes)
    b = _arranged(b, lb, batch + summed + b_only, sizes)
    batch_shape = a.shape[: len(batch)]
    m, k = (
        int(np.prod(a.shape[len(batch) : len(batch) + len(a_only)])),
        int(np.prod(a.shape[len(a.shape) - len(summed) :])),
    )
    n = int(np.prod(b.shape[len(batch) + len(summed) :]))
    product = ops.matmul(ops.reshape(a, batch_shape + (m, k)), ops.reshape(b, batch_shape + (k, n)))
    a_shape = a.shape[len(batch) : len(batch) + len(a_only)]
    return ops.reshape(product, batch_shape + a_shape + b.shape[len(batch) + len(summed) :]), out


def einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    """np.einsum in its string and interleaved forms: repeated labels in one operand are its
    diagonal, '...' broadcasts, the output is explicit or implicit; `optimize` is accepted and
    ignored (kiln picks matmul for every contraction)."""
    if out is not None:
        raise UnsupportedError(
            "np.einsum(..., out=...) is not supported inside a compiled function; use the returned value",
            user_location(),
        )
    if not operands:
        raise ArgumentError("np.einsum needs subscripts and at least one operand", user_location())
    if isinstance(operands[0], str):
        subscripts, arrays = operands[0], list(operands[1:])
    else:
        subscripts, arrays = _interleaved(operands)
    arrays = [as_array(a) for a in arrays]
    if not arrays:
        raise ArgumentError("np.einsum needs at least one operand", user_location())
    target = np.result_type(*(a.dtype for a in arrays))
    if dtype is not None:
        target = ops.check_dtype(dtype, "np.einsum(dtype=...)")
        for a in arrays:
            if not np.can_cast(a.dtype, target, casting):
                raise DTypeError(
                    f"np.einsum: cannot cast {a.dtype} to {target} according to the rule {casting!r}", user_location()
                )
    arrays = [ops.cast(a, ops.check_dtype(target, "np.einsum")) for a in arrays]
    labels, output = _parse(subscripts, arrays)
    terms = [_diagonals(a, ls, i) for i, (a, ls) in enumerate(zip(arrays, labels))]
    result, result_labels = terms[0]
    for k, (x, lx) in enumerate(terms[1:], start=1):
        later = set(output) | {c for _, ls in terms[k + 1 :] for c in ls}
        result, result_labels = _contract(result, result_labels, x, lx, later)
    result, result_labels = _sum_unneeded(result, result_labels, set(output))
    return ops.transpose(result, [result_labels.index(c) for c in output])


# -- products ---------------------------------------------------------------------------------------
def tensordot(a, b, axes=2):
    """np.tensordot: the last `axes` axes of a with the first of b, or the axes given as a
    pair of sequences, contracted as one matmul."""
    a, b = as_array(a), as_array(b)
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        axes_a, axes_b = list(range(-int(axes), 0)), list(range(int(axes)))
    else:
        try:
            first, second = axes
        except (TypeError, ValueError):
            raise ArgumentError(
                f"np.tensordot: axes must be an int or a pair of sequences, got {axes!r}", user_location()
            ) from None
        axes_a, axes_b = static_ints(first, "np.tensordot's axes"), static_ints(second, "np.tensordot's axes")
    mismatch = f"np.tensordot: shape-mismatch for sum (axes {axes!r}, shapes {a.shape} and {b.shape})"
    if len(axes_a) != len(axes_b):
        raise ShapeError(mismatch, user_location())
    axes_a = [ops.normalize_axis(x, a.ndim) for x in axes_a]
    axes_b = [ops.normalize_axis(x, b.ndim) for x in axes_b]
    if any(a.shape[i] != b.shape[j] for i, j in zip(axes_a, axes_b)):
        raise ShapeError(mismatch, user_location())
    kept_a = [k for k in range(a.ndim) if k not in axes_a]
    kept_b = [k for k in range(b.ndim) if k not in axes_b]
    rows, summed, cols = (_size(x, ks) for x, ks in ((a, kept_a), (a, axes_a), (b, kept_b)))
    left = ops.reshape(ops.transpose(a, kept_a + axes_a), (rows, summed))
    right = ops.reshape(ops.transpose(b, axes_b + kept_b), (summed, cols))
    return ops.reshape(ops.matmul(left, right), tuple(a.shape[k] for k in kept_a) + tuple(b.shape[k] for k in kept_b))


def _size(x: Tracer, axes) -> int:
    return int(np.prod([x.shape[k] for k in axes], dtype=np.int64))


def inner(a, b, /):
    a, b = as_array(a), as_array(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"np.inner: the last dimensions differ ({a.shape} and {b.shape})", user_location())
    return tensordot(a, b, ([-1], [-1]))


def outer(a, b, out=None):
    if out is not None:
        raise UnsupportedError("np.outer(..., out=...) is not supported inside a compiled function", user_location())
    a, b = as_array(a), as_array(b)
    return np.multiply(ops.reshape(a, (-1, 1)), ops.reshape(b, (1, -1)))


def vdot(a, b, /):
    a, b = as_array(a), as_array(b)
    if a.size != b.size:
        raise ShapeError(f"np.vdot: vectors have different lengths ({a.size} and {b.size})", user_location())
    return ops.matmul(ops.reshape(a, (-1,)), ops.reshape(b, (-1,)))


def kron(a, b):
    """np.kron: a's axes interleaved with b's, a * b broadcast over the pairs, merged."""
    b = as_array(b)
    a = as_array(a)
    a = ops.reshape(a, (1,) * (b.ndim - a.ndim) + a.shape)  # numpy's ndmin=b.ndim
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    b = ops.reshape(b, (1,) * (a.ndim - b.ndim) + b.shape)
    spaced_a = ops.reshape(a, tuple(d for s in a.shape for d in (s, 1)))
    spaced_b = ops.reshape(b, tuple(d for s in b.shape for d in (1, s)))
    return ops.reshape(np.multiply(spaced_a, spaced_b), tuple(p * q for p, q in zip(a.shape, b.shape)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross of 3-vectors (or 2-vectors, whose missing z is 0), in numpy's formulas."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = as_array(a), as_array(b)
    if a.ndim < 1 or b.ndim < 1:
        raise ShapeError("np.cross: at least one array has zero dimension", user_location())
    a, b = ops.moveaxis(a, axisa, -1), ops.moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ShapeError(
            f"np.cross: incompatible dimensions for cross product (dimension must be 2 or 3), got {a.shape[-1]} "
            f"and {b.shape[-1]}",
            user_location(),
        )
    dtype = np.promote_types(a.dtype, b.dtype)
    a, b = ops.cast(a, dtype), ops.cast(b, dtype)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = np.multiply(a0, b1) - np.multiply(a1, b0)
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    if a.shape[-1] == 2:
        b2 = b[..., 2]
        x, y = np.multiply(a1, b2), -np.multiply(a0, b2)
    elif b.shape[-1] == 2:
        a2 = a[..., 2]
        x, y = -np.multiply(a2, b1), np.multiply(a2, b0)
    else:
        a2, b2 = a[..., 2], b[..., 2]
        x, y = np.multiply(a1, b2) - np.multiply(a2, b1), np.multiply(a2, b0) - np.multiply(a0, b2)
    shape = ops.broadcast_shapes(x.shape, y.shape, z.shape)
    result = ops.stack([ops.broadcast_to(v, shape) for v in (x, y, z)], -1)
    return ops.moveaxis(result, -1, axisc)


def _square_stack(a: Tracer, name: str) -> Tracer:
    if a.ndim < 2:
        raise ShapeError(
            f"{name}: {a.ndim}-dimensional array given; it must be at least two-dimensional", user_location()
        )
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name}: the last 2 dimensions of the array must be square, got {a.shape}", user_location())
    return a


def matrix_power(a, n):
    """np.linalg.matrix_power for n >= 0, by numpy's squarings (n < 0 needs an inverse)."""
    a = _square_stack(as_array(a), "np.linalg.matrix_power")
    n = static_int(n, "np.linalg.matrix_power's exponent")
    if n < 0:
        raise UnsupportedError(
            "np.linalg.matrix_power with a negative exponent needs a matrix inverse (a decomposition), "
            "which kiln does not compile yet",
            user_location(),
        )
    if n == 0:
        return ops.broadcast_to(ops.lift(a.ctx, np.eye(a.shape[-1], dtype=a.dtype), a.dtype), a.shape)
    if n <= 3:
        result = a
        for _ in range(n - 1):
            result = ops.matmul(result, a)
        return result
    power = result = None
    while n > 0:
        power = a if power is None else ops.matmul(power, power)
        n, bit = divmod(n, 2)
        if bit:
            result = power if result is None else ops.matmul(result, power)
    return result


def multi_dot(arrays, *, out=None):
    """np.linalg.multi_dot, multiplied left to right (numpy picks the cheapest order, which
    differs only in rounding)."""
    if out is not None:
        raise UnsupportedError("np.linalg.multi_dot(..., out=...) is not supported", user_location())
    arrays = [as_array(a) for a in arrays]
    if len(arrays) < 2:
        raise ArgumentError("np.linalg.multi_dot: expecting at least two arrays", user_location())
    for k, x in enumerate(arrays):
        if x.ndim != 2 and not (x.ndim == 1 and k in (0, len(arrays) - 1)):
            raise ShapeError(
                f"np.linalg.multi_dot: {x.ndim}-dimensional array given; it must be two-dimensional", user_location()
            )
    result = arrays[0]
    for x in arrays[1:]:
        result = ops.matmul(result, x)
    return result


# -- norms ------------------------------------------------------------------------------------
def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: vector norms of every order, matrix norms 'fro', 1, -1, inf, -inf, in
    numpy's formulas (integers and bools in float64). Matrix ord 2, -2 and 'nuc' need a
    singular value decomposition."""
    x = as_array(x)
    if x.dtype.kind != "f":
        x = ops.astype(x, np.float64)
    if axis is None and (ord is None or (ord in ("f", "fro") and x.ndim == 2) or (ord == 2 and x.ndim == 1)):
        flat = ops.reshape(x, (-1,))
        result = np.sqrt(ops.matmul(flat, flat))
        return ops.reshape(result, (1,) * x.ndim) if keepdims else result
    if axis is None:
        axis = tuple(range(x.ndim))
    elif not isinstance(axis, tuple):
        axis = (static_int(axis, "np.linalg.norm's axis"),)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) != 2:
        raise ShapeError(f"np.linalg.norm: improper number of dimensions to norm (axis {axis})", user_location())
    row, col = (ops.normalize_axis(a, x.ndim) for a in axis)
    if row == col:
        raise ShapeError(f"np.linalg.norm: duplicate axes given ({axis})", user_location())
    if ord in (2, -2, "nuc"):
        raise UnsupportedError(
            f"np.linalg.norm of a matrix with ord={ord!r} needs a singular value decomposition, which kiln does "
            "not compile yet; ord='fro', 1, -1, inf and -inf need none",
            user_location(),
        )
    magnitude = np.abs(x)
    # numpy takes the largest sum with initial=0 (0 for no sums), the smallest with no initial
    if ord in (1, -1):
        sums, along = ops.reduce("sum", magnitude, row), col - (col > row)
        result = _max_from_zero(sums, along) if ord == 1 else ops.reduce("min", sums, along)
    elif ord in (np.inf, -np.inf):
        sums, along = ops.reduce("sum", magnitude, col), row - (row > col)
        result = _max_from_zero(sums, along) if ord == np.inf else ops.reduce("min", sums, along)
    elif ord in (None, "fro", "f"):
        result = np.sqrt(ops.reduce("sum", x * x, (row, col)))
    else:
        raise ArgumentError(f"np.linalg.norm: invalid norm order {ord!r} for matrices", user_location())
    if keepdims:
        result = ops.reshape(result, tuple(1 if k in (row, col) else d for k, d in enumerate(x.shape)))
    return result


def _max_from_zero(magnitude: Tracer, axis, keepdims=False) -> Tracer:
    """numpy's magnitude.max(axis, initial=0) for values >= 0 (or NaN): 0 over an empty axis."""
    if any(magnitude.shape[a] == 0 for a in ops.reduction_axes(axis, magnitude.ndim)):
        return ops.reduce("sum", magnitude, axis, keepdims)  # nothing to take: +0 everywhere
    return ops.reduce("max", magnitude, axis, keepdims)


def _vector_norm(x: Tracer, ord, axis, keepdims):
    if isinstance(ord, str) or (ord is not None and not isinstance(ord, (int, float, np.integer, np.floating))):
        raise ArgumentError(f"np.linalg.norm: invalid norm order {ord!r} for vectors", user_location())
    if ord == np.inf:
        return _max_from_zero(np.abs(x), axis, keepdims)
    if ord == -np.inf:
        return ops.reduce("min", np.abs(x), axis, keepdims)
    if ord == 0:
        return ops.reduce("sum", ops.astype(np.not_equal(x, 0), x.dtype), axis, keepdims)
    if ord == 1:
        return ops.reduce("sum", np.abs(x), axis, keepdims)
    if ord is None or ord == 2:
        return np.sqrt(ops.reduce("sum", x * x, axis, keepdims))
    # numpy raises |x| to ord in place (in x's dtype), sums, and raises to 1 / ord in the sum's dtype
    powers = ops.astype(np.power(np.abs(x), ord), x.dtype)
    total = ops.reduce("sum", powers, axis, keepdims)
    return np.power(total, np.reciprocal(ord, dtype=total.dtype))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = as_array(x)
    shape = x.shape
    if axis is None:
        flat, along = ops.reshape(x, (-1,)), 0
    elif isinstance(axis, tuple):
        axes = ops.normalize_axes(axis, x.ndim)
        rest = [k for k in range(x.ndim) if k not in axes]
        moved = ops.transpose(x, [ops.normalize_axis(a, x.ndim) for a in axis] + rest)
        flat, along = ops.reshape(moved, (_size(x, axes),) + tuple(shape[k] for k in rest)), 0
    else:
        flat, along = x, axis
    result = norm(flat, ord, along)
    if keepdims:
        reduced = ops.normalize_axes(axis, len(shape))  # None: every axis
        result = ops.reshape(result, tuple(1 if k in reduced else d for k, d in enumerate(shape)))
    return result


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return norm(x, ord, (-2, -1), keepdims)


# -- numpy 2's array-API spellings in np.linalg ----------------------------------------------------
def _linalg_outer(x1, x2, /):
    x1, x2 = as_array(x1), as_array(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(
            f"np.linalg.outer: input arrays must be one-dimensional, got shapes {x1.shape} and {x2.shape}",
            user_location(),
        )
    return outer(x1, x2)


def _linalg_cross(x1, x2, /, *, axis=-1):
    x1, x2 = as_array(x1), as_array(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ShapeError(
            f"np.linalg.cross: both input arrays must be (arrays of) 3-dimensional vectors, got {x1.shape[axis]} "
            f"and {x2.shape[axis]}",
            user_location(),
        )
    return cross(x1, x2, axis=axis)


def _vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = as_array(x1), as_array(x2)
    if x1.shape[axis] != x2.shape[axis]:
        raise ShapeError(f"np.linalg.vecdot: the vector lengths differ ({x1.shape} and {x2.shape})", user_location())
    return einsum("...i->...", ops.moveaxis(np.multiply(x1, x2), axis, -1))


def _decomposition(name: str, what: str):
    def refuse(*args, **kwargs):
        raise UnsupportedError(
            f"np.linalg.{name} needs a matrix decomposition ({what}), which kiln does not compile yet; "
            "compute it outside the compiled function and pass the result in",
            user_location(),
        )

    return refuse


_DECOMPOSITIONS = {
    "inv": "LU",
    "solve": "LU",
    "tensorinv": "LU",
    "tensorsolve": "LU",
    "det": "LU",
    "slogdet": "LU",
    "svd": "SVD",
    "svdvals": "SVD",
    "pinv": "SVD",
    "matrix_rank": "SVD",
    "cond": "SVD",
    "lstsq": "SVD",
    "eig": "eigenvalues",
    "eigh": "eigenvalues",
    "eigvals": "eigenvalues",
    "eigvalsh": "eigenvalues",
    "cholesky": "Cholesky",
    "qr": "QR",
}

FUNCTION_RULES.update(
    {
        np.einsum: einsum,
        np.tensordot: tensordot,
        np.inner: inner,
        np.outer: outer,
        np.vdot: vdot,
        np.kron: kron,
        np.cross: cross,
        np.linalg.norm: norm,
        np.linalg.vector_norm: vector_norm,
        np.linalg.matrix_norm: matrix_norm,
        np.linalg.matrix_power: matrix_power,
        np.linalg.multi_dot: multi_dot,
        np.linalg.matmul: lambda x1, x2, /: ops.matmul(x1, x2),
        np.linalg.outer: _linalg_outer,
        np.linalg.cross: _linalg_cross,
        np.linalg.vecdot: _vecdot,
        np.linalg.tensordot: lambda x1, x2, /, *, axes=2: tensordot(x1, x2, axes),
        np.linalg.diagonal: lambda x, /, *, offset=0: ops.diagonal(x, offset, -2, -1),
        np.linalg.trace: lambda x, /, *, offset=0, dtype=None: FUNCTION_RULES[np.trace](x, offset, -2, -1, dtype),
        **{getattr(np.linalg, name): _decomposition(name, what) for name, what in _DECOMPOSITIONS.items()},
    }
)
