"""The ONNX operator handlers, one module per family; importing this package fills
``kiln.onnx.registry.OPS``."""

from kiln.onnx.ops import (  # noqa: F401
    activations,
    control_flow,
    convolution,
    elementwise,
    indexing,
    linalg,
    losses,
    misc,
    normalization,
    pooling,
    quantization,
    randomness,
    recurrent,
    reductions,
    resampling,
    sampling,
    shapes,
    signal,
)
