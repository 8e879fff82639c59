"""Bit-level numpy: ndarray.view(dtype) (kiln.bitcast), frexp, ldexp, nextafter, spacing,
gcd and lcm; the ufunc keywords dtype=, signature= and casting=; ufunc.reduceat;
nanargmax / nanargmin and cumulative_sum / cumulative_prod. numpy is the oracle throughout:
floats are compared bit for bit, every float16 and every int8 pair exhaustively."""

import warnings

import numpy as np
import pytest

import kiln
from kiln.dialects import parse_ir, print_ir, verify

TARGETS = ["cpu", "interpret"]


def numpy_result(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def assert_bits(got, want):
    """Same dtype, shape and bytes (NaN payloads, signed zeros and all)."""
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert g.tobytes() == w.tobytes(), (g, w)


def check(fn, target, *args):
    assert_bits(kiln.compile(fn, target=target)(*args), numpy_result(fn, *args))


ALL_HALVES = np.arange(2**16, dtype=np.uint16).view(np.float16)


def _floats(dtype):
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.tiny, info.smallest_subnormal, info.max, -info.max]
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**info.bits - 1, 3000, dtype=np.uint64, endpoint=True)
    random = bits.astype({32: np.uint32, 64: np.uint64}[info.bits]).view(dtype)
    return np.concatenate([np.array(special, dtype), random])


# -- view ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "source, target_dtype",
    [
        (np.float32, np.int32),
        (np.float32, np.uint32),
        (np.float16, np.uint16),
        (np.float16, np.int16),
        (np.float64, np.int64),
        (np.float64, np.uint64),
        (np.int64, np.float64),
        (np.uint64, np.float64),
        (np.int32, np.uint32),
        (np.bool_, np.uint8),
    ],
)
def test_view_of_the_same_itemsize_reads_the_bits(source, target_dtype, target):
    values = ALL_HALVES if source is np.float16 else np.linspace(-3, 3, 13)
    x = np.asarray(values).astype(source) if source is not np.float16 else values
    check(lambda a: a.view(target_dtype), target, x)


def test_view_of_every_half_round_trips_exactly():
    assert_bits(kiln.compile(lambda h: h.view(np.int16).view(np.float16))(ALL_HALVES), ALL_HALVES)


@pytest.mark.parametrize("target", TARGETS)
def test_view_to_another_itemsize_splits_and_joins_the_last_axis_little_endian(target):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    check(lambda a: a.view(np.uint8), target, x)
    check(lambda a: a.view(np.float64), target, x)
    check(lambda a: a.view(np.int16).view(np.float32), target, x)
    check(lambda a: a.view(np.int64) + 1, target, x)


def test_view_is_a_view_both_ways():
    def f(x):
        y = x * 1
        bits = y.view(np.int32)
        bits[0] = 0  # writes y: +0.0
        y[1] = -0.0  # shows in bits
        return y, bits

    x = np.array([1.5, 2.5, 3.5], np.float32)
    assert_bits(kiln.compile(f)(x), f(x))


def test_view_refusals_are_numpys():
    with pytest.raises(kiln.ShapeError, match="0d array is only supported if the itemsize is unchanged"):
        kiln.compile(lambda x: x[0].view(np.int16))(np.ones(3, np.float32))
    with pytest.raises(kiln.ShapeError, match="must be a divisor of the total size in bytes of the last axis"):
        kiln.compile(lambda x: x.view(np.float64))(np.ones(3, np.float32))
    with pytest.raises(kiln.ShapeError, match="the last axis must be contiguous"):
        kiln.compile(lambda x: x[:, ::2].view(np.int16))(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError):  # ShapeError is numpy's ValueError
        kiln.compile(lambda x: x.view(np.float64))(np.ones(3, np.float32))


def test_bitcast_in_every_ir_stage_and_the_ir_round_trips():
    lowered = kiln.compile(lambda x: x.view(np.int32) + 1).lower(kiln.f32[4])
    assert "kiln.bitcast %x : (tensor<4xf32>) -> tensor<4xi32>" in lowered.text("tensor", locations=False)
    assert "arith.bitcast %1 : f32 to i32" in lowered.text("affine", locations=False)
    module = lowered.module("tensor")
    again = parse_ir(print_ir(module))
    verify(again)
    assert print_ir(again) == print_ir(module)


