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

from kiln.onnx import load

_TARGETS = {DeviceType.CPU: "cpu", DeviceType.CUDA: "cuda"}


class BackendRep(_OnnxBackendRep):
    """A prepared model: ``run(inputs)`` takes the graph inputs (a list in graph order, or a
    dict by name) and returns the outputs as a tuple of numpy arrays."""

    def __init__(self, function):
        self.function = function

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            return self.function(**inputs)
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        return self.function(*[np.asarray(x) for x in inputs])


class Backend(_OnnxBackend):
    """kiln's ONNX backend: ``prepare(model, device="CPU", **compile_options)``."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> BackendRep:
        super().prepare(model, device, **kwargs)
        target = _TARGETS[Device(device).type]
        options = {k: v for k, v in kwargs.items() if k not in ("rtol", "atol")}
        return BackendRep(load(model, target=target, **options))

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
        from kiln.codegen.nvcc import check_compiler
        from kiln.runtime.cuda import CudaUnavailable, check_gpu

        try:
            check_compiler()
            check_gpu()
        except CudaUnavailable:
            return False
        return True
