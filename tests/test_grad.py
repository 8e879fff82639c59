"""Gradients: every op of the op table against finite differences (float64),
compiled vs interpreted, second order, whole losses, and the errors."""

import re

import numpy as np
import pytest
from op_table import BITS_NO_GRADIENT, CASES, DT_CASES, EDIT_NO_GRADIENT, NUMERIC_NO_GRADIENT

import kiln
from kiln.dialects import parse_ir, print_ir, verify
from kiln.passes.autodiff import value_and_grad as transform

rng = np.random.default_rng(11)


def float_positions(args):
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f")


def differentiable_cases():
    """Op-table cases with a float input and a float output: loss = sum(f(args) * R)."""
    for case in CASES:
        wrt = float_positions(case.args)
        out = np.asarray(case.fn(*case.args))
        if wrt and out.dtype.kind == "f":
            yield case, wrt, rng.standard_normal(out.shape)


GRAD_CASES = list(differentiable_cases())
NO_GRADIENT = sorted({c.name for c in CASES} - {c.name for c, _, _ in GRAD_CASES})


def weighted_loss(case, weights):
    def loss(*args):
        return np.sum(case.fn(*args) * weights)

    loss.__name__ = f"loss_{case.name}"
    return loss


def test_the_cases_without_gradient_are_the_ones_with_no_float_input_or_output():
    # Listed so that a case silently dropping out of the gradient table is noticed.
    assert NO_GRADIENT == sorted(
        [
            "add_int_widen",
            "add_bool_is_or",
            "add_int_float_scalar",
            "rsub_scalar",
            "mul",
            "mul_bool_is_and",
            "div_int_to_float",
            "minimum",
            "maximum_bool",
            "pow_int",
            "neg_int",
            "abs_int",
            "exp_int_to_f64",
            "eq",
            "ne",
            "lt",
            "le_scalar",
            "gt_int_float",
            "ge",
            "logical_and",
            "logical_or_of_floats",
            "logical_not",
            "logical_xor",
            "bool_operators",
            "astype_f32_i32",
            "astype_i64_f32",
            "astype_bool_f64",
            "astype_f64_bool",
            "sum_int32_widens",
            "sum_bool_counts",
            "max_bool",
            "min_int",
            "mean_int",
            "matmul_int",
            "transpose_perm",
            "slice_negative",
            "ravel",
            "ones_like_dtype",
            "full_like",
            "mean_int_dtype",
            "mean_int_dtype_negative",
            "var_int_dtype",
            "std_int_dtype",
            "prod_int32_widens",
            "prod_bool",
            "any",
            "any_axis_nan_is_true",
            "all_keepdims",
            "all_empty_is_true",
            "logical_or_reduce",
            "ufunc_of_python_scalars_is_strong",
            "argmax_nan_wins",
            "argmax_ties_first",
            "argmin_axis0_keepdims",
            "argmin_flat_keepdims",
            "argmax_bool",
            "trace_int32_widens",
            "ufunc_bitwise_bool",
            "ufunc_bitwise_int",
            "ufunc_divmod_scalar",
            "ufunc_exp2_int",
            "ufunc_floor_int_is_identity",
            "ufunc_floordiv_int_extremes",
            "ufunc_floordiv_int_signs",
            "ufunc_fmax_nan",
            "ufunc_fmin_int",
            "ufunc_fmod_int",
            "ufunc_inplace_integer_operators",
            "ufunc_isnan_int",
            "ufunc_isnan_isinf_isfinite",
            "ufunc_left_shift",
            "ufunc_mod_int_extremes",
            "ufunc_mod_int_signs",
            "ufunc_nan_to_num_edges",
            "ufunc_pow_int_int",
            "ufunc_reciprocal_int",
            "ufunc_rfloordiv_scalar",
            "ufunc_right_shift",
            "ufunc_round_int_negative_decimals",
            "ufunc_shifts_int64",
            "ufunc_sign_int",
            "ufunc_signbit",
            # reductions, scans, ufunc methods, sorting
            "argpartition_smallest_set",
            "argsort_flat",
            "argsort_nan_last",
            "argsort_stable_ties",
            "median_int_axes",
            "percentile_int",
            "rs_add_accumulate_int32_widens",
            "rs_add_reduce_keepdims_initial",
            "rs_any_where",
            "rs_count_nonzero",
            "rs_count_nonzero_axis",
            "rs_cumprod_dtype",
            "rs_cumsum_bool",
            "rs_cumsum_flat_int32_widens",
            "rs_cumsum_int_wraps",
            "rs_logical_and_accumulate_floats",
            "rs_logical_and_reduce_floats",
            "rs_logical_or_accumulate",
            "rs_max_initial_int",
            "rs_min_initial_empty_axis",
            "rs_minimum_accumulate_int",
            "rs_multiply_reduce_dtype",
            "rs_ptp_int_keepdims",
            "rs_sum_int_where",
            "rs_var_correction_int",
            "sort_bool",
            "sort_int_extremes",
            "top_k_indices_ties_axis0",
            "top_k_nan_first",
            "sort_nan_inf_last",
            "sort_signed_zeros_keep_order",
            "median_nan_is_nan",
            # indexing and assignment
            "index_int64_extremes",
            "index_bools",
            "index_specials_exact",
            "take_constant_wrap_int32",
            "take_along_axis_none",
            "assign_cast",
            "assign_bools",
            "minimum_at_int",
            # shapes, layout, array creation, linear algebra
            "linalg_einsum_bool",
            "linalg_einsum_int32_stays",
            "linalg_einsum_int_sum",
            "linalg_matrix_power_zero_int",
            "linalg_norm_int",
            "linalg_tensordot_int",
            "shape_diagflat_int",
            "shape_diff_bool",
            "shape_diff_order_past_length",
            "shape_flip_int_strided_view",
            "shape_linspace_int_dtype",
            "shape_pad_bool_wrap",
            "shape_pad_int_constant",
            "shape_ravel_fortran_int",
            "shape_repeat_counts_flat",
            "shape_roll_bool",
            "shape_tile_int_zero_reps",
            "shape_tril_1d_int",
        ]
        # the small and unsigned integer dtypes: integer inputs, or integer results
        + [c.name for c in DT_CASES if not c.name.startswith("dt_float16")]
        + EDIT_NO_GRADIENT
        + NUMERIC_NO_GRADIENT
        + BITS_NO_GRADIENT
    )


