"""numpy's "Statistics" section beyond the reductions: histogram, histogram2d, histogramdd,
histogram_bin_edges, bincount, cov and corrcoef, each as numpy/lib/_histograms_impl.py and _function_base_impl.py compute it.

A histogram with a number of bins has that many bins whatever the data, so its shape is
static even when the edges come from the data's minimum and maximum (range=None): the edges
are then traced values. Each value's bin is computed on its own (numpy's scaling rule for
equal bins, a binary search of an array of edges) and counted by one scatter-add: O(len(a))
work, O(len(a) * log len(edges)) for an array of edges.
Bins picked by a rule from the data ('auto', 'fd', ...) change the number of bins with the
data and are refused.
"""

from __future__ import annotations

import builtins
import operator
import warnings

import numpy as np

from kiln.dialects import tensor as T
from kiln.dialects import tensor_indexed as TI
from kiln.errors import ArgumentError, DTypeError, InvalidValueError, ShapeError, UnsupportedError
from kiln.frontend import traced_ops as ops
from kiln.frontend.numpy_api import FUNCTION_RULES
from kiln.frontend.numpy_compare import binary_search, gather_in_bounds
from kiln.frontend.tracing import Tracer, current_context, user_location


def _traced(ctx, x, dtype=None):
    x = x if isinstance(x, Tracer) else np.asarray(ops.check_operand(x) if np.ndim(x) == 0 else x)
    return ops.lift(ctx, x, x.dtype if dtype is None else dtype)


def _constant(name, what, x):
    if isinstance(x, Tracer):
        raise ArgumentError(f"{name} needs a constant {what}: numpy checks its values", user_location())
    return x


# -- histogram -----------------------------------------------------------------------------------
def _ravel_and_check_weights(name, a, weights):
    """numpy's _ravel_and_check_weights: bool data counted as uint8 (with numpy's warning),
    weights of a's shape, both flattened."""
    ctx = current_context()
    a = _traced(ctx, a)
    if a.dtype == np.bool_:
        warnings.warn(f"Converting input from {a.dtype} to {np.uint8} for compatibility.", RuntimeWarning, stacklevel=3)
        a = ops.astype(a, np.uint8)
    if weights is not None:
        weights = _traced(ctx, weights)
        if weights.shape != a.shape:
            raise ShapeError(f"{name}: weights should have the same shape as a.", user_location())
        weights = ops.reshape(weights, (-1,))
    return ops.reshape(a, (-1,)), weights


def _unsigned_subtract(a, b):
    """numpy's _unsigned_subtract on constants: integers subtract in their unsigned type, so
    the width of a range that spans the type's limits does not overflow."""
    dtype = np.result_type(a, b)
    if dtype.kind == "i":
        unsigned = np.dtype(dtype.str.replace("i", "u"))
        return np.subtract(np.asarray(a, dtype), np.asarray(b, dtype), casting="unsafe", dtype=unsigned)
    return np.subtract(a, b, dtype=dtype)


def _outer_edges(name, a, range):
    """numpy's _get_outer_edges: `range` (checked), (0, 1) for no data, else the data's min
    and max (traced); equal edges widened by 0.5 each way."""
    if range is not None:
        if isinstance(range, Tracer) or any(isinstance(v, Tracer) for v in range):
            raise ArgumentError(f"{name} needs a constant range: numpy checks its values", user_location())
        first, last = range
        if first > last:
            raise ShapeError(f"{name}: max must be larger than min in range parameter.", user_location())
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ShapeError(f"{name}: supplied range of [{first}, {last}] is not finite", user_location())
    elif a.size == 0:
        first, last = 0, 1
    else:
        # numpy raises for a non-finite minimum or maximum; a traced one cannot be tested
        # while tracing, and the edges (and counts) then come out NaN.
        first, last = np.min(a), np.max(a)
        same = np.equal(first, last)
        return np.where(same, first - 0.5, first), np.where(same, last + 0.5, last)
    if first == last:
        first, last = first - 0.5, last + 0.5
    return first, last


