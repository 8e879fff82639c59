"""ONNX reductions, scans, TopK and losses through kiln.onnx.load, beyond what ONNX's backend
suite covers: the opsets where attributes became inputs, the dtypes ONNX keeps where numpy
would widen, ties and empty inputs. Every result is compared with ONNX's reference
implementation (``onnx.reference``), dtype included."""

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import kiln
import kiln.onnx

RNG = np.random.default_rng(0)


def run_both(op_type, inputs, constants=None, opset=18, n_outputs=1, order=None, **attributes):
    """The one-node model `op_type` run by kiln and by onnx's reference: `inputs` are graph
    inputs (name -> array), `constants` initializers, the node's inputs in that order unless
    `order` (their names) says otherwise; returns the two lists of outputs."""
    constants = constants or {}
    names = order or list(inputs) + list(constants)
    outputs = [f"y{k}" for k in range(n_outputs)]
    node = helper.make_node(op_type, names, outputs, **attributes)

    def model(output_infos):
        graph = helper.make_graph(
            [node],
            "g",
            [value_info(n, a) for n, a in inputs.items()],
            output_infos,
            [numpy_helper.from_array(np.asarray(a), n) for n, a in constants.items()],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

    want = ReferenceEvaluator(model([helper.make_empty_tensor_value_info(o) for o in outputs])).run(None, inputs)
    # onnx.checker wants the outputs' types: the reference's.
    got = kiln.onnx.load(model([value_info(o, np.asarray(w)) for o, w in zip(outputs, want)]))(*inputs.values())
    return got, want


def value_info(name, array):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def assert_same(got, want, rtol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=1e-6)


REDUCTIONS = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSum",
    "ReduceLogSumExp",
]


def data_for(op_type, dtype, shape=(3, 4, 2)):
    if np.dtype(dtype).kind in "iu":
        low = 0 if np.dtype(dtype).kind == "u" or op_type == "ReduceL2" else -5
        return RNG.integers(low, 6, shape).astype(dtype)
    if op_type == "ReduceLogSum":
        return RNG.uniform(0.5, 2.0, shape).astype(dtype)
    return RNG.normal(size=shape).astype(dtype)


@pytest.mark.parametrize("op_type", REDUCTIONS)
@pytest.mark.parametrize("opset", [11, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_attribute_or_input(op_type, opset, keepdims):
    x = data_for(op_type, np.float32)
    axes = np.array([0, -1], np.int64)
    axes_input = opset >= (13 if op_type == "ReduceSum" else 18)
    if axes_input:
        got, want = run_both(op_type, {"x": x}, {"axes": axes}, opset=opset, keepdims=keepdims)
    else:
        got, want = run_both(op_type, {"x": x}, opset=opset, axes=list(axes), keepdims=keepdims)
    assert_same(got, want, rtol=1e-5)


@pytest.mark.parametrize("op_type", [op for op in REDUCTIONS if op not in ("ReduceLogSum", "ReduceLogSumExp")])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_reduce_keeps_integer_dtypes(op_type, dtype):
    x = data_for(op_type, dtype)
    if op_type == "ReduceSumSquare":
        # onnx's reference widens here (np.sum of np.square) where the spec says T -> T.
        (got,) = kiln.onnx.load(one_node_model(op_type, x, keepdims=0))(x)
        assert_same([got], [np.sum(x * x, axis=1, dtype=x.dtype)])
        return
    got, want = run_both(op_type, {"x": x}, {"axes": np.array([1], np.int64)}, keepdims=0)
    assert_same(got, want)


def one_node_model(op_type, x, opset=18, **attributes):
    """`op_type` over axis 1 of `x` (axes an initializer)."""
    reduced_shape = list(x.shape)
    reduced_shape[1:2] = [1] if attributes.get("keepdims", 1) else []
    node = helper.make_node(op_type, ["x", "axes"], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [value_info("x", x)],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(x.dtype), reduced_shape)],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("op_type", REDUCTIONS)
def test_reduce_float16_and_float64(op_type):
    for dtype, rtol in ((np.float16, 2e-3), (np.float64, 1e-12)):
        x = data_for(op_type, dtype)
        got, want = run_both(op_type, {"x": x}, {"axes": np.array([2], np.int64)})
        assert_same(got, want, rtol=rtol)


@pytest.mark.parametrize("op_type", REDUCTIONS)
def test_noop_with_empty_axes_applies_only_the_elementwise_part(op_type):
    x = data_for(op_type, np.float32)
    got, want = run_both(op_type, {"x": x}, noop_with_empty_axes=1)
    assert_same(got, want, rtol=1e-5)


@pytest.mark.parametrize("op_type", ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32])
def test_reduce_over_an_empty_axis_gives_the_identity(op_type, dtype):
    if op_type in ("ReduceSum", "ReduceProd") and dtype == np.uint8:
        pytest.skip("ReduceSum and ReduceProd do not take uint8")
    x = np.zeros((2, 0, 3), dtype)
    got, want = run_both(op_type, {"x": x}, {"axes": np.array([1], np.int64)}, keepdims=1)
    assert_same(got, want)