def test_bitcast_verifier_wants_equal_widths():
    text = """
    func.func @f(%x: tensor<4xf32>) -> tensor<4xi64> {
      %0 = kiln.bitcast %x : (tensor<4xf32>) -> tensor<4xi64>
      func.return %0 : tensor<4xi64>
    }
    """
    with pytest.raises(kiln.KilnError, match="must keep the bit width"):
        verify(parse_ir(text))


def test_constant_bitcast_folds_to_the_bits():
    def f(x):
        return (np.zeros_like(x) - 1).view(np.int32) + x.view(np.int32)

    optimized = kiln.compile(f).lower(kiln.f32[2]).text("optimized", locations=False)
    assert optimized.count("kiln.bitcast") == 1  # x's; -1.0's bits are a constant
    assert "-1082130432" in optimized
    x = np.array([0.5, -0.0], np.float32)
    assert_bits(kiln.compile(f)(x), f(x))


# -- frexp, ldexp, nextafter, spacing ----------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_frexp_of_every_half_and_of_wide_floats(target):
    check(np.frexp, target, ALL_HALVES)
    check(np.frexp, target, _floats(np.float32))
    check(np.frexp, target, _floats(np.float64))


def test_frexp_of_integers_and_bools_computes_in_numpys_float():
    check(np.frexp, "cpu", np.array([0, 3, -4, 2**31 - 1, -(2**31)], np.int32))
    check(np.frexp, "cpu", np.array([True, False]))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ldexp_is_exact_into_the_subnormals_and_past_overflow(dtype, target):
    x = ALL_HALVES if dtype is np.float16 else _floats(dtype)
    rng = np.random.default_rng(1)
    n = rng.integers(-2300, 2300, x.size).astype(np.int32)
    n[::3] = rng.integers(-60, 60, n[::3].size)
    n[1::7] = rng.choice([2**31 - 1, -(2**31), 1074, -1074, 1100, -1100], n[1::7].size)
    check(np.ldexp, target, x, n)
    check(np.ldexp, target, x, n.astype(np.int64) * 2**33)  # far outside int32 too


def test_ldexp_of_integers_and_python_exponents():
    check(lambda x: np.ldexp(x, 3), "cpu", np.array([1, -5, 0], np.int32))
    check(lambda x: np.ldexp(x, -1030), "cpu", np.array([1.0, 3.0, -0.0]))


@pytest.mark.parametrize("target", TARGETS)
def test_nextafter_of_every_half_in_both_directions(target):
    rolled = np.roll(ALL_HALVES, 12345)
    check(np.nextafter, target, ALL_HALVES, rolled)
    check(np.nextafter, target, ALL_HALVES, np.full_like(ALL_HALVES, np.inf))
    check(np.nextafter, target, ALL_HALVES, np.full_like(ALL_HALVES, -np.inf))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nextafter_and_spacing_of_wide_floats(dtype, target):
    x = _floats(dtype)
    check(np.nextafter, target, x, np.roll(x, 7))
    check(np.nextafter, target, x, x)  # equal: y itself, so -0.0 toward 0.0 is 0.0
    check(np.nextafter, target, np.array([0.0, -0.0], dtype), np.array([-0.0, 0.0], dtype))
    check(np.spacing, target, x)


def test_spacing_of_every_half_steps_toward_plus_infinity_as_numpys_half_loop():
    check(np.spacing, "cpu", ALL_HALVES)


def test_frexp_mantissa_and_ldexp_have_their_gradients_and_steps_have_none():
    x = np.array([0.3, -5.0, 17.0, 1e-3])
    grad = kiln.grad(lambda v: np.sum(np.frexp(v)[0]))(x)
    np.testing.assert_allclose(grad, 2.0 ** -np.frexp(x)[1], rtol=1e-12)
    grad = kiln.grad(lambda v: np.sum(np.ldexp(v, np.array([3, -2, 0, 10], np.int32))))(x)
    np.testing.assert_allclose(grad, [8.0, 0.25, 1.0, 1024.0], rtol=1e-12)
    for step in (lambda v: np.nextafter(v, np.inf), np.spacing):
        assert np.all(kiln.grad(lambda v, f=step: np.sum(f(v) * 3.0))(x) == 0)


# -- gcd and lcm ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [np.gcd, np.lcm])
def test_gcd_and_lcm_of_every_int8_pair(fn):
    a, b = (v.ravel() for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    check(fn, "cpu", a.astype(np.int8), b.astype(np.int8))
    check(fn, "cpu", (a + 128).astype(np.uint8), (b + 128).astype(np.uint8))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64, np.uint32, np.uint64])
