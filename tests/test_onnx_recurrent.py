"""ONNX RNN, GRU and LSTM through kiln.onnx.load, beyond what ONNX's backend suite covers:
both directions, layout 1, initial states, peepholes, input_forget, clip, every activation
function with its alpha and beta, and sequence_lens (known at import and a graph input).
Each result is compared with onnxruntime's on random weights."""

import copy

import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import kiln
import kiln.onnx

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUTPUTS = {"RNN": 2, "GRU": 2, "LSTM": 3}


def recurrent_model(
    op_type,
    *,
    seq_length=4,
    batch_size=3,
    input_size=2,
    hidden_size=5,
    direction="forward",
    layout=0,
    bias=True,
    sequence_lens=None,
    lens_as_input=False,
    initial_h=False,
    initial_c=False,
    peepholes=False,
    outputs=None,
    opset=14,
    dtype=np.float32,
    scale=1.0,
    **attributes,
):
    """A one-node `op_type` model on random weights: X (and sequence_lens where `lens_as_input`)
    are graph inputs, the rest initializers. Returns the model and its inputs."""
    num_directions = 2 if direction == "bidirectional" else 1
    gates = GATES[op_type]
    time_major = (seq_length, batch_size) if layout == 0 else (batch_size, seq_length)
    state_shape = (
        (num_directions, batch_size, hidden_size) if layout == 0 else (batch_size, num_directions, hidden_size)
    )

    rng = np.random.default_rng(0)  # each model's data whatever tests run before it

    def random(*shape):
        return (rng.uniform(-1, 1, shape) * scale).astype(dtype)

    inputs = {"X": random(*time_major, input_size)}
    weights = {
        "W": random(num_directions, gates * hidden_size, input_size),
        "R": random(num_directions, gates * hidden_size, hidden_size),
    }
    if bias:
        weights["B"] = random(num_directions, 2 * gates * hidden_size)
    if sequence_lens is not None:
        (inputs if lens_as_input else weights)["sequence_lens"] = np.asarray(sequence_lens, np.int32)
    if initial_h:
        weights["initial_h"] = random(*state_shape)
    if initial_c:
        weights["initial_c"] = random(*state_shape)
    if peepholes:
        weights["P"] = random(num_directions, 3 * hidden_size)
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][: 6 if op_type != "LSTM" else 8]
    names = [name if name in inputs or name in weights else "" for name in order]
    while names[-1] == "":
        names.pop()
    outputs = outputs or ["Y", "Y_h", "Y_c"][: N_OUTPUTS[op_type]]
    if layout:
        attributes["layout"] = layout
    node = helper.make_node(op_type, names, outputs, direction=direction, hidden_size=hidden_size, **attributes)
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    y_shape = (seq_length, num_directions, batch_size, hidden_size)
    if layout:
        y_shape = (batch_size, seq_length, num_directions, hidden_size)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in inputs.items()
        ],
        [
            helper.make_tensor_value_info(o, element, shape)
            for o, shape in zip(outputs, [y_shape, state_shape, state_shape])
            if o
        ],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model, inputs


def assert_like_onnxruntime(model, inputs, rtol=1e-4, atol=1e-5):
    got = kiln.onnx.load(model)(*inputs.values())
    if any(a.name == "layout" and a.i == 1 for a in model.graph.node[0].attribute):
        want = batch_major_outputs(model, run_onnxruntime(*time_major_equivalent(model, inputs)))
    else:
        want = run_onnxruntime(model, inputs)
    assert_close(got, want, rtol, atol)


