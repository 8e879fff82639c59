"""ONNX elementwise, activation and linear-algebra ops beyond the backend suite's cases: the
2-D coercion of Softmax/LogSoftmax/Hardmax before opset 13, dtypes the spec keeps where numpy
promotes, Cast's edge values, Erf's accuracy, inference Dropout, PRelu's per-channel slope,
integer Gemm and MatMulInteger's zero points."""

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_models import one_node_model  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402
from kiln.onnx.ops.elementwise import erf  # noqa: E402

rng = np.random.default_rng(5)


def make_model(node, inputs: dict, initializers: dict | None = None, opset: int = 18):
    return one_node_model(node, inputs, initializers, opset)


def run(node, inputs: dict, initializers: dict | None = None, opset: int = 18):
    return kiln.onnx.load(make_model(node, inputs, initializers, opset))(*inputs.values())


def check(node, inputs: dict, initializers: dict | None = None, opset: int = 18, rtol: float = 1e-6, atol=1e-7):
    """kiln's outputs equal ONNX's reference implementation's (within `rtol`/`atol`), dtypes exactly."""
    model = make_model(node, inputs, initializers, opset)
    got = kiln.onnx.load(model)(*inputs.values())
    want = ReferenceEvaluator(model).run(None, inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def floats(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def coerced_2d(x, axis, function):
    """`function` over rows of `x` flattened to 2-D at `axis` (the spec before opset 13)."""
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return function(rows).reshape(x.shape)


def _softmax_rows(rows):
    e = np.exp(rows - rows.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# -- Softmax, LogSoftmax, Hardmax -------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_before_opset_13_coerces_to_2d_at_axis(axis):
    x = floats(2, 3, 4)
    (got,) = run(helper.make_node("Softmax", ["x"], ["y"], axis=axis), {"x": x}, opset=11)
    np.testing.assert_allclose(got, coerced_2d(x, axis % 3, _softmax_rows), rtol=1e-5)


def test_softmax_before_opset_13_defaults_to_axis_1():
    x = floats(2, 3, 4)
    (got,) = run(helper.make_node("Softmax", ["x"], ["y"]), {"x": x}, opset=9)
    np.testing.assert_allclose(got, coerced_2d(x, 1, _softmax_rows), rtol=1e-5)


def test_log_softmax_and_hardmax_before_opset_13_coerce_too():
    x = np.round(floats(2, 3, 4) * 2)
    (log,) = run(helper.make_node("LogSoftmax", ["x"], ["y"], axis=1), {"x": x}, opset=11)
    np.testing.assert_allclose(log, np.log(coerced_2d(x, 1, _softmax_rows)), rtol=1e-5, atol=1e-6)
    (hard,) = run(helper.make_node("Hardmax", ["x"], ["y"], axis=1), {"x": x}, opset=11)
    first = coerced_2d(x, 1, lambda rows: (np.arange(rows.shape[1]) == rows.argmax(1)[:, None]).astype(rows.dtype))
    np.testing.assert_array_equal(hard, first)


def test_softmax_opset_13_is_per_axis_and_keeps_float16():
    check(helper.make_node("Softmax", ["x"], ["y"], axis=1), {"x": floats(2, 3, 4, dtype=np.float16)}, rtol=2e-3)
    check(helper.make_node("Hardmax", ["x"], ["y"], axis=0), {"x": np.round(floats(3, 4, dtype=np.float64))})


# -- arithmetic types ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_div_truncates_toward_zero(dtype):
    a = np.array([7, -7, 7, -7, 0, 5, -6], dtype)
    b = np.array([2, 2, -2, -2, 3, -1, 4], dtype)
    (got,) = run(helper.make_node("Div", ["a", "b"], ["y"]), {"a": a, "b": b})
    np.testing.assert_array_equal(got, np.trunc(a / b).astype(dtype))
    assert got.dtype == dtype


def test_float_mod_fmod_0_is_the_floored_remainder_with_the_divisors_sign():
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, 3.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, -2.0, np.inf], np.float32)
    check(helper.make_node("Mod", ["a", "b"], ["y"]), {"a": a, "b": b}, opset=13)


def test_pow_keeps_the_base_type():
    base = np.array([1, 2, 3, 4], np.int32)
    check(helper.make_node("Pow", ["a", "b"], ["y"]), {"a": base, "b": np.array([0.5, 2.0, 1.5, 3.0], np.float32)})
    check(
        helper.make_node("Pow", ["a", "b"], ["y"]), {"a": floats(4, dtype=np.float16) ** 2, "b": floats(4)}, rtol=1e-3
    )


def test_clip_before_opset_11_takes_float_attributes():
    x = floats(3, 4, dtype=np.float64)
    check(helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25), {"x": x}, opset=6)


def test_clip_with_min_above_max_gives_max():
    x = np.arange(-3, 4, dtype=np.int8)
    (got,) = run(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), {"x": x}, {"lo": np.int8(2), "hi": np.int8(1)})
    np.testing.assert_array_equal(got, np.ones_like(x))


