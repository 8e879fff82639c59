"""numpy's small and unsigned integers and float16, bit for bit against numpy on every target.

The op table (op_table.py, DT_CASES) runs the ordinary cases through every test of the table;
here are the edges it cannot hold: infinities and NaN in float16 (no finite-difference
gradient exists there), conversions that round, numpy's promotion between the new dtypes,
and the dtypes reductions accumulate in.
"""

import warnings

import numpy as np
import pytest
from targets import NEEDS_CXX

import kiln

TARGETS = ["cpu", "interpret", pytest.param("cuda-emulate", marks=NEEDS_CXX)]
INTEGERS = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64]
HALF_EDGES = np.array(
    [0.0, -0.0, 1.0, 65504.0, -65504.0, 6e-8, -6e-8, np.inf, -np.inf, np.nan, 0.1, 2049.0, 65519.0], np.float16
)


def numpy_result(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def assert_bits_equal(got, want):
    """Same dtype and shape, and the same bits (every NaN counts as equal to every NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        bits = np.dtype(f"u{want.dtype.itemsize}")
        np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))
    else:
        np.testing.assert_array_equal(got, want)


def check(fn, target, *args):
    results = kiln.compile(fn, target=target)(*args)
    wants = numpy_result(fn, *args)
    for got, want in zip(results, wants) if isinstance(wants, tuple) else [(results, wants)]:
        assert_bits_equal(got, want)


@pytest.mark.parametrize("target", TARGETS)
def test_float16_arithmetic_rounds_each_op_and_keeps_its_specials(target):
    x, y = HALF_EDGES, HALF_EDGES[::-1].copy()
    check(
        lambda x, y: (x + y, x * y, x / y, x - y * np.float16(3), -x, np.abs(x), np.maximum(x, y), x > y, x == y),
        target,
        x,
        y,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_float16_overflows_to_inf_and_underflows_to_subnormals_as_numpy(target):
    x = np.array([65504.0, 32768.0, 2.0**-14, 2.0**-24, 3 * 2.0**-25, 1000.0], np.float16)
    check(lambda x: (x * np.float16(2), x * np.float16(0.5), x / np.float16(3), x * x), target, x)


@pytest.mark.parametrize("target", TARGETS)
def test_conversions_to_float16_round_once(target):
    """float64 to float16 rounds once (through float32 it would round twice, differently for
    values just past a half-way point); integers past 65519 become inf."""
    halfway = np.float64(1 + 2.0**-11)  # between 1 and the next float16
    d = np.array([halfway + 2.0**-40, halfway - 2.0**-40, halfway, 65519.99, 65520.0, -1e300, 5.9e-8, np.nan])
    ints = np.array([0, 2049, -2051, 65519, 65520, 2**31 - 1], np.int32)
    big = np.array([0, 1, 2**63, 2**64 - 1], np.uint64)
    check(lambda d, i, u: (d.astype(np.float16), d.astype(np.float32).astype(np.float16), i.astype(np.float16),
                           u.astype(np.float16)), target, d, ints, big)  # fmt: skip


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", INTEGERS)
def test_float_to_integer_conversions_in_range(target, dtype):
    info = np.iinfo(dtype)
    top = float(info.max) if info.bits < 64 else 2.0**64 - 2.0**11  # the largest float64 below 2**64
    low = float(info.min)
    x = np.array([0.0, -0.0, 0.9, -0.9, 1.5, top, low, top * 0.5, 2.0**63 if info.bits == 64 else 3.0])
    if info.min == 0:
        x = np.abs(x)
    check(lambda x, d=dtype: (x.astype(d), x.astype(np.float32).astype(d), x.astype(np.float16).astype(d)), target, x)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_conversions_between_every_width(target, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 1, info.max // 3], dtype)
    fn = lambda x: tuple(x.astype(d) for d in INTEGERS + [np.int32, np.int64, np.bool_, np.float32, np.float64])  # noqa: E731
    check(fn, target, x)


@pytest.mark.parametrize("target", TARGETS)
def test_promotion_between_the_new_dtypes_is_numpys(target):
    u8 = np.array([200, 3, 255], np.uint8)
    i8 = np.array([-100, 5, 127], np.int8)
    u64 = np.array([2**64 - 1, 2**63, 1], np.uint64)
    i64 = np.array([-1, 2, 3], np.int64)
    h = np.array([1.5, -2.0, 65504.0], np.float16)
    f = np.array([1e-3, 3.0, 1e5], np.float32)
    check(
        lambda u8, i8, u64, i64, h, f: (u8 + i8, u64 + i64, u8 * 2, i8 + 100, h + f, h * 0.1, h + 1, u8 + h, i8 / 3),
        target,
        u8,
        i8,
        u64,
        i64,
        h,
        f,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_accumulate_in_numpys_dtypes(target):
    """sum and prod widen small integers to int64 and unsigned ones to uint64; float16 sums and
    means accumulate in float32 and round once."""
    u8 = np.arange(250, 256, dtype=np.uint8).repeat(40)
    i16 = np.array([-(2**15), 2**15 - 1, 7, -3], np.int16)
    h = np.full(5000, 0.1, np.float16)  # summed in float16 one by one this would stall at 256
    check(
        lambda u8, i16, h: (u8.sum(), u8.prod(), np.cumsum(u8)[-1], i16.sum(), i16.prod(), i16.max(), h.sum()),
        target,
        u8,
        i16,
        h,
    )
    np.testing.assert_allclose(kiln.compile(np.mean, target=target)(h), np.mean(h), rtol=1e-3)


@pytest.mark.parametrize("target", TARGETS)
def test_uint64_above_int64_compares_divides_and_shifts_unsigned(target):
    x = np.array([2**64 - 1, 2**63, 2**63 - 1, 0, 12345678901234567890], np.uint64)
    y = np.array([2, 2**63 + 1, 0, 7, 3], np.uint64)
    check(lambda x, y: (x > y, x // y, x % y, x >> np.uint64(3), np.maximum(x, y), x.max(), x.min(), np.sort(x)), target, x, y)  # fmt: skip


def test_float16_gradients_are_computed_in_float16_like_the_forward_pass():
    x = np.array([0.5, -1.25, 3.0, 100.0], np.float16)
    g = kiln.grad(lambda x: np.sum(x * x * np.float16(0.5)))(x)
    assert g.dtype == np.float16
    np.testing.assert_array_equal(g, x)


def test_specs_name_every_dtype():
    for spec, dtype in [(kiln.f16, np.float16), (kiln.i8, np.int8), (kiln.u64, np.uint64), (kiln.u8, np.uint8)]:
        assert spec[2, 3].dtype == dtype and repr(spec[2, 3]).startswith(repr(spec))
    text = kiln.compile(lambda x: x // 3).lower(kiln.u16[5]).text("affine")
    assert "memref<5xi16>" in text and "arith.divui" in text


@pytest.mark.parametrize("target", TARGETS)
def test_uint64_compares_with_int64_exactly_as_numpy(target):
    """numpy 2 compares uint64 with int64 exactly (no float64 rounding): 2**63 > -1."""
    a = np.array([2**63, 0, 5, 2**64 - 1, 2**63 - 1], np.uint64)
    b = np.array([-1, 0, 7, 2**63 - 1, -(2**63)], np.int64)
    check(lambda a, b: (a < b, a <= b, a == b, a != b, b > a, b >= a, a > b[0]), target, a, b)
