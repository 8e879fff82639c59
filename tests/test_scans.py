"""kiln.scan: np.cumsum, np.cumprod, their nan forms, np.cumulative_sum/prod and
ufunc.accumulate run numpy's sequential loop, so numpy is the oracle bit for bit in every
dtype (float16 rounds every step); gradients are checked against float64 central
differences; float16 sums and products along an axis numpy's iterator does not run
innermost round every step, as numpy's do (docs/numpy.md, "float16 accumulation")."""

import itertools

import numpy as np
import pytest
from stage_checks import MLIR_OPT, NVCC, assert_mlir_opt_accepts_every_stage, assert_nvcc_compiles

import kiln
from kiln.dialects import affine as A
from kiln.dialects import parse_ir, print_ir, verify
from kiln.dialects.diagnostics import KilnError
from kiln.interpreters.affine_interpreter import run_affine

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64]


def same(got, want):
    """Equal dtype, shape and bits (NaN and -0.0 included)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":
        assert np.array_equal(got, want, equal_nan=True), (got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    else:
        np.testing.assert_array_equal(got, want)


def awkward(shape, dtype, seed=0):
    """Values numpy's order decides: large and small floats, NaN, inf, -0.0; integer extremes."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        x = rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e3], shape)
        flat = x.reshape(-1)
        for k, special in zip(range(0, flat.size, 7), [np.nan, np.inf, -0.0, -np.inf, 0.0]):
            flat[k] = special
        return x.astype(dtype)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    x.reshape(-1)[::5] = info.max
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(0,), (1,), (13,), (3, 7), (2, 0, 5), (5, 1, 11)], ids=str)
def test_cumsum_and_cumprod_give_numpys_bits_along_every_axis(dtype, shape):
    x = awkward(shape, dtype)
    for axis in [None] + list(range(-len(shape), len(shape))):
        for fn in (np.cumsum, np.cumprod):
            # dtype kept, so that integers wrap around in their own width, as numpy's loop does
            f = kiln.compile(lambda a, fn=fn, axis=axis: fn(a, axis=axis, dtype=dtype))
            same(f(x), fn(x, axis=axis, dtype=dtype))


@pytest.mark.parametrize("n", [1, 2, 31, 127, 1009])
def test_default_dtypes_and_reversed_and_strided_views(n):
    x = awkward((n,), np.int32, n)
    same(kiln.compile(np.cumsum)(x), np.cumsum(x))  # int32 accumulates in int64
    same(kiln.compile(lambda a: np.cumsum(a[::-1]))(x), np.cumsum(x[::-1]))
    same(kiln.compile(lambda a: np.cumprod(a[::2]))(x), np.cumprod(x[::2]))
    b = x % 3 == 0
    same(kiln.compile(np.cumsum)(b), np.cumsum(b))  # bool counts in int64


def test_a_float32_cumsum_is_numpys_sequential_sum():
    # a pairwise or log-step order differs from numpy's left-to-right loop in the last bits
    x = np.random.default_rng(3).standard_normal(100_003).astype(np.float32)
    same(kiln.compile(np.cumsum)(x), np.cumsum(x))
    y = np.array([1e30, 1e30, 1e-30, 1e-30, -1e30], np.float32)
    same(kiln.compile(np.cumprod)(y), np.cumprod(y))  # numpy's order overflows to inf


def test_nan_forms_and_the_array_api_functions():
    x = awkward((4, 9), np.float64, 5)
    same(kiln.compile(lambda a: np.nancumsum(a, axis=1))(x), np.nancumsum(x, axis=1))
    same(kiln.compile(lambda a: np.nancumprod(a, axis=0))(x), np.nancumprod(x, axis=0))
    same(
        kiln.compile(lambda a: np.cumulative_sum(a, axis=0, include_initial=True))(x),
        np.cumulative_sum(x, axis=0, include_initial=True),
    )
    same(kiln.compile(lambda a: np.cumulative_prod(a, axis=1))(x), np.cumulative_prod(x, axis=1))


ACCUMULATES = [np.add, np.multiply, np.maximum, np.minimum, np.bitwise_and, np.bitwise_or, np.bitwise_xor]


