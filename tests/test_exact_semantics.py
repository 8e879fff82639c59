"""Exact semantics: rewrites and folding that keep signed zeros, NaN and infinities,
one answer for float-to-int casts out of range, and integer arithmetic that wraps
around as numpy's does, in every target. numpy is the oracle throughout."""

import platform
import re
import textwrap
import warnings

import numpy as np
import pytest
from targets import TARGETS

import kiln
from kiln.dialects import parse_ir, print_ir
from kiln.passes.registry import run_passes

# numpy's float-to-int cast of NaN and out-of-range values is the machine's conversion
# instruction; kiln's rule is x86-64's, so numpy is the oracle for it only there.
X86 = platform.machine().lower() in ("x86_64", "amd64")

SPECIAL = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 2.5, -1e-30], np.float64)


def quietly(fn, *args):
    """fn(*args) without numpy's overflow and division warnings (they are the point here)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def assert_same(got, expected):
    """Equal in value, sign of zero, NaN-ness and dtype; tuples element by element."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            try:
                assert_same(g, e)
            except AssertionError as error:
                raise AssertionError(f"result #{k}: {error}") from None
        return
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def check(fn, *args, target):
    """kiln's answer for fn(*args) on `target` is numpy's."""
    assert_same(quietly(kiln.compile(fn, target=target), *args), quietly(fn, *args))


def canonical(text):
    module = parse_ir(textwrap.dedent(text))
    return print_ir(run_passes(module, ["canonicalize"]), locations=False)


# -- rewrites -----------------------------------------------------------------------------------
def test_only_the_exact_additive_identities_are_removed():
    out = canonical("""
        func.func @f(%x: tensor<4xf32>, %n: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>) {
          %0 = kiln.constant dense<0.0> : tensor<f32>
          %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
          %2 = kiln.constant dense<-0.0> : tensor<f32>
          %3 = kiln.broadcast_to %2 : (tensor<f32>) -> tensor<4xf32>
          %4 = kiln.add %x, %1 : tensor<4xf32>
          %5 = kiln.add %3, %x : tensor<4xf32>
          %6 = kiln.sub %x, %1 : tensor<4xf32>
          %7 = kiln.sub %x, %3 : tensor<4xf32>
          %8 = kiln.constant dense<0> : tensor<4xi32>
          %9 = kiln.add %8, %n : tensor<4xi32>
          func.return %4, %5, %6, %7, %9 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>
        }""")
    # x + 0.0 and x - (-0.0) stay (they turn -0.0 into 0.0); x + (-0.0), x - 0.0 and n + 0 go.
    assert out == textwrap.dedent("""\
        module {
          func.func @f(%x: tensor<4xf32>, %n: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>) {
            %0 = kiln.constant dense<0.0> : tensor<f32>
            %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
            %2 = kiln.constant dense<-0.0> : tensor<f32>
            %3 = kiln.broadcast_to %2 : (tensor<f32>) -> tensor<4xf32>
            %4 = kiln.add %x, %1 : tensor<4xf32>
            %5 = kiln.sub %x, %3 : tensor<4xf32>
            func.return %4, %x, %x, %5, %n : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>
          }
        }
        """)


def test_a_constant_of_zero_and_minus_zero_is_not_a_splat():
    out = canonical("""
        func.func @f() -> tensor<2xf32> {
          %0 = kiln.constant dense<[0.0, -0.0]> : tensor<2xf32>
          %1 = kiln.constant dense<1.0> : tensor<f32>
          %2 = kiln.broadcast_to %1 : (tensor<f32>) -> tensor<2xf32>
          %3 = kiln.div %2, %0 : tensor<2xf32>
          func.return %3 : tensor<2xf32>
        }""")
    assert "kiln.div" in out  # not folded to a splat of +inf


