"""ONNX quantization, BitCast and the small ops (LpNormalization, Det, TensorScatter) beyond
the backend suite's cases: rounding ties and saturation, blocked quantization with a short
last block, precision and output_dtype, opset 10's scalars, int32 dequantization,
QLinearMatMul's per-row and per-column scales, traced write indices, pivoting and singular
matrices in Det, and the refusals."""

import numpy as np
import pytest
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_models import one_node_model  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

rng = np.random.default_rng(11)


def make_model(node, inputs: dict, initializers: dict | None = None, opset: int = 21):
    return one_node_model(node, inputs, initializers, opset)


def run(node, inputs: dict, initializers: dict | None = None, opset: int = 21):
    return kiln.onnx.load(make_model(node, inputs, initializers, opset))(*inputs.values())


def check(node, inputs: dict, initializers: dict | None = None, opset: int = 21, rtol=1e-6, atol=0.0):
    """kiln's outputs equal ONNX's reference implementation's, dtypes exactly."""
    model = make_model(node, inputs, initializers, opset)
    got = kiln.onnx.load(model)(*inputs.values())
    want = ReferenceEvaluator(model).run(None, inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def quantize(**attributes):
    return helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"], **attributes)


def dequantize(**attributes):
    return helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"], **attributes)


# -- QuantizeLinear ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_rounds_half_to_even_and_saturates(dtype):
    info = np.iinfo(dtype)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e9, -1e9, 3.49, info.max + 7.0], np.float32)
    zero = np.array(3 if info.min == 0 else -3, dtype)
    (got,) = run(quantize(), {"x": x}, {"scale": np.float32(1.0), "zero": zero})
    rounded = np.array([0, 2, 2, -0, -2, -2, 1e9, -1e9, 3, info.max + 7.0]) + int(zero)
    np.testing.assert_array_equal(got, np.clip(rounded, info.min, info.max).astype(dtype))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16])
def test_quantize_nan_and_infinities(dtype):
    # Infinities saturate (the reference's int32 conversion makes +inf the minimum); NaN gives
    # the minimum, as onnxruntime and the reference give it.
    info = np.iinfo(dtype)
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    (got,) = run(quantize(), {"x": x}, {"scale": np.float32(0.5), "zero": np.array(1, dtype)})
    np.testing.assert_array_equal(got, np.array([info.min, info.max, info.min, 3], dtype))


def test_quantize_uint16_zero_point_beyond_float16():
    # The zero point 65500 is not a float16 value; it must be added exactly.
    x = np.array([0.0, 4.0, 40.0, -20.0], np.float16)
    (got,) = run(quantize(), {"x": x}, {"scale": np.float16(2.0), "zero": np.uint16(65500)})
    np.testing.assert_array_equal(got, np.array([65500, 65502, 65520, 65490], np.uint16))


def test_quantize_without_zero_point_gives_uint8():
    x = rng.standard_normal((3, 4)).astype(np.float32) * 100
    node = helper.make_node("QuantizeLinear", ["x", "scale"], ["y"])
    (got,) = check(node, {"x": x}, {"scale": np.float32(0.5)})
    assert got.dtype == np.uint8


def test_quantize_output_dtype_without_zero_point():
    x = rng.standard_normal((3, 4)).astype(np.float32) * 1000
    node = helper.make_node("QuantizeLinear", ["x", "scale"], ["y"], output_dtype=TensorProto.INT16)
    (got,) = check(node, {"x": x}, {"scale": np.float32(0.1)})
    assert got.dtype == np.int16


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_per_axis(axis):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32) * 10
    n = x.shape[axis]
    scale = rng.uniform(0.05, 0.5, n).astype(np.float32)
    zero = rng.integers(-20, 20, n).astype(np.int8)
    check(quantize(axis=axis), {"x": x}, {"scale": scale, "zero": zero})


def test_quantize_blocked_with_a_shorter_last_block():
    x = rng.standard_normal((2, 7, 3)).astype(np.float32) * 10
    scale = rng.uniform(0.05, 0.5, (2, 3, 3)).astype(np.float32)  # blocks of 3, 3 and 1 along axis 1
    zero = rng.integers(0, 255, (2, 3, 3)).astype(np.uint8)
    check(quantize(axis=1, block_size=3), {"x": x}, {"scale": scale, "zero": zero})


def test_quantize_traced_scale_and_zero_point():
    x = rng.standard_normal((4, 3)).astype(np.float32) * 10
    scale = rng.uniform(0.05, 0.5, 3).astype(np.float32)
    zero = rng.integers(0, 255, 3).astype(np.uint8)
    check(quantize(axis=1), {"x": x, "scale": scale, "zero": zero})


def test_quantize_opset_10_scalars():
    x = rng.standard_normal(10).astype(np.float32) * 10
    check(quantize(), {"x": x}, {"scale": np.float32(0.25), "zero": np.uint8(128)}, opset=10)