@pytest.mark.parametrize("ufunc", ACCUMULATES, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_ufunc_accumulate_of_every_kind(ufunc, dtype):
    x = awkward((6, 11), dtype, 9) if dtype != np.bool_ else awkward((6, 11), np.int8, 9) > 0
    for axis in (0, 1, -1):
        try:
            want = ufunc.accumulate(x, axis=axis)
        except TypeError:  # bitwise ops on floats: numpy refuses, and so does kiln
            with pytest.raises(kiln.ArgumentError):
                kiln.compile(lambda a: ufunc.accumulate(a, axis=axis))(x)
            return
        if ufunc is np.bitwise_xor and dtype == np.bool_:
            with pytest.raises(kiln.UnsupportedError):
                kiln.compile(lambda a: ufunc.accumulate(a, axis=axis))(x)
            return
        same(kiln.compile(lambda a: ufunc.accumulate(a, axis=axis))(x), want)


def test_maximum_accumulate_keeps_numpys_nan_and_signed_zeros():
    x = np.array([-0.0, 0.0, -0.0, 1.0, np.nan, 2.0, -np.inf], np.float32)
    for ufunc in (np.maximum, np.minimum):
        same(kiln.compile(lambda a: ufunc.accumulate(a))(x), ufunc.accumulate(x))
        same(kiln.compile(lambda a: ufunc.accumulate(a[::-1]))(x), ufunc.accumulate(x[::-1]))
    for ufunc in (np.logical_and, np.logical_or):
        b = np.array([[1, 0, 1], [1, 1, 0]], np.int32)
        same(kiln.compile(lambda a: ufunc.accumulate(a, axis=1))(b), ufunc.accumulate(b, axis=1))


# -- float16: every step rounded -----------------------------------------------------------
def half_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_three_thousand_float16_ones_end_at_2048():
    x = np.ones(3000, np.float16)
    got = kiln.compile(np.cumsum)(x)
    half_bits(got, np.cumsum(x))
    assert got[-1] == 2048
    half_bits(kiln.compile(lambda a: np.add.accumulate(a))(x), np.add.accumulate(x))


@pytest.mark.parametrize("target", ["native", "interpret", "cuda-emulate"])
@pytest.mark.parametrize("shape,axis", [((500,), 0), ((7, 300), 1), ((300, 7), 0), ((3, 1, 131), -1)], ids=str)
def test_float16_scans_round_every_step_as_numpy(shape, axis, target):
    rng = np.random.default_rng(len(shape) + shape[-1])
    x = (1 + rng.standard_normal(shape) * 0.05).astype(np.float16)
    options = {} if target == "native" else {"target": target}
    for fn in (np.cumsum, np.cumprod):
        half_bits(kiln.compile(lambda a, fn=fn: fn(a, axis=axis), **options)(x), fn(x, axis=axis))
    specials = x.copy().reshape(-1)
    for k, special in enumerate([np.nan, np.inf, -0.0, 65504.0, -np.inf]):
        specials[k * 37 % specials.size] = special
    specials = specials.reshape(shape)
    half_bits(kiln.compile(lambda a: np.cumsum(a, axis=axis), **options)(specials), np.cumsum(specials, axis=axis))


HALF_SHAPES = [
    (3000, 2),
    (2, 3000),
    (3000, 1),
    (1, 3000),
    (50, 1, 7),
    (7, 1, 50),
    (20, 30, 4),
    (4, 30, 20),
    (3, 1, 4, 5),
]


@pytest.mark.parametrize("shape", HALF_SHAPES, ids=str)
def test_float16_sums_and_products_round_where_numpys_iterator_does(shape):
    """numpy's iterator decides where a float16 reduction rounds (the inner loop is the last
    axis of size > 1): every reduced axis, and every combination, against numpy's bits."""
    rng = np.random.default_rng(sum(shape))
    ones = np.ones(shape, np.float16)
    near = (1 + rng.standard_normal(shape) * 0.01).astype(np.float16)
    axes = [None] + [a for r in range(1, len(shape) + 1) for a in itertools.combinations(range(len(shape)), r)]
    for axis in axes:
        half_bits(kiln.compile(lambda a: np.sum(a, axis=axis))(ones), np.sum(ones, axis=axis))
        half_bits(kiln.compile(lambda a: a.sum(axis=axis, keepdims=True))(near), near.sum(axis=axis, keepdims=True))
        half_bits(kiln.compile(lambda a: np.prod(a, axis=axis))(near), np.prod(near, axis=axis))


def test_a_strided_float16_sum_of_3000_ones_is_2048():
    x = np.ones((3000, 4), np.float16)
    got = kiln.compile(lambda a: a.sum(0))(x)
    half_bits(got, x.sum(0))
    assert (got == 2048).all()
    rows = np.ascontiguousarray(x.T)
    half_bits(kiln.compile(lambda a: a.sum(1))(rows), rows.sum(1))  # contiguous: float32, 3000
    assert (rows.sum(1) == 3000).all()


# -- the IR ----------------------------------------------------------------------------------
def test_the_scan_round_trips_and_verifies():
    text = """func.func @f(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = kiln.scan %x {axis = 1, kind = "mul", rounding = f16} : tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}"""
    module = parse_ir(text)
    printed = print_ir(module)
    assert 'kiln.scan %x {axis = 1, kind = "mul", rounding = f16} : tensor<3x4xf32>' in printed
    assert print_ir(parse_ir(printed)) == printed
    generic = print_ir(module, generic=True)
    assert print_ir(parse_ir(generic)) == printed


@pytest.mark.parametrize(
    "attributes,message",
    [
        ('axis = 2, kind = "add", rounding = f32', "out of range"),
        ('axis = 0, kind = "logaddexp", rounding = f32', "kind must be one of"),
        ('axis = 0, kind = "and", rounding = f32', "does not take f32"),
        ('axis = 0, kind = "add", rounding = f64', "rounding must be"),
    ],
)
def test_the_verifier_names_what_is_wrong(attributes, message):
    text = f"""func.func @f(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {{
  %0 = kiln.scan %x {{{attributes}}} : tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}}"""
    with pytest.raises(KilnError, match=message):
        verify(parse_ir(text))


def scan_loops(module):
    """The loops that carry a value and store inside: a scan's."""
    return [
        op
        for op in module.walk()
        if isinstance(op, A.ForOp) and op.inits and any(isinstance(inner, A.StoreOp) for inner in op.body.ops)
    ]


SPECS = {np.float32: kiln.f32, np.int32: kiln.i32, np.float16: kiln.f16}


@pytest.mark.parametrize("dtype", list(SPECS), ids=lambda d: np.dtype(d).name)
def test_schedules_leave_the_scan_axis_sequential(dtype):
    """The default schedule vectorizes and parallelizes what it can (with threads, and a
    million elements to pay for them); the scan's own loop stays a scalar loop in order."""
    f = kiln.compile(lambda a: np.cumsum(a, axis=1, dtype=dtype))
    lowered = f.lower(SPECS[dtype][1000, 1000])
    scheduled = lowered.module("scheduled")
    loops = scan_loops(scheduled)
    assert loops, print_ir(scheduled)
    for loop in loops:
        assert not any("vector" in op.name for op in loop.walk()), print_ir(scheduled)
        assert not isinstance(loop, A.ParallelOp)
    x = awkward((1000, 1000), dtype, 1) if dtype != np.float16 else np.ones((1000, 1000), dtype)
    same(f(x), np.cumsum(x, axis=1, dtype=dtype))


def test_an_axis_0_scan_runs_its_columns_as_vector_lanes():
    f = kiln.compile(lambda a: np.cumsum(a, axis=0))
    x = awkward((301, 67), np.float64, 4)
    same(f(x), np.cumsum(x, axis=0))
    scheduled = print_ir(f.lower(kiln.f64[301, 67]).module("scheduled"))
    assert "vector<" in scheduled


def test_the_affine_interpreter_runs_the_scan_at_both_loop_stages():
    x = awkward((5, 23), np.float32, 2)
    lowered = kiln.compile(lambda a: np.cumprod(a, axis=1)).lower(kiln.f32[5, 23])
    for stage in ("affine", "scheduled"):
        (out,) = run_affine(lowered.module(stage), [x])
        same(out, np.cumprod(x, axis=1))
    interpreted = kiln.compile(lambda a: np.cumsum(a, axis=0), target="interpret")(x)
    same(interpreted, np.cumsum(x, axis=0))


# -- gradients -------------------------------------------------------------------------------
def with_zeros(shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape)
    x.reshape(-1)[::4] = 0.0  # zeros in every row, two in some: a cumprod's quotient rule fails there
    return x


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gradients_match_finite_differences(axis):
    w = np.random.default_rng(7).standard_normal((5, 6))
    x = with_zeros((5, 6), axis + 3)
    distinct = np.random.default_rng(8).permutation(30).reshape(5, 6) * 0.37  # no ties
    cases = [
        (lambda a: np.sum(np.cumsum(a, axis=axis) * w), x),
        (lambda a: np.sum(np.cumprod(a, axis=axis) * w), x),
        (lambda a: np.sum(np.cumprod(a, axis=axis) ** 2), x),
        (lambda a: np.sum(np.maximum.accumulate(a, axis=axis) * w), distinct),
        (lambda a: np.sum(np.minimum.accumulate(a, axis=axis) * w), distinct),
        (lambda a: np.sum(np.nancumsum(a, axis=axis) * w), x),
    ]
    for fn, at in cases:
        assert kiln.gradcheck(fn, at).ok


def test_a_cumprod_gradient_at_zeros_is_the_product_of_the_others():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    grad = kiln.compile(kiln.grad(lambda a: np.sum(np.cumprod(a))))(x)
    # d/dx1 of 2 + 2 x1 + 6 x1 + 6 x1 x3 + 30 x1 x3 at x3 = 0: 2 + 6 = 8; d/dx3: 6 + 30 = 36 times x1 = 0
    np.testing.assert_allclose(grad, [1.0, 8.0, 0.0, 0.0, 0.0])
    assert kiln.gradcheck(lambda a: np.sum(np.cumprod(a) * np.arange(1.0, 6.0)), x).ok


# -- CUDA ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64])
def test_cuda_emulation_runs_one_sequential_loop_per_row(dtype):
    x = awkward((9, 37), dtype, 6)
    for axis in (0, 1):
        for fn in (np.cumsum, np.cumprod):
            f = kiln.compile(lambda a, fn=fn, axis=axis: fn(a, axis=axis, dtype=dtype), target="cuda-emulate")
            same(f(x), fn(x, axis=axis, dtype=dtype))
    same(kiln.compile(np.cumsum, target="cuda-emulate")(x[0]), np.cumsum(x[0]))  # one row, one thread


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)")
def test_nvcc_compiles_the_cuda_c_of_scans(tmp_path):
    sources = []
    for fn, spec in [
        (lambda a: np.cumsum(a, axis=1), kiln.f32[8, 33]),
        (lambda a: np.cumprod(a, axis=0), kiln.f64[33, 8]),
        (lambda a: np.maximum.accumulate(a), kiln.i32[100]),
        (lambda a: np.cumsum(a), kiln.f16[3000]),
        (lambda a: a.sum(0), kiln.f16[3000, 3]),
    ]:
        sources.append(kiln.compile(fn, target="cuda-emulate").lower(spec).text("cuda"))
    for k, source in enumerate(sources):
        assert_nvcc_compiles(source, tmp_path / f"scan{k}.cu")


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
def test_mlir_opt_accepts_every_stage_of_scans():
    for fn, spec in [
        (lambda a: np.cumsum(a, axis=0), kiln.f16[40, 3]),
        (lambda a: a.sum(0), kiln.f16[40, 3]),
        (lambda a: np.maximum.accumulate(a, axis=1), kiln.u8[4, 9]),
        (kiln.grad(lambda a: np.sum(np.cumprod(a))), kiln.f64[7]),
    ]:
        assert_mlir_opt_accepts_every_stage(kiln.compile(fn).lower(spec))
