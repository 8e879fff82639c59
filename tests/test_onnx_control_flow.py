"""ONNX control flow beyond the backend suite's cases: If on a traced condition, Loop
unrolled with early exits, scan outputs and outer-scope values, Scan's axes and directions
(which ONNX's reference implementation does not run), opset 8's batched Scan, and the
errors for what kiln's static shapes cannot hold."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import kiln.onnx  # noqa: E402
from kiln.errors import UnsupportedError  # noqa: E402

rng = np.random.default_rng(5)
FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def floats(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def value(name, elem_type=FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem_type, shape)


def const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name))


def make_model(nodes, inputs: dict, outputs, initializers: dict | None = None, opset: int = 18):
    """A model of `nodes`: `inputs` (name -> array) are graph inputs; `outputs` names, or a
    dict name -> float shape where shape inference cannot give it (Loop's outputs)."""
    typed = outputs if isinstance(outputs, dict) else dict.fromkeys(outputs)
    graph = helper.make_graph(
        nodes,
        "g",
        [value(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [
            helper.make_empty_tensor_value_info(n) if shape is None else value(n, FLOAT, shape)
            for n, shape in typed.items()
        ],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model)


def check(model, inputs: dict, want=None):
    """kiln's outputs equal `want`, or ONNX's reference implementation's."""
    got = kiln.onnx.load(model)(*inputs.values())
    if want is None:
        want = ReferenceEvaluator(model).run(None, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


# -- If ------------------------------------------------------------------------------------
def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def if_node(cond, then_nodes, else_nodes, out_shape=None):
    then_branch = branch("then", then_nodes, [value("t", FLOAT, out_shape)])
    else_branch = branch("else", else_nodes, [value("e", FLOAT, out_shape)])
    return helper.make_node("If", [cond], ["y"], then_branch=then_branch, else_branch=else_branch)


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_traced_condition_computes_both_branches_and_selects(cond):
    # The branches read the outer graph's traced x: a subgraph sees its enclosing scope.
    node = if_node(
        "c", [helper.make_node("Exp", ["x"], ["t"])], [helper.make_node("Neg", ["x"], ["e"])], out_shape=[2, 3]
    )
    check(
        make_model([node], {"c": np.array([cond]), "x": floats(2, 3)}, ["y"]),
        {"c": np.array([cond]), "x": floats(2, 3)},
    )


def test_if_on_a_known_condition_imports_only_the_branch_taken():
    # The branch not taken has different shapes (and an op kiln refuses): it is never run.
    then_nodes = [helper.make_node("Exp", ["x"], ["t"])]
    else_nodes = [helper.make_node("Transpose", ["x"], ["e"], perm=[1, 0])]
    node = if_node("c", then_nodes, else_nodes)
    model = make_model([node], {"x": floats(2, 3)}, ["y"], initializers={"c": np.array(True)})
    x = floats(2, 3)
    (y,) = kiln.onnx.load(model)(x)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)


def test_if_on_a_traced_condition_with_branches_of_different_shapes_is_refused():
    node = if_node(
        "c", [helper.make_node("Exp", ["x"], ["t"])], [helper.make_node("Transpose", ["x"], ["e"], perm=[1, 0])]
    )
    model = make_model([node], {"c": np.array(True), "x": floats(2, 3)}, ["y"])
    with pytest.raises(UnsupportedError, match="different shapes.*static shapes"):
        kiln.onnx.load(model)(np.array(True), floats(2, 3))
    # Passed by value, the condition picks one branch and the model compiles.
    x = floats(2, 3)
    (y,) = kiln.onnx.load(model, static_inputs=["c"])(np.array(False), x)
    np.testing.assert_array_equal(y, x.T)


# -- Loop ----------------------------------------------------------------------------------
def loop_body(nodes, carried: list, scanned: list, shape):
    """A Loop body: (iteration, cond_in, *carried) -> (cond_out, *carried outputs, *scanned),
    every carried and scanned value of `shape` (the checker wants the body's shapes)."""
    inputs = [value("i", INT64, []), value("cond_in", BOOL, [])] + [value(n + "_in", FLOAT, shape) for n in carried]
    outputs = [value("cond_out", BOOL, [])] + [value(n + "_out", FLOAT, shape) for n in carried]
    outputs += [value(n, FLOAT, shape) for n in scanned]
    return helper.make_graph(nodes, "body", inputs, outputs)


def test_loop_unrolls_carried_values_and_stacks_scan_outputs():
    # acc <- acc * x + i, with x from the outer scope; each step's acc is a scan output.
    body = loop_body(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Cast", ["i"], ["i_f"], to=FLOAT),
            helper.make_node("Mul", ["acc_in", "x"], ["scaled"]),
            helper.make_node("Add", ["scaled", "i_f"], ["acc_out"]),
            helper.make_node("Identity", ["acc_out"], ["step"]),
        ],
        ["acc"],
        ["step"],
        [3],
    )
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "steps"], body=body)
    inputs = {"x": floats(3), "acc0": floats(3)}
    model = make_model([node], inputs, {"acc": [3], "steps": [4, 3]}, initializers={"M": np.array(4, np.int64)})
    # By hand: ONNX's reference implementation runs no iteration when cond is left out.
    steps, acc = [], inputs["acc0"]
    for i in range(4):
        acc = acc * inputs["x"] + np.float32(i)
        steps.append(acc)
    check(model, inputs, [acc, np.stack(steps)])