def test_quantize_precision_divides_in_the_given_type():
    # By default x is divided in y_scale's type, float16, where 2049 is 2048; precision=FLOAT keeps it.
    x = np.array([1000.0, 1001.0, 2049.0], np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"], precision=TensorProto.FLOAT)
    (got,) = run(node, {"x": x}, {"scale": np.float16(1.0), "zero": np.int16(0)}, opset=23)
    np.testing.assert_array_equal(got, np.array([1000, 1001, 2049], np.int16))
    plain = helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"])
    (got,) = run(plain, {"x": x}, {"scale": np.float16(1.0), "zero": np.int16(0)}, opset=23)
    np.testing.assert_array_equal(got, np.array([1000, 1001, 2048], np.int16))  # float16's division


def test_quantize_refuses_a_float8_output_dtype():
    node = helper.make_node("QuantizeLinear", ["x", "scale"], ["y"], output_dtype=TensorProto.FLOAT8E4M3FN)
    with pytest.raises(kiln.UnsupportedError, match="FLOAT8E4M3FN"):
        run(node, {"x": np.zeros(3, np.float32)}, {"scale": np.float32(1.0)})


def test_quantize_refuses_a_blocked_scale_of_the_wrong_shape():
    scale = np.ones((2, 2), np.float32)  # axis 1 of size 7 with blocks of 3 needs 3 blocks
    with pytest.raises(kiln.UnsupportedError, match="blocked scale"):
        run(
            quantize(axis=1, block_size=3),
            {"x": np.zeros((2, 7), np.float32)},
            {"scale": scale, "zero": np.zeros((2, 2), np.uint8)},
        )


# -- DequantizeLinear --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_dequantize_per_axis(dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (2, 3, 4), endpoint=True).astype(dtype)
    scale = rng.uniform(0.01, 1.0, 3).astype(np.float32)
    zero = rng.integers(info.min, info.max, 3, endpoint=True).astype(dtype)
    check(dequantize(axis=1), {"x": x}, {"scale": scale, "zero": zero})


def test_dequantize_int32_without_zero_point():
    x = np.array([-(2**31), 2**31 - 1, 0, 12345], np.int32)
    node = helper.make_node("DequantizeLinear", ["x", "scale"], ["y"])
    check(node, {"x": x}, {"scale": np.float32(0.5)})


def test_dequantize_blocked_traced():
    x = rng.integers(0, 255, (4, 5), endpoint=True).astype(np.uint8)
    scale = rng.uniform(0.01, 1.0, (2, 5)).astype(np.float32)
    zero = rng.integers(0, 255, (2, 5)).astype(np.uint8)
    check(dequantize(axis=0, block_size=2), {"x": x, "scale": scale, "zero": zero})


def test_dequantize_output_dtype_float16():
    x = rng.integers(-128, 127, 6).astype(np.int8)
    node = helper.make_node("DequantizeLinear", ["x", "scale"], ["y"], output_dtype=TensorProto.FLOAT16)
    (got,) = run(node, {"x": x}, {"scale": np.float32(0.1)}, opset=23)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(0.1)).astype(np.float16))


def test_dequantize_float16_scale_rounds_once():
    x = rng.integers(-128, 127, 50).astype(np.int8)
    check(dequantize(), {"x": x}, {"scale": np.float16(0.0137), "zero": np.int8(-5)})


# -- QLinearMatMul, DynamicQuantizeLinear -----------------------------------------------------------
def _qlinear_matmul(a_rows: bool, b_columns: bool, dtype=np.uint8):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 4), endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, (4, 5), endpoint=True).astype(dtype)
    values = {
        "a_scale": rng.uniform(0.001, 0.01, 3 if a_rows else ()).astype(np.float32),
        "a_zero": rng.integers(info.min, info.max, 3 if a_rows else ()).astype(dtype),
        "b_scale": rng.uniform(0.001, 0.01, 5 if b_columns else ()).astype(np.float32),
        "b_zero": rng.integers(info.min, info.max, 5 if b_columns else ()).astype(dtype),
        "y_scale": np.float32(0.002),
        "y_zero": np.array(7, dtype),
    }
    node = helper.make_node(
        "QLinearMatMul", ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"], ["y"]
    )
    return node, {"a": a, "b": b}, values


@pytest.mark.parametrize("a_rows, b_columns", [(False, False), (True, False), (False, True), (True, True)])
def test_qlinear_matmul_per_row_and_column(a_rows, b_columns):
    node, inputs, values = _qlinear_matmul(a_rows, b_columns)
    a = inputs["a"].astype(np.int64) - (values["a_zero"].reshape(-1, 1) if a_rows else values["a_zero"])
    b = inputs["b"].astype(np.int64) - values["b_zero"]
    scale = (values["a_scale"].reshape(-1, 1) if a_rows else values["a_scale"]) * values["b_scale"]
    want = np.clip(np.rint((a @ b) * (scale / values["y_scale"]).astype(np.float64)) + 7, 0, 255)
    (got,) = run(node, inputs, values)
    assert got.dtype == np.uint8
    np.testing.assert_allclose(got, want, atol=1)  # the multiplier's float32 rounding may move a tie