@pytest.mark.parametrize("target", TARGETS)
def test_reciprocal_of_a_plus_zero_at_minus_zero(target):
    a = np.array([-0.0, 0.0, 1.0, -np.inf, np.nan], np.float32)
    check(lambda a: 1.0 / (a + 0.0), a, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_identities_at_signed_zeros_nan_and_infinities(target, dtype):
    a = SPECIAL.astype(dtype)
    check(
        lambda a: (
            1 / (a + 0.0),
            1 / (0.0 + a),
            1 / (a - 0.0),
            1 / (a + -0.0),
            1 / (-0.0 + a),
            1 / (a - -0.0),
            1 / (0.0 - a),
            1 / (a * 1),
            1 / (a * 0),
            1 / (0 * a),
            1 / (a / 1),
            1 / (a**1),
            a**2,
            a - a,
            1 / -(-a),
            np.maximum(a, a) * 0,
            a == a,
            a != a,
            np.where(a < 0, a, a),
        ),
        a,
        target=target,
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maximum_and_minimum_at_equal_zeros_and_nan(target, dtype):
    a = np.repeat(SPECIAL, len(SPECIAL)).astype(dtype)  # every pair of special values: 81 elements
    b = np.tile(SPECIAL, len(SPECIAL)).astype(dtype)
    check(
        lambda a, b: (
            np.maximum(a, b),
            np.minimum(a, b),
            np.maximum(a, 0.0),
            np.maximum(0.0, a),
            np.minimum(-0.0, a),
            kiln.relu(a),
            np.maximum(np.full_like(a, 0.0), np.full_like(a, -0.0)),  # folded
            np.minimum(np.full_like(a, 0.0), np.full_like(a, -0.0)),
        ),
        a,
        b,
        target=target,
    )


@pytest.mark.parametrize("target", ["cpu", TARGETS[2]])
def test_max_and_min_reductions_order_zeros_as_ieee_in_every_stage(target):
    # numpy's reductions answer ties of 0.0 and -0.0 by element order; arith.maximumf, which
    # the native code, the CUDA C and the affine interpreter compute, says -0.0 < 0.0.
    from kiln.interpreters.affine_interpreter import run_affine

    def largest(zeros):
        return np.float32(-0.0) if np.signbit(zeros).all() else np.float32(0.0)

    def smallest(zeros):
        return np.float32(-0.0) if np.signbit(zeros).any() else np.float32(0.0)

    for n in (3, 1000):
        x = np.resize(np.array([0.0, -0.0, -0.0], np.float32), n)
        f = kiln.compile(lambda x: (x.max(), x.min(), x[::-1].max(), x[1:].max(), x[:1].min()), target=target)
        expected = (largest(x), smallest(x), largest(x), largest(x[1:]), smallest(x[:1]))
        assert_same(tuple(f(x)), expected)
        assert_same(tuple(run_affine(f.lower(x).module("scheduled"), [x])), expected)


@pytest.mark.parametrize("target", TARGETS)
def test_constants_mixing_zero_and_minus_zero(target):
    for c in ([-0.0, 0.0, 0.0, -0.0], [0.0, -0.0, -0.0, 0.0]):
        c = np.array(c, np.float32)
        a = np.array([-0.0, -0.0, 1.0, 0.0], np.float32)
        check(
            lambda a: (1.0 / (a + c), 1.0 / (c + a), 1.0 / (a - c), np.full_like(a, 1.0) / c, 1.0 / (a * 0 + c)),
            a,
            target=target,
        )


@pytest.mark.parametrize("target", TARGETS)
def test_a_multiply_and_an_add_are_rounded_apart_as_in_numpy(target):
    # Fused into one FMA, a * b + c keeps the exact product: -1e-60 + 0 is -0.0, not 0.0, and
    # x * x - fl(x * x) is the product's rounding error, not 0.
    a = np.full(19, 1e-30, np.float32)
    x = np.full(19, 1 + 2**-12, np.float32)
    check(lambda a, b, c: (1 / (a * b + c), 1 / (c + a * b), 1 / (a * b - c)), a, -a, np.zeros_like(a), target=target)
    check(lambda x, c: (x * x + c, c + x * x, x * x - (-c)), x, -(x * x), target=target)


def test_only_accumulations_may_fuse_into_an_fma():
    f = kiln.compile(lambda x, w, b: x @ w + b * x[:, :1])
    specs = (kiln.f32[4, 16], kiln.f32[16, 8], kiln.f32[8])
    lowered = f.lower(*specs)
    llvm = lowered.text("llvm")
    assert "fadd contract" in llvm  # the matmul's k loop
    assert re.search(r"= fadd (?!contract)", llvm)  # the epilogue
    cuda = kiln.compile(f.fn, target="cuda-emulate").lower(*specs).text("cuda")
    assert "kiln_fadd(" in cuda


# -- float-to-int casts -------------------------------------------------------------------------
OUT_OF_RANGE = np.array(
    [
        1e10,
        -1e10,
        np.nan,
        np.inf,
        -np.inf,
        2.0**31,
        -(2.0**31) - 1,
        2.0**31 - 1,
        -(2.0**31),
        -(2.0**31) - 0.5,
        2.0**63,
        -(2.0**63),
        3e9,
        0.7,
        -0.7,
        -0.0,
        1e19,
    ],
    np.float64,
)


@pytest.mark.skipif(not X86, reason="numpy's out-of-range casts are x86-64's only on x86-64")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", [np.float32, np.float64])
@pytest.mark.parametrize("dest", [np.int32, np.int64])
def test_float_to_int_out_of_range_folded_and_at_run_time(target, source, dest):
    x = OUT_OF_RANGE.astype(source)
    zeros = np.zeros_like(x)
    check(
        lambda z: (
            (z + x).astype(dest),  # at run time
            (z[:1] * 0 + x).astype(dest),  # x a constant inside the kernel
            *(np.full_like(z, v).astype(dest) for v in x),
        ),  # each folded at compile time
        zeros,
        target=target,
    )


@pytest.mark.skipif(not X86, reason="numpy's out-of-range casts are x86-64's only on x86-64")
@pytest.mark.parametrize("target", TARGETS)
def test_full_like_1e10_as_int32_agrees_with_the_run_time_cast(target):
    a = np.array([0.0, -0.0, 3.0], np.float32)
    check(lambda a: np.full_like(a, 1e10).astype(np.int32), a, target=target)
    check(lambda a: (a + 1e10).astype(np.int32), a, target=target)


@pytest.mark.skipif(not X86, reason="numpy's out-of-range casts are x86-64's only on x86-64")
def test_float_to_int_in_vector_loops():
    x = np.resize(OUT_OF_RANGE, 67).astype(np.float32)  # a vector body and a remainder
    check(lambda x: ((x * 1.5).astype(np.int32), (x * 1.5).astype(np.int64)), x, target="cpu")


def test_the_llvm_ir_has_no_saturating_or_unguarded_cast():
    text = kiln.compile(lambda x: x.astype(np.int32)).lower(kiln.f32[8]).text("llvm")
    assert "fptosi.sat" not in text
    assert "select" in text and "fptosi" in text


# -- integer wrap-around ------------------------------------------------------------------------
def limits(dtype):
    info = np.iinfo(dtype)
    return np.array(
        [info.max, info.min, info.max - 1, info.min + 1, -1, 0, 1, 2, 3, 46341, -46341, 3037000500, -3037000500],
        np.int64,
    ).astype(dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_x_plus_one_greater_than_x_and_minus_x_at_int_min(target):
    x = np.array([2**31 - 1, -(2**31), 0, 5], np.int32)
    check(lambda x: (x + 1) > x, x, target=target)
    check(lambda x: -x == x, x, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_arithmetic_wraps_at_the_limits(target, dtype):
    x = limits(dtype)
    y = np.roll(x, 3)
    check(
        lambda x, y: (
            x + y,
            x - y,
            x * y,
            -x,
            np.abs(x),
            x * x * x,
            x**3,
            (x + 1) > x,
            (x - 1) < x,
            -x == x,
            np.abs(x) >= 0,
            (x * 2) == (x + x),
            np.maximum(x + y, x),
            x - y < x,
        ),
        x,
        y,
        target=target,
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [0, 1, 7])
def test_views_and_awkward_sizes(target, n):
    ints = np.resize(limits(np.int32), (n, 13))
    floats = np.resize(SPECIAL, (13, n)).astype(np.float32)
    for x, f in ((ints[::-1], floats.T), (ints.T[:, ::-1], floats[::-1].T)):  # reversed, transposed
        check(
            lambda x, f: (x + 1 > x, -x, x * x, 1 / (f + 0.0), np.maximum(0.0, f), f * f - f * f), x, f, target=target
        )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_sums_wrap_as_numpys_do(target, dtype):
    big = np.full(7, np.iinfo(dtype).max, dtype)
    check(
        lambda x: (x.sum(dtype=dtype), x.reshape(1, 7).sum(axis=1, dtype=dtype), (x + 1).sum(dtype=dtype)),
        big,
        target=target,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_constant_folding_wraps_like_the_run_time(target):
    top = np.int32(2**31 - 1)
    check(
        lambda x: (
            x + (np.full_like(x, top) + 1),
            x + (-np.full_like(x, -top - 1)),
            x + np.abs(np.full_like(x, -top - 1)),
            x + np.full_like(x, 46341) * 46341,
            np.full_like(x, 3) ** 40,
            (x + 3) ** 40,
        ),
        np.zeros(3, np.int32),
        target=target,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_int_min_and_int64_limits_as_constants(target):
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        c = np.array([info.min, info.max, info.min], dtype)
        check(lambda x: (x + c, x * 0 + dtype(info.min)), np.zeros(3, dtype), target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_bool_arithmetic_and_casts_at_the_limits(target):
    p = np.array([True, False, True, False])
    q = np.array([True, True, False, False])
    check(lambda p, q: (p + q, p * q, p.sum()), p, q, target=target)
    x = np.array([np.nan, -0.0, 0.0, np.inf, 1e-45], np.float32)
    check(lambda x: x.astype(bool), x, target=target)
    n = limits(np.int64)
    check(lambda n: (n.astype(np.int32), n.astype(np.float32), n.astype(np.float64)), n, target=target)


def test_the_llvm_ir_has_no_overflow_flags_on_integer_arithmetic():
    f = kiln.compile(lambda x, y: -(x * y + x - y))
    text = f.lower(kiln.i32[9], kiln.i32[9]).text("llvm")
    assert not re.search(r"(add|sub|mul) (nsw|nuw)[^\n]*i32", text)
    # int64 shares its type with index arithmetic (whose nsw is sound): the flags counted on
    # int64 data are exactly those of the same function on float64 data.
    flags = [f.lower(spec, spec).text("llvm").count(" nsw ") for spec in (kiln.i64[9], kiln.f64[9])]
    assert flags[0] == flags[1]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64])
def test_every_integer_width_wraps_as_numpy(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, 0, 1, info.max - 1, info.max], dtype)[::-1]
    y = np.array([1, info.max, 3, info.min, 7, 2], dtype)
    fn = lambda x, y: (x + y, x - y, x * y, -x, x // np.maximum(y, 1), x % np.maximum(y, 1), x >> 1)  # noqa: E731
    for got, want in zip(kiln.compile(fn)(x, y), fn(x, y)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
