"""The ONNX operator handlers, one module per family; importing this package fills
``kiln.onnx.registry.OPS``."""

from kiln.onnx.ops import activations, control_flow, elementwise, indexing, linalg, losses, nn, reductions, shapes  # noqa: F401