def test_loop_leaves_early_when_its_body_computes_a_known_false_condition():
    # cond_out = i < 2: computed from the iteration number, known at import time.
    body = loop_body(
        [
            const("two", np.array(2, np.int64)),
            helper.make_node("Less", ["i", "two"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
        ],
        ["acc"],
        [],
        [2, 2],
    )
    node = helper.make_node("Loop", ["M", "c", "acc0"], ["acc"], body=body)
    inputs = {"x": floats(2, 2), "acc0": floats(2, 2)}
    model = make_model([node], inputs, {"acc": [2, 2]}, initializers={"M": np.array(10, np.int64), "c": np.array(True)})
    (acc,) = check(model, inputs)
    np.testing.assert_allclose(acc, inputs["acc0"] + 3 * inputs["x"], rtol=1e-6)


def test_loop_of_no_iteration_gives_its_initial_values():
    body = loop_body(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Neg", ["v_in"], ["v_out"])],
        ["v"],
        [],
        [3],
    )
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)
    inputs = {"v0": floats(3)}
    check(make_model([node], inputs, {"v": [3]}, initializers={"M": np.array(0, np.int64)}), inputs)


def doubling_while_small_body(scanned=()):
    """v <- 2 v while sum(2 v) < 10: a condition computed from data."""
    return loop_body(
        [
            helper.make_node("Add", ["v_in", "v_in"], ["v_out"]),
            helper.make_node("ReduceSum", ["v_out"], ["total"], keepdims=0),
            const("ten", np.array(10, np.float32)),
            helper.make_node("Less", ["total", "ten"], ["cond_out"]),
        ]
        + [helper.make_node("Identity", ["v_out"], [n]) for n in scanned],
        ["v"],
        list(scanned),
        [3],
    )


@pytest.mark.parametrize("v0", [[1, 1, 1], [4, 4, 4], [-1, 0, 0], [0.1, 0.2, 0.3]])
def test_loop_whose_condition_depends_on_data_runs_its_trip_count_masked(v0):
    node = helper.make_node("Loop", ["M", "c", "v0"], ["v"], body=doubling_while_small_body())
    inputs = {"v0": np.array(v0, np.float32)}
    initializers = {"M": np.array(5, np.int64), "c": np.array(True)}
    check(make_model([node], inputs, {"v": [3]}, initializers=initializers), inputs)


def test_loop_whose_condition_depends_on_data_needs_a_trip_count_and_no_scan_outputs():
    without_m = helper.make_node("Loop", ["", "c", "v0"], ["v"], body=doubling_while_small_body())
    model = make_model([without_m], {"v0": floats(3)}, {"v": [3]}, initializers={"c": np.array(True)})
    with pytest.raises(UnsupportedError, match="no trip count M.*static trip count"):
        kiln.onnx.load(model)(floats(3))
    scanning = helper.make_node("Loop", ["M", "c", "v0"], ["v", "vs"], body=doubling_while_small_body(["s"]))
    initializers = {"M": np.array(5, np.int64), "c": np.array(True)}
    model = make_model([scanning], {"v0": floats(3)}, {"v": [3], "vs": [None, 3]}, initializers=initializers)
    with pytest.raises(UnsupportedError, match="length of its scan outputs"):
        kiln.onnx.load(model)(floats(3))


def test_loop_too_long_to_unroll_is_refused():
    body = loop_body(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Neg", ["v_in"], ["v_out"])],
        ["v"],
        [],
        [3],
    )
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)
    model = make_model([node], {"v0": floats(3)}, {"v": [3]}, initializers={"M": np.array(10**6, np.int64)})
    with pytest.raises(UnsupportedError, match="refuses more than 10000"):
        kiln.onnx.load(model)(floats(3))


