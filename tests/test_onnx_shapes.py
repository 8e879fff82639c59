"""ONNX shape and indexing ops beyond the backend suite's cases: the attribute forms of old
opsets, traced data beside import-time shapes, run-time index checks, filled weights,
ops whose output shape depends on values, and inputs passed by value."""

import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_models import one_node_model  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

rng = np.random.default_rng(3)


def make_model(node, inputs: dict, initializers: dict | None = None, opset: int = 18):
    return one_node_model(node, inputs, initializers, opset)


def check(node, inputs: dict, initializers: dict | None = None, opset: int = 18, rtol: float = 0):
    """kiln's outputs equal ONNX's reference implementation's (within `rtol`)."""
    model = make_model(node, inputs, initializers, opset)
    got = kiln.onnx.load(model)(*inputs.values())
    want = ReferenceEvaluator(model).run(None, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol)
    return got


def floats(*shape):
    return rng.standard_normal(shape).astype(np.float32)


ints64 = np.int64


# -- attribute forms of old opsets ----------------------------------------------------------
def test_slice_opset_1_takes_attributes_and_clamps():
    node = helper.make_node("Slice", ["x"], ["y"], starts=[1, -100], ends=[1000, -1], axes=[0, 2])
    check(node, {"x": floats(4, 3, 5)}, opset=9)


def test_pad_opset_2_takes_attributes():
    node = helper.make_node("Pad", ["x"], ["y"], pads=[1, 0, 2, 3], mode="constant", value=1.5)
    check(node, {"x": floats(3, 4)}, opset=10)
    node = helper.make_node("Pad", ["x"], ["y"], pads=[0, 2, 0, 1], mode="reflect")
    check(node, {"x": floats(3, 4)}, opset=10)


def test_squeeze_unsqueeze_split_opset_11_take_attributes():
    check(helper.make_node("Squeeze", ["x"], ["y"], axes=[-1, 1]), {"x": floats(3, 1, 4, 1)}, opset=11)
    check(helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, -1]), {"x": floats(3, 4)}, opset=11)
    check(helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]), {"x": floats(2, 4)}, opset=11)


def test_reshape_opset_4_takes_the_shape_attribute():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x"], ["y"], shape=[0, -1])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 4)])
    (y,) = kiln.onnx.load(model)(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(y, np.arange(24, dtype=np.float32).reshape(2, 12))


# -- traced data, import-time shapes ----------------------------------------------------------
def test_slice_negative_steps_on_traced_data():
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    constants = {
        "starts": np.array([-1, 100, 3], ints64),
        "ends": np.array([-1000, 0, 1], ints64),
        "axes": np.array([0, 1, -1], ints64),
        "steps": np.array([-2, -1, -1], ints64),
    }
    check(node, {"x": floats(5, 4, 6)}, constants)


@pytest.mark.parametrize(
    "shape, axis, start, end, step",
    [((3, 5), 1, -6, -7, -3), ((3, 3), 1, -(2**31), -5, -1), ((1, 2), 1, -7, -3, -1), ((0, 3), 1, -5, -5, -2)],
)
def test_slice_backward_clamps_the_start_as_the_spec_says(shape, axis, start, end, step):
    # A backward start before the first element clamps to it (the spec's formula, and
    # onnxruntime); ONNX's Python reference slices as Python does and keeps nothing.
    ort = pytest.importorskip("onnxruntime")
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    values = {"starts": start, "ends": end, "axes": axis, "steps": step}
    model = make_model(node, {"x": floats(*shape)}, {k: np.array([v], ints64) for k, v in values.items()})
    x = floats(*shape)
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    (got,) = kiln.onnx.load(model)(x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_pad_crops_with_negative_pads_and_takes_a_traced_value():
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")
    model = make_model(
        node, {"x": floats(4, 5), "value": np.array(0, np.float32)}, {"pads": np.array([-1, 2, 1, -2], ints64)}
    )
    x = floats(4, 5)
    (y,) = kiln.onnx.load(model)(x, np.array(2.5, np.float32))
    np.testing.assert_array_equal(y, np.pad(x[1:, :3], [(0, 1), (2, 0)], constant_values=2.5))
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode="wrap")
    check(node, {"x": floats(2, 3, 4)}, {"pads": np.array([2, 1, 3, 0], ints64), "axes": np.array([-1, 1], ints64)})


def test_reshape_allowzero_keeps_a_real_zero():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)
    check(node, {"x": np.zeros((0, 3), np.float32)}, {"shape": np.array([3, 0], ints64)})


def test_split_num_outputs_gives_a_smaller_last_part():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
    check(node, {"x": floats(7, 2)})


def test_reverse_sequence_with_traced_lengths():
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1)
    check(node, {"x": floats(3, 4, 2), "lens": np.array([4, 1, 3], ints64)})


def test_one_hot_with_traced_indices_and_values():
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=0)
    inputs = {"i": np.array([[0, -1], [5, 2]], ints64), "values": np.array([-1.0, 3.0], np.float32)}
    check(node, inputs, {"depth": np.array(4, ints64)})


