"""The op table: every traced numpy operation with sample inputs.

Shapes are awkward on purpose (1, primes, broadcasting on every side) and
dtypes cover float32/float64/int32/int64/bool where numpy allows them. The
same table drives interpreter-vs-numpy tests and IR round trips now, and the
compiled and gradient tests later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import kiln

_rng = np.random.default_rng(20261129)


def floats(*shape, dtype=np.float32):
    return _rng.standard_normal(shape).astype(dtype)


def positive(*shape, dtype=np.float64):
    return (_rng.random(shape) + 0.5).astype(dtype)


def ints(*shape, dtype=np.int32, low=-20, high=20):
    return _rng.integers(low, high, shape).astype(dtype)


def bools(*shape):
    return _rng.random(shape) < 0.5


@dataclass
class OpCase:
    name: str
    fn: object
    args: tuple

    def __repr__(self):
        return self.name


CAPTURED = floats(1, 13)


def _captured_constant(x):
    return x * CAPTURED


def _inplace(x):
    y = x * 1  # a fresh array, so numpy's in-place update does not write into the argument
    y += 1
    y *= 2
    y -= x
    return y


# Inputs for the ufuncs: integer extremes and every sign of divisor, the float values numpy
# treats specially, and the open interval where arcsin and arctanh are differentiable.
INT_EXTREMES = np.array([7, -7, 7, -7, 0, 2**31 - 1, -(2**31), -(2**31), 5], np.int32)
INT_DIVISORS = np.array([2, 2, -2, -2, 3, 0, -1, 0, 1], np.int32)
SPECIAL_FLOATS = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, -np.nan, 1e-45], np.float32)
SHIFT_COUNTS = np.array([0, 1, 31, 32, 33, -1, -31, 40, 5], np.int32)
UNIT_INTERVAL = _rng.uniform(-0.9, 0.9, (4, 3))


def _inplace_integer(a):
    b = a * 1
    b //= 3
    b %= 5
    b <<= 2
    b >>= 1
    b &= 12
    b |= 1
    b ^= 6
    return b


# -- reductions, scans and sorting: inputs from their own generator (the other cases' stay as
# they were); distinct values where a case is differentiated (a sort is not, at a tie).
_rs_rng = np.random.default_rng(1515)


def rs_floats(*shape, dtype=np.float32):
    return _rs_rng.standard_normal(shape).astype(dtype)


def rs_ints(*shape, low=-9, high=9, dtype=np.int32):
    return _rs_rng.integers(low, high, shape).astype(dtype)


def rs_bools(*shape):
    return _rs_rng.random(shape) < 0.5


def rs_distinct(*shape, dtype=np.float64):
    return (_rs_rng.permutation(int(np.prod(shape))).reshape(shape) * 0.75 - 3.0).astype(dtype)


RS_MASK = np.array([[True, False, True, True, False, False, True], [False, True, False, False, True, True, True]] * 2)
RS_SIGNED_ZEROS = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, 0.0, -0.0, 2.0], np.float32)
RS_INT_EXTREMES = np.array([[2**31 - 1, -(2**31), 0, 5, -(2**31), 2**31 - 1, 5]], np.int32)


def rs_sorted_signs(x):
    """Where a stable sort puts positives, negatives, NaN and negative zeros: exactly, as bools
    (a sort of such values has no finite-difference gradient to check)."""
    s = np.sort(x, kind="stable")
    return np.stack([s > 0, s < 0, s != s, np.signbit(s)])


# -- indexing and assignment: inputs from their own generator (the other cases' stay as they
# were), and functions that assign into a copy (numpy would write the caller's array).
_ix_rng = np.random.default_rng(15)


def ix_floats(*shape, dtype=np.float32):
    return _ix_rng.standard_normal(shape).astype(dtype)


def ix_ints(*shape, low, high, dtype=np.int64):
    return _ix_rng.integers(low, high, shape).astype(dtype)


IX_MASK = _ix_rng.random((4, 5)) < 0.5
# Cases whose index arrays are arguments: compiled code checks their values when it runs, so
# where numpy raises IndexError for one out of range, kiln raises OutOfBoundsError then (or
# refuses while tracing, at a line numpy never reached); test_index_check pins that behaviour.
IX_TRACED_INDEX_CASES = {
    "index_traced",
    "index_traced_int32_after_slice",
    "index_traced_scalar",
    "index_broadcast_arrays_none_ellipsis",
    "index_specials_exact",
    "index_int64_extremes",
    "index_bools",
    "index_of_reversed_view",
    "take_axis",
    "take_along_axis_argsort",
    "take_along_axis_broadcast",
    "assign_traced_index",
    "assign_traced_pairs",
    "subtract_at_traced",
    "maximum_at",
    "minimum_at_int",
    "put_putmask_fill",
}
IX_LONG_INDEX = _ix_rng.integers(-23, 23, (5, 8))  # longer than the sliced gather, with repeats


def _assign_basic(x):
    y = x.copy()
    y[1] = 7
    y[-1] = x[0] * 2
    y[1:3, ::2] = -x[2, ::2]
    y[::-2, 4] = 0.5
    y[2:2] = 9  # an empty slice writes nothing
    return y


def _assign_last_wins(x, v):
    y = x.copy()
    y[[0, 2, 0]] = v
    return y


def _assign_traced_index(x, i, v):
    y = x.copy()
    y[i] = v
    return y


def _assign_traced_pairs(x, i, v):
    y = x.copy()
    y[i, [4, 0, 1]] = v  # i has an out-of-range value: numpy raises; see test_indexing
    return y


def _assign_add_repeats_once(x, v):
    y = x.copy()
    y[[1, 1, 3]] += v
    y[0] += 1
    y[:, 1] *= 2
    return y


def _assign_masks(x):
    y = x.copy()
    y[IX_MASK] = 0.5
    y[y > 1] = -1
    y[~IX_MASK] = np.arange(np.count_nonzero(~IX_MASK))
    return y


def _assign_traced_row_mask(x, m, v):
    y = x.copy()
    y[m] = v
    return y


def _assign_cast(a, x):
    b = a.copy()
    b[...] = x  # numpy casts on assignment: float to int truncates
    b[0] = 2.9
    return b


def _assign_through_views(x):
    y = x.copy()
    row = y[1]
    row[:] = 3
    t = y.T
    t[0] += 1
    flat = y.reshape(-1)
    flat[::4] = -2
    return y


def _assign_view_sees_base(x):
    y = x.copy()
    row = y[0]
    y[0, 0] = 9
    return row * 1


def _assign_copy_is_its_own(x):
    y = x.copy()
    c = y.copy()
    c[0] = 0
    a = y.astype(y.dtype)
    a[1] = 0
    return y - c + a


def _assign_bools(m):
    b = m.copy()
    b[[0, 2]] = True
    b[1:, 0] = False
    return b


def _add_at(x, v):
    y = x.copy()
    np.add.at(y, [0, 0, 2, -1], v)
    return y


def _subtract_at_traced(x, i, v):
    y = x.copy()
    np.subtract.at(y, (slice(None), i), v)
    return y


def _multiply_at(x):
    y = x.copy()
    np.multiply.at(y, [1, 1, 3], 2.5)
    return y


def _maximum_at(x, i, v):
    y = x.copy()
    np.maximum.at(y, (i, [0, 1, 0]), v)
    return y


def _minimum_at_int(a, i):
    b = a.copy()
    np.minimum.at(b, i, -3)
    return b


def _put_putmask_fill(x, i, m):
    y = x.copy()
    np.put(y, i, [10.0, -20.0])  # the values repeat to the indices' length
    y.put([0, -1], 5, mode="clip")
    z = x.copy()
    z.fill(3)
    np.putmask(z, m, [1.0, 2.0, 3.0])  # value n % 3 where mask.flat[n]
    return y + z


CASES = [
    # elementwise arithmetic, with numpy's broadcasting and promotion
    OpCase("add_broadcast_rhs", lambda x, y: x + y, (floats(7, 13), floats(13))),
    OpCase("add_broadcast_both", lambda x, y: x + y, (floats(7, 1), floats(1, 13))),
    OpCase("add_weak_scalar", lambda x: x + 2.5, (floats(3, 5),)),
    OpCase("add_int_widen", lambda x, y: x + y, (ints(5), ints(1, dtype=np.int64))),
    OpCase("add_bool_is_or", lambda x, y: x + y, (bools(4, 3), bools(3))),
    OpCase("add_int_float_scalar", lambda x: x + 0.5, (ints(2, 3),)),
    OpCase(
        "add_f32_i32_to_f64",
        lambda x, y: x + y,
        (
            floats(
                3,
            ),
            ints(3),
        ),
    ),
    OpCase("sub", lambda x, y: x - y, (floats(1, 7, dtype=np.float64), floats(5, 1, dtype=np.float64))),
    OpCase("rsub_scalar", lambda x: 1 - x, (ints(6, dtype=np.int64),)),
    OpCase("mul", lambda x, y: x * y, (ints(3, 7), ints(7))),
    OpCase("mul_bool_is_and", lambda x, y: x * y, (bools(5), bools(5))),
    OpCase("div", lambda x, y: x / y, (floats(7, 3), positive(3, dtype=np.float32))),
    OpCase("div_int_to_float", lambda x, y: x / y, (ints(11), ints(11, low=1, high=9))),
    OpCase("maximum", np.maximum, (floats(13, 1), floats(2, 1, 5))),
    OpCase("minimum", np.minimum, (ints(4, 3, dtype=np.int64), ints(3, dtype=np.int64))),
    OpCase("maximum_bool", np.maximum, (bools(3), bools(3))),
    OpCase("pow", lambda x, y: x**y, (positive(7), floats(7, dtype=np.float64))),
    OpCase("pow_int", lambda x: x**2, (ints(5, 2),)),
    OpCase("square", np.square, (floats(3, 3),)),
    OpCase("reciprocal", np.reciprocal, (positive(5, dtype=np.float32),)),
    # elementwise unary
    OpCase("neg", lambda x: -x, (floats(7),)),
    OpCase("neg_int", np.negative, (ints(1, 5, dtype=np.int64),)),
    OpCase("abs", abs, (floats(2, 13),)),
    OpCase("abs_int", np.abs, (ints(3),)),
    OpCase("exp", np.exp, (floats(5, 1),)),
    OpCase("exp_int_to_f64", np.exp, (ints(4, low=-3, high=3),)),
    OpCase("log", np.log, (positive(13),)),
    OpCase("sqrt", np.sqrt, (positive(2, 7, dtype=np.float32),)),
    OpCase("tanh", np.tanh, (floats(11),)),
    OpCase("sin", np.sin, (floats(3, 1, 2, dtype=np.float64),)),
    OpCase("cos", np.cos, (floats(1),)),
    OpCase("positive", lambda x: +x, (floats(3),)),
    # comparisons and logic
    OpCase("eq", lambda x, y: x == y, (ints(13), ints(13, low=-2, high=2))),
    OpCase("ne", lambda x, y: x != y, (bools(3, 1), bools(4))),
    OpCase("lt", lambda x, y: x < y, (floats(7, 1), floats(5))),
    OpCase("le_scalar", lambda x: x <= 0.25, (floats(7, dtype=np.float64),)),
    OpCase("gt_int_float", lambda x, y: x > y, (ints(3, 5), floats(5))),
    OpCase("ge", np.greater_equal, (ints(2, 2, dtype=np.int64), ints(2, 2, dtype=np.int64))),
    OpCase("logical_and", np.logical_and, (bools(5, 3), bools(3))),
    OpCase("logical_or_of_floats", np.logical_or, (floats(4), floats(4))),
    OpCase("logical_not", np.logical_not, (bools(6),)),
    OpCase("logical_xor", np.logical_xor, (bools(2, 2), bools(2, 1))),
    OpCase("bool_operators", lambda a, b: (a & b) | ~a, (bools(7), bools(7))),
    OpCase("where", lambda c, x: np.where(c, x, 0.0), (bools(5, 1), floats(5, 4))),
    OpCase("where_int_condition", lambda c, x, y: np.where(c, x, y), (ints(3), ints(3, dtype=np.int64), floats(1))),
    OpCase("where_python_int_condition", lambda n, x: np.where(n > 0, x, -x), (3, floats(5))),
    OpCase("where_ones_like_zeros_like", lambda x: np.where(x > 0, np.ones_like(x), np.zeros_like(x)), (floats(7),)),
    OpCase("clip_bool_to_bounds_dtype", lambda b, hi: np.clip(b, 0, hi), (bools(5), floats(5))),
    OpCase("clip_keywords", lambda x: x.clip(max=0.25), (floats(7, dtype=np.float64),)),
    OpCase("clip", lambda x: np.clip(x, -0.5, 0.5), (floats(13),)),
    # casts
    OpCase("astype_f32_i32", lambda x: (x * 10).astype(np.int32), (floats(7),)),
    OpCase("astype_i64_f32", lambda x: x.astype(np.float32), (ints(3, 2, dtype=np.int64),)),
    OpCase("astype_bool_f64", lambda x: x.astype(np.float64), (bools(5),)),
    OpCase("astype_f64_bool", lambda x: x.astype(bool), (np.array([0.0, -0.0, 1.5, np.nan, -2.0]),)),
    # reductions
    OpCase("sum_all", np.sum, (floats(7, 13),)),
    OpCase("sum_axis_keepdims", lambda x: x.sum(axis=1, keepdims=True), (floats(5, 3, dtype=np.float64),)),
    OpCase("sum_axes_3d", lambda x: np.sum(x, axis=(0, 2)), (floats(2, 3, 5),)),
    OpCase("sum_negative_axis", lambda x: x.sum(axis=-1), (floats(3, 1),)),
    OpCase("sum_int32_widens", np.sum, (ints(7),)),
    OpCase("sum_bool_counts", lambda x: x.sum(axis=0), (bools(13, 2),)),
    OpCase("sum_dtype", lambda x: np.sum(x, dtype=np.float64), (floats(9),)),
    OpCase("max", lambda x: x.max(axis=0), (floats(7, 3),)),
    OpCase("max_bool", np.max, (bools(4),)),
    OpCase("min_int", lambda x: np.min(x, axis=1, keepdims=True), (ints(3, 5, dtype=np.int64),)),
    OpCase("amax_all", np.amax, (floats(1, 1),)),
    OpCase("add_reduce", np.add.reduce, (floats(3, 2),)),
    OpCase("mean", lambda x: x.mean(axis=0), (floats(7, 3),)),
    OpCase("mean_int", np.mean, (ints(5),)),
    OpCase("var", lambda x: np.var(x, axis=1), (floats(3, 13, dtype=np.float64),)),
    OpCase("std_ddof", lambda x: x.std(ddof=1), (floats(11, dtype=np.float64),)),
    OpCase("mean_int_dtype", lambda a: np.mean(a, dtype=np.int64), (np.array([3, 4, 6], np.int32),)),
    OpCase("mean_int_dtype_negative", lambda a: a.mean(axis=1, dtype=np.int64), (ints(5, 7),)),
    OpCase("mean_f64_dtype_of_f32", lambda x: np.mean(x, axis=0, dtype=np.float64), (floats(13, 2),)),
    OpCase("var_f64_dtype_of_f32", lambda x: np.var(x, dtype=np.float64), (floats(7),)),
    OpCase("var_int_dtype", lambda a: np.var(a, axis=0, dtype=np.int64), (ints(7, 3),)),
    OpCase("std_int_dtype", lambda a: np.std(a, dtype=np.int64), (ints(11),)),
    OpCase("prod", lambda x: x.prod(), (floats(13) * 0.5 + 1,)),
    OpCase(
        "prod_axis_keepdims", lambda x: np.prod(x, axis=(0, 2), keepdims=True), (floats(3, 2, 5, dtype=np.float64),)
    ),
    OpCase("prod_int32_widens", lambda a: a.prod(axis=0), (ints(7, 3, low=-3, high=4),)),
    OpCase("prod_bool", np.prod, (bools(2, 3),)),
    OpCase("prod_empty_axis", lambda x: np.prod(x, axis=1), (floats(3, 0),)),
    OpCase("any", lambda x: (x > 0).any(), (floats(7),)),
    OpCase("any_axis_nan_is_true", lambda x: x.any(axis=0), (np.array([[0.0, np.nan, -0.0], [0.0, 0.0, -0.0]]),)),
    OpCase("all_keepdims", lambda a: np.all(a, axis=1, keepdims=True), (ints(5, 3, low=0, high=3),)),
    OpCase("all_empty_is_true", lambda x: np.all(x, axis=0), (bools(0, 4),)),
    OpCase("argmax_nan_wins", lambda x: x.argmax(axis=1), (np.array([[1.0, np.nan, 3.0], [2.0, 5.0, np.nan]]),)),
    OpCase("argmax_ties_first", np.argmax, (np.array([0.0, -0.0, 0.0, -1.0], np.float32),)),
    OpCase("argmin_axis0_keepdims", lambda a: np.argmin(a, axis=0, keepdims=True), (ints(7, 3, low=-2, high=2),)),
    OpCase("argmin_flat_keepdims", lambda x: x.argmin(keepdims=True), (floats(3, 5),)),
    OpCase("argmax_bool", lambda b: np.argmax(b, axis=-1), (bools(4, 5),)),
    OpCase("repeat_flat", lambda x: x.repeat(3), (floats(2, 3),)),
    OpCase("repeat_axis", lambda x: np.repeat(x, 2, axis=-1), (floats(3, 2, dtype=np.float64),)),
    OpCase("repeat_zero", lambda x: np.repeat(x, 0, axis=0), (floats(3, 2),)),
    OpCase("diagonal", lambda x: x.diagonal(), (floats(5, 3),)),
    OpCase("diagonal_offset_axes_3d", lambda x: np.diagonal(x, -1, 2, 0), (floats(3, 2, 4, dtype=np.float64),)),
    OpCase("trace_offset", lambda x: np.trace(x, 2), (floats(4, 7),)),
    OpCase("trace_int32_widens", lambda a: a.trace(), (ints(5, 5),)),
    OpCase("multiply_reduce_axis", lambda x: np.multiply.reduce(x, axis=1), (floats(3, 5),)),
    OpCase("logical_or_reduce", np.logical_or.reduce, (bools(4, 3),)),
    OpCase("add_outer", np.add.outer, (floats(3), ints(2, 2))),
    # linear algebra
    OpCase("matmul", lambda a, b: a @ b, (floats(7, 13), floats(13, 1))),
    OpCase("matmul_vec_mat", np.matmul, (floats(5), floats(5, 3))),
    OpCase("matmul_mat_vec", lambda a, b: a @ b, (floats(2, 5), floats(5))),
    OpCase("matmul_vec_vec", lambda a, b: a @ b, (floats(7, dtype=np.float64), floats(7, dtype=np.float64))),
    OpCase("matmul_batched_broadcast", lambda a, b: a @ b, (floats(2, 1, 3, 5), floats(4, 5, 2))),
    OpCase("matmul_int", lambda a, b: a @ b, (ints(3, 4), ints(4, 2))),
    OpCase("matmul_mixed_promotes", lambda a, b: a @ b, (floats(3, 4), floats(4, 2, dtype=np.float64))),
    OpCase("dot", np.dot, (floats(3, 4), floats(4, 5))),
    OpCase("conv2d", lambda x, w: kiln.conv2d(x, w, stride=2, padding=1), (floats(2, 3, 7, 5), floats(4, 3, 3, 2))),
    OpCase("conv2d_1x1", kiln.conv2d, (floats(1, 2, 3, 3, dtype=np.float64), floats(5, 2, 1, 1, dtype=np.float64))),
    # layout
    OpCase("reshape", lambda x: x.reshape(13, -1), (floats(7, 13),)),
    OpCase("reshape_to_scalar", lambda x: np.reshape(x, ()), (floats(1, 1),)),
    OpCase("transpose", np.transpose, (floats(2, 3, 5),)),
    OpCase("transpose_perm", lambda x: x.transpose(1, 2, 0), (ints(2, 3, 5),)),
    OpCase("T", lambda x: x.T, (floats(7, 1),)),
    OpCase("swapaxes", lambda x: np.swapaxes(x, 0, -1), (floats(3, 1, 2),)),
    OpCase("moveaxis", lambda x: np.moveaxis(x, 0, -1), (floats(3, 2, 5),)),
    OpCase("expand_dims", lambda x: np.expand_dims(x, (0, 2)), (floats(3, 5),)),
    OpCase("squeeze", np.squeeze, (floats(1, 7, 1),)),
    OpCase("ravel", np.ravel, (bools(3, 5),)),
    OpCase("broadcast_to", lambda x: np.broadcast_to(x, (2, 7, 3)), (floats(7, 1),)),
    OpCase("slice_steps", lambda x: x[1:6:2, ::-1], (floats(7, 13),)),
    OpCase("slice_int_index", lambda x: x[3], (floats(7, 13),)),
    OpCase("slice_negative", lambda x: x[-1, 2:], (ints(5, 7),)),
    OpCase("slice_ellipsis_newaxis", lambda x: x[..., None, 1], (floats(2, 3, 5),)),
    OpCase("slice_reverse_step3", lambda x: x[::-3], (floats(13, dtype=np.float64),)),
    OpCase("slice_empty", lambda x: x[5:2], (floats(7),)),
    OpCase("concat", lambda x, y: np.concatenate([x, y], axis=1), (floats(3, 2), floats(3, 5))),
    OpCase("concat_promotes", lambda x, y: np.concatenate([x, y]), (ints(3), floats(2, dtype=np.float64))),
    OpCase("stack", lambda x, y: np.stack([x, y], axis=-1), (floats(7), floats(7))),
    # constants
    OpCase("captured_constant", _captured_constant, (floats(7, 13),)),
    OpCase("numpy_scalar_is_strong", lambda x: x * np.float64(2.0), (floats(3),)),
    OpCase("ufunc_of_python_scalar_is_strong", lambda s, x: np.exp(s) + x, (2.0, floats(3))),
    OpCase("ufunc_of_python_scalars_is_strong", lambda x: np.multiply(2, 3) * x, (ints(3),)),
    OpCase("operator_on_python_scalars_stays_weak", lambda s, n, x: (s * n) * x, (0.5, 3, floats(3))),
    OpCase("inplace_operators_rebind", _inplace, (floats(5),)),
    OpCase("zeros_like", lambda x: x + np.zeros_like(x), (floats(3),)),
    OpCase("ones_like_dtype", lambda x: np.ones_like(x, dtype=np.int32), (floats(2, 2),)),
    OpCase("full_like", lambda x: np.full_like(x, 7), (ints(5, dtype=np.int64),)),
    # kiln's helpers
    OpCase("relu", kiln.relu, (floats(7, 13),)),
    OpCase("sigmoid", kiln.sigmoid, (floats(13, dtype=np.float64) * 40,)),
    OpCase("softmax", kiln.softmax, (floats(3, 13),)),
    OpCase("softmax_axis0", lambda x: kiln.softmax(x, axis=0), (floats(5, 2, dtype=np.float64),)),
    OpCase("logsumexp", lambda x: kiln.logsumexp(x, axis=1), (floats(7, 5),)),
    OpCase("logsumexp_all_keepdims", lambda x: kiln.logsumexp(x, keepdims=True), (floats(2, 3, dtype=np.float64),)),
    # -- ufuncs and operators: integer division, bitwise, math functions --------------------
    OpCase("ufunc_mod_int_signs", lambda a, b: a % b, (ints(3, 7), ints(7, low=-4, high=5))),
    OpCase("ufunc_floordiv_int_signs", lambda a, b: a // b, (ints(3, 7, dtype=np.int64), ints(7, low=-4, high=5))),
    OpCase("ufunc_mod_int_extremes", lambda a, b: a % b, (INT_EXTREMES, INT_DIVISORS)),
    OpCase("ufunc_floordiv_int_extremes", lambda a, b: a // b, (INT_EXTREMES, INT_DIVISORS)),
    OpCase("ufunc_divmod_scalar", lambda a: np.subtract(*divmod(a, -3)), (ints(13),)),
    OpCase("ufunc_rfloordiv_scalar", lambda a: 7 // a, (ints(1, 5, dtype=np.int64, low=-3, high=3),)),
    OpCase("ufunc_fmod_int", np.fmod, (INT_EXTREMES, INT_DIVISORS)),
    OpCase("ufunc_mod_float", lambda a, b: a % b, (floats(5, 3), floats(3) + 0.1)),
    OpCase("ufunc_floordiv_float_reversed", lambda a, b: a[::-1] // b, (floats(11, dtype=np.float64), positive(11))),
    OpCase("ufunc_fmod_float", np.fmod, (floats(2, 7, dtype=np.float64) * 5, positive(7) - 1.25)),
    OpCase("ufunc_divmod_float", lambda a, b: np.add(*np.divmod(a, b)), (floats(7) * 4, np.float32(1.5))),
    OpCase("ufunc_mod_float_int_mix", lambda a, b: np.mod(a, b), (ints(5), floats(5, dtype=np.float64) + 3)),
    OpCase(
        "ufunc_bitwise_int",
        lambda a, b: (a & b) * 3 + (a | b) * 5 - (a ^ b) + ~a,
        (ints(3, 5), ints(5, dtype=np.int64)),
    ),
    OpCase("ufunc_bitwise_bool", lambda a, b: (a & b) ^ (a | ~b), (bools(7, 1), bools(3))),
    OpCase("ufunc_left_shift", lambda a, b: a << b, (INT_EXTREMES, SHIFT_COUNTS)),
    OpCase("ufunc_right_shift", np.right_shift, (INT_EXTREMES, SHIFT_COUNTS)),
    OpCase("ufunc_shifts_int64", lambda a: (a << 62) + (a >> 63) - (a >> 70), (ints(2, 3, dtype=np.int64),)),
    OpCase("ufunc_inplace_integer_operators", _inplace_integer, (ints(7),)),
    OpCase("ufunc_pow_int_int", lambda a, b: a**b, (ints(7, low=-4, high=5), ints(7, low=0, high=9))),
    OpCase("ufunc_reciprocal_int", np.reciprocal, (np.array([0, 1, -1, 2, -7, 2**31 - 1], np.int32),)),
    OpCase("ufunc_tan", np.tan, (floats(13),)),
    OpCase("ufunc_sinh_cosh", lambda x: np.sinh(x) + np.cosh(x), (floats(3, 5, dtype=np.float64),)),
    OpCase("ufunc_arcsin_arccos", lambda x: np.arcsin(x) * np.arccos(x), (UNIT_INTERVAL,)),
    OpCase("ufunc_arctan", np.arctan, (floats(7, dtype=np.float64) * 10,)),
    OpCase("ufunc_arctan2", np.arctan2, (floats(5, 1), floats(1, 3))),
    OpCase("ufunc_arcsinh", np.arcsinh, (floats(11) * 10,)),
    OpCase("ufunc_arccosh", np.arccosh, (positive(2, 5) + 1,)),
    OpCase("ufunc_arctanh", np.arctanh, (UNIT_INTERVAL.astype(np.float32),)),
    OpCase("ufunc_log1p_expm1", lambda x: np.log1p(x) + np.expm1(x), (positive(13, dtype=np.float32) * 1e-4,)),
    OpCase("ufunc_exp2_log2_log10", lambda x: np.exp2(x) + np.log2(x) - np.log10(x), (positive(3, 3),)),
    OpCase("ufunc_exp2_int", np.exp2, (ints(5, low=-3, high=3),)),
    OpCase("ufunc_cbrt", np.cbrt, (floats(7, dtype=np.float64) * 100,)),
    OpCase("ufunc_floor_ceil", lambda x: np.floor(x) * 3 + np.ceil(x), (floats(3, 7) * 3,)),
    OpCase("ufunc_trunc_rint", lambda x: np.trunc(x) * 3 + np.rint(x), (floats(7, dtype=np.float64) * 3,)),
    OpCase("ufunc_floor_int_is_identity", np.floor, (ints(5),)),
    OpCase("ufunc_round_decimals", lambda x: np.round(x, 2) + x.round(-1), (floats(7, dtype=np.float64) * 100,)),
    OpCase("ufunc_round_int_negative_decimals", lambda a: np.around(a, -1), (ints(7, low=-100, high=100),)),
    OpCase("ufunc_sign", lambda x: np.sign(x) + 0 * x, (floats(13),)),
    OpCase("ufunc_signbit", np.signbit, (SPECIAL_FLOATS,)),
    OpCase("ufunc_sign_int", np.sign, (ints(3, 3, dtype=np.int64, low=-2, high=2),)),
    OpCase("ufunc_copysign", np.copysign, (floats(7), floats(7, dtype=np.float64))),
    OpCase("ufunc_fabs_square", lambda x: np.fabs(x) + np.square(x), (floats(5, dtype=np.float64),)),
    OpCase("ufunc_isnan_isinf_isfinite", lambda x: np.isnan(x) | np.isinf(x) & ~np.isfinite(x), (SPECIAL_FLOATS,)),
    OpCase("ufunc_isnan_int", np.isnan, (ints(3),)),
    OpCase("ufunc_nan_to_num", lambda x: np.nan_to_num(x * 1), (floats(5, dtype=np.float64),)),
    OpCase("ufunc_nan_to_num_edges", lambda x: np.nan_to_num(x, nan=-1, posinf=1e300) > 0, (SPECIAL_FLOATS,)),
    OpCase("ufunc_fmax_fmin", lambda a, b: np.fmax(a, b) - np.fmin(b, a), (floats(5, 1), floats(1, 3))),
    OpCase("ufunc_fmax_nan", lambda a, b: np.isnan(np.fmax(a, b)), (SPECIAL_FLOATS, SPECIAL_FLOATS[::-1].copy())),
    OpCase("ufunc_fmin_int", np.fmin, (ints(7), ints(7, dtype=np.int64))),
    OpCase("ufunc_logaddexp", np.logaddexp, (floats(7, 1) * 30, floats(1, 3) * 30)),
    OpCase("ufunc_logaddexp2", np.logaddexp2, (floats(7, dtype=np.float64), floats(7, dtype=np.float64))),
    OpCase("ufunc_hypot", np.hypot, (floats(5, 3) * 3, floats(3))),
    OpCase("ufunc_heaviside", lambda x, h: np.heaviside(np.floor(x), h), (floats(11, dtype=np.float64), floats(11))),
    OpCase("ufunc_float_power", np.float_power, (positive(5, dtype=np.float32), ints(5, low=-3, high=3))),
    OpCase("ufunc_deg2rad_rad2deg", lambda x: np.deg2rad(x) + np.radians(x) - np.degrees(x), (floats(5),)),
    OpCase("ufunc_abs_pos_neg_operators", lambda x: abs(-x) + (+x), (floats(3, dtype=np.float64),)),
    OpCase("ufunc_modf", lambda x: np.modf(x)[0] * 3 + np.modf(x)[1], (floats(7) * 5,)),
    # -- shapes, layout, array creation, linear algebra ---------------------------------------
    OpCase("shape_flip_all", np.flip, (floats(3, 1, 5),)),
    OpCase("shape_flip_axes_tuple", lambda x: np.flip(x, (0, -1)), (floats(2, 3, 4, dtype=np.float64),)),
    OpCase("shape_flip_int_strided_view", lambda a: np.flip(a, 1), (ints(4, 7)[:, ::-2],)),
    OpCase("shape_fliplr_flipud", lambda x: np.fliplr(x) * np.flipud(x), (floats(3, 3),)),
    OpCase("shape_rot90", lambda x: np.rot90(x, -1, (1, 2)), (floats(2, 3, 5),)),
    OpCase("shape_roll_flat", lambda x: np.roll(x, 7), (floats(3, 4),)),
    OpCase("shape_roll_axes", lambda x: np.roll(x, (1, -9), axis=(0, 1)), (floats(5, 7, dtype=np.float64),)),
    OpCase("shape_roll_bool", lambda b: np.roll(b, -1, axis=0), (bools(4, 2),)),
    OpCase("shape_roll_empty_axis", lambda x: np.roll(x, 3, axis=1), (floats(2, 0),)),
    OpCase("shape_tile", lambda x: np.tile(x, (2, 1, 3)), (floats(3, 2),)),
    OpCase("shape_tile_int_zero_reps", lambda a: np.tile(a, (0, 2)), (ints(5, dtype=np.int64),)),
    OpCase("shape_repeat_counts", lambda x: np.repeat(x, [2, 0, 1, 1, 3], axis=0), (floats(5, 3),)),
    OpCase("shape_repeat_counts_flat", lambda a: a.repeat(np.array([1, 2, 2, 0, 3, 1])), (ints(2, 3),)),
    OpCase(
        "shape_pad_constant_pairs",
        lambda x: np.pad(x, ((1, 2), (0, 3)), constant_values=((-1.5, 2.0), (0.25, 7))),
        (floats(3, 4),),
    ),
    OpCase("shape_pad_int_constant", lambda a: np.pad(a, 2, constant_values=9), (ints(3, dtype=np.int64),)),
    OpCase("shape_pad_traced_constant", lambda x, v: np.pad(x, (1, 2), constant_values=v), (floats(4), 0.5)),
    OpCase("shape_pad_edge", lambda x: np.pad(x, ((2, 0), (1, 3)), mode="edge"), (floats(2, 3, dtype=np.float64),)),
    OpCase("shape_pad_reflect_wider_than_array", lambda x: np.pad(x, (7, 5), mode="reflect"), (floats(3),)),
    OpCase("shape_pad_symmetric", lambda x: np.pad(x, ((1, 2), (4, 0)), mode="symmetric"), (floats(2, 3),)),
    OpCase(
        "shape_pad_reflect_odd",
        lambda x: np.pad(x, (5, 6), mode="reflect", reflect_type="odd"),
        (floats(3, dtype=np.float64),),
    ),
    OpCase(
        "shape_pad_symmetric_odd_2d",
        lambda x: np.pad(x, ((3, 1), (2, 5)), mode="symmetric", reflect_type="odd"),
        (floats(2, 3, dtype=np.float64),),
    ),
    OpCase("shape_pad_wrap", lambda x: np.pad(x, (4, 7), mode="wrap"), (floats(2, 3),)),
    OpCase("shape_pad_reflect_length_1", lambda x: np.pad(x, 2, mode="reflect"), (floats(1, 2),)),
    OpCase("shape_pad_bool_wrap", lambda b: np.pad(b, 1, mode="wrap"), (bools(2, 3),)),
    OpCase("shape_triu", lambda x: np.triu(x, 1), (floats(4, 5),)),
    OpCase("shape_tril_batched", lambda x: np.tril(x, -1), (floats(2, 3, 3, dtype=np.float64),)),
    OpCase("shape_tril_1d_int", np.tril, (ints(4),)),
    OpCase("shape_diff_twice_axis0", lambda x: np.diff(x, 2, axis=0), (floats(5, 3),)),
    OpCase(
        "shape_diff_prepend_append",
        lambda x: np.diff(x, prepend=0.5, append=x[:, :1]),
        (floats(3, 4, dtype=np.float64),),
    ),
    OpCase("shape_diff_bool", np.diff, (bools(7),)),
    OpCase("shape_diff_order_past_length", lambda a: np.diff(a, 4), (ints(3),)),
    OpCase("shape_diag_of_vector", lambda v: np.diag(v, -2), (floats(3),)),
    OpCase("shape_diag_of_matrix", lambda x: np.diag(x, 1), (floats(3, 5, dtype=np.float64),)),
    OpCase("shape_diagflat_int", lambda v: np.diagflat(v, 1), (ints(2, 2),)),
    OpCase("shape_hstack_promotes", lambda a, b: np.hstack([a, b, 1.0]), (floats(2), floats(3, dtype=np.float64))),
    OpCase("shape_hstack_2d", lambda a, b: np.hstack((a, b)), (floats(3, 1), floats(3, 2))),
    OpCase("shape_vstack", lambda a, b: np.vstack((a, b)), (floats(4), floats(2, 4))),
    OpCase("shape_dstack", lambda a, b: np.dstack((a, b)), (floats(2, 3), floats(2, 3))),
    OpCase("shape_column_stack", lambda a, b: np.column_stack((a, b)), (floats(3), floats(3, 2))),
    OpCase(
        "shape_atleast_nd",
        lambda s, v, m: np.atleast_1d(s) + np.atleast_2d(v) + np.atleast_3d(m)[..., 0],
        (np.array(2.0), floats(3, dtype=np.float64), floats(2, 3)),
    ),
    OpCase(
        "shape_split_indices",
        lambda x: np.concatenate([p * (k + 1) for k, p in enumerate(np.split(x, [1, -2, 9], axis=1))], axis=1),
        (floats(2, 5),),
    ),
    OpCase("shape_array_split", lambda x: np.array_split(x, 3)[0][1:] - np.array_split(x, 3)[2], (floats(7, 2),)),
    OpCase("shape_hsplit_vsplit", lambda x: np.hsplit(x, 2)[1] + np.vsplit(x, [1])[1][:, :2], (floats(2, 4),)),
    OpCase("shape_flatten_fortran", lambda x: x.flatten("F"), (floats(2, 3, 4),)),
    OpCase("shape_ravel_fortran_int", lambda a: np.ravel(a, order="F"), (ints(3, 2, dtype=np.int64),)),
    OpCase("shape_meshgrid", lambda a, b: np.stack(np.meshgrid(a, b)), (floats(3), floats(4))),
    OpCase(
        "shape_meshgrid_ij_sparse",
        lambda a, b, c: sum(np.meshgrid(a, b, c, indexing="ij", sparse=True)),
        (floats(3, dtype=np.float64), floats(1, dtype=np.float64), floats(2, dtype=np.float64)),
    ),
    OpCase("shape_broadcast_arrays", lambda a, b: np.stack(np.broadcast_arrays(a, b)), (floats(3, 1), floats(4))),
    OpCase("shape_linspace_traced_endpoints", lambda a, b: np.linspace(a, b, 7), (floats(3), floats(3))),
    OpCase(
        "shape_linspace_retstep_axis",
        lambda a, b: (lambda y, step: y + step[..., None])(*np.linspace(a, b, 5, False, True, axis=-1)),
        (floats(3, dtype=np.float64), floats(2, 1, dtype=np.float64)),
    ),
    OpCase("shape_linspace_int_dtype", lambda a, b: np.linspace(a, b, 6, dtype=np.int32), (ints(2), ints(2))),
    OpCase(
        "shape_creation_constants",
        lambda x: x * np.eye(3, 4, 1) + np.arange(4) + np.tri(3, 4) - np.full((3, 4), 2.5) + np.linspace(0, 1, 4),
        (floats(3, 4),),
    ),
    OpCase("shape_empty_like_as_zeros", lambda x: np.empty_like(x) * 0 + x, (floats(2, 3),)),
    OpCase("linalg_einsum_matmul", lambda a, b: np.einsum("ij,jk->ik", a, b), (floats(3, 4), floats(4, 5))),
    OpCase("linalg_einsum_diag_and_trace", lambda a: np.einsum("ii->i", a) + np.einsum("ii", a), (floats(4, 4),)),
    OpCase("linalg_einsum_diagonal_3d", lambda a: np.einsum("iji->ji", a), (floats(3, 2, 3, dtype=np.float64),)),
    OpCase(
        "linalg_einsum_ellipsis_broadcast",
        lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
        (floats(2, 1, 3, 4), floats(5, 4, 2)),
    ),
    OpCase(
        "linalg_einsum_implicit_chain",
        lambda a, b, c: np.einsum("ij,jk,kl", a, b, c),
        (floats(2, 3), floats(3, 4), floats(4, 5)),
    ),
    OpCase(
        "linalg_einsum_bilinear",
        lambda x, w, y: np.einsum("bn,anm,bm->ba", x, w, y),
        (floats(2, 3, dtype=np.float64), floats(4, 3, 5, dtype=np.float64), floats(2, 5, dtype=np.float64)),
    ),
    OpCase("linalg_einsum_sum_transpose", lambda x: np.einsum("ijk->kj", x), (floats(2, 3, 5),)),
    OpCase(
        "linalg_einsum_outer_broadcast_label", lambda a, b: np.einsum("i,j,i->ij", a, b, a[:1]), (floats(3), floats(2))
    ),
    OpCase(
        "linalg_einsum_interleaved", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [2, 0]), (floats(3, 2), floats(2, 4))
    ),
    OpCase("linalg_einsum_empty_contraction", lambda a, b: np.einsum("ij,jk", a, b), (floats(3, 0), floats(0, 2))),
    OpCase("linalg_einsum_int32_stays", lambda a, b: np.einsum("ij,j->i", a, b), (ints(3, 4), ints(4))),
    OpCase("linalg_einsum_bool", lambda a, b: np.einsum("ij,jk", a, b), (bools(3, 4), bools(4, 2))),
    OpCase("linalg_einsum_int_sum", lambda a: np.einsum("ij->j", a), (ints(5, 3, dtype=np.int64),)),
    OpCase("linalg_tensordot", np.tensordot, (floats(2, 3, 4), floats(3, 4, 5))),
    OpCase(
        "linalg_tensordot_pairs",
        lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])),
        (floats(2, 3, 4, dtype=np.float64), floats(4, 5, 2, dtype=np.float64)),
    ),
    OpCase("linalg_tensordot_outer", lambda a, b: np.tensordot(a, b, 0), (floats(2, 3), floats(4))),
    OpCase("linalg_tensordot_int", lambda a, b: np.tensordot(a, b, 1), (ints(2, 3), ints(3))),
    OpCase("linalg_inner", np.inner, (floats(2, 3), floats(4, 3))),
    OpCase("linalg_outer_promotes", np.outer, (ints(3), floats(2, 2))),
    OpCase("linalg_vdot", np.vdot, (floats(2, 3, dtype=np.float64), floats(6, dtype=np.float64))),
    OpCase("linalg_kron", np.kron, (floats(2, 3), floats(3, 1, 2))),
    OpCase("linalg_cross", np.cross, (floats(4, 3), floats(3))),
    OpCase("linalg_cross_axes", lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0), (floats(3, 5), floats(5, 3))),
    OpCase("linalg_matrix_power", lambda a: np.linalg.matrix_power(a, 5), (floats(2, 3, 3) * 0.5,)),
    OpCase("linalg_matrix_power_zero_int", lambda a: np.linalg.matrix_power(a, 0), (ints(3, 3),)),
    OpCase("linalg_multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]), (floats(3), floats(3, 4), floats(4))),
    OpCase("linalg_norm", np.linalg.norm, (floats(3, 4),)),
    OpCase("linalg_norm_int", np.linalg.norm, (ints(5),)),
    OpCase("linalg_norm_inf_axis", lambda x: np.linalg.norm(x, np.inf, axis=1), (floats(3, 4, dtype=np.float64),)),
    OpCase("linalg_norm_minus_inf", lambda x: np.linalg.norm(x, -np.inf), (floats(7),)),
    OpCase("linalg_norm_1_keepdims", lambda x: np.linalg.norm(x, 1, axis=0, keepdims=True), (floats(3, 4),)),
    OpCase("linalg_norm_0", lambda x: np.linalg.norm(x, 0, axis=-1), (np.array([[0.0, -0.0, 2.0], [1.0, 0.5, 3.0]]),)),
    OpCase("linalg_norm_p3", lambda x: np.linalg.norm(x, 3, axis=1), (floats(2, 5, dtype=np.float64),)),
    OpCase("linalg_norm_p_negative", lambda x: np.linalg.norm(x, -1.5), (floats(6, dtype=np.float64),)),
    OpCase("linalg_norm_fro_axes", lambda x: np.linalg.norm(x, "fro", axis=(2, 0)), (floats(3, 4, 5),)),
    OpCase("linalg_norm_matrix_1", lambda x: np.linalg.norm(x, 1), (floats(3, 4, dtype=np.float64),)),
    OpCase("linalg_norm_matrix_inf_keepdims", lambda x: np.linalg.norm(x, np.inf, (0, 1), True), (floats(3, 4),)),
    OpCase("linalg_norm_matrix_minus_1", lambda x: np.linalg.norm(x, -1, axis=(1, 0)), (floats(3, 4),)),
    OpCase(
        "linalg_vector_norm_axes",
        lambda x: np.linalg.vector_norm(x, axis=(0, 2), keepdims=True, ord=1),
        (floats(3, 4, 2),),
    ),
    OpCase("linalg_matrix_norm", lambda x: np.linalg.matrix_norm(x, ord=-np.inf), (floats(2, 3, 4, dtype=np.float64),)),
    OpCase("linalg_vecdot", np.linalg.vecdot, (floats(2, 3), floats(3))),
    OpCase("shape_logspace_traced", lambda a, b: np.logspace(a, b, 5, base=2.0), (floats(3), floats(3))),
    # -- reductions, scans, ufunc methods -----------------------------------------------------
    OpCase("rs_sum_where_initial", lambda x, m: np.sum(x, axis=1, where=m, initial=0.5), (rs_floats(4, 7), RS_MASK)),
    OpCase("rs_sum_int_where", lambda a, m: a.sum(axis=0, where=m), (rs_ints(4, 7), RS_MASK)),
    OpCase("rs_max_where_initial", lambda x, m: np.max(x, axis=0, where=m, initial=-1.0), (rs_floats(4, 7), RS_MASK)),
    OpCase("rs_min_initial_empty_axis", lambda a: np.min(a, axis=1, initial=3), (rs_ints(3, 0),)),
    OpCase("rs_max_initial_int", lambda a: a.max(initial=4, keepdims=True), (rs_ints(2, 3, dtype=np.int64),)),
    OpCase("rs_prod_where_initial", lambda x, m: np.prod(x, axis=1, where=m, initial=2.0), (rs_floats(4, 7), RS_MASK)),
    OpCase("rs_any_where", lambda x, m: np.any(x > 0, axis=1, where=m), (rs_floats(4, 7), RS_MASK)),
    OpCase("rs_mean_where", lambda x, m: x.mean(axis=1, where=m), (rs_floats(4, 7, dtype=np.float64), RS_MASK)),
    OpCase("rs_var_where_ddof", lambda x, m: np.var(x, axis=1, where=m, ddof=1), (rs_floats(4, 7), RS_MASK)),
    OpCase("rs_std_mean", lambda x: np.std(x, axis=0, mean=np.mean(x, axis=0, keepdims=True)), (rs_floats(5, 3),)),
    OpCase("rs_var_correction_int", lambda a: np.var(a, correction=1), (rs_ints(13),)),
    OpCase("rs_ptp", lambda x: np.ptp(x, axis=1), (rs_floats(3, 7, dtype=np.float64),)),
    OpCase("rs_ptp_int_keepdims", lambda a: np.ptp(a, axis=0, keepdims=True), (rs_ints(5, 2),)),
    OpCase("rs_count_nonzero", np.count_nonzero, (np.array([[0.0, -0.0, np.nan, 1.0], [np.inf, 0.0, 2.0, -0.0]]),)),
    OpCase(
        "rs_count_nonzero_axis", lambda a: np.count_nonzero(a, axis=1, keepdims=True), (rs_ints(3, 5, low=-1, high=2),)
    ),
    OpCase("rs_average", lambda x: np.average(x, axis=0), (rs_floats(5, 3),)),
    OpCase(
        "rs_average_weights", lambda x, w: np.average(x, axis=1, weights=w), (rs_floats(3, 5), rs_floats(5) ** 2 + 0.5)
    ),
    OpCase(
        "rs_average_weights_returned",
        lambda a, w: np.stack(np.average(a, axis=0, weights=w, returned=True)),
        (rs_ints(4, 3), rs_floats(4, 3, dtype=np.float64) ** 2 + 0.5),
    ),
    OpCase(
        "rs_nansum",
        lambda x: np.nansum(x, axis=1),
        (np.array([[1.0, np.nan, 2.5], [np.nan, np.nan, np.nan]], np.float32),),
    ),
    OpCase("rs_nanprod", np.nanprod, (np.array([[1.5, np.nan], [-2.0, 3.0]]),)),
    OpCase("rs_nanmax", lambda x: np.nanmax(x, axis=0), (np.array([[1.0, np.nan, -3.0], [np.nan, -2.0, 0.5]]),)),
    OpCase(
        "rs_nanmin_keepdims",
        lambda x: np.nanmin(x, axis=1, keepdims=True),
        (np.array([[3.0, np.nan, -1.0]], np.float32),),
    ),
    OpCase(
        "rs_nanmean",
        lambda x: np.nanmean(x, axis=0),
        (np.array([[1.0, np.nan], [np.nan, 3.0], [2.0, 5.0]], np.float32),),
    ),
    OpCase(
        "rs_nanvar", lambda x: np.nanvar(x, ddof=1), (np.array([[1.0, np.nan, 4.0, 2.0], [0.5, 1.5, np.nan, 3.0]]),)
    ),
    OpCase("rs_nanstd", np.nanstd, (np.array([1.0, np.nan, 4.0, 2.0, -1.0], np.float32),)),
    OpCase("rs_cumsum_flat_int32_widens", np.cumsum, (rs_ints(3, 5),)),
    OpCase("rs_cumsum_axis", lambda x: np.cumsum(x, axis=0), (rs_floats(13, 2),)),
    OpCase("rs_cumsum_bool", lambda b: b.cumsum(axis=-1), (rs_bools(2, 7),)),
    OpCase("rs_cumsum_int_wraps", lambda a: np.cumsum(a, axis=1, dtype=np.int32), (RS_INT_EXTREMES,)),
    OpCase(
        "rs_cumsum_empty_and_one",
        lambda x, y: np.cumsum(x, axis=1) + np.cumsum(y, axis=0)[0],
        (rs_floats(2, 0), rs_floats(1)),
    ),
    OpCase("rs_cumprod", lambda x: np.cumprod(x, axis=1), (rs_floats(3, 6, dtype=np.float64) * 0.5 + 1,)),
    OpCase("rs_cumprod_dtype", lambda a: np.cumprod(a, dtype=np.float64), (rs_ints(7, low=-3, high=4),)),
    OpCase("rs_nancumsum", lambda x: np.nancumsum(x, axis=1), (np.array([[np.nan, 1.0, 2.0], [3.0, np.nan, -1.5]]),)),
    OpCase("rs_nancumprod", np.nancumprod, (np.array([2.0, np.nan, -0.5, 3.0], np.float32),)),
    OpCase("rs_maximum_accumulate", lambda x: np.maximum.accumulate(x, axis=1), (rs_floats(3, 11),)),
    OpCase("rs_minimum_accumulate_int", np.minimum.accumulate, (rs_ints(5, 2, dtype=np.int64),)),
    OpCase("rs_add_accumulate_int32_widens", np.add.accumulate, (rs_ints(6),)),
    OpCase(
        "rs_multiply_accumulate", lambda x: np.multiply.accumulate(x, axis=-1), (rs_floats(2, 5, dtype=np.float64),)
    ),
    OpCase("rs_logical_or_accumulate", lambda x: np.logical_or.accumulate(x, axis=1), (rs_floats(3, 4) > 0.8,)),
    OpCase("rs_logical_and_accumulate_floats", np.logical_and.accumulate, (np.array([1.5, np.nan, 0.0, 2.0]),)),
    OpCase(
        "rs_add_reduce_keepdims_initial", lambda a: np.add.reduce(a, axis=1, keepdims=True, initial=5), (rs_ints(3, 4),)
    ),
    OpCase(
        "rs_maximum_reduce_where",
        lambda x, m: np.maximum.reduce(x, axis=None, where=m, initial=-5.0),
        (rs_floats(4, 7), RS_MASK),
    ),
    OpCase("rs_multiply_reduce_dtype", lambda a: np.multiply.reduce(a, axis=0, dtype=np.float64), (rs_ints(3, 2),)),
    OpCase("rs_logical_and_reduce_floats", lambda x: np.logical_and.reduce(x, axis=1), (rs_floats(3, 2),)),
    # -- sorting ---------------------------------------------------------------------------
    OpCase("sort", np.sort, (rs_distinct(3, 7),)),
    OpCase("sort_axis0_f32", lambda x: np.sort(x, axis=0), (rs_distinct(5, 2, dtype=np.float32),)),
    OpCase("sort_flat", lambda x: np.sort(x, axis=None), (rs_distinct(2, 3),)),
    OpCase("sort_nan_inf_last", rs_sorted_signs, (np.array([2.0, np.nan, -np.inf, 0.5, np.inf, np.nan, -1.0]),)),
    OpCase("sort_signed_zeros_keep_order", rs_sorted_signs, (RS_SIGNED_ZEROS,)),
    OpCase("sort_int_extremes", lambda a: np.sort(a, axis=1), (RS_INT_EXTREMES,)),
    OpCase("sort_bool", lambda b: np.sort(b, axis=0), (rs_bools(5, 3),)),
    OpCase(
        "sort_size_one_and_empty",
        lambda x, y: np.sort(x) + np.sort(y, axis=0).sum(),
        (rs_floats(3, 1), rs_floats(0, 2)),
    ),
    OpCase("argsort_stable_ties", lambda a: np.argsort(a, axis=1, kind="stable"), (rs_ints(3, 11, low=-2, high=2),)),
    OpCase(
        "argsort_nan_last",
        lambda x: x.argsort(kind="stable"),
        (np.array([[np.nan, 1.0, -np.inf, np.nan, 0.0]], np.float32),),
    ),
    OpCase("argsort_flat", lambda x: np.argsort(x, axis=None), (rs_distinct(3, 4),)),
    OpCase("partition_kth_value", lambda x: np.partition(x, 2, axis=1)[:, 2], (rs_distinct(3, 6),)),
    OpCase("partition_kths", lambda x: np.partition(x, [0, -1])[[0, -1]], (rs_distinct(7, dtype=np.float32),)),
    OpCase(
        "argpartition_smallest_set", lambda x: np.sort(np.argpartition(x, 2, axis=0)[:3], axis=0), (rs_distinct(7, 2),)
    ),
    OpCase("median", lambda x: np.median(x, axis=1), (rs_distinct(3, 7),)),
    OpCase(
        "median_even_keepdims", lambda x: np.median(x, axis=0, keepdims=True), (rs_distinct(6, 2, dtype=np.float32),)
    ),
    OpCase("median_int_axes", lambda a: np.median(a, axis=(0, 2)), (rs_ints(2, 3, 2),)),
    OpCase(
        "median_nan_is_nan",
        lambda x: np.isnan(np.median(x, axis=1)),
        (np.array([[1.0, np.nan, 3.0], [4.0, 2.0, 5.0]]),),
    ),
    OpCase("quantile", lambda x: np.quantile(x, 0.3, axis=1), (rs_distinct(3, 8, dtype=np.float32),)),
    OpCase(
        "quantile_q_array_keepdims",
        lambda x: np.quantile(x, [0.0, 0.25, 0.9, 1.0], axis=0, keepdims=True),
        (rs_distinct(5, 2),),
    ),
    OpCase("quantile_f64_q_promotes", lambda x: np.quantile(x, np.float64(0.7)), (rs_distinct(6, dtype=np.float32),)),
    OpCase("percentile_int", lambda a: np.percentile(a, [10, 50, 95], axis=1), (rs_ints(2, 9),)),
    OpCase("top_k_values", lambda x: kiln.top_k(x, 3)[0], (rs_distinct(4, 7),)),
    OpCase("top_k_indices_ties_axis0", lambda a: kiln.top_k(a, 2, axis=0)[1], (rs_ints(6, 3, low=-2, high=2),)),
    OpCase("compress_constant_condition", lambda x: np.compress([1, 0, 1, 1], x, axis=0), (rs_floats(4, 3),)),
    OpCase(
        "nanmedian", lambda x: np.nanmedian(x, axis=1), (np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, 0.5, 4.0, 2.5]]),)
    ),
    OpCase("top_k_nan_first", lambda x: kiln.top_k(x, 2)[1], (np.array([[1.0, np.nan, 3.0, 3.0]], np.float32),)),
    # -- indexing and assignment ------------------------------------------------------------
    OpCase("index_list_repeats_negative", lambda x: x[[0, 2, 2, -1]], (ix_floats(5, 7),)),
    OpCase("index_constant_axis1", lambda x: x[:, np.array([6, 0, 3, 3, 1])], (ix_floats(2, 7, dtype=np.float64),)),
    OpCase("index_long_constant", lambda x: x[..., IX_LONG_INDEX], (ix_floats(3, 23, dtype=np.float64),)),
    OpCase("index_arange_is_a_slice", lambda x: x[np.arange(11, 0, -3)], (ix_floats(13),)),
    OpCase("index_one_repeated_is_a_broadcast", lambda x: x[[2, 2, 2]], (ix_floats(3, 1),)),
    OpCase("index_traced", lambda x, i: x[i], (ix_floats(7, 3), np.array([[6, 0], [-1, -7]]))),
    OpCase(
        "index_traced_int32_after_slice",
        lambda x, i: x[1:, i],
        (ix_floats(4, 11, dtype=np.float64), ix_ints(5, low=-11, high=11, dtype=np.int32)),
    ),
    OpCase("index_traced_scalar", lambda x, i: x[i, ::-1], (ix_floats(5, 3), np.int64(-2))),
    OpCase("index_two_arrays_adjacent", lambda x: x[:, [0, 2, 1], [3, 3, 0]], (ix_floats(2, 3, 5),)),
    OpCase("index_separated_arrays_go_first", lambda x: x[[1, 0], :, [4, 2]], (ix_floats(2, 3, 5),)),
    OpCase("index_int_and_array_separated", lambda x: x[0, :, [0, 1]], (ix_floats(2, 3, 5),)),
    OpCase(
        "index_broadcast_arrays_none_ellipsis",
        lambda x, i: x[i[:, None], None, ..., [0, 2]],
        (ix_floats(3, 2, 4), np.array([2, -3])),
    ),
    OpCase(
        "index_specials_exact",  # bool results: the sign of -0.0 counts, and a NaN has no gradient
        lambda x, i: np.stack([np.isnan(x[i]), np.signbit(x[i]), x[i] == np.inf, x[i] == -np.inf, x[i] == 1]),
        (np.array([np.nan, -0.0, np.inf, -np.inf, 1.0]), np.array([1, 0, 1, 3, 2, 4, 1])),
    ),
    OpCase(
        "index_int64_extremes",
        lambda a, i: a[i],
        (np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]), np.array([2, 0, 1, 0])),
    ),
    OpCase("index_bools", lambda b, i: b[i], (_ix_rng.random(6) < 0.5, np.array([5, 0, 0, -2]))),
    OpCase("index_empty", lambda x: x[np.array([], np.int64)], (ix_floats(4, 3),)),
    OpCase("index_empty_traced", lambda x, i: x[:, i], (ix_floats(4, 3), np.zeros(0, np.int64))),
    OpCase("index_constant_mask", lambda x: x[IX_MASK], (ix_floats(4, 5),)),
    OpCase("index_constant_row_mask", lambda x: x[[True, False, True, True], 1:], (ix_floats(4, 5),)),
    OpCase("index_of_reversed_view", lambda x, i: x[::-1, 1:][i], (ix_floats(5, 3), np.array([0, 4, 4]))),
    OpCase("take_axis", lambda x, i: np.take(x, i, axis=1), (ix_floats(3, 7), ix_ints(2, 2, low=-7, high=7))),
    OpCase("take_flat_method", lambda x: x.take([5, 0, -1]), (ix_floats(2, 3),)),
    OpCase(
        "take_wrap",
        lambda x, i: np.take(x, i, mode="wrap"),
        (ix_floats(5, dtype=np.float64), ix_ints(7, low=-20, high=20)),
    ),
    OpCase("take_clip", lambda x, i: np.take(x, i, axis=0, mode="clip"), (ix_floats(4, 2), ix_ints(6, low=-9, high=9))),
    OpCase(
        "take_constant_wrap_int32",
        lambda a: np.take(a, [-7, 9], axis=1, mode="wrap"),
        (ix_ints(2, 4, low=-9, high=9, dtype=np.int32),),
    ),
    OpCase(
        "take_along_axis_argsort",
        lambda x, i: np.take_along_axis(x, i, axis=1),
        (ix_floats(3, 6), np.argsort(ix_floats(3, 6), axis=1)),
    ),
    OpCase(
        "take_along_axis_broadcast",
        lambda x, i: np.take_along_axis(x, i, 0),
        (ix_floats(5, 1, dtype=np.float64), ix_ints(2, 4, low=-5, high=5)),
    ),
    OpCase(
        "take_along_axis_none",
        lambda a: np.take_along_axis(a, np.array([3, 0, 3]), None),
        (ix_ints(2, 3, low=-5, high=5),),
    ),
    OpCase("assign_basic", _assign_basic, (ix_floats(4, 5),)),
    OpCase(
        "assign_index_last_wins",
        _assign_last_wins,
        (ix_floats(3, 4, dtype=np.float64), ix_floats(3, 1, dtype=np.float64)),
    ),
    OpCase("assign_traced_index", _assign_traced_index, (ix_floats(6, 2), np.array([4, -1, 4, 0]), ix_floats(4, 2))),
    OpCase("assign_traced_pairs", _assign_traced_pairs, (ix_floats(3, 5), np.array([2, 0, -3]), ix_floats(3))),
    OpCase("assign_add_repeats_once", _assign_add_repeats_once, (ix_floats(4, 3), ix_floats(3, 3))),
    OpCase("assign_masks", _assign_masks, (ix_floats(4, 5, dtype=np.float64),)),
    OpCase("assign_traced_row_mask", _assign_traced_row_mask, (ix_floats(4, 3), _ix_rng.random(4) < 0.5, ix_floats(3))),
    OpCase("assign_cast", _assign_cast, (ix_ints(2, 3, low=-5, high=5, dtype=np.int32), ix_floats(2, 3) * 4)),
    OpCase("assign_through_views", _assign_through_views, (ix_floats(4, 5),)),
    OpCase("assign_view_sees_base", _assign_view_sees_base, (ix_floats(3, 4, dtype=np.float64),)),
    OpCase("assign_copy_is_its_own", _assign_copy_is_its_own, (ix_floats(3, 2),)),
    OpCase("assign_bools", _assign_bools, (_ix_rng.random((4, 3)) < 0.5,)),
    OpCase("add_at_repeats", _add_at, (ix_floats(5, 2), ix_floats(4, 2))),
    OpCase(
        "subtract_at_traced",
        _subtract_at_traced,
        (ix_floats(2, 4, dtype=np.float64), np.array([3, 3, -4]), ix_floats(2, 3, dtype=np.float64)),
    ),
    OpCase("multiply_at", _multiply_at, (ix_floats(4),)),
    OpCase("maximum_at", _maximum_at, (ix_floats(3, 2), np.array([1, 1, 2]), ix_floats(3))),
    OpCase("minimum_at_int", _minimum_at_int, (ix_ints(5, low=-5, high=5, dtype=np.int32), np.array([0, 4, 0]))),
    OpCase(
        "put_putmask_fill", _put_putmask_fill, (ix_floats(3, 4), np.array([1, 5, 5, -2]), _ix_rng.random((3, 4)) < 0.5)
    ),
]


# -- small and unsigned dtypes: numpy's int8 ... uint64 and float16 ---------------------------
# Integer inputs hold each type's extremes, 0 and 1 (and -1 where signed); divisors hold 0
# (and -1: MIN // -1 wraps), so every rule numpy has for them is met on every target.
_dt_rng = np.random.default_rng(150016)
SMALL_INT_DTYPES = (np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64)


def dt_ints(dtype, shape=(3, 7)):
    """Random values over the whole range of `dtype`, its extremes and 0, 1 (-1) in front."""
    info = np.iinfo(dtype)
    values = _dt_rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    special = [info.min, info.max, 0, 1, info.max - 1, (-1 if info.min else 2), info.min + 1]
    values.reshape(-1)[: len(special)] = np.array(special, dtype)
    return values


def dt_divisors(dtype, shape=(3, 7)):
    values = dt_ints(dtype, shape)
    values.reshape(-1)[7:12] = np.array([0, 1, 3, (-1 if np.iinfo(dtype).min else 7), 0], dtype)
    return values


def dt_counts(dtype, shape=(3, 7)):
    """Shift counts from 0 past the width (and negative ones where signed)."""
    bits = np.dtype(dtype).itemsize * 8
    low = -3 if np.iinfo(dtype).min else 0
    return _dt_rng.integers(low, bits + 3, shape).astype(dtype)


_DT_INT_OPS = {
    "arith": lambda x, y: x * y - x + y,
    "neg_abs": lambda x, y: np.abs(-x) ^ y,
    "floordiv": lambda x, y: x // y,
    "remainder": lambda x, y: x % y,
    "fmod": np.fmod,
    "maximum": np.maximum,
    "minimum_reversed": lambda x, y: np.minimum(x[::-1], y[:, ::-2].repeat(2, axis=1)[:, :7]),
    "less": lambda x, y: x < y,
    "bitwise": lambda x, y: (x & y) | (~x ^ y),
    "sum_axis0": lambda x, y: x.sum(axis=0),
    "max_min_axis1": lambda x, y: x.max(axis=1) - y.min(axis=1),
    "argmax_argmin": lambda x, y: np.argmax(x, axis=1) + np.argmin(y),
    "sort": lambda x, y: np.sort(x, axis=1),
    "cumsum": lambda x, y: np.cumsum(x, axis=1),
    "to_float32": lambda x, y: x.astype(np.float32) * np.float32(0.5),
    "to_float64_mean": lambda x, y: x.mean(axis=0),
    "with_int64": lambda x, y: x + np.arange(7),
    "where": lambda x, y: np.where(x > y, x, 7),
}
DT_CASES = [
    OpCase(f"dt_{np.dtype(d).name}_{name}", fn, (dt_ints(d), dt_divisors(d)))
    for d in SMALL_INT_DTYPES
    for name, fn in _DT_INT_OPS.items()
]
DT_CASES += [
    OpCase(f"dt_{np.dtype(d).name}_shifts", lambda x, s: (x << s) ^ (x >> s), (dt_ints(d), dt_counts(d)))
    for d in SMALL_INT_DTYPES
]
DT_CASES += [
    OpCase(f"dt_{np.dtype(d).name}_pow", lambda x, e: x**e, (dt_ints(d), dt_counts(d) % 9)) for d in SMALL_INT_DTYPES
]
# Float to integer within range: numpy leaves out-of-range conversions to the machine.
DT_CASES += [
    OpCase(
        f"dt_{np.dtype(d).name}_from_float",
        lambda f, d=d: (f * (np.iinfo(d).max // 2 if np.iinfo(d).bits < 64 else 2.0**62)).astype(d),
        (_dt_rng.uniform(-1 if np.iinfo(d).min else 0, 1.99, (4, 5)),),
    )
    for d in SMALL_INT_DTYPES
]
DT_CASES += [
    OpCase(
        "dt_uint64_above_int64",
        lambda x: (x.astype(np.float64) * 0.49 + 2.0**63).astype(np.uint64),
        (dt_ints(np.uint64, (9,)),),
    )
]

# float16: stored in float16, each op computed in float32 and rounded, as numpy does. Finite
# inputs here (the gradient table differentiates these); infinities, NaN, overflow and the
# rounding of conversions are checked bit for bit in test_dtypes.py.
DT_HALF = np.array([0.0, -0.0, 1.0, 0.5, -2.5, 6e-8, 0.1, 10.5, 2.049, -3.0, 0.33, 7.0], np.float16)
DT_HALVES = _dt_rng.standard_normal((5, 12)).astype(np.float16)
DT_CASES += [
    OpCase("dt_float16_add_rounds_each_op", lambda x, y: (x + y) * x - y, (DT_HALF, DT_HALVES[0])),
    OpCase("dt_float16_subnormals", lambda x: x * np.float16(1e-4) * np.float16(1e-3), (DT_HALVES,)),
    OpCase("dt_float16_divide", lambda x, y: x / y, (DT_HALVES, DT_HALVES[::-1, ::-1])),
    OpCase("dt_float16_exp_tanh", lambda x: np.exp(x) + np.tanh(x), (DT_HALVES,)),
    OpCase("dt_float16_sqrt_log", lambda x: np.sqrt(np.abs(x)) - np.log(np.abs(x) + 1), (DT_HALVES,)),
    OpCase("dt_float16_sum", lambda x: x.sum(axis=1), (DT_HALVES,)),
    OpCase("dt_float16_mean_var", lambda x: x.mean(axis=0) + x.var(axis=0), (DT_HALVES,)),
    OpCase("dt_float16_matmul", lambda a, b: a @ b, (DT_HALVES, DT_HALVES.T[::-1])),
    OpCase("dt_float16_maximum", lambda x: np.maximum(x, np.float16(0.5)), (DT_HALVES,)),
    OpCase("dt_float16_sort", lambda x: np.sort(x), (DT_HALVES[0],)),
    OpCase("dt_float16_to_float64", lambda x: x.astype(np.float64) * 3, (DT_HALF,)),
    OpCase("dt_float16_with_float32", lambda x, y: x + y, (DT_HALVES, floats(12))),
    OpCase("dt_float16_where_reversed", lambda x: np.where(x[::-1] > 0, x[::-1], np.float16(-1)), (DT_HALVES,)),
]
CASES += DT_CASES


# -- result dtypes: every op on every mix of operand kinds --------------------------------
# One operand of each kind numpy tells apart under NEP 50: arrays and 0-d arrays and numpy
# scalars are strong, Python scalars are weak. (The Python int is 3, not 2: numpy computes
# bool_array ** 2 as np.square, in int8, a shortcut of its array type alone.)
OPERAND_KINDS = {
    "f32 array": np.array([0.5, 1.5, 2.0], np.float32),
    "i32 array": np.array([1, 2, 3], np.int32),
    "bool array": np.array([True, False, True]),
    "f64 0-d array": np.array(1.25),
    "i32 0-d array": np.array(2, np.int32),
    "np.float32": np.float32(1.5),
    "np.int64": np.int64(3),
    "np.bool_": np.True_,
    "int": 3,
    "float": 1.5,
    "bool": True,
}

UNARY_DTYPE_OPS = {
    "-x": lambda a: -a,
    "abs": abs,
    "np.exp": np.exp,
    "np.log": np.log,
    "np.tanh": np.tanh,
    "np.positive": np.positive,
    "np.sqrt": np.sqrt,
    "np.square": np.square,
    "np.logical_not": np.logical_not,
    "np.sum": np.sum,
    "np.sum(dtype=f32)": lambda a: np.sum(a, dtype=np.float32),
    "np.prod": np.prod,
    "np.max": np.max,
    "np.mean": np.mean,
    "np.mean(dtype=i64)": lambda a: np.mean(a, dtype=np.int64),
    "np.mean(dtype=i32)": lambda a: np.mean(a, dtype=np.int32),
    "np.var(dtype=i32)": lambda a: np.var(a, dtype=np.int32),
    "np.mean(dtype=f32)": lambda a: np.mean(a, dtype=np.float32),
    "np.var(dtype=f32)": lambda a: np.var(a, dtype=np.float32),
    "np.std(dtype=i64)": lambda a: np.std(a, dtype=np.int64),
    "np.argmax": np.argmax,
    "np.repeat(a, 2)": lambda a: np.repeat(a, 2),
    "np.any": np.any,
    "np.all": np.all,
    "np.add.reduce": np.add.reduce,
    "np.ones_like": np.ones_like,
    "np.zeros_like + 1": lambda a: np.zeros_like(a) + 1,
    "np.full_like(a, 7) * 0.5": lambda a: np.full_like(a, 7) * 0.5,
    "np.multiply.outer(a, 2)": lambda a: np.multiply.outer(a, 2),
    "np.invert": np.invert,
    "np.reciprocal": np.reciprocal,
    "np.sign": np.sign,
    "np.signbit": np.signbit,
    "np.isnan": np.isnan,
    "np.isfinite": np.isfinite,
    "np.floor": np.floor,
    "np.rint": np.rint,
    "np.fabs": np.fabs,
    "np.cbrt": np.cbrt,
    "np.arctan": np.arctan,
    "np.deg2rad": np.deg2rad,
    "np.round(a, 1)": lambda a: np.round(a, 1),
    "np.round(a, -1)": lambda a: np.round(a, -1),
    "np.nan_to_num": np.nan_to_num,
}

BINARY_DTYPE_OPS = {
    "a + b": lambda a, b: a + b,
    "a - b": lambda a, b: a - b,
    "a * b": lambda a, b: a * b,
    "a / b": lambda a, b: a / b,
    "a ** b": lambda a, b: a**b,
    "a < b": lambda a, b: a < b,
    "a == b": lambda a, b: a == b,
    "np.add": np.add,
    "np.maximum": np.maximum,
    "np.logical_and": np.logical_and,
    "np.exp(a) + b": lambda a, b: np.exp(a) + b,
    "np.where(a > 0, a, b)": lambda a, b: np.where(a > 0, a, b),
    "np.where(b > 1, ones_like(a), zeros_like(a))": lambda a, b: np.where(b > 1, np.ones_like(a), np.zeros_like(a)),
    "np.where(a > 1, 1.5, b)": lambda a, b: np.where(a > 1, 1.5, b),
    "np.clip(a, 0, b)": lambda a, b: np.clip(a, 0, b),
    "np.minimum": np.minimum,
    "np.power": np.power,
    "np.true_divide": np.true_divide,
    "a != b": lambda a, b: a != b,
    "a >= b": lambda a, b: a >= b,
    "np.logical_or": np.logical_or,
    "np.logical_xor": np.logical_xor,
    "np.concatenate of both, flattened": lambda a, b: np.concatenate([np.reshape(a, -1), np.reshape(b, -1)]),
    "np.add.outer": np.add.outer,
    "np.stack([a, b])": lambda a, b: np.stack([a, b]),
    "np.dot": np.dot,
    "a % b": lambda a, b: a % b,
    "a // b": lambda a, b: a // b,
    "divmod(a, b)": lambda a, b: divmod(a, b)[1],
    "a & b": lambda a, b: a & b,
    "a ^ b": lambda a, b: a ^ b,
    "a << b": lambda a, b: a << b,
    "a >> b": lambda a, b: a >> b,
    "np.fmod": np.fmod,
    "np.arctan2": np.arctan2,
    "np.copysign": np.copysign,
    "np.fmax": np.fmax,
    "np.logaddexp": np.logaddexp,
    "np.hypot": np.hypot,
    "np.heaviside": np.heaviside,
    "np.float_power": np.float_power,
}


# -- array editing and creation: append, insert, delete, pad modes, ... ------------------
# (cases are named "edit_..."; EDIT_NO_GRADIENT lists those with no float input or output)
_edit_rng = np.random.default_rng(20261201)  # its own stream, so the sections after keep their inputs


def ed_floats(*shape, dtype=np.float64):
    return _edit_rng.standard_normal(shape).astype(dtype)


def ed_ints(*shape, dtype=np.int32, low=-9, high=9):
    return _edit_rng.integers(low, high, shape).astype(dtype)


def ed_distinct(*shape, dtype=np.float64):
    """Values a unit apart, shuffled: no ties for maximum, minimum or median to kink at."""
    return (_edit_rng.permutation(math.prod(shape)).reshape(shape) * 0.5 - 3).astype(dtype)


def _edit_put_along(x, v):
    y = x * 1
    np.put_along_axis(y, np.array([[4], [0], [2]]), v, axis=1)
    return y


def _edit_put_along_sorted(x, v):
    y = x * 1
    np.put_along_axis(y, np.argsort(x, axis=1)[:, :2], v, axis=1)  # traced indices, always in range
    return y


def _edit_put_along_flat(x, v):
    y = x + 0
    np.put_along_axis(y, np.array([4, 0, 4]), v, axis=None)
    return y


def _edit_put_along_view(x, v):
    y = x * 1
    np.put_along_axis(y.T, np.array([[2], [0], [1]]), v, axis=0)  # written through the view into y
    return y


def _edit_fill_diagonal(x, v):
    y = x * 1
    np.fill_diagonal(y, v)
    return y


def _edit_fill_diagonal_wrap(x):
    y = x - 1
    np.fill_diagonal(y, [7, -3], wrap=True)
    return y


def _edit_fill_diagonal_3d(x, v):
    y = x + 0
    np.fill_diagonal(y[::-1], v)
    return y


def _edit_place(x, v):
    y = x * 1
    np.place(y, np.array([[True, False, True], [False, False, True]]), v)
    return y


def _edit_place_traced(x, v):
    y = x * 1
    np.place(y, x > 0, np.append(v, np.float32(0.5)))  # never empty, whatever size v is given
    return y


def _edit_place_ints(a):
    b = a * 1
    np.place(b, b % 3 == 0, [100, -1, 7])
    return b


EDIT_CASES: list = [
    OpCase("edit_append_flat", lambda a, b: np.append(a, b), (ed_floats(2, 3, dtype=np.float32), ed_floats(5))),
    OpCase("edit_append_axis", lambda a, b: np.append(a, b, axis=1), (ed_floats(3, 2), ed_floats(3, 5)[:, ::-2])),
    OpCase("edit_append_int_scalar", lambda a: np.append(a, 7), (ed_ints(1, dtype=np.uint8, low=0),)),
    OpCase("edit_append_bool", lambda a, b: np.append(a, b, axis=0), (bools(2, 3), ed_ints(1, 3, dtype=np.int64))),
    OpCase("edit_insert_scalar", lambda a, v: np.insert(a, 2, v), (ed_floats(7, dtype=np.float32), ed_floats(1))),
    OpCase("edit_insert_axis", lambda a, v: np.insert(a, -1, v, axis=1), (ed_floats(3, 5), ed_floats(3))),
    OpCase("edit_insert_list", lambda a, v: np.insert(a, [1, 1, 4, 0], v, axis=0), (ed_floats(5, 2), ed_floats(4, 1))),
    OpCase(
        "edit_insert_slice", lambda a: np.insert(a[::-1], slice(None, None, 2), -5.5), (ed_floats(5, dtype=np.float32),)
    ),
    OpCase(
        "edit_insert_int",
        lambda a: np.insert(a, np.array([3, -1]), [100, 200], axis=1),
        (ed_ints(2, 3, dtype=np.int64),),
    ),
    OpCase("edit_insert_cast", lambda a, v: np.insert(a, 1, v), (ed_ints(3), ed_floats(2))),
    OpCase("edit_delete_int", lambda a: np.delete(a, -2, axis=1), (ed_floats(3, 4, dtype=np.float32),)),
    OpCase("edit_delete_slice", lambda a: np.delete(a, slice(1, None, 3)), (ed_floats(2, 5)[:, ::-1],)),
    OpCase("edit_delete_list", lambda a: np.delete(a, [0, 4, 4, -1], axis=0), (ed_floats(7, 2),)),
    OpCase(
        "edit_delete_mask",
        lambda a: np.delete(a, np.array([True, False, False, True, False]), 1),
        (ed_ints(2, 5, dtype=np.uint8, low=0),),
    ),
    OpCase("edit_resize_grow", lambda a: np.resize(a, (3, 5)), (ed_floats(2, 2, dtype=np.float32),)),
    OpCase("edit_resize_shrink", lambda a: np.resize(a.T, 5), (ed_floats(3, 4),)),
    OpCase("edit_resize_int", lambda a: np.resize(a, (2, 1, 7)), (ed_ints(3, dtype=np.int64),)),
    OpCase(
        "edit_block_2d",
        lambda a, b, c, d: np.block([[a, b], [c, d]]),
        (ed_floats(2, 2), ed_floats(2, 3), ed_floats(1, 2), ed_floats(1, 3)),
    ),
    OpCase("edit_block_mixed", lambda a, b: np.block([[a], [b]]), (ed_floats(3, dtype=np.float32), ed_ints(2, 3))),
    OpCase(
        "edit_block_flat",
        lambda a, b: np.block([a, 1.5, b]),
        (ed_floats(2, dtype=np.float32), ed_floats(3, dtype=np.float32)),
    ),
    OpCase("edit_block_3d", lambda a, b: np.block([[[a]], [[b]]]), (ed_floats(2, 3), ed_floats(2, 3))),
    OpCase("edit_put_along_axis", _edit_put_along, (ed_floats(3, 5), ed_floats(3, 1))),
    OpCase(
        "edit_put_along_traced",
        _edit_put_along_sorted,
        (ed_floats(2, 5, dtype=np.float32), ed_floats(2, 2, dtype=np.float32)),
    ),
    OpCase("edit_put_along_flat", _edit_put_along_flat, (ed_ints(2, 3), ed_ints(3, dtype=np.int64))),
    OpCase("edit_put_along_view", _edit_put_along_view, (ed_floats(3, 3), ed_floats(1, 3))),
    OpCase("edit_fill_diagonal", _edit_fill_diagonal, (ed_floats(3, 4, dtype=np.float32), ed_floats(1))),
    OpCase("edit_fill_diagonal_wrap", _edit_fill_diagonal_wrap, (ed_ints(7, 2, dtype=np.int64),)),
    OpCase("edit_fill_diagonal_3d", _edit_fill_diagonal_3d, (ed_floats(3, 3, 3), ed_floats(2))),
    OpCase("edit_place", _edit_place, (ed_floats(2, 3), ed_floats(2))),
    OpCase(
        "edit_place_traced", _edit_place_traced, (ed_floats(3, 5, dtype=np.float32), ed_floats(2, dtype=np.float32))
    ),
    OpCase("edit_place_ints", _edit_place_ints, (ed_ints(4, 3, dtype=np.int64),)),
    OpCase(
        "edit_choose",
        lambda a, b, c: np.choose(np.array([[0, 1, 2], [2, 1, 0]]), [a, b, c]),
        (ed_floats(2, 3), ed_floats(3), ed_floats(2, 1)),
    ),
    OpCase(
        "edit_choose_wrap",
        lambda i, b: np.choose(i, [b, -b, 2.5], mode="wrap"),
        (ed_ints(4, 3, low=-7, high=7), ed_floats(3, dtype=np.float32)),
    ),
    OpCase(
        "edit_choose_clip",
        lambda i, c: np.choose(i, c, mode="clip"),
        (ed_ints(5, low=-3, high=6, dtype=np.int64), ed_ints(3, 5, dtype=np.uint8, low=0, high=200)),
    ),
    OpCase("edit_ediff1d", lambda a: np.ediff1d(a), (ed_floats(3, 4, dtype=np.float32),)),
    OpCase(
        "edit_ediff1d_ends",
        lambda a, b: np.ediff1d(a[::-1], to_end=b, to_begin=[-2.5, 0.0]),
        (ed_floats(5), ed_floats(2, 2)),
    ),
    OpCase("edit_ediff1d_int8", lambda a: np.ediff1d(a, to_begin=7), (ed_ints(6, dtype=np.int8, low=-100, high=100),)),
    OpCase("edit_vander", lambda x: np.vander(x), (ed_floats(4),)),
    OpCase("edit_vander_f32", lambda x: np.vander(x, 5, increasing=True), (ed_floats(3, dtype=np.float32),)),
    OpCase("edit_vander_int", lambda x: np.vander(x, N=4), (ed_ints(5, dtype=np.int32),)),
    OpCase("edit_vander_bool", lambda x: np.vander(x, 3, True), (bools(3),)),
    OpCase(
        "edit_pad_linear_ramp",
        lambda a: np.pad(a, ((2, 1), (0, 3)), mode="linear_ramp", end_values=((1, -2), (0.5, 4))),
        (ed_floats(3, 2),),
    ),
    OpCase("edit_pad_linear_ramp_int", lambda a: np.pad(a, 3, "linear_ramp"), (ed_ints(2, 3, dtype=np.int64),)),
    OpCase(
        "edit_pad_linear_ramp_f32",
        lambda a: np.pad(a, (4, 2), "linear_ramp", end_values=(-1.5, 3)),
        (ed_floats(5, dtype=np.float32),),
    ),
    OpCase("edit_pad_maximum", lambda a: np.pad(a, ((1, 2), (2, 0)), mode="maximum"), (ed_distinct(3, 4),)),
    OpCase(
        "edit_pad_minimum",
        lambda a: np.pad(a, 2, mode="minimum", stat_length=((1, 2), (3, 1))),
        (ed_distinct(4, 5, dtype=np.float32),),
    ),
    OpCase("edit_pad_mean", lambda a: np.pad(a, (3, 1), mode="mean", stat_length=2), (ed_floats(2, 5),)),
    OpCase("edit_pad_mean_int", lambda a: np.pad(a, ((1, 1), (2, 3)), mode="mean"), (ed_ints(3, 4),)),
    OpCase("edit_pad_median", lambda a: np.pad(a, (1, 2), mode="median", stat_length=3), (ed_distinct(7),)),
    OpCase("edit_pad_median_int", lambda a: np.pad(a, 1, mode="median"), (ed_ints(2, 4, dtype=np.int64),)),
    OpCase("edit_apply_along_axis", lambda a: np.apply_along_axis(np.sum, 1, a), (ed_floats(3, 4, 2),)),
    OpCase(
        "edit_apply_along_axis_array",
        lambda a: np.apply_along_axis(lambda v: v[::-1] * v[0], 0, a),
        (ed_floats(3, 2, dtype=np.float32),),
    ),
    OpCase(
        "edit_apply_along_axis_2d",
        lambda a: np.apply_along_axis(lambda v, k: np.outer(v, v[:k]), -1, a, 2),
        (ed_floats(2, 3),),
    ),
    OpCase(
        "edit_apply_over_axes", lambda a: np.apply_over_axes(np.sum, a, [0, 2]), (ed_floats(2, 3, 4, dtype=np.float32),)
    ),
    OpCase("edit_apply_over_axes_int", lambda a: np.apply_over_axes(np.max, a, -1), (ed_ints(3, 5),)),
]
EDIT_NO_GRADIENT: list = [
    "edit_append_int_scalar",
    "edit_append_bool",
    "edit_insert_int",
    "edit_insert_cast",
    "edit_delete_mask",
    "edit_resize_int",
    "edit_put_along_flat",
    "edit_fill_diagonal_wrap",
    "edit_place_ints",
    "edit_choose_clip",
    "edit_ediff1d_int8",
    "edit_vander_int",
    "edit_vander_bool",
    "edit_pad_linear_ramp_int",
    "edit_pad_mean_int",
    "edit_pad_median_int",
    "edit_apply_over_axes_int",
]
CASES += EDIT_CASES


# -- numerical functions: interp, convolve, histogram, cov, ... ----------------------------
# (cases are named "num_..."; NUMERIC_NO_GRADIENT lists those with no float input or output)
_INTERP_XP = np.array([-2.0, -0.5, 0.25, 1.0, 2.5, 4.0, 6.0])
_OFF_POINTS = np.array([-3.1, -1.7, -0.3, 0.4, 0.9, 1.3, 2.2, 3.1, 4.7, 5.5, 6.4, -2.6, 0.1])


def _piecewise_three(x):
    return np.piecewise(x, [x < -0.5, x > 0.8], [lambda v: -v, lambda v: v**2, 0.25])


NUMERIC_CASES: list = [
    OpCase("num_interp_traced_points", np.interp, (_OFF_POINTS, _INTERP_XP, floats(7))),
    OpCase(
        "num_interp_f32_reversed_left_right",
        lambda x: np.interp(x, [-1.0, 0.5, 2.0], [3.0, -1.0, 2.0], left=-5.0, right=7.5),
        (_OFF_POINTS.astype(np.float32)[::-1],),
    ),
    OpCase(
        "num_interp_period",
        lambda x, fp: np.interp(x, [350.0, 10.0, 95.0, 180.0, 271.0], fp, period=360),
        (np.array([-190.0, 3.0, 47.0, 355.5, 721.0, 400.0, 130.0]), floats(5, dtype=np.float64)),
    ),
    OpCase("num_interp_int_x", lambda x: np.interp(x, [-5, 0, 3, 8], [1.0, -2.0, 4.0, 0.5]), (ints(2, 5),)),
    OpCase("num_convolve_full", np.convolve, (floats(7), floats(3, dtype=np.float64))),
    OpCase("num_convolve_same_longer_second", lambda a, v: np.convolve(a, v, "same"), (floats(3), floats(5))),
    OpCase("num_convolve_valid_strided", lambda a, v: np.convolve(a, v, "valid"), (floats(13)[::-2], floats(2))),
    OpCase("num_correlate_valid", np.correlate, (floats(11, dtype=np.float64), floats(4)[::-1])),
    OpCase("num_correlate_same_swapped", lambda a, v: np.correlate(a, v, "same"), (floats(4), floats(7))),
    OpCase("num_correlate_full_int", lambda a, v: np.correlate(a, v, mode=2), (ints(11), ints(4, dtype=np.int64))),
    OpCase(
        "num_convolve_uint8_wraps",
        np.convolve,
        (ints(5, dtype=np.uint8, low=0, high=250), ints(3, dtype=np.uint8, low=0, high=250)),
    ),
    OpCase("num_correlate_bool", lambda a, v: np.correlate(a, v, "full"), (bools(5), bools(2))),
    OpCase("num_trapezoid", np.trapezoid, (floats(5, 7),)),
    OpCase(
        "num_trapezoid_x_axis0", lambda y, x: np.trapezoid(y, x, axis=0), (floats(7, 3, dtype=np.float64), floats(7))
    ),
    OpCase("num_trapezoid_int_dx", lambda y: np.trapezoid(y, dx=0.5, axis=0), (ints(5, 2),)),
    OpCase("num_polyval_traced", np.polyval, (floats(4, dtype=np.float64), floats(2, 5))),
    OpCase("num_polyval_constant_p", lambda x: np.polyval([0.5, -1.0, 0.0, 2.0], x), (floats(3, 1)[::-1],)),
    OpCase("num_polyval_int", lambda x: np.polyval(np.array([2, -1, 3]), x), (ints(6, dtype=np.int64),)),
    OpCase("num_sinc", np.sinc, (np.array([0.0, -0.75, 0.5, 1.25, -2.2, 3.3, 0.1]),)),
    OpCase("num_sinc_f32", np.sinc, (floats(3, 5),)),
    OpCase("num_sinc_int", np.sinc, (ints(7),)),
    OpCase("num_i0", np.i0, (np.array([-9.5, -3.0, 0.5, 2.0, 7.5, 8.5, 10.5, -0.25]),)),
    OpCase("num_i0_f32", np.i0, (floats(2, 7) * 5,)),
    OpCase("num_i0_int", np.i0, (ints(5),)),
    OpCase("num_unwrap", np.unwrap, (np.cumsum(floats(3, 11, dtype=np.float64) * 2.5, axis=1),)),
    OpCase(
        "num_unwrap_axis0_discont_f32",
        lambda p: np.unwrap(p, discont=4.0, axis=0, period=5.0),
        (np.cumsum(floats(7, 2) * 2.0, axis=0),),
    ),
    OpCase("num_unwrap_int_period", lambda p: np.unwrap(p, period=8), (ints(11),)),
    OpCase("num_angle", np.angle, (floats(13, dtype=np.float64) + 0.5,)),
    OpCase("num_angle_int_deg", lambda z: np.angle(z, deg=True), (ints(7),)),
    OpCase("num_lexsort", lambda a, b: np.lexsort((a, b)), (floats(13), ints(13, low=0, high=3))),
    OpCase(
        "num_lexsort_three_uint8",
        lambda a, b, c: np.lexsort((a, b, c)),
        tuple(ints(11, dtype=np.uint8, low=0, high=2) for _ in range(3)),
    ),
    OpCase("num_lexsort_axis0_bool", lambda a, b: np.lexsort((a, b), axis=0), (bools(5, 3), bools(5, 3))),
    OpCase("num_array_equal", lambda a: np.array_equal(a, np.abs(a)), (ints(3, 4, low=0, high=5),)),
    OpCase("num_array_equal_nan", lambda a, b: np.array_equal(a, b, equal_nan=True), (floats(5), floats(5))),
    OpCase(
        "num_array_equiv", lambda a, b: np.array_equiv(a, b), (ints(1, 4, low=0, high=2), ints(3, 4, low=0, high=2))
    ),
    OpCase("num_piecewise", _piecewise_three, (np.array([-2.0, -0.9, 0.1, 0.3, 1.5, 2.5, -1.3]),)),
    OpCase(
        "num_piecewise_otherwise_f32",
        lambda x: np.piecewise(x, [x > 0.2], [np.sin, lambda v: v * 3]),
        (floats(3, 5),),
    ),
    OpCase("num_piecewise_int", lambda x: np.piecewise(x, [x < 0, x > 5], [lambda v: v * 1.5, 7]), (ints(13),)),
    OpCase("num_histogram_counts", lambda a: np.histogram(a)[0], (floats(13, dtype=np.float64),)),
    OpCase("num_histogram_range_f32", lambda a: np.histogram(a, 5, range=(-1, 1.5))[0], (floats(4, 7),)),
    OpCase("num_histogram_int_edges", lambda a: np.histogram(a, [-20, -3, 0, 4, 19])[0], (ints(11),)),
    OpCase(
        "num_histogram_weights",
        lambda a, w: np.histogram(a, 4, range=(-3.0, 3.0), weights=w)[0],
        (np.array([-2.9, -1.1, 0.3, 0.4, 1.6, 2.2, -0.7]), floats(7)),
    ),
    OpCase("num_histogram_density", lambda a: np.histogram(a, 3, range=(-2, 2), density=True)[0], (floats(11),)),
    OpCase("num_histogram_edges_traced", lambda a: np.histogram(a, 6)[1], (floats(13),)),
    OpCase("num_histogram_bin_edges_int", lambda a: np.histogram_bin_edges(a, 4), (ints(7),)),
    OpCase("num_cov", np.cov, (floats(3, 7, dtype=np.float64),)),
    OpCase("num_cov_columns_f32", lambda m: np.cov(m, rowvar=False), (floats(7, 2),)),
    OpCase("num_cov_y_bias", lambda m, y: np.cov(m, y, bias=True), (floats(5, dtype=np.float64), floats(5))),
    OpCase("num_cov_int_ddof", lambda m: np.cov(m, ddof=0), (ints(2, 6),)),
    OpCase("num_corrcoef", np.corrcoef, (floats(4, 6, dtype=np.float64),)),
    OpCase("num_corrcoef_columns_y", lambda x, y: np.corrcoef(x, y, rowvar=False), (floats(5, 2), floats(5))),
]
NUMERIC_NO_GRADIENT: list = [
    "num_interp_int_x",
    "num_correlate_full_int",
    "num_convolve_uint8_wraps",
    "num_correlate_bool",
    "num_trapezoid_int_dx",
    "num_polyval_int",
    "num_sinc_int",
    "num_i0_int",
    "num_unwrap_int_period",
    "num_angle_int_deg",
    "num_lexsort",
    "num_lexsort_three_uint8",
    "num_lexsort_axis0_bool",
    "num_array_equal",
    "num_array_equal_nan",
    "num_array_equiv",
    "num_piecewise_int",
    "num_histogram_counts",
    "num_histogram_range_f32",
    "num_histogram_int_edges",
    "num_histogram_bin_edges_int",
    "num_cov_int_ddof",
]
CASES += NUMERIC_CASES


# -- bit-level and integer ufuncs, ufunc keywords and methods: gcd, frexp, view, reduceat --
# (cases are named "bits_..."; BITS_NO_GRADIENT lists those with no float input or output)
# Floats whose bits numpy treats specially, in each width: signed zeros, infinities, NaN, the
# smallest normal and subnormals, the largest finite value; results of bit-level functions are
# compared as bits (viewed as integers), which also keeps them out of the gradient table.
def _special_floats(dtype):
    info = np.finfo(dtype)
    values = [0.0, -0.0, 1.0, -0.75, 3.0, np.inf, -np.inf, np.nan, info.tiny, info.tiny / 4, -info.smallest_subnormal]
    return np.array(values + [info.max, -info.max], dtype)


BITS_F16, BITS_F32, BITS_F64 = (_special_floats(t) for t in (np.float16, np.float32, np.float64))
BITS_EXPONENTS = np.array([0, 1, -1, 5, -20, 10000, -10000, 2**31 - 1, -(2**31), 300, -1100, 3, -30], np.int32)
WITH_NAN = floats(5, 7)
WITH_NAN[1, ::2] = np.nan
WITH_NAN[3, :] = np.nan  # an all-NaN row: only along axis 0 here, where every column has a number
WITH_NAN[3, 2] = 0.5
_FIB_A = np.array([0, 0, 12, 2**31 - 1, -(2**31), 1, 1836311903, -(2**31), 7, -4], np.int32)
_FIB_B = np.array([0, 5, -18, 2**31 - 2, 0, -(2**31), 1134903170, -(2**31), 7, 6], np.int32)

BITS_CASES: list = [
    # ndarray.view(dtype): the same bytes read as another dtype
    OpCase("bits_view_f32_as_i32_reversed", lambda x: x[::-1].view(np.int32), (BITS_F32,)),
    OpCase("bits_view_f16_as_u16", lambda x: x.view(np.uint16), (BITS_F16,)),
    OpCase("bits_view_f64_sign_flip", lambda x: x.view(np.uint64) ^ np.uint64(2**63), (BITS_F64,)),
    OpCase("bits_view_i64_as_f64", lambda x: x.view(np.float64) * 2, (ints(3, 4, dtype=np.int64) << 52,)),
    OpCase("bits_view_i32_as_f32_strided", lambda x: x[:, ::2].view(np.float32), (ints(3, 7) << 23,)),
    OpCase("bits_view_f32_as_u8_bytes", lambda x: x.view(np.uint8), (floats(3, 5),)),
    OpCase("bits_view_u8_as_f32_join", lambda x: x.view(np.float32), (ints(2, 8, dtype=np.uint8, low=0, high=255),)),
    OpCase("bits_view_f64_as_i16", lambda x: x.view(np.int16), (BITS_F64[:5],)),
    # frexp, ldexp, nextafter, spacing: exact on every special value
    OpCase("bits_frexp_mantissa", lambda x: np.frexp(x)[0], (floats(7, dtype=np.float64) * 100,)),
    OpCase("bits_frexp_exponent_f32", lambda x: np.frexp(x)[1], (BITS_F32,)),
    OpCase("bits_frexp_f64_bits", lambda x: np.frexp(x)[0].view(np.int64) + np.frexp(x)[1], (BITS_F64,)),
    OpCase("bits_frexp_f16_bits", lambda x: np.frexp(x)[0].view(np.int16), (BITS_F16,)),
    OpCase("bits_frexp_int", lambda x: np.frexp(x)[0] + np.frexp(x)[1], (INT_EXTREMES,)),
    OpCase("bits_ldexp", lambda x, n: np.ldexp(x, n), (floats(2, 5), ints(5, low=-20, high=20))),
    OpCase("bits_ldexp_f32_extremes", lambda x, n: np.ldexp(x, n).view(np.int32), (BITS_F32, BITS_EXPONENTS)),
    OpCase(
        "bits_ldexp_f64_extremes",
        lambda x, n: np.ldexp(x, n).view(np.int64),
        (BITS_F64, BITS_EXPONENTS.astype(np.int64) * 3),
    ),
    OpCase("bits_ldexp_f16_subnormal", lambda x, n: np.ldexp(x, n).view(np.uint16), (BITS_F16, BITS_EXPONENTS)),
    OpCase("bits_nextafter_f32", lambda x, y: np.nextafter(x, y).view(np.int32), (BITS_F32, BITS_F32[::-1])),
    OpCase(
        "bits_nextafter_f64_broadcast",
        lambda x, y: np.nextafter(x, y).view(np.int64),
        (floats(3, 1, dtype=np.float64), BITS_F64),
    ),
    OpCase("bits_nextafter_f16", lambda x, y: np.nextafter(x, y).view(np.int16), (BITS_F16, BITS_F16[::-1])),
    OpCase("bits_spacing_f32", lambda x: np.spacing(x).view(np.int32), (BITS_F32,)),
    OpCase(
        "bits_spacing_f64_f16",
        lambda x, h: np.spacing(x).view(np.int64)[:5] + np.spacing(h).view(np.int16)[:5],
        (BITS_F64, BITS_F16),
    ),
    # gcd and lcm: numpy's results for negative values, 0 and the minimum
    OpCase("bits_gcd_extremes", np.gcd, (INT_EXTREMES, INT_DIVISORS)),
    OpCase("bits_gcd_fibonacci_worst_case", np.gcd, (_FIB_A, _FIB_B)),
    OpCase("bits_lcm_wraps", np.lcm, (_FIB_A, _FIB_B)),
    OpCase("bits_lcm_int64_broadcast", np.lcm, (ints(3, 1, dtype=np.int64), ints(5, dtype=np.int64))),
    OpCase(
        "bits_gcd_uint8", np.gcd, (ints(11, dtype=np.uint8, low=0, high=255), ints(11, dtype=np.uint8, low=0, high=255))
    ),
    OpCase("bits_gcd_bool_int8", np.gcd, (bools(6), ints(6, dtype=np.int8))),
    OpCase("bits_bitwise_count_extremes", np.bitwise_count, (INT_EXTREMES[::-1],)),
    OpCase("bits_bitwise_count_uint64", np.bitwise_count, (ints(2, 3, dtype=np.uint64, low=0, high=2**62) * 3,)),
    # ufunc keywords dtype=, signature= (sig=) and casting=
    OpCase("bits_add_dtype_f64", lambda a, b: np.add(a, b, dtype=np.float64), (floats(3, 4), ints(4, dtype=np.int64))),
    OpCase("bits_sqrt_dtype_f64", lambda x: np.sqrt(x, dtype=np.float64), (positive(7, dtype=np.float32),)),
    OpCase(
        "bits_multiply_dtype_int_unsafe",
        lambda x: np.multiply(x, 3, dtype=np.int32, casting="unsafe"),
        (floats(6) * 10,),
    ),
    OpCase("bits_divide_sig", lambda a, b: np.true_divide(a, b, sig="ff->f"), (ints(5), ints(5, low=1))),
    OpCase("bits_modf_signature", lambda x: np.modf(x, signature=(None, "f8", "f8"))[0], (floats(5) * 3,)),
    # ufunc.reduceat with constant indices
    OpCase("bits_add_reduceat", lambda x: np.add.reduceat(x, [0, 3, 1, 6]), (floats(7, 4),)),
    OpCase(
        "bits_maximum_reduceat_axis1",
        lambda x: np.maximum.reduceat(x[:, ::-1], [0, 5, 5, 10], axis=1),
        (floats(3, 11),),
    ),
    OpCase("bits_multiply_reduceat_int", lambda x: np.multiply.reduceat(x, [2, 0, 4], axis=-1), (ints(2, 5),)),
    OpCase("bits_minimum_reduceat_dtype", lambda x: np.minimum.reduceat(x, [1, 2], dtype=np.float64), (floats(4, 3),)),
    OpCase("bits_logical_or_reduceat", lambda x: np.logical_or.reduceat(x, [0, 2, 3]), (bools(5, 2),)),
    # nanargmax / nanargmin, cumulative_sum / cumulative_prod
    OpCase("bits_nanargmax_axis0", lambda x: np.nanargmax(x, axis=0), (WITH_NAN,)),
    OpCase("bits_nanargmin_flat_keepdims", lambda x: np.nanargmin(x, keepdims=True), (WITH_NAN[:, ::-1],)),
    OpCase("bits_nanargmax_int", lambda x: np.nanargmax(x, axis=1), (ints(3, 5),)),
    OpCase(
        "bits_cumulative_sum_initial", lambda x: np.cumulative_sum(x, axis=1, include_initial=True), (floats(3, 5),)
    ),
    OpCase("bits_cumulative_prod_1d", lambda x: np.cumulative_prod(x[::-1]), (floats(7, dtype=np.float64),)),
    OpCase(
        "bits_cumulative_sum_int8_initial",
        lambda x: np.cumulative_sum(x, include_initial=True),
        (ints(9, dtype=np.int8),),
    ),
]
BITS_NO_GRADIENT: list = [
    c.name
    for c in BITS_CASES
    if c.name
    not in (
        "bits_frexp_mantissa",
        "bits_ldexp",
        "bits_add_dtype_f64",
        "bits_sqrt_dtype_f64",
        "bits_modf_signature",
        "bits_add_reduceat",
        "bits_maximum_reduceat_axis1",
        "bits_minimum_reduceat_dtype",
        "bits_cumulative_sum_initial",
        "bits_cumulative_prod_1d",
    )
]
CASES += BITS_CASES