def run_onnxruntime(model, inputs):
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def assert_close(got, want, rtol, atol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def time_major_equivalent(model, inputs):
    """`model` (layout 1) in layout 0 with its batch-major inputs transposed to match, for
    onnxruntime, which has no layout 1."""
    model = copy.deepcopy(model)
    node = model.graph.node[0]
    kept = [a for a in node.attribute if a.name != "layout"]
    del node.attribute[:]
    node.attribute.extend(kept)
    for tensor in model.graph.initializer:
        if tensor.name in ("initial_h", "initial_c"):
            tensor.CopyFrom(numpy_helper.from_array(np.swapaxes(numpy_helper.to_array(tensor), 0, 1), tensor.name))
    inputs = dict(inputs, X=np.swapaxes(inputs["X"], 0, 1))
    graph_x = next(v for v in model.graph.input if v.name == "X")
    graph_x.CopyFrom(helper.make_tensor_value_info("X", graph_x.type.tensor_type.elem_type, inputs["X"].shape))
    outputs = [helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None) for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return model, inputs


def batch_major_outputs(model, outputs):
    """Layout 0's Y, Y_h, Y_c in layout 1."""
    names = [o.name for o in model.graph.output]
    return [np.transpose(v, (2, 0, 1, 3)) if n == "Y" else np.swapaxes(v, 0, 1) for n, v in zip(names, outputs)]


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_initial_states(op_type, direction):
    model, inputs = recurrent_model(op_type, direction=direction, initial_h=True, initial_c=op_type == "LSTM")
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
def test_layout_1_bidirectional(op_type):
    model, inputs = recurrent_model(
        op_type, direction="bidirectional", layout=1, initial_h=True, initial_c=op_type == "LSTM"
    )
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
def test_no_bias_and_only_some_outputs(op_type):
    model, inputs = recurrent_model(op_type, bias=False, outputs=["", "Y_h"])
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_linear_before_reset(linear_before_reset, direction):
    model, inputs = recurrent_model("GRU", direction=direction, linear_before_reset=linear_before_reset, initial_h=True)
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_peepholes_and_input_forget(direction):
    model, inputs = recurrent_model(
        "LSTM", direction=direction, peepholes=True, input_forget=1, initial_h=True, initial_c=True
    )
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
def test_clip(op_type):
    model, inputs = recurrent_model(op_type, direction="bidirectional", clip=0.3, initial_h=True)
    assert_like_onnxruntime(model, inputs)


# Each function with alpha/beta values unlike its defaults; the parameterless ones in between
# check that they consume no value.
ACTIVATION_CASES = {
    "RNN": [
        (["Relu", "Affine"], [0.5], [0.25]),
        (["LeakyRelu", "ThresholdedRelu"], [0.2, 0.1], []),
        (["ScaledTanh", "HardSigmoid"], [1.5, 0.3], [0.7, 0.4]),
        (["Elu", "Softsign"], [0.8], []),
        (["Softplus", "Sigmoid"], [], []),
        (["LeakyRelu", "HardSigmoid"], [], []),  # the defaults
    ],
    "GRU": [
        (["HardSigmoid", "Softsign", "Sigmoid", "Elu"], [0.3, 0.6], [0.4]),
        (["Sigmoid", "ScaledTanh", "HardSigmoid", "Softplus"], [1.2, 0.3], [0.5, 0.6]),
    ],
    "LSTM": [
        (["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "Affine", "Relu"], [0.3, 0.05, 0.7], [0.4, 0.2]),
        (["Sigmoid", "Elu", "ThresholdedRelu", "Sigmoid", "Tanh", "ScaledTanh"], [0.9, 0.2, 1.1], [0.8]),
    ],
}


def test_rnn_forward_uses_the_first_of_two_activations():
    # RNN's default activations are two, one per direction, whatever the direction.
    model, inputs = recurrent_model("RNN", activations=["LeakyRelu", "Affine"], activation_alpha=[0.3, 2.0])
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize(
    "op_type,activations,alpha,beta", [(op, *case) for op, cases in ACTIVATION_CASES.items() for case in cases]
)
def test_activation_functions(op_type, activations, alpha, beta):
    attributes = {"activations": activations}
    if alpha:
        attributes["activation_alpha"] = alpha
    if beta:
        attributes["activation_beta"] = beta
    model, inputs = recurrent_model(op_type, direction="bidirectional", initial_h=True, **attributes)
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("lens_as_input", [False, True])
@pytest.mark.parametrize("lens", [[4, 1, 3], [0, 2, 4]])
def test_sequence_lens_masks_the_steps_past_each_length(op_type, lens_as_input, lens):
    model, inputs = recurrent_model(
        op_type,
        direction="bidirectional",
        sequence_lens=lens,
        lens_as_input=lens_as_input,
        initial_h=True,
        initial_c=op_type == "LSTM",
    )
    assert_like_onnxruntime(model, inputs)


def test_sequence_lens_with_layout_1():
    model, inputs = recurrent_model(
        "LSTM", direction="bidirectional", layout=1, sequence_lens=[2, 4, 3], lens_as_input=True, initial_h=True
    )
    assert_like_onnxruntime(model, inputs)


def test_full_sequence_lens_known_at_import_adds_no_mask():
    model, inputs = recurrent_model("GRU", sequence_lens=[4, 4, 4])
    text = kiln.onnx.load(model).lower(*inputs.values()).text("tensor", locations=False)
    assert "kiln.select" not in text


@pytest.mark.parametrize("opset", [7, 22])
def test_opsets_before_and_after_layout(opset):
    model, inputs = recurrent_model("LSTM", direction="bidirectional", opset=opset, initial_h=True)
    assert_like_onnxruntime(model, inputs)


@pytest.mark.parametrize("dtype,tolerance", [(np.float64, 1e-12), (np.float16, 1e-2)])
@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
def test_float64_and_float16_stay_what_they_are(op_type, dtype, tolerance):
    # onnxruntime computes these in float32 only; onnx's reference implementation computes
    # them (default activations, no sequence_lens) in the input's dtype.
    model, inputs = recurrent_model(op_type, direction="bidirectional", dtype=dtype, initial_h=True)
    want = ReferenceEvaluator(model).run(None, inputs)
    assert_close(kiln.onnx.load(model)(*inputs.values()), want, tolerance, tolerance)


@pytest.mark.parametrize(
    "attributes,message",
    [
        ({"direction": "sideways"}, "direction"),
        ({"activations": ["Swish"]}, "Swish"),
        ({"activations": ["ScaledTanh"]}, "ScaledTanh"),
        ({"hidden_size": 7}, "hidden_size"),
    ],
)
def test_refused_attributes_name_the_node(attributes, message):
    model, inputs = recurrent_model("RNN", **{k: v for k, v in attributes.items() if k != "hidden_size"})
    if "hidden_size" in attributes:
        next(a for a in model.graph.node[0].attribute if a.name == "hidden_size").i = attributes["hidden_size"]
    with pytest.raises(kiln.KilnError, match=message):
        kiln.onnx.load(model)(*inputs.values())


def test_weights_as_arguments():
    # W, R, B, P and the initial state traced, not constants: the same code computes them.
    model, inputs = recurrent_model(
        "LSTM", direction="bidirectional", initial_h=True, peepholes=True, sequence_lens=[4, 2, 3]
    )
    loaded = kiln.onnx.load(model, weights="arguments")
    assert sorted(loaded.weights) == ["B", "P", "R", "W", "initial_h"]
    assert_close(loaded(*inputs.values(), loaded.weights), run_onnxruntime(model, inputs), 1e-4, 1e-5)


def test_thresholded_relu_at_its_threshold_is_zero():
    # The spec's table says x >= alpha, its ThresholdedRelu op (and onnxruntime) x > alpha.
    hidden = 2
    weights = {
        "W": np.zeros((1, hidden, 3), np.float32),
        "R": np.zeros((1, hidden, hidden), np.float32),
        "B": np.array([[1.0, 0.5, 0.0, 0.0]], np.float32),  # pre-activations 1.0 (= alpha) and 0.5
    }
    node = helper.make_node(
        "RNN", ["X", "W", "R", "B"], ["Y"], hidden_size=hidden, activations=["ThresholdedRelu"], activation_alpha=[1.0]
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", 1, [2, 1, 3])],
        [helper.make_tensor_value_info("Y", 1, [2, 1, 1, hidden])],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    assert_like_onnxruntime(model, {"X": np.ones((2, 1, 3), np.float32)})
    (y,) = kiln.onnx.load(model)(np.ones((2, 1, 3), np.float32))
    assert not y.any()