def _bin_edges(name, a, bins, range):
    """(edges, (first, last, count) for equal bins else None), numpy's _get_bin_edges."""
    if isinstance(bins, str):
        raise UnsupportedError(
            f"{name}(bins={bins!r}) picks the number of bins from the data, so the result's size depends on "
            "the data; pass a number of bins or an array of edges",
            user_location(),
        )
    bins = _constant(name, "bins", bins)
    if np.ndim(bins) == 0:
        try:
            count = operator.index(bins)
        except TypeError:
            raise ArgumentError(f"{name}: `bins` must be an integer, a string, or an array", user_location()) from None
        if count < 1:
            raise ShapeError(f"{name}: `bins` must be positive, when an integer", user_location())
        first, last = _outer_edges(name, a, range)
        samples = [ops.promotion_sample(v) if isinstance(v, Tracer) else v for v in (first, last)]
        dtype = np.result_type(*samples, a.dtype)
        if np.issubdtype(dtype, np.integer):
            dtype = np.result_type(dtype, float)
        edges = np.linspace(first, last, count + 1, endpoint=True, dtype=dtype)
        if not isinstance(edges, Tracer) and np.any(edges[:-1] >= edges[1:]):
            raise ShapeError(
                f"{name}: Too many bins for data range. Cannot create {count} finite-sized bins.", user_location()
            )
        return edges, (first, last, count)
    if np.ndim(bins) != 1:
        raise ShapeError(f"{name}: `bins` must be 1d, when an array", user_location())
    edges = np.asarray(bins)
    if np.any(edges[:-1] > edges[1:]):
        raise ShapeError(f"{name}: `bins` must increase monotonically, when an array", user_location())
    return edges, None


def _equal_bin_index(a, edges, first, last, count):
    """numpy's fast path for equal bins: the index from (a - first) / width * count, moved by
    one where rounding put a value on the wrong side of an edge; the last bin is closed."""
    ctx = current_context()
    edges = edges if isinstance(edges, Tracer) else ops.lift(ctx, edges, edges.dtype)
    keep = np.logical_and(np.greater_equal(a, first), np.less_equal(a, last))
    values = ops.astype(a, edges.dtype)
    if isinstance(first, Tracer) or isinstance(last, Tracer):
        width = last - first
    else:
        width = _unsigned_subtract(last, first)
    scaled = (values - first) / width * count
    # lanes outside the range are dropped by `keep`; the clip only keeps their gathers in bounds
    index = np.clip(np.nan_to_num(scaled, nan=0.0), 0, count).astype(np.int64)
    index = np.where(np.equal(index, count), count - 1, index)
    # index is in 0..count-1 here and index + 1 in 0..count after the decrement: no check needed
    index = index - np.less(values, gather_in_bounds(edges, index))
    up = np.logical_and(np.greater_equal(values, gather_in_bounds(edges, index + 1)), np.not_equal(index, count - 1))
    return index + up, keep


# numpy's histogram counts in blocks of this many values, adding each block's float64 sums
# (cast to the weights' dtype) to the running total: kiln keeps the blocks for its bits.
_BLOCK = 65536


def scatter_add(slots: Tracer, values: Tracer, size: int) -> Tracer:
    """A (size,) array of values' dtype, zero except that each values[b] is added, in order b =
    0, 1, ..., at slots[b] (int64 in 0..size-1): numpy's bincount loop as one kiln.scatter_at,
    O(len(slots)) work. Both operands are 1-d of one length."""
    dest = ops.full_like(values, 0, values.dtype, shape=(size,))
    return current_context().emit(TI.ScatterAtOp, [dest, ops.strong(slots), ops.strong(values)], {"kind": "add"})