def test_reduce_mean_of_integers_truncates_toward_zero():
    x = np.array([[-7, 2], [5, 2], [-1, 0]], np.int32)
    got, want = run_both("ReduceMean", {"x": x}, {"axes": np.array([1], np.int64)}, keepdims=0)
    assert_same(got, want)
    np.testing.assert_array_equal(got[0], [-2, 3, 0])


def test_reduce_log_sum_exp_of_infinities():
    # log(exp(-inf) + exp(-inf)) is log(0) = -inf (onnx's reference makes it NaN from -inf - -inf).
    x = np.array([[np.inf, 1.0], [-np.inf, -np.inf], [-np.inf, 2.0], [-np.inf, np.inf]], np.float32)
    (got,) = kiln.onnx.load(one_node_model("ReduceLogSumExp", x, keepdims=0))(x)
    with np.errstate(divide="ignore"):
        want = np.log(np.sum(np.exp(x.astype(np.float64)), axis=1)).astype(np.float32)
    assert_same([got], [want])


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64])
def test_arg_extremes_break_ties_by_select_last_index(op_type, select_last_index, dtype):
    x = RNG.integers(0, 3, (4, 5, 3)).astype(dtype)  # many ties
    for axis, keepdims in ((1, 1), (-1, 0), (0, 0)):
        got, want = run_both(
            op_type, {"x": x}, opset=13, axis=axis, keepdims=keepdims, select_last_index=select_last_index
        )
        assert_same(got, want)


def test_arg_max_before_select_last_index():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    got, want = run_both("ArgMax", {"x": x}, opset=11, axis=1)
    assert_same(got, want)


@pytest.mark.parametrize("op_type", ["CumSum", "CumProd"])
@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.uint64])
@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scans(op_type, dtype, exclusive, reverse):
    x = RNG.integers(1, 4, (3, 4)).astype(dtype)
    opset = 26 if op_type == "CumProd" else 14
    for axis in (np.array(1, np.int32), np.array(-2, np.int64)):
        got, want = run_both(op_type, {"x": x}, {"axis": axis}, opset=opset, exclusive=exclusive, reverse=reverse)
        assert_same(got, want)


def test_top_k_opset_1_takes_k_as_an_attribute():
    x = RNG.normal(size=(3, 5)).astype(np.float32)
    got, want = run_both("TopK", {"x": x}, opset=1, n_outputs=2, k=2, axis=0)
    assert_same(got, want)


def test_top_k_opset_10_takes_k_as_an_input():
    x = RNG.normal(size=(3, 5)).astype(np.float32)
    got, want = run_both("TopK", {"x": x}, {"k": np.array([3], np.int64)}, opset=10, n_outputs=2)
    assert_same(got, want)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint64, np.float16])
def test_top_k_ties_come_in_index_order(largest, dtype):
    x = RNG.integers(0, 4, (4, 6)).astype(dtype)
    for axis, k in ((1, 4), (0, 2), (-1, 0)):
        got, want = run_both(
            "TopK", {"x": x}, {"k": np.array([k], np.int64)}, opset=11, n_outputs=2, axis=axis, largest=largest
        )
        assert_same(got, want)


LOSS_CASES = [
    ("none", None, False),
    ("sum", None, True),
    ("mean", None, False),
    ("mean", None, True),
    ("mean", -1, True),
    ("sum", 7, False),
    ("none", 1, True),
]