def test_qlinear_matmul_traced_scales_int8():
    node, inputs, values = _qlinear_matmul(False, False, np.int8)
    check(node, {**inputs, **values}, opset=21)


def test_dynamic_quantize_linear_traced():
    x = rng.standard_normal((3, 4)).astype(np.float32) * 5 + 2
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"])
    check(node, {"x": x}, opset=11, rtol=1e-6)


# -- BitCast ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source, target", [(np.float16, np.int16), (np.uint64, np.float64), (np.int8, np.uint8), (np.float32, np.uint32)]
)
def test_bitcast_keeps_the_bits(source, target):
    x = (
        (rng.standard_normal(6) * 100).view(np.uint64)
        if source == np.uint64
        else (rng.standard_normal(6) * 100).astype(source)
    )
    node = helper.make_node("BitCast", ["x"], ["y"], to=helper.np_dtype_to_tensor_dtype(np.dtype(target)))
    (got,) = run(node, {"x": x}, opset=26)
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))
    assert got.dtype == target


def test_bitcast_refuses_a_different_width():
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64)
    with pytest.raises(kiln.KilnError):
        run(node, {"x": np.zeros(2, np.float32)}, opset=26)


# -- LpNormalization, Det, TensorScatter -----------------------------------------------------
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_zero_norm_gives_zero(p):
    x = np.array([[0.0, 0.0, 0.0], [-3.0, 4.0, 0.0]], np.float64)
    (got,) = run(helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=1), {"x": x}, opset=22)
    norm = np.abs(x[1]).sum() if p == 1 else 5.0
    np.testing.assert_allclose(got, [[0, 0, 0], x[1] / norm])


def test_lp_normalization_refuses_p_3():
    with pytest.raises(kiln.UnsupportedError, match="p must be 1 or 2"):
        run(helper.make_node("LpNormalization", ["x"], ["y"], p=3), {"x": np.ones(3, np.float32)})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_pivots_and_batches(dtype):
    x = rng.standard_normal((2, 3, 5, 5)).astype(dtype)
    x[0, 0, 0, 0] = 0.0  # needs a row exchange
    x[0, 1, 3] = x[0, 1, 1] * 2  # singular
    x[1, 2] = np.triu(x[1, 2])
    (got,) = run(helper.make_node("Det", ["x"], ["y"]), {"x": x}, opset=22)
    assert got.dtype == dtype and got.shape == (2, 3)
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_det_of_a_zero_matrix_and_a_1x1():
    (got,) = run(helper.make_node("Det", ["x"], ["y"]), {"x": np.zeros((3, 3), np.float32)})
    assert got == 0.0
    (got,) = run(helper.make_node("Det", ["x"], ["y"]), {"x": np.full((4, 1, 1), -2.5, np.float32)})
    np.testing.assert_array_equal(got, np.full(4, -2.5, np.float32))


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_traced_write_indices(mode):
    cache = rng.standard_normal((3, 2, 6, 4)).astype(np.float32)
    update = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    indices = np.array([0, 3, 5 if mode == "circular" else 2], np.int64)
    node = helper.make_node("TensorScatter", ["cache", "update", "indices"], ["y"], mode=mode)
    check(node, {"cache": cache, "update": update, "indices": indices}, opset=24)


def test_tensor_scatter_axis_last_without_indices():
    cache = rng.standard_normal((2, 3, 5)).astype(np.float32)
    update = rng.standard_normal((2, 3, 2)).astype(np.float32)
    node = helper.make_node("TensorScatter", ["cache", "update"], ["y"], axis=-1)
    check(node, {"cache": cache, "update": update}, opset=24)


@pytest.mark.skipif("ConvInteger" not in kiln.onnx.supported_ops(), reason="QLinearConv builds on ConvInteger")
def test_qlinear_conv_per_channel_scale_and_bias():
    x = rng.integers(0, 255, (1, 2, 5, 5), endpoint=True).astype(np.uint8)
    w = rng.integers(-128, 127, (3, 2, 3, 3), endpoint=True).astype(np.int8)
    values = {
        "x_scale": np.float32(0.02),
        "x_zero": np.uint8(120),
        "w_scale": rng.uniform(0.001, 0.01, 3).astype(np.float32),
        "w_zero": np.zeros(3, np.int8),
        "y_scale": np.float32(0.05),
        "y_zero": np.uint8(100),
        "bias": rng.integers(-500, 500, 3).astype(np.int32),
    }
    names = ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"]
    node = helper.make_node("QLinearConv", names, ["y"], pads=[1, 1, 1, 1], strides=[2, 1])
    check(node, {"x": x}, {"w": w, **values}, opset=10)
