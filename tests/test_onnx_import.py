"""kiln.onnx.load's contract: arguments, keywords, weights as constants or as an argument,
gradients through an imported model, every stage, and the errors bad models and bad
arguments get. Results are checked against numpy and onnxruntime, not against kiln."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
import kiln.onnx

RNG = np.random.default_rng(0)


def make_model(nodes, inputs, outputs, initializers=(), opset=None, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    kwargs = {"opset_imports": [helper.make_opsetid("", opset)]} if opset else {}
    return helper.make_model(graph, **kwargs)


def tensor(name, shape, elem_type=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def scaled_exp_model():
    """y = exp(x * w) + b with w, b initializers; input names that are not identifiers."""
    w = RNG.random(3).astype(np.float32)
    b = np.arange(3, dtype=np.float32)
    nodes = [
        helper.make_node("Mul", ["input.1", "w"], ["m"]),
        helper.make_node("Exp", ["m"], ["e"]),
        helper.make_node("Add", ["e", "b"], ["out:0"]),
    ]
    model = make_model(
        nodes,
        [tensor("input.1", ["N", 3])],
        [tensor("out:0", ["N", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return model, w, b


def run_onnxruntime(model, *arrays):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))


def test_positional_keyword_and_every_source_of_a_model(tmp_path):
    model, w, b = scaled_exp_model()
    x = RNG.random((5, 3)).astype(np.float32)
    want = np.exp(x * w) + b
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    for source in (model, model.SerializeToString(), str(path), path):
        f = kiln.onnx.load(source)
        (got,) = f(x)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert f.input_names == ["input.1"] and f.output_names == ["out:0"]
    (by_name,) = f(**{"input.1": x})
    np.testing.assert_array_equal(by_name, got)
    (by_parameter,) = f(input_1=x)
    np.testing.assert_array_equal(by_parameter, got)
    np.testing.assert_allclose(got, run_onnxruntime(model, x)[0], rtol=1e-6)


def test_symbolic_dimensions_retrace_per_shape():
    model, w, b = scaled_exp_model()
    f = kiln.onnx.load(model)
    for n in (0, 1, 7):
        x = RNG.random((n, 3)).astype(np.float32)
        (got,) = f(x)
        assert got.shape == (n, 3)
        np.testing.assert_allclose(got, np.exp(x * w) + b, rtol=1e-6)
    assert len(f.compilations) == 3


def test_weights_as_an_argument_change_without_recompiling_and_have_gradients():
    model, w, b = scaled_exp_model()
    f = kiln.onnx.load(model, weights="arguments")
    assert sorted(f.weights) == ["b", "w"]
    x = RNG.random((4, 3)).astype(np.float64).astype(np.float32)
    (got,) = f(x, f.weights)
    np.testing.assert_allclose(got, np.exp(x * w) + b, rtol=1e-6)
    other = {"w": -w, "b": b + 1}
    (got,) = f(x, other)
    np.testing.assert_allclose(got, np.exp(-x * w) + b + 1, rtol=1e-6)
    assert len(f.compilations) == 1

    def loss(weights, x):
        return np.sum(f(x, weights)[0])

    grads = kiln.compile(kiln.grad(loss))(f.weights, x)
    # d/dw sum(exp(x w) + b) = sum over rows of x exp(x w); d/db = number of rows.
    np.testing.assert_allclose(grads["w"], (x * np.exp(x * w)).sum(0), rtol=1e-5)
    np.testing.assert_allclose(grads["b"], np.full(3, 4.0), rtol=1e-6)


def test_every_stage_is_printable_and_located_at_the_node(tmp_path, monkeypatch):
    model, _, _ = scaled_exp_model()
    path = tmp_path / "scaled.onnx"
    onnx.save(model, path)
    f = kiln.onnx.load(path)
    lowered = f.lower(kiln.f32[2, 3])
    text = lowered.text("tensor")
    assert "kiln.exp" in text
    assert 'loc("scaled.onnx":2:0)' in text  # the Exp is the model's second node
    for stage in f.stages:
        assert lowered.text(stage)
    monkeypatch.setenv("KILN_DUMP_DIR", str(tmp_path / "dump"))
    kiln.onnx.load(path)(np.ones((2, 3), np.float32))
    assert any((tmp_path / "dump").iterdir())


def test_a_constant_graph_output_is_computed_at_import():
    c = np.array([1.5, -2.0], np.float32)
    model = make_model(
        [helper.make_node("Neg", ["c"], ["n"]), helper.make_node("Add", ["x", "n"], ["y"])],
        [tensor("x", [2])],
        [tensor("n", [2]), tensor("y", [2])],
        [numpy_helper.from_array(c, "c")],
    )
    n, y = kiln.onnx.load(model)(np.ones(2, np.float32))
    np.testing.assert_array_equal(n, -c)
    np.testing.assert_array_equal(y, 1 - c)


def test_wrong_arguments_are_named():
    model, _, _ = scaled_exp_model()
    f = kiln.onnx.load(model)
    with pytest.raises(kiln.DTypeError, match="'input.1' is float32, got an array of float64"):
        f(np.ones((2, 3)))
    with pytest.raises(kiln.ArgumentError, match=r"'input.1' has shape \['N', 3\], got \[2, 4\]"):
        f(np.ones((2, 4), np.float32))
    with pytest.raises(kiln.ArgumentError):
        f()


def test_bad_models_are_clear_errors(tmp_path):
    with pytest.raises(kiln.KilnError, match="could not read the ONNX model"):
        kiln.onnx.load(b"not a protobuf at all \xff\xff")
    with pytest.raises(kiln.KilnError, match="no such ONNX model file"):
        kiln.onnx.load(tmp_path / "missing.onnx")
    with pytest.raises(kiln.ArgumentError, match="path, bytes or an onnx.ModelProto"):
        kiln.onnx.load(42)
    unknown = make_model([helper.make_node("NoSuchOp", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])])
    with pytest.raises(kiln.KilnError, match="onnx.checker"):
        kiln.onnx.load(unknown)
    with pytest.raises(ValueError, match="weights must be"):
        kiln.onnx.load(scaled_exp_model()[0], weights="inline")


def test_unsupported_parts_name_the_node_op_and_opset():
    strings = make_model(
        [helper.make_node("Identity", ["s"], ["t"])],
        [tensor("s", [2], TensorProto.STRING)],
        [tensor("t", [2], TensorProto.STRING)],
    )
    with pytest.raises(kiln.UnsupportedError, match="graph input 's': ONNX type STRING is not supported"):
        kiln.onnx.load(strings)(np.array(["a", "b"]))
    other_domain = make_model(
        [helper.make_node("Relu", ["x"], ["y"], domain="com.example")],
        [tensor("x", [2])],
        [tensor("y", [2])],
    )
    other_domain.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(kiln.UnsupportedError, match="domain 'com.example'"):
        kiln.onnx.load(other_domain)(np.ones(2, np.float32))
    # An If on a traced condition whose branches differ in shape: refused, naming the node.
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "b", [], [tensor("z", [2])])
    longer = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["w"], axis=0)], "l", [], [tensor("w", [4])])
    if_model = make_model(
        [helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch, else_branch=longer)],
        [tensor("c", [], TensorProto.BOOL), tensor("x", [2])],
        [tensor("y", [2])],
        opset=17,
    )
    with pytest.raises(kiln.UnsupportedError, match=r"ONNX node 'choose' \(If, opset 17\)"):
        kiln.onnx.load(if_model)(np.array(True), np.ones(2, np.float32))


def test_import_kiln_does_not_import_onnx():
    import subprocess
    import sys

    code = "import sys, kiln; assert 'onnx' not in sys.modules; kiln.onnx; assert 'onnx' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_docstring_examples_print_what_they_show():
    import doctest

    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(kiln.onnx.model, "kiln.onnx.model", globs={"np": np, "kiln": kiln}) if t.examples]
    assert tests, "kiln.onnx shows no example"
    for test in tests:
        runner.run(test)
    assert runner.failures == 0


def test_opsets_before_7_are_raised_to_7_by_onnx_version_converter():
    # Opset 6's Add broadcasts B by attribute (broadcast=1); the converter makes it numpy's.
    def legacy_add(b_shape, **attributes):
        node = helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, **attributes)
        return make_model([node], [tensor("a", [2, 3, 4]), tensor("b", b_shape)], [tensor("y", [2, 3, 4])], opset=6)

    a, b = RNG.random((2, 3, 4)).astype(np.float32), RNG.random(4).astype(np.float32)
    (got,) = kiln.onnx.load(legacy_add([4]))(a, b)
    np.testing.assert_allclose(got, a + b, rtol=1e-6)
    # Broadcasting from a middle axis has no numpy equivalent the converter knows: refused, clearly.
    with pytest.raises(kiln.UnsupportedError, match="opset 6; kiln imports opset 7 and later"):
        kiln.onnx.load(legacy_add([3], axis=1))


def test_weights_given_as_an_argument_must_be_the_models_float_initializers():
    model, w, b = scaled_exp_model()
    f = kiln.onnx.load(model, weights="arguments")
    x = np.ones((2, 3), np.float32)
    with pytest.raises(kiln.ArgumentError, match=r"missing \['b'\]"):
        f(x, {"w": w})
    with pytest.raises(kiln.ArgumentError, match=r"not in the model \['bias'\]"):
        f(x, {"w": w, "b": b, "bias": b})
    with pytest.raises(kiln.DTypeError, match="weight 'w' is float32, got float64"):
        f(x, {"w": w.astype(np.float64), "b": b})
    with pytest.raises(kiln.ArgumentError, match=r"weight 'b' has shape \[3\], got \[4\]"):
        f(x, {"w": w, "b": np.zeros(4, np.float32)})


def test_arguments_that_are_not_arrays_or_not_inputs_are_named():
    f = kiln.onnx.load(scaled_exp_model()[0])
    with pytest.raises(kiln.ArgumentError, match="'input.1' takes an array of float32, got a list"):
        f([[1.0, 2.0, 3.0]])
    with pytest.raises(kiln.ArgumentError, match=r"no input 'inputx'; its inputs are \['input.1'\]"):
        f(inputx=np.ones((1, 3), np.float32))


def test_what_kiln_cannot_import_is_refused_when_the_model_loads(tmp_path):
    # An op with neither a handler nor a function body, inside a subgraph too.
    node = helper.make_node("ImageDecoder", ["x"], ["y"], name="noise")
    model = make_model([node], [tensor("x", [2])], [tensor("y", [2])], opset=22)
    with pytest.raises(kiln.UnsupportedError, match=r"'noise' \(ImageDecoder, opset 22\)"):
        kiln.onnx.load(model)
    branch = helper.make_graph([node], "b", [], [tensor("y", [2])])
    nested = make_model(
        [helper.make_node("If", ["c"], ["z"], then_branch=branch, else_branch=branch)],
        [tensor("c", [], TensorProto.BOOL), tensor("x", [2])],
        [tensor("z", [2])],
        opset=22,
    )
    with pytest.raises(kiln.UnsupportedError, match="ImageDecoder"):
        kiln.onnx.load(nested)
    too_new = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])])
    too_new.opset_import[0].version = onnx.defs.onnx_opset_version() + 2
    with pytest.raises(kiln.UnsupportedError, match="the installed onnx package knows opsets up to"):
        kiln.onnx.load(too_new)
    with pytest.raises(kiln.KilnError, match="is a directory, not an ONNX model file"):
        kiln.onnx.load(tmp_path)


def test_a_missing_onnx_package_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)  # as if it were not installed
    with pytest.raises(
        kiln.KilnError,
        match=r"need the onnx package: pip install onnx \(or, in kiln's checkout, "
        r"pip install -e '\.\[onnx\]'\)",
    ):
        kiln.onnx.load("model.onnx")