def test_loop_trip_count_from_a_graph_input_needs_it_by_value():
    body = loop_body(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Neg", ["v_in"], ["v_out"])],
        ["v"],
        [],
        [3],
    )
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)
    inputs = {"M": np.array(3, np.int64), "v0": floats(3)}
    model = make_model([node], inputs, {"v": [3]})
    with pytest.raises(UnsupportedError, match="must be known when the model is imported"):
        kiln.onnx.load(model)(*inputs.values())
    (v,) = kiln.onnx.load(model, static_inputs=["M"])(*inputs.values())
    np.testing.assert_array_equal(v, -inputs["v0"])


# -- Scan ----------------------------------------------------------------------------------
def cumulative_sum_body():
    """state, x_t -> state + x_t (new state), state + x_t (scan output)."""
    return helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body",
        [value("s_in"), value("x_t")],
        [value("s_out"), value("y_t")],
    )


def test_scan_matches_the_reference_on_its_defaults():
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=cumulative_sum_body(), num_scan_inputs=1)
    inputs = {"s0": floats(2), "x": floats(5, 2)}
    check(make_model([node], inputs, ["s", "y"]), inputs)


@pytest.mark.parametrize("in_axis,in_direction,out_axis,out_direction", [(1, 1, 1, 0), (-1, 0, -1, 1), (1, 1, 0, 1)])
def test_scan_axes_and_directions(in_axis, in_direction, out_axis, out_direction):
    node = helper.make_node(
        "Scan",
        ["s0", "x"],
        ["s", "y"],
        body=cumulative_sum_body(),
        num_scan_inputs=1,
        scan_input_axes=[in_axis],
        scan_input_directions=[in_direction],
        scan_output_axes=[out_axis],
        scan_output_directions=[out_direction],
    )
    inputs = {"s0": floats(3), "x": floats(3, 4)}
    # By hand: the reference implementation runs axis 0, forward, only.
    slices = np.moveaxis(inputs["x"], in_axis, 0)
    if in_direction:
        slices = slices[::-1]
    steps = inputs["s0"] + np.cumsum(slices, axis=0)
    if out_direction:
        steps = steps[::-1]
    want = [steps[-1] if not out_direction else steps[0], np.moveaxis(steps, 0, out_axis)]
    check(make_model([node], inputs, ["s", "y"]), inputs, want)


def test_scan_of_opset_8_scans_each_batch_entry():
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=cumulative_sum_body(), num_scan_inputs=1)
    inputs = {"s0": floats(2, 3), "x": floats(2, 4, 3)}
    want = [inputs["s0"] + inputs["x"].sum(axis=1), inputs["s0"][:, None] + np.cumsum(inputs["x"], axis=1)]
    check(make_model([node], inputs, ["s", "y"], opset=8), inputs, want)


def test_scan_of_opset_8_refuses_short_sequences():
    node = helper.make_node("Scan", ["lens", "s0", "x"], ["s", "y"], body=cumulative_sum_body(), num_scan_inputs=1)
    inputs = {"s0": floats(2, 3), "x": floats(2, 4, 3)}
    model = make_model([node], inputs, ["s", "y"], initializers={"lens": np.array([4, 2], np.int32)}, opset=8)
    with pytest.raises(UnsupportedError, match="full-length sequences"):
        kiln.onnx.load(model)(*inputs.values())


def test_scan_inside_if_sees_both_enclosing_scopes():
    # A Scan in a branch whose body reads x from the main graph, two scopes up.
    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "x"], ["s_out"])], "body", [value("s_in"), value("t")], [value("s_out")]
    )
    scan = helper.make_node("Scan", ["x", "steps"], ["t"], body=body, num_scan_inputs=1)
    node = if_node("c", [scan], [helper.make_node("Identity", ["x"], ["e"])])
    inputs = {"x": floats(3)}
    model = make_model([node], inputs, ["y"], initializers={"c": np.array(True), "steps": np.zeros((3, 1), np.float32)})
    check(model, inputs, [inputs["x"] ** 4])