# -- Cast ----------------------------------------------------------------------------------
_EDGES = np.array([np.nan, np.inf, -np.inf, 3.7, -3.7, 0.0, -0.0, 1e5, 2.5, 65520.0], np.float32)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, casting NaN and inf in the reference
@pytest.mark.parametrize(
    "to", [TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.UINT8]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_cast_edge_values_as_the_reference(dtype, to):
    check(helper.make_node("Cast", ["x"], ["y"], to=to), {"x": _EDGES.astype(dtype)}, opset=21)


def test_cast_float_to_bool_is_nonzero_nan_included():
    (got,) = run(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BOOL), {"x": _EDGES})
    np.testing.assert_array_equal(got, [True, True, True, True, True, False, False, True, True, True])


def test_cast_to_a_type_kiln_lacks_names_the_node():
    with pytest.raises(kiln.UnsupportedError, match=r"Cast.*BFLOAT16"):
        run(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16), {"x": _EDGES})


# -- Erf, Gelu ---------------------------------------------------------------------------
def test_erf_is_exact_to_float64_rounding():
    x = np.concatenate([np.linspace(-8, 8, 4001), [0.0, -0.0, 1e-300, 1.5, -1.5, 29.99, 30.0, np.inf, -np.inf]])
    got = kiln.compile(erf)(x)
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=1e-300)
    assert np.isnan(kiln.compile(erf)(np.array([np.nan]))).all()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check(
        helper.make_node("Gelu", ["x"], ["y"], approximate=approximate),
        {"x": floats(5, 6) * 3},
        opset=20,
        rtol=1e-5,
        atol=1e-6,
    )


# -- Dropout ---------------------------------------------------------------------------------
@pytest.mark.parametrize("opset, mask_dtype", [(7, np.float32), (10, np.bool_), (13, np.bool_)])
def test_dropout_is_the_identity_with_an_all_true_mask(opset, mask_dtype):
    x = floats(2, 3)
    attributes = {"ratio": 0.3} if opset < 12 else {}
    node = helper.make_node("Dropout", ["x"], ["y", "mask"], **attributes)
    # Typed outputs: onnx's shape inference leaves opset 7's mask untyped.
    mask_type = helper.np_dtype_to_tensor_dtype(np.dtype(mask_dtype))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("mask", mask_type, [2, 3]),
        ],
    )
    y, mask = kiln.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))(x)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == mask_dtype and mask.all()


def test_dropout_training_mode_with_zero_ratio_is_the_identity():
    x = floats(2, 3)
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"])
    (y,) = run(node, {"x": x}, {"r": np.float32(0.0), "t": np.bool_(True)})
    np.testing.assert_array_equal(y, x)


# -- PRelu ---------------------------------------------------------------------------------
def test_prelu_per_channel_slope_of_an_opset_6_model():
    x = floats(2, 3, 4, 5)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    (got,) = run(helper.make_node("PRelu", ["x", "slope"], ["y"]), {"x": x}, {"slope": slope}, opset=6)
    np.testing.assert_allclose(got, np.where(x >= 0, x, x * slope.reshape(3, 1, 1)))


def test_prelu_broadcasting_slope():
    check(helper.make_node("PRelu", ["x", "slope"], ["y"]), {"x": floats(2, 3, 4), "slope": floats(3, 1)})


# -- Gemm, Einsum, MatMulInteger ------------------------------------------------------------
def test_gemm_on_integers_scales_by_fractional_alpha_and_beta():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = np.arange(20, dtype=np.int32).reshape(4, 5)
    c = np.full(5, 3, np.int32)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=0.5)
    check(node, {"a": a, "b": b, "c": c}, opset=13)


def test_gemm_transposes_and_broadcasts_c():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=2.0, beta=-1.0)
    check(node, {"a": floats(4, 3), "b": floats(5, 4), "c": floats(1, 5)}, opset=13, rtol=1e-5)


def test_einsum_equation_with_spaces_and_implicit_output():
    check(helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij, jk"), {"a": floats(2, 3), "b": floats(3, 4)})
    check(helper.make_node("Einsum", ["a"], ["y"], equation="...ii ->...i"), {"a": floats(2, 3, 3)})


def test_matmul_integer_zero_points_per_row_and_column():
    a = rng.integers(-128, 127, (3, 4)).astype(np.int8)
    b = rng.integers(0, 255, (4, 2)).astype(np.uint8)
    a_zero, b_zero = np.array([1, 2, 3], np.int8), np.array([7, 9], np.uint8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    (got,) = run(node, {"a": a, "b": b}, {"az": a_zero, "bz": b_zero}, opset=10)
    want = (a.astype(np.int32) - a_zero[:, None]) @ (b.astype(np.int32) - b_zero)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


# -- Constant ------------------------------------------------------------------------------
@pytest.mark.parametrize("indices", [np.array([1, 4]), np.array([[0, 1], [1, 1]])])
def test_sparse_constant_is_densified(indices):
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 7.0], np.float32)),
        numpy_helper.from_array(indices.astype(np.int64)),
        [2, 3],
    )
    constant = helper.make_node("Constant", [], ["c"], sparse_value=sparse)
    add = helper.make_node("Add", ["c", "x"], ["y"])
    graph = helper.make_graph(
        [constant, add],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    (got,) = kiln.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))(
        np.zeros((2, 3), np.float32)
    )
    np.testing.assert_array_equal(got, [[0, 5, 0], [0, 7, 0]])