@pytest.mark.parametrize("case, wrt, weights", GRAD_CASES, ids=[c.name for c, _, _ in GRAD_CASES])
def test_gradient_matches_finite_differences(case, wrt, weights):
    report = kiln.gradcheck(weighted_loss(case, weights), *case.args, argnums=wrt)
    assert report.ok and len(report.checks) == len(wrt)


@pytest.mark.parametrize("case, wrt, weights", GRAD_CASES[::5], ids=[c.name for c, _, _ in GRAD_CASES[::5]])
def test_compiled_gradient_equals_interpreted_gradient(case, wrt, weights):
    loss = weighted_loss(case, weights)
    args = [np.asarray(a, np.float64) if i in wrt else a for i, a in enumerate(case.args)]
    native = kiln.compile(kiln.grad(loss, argnums=wrt))(*args)
    interpreted = kiln.compile(kiln.grad(loss, argnums=wrt), target="interpret")(*args)
    for n, i in zip(native, interpreted):
        np.testing.assert_allclose(n, i, rtol=1e-9, atol=1e-12)


def test_gradient_ir_round_trips_and_covers_insert_slice():
    case = next(c for c in CASES if c.name == "slice_steps")
    module = kiln.compile(kiln.grad(weighted_loss(case, np.ones((3, 13))))).lower(*case.args).module("tensor")
    text = print_ir(module)
    assert "kiln.insert_slice" in text
    assert print_ir(parse_ir(text)) == text


