"""ONNX convolution, pooling and resampling cases the backend suite leaves out, against
onnxruntime: traced weights (``weights="arguments"``), 1-D and 3-D grouped and dilated
convolutions, the opsets before Resize's coordinate modes (Upsample, Resize 10), MaxPool's
column-major indices, ceil-mode pools; and the errors for what kiln refuses."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

import kiln
import kiln.onnx

ort = pytest.importorskip("onnxruntime")
rng = np.random.default_rng(7)


def _model(node, inputs, initializers=(), opset=19, outputs=None):
    """A one-node model: `inputs` (name -> array) are graph inputs, `initializers` its
    weights; its outputs typed like the arrays `outputs` (untyped without them)."""
    typed = lambda name, a: helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)  # noqa: E731
    graph = helper.make_graph(
        [node],
        "case",
        [typed(n, a) for n, a in inputs.items()],
        [
            typed(o, a) if outputs else helper.make_empty_tensor_value_info(o)
            for o, a in zip(node.output, outputs or node.output)
        ],
        [numpy_helper.from_array(a, n) for n, a in dict(initializers).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(node, inputs, initializers=(), opset=19, rtol=1e-5, atol=1e-5, traced_weights=False):
    """kiln's outputs are onnxruntime's, dtype, shape and values."""
    untyped = _model(node, inputs, initializers, opset)
    session = ort.InferenceSession(untyped.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    model = _model(node, inputs, initializers, opset, expected)
    fn = kiln.onnx.load(model, weights="arguments" if traced_weights else "constants")
    got = fn(*inputs.values(), fn.weights) if traced_weights else fn(*inputs.values())
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


def _normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    "x_shape, w_shape, attributes",
    [
        ((2, 6, 17), (6, 2, 3), dict(group=3, dilations=[2], strides=[2], pads=[1, 2])),
        ((1, 4, 9, 11), (6, 2, 3, 3), dict(group=2, dilations=[2, 1], pads=[0, 1, 2, 1])),
        ((1, 6, 7, 8), (6, 1, 3, 3), dict(group=6, strides=[2, 1], auto_pad="SAME_LOWER")),
        ((1, 4, 5, 6, 7), (4, 2, 2, 3, 2), dict(group=2, strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1])),
    ],
)
def test_conv_with_traced_weights(x_shape, w_shape, attributes):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attributes)
    weights = {"w": _normal(*w_shape), "b": _normal(w_shape[0])}
    _check(node, {"x": _normal(*x_shape)}, weights, traced_weights=True)


@pytest.mark.parametrize(
    "x_shape, w_shape, attributes",
    [
        ((1, 4, 5, 6), (4, 3, 3, 3), dict(group=2, strides=[2, 3], output_padding=[1, 2], pads=[1, 0, 0, 1])),
        ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), dict(strides=[2, 1, 2], dilations=[1, 2, 1])),
        ((2, 3, 7), (3, 2, 4), dict(strides=[3], auto_pad="SAME_UPPER")),
    ],
)
def test_conv_transpose_with_traced_weights(x_shape, w_shape, attributes):
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attributes)
    _check(node, {"x": _normal(*x_shape)}, {"w": _normal(*w_shape)}, traced_weights=True)


def test_max_pool_indices_column_major_with_padding():
    node = helper.make_node(
        "MaxPool", ["x"], ["y", "indices"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], storage_order=1
    )
    _check(node, {"x": _normal(2, 3, 7, 6)}, opset=12)


@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_ceil_mode_with_padding(include_pad):
    node = helper.make_node(
        "AveragePool",
        ["x"],
        ["y"],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 0, 0],
        ceil_mode=1,
        count_include_pad=include_pad,
    )
    _check(node, {"x": _normal(1, 2, 8, 7)})


def test_lp_pool_and_global_lp_pool():
    _check(
        helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 3], p=3, pads=[1, 1, 0, 1]),
        {"x": _normal(1, 2, 5, 6)},
        rtol=1e-4,
    )
    _check(helper.make_node("GlobalLpPool", ["x"], ["y"], p=3), {"x": _normal(2, 3, 4, 5)}, rtol=1e-4)


@pytest.mark.parametrize("mode, scales", [("nearest", [1, 1, 2, 3]), ("linear", [1, 1, 2.5, 1.5])])
def test_upsample_opset_9(mode, scales):
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)
    _check(node, {"x": _normal(1, 2, 3, 4)}, {"scales": np.array(scales, np.float32)}, opset=9)


@pytest.mark.parametrize("mode, scales", [("nearest", [1, 1, 0.5, 0.6]), ("linear", [1, 1, 0.5, 2.0])])
def test_resize_opset_10(mode, scales):
    node = helper.make_node("Resize", ["x", "scales"], ["y"], mode=mode)
    _check(node, {"x": _normal(1, 2, 6, 5)}, {"scales": np.array(scales, np.float32)}, opset=10)


def test_resize_scales_that_depend_on_an_input_are_refused():
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"])
    x = _normal(1, 1, 2, 2)
    model = _model(node, {"x": x, "scales": np.ones(4, np.float32)}, outputs=[x])
    with pytest.raises(kiln.UnsupportedError, match="Resize.*'scales' must be known when the model is imported"):
        kiln.onnx.load(model)(_normal(1, 1, 2, 2), np.ones(4, np.float32))


def test_an_unknown_auto_pad_names_the_node():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], auto_pad="SAME", name="pool1")
    model = _model(node, {"x": _normal(1, 1, 4, 4)}, outputs=[_normal(1, 1, 4, 4)])
    with pytest.raises(kiln.UnsupportedError, match="'pool1' \\(MaxPool, opset 19\\): auto_pad must be one of"):
        kiln.onnx.load(model)(_normal(1, 1, 4, 4))