def _edge_bin_index(a, edges):
    """(index, keep) for an increasing array of edges, as numpy's sort and
    _search_sorted_inclusive count: bin k holds edges[k] <= x < edges[k + 1], the last bin
    also x == edges[-1]; NaN and values outside are not kept. A binary search of the edges
    (O(len(a) * log len(edges)), compared in result_type(a, edges) as searchsorted does)."""
    ctx = current_context()
    count = edges.shape[0] - 1
    dtype = np.result_type(a.dtype, edges.dtype)
    values, table = ops.cast(a, dtype), ops.lift(ctx, edges, dtype)
    index = binary_search(table, values, "right") - np.int64(1)
    index = np.where(np.equal(values, table[-1]), np.int64(count - 1), index)
    return index, np.logical_and(np.greater_equal(index, 0), np.less(index, count))


def _bin_counts(index, keep, count, weights, blocks):
    """numpy's counts of bins 0..count-1 from each value's bin `index` where `keep`: int64
    counts, or weights summed in float64 and cast to the weights' dtype, summed per block of
    _BLOCK values and the blocks added in that dtype (numpy's histogram loop) when `blocks`.
    Dropped values count into one extra bin, cut off after the scatter."""
    n = index.shape[0]
    slots = np.where(keep, index, np.int64(count))
    if weights is None:
        return scatter_add(slots, ops.full_like(index, 1, np.int64), count + 1)[:count]
    if weights.dtype.kind not in "fb":  # numpy's cumulative sums of integers: exact, wrapping in their type
        if not blocks:
            return scatter_add(slots, weights, count + 1)[:count]
    ctx = current_context()
    parts = -(-n // _BLOCK) if blocks else 1
    if parts > 1:
        block = ops.lift(ctx, np.arange(n, dtype=np.int64) // _BLOCK * (count + 1), np.int64)
        slots = np.add(block, slots)
    sums = ops.reshape(scatter_add(slots, weights.astype(np.float64), parts * (count + 1)), (parts, count + 1))
    sums = sums[:, :count].astype(weights.dtype)
    hist = ops.full_like(sums, 0, weights.dtype, shape=(count,))
    for k in range(parts):  # n = zeros; n += bincount(block).astype(ntype), block by block
        hist = hist + sums[k]
    return hist


def _histogram(a, bins=10, range=None, density=None, weights=None):
    """np.histogram -> (hist, bin_edges), flattening `a`.

    bins: a number of equal bins over `range` (default the data's min to max, then traced
    edges) or a constant increasing array of edges. Bins are half-open [e_k, e_k+1) except the
    last, which is closed; values outside the edges and NaN are not counted. hist is int64
    counts, or sums of `weights` (a's shape) in the weights' dtype (numpy adds them up in
    float64 and casts); with density=True, float64 counts / bin width / total. Edges are float
    (a's float dtype, else float64) for a number of bins, the given array otherwise. Raises
    ShapeError for numpy's ValueErrors (bad range, bins < 1, non-monotonic edges, weights of
    another shape), ArgumentError for traced bins or range, UnsupportedError for bin rules
    picked by name ('auto', ...: their count depends on the data).

    O(len(a)) for equal bins: each value's bin computed by numpy's rule (scaled, then moved
    by one where rounding put it on the wrong side of an edge), then counted by one
    scatter-add; weights are summed as numpy's bincount does, block by block, so the bits
    are numpy's. O(len(a) * log len(edges)) for an array of edges (a binary search).

    What numpy checks on the data itself is checked when the function runs: with range=None
    NaN or infinite data, or a data range too narrow or too wide for `bins` finite bins, raise
    OutOfBoundsError (numpy's ValueError). And one
    difference in rounding: with an array of edges and float weights numpy sums the weights
    cumulatively and subtracts, kiln sums each bin's weights directly (in float64, then cast)."""
    name = "np.histogram"
    a, weights = _ravel_and_check_weights(name, a, weights)
    edges, uniform = _bin_edges(name, a, bins, range)
    ctx = current_context()
    if uniform is not None:
        first, last, count = uniform
        index, keep = _equal_bin_index(a, edges, first, last, count)
        if isinstance(edges, Tracer):
            index = _finite_edges_checked(name, 0, index, edges, count + 1)
    else:
        count = max(edges.shape[0] - 1, 0)
        index, keep = _edge_bin_index(a, edges) if count and a.shape[0] else (None, None)
    hist_dtype = np.int64 if weights is None else weights.dtype
    if index is None or a.shape[0] == 0:
        hist = ops.full_like(a, 0, hist_dtype, shape=(count,))
    else:
        hist = _bin_counts(index, keep, count, weights, blocks=uniform is not None)
    edges = edges if isinstance(edges, Tracer) else ops.lift(ctx, edges, edges.dtype)
    if density:
        widths = np.diff(edges).astype(np.float64)
        return hist / widths / np.sum(hist), edges
    return hist, edges


def _histogram_bin_edges(a, bins=10, range=None, weights=None):
    """np.histogram_bin_edges: the edges np.histogram uses (see there), count + 1 of them for
    a number of bins (traced when range=None and `a` is not empty), the array itself otherwise."""
    name = "np.histogram_bin_edges"
    a, _ = _ravel_and_check_weights(name, a, weights)
    edges, _ = _bin_edges(name, a, bins, range)
    return edges if isinstance(edges, Tracer) else ops.lift(current_context(), edges, edges.dtype)


def _finite_edges_checked(name, axis, index, edges, size, strict=True):
    """`index` (int64, in 0..size-1 for finite edges), checked when the function runs to come
    from finite `edges` (traced, from the data's minimum and maximum): numpy raises for NaN or
    infinite data ("autodetected range ... is not finite") and for a range too wide for its
    bins; kiln's edges would come out NaN and the counts wrong, or (an index of -1 on a
    non-increasing array of edges) be written outside the counts. One comparison a value.
    `strict`: equal edges are refused too (np.histogram's "Too many bins"; histogramdd keeps them)."""
    increasing = np.less(edges[:-1], edges[1:]) if strict else np.less_equal(edges[:-1], edges[1:])
    finite = np.logical_and(np.all(np.isfinite(edges)), np.all(increasing))
    index = np.where(finite, index, np.int64(-1))
    message = (
        f"{name}: the bin edges of dimension {axis}, from the data's minimum and maximum, are not finite "
        "increasing numbers: the data hold NaN or infinity, or their range is too wide for the number of bins "
        "(numpy raises ValueError: autodetected range is not finite, or Too many bins for data range)"
    )
    checked = current_context().emit(
        T.CheckIndexOp, [ops.cast(index, np.uint64)], {"size": size, "axis": axis, "msg": message}
    )
    return ops.cast(checked, np.int64)


def _histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """np.histogramdd -> (hist, [edges per dimension]): sample (N, D), or a sequence of D
    1-d arrays of one length N (a 1-d array is D = 1).

    bins: one int or constant edge array for every dimension, or one per dimension; range
    one (min, max) (or None) per dimension, as np.histogram's. numpy's own rule: each
    coordinate's bin by searchsorted(edges, x, 'right') (a binary search), a value on the
    last edge moved into the last bin, the D indices raveled (with one outlier bin at each
    end of every dimension) and counted by one scatter-add (np.bincount's loop, weights
    added in float64): O(N * D * log bins). hist is float64 of shape (bins_0, ..., bins_D-1);
    NaN and values outside are not counted. density=True divides by each dimension's bin
    widths and the total. Raises ShapeError for numpy's ValueErrors (bins or range of
    another length than D, bins < 1, non-monotonic edges, weights not of length N),
    ArgumentError for traced bins or range."""
    name = "np.histogramdd"
    ctx = current_context()
    if isinstance(sample, Tracer) or not isinstance(sample, (list, tuple)):
        sample = _traced(ctx, sample)
        if sample.ndim == 1:
            sample = ops.reshape(sample, (-1, 1))
        if sample.ndim != 2:
            raise ShapeError(f"{name}: sample must be (N, D) or a sequence of D 1-d arrays", user_location())
        columns = [sample[:, i] for i in builtins.range(sample.shape[1])]
    else:
        columns = [ops.reshape(_traced(ctx, c), (-1,)) for c in sample]
        if len({c.shape[0] for c in columns}) > 1:
            raise ShapeError(f"{name}: the sample's arrays must have one length", user_location())
    d = len(columns)
    n = columns[0].shape[0] if columns else 0
    if weights is not None:
        weights = _traced(ctx, weights, np.float64)
        if weights.shape != (n,):
            raise ShapeError(f"{name}: weights must be 1-d of the sample's length {n}", user_location())
    bins = _constant(name, "bins", bins)
    if not hasattr(bins, "__len__"):  # one number of bins for every dimension
        bins = d * [bins]
    if len(bins) != d:
        raise ShapeError(
            f"{name}: The dimension of bins must be equal to the dimension of the sample x.", user_location()
        )
    ranges = (None,) * d if range is None else range
    if len(ranges) != d:
        raise ShapeError(f"{name}: range argument must have one entry per dimension", user_location())
    edges, flat, sizes = [], None, []
    for i, (column, b) in enumerate(zip(columns, bins)):
        if np.ndim(b) == 0:
            count = operator.index(b)
            if count < 1:
                raise ShapeError(f"{name}: `bins[{i}]` must be positive, when an integer", user_location())
            first, last = _outer_edges(name, column, ranges[i])
            e = np.linspace(first, last, count + 1)
            if not isinstance(e, Tracer) and not np.all(np.isfinite(e)):
                # numpy goes on with NaN edges: counts from a search of unsorted edges, or
                # "invalid entry in coordinates array", depending on the data
                raise ShapeError(
                    f"{name}: range[{i}] = ({first}, {last}) is too wide: max - min overflows {e.dtype}, so the "
                    f"bin edges are not finite. Cannot create {count} finite-sized bins; narrow the range",
                    user_location(),
                )
        elif np.ndim(b) == 1:
            e = np.asarray(b)
            if np.any(e[:-1] > e[1:]):
                raise ShapeError(
                    f"{name}: `bins[{i}]` must be monotonically increasing, when an array", user_location()
                )
        else:
            raise ShapeError(f"{name}: `bins[{i}]` must be a scalar or 1d array", user_location())
        from_data = isinstance(e, Tracer)  # edges from the data's minimum and maximum
        e = e if from_data else ops.lift(ctx, e, e.dtype)
        edges.append(e)
        dtype = np.result_type(e.dtype, column.dtype)
        values, table = ops.cast(column, dtype), ops.cast(e, dtype)
        index = binary_search(table, values, "right")
        index = np.where(np.equal(values, table[-1]), index - np.int64(1), index)
        if from_data:
            index = _finite_edges_checked(name, i, index, e, e.shape[0] + 1, strict=False)
        sizes.append(e.shape[0] + 1)  # an outlier bin at each end
        flat = index if flat is None else np.add(np.multiply(flat, np.int64(sizes[-1])), index)
    total = int(np.prod(sizes))
    if flat is None or n == 0:
        hist = ops.full_like(
            edges[0] if edges else ops.lift(ctx, np.zeros(0), np.float64), 0, np.float64, shape=(total,)
        )
    else:
        hist = scatter_add(flat, ops.full_like(flat, 1.0, np.float64) if weights is None else weights, total)
    hist = ops.reshape(hist, tuple(sizes))[(slice(1, -1),) * d]
    if density:
        s = np.sum(hist)
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = sizes[i] - 2
            hist = hist / ops.reshape(np.diff(e), tuple(shape))
        hist = hist / s
    return hist, edges


def _histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """np.histogram2d -> (hist, xedges, yedges): np.histogramdd of the pairs (x, y), with
    numpy's reading of `bins` (an int or array for both, or one per coordinate)."""
    bins = _constant("np.histogram2d", "bins", bins)
    try:
        count = len(bins)
    except TypeError:
        count = 1
    if count not in (1, 2):
        bins = [np.asarray(bins), np.asarray(bins)]
    hist, edges = _histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


def _bincount(x, weights=None, minlength=0):
    """np.bincount: for a 1-d array of non-negative integers x (a dtype numpy casts to int64
    with same_kind casting: bool, int8..int64, uint8..uint64; a uint64 value past int64 turns
    negative and is refused as numpy refuses it), how often each value 0..L-1 occurs, int64, or
    the sums of `weights` (x's shape, added in float64 in x's order, as numpy's loop) at each,
    float64. O(len(x)): one scatter-add.

    L is max(x) + 1 or `minlength`, whichever is larger: known while tracing for a constant x;
    for a traced x numpy's length depends on the data, so `minlength` must be given and
    bounds the values: one outside 0..minlength-1 raises OutOfBoundsError when the function
    runs (where numpy would give a longer result, or ValueError for a negative). Raises
    ShapeError for x not 1-d or weights of another length, DTypeError for another dtype of x,
    InvalidValueError for a negative minlength, UnsupportedError for a traced x without
    minlength."""
    name = "np.bincount"
    minlength = operator.index(_constant(name, "minlength", minlength))
    if minlength < 0:
        raise InvalidValueError(f"{name}: 'minlength' must not be negative", user_location())
    ctx = current_context()
    if not isinstance(x, Tracer):
        x = np.asarray(x)
        if x.size == 0 and x.dtype == np.float64:  # numpy counts an empty list as integers
            x = x.astype(np.int64)
    if np.ndim(x) != 1:
        raise ShapeError(
            f"{name}: object of {'too small' if np.ndim(x) == 0 else 'too deep'} depth for desired array",
            user_location(),
        )
    if not np.can_cast(x.dtype, np.int64, "same_kind"):  # uint64 converts, its values past int64 turn negative
        raise DTypeError(
            f"{name}: Cannot cast array data from dtype('{x.dtype}') to dtype('int64') according to the rule 'safe'",
            user_location(),
        )
    if weights is not None:
        weights = _traced(ctx, weights, np.float64)
        if weights.shape != x.shape:
            raise ShapeError(f"{name}: The weights and list don't have the same length.", user_location())
    if isinstance(x, Tracer):
        if minlength == 0:
            raise UnsupportedError(
                f"{name} of a traced array: numpy's result has max(x) + 1 elements, known only when the function "
                "runs; pass minlength=N, a bound on the values (a value >= N raises when the function runs)",
                user_location(),
            )
        length = minlength
        index = ops.cast(x, np.int64)
        # negatives (numpy's ValueError) are put out of range too, so that the one check names them
        index = np.where(np.less(index, 0), np.int64(length), index)
        message = (
            f"{name}: the input's values must lie in 0..{length - 1} (minlength={length}); numpy refuses "
            "negative elements and counts larger ones in a longer result: pass a larger minlength"
        )
        index = ctx.emit(T.CheckIndexOp, [index], {"size": length, "axis": 0, "msg": message})
    else:
        x = x.astype(np.int64)  # as numpy converts it (same_kind): uint64 past int64 is negative
        if x.size and x.min() < 0:
            raise InvalidValueError(f"{name}: 'list' argument must have no negative elements", user_location())
        length = max(int(x.max()) + 1 if x.size else 0, minlength)
        index = ops.lift(ctx, x, np.int64)
    values = ops.full_like(index, 1, np.int64) if weights is None else weights
    if x.shape[0] == 0:
        return ops.full_like(values, 0, values.dtype, shape=(length,))
    return scatter_add(index, values, length)


# -- cov and corrcoef ----------------------------------------------------------------------------
def _rows(x, dtype):
    """np.array(x, ndmin=2, dtype=dtype)."""
    return ops.reshape(ops.cast(x, dtype), (1, -1) if x.ndim < 2 else x.shape)


def _weights(name, weights, samples, integer):
    weights = np.asarray(_constant("np.cov", name, weights), dtype=float)
    if integer and not np.all(weights == np.around(weights)):
        raise ArgumentError("np.cov: fweights must be integer", user_location())
    if weights.ndim > 1:
        raise ShapeError(f"np.cov: cannot handle multidimensional {name}", user_location())
    if weights.shape[0] != samples:
        raise ShapeError(f"np.cov: incompatible numbers of samples and {name}", user_location())
    if np.any(weights < 0):
        raise ShapeError(f"np.cov: {name} cannot be negative", user_location())
    return weights


def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    """np.cov: the (variables, variables) covariance matrix, squeezed (one variable gives a 0-d
    result), float64 unless dtype= says otherwise (float32 input gives float64, as numpy).
    Variables are rows (rowvar=True) or columns; y adds variables; normalization N - ddof
    (ddof default 1, 0 with bias=True), with constant fweights (integer frequencies) and
    aweights as numpy weighs them. N - ddof <= 0 warns and divides by 0 as numpy does.
    Raises ShapeError for more than 2 dimensions, a non-integer ddof, weights of the wrong
    length or sign; ArgumentError for traced or non-integer fweights."""
    if ddof is not None and ddof != int(ddof):
        raise ShapeError("np.cov: ddof must be integer", user_location())
    ctx = current_context()
    m = _traced(ctx, m)
    y = None if y is None else _traced(ctx, y)
    if m.ndim > 2:
        raise ShapeError("np.cov: m has more than 2 dimensions", user_location())
    if y is not None and y.ndim > 2:
        raise ShapeError("np.cov: y has more than 2 dimensions", user_location())
    if dtype is None:
        dtype = np.result_type(m.dtype, *([] if y is None else [y.dtype]), np.float64)
    dtype = ops.check_dtype(dtype, "np.cov(dtype=...)")
    x = _rows(m, dtype)
    if not rowvar and m.ndim != 1:
        x = ops.transpose(x)
    if x.shape[0] == 0:
        return ops.lift(ctx, np.array([]).reshape(0, 0), np.float64)
    if y is not None:
        rows = _rows(y, dtype)
        if not rowvar and rows.shape[0] != 1:
            rows = ops.transpose(rows)
        if rows.shape[1] != x.shape[1]:
            raise ShapeError(
                f"np.cov: all the input array dimensions except for the concatenation axis must match exactly, "
                f"but along dimension 1, the array at index 0 has size {x.shape[1]} and the array at index 1 "
                f"has size {rows.shape[1]}",
                user_location(),
            )
        x = ops.concatenate([x, rows], axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    samples = x.shape[1]
    w = None if fweights is None else _weights("fweights", fweights, samples, True)
    if aweights is not None:
        aweights = _weights("aweights", aweights, samples, False)
        w = aweights if w is None else w * aweights
    if w is None:
        average, fact = np.mean(x, axis=1), samples - ddof
    else:
        average, w_sum = np.average(x, axis=1, weights=w), w.sum()
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * np.sum(w * aweights) / w_sum
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    x = (x - average[:, None]).astype(dtype)
    weighted = x if w is None else x * w
    c = np.dot(x, ops.transpose(weighted))
    with np.errstate(divide="ignore"):
        scale = np.true_divide(1, fact)
    return np.squeeze((c * scale).astype(c.dtype))


def _corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """np.corrcoef: cov(x, y) divided by the outer product of its diagonal's square roots and
    clipped to [-1, 1] as numpy does; a single variable gives c / c (1.0, or NaN for zero or
    non-finite variance). Shapes, dtypes and errors as np.cov."""
    c = _cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    if c.size == 0:
        return c
    stddev = np.sqrt(np.diagonal(c))
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


FUNCTION_RULES.update(
    {
        np.histogram: _histogram,
        np.histogram_bin_edges: _histogram_bin_edges,
        np.bincount: _bincount,
        np.histogramdd: _histogramdd,
        np.histogram2d: _histogram2d,
        np.cov: _cov,
        np.corrcoef: _corrcoef,
    }
)