def test_tensor_stage_shows_forward_and_backward_with_source_lines():
    def loss(w, x):
        return np.sum(np.tanh(x @ w))  # the line every op points at

    text = kiln.compile(kiln.value_and_grad(loss)).lower(kiln.f32[4, 3], kiln.f32[5, 4]).text()
    line = loss.__code__.co_firstlineno + 1
    ops = [l for l in text.splitlines() if "= kiln." in l]
    assert len(ops) > 6 and all(re.search(rf'test_grad\.py":{line}:\d+\)$', l) for l in ops), text
    assert "kiln.tanh" in text and text.count("kiln.matmul") == 2


def test_dict_parameters_get_gradients_of_the_same_structure():
    def loss(params, x):
        return np.sum(np.tanh(x @ params["w"] + params["b"]) ** 2)

    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal((5, 3))
    value, grads = kiln.value_and_grad(loss)(params, x)
    assert set(grads) == {"w", "b"} and grads["w"].shape == (3, 2) and grads["b"].shape == (2,)
    assert np.isclose(value, loss(params, x))
    kiln.gradcheck(loss, params, x)


def test_argnums_tuple_and_lists():
    def loss(a, bs):
        return np.sum(a * bs[0] + bs[1] ** 2)

    a, bs = rng.standard_normal(4), [rng.standard_normal(4), rng.standard_normal(4)]
    ga, gbs = kiln.grad(loss, argnums=(0, 1))(a, bs)
    np.testing.assert_allclose(ga, bs[0])
    assert isinstance(gbs, list)
    np.testing.assert_allclose(gbs[0], a)
    np.testing.assert_allclose(gbs[1], 2 * bs[1])


