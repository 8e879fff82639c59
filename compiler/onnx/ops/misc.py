"""Small ONNX ops of no other family: LpNormalization, Det, TensorScatter, Col2Im,
TfIdfVectorizer and NonMaxSuppression (on values known at import time)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from kiln.onnx.registry import constant, op


def _axis(node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


@op("LpNormalization", attributes=("axis", "p"), since=1)
def lp_normalization(node, x):
    """x / ||x||_p along `axis` (p = 1 or 2); 0 where the norm is 0."""
    p = node.attr("p", 2)
    axis = _axis(node, node.attr("axis", -1), x.ndim)
    if p == 1:
        norm = np.sum(np.abs(x), axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    else:
        raise node.error(f"p must be 1 or 2, got {p}")
    zero = norm == 0
    return np.where(zero, np.zeros((), x.dtype), x / np.where(zero, np.ones((), x.dtype), norm)).astype(x.dtype)


_DET_LARGEST = 64  # the elimination is unrolled once per column


@op("Det", since=11)
def det(node, x):
    """The determinant of each [M, M] matrix in the last two axes, by Gaussian elimination
    with partial pivoting unrolled over the M columns, computed in float64."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise node.error(f"Det takes square matrices in its last two axes, got shape {list(x.shape)}")
    size = x.shape[-1]
    if size > _DET_LARGEST:
        raise node.error(f"kiln unrolls Det's elimination over the columns, up to {_DET_LARGEST}; got {size}")
    return _determinant(x.astype(np.float64), size).astype(x.dtype)


def _determinant(a, size: int):
    rows = np.arange(size).reshape(-1, 1)
    sign = np.ones(a.shape[:-2], np.float64)
    for k in range(size):
        # The pivot is the largest magnitude at or below the diagonal in column k.
        candidates = np.where(rows[:, 0] >= k, np.abs(a[..., :, k]), -1.0)
        pivot_row = np.argmax(candidates, axis=-1)[..., None, None]
        row_k = a[..., k : k + 1, :]
        row_p = np.take_along_axis(a, np.broadcast_to(pivot_row, a.shape[:-2] + (1, size)), axis=-2)
        a = np.where(rows == k, row_p, np.where(rows == pivot_row, row_k, a))
        sign = np.where(pivot_row[..., 0, 0] != k, -sign, sign)
        pivot = a[..., k : k + 1, k : k + 1]
        # A zero pivot means a zero column below the diagonal: nothing to eliminate, det 0.
        safe = np.where(pivot == 0, 1.0, pivot)
        factors = np.where(rows > k, a[..., :, k : k + 1] / safe, 0.0)
        a = a - factors * a[..., k : k + 1, :]
    diagonal = np.diagonal(a, axis1=-2, axis2=-1)
    return sign * np.prod(diagonal, axis=-1)


@op("TensorScatter", attributes=("axis", "mode"), since=24)
def tensor_scatter(node, past_cache, update, write_indices=None):
    """past_cache with each batch entry's `update` written along `axis` from its write index
    on (wrapping around the cache in mode "circular"). The write indices may be traced:
    each cache position reads the update position it receives, if any."""
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.error(f"mode must be 'linear' or 'circular', got {mode!r}")
    rank = past_cache.ndim
    axis = _axis(node, node.attr("axis", -2), rank)
    if axis == 0:
        raise node.error("axis cannot be 0, the batch axis")
    capacity, length = past_cache.shape[axis], update.shape[axis]
    if (
        update.ndim != rank
        or length > capacity
        or any(update.shape[d] != past_cache.shape[d] for d in range(rank) if d != axis)
    ):
        raise node.error(f"update of shape {list(update.shape)} does not fit the cache's {list(past_cache.shape)}")
    batch = past_cache.shape[0]
    if write_indices is None:
        write_indices = np.zeros((batch,), np.int64)
    # offset[b, j]: the update position written to cache position j of batch entry b.
    offset = np.arange(capacity, dtype=np.int64)[None, :] - np.reshape(write_indices.astype(np.int64), (batch, 1))
    if mode == "circular":
        offset = np.mod(offset, capacity)
    written = (offset >= 0) & (offset < length)
    layout = tuple(batch if d == 0 else capacity if d == axis else 1 for d in range(rank))
    offset = np.reshape(np.clip(offset, 0, length - 1), layout)
    written = np.reshape(written, layout)
    spread = tuple(capacity if d == axis else n for d, n in enumerate(update.shape))
    gathered = np.take_along_axis(update, np.broadcast_to(offset, spread), axis=axis)
    return np.where(written, gathered, past_cache)


