"""kiln as an ONNX backend (``onnx.backend.base.Backend``), so that ONNX's official
backend tests run against it::

    import onnx.backend.test
    globals().update(onnx.backend.test.BackendTest(kiln.onnx.Backend, __name__).test_cases)

``prepare`` imports and compiles a model natively for the CPU; ``run`` calls it. The
``CUDA`` device is served by ``target="cuda"`` where this machine has a GPU and nvcc.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend as _OnnxBackend
from onnx.backend.base import BackendRep as _OnnxBackendRep
from onnx.backend.base import Device, DeviceType

from kiln.codegen.nvcc import check_compiler
from kiln.errors import UnsupportedError
from kiln.onnx.model import load
from kiln.runtime.cuda import CudaUnavailable, check_gpu

_TARGETS = {DeviceType.CPU: "cpu", DeviceType.CUDA: "cuda"}


class BackendRep(_OnnxBackendRep):
    """A prepared model: ``run(inputs)`` takes the graph inputs (a list in graph order, or a
    dict by name) and returns the outputs as a tuple of numpy arrays.

    ONNX's node tests feed shapes, axes, pads and counts as graph inputs, which kiln must
    know when it imports the model (its shapes are static). A model that needs them is
    compiled again with its integer and bool inputs (shapes, axes, counts, Compress's
    condition) passed by value (``static_inputs``, compiled once per distinct value), as a
    deployed model has them as initializers. Float inputs are never made constants: an
    output whose shape depends on float data (NonZero, Unique) is refused, not computed
    by numpy at import time."""

    def __init__(self, function, reload=None):
        self.function = function
        self._reload = reload

    def run(self, inputs, **kwargs):
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if not isinstance(inputs, dict):
            inputs = [np.asarray(x) for x in inputs]
        try:
            return self._call(inputs)
        except UnsupportedError as exc:
            index_like = _index_like_inputs(self.function.graph)
            if (
                self._reload is None
                or _NEEDS_CONSTANT not in str(exc)
                or set(index_like) <= set(self.function.static_inputs)
            ):
                raise
        self.function = self._reload(index_like)
        return self._call(inputs)

    def _call(self, inputs):
        return self.function(**inputs) if isinstance(inputs, dict) else self.function(*inputs)


_NEEDS_CONSTANT = "must be known when the model is imported"


def _index_like_inputs(graph) -> tuple:
    return tuple(v.name for v, dtype in zip(graph.inputs, graph.input_dtypes) if dtype.kind in "iub")


class Backend(_OnnxBackend):
    """kiln's ONNX backend: ``prepare(model, device="CPU", **compile_options)``."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> BackendRep:
        super().prepare(model, device, **kwargs)
        target = _TARGETS[Device(device).type]
        options = {k: v for k, v in kwargs.items() if k not in ("rtol", "atol")}
        return BackendRep(
            load(model, target=target, **options),
            lambda static_inputs: load(model, target=target, static_inputs=static_inputs, **options),
        )

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """One node run on its own: made into a one-node model of the node's inputs."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        names = [f"input_{k}" if not n else n for k, n in enumerate(node.input)]
        arrays = [np.asarray(x) for x in inputs]
        graph_inputs = [
            onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays)
        ]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in node.output]
        model = onnx.helper.make_model(onnx.helper.make_graph([node], "node", graph_inputs, graph_outputs))
        return cls.prepare(model, device, **kwargs).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        if Device(device).type == DeviceType.CPU:
            return True
        try:
            check_compiler()
            check_gpu()
        except CudaUnavailable:
            return False
        return True