def test_gradient_inside_a_compiled_training_step():
    @kiln.compile
    def step(params, x, y, lr):
        def loss(p):
            return np.mean((x @ p["w"] + p["b"] - y) ** 2)  # x, y are read from the enclosing trace

        value, grads = kiln.value_and_grad(loss)(params)
        return value, {k: params[k] - lr * grads[k] for k in params}

    x = rng.standard_normal((32, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.3
    params = {"w": np.zeros(3), "b": np.zeros(())}
    first, _ = step(params, x, y, 0.1)
    for _ in range(200):
        value, params = step(params, x, y, 0.1)
    assert value < first * 1e-3
    np.testing.assert_allclose(params["w"], [1.0, -2.0, 0.5], atol=1e-3)


@pytest.mark.parametrize("name", ["tanh_cubed", "softmax_entropy", "matmul_quadratic"])
def test_hessian_vector_products(name):
    a = rng.standard_normal((4, 4))
    f = {
        "tanh_cubed": lambda x: np.sum(np.tanh(x) ** 3),
        "softmax_entropy": lambda x: -np.sum(kiln.softmax(x) * np.log(kiln.softmax(x))),
        "matmul_quadratic": lambda x: np.sum((a @ x) * x) + np.sum(np.exp(x) * np.sin(x)),
    }[name]
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    hvp = kiln.compile(kiln.grad(lambda x: np.sum(kiln.grad(f)(x) * v)))(x)
    eps = 1e-5
    numeric = (kiln.grad(f)(x + eps * v) - kiln.grad(f)(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, numeric, rtol=1e-6, atol=1e-8)


def test_second_order_gradcheck_through_conv_and_max():
    x = rng.standard_normal((1, 2, 5, 4))
    w = rng.standard_normal((3, 2, 2, 2))

    def inner(w):
        return np.sum(kiln.conv2d(x, w, stride=2, padding=1).max(axis=(2, 3)) ** 2)

    kiln.gradcheck(lambda w: np.sum(kiln.grad(inner)(w) ** 2), w)


def test_max_and_maximum_share_gradients_between_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_allclose(kiln.grad(lambda v: np.sum(v.max(axis=1)))(x), [[0, 0.5, 0.5], [1 / 3] * 3])
    ga, gb = kiln.grad(lambda a, b: np.sum(np.maximum(a, b)), argnums=(0, 1))(
        np.array([1.0, 2.0]), np.array([1.0, 3.0])
    )
    np.testing.assert_allclose(ga, [0.5, 0.0])
    np.testing.assert_allclose(gb, [0.5, 1.0])


# x ** 0 is 1 for every x (numpy: 0 ** 0, inf ** 0 and nan ** 0 are all 1), so its slope is 0
# everywhere; y * x ** (y - 1) alone says 0 * 0 ** -1 = NaN at x = 0. JAX's value there is 0.
SINGULAR_BASES = [0.0, -0.0, 1.0, -2.5, 1e-300, 1e300, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("exponent", [0, 0.0, "array"], ids=["int", "float", "array"])
def test_the_slope_of_x_to_the_power_0_is_0_everywhere(exponent, dtype):
    with np.errstate(over="ignore"):  # 1e300 is inf in float32
        x = np.array(SINGULAR_BASES, dtype)
    y = np.zeros(len(x), dtype) if exponent == "array" else exponent
    grad = kiln.compile(kiln.grad(lambda v: np.sum(np.tanh(v**y))))(x)
    assert grad.dtype == dtype
    np.testing.assert_array_equal(grad, np.zeros_like(x))  # 0 * (-2.5) ** -1 is -0.0, equal to 0


def test_the_issues_gradient_of_tanh_of_a_difference_to_the_power_0_is_0():
    np.testing.assert_array_equal(kiln.grad(lambda a: np.sum(np.tanh((a - a) ** 0)))(np.arange(5.0)), np.zeros(5))


def test_pow_gradients_at_a_zero_base_are_the_one_sided_limits():
    """At x = 0: d/dx x ** y is 0 for y = 0 and y >= 1, inf for 0 < y < 1 (as for sqrt);
    d/dy x ** y is 0 for y > 0 (0 ** y is 0 there: finite differences agree)."""
    x = np.zeros(6)
    y = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 1.5])
    gx, gy = kiln.grad(lambda a, b: np.sum(a**b), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.0, np.inf, 1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(gy[1:], np.zeros(5))
    eps = 1e-6
    with np.errstate(divide="ignore"):  # 0 ** (0 - eps) is inf; that element is not compared
        numeric = (x ** (y + eps) - x ** (y - eps)) / (2 * eps)
    np.testing.assert_allclose(gy[1:], numeric[1:], atol=0)


@pytest.mark.parametrize("power, second", [(0, 0.0), (1, 0.0), (2, 2.0), (3, 0.0)])
def test_second_derivatives_of_integer_powers_at_zero(power, second):
    """d2/dx2 x ** n at 0: the first derivative n * x ** (n - 1) reaches x ** 0 for n = 1."""
    slope = kiln.grad(lambda v: np.sum(kiln.grad(lambda w: np.sum(w**power))(v)))
    np.testing.assert_array_equal(slope(np.zeros(3)), np.full(3, second))


def test_the_mixed_second_derivative_of_pow_at_exponent_0_is_1_over_x():
    """d/dy (y * x ** (y - 1)) at y = 0 is x ** -1: the fix at x = 0 leaves other bases alone
    (positive ones: x ** y has no derivative in y for x < 0, NaN as in JAX)."""
    x = np.array([2.0, 3.0, 0.5])
    mixed = kiln.grad(lambda b, a: np.sum(kiln.grad(lambda u: np.sum(u**b))(a)))(np.zeros(3), x)
    np.testing.assert_allclose(mixed, 1 / x, rtol=1e-15)


def test_where_routes_the_cotangent_by_selecting_it_not_by_multiplying_with_a_mask():
    """d/dx sum(where(m, x, y) * w) is w where m and exactly 0 elsewhere, an infinite or NaN
    w there included (a mask multiplied in would give 0 * inf = NaN), as JAX's select."""
    m = np.array([True, False, False, True])
    w = np.array([2.0, np.inf, np.nan, -3.0])
    gx, gy = kiln.grad(lambda x, y: np.sum(np.where(m, x, y) * w), argnums=(0, 1))(np.ones(4), np.ones(4))
    np.testing.assert_array_equal(gx, [2.0, 0.0, 0.0, -3.0])
    np.testing.assert_array_equal(gy, [0.0, np.inf, np.nan, 0.0])


def test_pow_gradients_away_from_zero_match_finite_differences():
    x = rng.random((3, 5)) + 0.25
    y = np.array([0.0, 0.5, 1.0, 2.0, -1.5])
    assert kiln.gradcheck(lambda a, b: np.sum(np.tanh(a**b)), x, y, argnums=(0, 1)).ok
    assert kiln.gradcheck(lambda a: np.sum(a**0 * a + (a - a) ** 0), x).ok


def test_losses_built_from_many_ops():
    rng_local = np.random.default_rng(5)
    params = {
        "w1": rng_local.standard_normal((6, 7)) * 0.5,
        "b1": rng_local.standard_normal(7),
        "w2": rng_local.standard_normal((7, 3)) * 0.5,
        "g": rng_local.random(7) + 0.5,
    }
    x = rng_local.standard_normal((5, 6))
    labels = np.eye(3)[rng_local.integers(0, 3, 5)]

    def mlp_cross_entropy(p, x):
        h = x @ p["w1"] + p["b1"]
        h = (h - h.mean(axis=-1, keepdims=True)) / np.sqrt(h.var(axis=-1, keepdims=True) + 1e-5) * p["g"]
        logits = kiln.relu(h) @ p["w2"]
        return -np.mean(np.sum(labels * (logits - kiln.logsumexp(logits, axis=-1, keepdims=True)), axis=-1))

    def attention(q, k, v):
        scores = q @ k.T / np.sqrt(q.shape[-1])
        mask = np.tril(np.ones((5, 5), dtype=bool))
        return np.sum(kiln.softmax(np.where(mask, scores, -1e9), axis=-1) @ v)

    kiln.gradcheck(mlp_cross_entropy, params, x)
    q, k, v = (rng_local.standard_normal((5, 4)) for _ in range(3))
    kiln.gradcheck(attention, q, k, v, argnums=(0, 1, 2))


def test_gradcheck_reports_a_wrong_gradient():
    from kiln.passes import autodiff

    original = autodiff.VJP[kiln.dialects.tensor.SinOp]
    autodiff.VJP[kiln.dialects.tensor.SinOp] = lambda b, op, g, needs: [g]  # wrong on purpose
    try:
        with pytest.raises(kiln.GradientMismatchError, match="does not match finite differences"):
            kiln.gradcheck(lambda x: np.sum(np.sin(x)), rng.standard_normal(3))
    finally:
        autodiff.VJP[kiln.dialects.tensor.SinOp] = original


def test_errors():
    with pytest.raises(kiln.ShapeError, match=r"returns shape \(3,\)"):
        kiln.grad(lambda x: x * 2)(np.ones(3))
    with pytest.raises(kiln.DTypeError, match=r"argument 0 \(args\[0\], int64\): gradients need float inputs"):
        kiln.grad(lambda n: np.sum(n * 2.0))(np.arange(3))
    with pytest.raises(kiln.ArgumentError, match="argnums 2 is out of range: <lambda> was called with 2"):
        kiln.grad(lambda a, b: np.sum(a * b), argnums=2)(np.ones(2), np.ones(2))
    with pytest.raises(kiln.ArgumentError, match="argnums must be an int or a non-empty tuple"):
        kiln.grad(lambda a: a, argnums="a")


def test_the_transform_runs_alone_on_parsed_ir():
    module = parse_ir("""
        func.func @loss(%x: tensor<3xf32>) -> tensor<f32> {
          %0 = kiln.mul %x, %x : tensor<3xf32>
          %1 = kiln.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
          func.return %1 : tensor<f32>
        }""")
    new = transform(module.lookup("loss"), [0])
    module.body.ops[0] = new
    new.parent = module.body
    verify(module)
    assert "func.return %1, %7 : tensor<f32>, tensor<3xf32>" in print_ir(module)