def test_gcd_and_lcm_at_the_extremes_and_on_fibonacci_pairs(dtype, target):
    info = np.iinfo(dtype)
    fib = [1, 2]
    while fib[-1] + fib[-2] <= info.max:
        fib.append(fib[-1] + fib[-2])
    a = [0, 0, info.max, info.min, info.min, fib[-1], fib[-2], 12, info.max - 1, 1]
    b = [0, 7, info.max - 1, 0, info.min, fib[-2], fib[-1], 18, info.max, info.min]
    rng = np.random.default_rng(2)
    a = np.concatenate([np.array(a, dtype), rng.integers(info.min, info.max, 500, dtype=dtype, endpoint=True)])
    b = np.concatenate([np.array(b, dtype), rng.integers(info.min, info.max, 500, dtype=dtype, endpoint=True)])
    check(np.gcd, target, a, b)
    check(np.lcm, target, a, b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.bool_])
def test_bitwise_count_counts_the_bits_of_the_magnitude(dtype, target):
    if dtype is np.bool_:
        x = np.array([True, False])
    else:
        info = np.iinfo(dtype)
        rng = np.random.default_rng(3)
        x = np.concatenate([np.array([0, 1, info.min, info.max], dtype), rng.integers(info.min, info.max, 300, dtype)])
    check(np.bitwise_count, target, x)


def test_gcd_refuses_floats_as_numpy_does():
    with pytest.raises(kiln.DTypeError, match="np.gcd"):
        kiln.compile(np.gcd)(np.ones(2), np.ones(2))


# -- ufunc keywords -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, fn",
    [
        ("dtype", lambda a, i: np.add(a, 1, dtype=np.float32)),
        ("dtype_unsafe", lambda a, i: np.add(a, 1.7, dtype=np.int16, casting="unsafe")),
        ("dtype_bool_compare", lambda a, i: np.less(a, i, dtype=bool)),
        ("dtype_two_outputs", lambda a, i: np.modf(a, dtype=np.float32)),
        ("sig_string", lambda a, i: np.multiply(i, i, sig="dd->d")),
        ("signature_string", lambda a, i: np.multiply(a, a, signature="ff->f")),
        ("signature_tuple", lambda a, i: np.subtract(i, 2, signature=(None, None, np.float32))),
        ("casting_no", lambda a, i: np.add(a, a, casting="no")),
        ("casting_safe", lambda a, i: np.add(i, 1.5, casting="safe")),
        ("outer_dtype", lambda a, i: np.multiply.outer(a, i, dtype=np.float32)),
        ("out_unsafe", lambda a, i: np.add(i * 0, a, out=i * 0, casting="unsafe")),
    ],
)
def test_ufunc_dtype_signature_and_casting_resolve_as_numpy(name, fn):
    a = np.array([1.5, -2.75, 3.25, 1e10])
    i = np.array([1, -2, 300, 7], np.int64)
    check(fn, "cpu", a, i)


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda a: np.add(a, 1, dtype=np.int32), r"Cannot cast ufunc 'add' input 0 .* 'same_kind'"),
        (lambda a: np.add(a, a.astype(np.float32), casting="no"), r"casting rule 'no'"),
        (lambda a: np.add(a, 1, dtype="U3"), r"np.add\(dtype=...\)"),
    ],
)
def test_ufunc_keyword_refusals_are_numpys(fn, message):
    with pytest.raises(kiln.DTypeError, match=message):
        kiln.compile(fn)(np.ones(3))


def test_an_unknown_casting_rule_is_named_with_numpys_words():
    with pytest.raises(kiln.ArgumentError, match=r"casting must be one of .* \(got 'bogus'\)"):
        kiln.compile(lambda a: np.add(a, 1, casting="bogus"))(np.ones(3))


