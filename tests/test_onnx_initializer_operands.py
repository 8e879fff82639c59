"""Every ONNX handler with operands that may be initializers, run with all but one of its
operands as initializers and that one a graph input.

ONNX's backend suite feeds every operand as a graph input, so a handler only ever sees
traced values there; real models hold weights, tables and class weights as initializers
next to traced activations and indices. A handler written in numpy must then work for a
numpy array indexed, gathered or written through a traced value (``np.take(weight,
target)``, ``flat[indices] = x``), where numpy itself would try to read the traced value.
The oracle is each case's own expected outputs (computed by ONNX's numpy reference code).
An operand kiln needs at import time (a shape, axes, K) may be refused, with the error that
says so; nothing else may fail.
"""

import os
import warnings

import numpy as np
import onnx
import pytest
import yaml
from onnx import numpy_helper

import kiln
import kiln.onnx
from kiln.onnx.random_state import draws_random

FAILURES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_expected_failures")
# The backend cases kiln fails, but for those it fails only because an operand it needs at
# import time is a graph input there (OneHot's depth): here that operand is an initializer.
KNOWN_FAILURES = set()
for _file in os.listdir(FAILURES_DIR):
    with open(os.path.join(FAILURES_DIR, _file)) as f:
        KNOWN_FAILURES |= {name for name, why in (yaml.safe_load(f) or {}).items() if "graph input" not in str(why)}


def node_cases():
    """One case of ONNX's node suite per op type (the first with the most operands), for the op types with two or
    more tensor operands, leaving out the cases kiln is known to fail for other reasons."""
    from onnx.backend.test.case import node  # noqa: PLC0415 (generating the cases takes a few seconds)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators' own overflow warnings
        cases = node.collect_testcases(None)
    chosen = {}
    for case in cases:
        if case.name in KNOWN_FAILURES or case.name.endswith("_expanded") or not case.data_sets:
            continue
        if draws_random(case.model.graph.node):  # its expected outputs are the reference's own random draws
            continue
        inputs, outputs = case.data_sets[0]
        graph = case.model.graph
        tensors = all(isinstance(a, (np.ndarray, np.generic)) for a in list(inputs) + list(outputs))
        if len(graph.node) != 1 or len(graph.input) < 2 or len(inputs) != len(graph.input) or not tensors:
            continue
        op_type = graph.node[0].op_type
        if op_type not in chosen or len(graph.input) > len(chosen[op_type].model.graph.input):
            chosen[op_type] = case
    return [(case, k) for case in chosen.values() for k in range(len(case.model.graph.input))]


CASES = node_cases()


def with_one_graph_input(model, inputs, k):
    """`model` with every graph input but the `k`th an initializer holding its case value."""
    mixed = onnx.ModelProto()
    mixed.CopyFrom(model)
    mixed.ir_version = max(mixed.ir_version, 4)  # from IR 4 on an initializer need not be an input
    graph = mixed.graph
    declared = list(graph.input)
    for j, (info, value) in enumerate(zip(declared, inputs)):
        if j != k:
            graph.initializer.append(numpy_helper.from_array(value, info.name))
    del graph.input[:]
    graph.input.append(declared[k])
    return mixed


def test_the_cases_cover_the_handlers_that_index_by_an_operand():
    covered = {case.model.graph.node[0].op_type for case, _ in CASES}
    wanted = {"Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND", "OneHot"}
    wanted |= {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "MaxUnpool", "RoiAlign", "GridSample"}
    assert wanted <= covered, sorted(wanted - covered)


@pytest.mark.parametrize("case, k", CASES, ids=[f"{case.name}-{case.model.graph.input[k].name}" for case, k in CASES])
def test_a_handler_with_one_operand_traced_and_the_others_initializers_gives_the_reference(case, k):
    inputs, outputs = ([np.asarray(a) for a in values] for values in case.data_sets[0])
    model = with_one_graph_input(case.model, inputs, k)
    try:
        got = kiln.onnx.load(model)(inputs[k])
    except kiln.UnsupportedError as exc:
        if "must be known when the model is imported" in str(exc):
            return  # a static operand (shape, axes, K) fed at run time: refused by name, as it must be
        raise
    assert len(got) == len(outputs)
    for value, want in zip(got, outputs):
        assert value.shape == want.shape and value.dtype == want.dtype
        np.testing.assert_allclose(
            value.astype(np.float64), want.astype(np.float64), rtol=case.rtol, atol=max(case.atol, 1e-6)
        )