@op("Col2Im", attributes=("dilations", "pads", "strides"), since=18)
def col2im(node, x, image_shape, block_shape):
    """The image whose blocks are `x`'s columns ([N, C * prod(block_shape), L], blocks in
    row-major order), overlapping values summed: the inverse arrangement of im2col."""
    image = [int(v) for v in constant(node, image_shape, "image_shape").reshape(-1)]
    block = [int(v) for v in constant(node, block_shape, "block_shape").reshape(-1)]
    rank = len(image)
    strides = node.ints("strides", [1] * rank)
    dilations = node.ints("dilations", [1] * rank)
    pads = node.ints("pads", [0] * (2 * rank))
    if len(block) != rank or len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise node.error("image_shape, block_shape, strides, dilations and pads disagree on the number of axes")
    padded = [n + pads[i] + pads[i + rank] for i, n in enumerate(image)]
    grid = [(p - d * (b - 1) - 1) // s + 1 for p, b, d, s in zip(padded, block, dilations, strides)]
    kernel = math.prod(block)
    if x.ndim != 3 or x.shape[1] % kernel or x.shape[2] != math.prod(grid):
        raise node.error(
            f"input of shape {list(x.shape)} is not [N, C * {kernel}, {math.prod(grid)}] for blocks {block} "
            f"over the padded image {padded}"
        )
    batch, channels = x.shape[0], x.shape[1] // kernel
    index, valid = _col2im_tables(image, block, grid, strides, dilations, pads)
    # Each image position takes, per kernel offset, the one column whose block covers it there (if any).
    columns = np.reshape(x, (batch, channels, kernel, x.shape[2]))
    spread = np.broadcast_to(index, (batch, channels) + index.shape)
    taken = np.take_along_axis(columns, spread, axis=3)
    total = np.sum(np.where(valid, taken, np.zeros((), x.dtype)), axis=2)
    return np.reshape(total, (batch, channels, *image))


def _col2im_tables(image, block, grid, strides, dilations, pads):
    """For each kernel offset (rows, row-major) and image position (columns, row-major): the
    column (block number) whose block puts that offset there, and whether one does."""
    rank = len(image)
    offsets = np.array(list(itertools.product(*[range(b) for b in block]))).reshape(-1, 1, rank)
    positions = np.array(list(itertools.product(*[range(n) for n in image]))).reshape(1, -1, rank)
    # Where each block starting at a multiple of the stride would have to start.
    start = positions + np.array(pads[:rank]) - offsets * np.array(dilations)
    steps = start // np.array(strides)
    valid = np.all((start >= 0) & (start % np.array(strides) == 0) & (steps < np.array(grid)), axis=-1)
    index = np.ravel_multi_index(tuple(np.clip(steps, 0, np.array(grid) - 1).transpose(2, 0, 1)), grid)
    return index, valid


@op(
    "TfIdfVectorizer",
    attributes=(
        "max_gram_length",
        "max_skip_count",
        "min_gram_length",
        "mode",
        "ngram_counts",
        "ngram_indexes",
        "pool_int64s",
        "pool_strings",
        "weights",
    ),
    since=9,
)
def tfidf_vectorizer(node, x):
    """The counts (TF), presence (IDF) or weighted counts (TFIDF) of the pool's n-grams in
    each row of `x`, as float32 [N, max(ngram_indexes) + 1] (or [max + 1] for a 1-D `x`).
    An n-gram of 2 or more items may skip up to max_skip_count items between its items,
    each skip distance counted apart, as the reference and onnxruntime count them."""
    if "pool_strings" in node:
        raise node.error("string n-grams need string tensors, which kiln does not compute in")
    mode = node.attr("mode")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise node.error(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    indexes = node.ints("ngram_indexes")
    size = max(indexes) + 1
    rows = x if x.ndim == 2 else np.reshape(x, (1, -1))
    counts = np.zeros((rows.shape[0], size), np.float32)
    for length, grams, columns in _ngram_pools(node, indexes):
        found = _ngram_counts(rows, grams, length, node.attr("max_skip_count"))
        # Each pool n-gram's count goes to its output coordinate.
        placement = np.zeros((len(grams), size), np.float32)
        placement[np.arange(len(grams)), columns] = 1.0
        counts = counts + np.matmul(found.astype(np.float32), placement)
    weights = node.attr("weights", None)
    if mode == "IDF":
        counts = (counts > 0).astype(np.float32)
    if mode != "TF" and weights:
        # The reference and onnxruntime read the weight of each output coordinate.
        if len(weights) < size:
            raise node.error(f"weights has {len(weights)} values for {size} outputs")
        counts = counts * np.asarray(weights[:size], np.float32)
    return counts if x.ndim == 2 else np.reshape(counts, (size,))


def _ngram_pools(node, indexes: list):
    """(n, the pool's n-grams as an [G, n] array, their output coordinates) for each n
    between min_gram_length and max_gram_length that the pool has."""
    pool = np.asarray(node.ints("pool_int64s"), np.int64)
    starts = node.ints("ngram_counts") + [len(pool)]
    lowest, highest = node.attr("min_gram_length"), node.attr("max_gram_length")
    first_id = 0  # the pool's n-grams are numbered across all lengths, in order
    for n, (begin, end) in enumerate(zip(starts[:-1], starts[1:]), start=1):
        count = (end - begin) // n
        if count > 0 and lowest <= n <= highest:
            yield n, pool[begin : begin + count * n].reshape(count, n), indexes[first_id : first_id + count]
        first_id += count


def _ngram_counts(rows, grams, length: int, max_skip: int):
    """How often each n-gram ([G, n]) occurs in each row ([N, C]), summed over the skip
    distances 1..max_skip + 1 (1 only for single items): [N, G]."""
    width = rows.shape[1]
    total = None
    for distance in range(1, (max_skip + 2) if length > 1 else 2):
        span = width - distance * (length - 1)
        if span <= 0:
            break
        # [N, positions, n]: the items at the n-gram's offsets from each start.
        windows = np.stack([rows[:, j * distance : j * distance + span] for j in range(length)], axis=-1)
        matches = np.all(windows[:, :, None, :] == grams[None, None, :, :].astype(rows.dtype), axis=-1)
        found = np.sum(matches.astype(np.int64), axis=1)
        total = found if total is None else total + found
    return total if total is not None else np.zeros((rows.shape[0], len(grams)), np.int64)


@op("NonMaxSuppression", attributes=("center_point_box",), since=10)
def non_max_suppression(node, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None):
    """[selected, 3] (batch, class, box) indices of the boxes greedy non-maximum suppression
    keeps per batch and class, best score first. How many are kept depends on the boxes' and
    scores' values, so kiln computes it at import time only: the inputs must be known then."""
    what = "boxes and scores (the number of boxes selected sets the output's shape)"
    boxes, scores = constant(node, boxes, what), constant(node, scores, what)
    limit = _scalar(node, max_output_boxes_per_class, 0)
    iou = _scalar(node, iou_threshold, 0.0)
    floor = _scalar(node, score_threshold, None)
    corners = _box_corners(boxes, node.attr("center_point_box", 0))
    selected = []
    for batch, klass in itertools.product(range(scores.shape[0]), range(scores.shape[1])):
        class_scores = scores[batch, klass]
        # Best score first; of equal scores the lower box index first (a stable sort).
        order = [i for i in np.argsort(-class_scores, kind="stable") if floor is None or class_scores[i] > floor]
        kept = []
        for index in order:
            if len(kept) >= limit:
                break
            if all(_iou(corners[batch, index], corners[batch, other]) <= iou for other in kept):
                kept.append(index)
                selected.append((batch, klass, index))
    return np.array(selected, np.int64).reshape(-1, 3)


def _scalar(node, value, default):
    if value is None or np.size(value) == 0:
        return default
    return constant(node, value, "a NonMaxSuppression threshold").reshape(-1)[0].item()


def _box_corners(boxes, center_point_box: int):
    """[..., 4] boxes as (y_min, x_min, y_max, x_max) from either of ONNX's encodings: two
    corners in any order, or (x_center, y_center, width, height)."""
    if center_point_box:
        x, y, w, h = (boxes[..., k] for k in range(4))
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=-1)
    return np.concatenate([np.minimum(boxes[..., :2], boxes[..., 2:]), np.maximum(boxes[..., :2], boxes[..., 2:])], -1)


def _iou(a, b) -> float:
    """Intersection over union of two (y_min, x_min, y_max, x_max) boxes; 0 when they do not
    overlap or one is empty."""
    height = min(a[2], b[2]) - max(a[0], b[0])
    width = min(a[3], b[3]) - max(a[1], b[1])
    if height <= 0 or width <= 0:
        return 0.0
    inter = height * width
    area_a, area_b = (a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1])
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return 0.0
    return float(inter / union)