# -- reduceat -----------------------------------------------------------------------------------------
REDUCEAT = [
    (np.add, [0, 3, 1, 4], 0, None),
    (np.add, [0, 3, 1, 6, 6], 1, None),
    (np.add, [2, 2, 2], -1, np.float64),
    (np.multiply, [1, 0], 0, None),
    (np.maximum, [4, 0, 2], 1, None),
    (np.minimum, [0], 0, None),
    (np.logical_and, [0, 2], 1, None),
    (np.logical_or, [3, 1, 2], 0, None),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("ufunc, indices, axis, result_dtype", REDUCEAT)
def test_reduceat_follows_numpys_rule_for_each_segment(ufunc, indices, axis, result_dtype, dtype, target):
    x = (np.arange(35).reshape(5, 7) % 6 - 1).astype(dtype)
    if dtype is np.float32:
        x[1, 1] = np.nan

    def f(a):
        return ufunc.reduceat(a, indices, axis=axis, dtype=result_dtype)

    try:
        want = numpy_result(f, x)
    except TypeError:  # numpy has no such loop (bool to float64 is fine, logical on uint8 too)
        with pytest.raises(kiln.KilnError):
            kiln.compile(f, target=target)(x)
        return
    assert_bits(kiln.compile(f, target=target)(x), want)


def test_reduceat_takes_its_arguments_as_numpy_does():
    x = np.arange(12.0).reshape(3, 4)
    check(lambda a: np.add.reduceat(a, indices=np.array([0, 2], np.uint8), axis=1), "cpu", x)
    check(lambda a: np.add.reduceat(a[0], [0, 2], None), "cpu", x)
    check(lambda a: np.add.reduceat(a, []), "cpu", x)


def test_reduceat_refusals():
    x = np.arange(5.0)
    with pytest.raises(kiln.OutOfBoundsError, match=r"index 5 out-of-bounds in add.reduceat \[0, 5\)"):
        kiln.compile(lambda a: np.add.reduceat(a, [0, 5]))(x)
    with pytest.raises(IndexError, match=r"index -1 out-of-bounds"):
        kiln.compile(lambda a: np.add.reduceat(a, [-1]))(x)
    with pytest.raises(kiln.UnsupportedError, match="traced indices"):
        kiln.compile(lambda a, i: np.add.reduceat(a, i))(x, np.array([0, 2]))
    with pytest.raises(kiln.UnsupportedError, match=r"np.subtract.reduceat is not supported"):
        kiln.compile(lambda a: np.subtract.reduceat(a, [0, 2]))(x)
    with pytest.raises(kiln.ArgumentError, match="cannot reduceat on a scalar"):
        kiln.compile(lambda a: np.add.reduceat(a[0], [0]))(x)


# -- nanargmax, nanargmin, cumulative_sum, cumulative_prod ---------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", [np.nanargmax, np.nanargmin])
def test_nanarg_extremes_skip_nan_and_tie_it_with_infinities_as_numpy(fn, target):
    x = np.array([[np.nan, 1.0, -np.inf, 3.0], [2.0, np.nan, 2.0, np.inf], [np.nan, -np.inf, 5.0, np.nan]])
    for axis in (None, 0, 1, -1):
        check(lambda a, ax=axis: fn(a, axis=ax), target, x)
        check(lambda a, ax=axis: fn(a, axis=ax, keepdims=True), target, x.astype(np.float32))
    check(lambda a: fn(a, axis=0), target, np.array([[3, 1], [3, 7]], np.int8))


def test_an_all_nan_slice_gives_minus_one_where_numpy_raises():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        np.nanargmax(x, axis=1)
    assert kiln.compile(lambda a: np.nanargmax(a, axis=1))(x).tolist() == [-1, 0]
    assert kiln.compile(lambda a: np.nanargmin(a[0]))(x) == -1


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", [np.cumulative_sum, np.cumulative_prod])
def test_cumulative_sum_and_prod_with_and_without_the_initial_value(fn, target):
    x = np.arange(1, 13, dtype=np.int16).reshape(3, 4) % 5
    for kwargs in ({"axis": 0}, {"axis": -1, "include_initial": True}, {"axis": 1, "dtype": np.float32}):
        check(lambda a, kw=kwargs: fn(a, **kw), target, x)
    check(lambda a: fn(a[0], include_initial=True), target, x.astype(np.float64))
    check(lambda a: fn(a[0, 0], include_initial=True), target, x)  # 0-d reads as 1-d
    check(lambda a: fn(a > 2, axis=1), target, x)
    check(lambda a: fn(a[:, :0], axis=1, include_initial=True), target, x)


def test_cumulative_sum_needs_an_axis_for_more_than_one_dimension():
    with pytest.raises(kiln.ShapeError, match="``axis`` argument is required"):
        kiln.compile(np.cumulative_sum)(np.ones((2, 3)))
    with pytest.raises(kiln.UnsupportedError, match="out="):
        kiln.compile(lambda a: np.cumulative_sum(a, out=a))(np.ones(3))
