"""Small ONNX models for the importer's tests, made with onnx.helper."""

import numpy as np
import onnx
from onnx import helper, numpy_helper


def one_node_model(node, inputs: dict, initializers: dict | None = None, opset: int = 18):
    """A one-node model: `inputs` (name -> array) are graph inputs, `initializers` constants;
    shape inference gives the outputs the types the checker wants."""
    initializers = initializers or {}
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(name) for name in node.output],
        [numpy_helper.from_array(np.asarray(a), name) for name, a in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model)
