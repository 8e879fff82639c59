"""Reductions, scans and ufunc methods beyond the op table: numpy's values on edge inputs, every
scan length, the errors numpy raises, and gradients that stay finite where a mask leaves out a
NaN."""

import warnings

import numpy as np
import pytest
from test_ops import assert_same

import kiln

rng = np.random.default_rng(2015)


def numpy_and_kiln(fn, *args, target="interpret"):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # numpy warns on all-NaN slices; kiln cannot, it gives the same NaN
        return fn(*args), kiln.compile(fn, target=target)(*args)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 13, 31, 64, 65])
def test_integer_scans_are_exact_at_every_length(n):
    a = rng.integers(-(2**62), 2**62, (2, n))
    b = rng.integers(-(2**31), 2**31 - 1, (n, 3)).astype(np.int32)
    for fn, args in (
        (lambda a: np.cumsum(a, axis=1), (a,)),  # wraps around exactly as numpy's loop does
        (lambda a: np.cumprod(a, axis=1), (a,)),
        (lambda b: np.cumsum(b, axis=0, dtype=np.int32), (b,)),
        (lambda b: np.maximum.accumulate(b, axis=0), (b,)),
        (lambda b: np.minimum.accumulate(b, axis=0), (b,)),
    ):
        want, got = numpy_and_kiln(fn, *args)
        assert_same(got, want)


@pytest.mark.parametrize("target", ["interpret", "cpu"])
def test_float_scans_and_nan_reductions_on_special_values(target):
    x = np.array(
        [[1.0, np.nan, -np.inf, 2.0, np.inf], [np.nan, np.nan, np.nan, np.nan, np.nan], [-0.0, 0.0, 3.0, -1.0, 0.5]]
    )
    for fn in (
        lambda x: np.cumsum(x, axis=1),
        lambda x: np.nancumsum(x, axis=1),
        lambda x: np.nancumprod(x, axis=1),
        lambda x: np.maximum.accumulate(x, axis=1),
        lambda x: np.nanmax(x, axis=1),  # the all-NaN row is NaN, as numpy's
        lambda x: np.nanmin(x, axis=0),
        lambda x: np.nansum(x, axis=1),
        lambda x: np.nanmean(x, axis=1),
        lambda x: np.nanvar(x, axis=1),
        lambda x: np.nanstd(x, axis=0, ddof=1),  # fewer than ddof + 1 numbers: NaN
        lambda x: np.ptp(x, axis=1),
        lambda x: np.count_nonzero(x, axis=1),
    ):
        want, got = numpy_and_kiln(fn, x, target=target)
        assert_same(got, want)


def test_reductions_with_initial_and_where_match_numpy():
    x = rng.standard_normal((4, 6))
    a = rng.integers(-5, 5, (4, 6)).astype(np.int32)
    mask = rng.random((4, 6)) < 0.5
    row_mask = np.array([True, False, True, True, False, True])  # broadcast along the rows
    for fn, args in (
        (lambda x, m: np.sum(x, axis=0, where=m, initial=1.5), (x, mask)),
        (lambda x: np.sum(x, where=row_mask, keepdims=True), (x,)),
        (lambda a, m: np.prod(a, axis=1, where=m, initial=-2), (a, mask)),
        (lambda a, m: np.max(a, axis=1, where=m, initial=-100), (a, mask)),
        (lambda x: np.min(x[:, :0], axis=1, initial=np.inf), (x,)),
        (lambda a, m: np.all(a > -3, axis=0, where=m), (a, mask)),
        (lambda x: np.mean(x, axis=1, where=row_mask), (x,)),
        (lambda x: np.var(x, axis=0, where=x > -0.5), (x,)),
        (lambda x: np.std(x, axis=1, mean=np.mean(x, axis=1, keepdims=True), ddof=1), (x,)),
        (lambda x: np.add.reduce(x, axis=(0, 1), where=row_mask), (x,)),
        (lambda a: np.logical_or.reduce(a, axis=1, keepdims=True), (a,)),
        (lambda a: np.multiply.reduce(a, axis=None, initial=3), (a,)),
        (lambda x: np.logical_and.reduce(x > 0, axis=1, initial=True), (x,)),
        (lambda x: np.logical_or.reduce(x[:, :0], axis=1, initial=True), (x,)),
    ):
        want, got = numpy_and_kiln(fn, *args)
        assert_same(got, want)


def test_argmax_and_argmin_take_the_first_extreme_or_nan():
    x = np.array([[0.0, -0.0, np.nan, np.nan], [-np.inf, 2.0, 2.0, -np.inf], [1.0, np.inf, np.inf, 0.0]])
    a = np.array([[3, -(2**31), 3, -(2**31)], [0, 0, 0, 0], [2**31 - 1, 5, 2**31 - 1, 5]], np.int32)
    for fn, data in (
        (lambda x: (np.argmax(x, axis=1), np.argmin(x, axis=1), np.argmax(x, axis=0), np.argmin(x)), x),
        (lambda a: (np.argmax(a, axis=1), np.argmin(a, axis=1), np.argmax(a, axis=0, keepdims=True)), a),
    ):
        for got, want in zip(numpy_and_kiln(fn, data, target="cpu")[1], fn(data)):
            assert_same(got, want)