# -- gathers and scatters ------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_reductions_combine_repeated_indices(reduction):
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)
    i = np.array([[1, 1, -3], [0, 2, 2]], ints64) if reduction != "none" else np.array([[1, 0, -1]] * 2, ints64)
    # kiln's np.add.at sums the updates of one element before adding them, where the reference
    # adds them one by one: the same up to rounding
    check(node, {"x": floats(2, 3), "i": i, "u": floats(2, 3)}, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    i = np.array([[1], [-4]], ints64) if reduction == "none" else np.array([[1], [1], [-4]], ints64)
    check(node, {"x": floats(4, 3), "i": i, "u": floats(len(i), 3)}, rtol=1e-6)


def test_scatter_into_a_constant_with_traced_updates():
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    check(node, {"u": floats(2)}, {"x": np.zeros(5, np.float32), "i": np.array([[4], [0]], ints64)})


def test_gather_nd_batch_dims_and_an_embedding_table():
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    check(node, {"x": floats(2, 3, 4), "i": np.array([[[2], [-1]], [[0], [1]]], ints64)})
    node = helper.make_node("Gather", ["table", "i"], ["y"])
    check(node, {"i": np.array([[3, -1], [0, 2]], np.int32)}, {"table": floats(5, 4)})


@pytest.mark.parametrize(
    "op, data_shape, indices, attributes",
    [
        ("Gather", (4, 3), np.array([0, 4], ints64), {"axis": 0}),
        ("Gather", (4, 3), np.array([-4, -5], ints64), {"axis": 0}),
        ("GatherElements", (4, 3), np.array([[0, 3, 0]], ints64), {"axis": 1}),
        ("GatherND", (4, 3), np.array([[1, 3]], ints64), {}),
    ],
)
def test_an_index_out_of_range_is_an_error_when_the_model_runs(op, data_shape, indices, attributes):
    node = helper.make_node(op, ["x", "i"], ["y"], **attributes)
    model = make_model(node, {"x": floats(*data_shape), "i": indices})
    f = kiln.onnx.load(model)
    with pytest.raises(kiln.OutOfBoundsError):
        f(floats(*data_shape), indices)


def test_a_scatter_index_out_of_range_is_an_error_when_the_model_runs():
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="add")
    inputs = {"x": floats(3, 2), "i": np.array([[3, 0]], ints64), "u": floats(1, 2)}
    f = kiln.onnx.load(make_model(node, inputs))
    with pytest.raises(kiln.OutOfBoundsError):
        f(*inputs.values())


# -- values known at import time -------------------------------------------------------------
def test_constant_of_shape_fills_a_large_weight_without_materializing_it():
    shape = np.array([2048, 2048], ints64)
    value = numpy_helper.from_array(np.array([0.25], np.float32))
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w"], value=value),
        helper.make_node("Add", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 2048])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 2048])],
        [numpy_helper.from_array(shape, "shape")],
    )
    f = kiln.onnx.load(helper.make_model(graph))
    x = floats(2048, 2048)
    text = f.lower(x).text()
    assert "kiln.constant dense<2.500000e-01> : tensor<f32>" in text or "dense<0.25> : tensor<f32>" in text
    start = time.perf_counter()
    (y,) = f(x)
    assert time.perf_counter() - start < 30
    np.testing.assert_array_equal(y, x + np.float32(0.25))


def test_value_dependent_shapes_are_computed_on_constants_and_refused_on_traced_values():
    table = np.array([[0, 2, 0], [1, 0, 3]], np.float32)
    nodes = [helper.make_node("NonZero", ["t"], ["i"]), helper.make_node("Add", ["x", "i"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 3])],
        [numpy_helper.from_array(table, "t")],
    )
    x = np.ones((2, 3), ints64)
    (y,) = kiln.onnx.load(helper.make_model(graph))(x)
    np.testing.assert_array_equal(y, np.array(np.nonzero(table)) + 1)
    model = make_model(helper.make_node("NonZero", ["t"], ["i"]), {"t": table})
    with pytest.raises(kiln.UnsupportedError, match=r"NonZero.*must be known when the model is imported"):
        kiln.onnx.load(model)(table)


def test_unique_on_a_constant_in_order_of_first_occurrence():
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], sorted=0)
    model = make_model(node, {}, {"x": np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], np.float32)})
    got = kiln.onnx.load(model)()
    want = ReferenceEvaluator(model).run(None, {})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_static_inputs_compile_once_per_value():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    model = make_model(node, {"x": floats(2, 6), "shape": np.array([3, 4], ints64)})
    with pytest.raises(kiln.UnsupportedError, match="'shape' must be known when the model is imported"):
        kiln.onnx.load(model)(floats(2, 6), np.array([3, 4], ints64))
    f = kiln.onnx.load(model, static_inputs=["shape"])
    x = floats(2, 6)
    assert f(x, np.array([3, 4], ints64))[0].shape == (3, 4)
    assert f(x, shape=np.array([4, -1], ints64))[0].shape == (4, 3)
    assert f(x, np.array([3, 4], ints64))[0].shape == (3, 4)
    assert len(f.compilations) == 2
    with pytest.raises(kiln.ArgumentError, match="not graph inputs"):
        kiln.onnx.load(model, static_inputs=["nope"])


@pytest.mark.parametrize("value", [3.0, 0.0])
def test_non_zero_of_a_scalar_constant(value):
    model = make_model(helper.make_node("NonZero", ["t"], ["i"]), {}, {"t": np.array(value, np.float32)})
    (got,) = kiln.onnx.load(model)()
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, {})[0])
    assert got.shape == (0, int(value != 0)) and got.dtype == np.int64


def test_compress_selects_traced_data_by_a_constant_condition():
    node = helper.make_node("Compress", ["x", "c"], ["y"], axis=-1)
    check(node, {"x": floats(2, 5)}, {"c": np.array([True, False, True, True], bool)})
    node = helper.make_node("Compress", ["x", "c"], ["y"])
    check(node, {"x": floats(2, 3)}, {"c": np.array([False, True, False, False, True], bool)})
    model = make_model(node, {"x": floats(2, 3), "c": np.array([True, False], bool)})
    with pytest.raises(kiln.UnsupportedError, match=r"Compress.*must be known when the model is imported"):
        kiln.onnx.load(model)(floats(2, 3), np.array([True, False], bool))