@pytest.mark.parametrize("reduction, ignore_index, with_weight", LOSS_CASES)
@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_losses(op_type, reduction, ignore_index, with_weight):
    n, c, d = 3, 5, 2
    x = RNG.normal(size=(n, c, d))
    target = RNG.integers(0, c, (n, d)).astype(np.int32)
    if ignore_index is not None:
        target[0, 1] = ignore_index
    inputs = {"x": x, "target": target}
    if with_weight:
        inputs["weight"] = RNG.uniform(0.5, 2.0, c)
    attributes = {"reduction": reduction}
    if ignore_index is not None:
        attributes["ignore_index"] = ignore_index
    n_outputs = 2 if op_type == "SoftmaxCrossEntropyLoss" else 1
    got, want = run_both(op_type, inputs, opset=13, n_outputs=n_outputs, **attributes)
    assert_same(got, want, rtol=1e-10)


def test_loss_in_float16():
    x = RNG.normal(size=(4, 3)).astype(np.float16)
    target = np.array([0, 2, 1, 2], np.int64)
    got, want = run_both("SoftmaxCrossEntropyLoss", {"x": x, "target": target}, opset=13)
    assert_same(got, want, rtol=2e-3)


def test_axes_from_a_graph_input_are_refused_clearly():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [2, 3]), helper.make_tensor_value_info("axes", 7, [1])],
        [helper.make_tensor_value_info("y", 1, [2, 1])],
    )
    f = kiln.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    with pytest.raises(kiln.UnsupportedError, match="'axes' must be known"):
        f(np.ones((2, 3), np.float32), np.array([1]))


def test_nan_is_the_largest_value_and_propagates():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 0.5, 2.0, -1.0]], np.float32)
    k = {"k": np.array([3], np.int64)}
    for largest in (0, 1):
        assert_same(*run_both("TopK", {"x": x}, k, opset=11, n_outputs=2, largest=largest))
    for op_type in ("ArgMax", "ArgMin"):
        for select_last_index in (0, 1):
            assert_same(*run_both(op_type, {"x": x}, opset=13, axis=1, select_last_index=select_last_index))
    for op_type in ("ReduceMax", "ReduceMin"):
        assert_same(*run_both(op_type, {"x": x}, {"axes": np.array([1], np.int64)}))


@pytest.mark.parametrize("op_type", ["ReduceLogSum", "ReduceLogSumExp"])
def test_log_reductions_of_integers_before_opset_28(op_type):
    # onnx's reference refuses integers here; opsets before 28 allow them: the float64 result, truncated.
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    (got,) = kiln.onnx.load(one_node_model(op_type, x, opset=18, keepdims=0))(x)
    wide = x.astype(np.float64)
    want = np.log(np.sum(wide if op_type == "ReduceLogSum" else np.exp(wide), axis=1)).astype(np.int32)
    assert_same([got], [want])


def onnxruntime_outputs(op_type, inputs, constants, opset, n_outputs, order, **attributes):
    """The same one-node model run by onnxruntime (a second oracle beside onnx.reference)."""
    ort = pytest.importorskip("onnxruntime")
    node = helper.make_node(op_type, order, [f"y{k}" for k in range(n_outputs)], **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [value_info(n, a) for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(f"y{k}") for k in range(n_outputs)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


@pytest.mark.parametrize("ignore_index", [None, 2, -1])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_losses_with_class_weights_as_an_initializer_and_the_target_a_graph_input(op_type, reduction, ignore_index):
    """The handler reads weight[target]: a constant table at a traced index."""
    n, c, d = 4, 5, 3
    x = RNG.normal(size=(n, c, d)).astype(np.float32)
    target = RNG.integers(0, c, (n, d)).astype(np.int64)
    if ignore_index is not None:
        target[0, :2] = ignore_index
    weight = RNG.uniform(0.5, 2.0, c).astype(np.float32)
    attributes = {"reduction": reduction, **({} if ignore_index is None else {"ignore_index": ignore_index})}
    n_outputs = 2 if op_type == "SoftmaxCrossEntropyLoss" else 1
    for inputs, constants in (
        ({"x": x, "target": target}, {"weight": weight}),
        ({"target": target}, {"x": x, "weight": weight}),
    ):
        got, want = run_both(op_type, inputs, constants, 13, n_outputs, ["x", "target", "weight"], **attributes)
        assert_same(got, want, rtol=1e-5)
        by_onnxruntime = onnxruntime_outputs(
            op_type, inputs, constants, 13, n_outputs, ["x", "target", "weight"], **attributes
        )
        assert_same(got, by_onnxruntime, rtol=1e-5)
