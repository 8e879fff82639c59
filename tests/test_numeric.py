"""interp, convolve, correlate, trapezoid, polyval, sinc, i0, unwrap, angle, lexsort,
array_equal, array_equiv, piecewise, histogram, histogram_bin_edges, cov and corrcoef against
numpy: special values, every keyword, and numpy's errors."""

import warnings

import numpy as np
import pytest
from targets import TARGETS
from test_ops import assert_same

import kiln

SPECIAL = np.array([0.0, -0.0, 1.5, np.nan, np.inf, -np.inf, 3.0, -2.5, 0.25, 1.0, 2.0])
RNG = np.random.default_rng(16)
F32 = RNG.standard_normal(7).astype(np.float32)
F64 = RNG.standard_normal(11)
I32 = RNG.integers(-5, 6, 13).astype(np.int32)
XP = np.array([0.0, 1.0, 1.0, 2.0, 3.5, 3.5, 5.0, 6.0])
FP = np.array([1.0, 2.0, -3.0, 4.0, 5.0, np.inf, 0.0, 0.0])

CASES = [
    # interp: x on a point (the last of equal points wins), between equal points, outside, NaN
    ("interp_duplicates_and_inf", lambda x, xp, fp: np.interp(x, xp, fp), (np.linspace(-1, 7, 33), XP, FP)),
    ("interp_special_x", lambda x: np.interp(x, [0.0, 1.0, 1.0, 2.0], [0.0, np.inf, 3.0, 4.0]), (SPECIAL,)),
    ("interp_nan_x_between_equal_fp", lambda x: np.interp(x, [0.0, 1.0, 2.0], [5.0, 5.0, 6.0]), (SPECIAL,)),
    ("interp_left_right", lambda x: np.interp(x, [0.0, 1.0, 2.0], [0, 2, 3], left=-7, right=9.5), (SPECIAL,)),
    ("interp_traced_left_right", lambda x, l, r: np.interp(x, [0.0, 2.0], [1, 3], l, r), (SPECIAL, -1.0, 5.0)),
    ("interp_one_point", lambda x: np.interp(x, [1.0], [5.0], left=0.0), (SPECIAL,)),
    ("interp_f32_to_f64", lambda x, xp, fp: np.interp(x, xp, fp), (F32, np.sort(F64[:5]).astype(np.float32), F64[:5])),
    ("interp_int_bool", lambda x, fp: np.interp(x, [0, 2, 4], fp), (I32, np.array([True, False, True]))),
    ("interp_scalar_x", lambda xp: np.interp(1.25, xp, [0.0, 10.0, 20.0]), (np.array([0.0, 1.0, 2.0]),)),
    (
        "interp_period",
        lambda x: np.interp(x, [350, 10, 40, 180], [1.0, 2, 3, 4], period=-360),
        (np.array([-190, 0, 5, 355, 720, 400.0, np.nan]),),
    ),
    # convolve and correlate: every mode, both orders, dtypes
    ("convolve_full", np.convolve, (F32, F64[:3])),
    ("convolve_same_even", lambda a, v: np.convolve(a, v, "same"), (F32, F64[:4])),
    ("convolve_valid_swapped", lambda a, v: np.convolve(a, v, "valid"), (F64[:3], F32)),
    ("convolve_scalar", lambda a: np.convolve(a, 2.5), (F32,)),
    ("convolve_special", lambda a, v: np.convolve(a, v, mode=1), (SPECIAL, np.array([1.0, -1.0]))),
    ("correlate_valid", np.correlate, (F32, F64[:3])),
    ("correlate_same_swapped", lambda a, v: np.correlate(a, v, "same"), (F64[:4], F32)),
    ("correlate_full_swapped", lambda a, v: np.correlate(a, v, 2), (F64[:2], F32[::-1])),
    ("correlate_int_mixed", lambda a, v: np.correlate(a, v, "full"), (I32, I32[:4].astype(np.int64))),
    ("convolve_uint8_wraps", np.convolve, (np.array([1, 2, 3], np.uint8), np.array([200, 100], np.uint8))),
    ("correlate_bool", np.correlate, (np.array([True, False, True]), np.array([True, True]))),
    # trapezoid
    ("trapezoid", np.trapezoid, (F32,)),
    ("trapezoid_x", lambda y, x: np.trapezoid(y, x), (F64[:5], np.cumsum(np.abs(F64[5:10])))),
    ("trapezoid_int_dx_axis0", lambda y: np.trapezoid(y, dx=0.5, axis=0), (I32.reshape(13, 1),)),
    ("trapezoid_x_2d", lambda y: np.trapezoid(y, np.arange(6.0).reshape(2, 3) ** 2, axis=1), (F64[:6].reshape(2, 3),)),
    ("trapezoid_traced_dx", lambda y, dx: np.trapezoid(y, dx=dx), (F32, np.float64(0.25))),
    ("trapezoid_bool", np.trapezoid, (np.array([True, False, True, True]),)),
    # polyval, sinc, i0, unwrap, angle
    ("polyval_constant_p", lambda x: np.polyval([3, 0, -1.5, 2], x), (F32,)),
    ("polyval_traced_p", np.polyval, (F64[:4], F32)),
    ("polyval_int_p_f32_x", lambda x: np.polyval(np.array([2, -1, 3]), x), (F32,)),
    ("polyval_constant_x", lambda p: np.polyval(p, [0.5, 2.0]), (F64[:3],)),
    ("polyval_empty_p", lambda x: np.polyval(np.zeros(0), x), (I32,)),
    ("sinc", np.sinc, (SPECIAL,)),
    ("sinc_f32", np.sinc, (F32,)),
    ("sinc_int", np.sinc, (I32,)),
    ("i0", np.i0, (np.array([0.0, 1, -3, 7.99, 8, 8.01, 20, -50, np.nan, np.inf, -np.inf]),)),
    ("i0_f32", np.i0, (F32 * 6,)),
    ("i0_int", np.i0, (I32,)),
    ("unwrap", np.unwrap, (np.cumsum(F64 * 3),)),
    ("unwrap_half_period_jumps", np.unwrap, (np.array([0.0, np.pi, 0.0, -np.pi, 2.5, 2.5 + np.pi]),)),
    ("unwrap_axis0_discont", lambda p: np.unwrap(p, axis=0, discont=4.0), (np.cumsum(F64[:10] * 3).reshape(5, 2),)),
    ("unwrap_int_even_period", lambda p: np.unwrap(p, period=8), (np.array([0, 3, 7, -2, 9, 13, 1, 5], np.int32),)),
    ("unwrap_int_odd_period", lambda p: np.unwrap(p, period=7), (np.array([0, 3, 7, -2, 9, 13, 1, 5], np.int64),)),
    ("unwrap_f32", lambda p: np.unwrap(p, period=4.0), (np.cumsum(F32 * 3),)),
    ("unwrap_int_float_period", np.unwrap, (I32 * 2,)),
    ("angle", np.angle, (SPECIAL,)),
    ("angle_deg_int", lambda z: np.angle(z, deg=True), (I32,)),
    ("angle_f32", np.angle, (F32,)),
    # lexsort
    ("lexsort_tuple", lambda a, b: np.lexsort((a, b)), (I32, I32[::-1] % 3)),
    ("lexsort_nan_and_signed_zeros", lambda a, b: np.lexsort((a, b)), (SPECIAL, np.array([1, 0, 1, 0, 1] * 2 + [0.0]))),
    ("lexsort_rows", np.lexsort, (I32[:12].reshape(3, 4) % 2,)),
    ("lexsort_axis0", lambda a, b: np.lexsort((a, b), axis=0), (I32[:12].reshape(4, 3), (I32[:12] % 2).reshape(4, 3))),
    ("lexsort_one_key_stable", lambda a: np.lexsort((a,)), (I32 % 2,)),
    ("lexsort_bool_and_float", lambda a, b: np.lexsort((a, b)), (F32, F32 > 0)),
    # array_equal and array_equiv
    ("array_equal_nan_unequal", np.array_equal, (SPECIAL, SPECIAL)),
    ("array_equal_nan_equal", lambda a, b: np.array_equal(a, b, equal_nan=True), (SPECIAL, SPECIAL.copy())),
    ("array_equal_nan_int", lambda a, b: np.array_equal(a, b, equal_nan=True), (I32, I32.astype(np.int64))),
    ("array_equal_shapes_differ", np.array_equal, (F32, F64)),
    ("array_equal_constant", lambda a: np.array_equal(a, [0.0, -0.0]), (np.array([-0.0, 0.0]),)),
    ("array_equiv_broadcast", np.array_equiv, (np.array([1, 2]), np.array([[1, 2], [1, 2]]))),
    ("array_equiv_unequal", np.array_equiv, (np.array([1, 2]), np.array([[1, 2], [1, 3]]))),
    ("array_equiv_no_broadcast", np.array_equiv, (np.array([1, 2]), np.array([[1, 2, 3]]))),
    # piecewise
    ("piecewise", lambda x: np.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v**2, 7.0]), (F64,)),
    ("piecewise_later_wins", lambda x: np.piecewise(x, [x < 1, x < 0], [1.0, 2.0]), (SPECIAL,)),
    ("piecewise_int_truncates", lambda x: np.piecewise(x, [x < 0], [lambda v: v * 1.5]), (I32,)),
    ("piecewise_single_condition", lambda x: np.piecewise(x, x > 0, [np.sin, np.cos]), (F32,)),
    ("piecewise_list_of_bools", lambda x: np.piecewise(x, [True, False, True], [lambda v: v + 1]), (F64[:3],)),
    ("piecewise_args_kw", lambda x: np.piecewise(x, [x > 0], [lambda v, a, b=0: v * a + b], 2.0, b=1.0), (F32,)),
    ("piecewise_0d", lambda x: np.piecewise(x, [x > 0], [lambda v: v * 2, -1.0]), (np.float64(1.5),)),
    ("piecewise_traced_condition", lambda x, c: np.piecewise(x, c, [lambda v: v * 3]), (F32, F32 > 0.5)),
    # histogram and its edges
    ("histogram", np.histogram, (F64,)),
    ("histogram_range_f32", lambda a: np.histogram(a, 5, range=(-1, 1.5)), (F32,)),
    ("histogram_range_np_f64_on_f32", lambda a: np.histogram(a, 4, range=(np.float64(-1), 1)), (F32,)),
    ("histogram_special_values", lambda a: np.histogram(a, 4, range=(-3, 3)), (SPECIAL,)),
    ("histogram_on_edges_last_closed", lambda a: np.histogram(a, 4, range=(0, 2)), (np.array([0, 0.5, 1, 1.5, 2.0]),)),
    ("histogram_int", lambda a: np.histogram(a, 4), (I32,)),
    ("histogram_int_range", lambda a: np.histogram(a, 3, range=(0, 5)), (I32,)),
    ("histogram_all_equal", lambda a: np.histogram(a, 3), (np.full(5, 2.0),)),
    ("histogram_all_equal_int", lambda a: np.histogram(a, 2), (np.full(4, 7, np.int64),)),
    ("histogram_empty", lambda a: np.histogram(a, 3), (np.zeros(0, np.float32),)),
    ("histogram_edges_array", lambda a: np.histogram(a, [-3, -1, 0, 0.5, 3]), (SPECIAL,)),
    ("histogram_int_edges_on_floats", lambda a: np.histogram(a, [-2, 0, 1, 2]), (F32,)),
    ("histogram_one_edge", lambda a: np.histogram(a, [1.0]), (F32,)),
    ("histogram_2d_input", lambda a: np.histogram(a, 3), (F64[:10].reshape(2, 5),)),
    ("histogram_weights_f32", lambda a, w: np.histogram(a, 3, weights=w), (F64, np.resize(F32, 11))),
    ("histogram_weights_int_edges", lambda a, w: np.histogram(a, [-2, 0, 1, 2], weights=w), (F64, I32[:11])),
    ("histogram_weights_bool", lambda a, w: np.histogram(a, 3, weights=w), (F64, F64 > 0)),
    ("histogram_density", lambda a: np.histogram(a, 6, density=True), (F32,)),
    ("histogram_density_weights", lambda a, w: np.histogram(a, 3, weights=w, density=True), (F64, np.abs(F64))),
    ("histogram_density_edges", lambda a: np.histogram(a, [-2, 0, 1, 2], density=True), (F32,)),
    ("histogram_bin_edges", lambda a: np.histogram_bin_edges(a, 7), (F32,)),
    ("histogram_bin_edges_range", lambda a: np.histogram_bin_edges(a, 7, range=(0, 10)), (I32,)),
    ("histogram_bin_edges_array", lambda a: np.histogram_bin_edges(a, [0, 1, 4]), (I32,)),
    # cov and corrcoef
    ("cov_one_variable", np.cov, (F64,)),
    ("cov_rows", np.cov, (RNG.standard_normal((3, 5)),)),
    ("cov_columns_f32", lambda m: np.cov(m, rowvar=False), (RNG.standard_normal((5, 3)).astype(np.float32),)),
    ("cov_y_bias", lambda m, y: np.cov(m, y, bias=True), (F64[:5], F32[:5])),
    ("cov_y_columns", lambda m, y: np.cov(m, y, rowvar=False), (RNG.standard_normal((5, 2)), F64[:5])),
    ("cov_ddof_int", lambda m: np.cov(m, ddof=0), (I32[:12].reshape(3, 4),)),
    ("cov_dtype_f32", lambda m: np.cov(m, dtype=np.float32), (I32[:12].reshape(3, 4),)),
    ("cov_weights", lambda m: np.cov(m, fweights=[1, 2, 1, 3], aweights=[0.5, 1, 2, 1]), (I32[:12].reshape(3, 4),)),
    ("cov_aweights_ddof0", lambda m: np.cov(m, aweights=[0.5, 1, 2, 1], ddof=0), (F64[:8].reshape(2, 4),)),
    ("cov_fweights_ddof2", lambda m: np.cov(m, fweights=np.array([1, 2, 1, 3]), ddof=2), (F64[:8].reshape(2, 4),)),
    ("cov_no_variables", np.cov, (np.zeros((0, 3)),)),
    ("corrcoef", np.corrcoef, (RNG.standard_normal((3, 5)),)),
    ("corrcoef_one_variable", np.corrcoef, (F64,)),
    ("corrcoef_constant_variable_nan", np.corrcoef, (np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]),)),
    ("corrcoef_clipped", np.corrcoef, (np.array([[1e-3, 2e-3, 3e-3 + 1e-19], [1.0, 2.0, 3.0]]),)),
    ("corrcoef_y_columns", lambda x, y: np.corrcoef(x, y, rowvar=False), (RNG.standard_normal((5, 2)), F64[:5])),
]


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    else:
        assert_same(got, want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, fn, args", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy(name, fn, args, target):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # bool histograms and cov without degrees of freedom
        want = fn(*args)
        got = kiln.compile(fn, target=target)(*args)
    _same(got, want)


def test_histogram_of_bools_counts_uint8_and_warns_like_numpy():
    a = np.array([True, False, True, True])
    with pytest.warns(RuntimeWarning, match="Converting input from bool"):
        want = np.histogram(a, 2)
    with pytest.warns(RuntimeWarning, match="Converting input from bool"):
        got = kiln.compile(lambda a: np.histogram(a, 2))(a)
    _same(got, want)


def test_cov_without_degrees_of_freedom_warns_like_numpy():
    x = np.array([1.0, 2.5])
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        got = kiln.compile(lambda x: np.cov(x, ddof=2))(x)
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"), np.errstate(all="ignore"):
        want = np.cov(x, ddof=2)
    assert_same(got, want)


@pytest.mark.parametrize(
    "fn, args, numpy_error, error, match",
    [
        (lambda x: np.interp(x, np.zeros(0), np.zeros(0)), (F64,), ValueError, kiln.ShapeError, "empty"),
        (lambda x: np.interp(x, [1.0, 2.0], [1.0]), (F64,), ValueError, kiln.ShapeError, "same length"),
        (lambda x: np.interp(x, [1.0, 2.0], [1.0, 2.0], period=0), (F64,), ValueError, kiln.ShapeError, "non-zero"),
        (lambda x: np.interp(x, [[1.0, 2.0]], [1.0, 2.0]), (F64,), ValueError, kiln.ShapeError, "1-d"),
        (lambda a: np.convolve(a, np.zeros(0)), (F64,), ValueError, kiln.ShapeError, "v cannot be empty"),
        (lambda a: np.correlate(np.zeros(0), a), (F64,), ValueError, kiln.ShapeError, "first array argument"),
        (lambda a: np.convolve(a, a, mode="middle"), (F64,), ValueError, kiln.ShapeError, "mode must be one of"),
        (lambda a: np.correlate(a, a, mode=3), (F64,), ValueError, kiln.ShapeError, "must be 0, 1, or 2"),
        (lambda a: np.convolve(a, a), (F64.reshape(1, 11),), ValueError, kiln.ShapeError, "too deep"),
        (lambda p: np.polyval(p, 2.0), (np.float64(3.0),), TypeError, kiln.ArgumentError, "0-d"),
        (lambda a: np.histogram(a, 0), (F64,), ValueError, kiln.ShapeError, "must be positive"),
        (lambda a: np.histogram(a, 2.5), (F64,), TypeError, kiln.ArgumentError, "must be an integer"),
        (lambda a: np.histogram(a, 3, range=(2, 1)), (F64,), ValueError, kiln.ShapeError, "max must be larger"),
        (lambda a: np.histogram(a, 3, range=(0, np.inf)), (F64,), ValueError, kiln.ShapeError, "not finite"),
        (lambda a: np.histogram(a, [0, 2, 1]), (F64,), ValueError, kiln.ShapeError, "monotonically"),
        (lambda a: np.histogram(a, [[0, 1]]), (F64,), ValueError, kiln.ShapeError, "1d"),
        (lambda a: np.histogram(a, weights=a[:3]), (F64,), ValueError, kiln.ShapeError, "same shape"),
        (
            lambda a: np.histogram(a, 4, range=(1.0, np.nextafter(1.0, 2))),
            (F64,),
            ValueError,
            kiln.ShapeError,
            "Too many bins",
        ),
        (lambda m: np.cov(m), (np.zeros((2, 2, 2)),), ValueError, kiln.ShapeError, "more than 2 dimensions"),
        (lambda m: np.cov(m, ddof=1.5), (F64,), ValueError, kiln.ShapeError, "ddof must be integer"),
        (lambda m: np.cov(m, fweights=[1.5] * 11), (F64,), TypeError, kiln.ArgumentError, "fweights must be integer"),
        (lambda m: np.cov(m, aweights=[-1.0] * 11), (F64,), ValueError, kiln.ShapeError, "cannot be negative"),
        (lambda a, b: np.lexsort((a, b)), (F64, F32), ValueError, kiln.ShapeError, "same shape"),
        (lambda x: np.piecewise(x, [x > 0], [1, 2, 3]), (F64,), ValueError, kiln.ShapeError, "2 functions"),
        (lambda x: np.piecewise(x, [x[:3] > 0], [1]), (F64,), IndexError, kiln.OutOfBoundsError, "boolean index"),
    ],
)
def test_wrong_arguments_raise_numpys_exception_class(fn, args, numpy_error, error, match):
    with pytest.raises(numpy_error), np.errstate(all="ignore"):
        fn(*args)
    assert issubclass(error, numpy_error)
    with pytest.raises(error, match=match):
        kiln.compile(fn)(*args)


def test_histogram_bins_picked_from_the_data_are_refused_with_the_alternative():
    with pytest.raises(kiln.UnsupportedError, match="pass a number of bins"):
        kiln.compile(lambda a: np.histogram(a, "auto"))(F64)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: np.histogram(a, b),
        lambda a, b: np.histogram(a, 3, range=(b[0], 2.0)),
        lambda a, b: np.cov(a, aweights=b),
        lambda a, b: np.interp(a, [0.0, 1.0], [1.0, 2.0], period=b[0]),
    ],
)
def test_values_numpy_checks_while_running_must_be_constants(fn):
    with pytest.raises(kiln.ArgumentError, match="constant"):
        kiln.compile(fn)(F64, np.abs(F64) + 1)


def test_gradients_flow_through_interp_piecewise_and_histogram_weights():
    x = np.array([0.5, 1.5, 2.25])
    fp = np.array([1.0, 3.0, 2.0, 5.0])
    got = kiln.grad(lambda fp: np.sum(np.interp(x, [0.0, 1.0, 2.0, 3.0], fp)))(fp)
    np.testing.assert_allclose(got, [0.5, 1.0, 1.25, 0.25])
    got = kiln.grad(lambda x: np.sum(np.piecewise(x, [x < 1], [lambda v: v**2, lambda v: 3 * v])))(x)
    np.testing.assert_allclose(got, [1.0, 3.0, 3.0])
    w = np.array([2.0, 3.0, 4.0])
    got = kiln.grad(lambda w: np.histogram(x, 2, range=(0, 3), weights=w)[0][1])(w)
    np.testing.assert_allclose(got, [0.0, 1.0, 1.0])
