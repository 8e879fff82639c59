"""ResNet-50 from ONNX, compiled by kiln, timed beside onnxruntime.

    python examples/onnx_resnet.py [--runs 5] [--weights arguments|constants|both]

The model is the ResNet-50 the onnx package ships for its own tests
(onnx/backend/test/data/light/light_resnet50.onnx): 53 convolutions with batch
normalization, ReLU, max and average pooling, a fully connected layer and a softmax,
on a 1x3x224x224 image. To keep the file small, its large tensors are ConstantOfShape
nodes that fill each one with 0.02; this script replaces them by random tensors (a fixed
seed, He-scaled convolutions) so that the outputs differ from image to image and the
comparison means something.

kiln imports it with kiln.onnx.load in one of two ways: weights="arguments" passes the
25 million float weights as one dict argument (the compiled code reads them like
inputs), weights="constants" compiles them into the code as constants (100 MB of them,
whose arithmetic the graph passes fold: batch normalization's square roots and
divisions of its parameters are done at compile time, and its kernels only multiply
and add). The script prints, for each (--weights both) and for onnxruntime (when it is
installed), the time of the first call (import, trace and compile for kiln; session
creation for onnxruntime), the median time of a call, and kiln's largest difference
from onnxruntime's probabilities. kiln caches compiled code (KILN_CACHE_DIR): a second
run's first call skips the compile.
"""

import argparse
import os
import statistics
import time

import numpy as np

import kiln

MODEL = "backend/test/data/light/light_resnet50.onnx"


def resnet50(seed: int = 0):
    """The test ResNet-50 with its ConstantOfShape tensors replaced by random initializers."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(os.path.join(os.path.dirname(onnx.__file__), MODEL))
    rng = np.random.default_rng(seed)
    graph = model.graph
    shapes = {t.name: numpy_helper.to_array(t) for t in graph.initializer if t.name.endswith("__SHAPE")}
    initialized = {t.name for t in graph.initializer}
    nodes, weights = [], []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            name = node.output[0]
            weights.append(numpy_helper.from_array(random_weight(name, tuple(shapes[node.input[0]]), rng), name))
        else:
            nodes.append(node)
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]  # not the shapes, nor a blob no node reads
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + weights)
    inputs = [v for v in graph.input if v.name not in initialized]
    del graph.input[:]
    graph.input.extend(inputs)  # the image alone: the weights are initializers
    model.ir_version = max(model.ir_version, 4)  # from IR version 4 on, initializers need not be inputs
    onnx.checker.check_model(model)
    return model


def random_weight(name: str, shape: tuple, rng) -> np.ndarray:
    """A plausible value for the tensor `name` (Caffe2's names: conv/fc weights `_w`, batch
    normalization's scale `_s`, bias `_b`, running mean `_rm` and variance `_riv`)."""
    kind = name.rsplit("_", 2)[-2]
    if kind == "w":  # He initialization keeps the activations' scale through conv + ReLU
        fan_in = int(np.prod(shape[1:]))
        value = rng.standard_normal(shape) * np.sqrt((2.0 if len(shape) == 4 else 1.0) / fan_in)
    elif kind == "s":  # a residual branch's last scale small, so that the 16 sums grow slowly
        value = rng.uniform(0.5, 1.0, shape) * (0.25 if "branch2c" in name else 1.0)
    elif kind == "riv":
        value = rng.uniform(0.8, 1.2, shape)
    else:  # biases and running means
        value = rng.standard_normal(shape) * 0.05
    return value.astype(np.float32)


def timed(call, runs: int) -> tuple:
    """(seconds of the first call, median seconds of `runs` more, the last result)."""
    start = time.perf_counter()
    result = call()
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed calls after the first (default 5)")
    parser.add_argument(
        "--weights",
        choices=("arguments", "constants", "both"),
        default="arguments",
        help="how kiln takes the weights (default: arguments; both times the two)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights and image")
    args = parser.parse_args()

    model = resnet50(args.seed)
    image = np.random.default_rng(args.seed + 1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    rows = []
    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
        reference = None
    if onnxruntime is not None:
        options = onnxruntime.SessionOptions()
        start = time.perf_counter()
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        created = time.perf_counter() - start
        _, median, (reference,) = timed(lambda: session.run(None, {"gpu_0/data_0": image}), args.runs)
        rows.append(("onnxruntime", created, median, None))

    modes = ("arguments", "constants") if args.weights == "both" else (args.weights,)
    for mode in modes:
        start = time.perf_counter()
        resnet = kiln.onnx.load(model, weights=mode)
        loaded = time.perf_counter() - start
        call = (lambda: resnet(image, resnet.weights)) if mode == "arguments" else (lambda: resnet(image))
        first, median, (probabilities,) = timed(call, args.runs)
        first += loaded  # import, trace, compile and the first run
        difference = None if reference is None else float(np.abs(probabilities - reference).max())
        rows.append((f"kiln, weights as {mode}", first, median, difference))
        if reference is not None and np.argmax(probabilities) != np.argmax(reference):
            print(f"warning: kiln ({mode}) and onnxruntime predict different classes")

    print(f"ResNet-50, a 1x3x224x224 float32 image, random weights (seed {args.seed}); median of {args.runs} calls")
    print(f"{'':<28}{'first call':>12}{'per call':>12}{'max |kiln - onnxruntime|':>27}")
    for name, first, median, difference in rows:
        shown = "" if difference is None else f"{difference:.2e}"
        print(f"{name:<28}{first:>11.2f}s{median * 1e3:>10.1f}ms{shown:>27}")
    if onnxruntime is None:
        print("onnxruntime is not installed (pip install onnxruntime): kiln's times are shown alone")
    else:
        top = np.argsort(reference[0])[::-1][:3]
        print(f"onnxruntime's top classes: {', '.join(f'{k} ({reference[0, k]:.3f})' for k in top)}")


if __name__ == "__main__":
    main()