def test_average_weights_and_returned():
    x = rng.standard_normal((3, 5)).astype(np.float32)
    w1 = rng.random(5) + 0.1
    w2 = rng.random((3, 5)).astype(np.float32) + 0.1
    for fn, args in (
        (lambda x, w: np.average(x, axis=1, weights=w), (x, w1)),
        (lambda x, w: np.average(x, weights=w), (x, w2)),
        (lambda x, w: np.average(x, axis=0, weights=w, returned=True, keepdims=True)[1], (x, w2)),
        (lambda x: np.average(x, axis=(0, 1), returned=True)[1], (x,)),
        (lambda a, w: np.average(a, axis=1, weights=w), (x.astype(np.int32), w1)),
        (lambda x, w: np.average(x, axis=(1, 0), weights=w.T), (x, w2)),  # weights in the named axes' order
    ):
        want, got = numpy_and_kiln(fn, *args)
        assert_same(got, want)


def test_a_scan_is_one_op_in_the_ir_and_one_loop_nest():
    """cumsum over 1000 elements is one kiln.scan, lowered to one nest whose scan loop carries the
    running value: linear work, where the log-step network did ceil(log2 1000) = 10 passes."""
    lowered = kiln.compile(lambda x: np.cumsum(x, axis=1)).lower(kiln.f32[3, 1000])
    ops = [op.name for op in lowered.module("tensor").walk() if op.name.startswith("kiln.")]
    assert ops == ["kiln.scan"]
    assert lowered.kernel_count == 1


def test_errors_name_the_problem():
    x = np.ones((3, 4), np.float32)
    cases = (
        (lambda x: np.max(x, where=x > 0), kiln.ArgumentError, "needs initial="),
        (lambda x: np.max(x[:, :0], axis=1), kiln.ShapeError, "empty axis"),
        (lambda x: np.argmax(x[:0]), kiln.ShapeError, "empty axis"),
        (lambda x: np.argmin(x[:, :0], axis=1), kiln.ShapeError, "empty axis"),
        (lambda x: np.ptp(x[:0], axis=0), kiln.ShapeError, "empty axis"),
        (lambda x: np.sum(x, where=np.ones((2, 3, 4), bool)), kiln.ShapeError, "does not broadcast"),
        (lambda x: np.sum(x, where=np.ones(4, np.int32)), kiln.DTypeError, "bool mask"),
        (lambda x: np.var(x, ddof=1, correction=1), kiln.ArgumentError, "simultaneously"),
        (lambda x: np.cumsum(x, out=x), kiln.UnsupportedError, "out="),
        (lambda x: np.subtract.reduce(x), kiln.UnsupportedError, "np.subtract.reduce"),
        (lambda x: np.subtract.accumulate(x), kiln.UnsupportedError, "np.subtract.accumulate"),
        (lambda x: np.add.accumulate(x[0, 0]), kiln.ShapeError, "0-d"),
        (lambda x: np.add.accumulate(x, axis=None), kiln.ArgumentError, "axis=None"),
        (lambda x: np.average(x, weights=np.ones(4)), kiln.ArgumentError, "axis must be specified"),
        (lambda x: np.average(x, axis=0, weights=np.ones(4)), kiln.ShapeError, "must be consistent with shape of a"),
    )
    for fn, error, words in cases:
        with pytest.raises(error, match=words):
            kiln.compile(fn, target="interpret")(x)


def test_gradients_skip_what_a_mask_leaves_out():
    """A NaN that where= or the nan-functions leave out takes no part in the gradient (no 0 * NaN):
    d var / dx_i = 2 (x_i - mean) / n over the n elements taken, 0 elsewhere."""
    x = np.array([[1.0, np.nan, 4.0, 2.0], [0.5, 1.5, np.inf, 3.0]])
    taken = np.isfinite(x)
    n = taken.sum(axis=1, keepdims=True)
    mean = np.where(taken, x, 0).sum(axis=1, keepdims=True) / n
    want = np.where(taken, 2 * (np.where(taken, x, 0) - mean) / n, 0.0)
    got = kiln.grad(lambda x: np.sum(np.var(x, axis=1, where=np.isfinite(x))))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    got = kiln.grad(lambda x: np.sum(np.nanmean(x, axis=1)))(np.where(np.isinf(x), np.nan, x))
    np.testing.assert_allclose(got, np.where(taken, 1.0 / n, 0.0), rtol=1e-12)


def test_gradient_of_a_mean_over_a_traced_count():
    """np.nanvar(x, axis=1)'s gradient, reduced to plain numpy: the sum over a count of a mask."""

    def mean_over_count(x):
        count = np.sum(x < 3, axis=1)
        return np.sum(np.where(count > 0, np.sum(x, axis=1) / count, 0.0))

    x = np.array([[1.0, 0.3, 4.0, 2.0], [0.5, 1.5, 0.7, 3.0]])
    kiln.value_and_grad(mean_over_count)(x)
