"""The nine networks of ONNX's "light" model zoo (AlexNet, DenseNet-121, Inception v1 and v2,
ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512), imported and compiled natively.

The zoo files keep their weights small by making them with ConstantOfShape (every weight one
value). Each test replaces those nodes by initializers and compiles the model once with
``weights="arguments"`` (embedding hundreds of MB of constants in the program would make the
compile slow), then runs it twice: with the filled weights, against the zoo's own reference
output for the input onnx's runner makes (np.arange(n) / n), and with random weights, against
onnxruntime, where uniform weights would hide a wrong channel or kernel order. Where the
network ends in Softmax its logits are compared too, since a confident softmax is nearly
one-hot and would hide small errors.
"""

import os
import time

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import kiln.onnx

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]


def _weights_as_initializers(model: onnx.ModelProto) -> dict:
    """Each ConstantOfShape node of `model` whose shape is an initializer replaced, in place,
    by an initializer of the value it makes; returns those values by name."""
    graph = model.graph
    initializers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    filled, kept = {}, []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in initializers:
            value = numpy_helper.to_array(helper.get_attribute_value(node.attribute[0]))
            filled[node.output[0]] = np.full(initializers[node.input[0]], value.reshape(()))
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in kept for name in node.input}
    unused = {t.name for t in graph.initializer if t.name not in used}  # the shapes
    for collection in (graph.initializer, graph.input):
        for entry in [e for e in collection if e.name in unused]:
            collection.remove(entry)
    for name, value in filled.items():
        graph.initializer.append(numpy_helper.from_array(value, name))
        # IR version 3, these files' version, lists every initializer among the graph inputs too.
        graph.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, value.shape))
    return filled


def _random_weights(weights: dict, seed: int) -> dict:
    """Random weights of the same shapes, scaled to keep the activations of a deep ReLU
    network finite and of order one: He's normal scale sqrt(2 / fan_in) for kernels and
    matrices, and values in [0.5, 1.5] for vectors (biases, and batch norm's statistics,
    whose variance must be positive)."""
    rng = np.random.default_rng(seed)
    result = {}
    for name, value in weights.items():
        if value.ndim > 1:
            fan_in = int(np.prod(value.shape[1:]))
            result[name] = (rng.standard_normal(value.shape) * np.sqrt(2.0 / fan_in)).astype(value.dtype)
        else:
            result[name] = rng.uniform(0.5, 1.5, value.shape).astype(value.dtype)
    return result


def _with_logits(model: onnx.ModelProto) -> None:
    """The input of a final Softmax added as a second graph output."""
    last = model.graph.node[-1]
    if last.op_type == "Softmax" and last.output[0] == model.graph.output[0].name:
        shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
        model.graph.output.append(helper.make_tensor_value_info(last.input[0], onnx.TensorProto.FLOAT, shape))


def _input(model: onnx.ModelProto) -> np.ndarray:
    """The input onnx's backend runner feeds the light models: arange(n) / n in float32."""
    initializers = {t.name for t in model.graph.initializer}
    (value,) = [v for v in model.graph.input if v.name not in initializers]
    shape = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
    return (np.arange(np.prod(shape)).reshape(shape) / np.prod(shape)).astype(np.float32)


def _close(got, expected, rtol=1e-3):
    """float32 agreement relative to the output's scale (a deep network's sums round differently)."""
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * float(np.abs(expected).max()))


@pytest.mark.parametrize("name", MODELS)
def test_light_model(name):
    ort = pytest.importorskip("onnxruntime")
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    model = onnx.load(path)
    x = _input(model)
    filled = _weights_as_initializers(model)
    _with_logits(model)

    start = time.perf_counter()
    fn = kiln.onnx.load(model, weights="arguments")
    got = fn(x, fn.weights)
    compiled = time.perf_counter() - start
    reference = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    _close(got[0], reference)

    weights = dict(fn.weights)
    weights.update(_random_weights(filled, seed=sum(map(ord, name))))
    start = time.perf_counter()
    got = fn(x, weights)
    ran = time.perf_counter() - start
    for name_, value in weights.items():
        for t in model.graph.initializer:
            if t.name == name_:
                t.CopyFrom(numpy_helper.from_array(value, name_))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: x})
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert np.all(np.isfinite(e)), "the random weights overflowed onnxruntime"
        _close(g, e)
    print(f"{name}: compile and first run {compiled:.1f}s, run {ran:.2f}s")
