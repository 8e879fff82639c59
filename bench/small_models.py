"""Small ONNX models against ONNX Runtime at default and fixed thread counts: the sizes where a
parallel loop can cost more than it saves.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/small_models.py
    python bench/small_models.py --threads 1 2 --rounds 5

Models, built with onnx.helper and random weights (seeded):

- an MLP 784-256-128-10 (Gemm, Relu, Gemm, Relu, Gemm) at batch 64;
- a small CNN on 8 x 3 x 32 x 32: (Conv 3x3 pad 1, BatchNormalization, Relu, MaxPool 2x2) x 2
  with 16 and 32 channels, then Flatten and Gemm to 10.

For each thread count (kiln through kiln.runtime.threads, ONNX Runtime through its
session's intra_op_num_threads; "default" is each library's own default: every core),
results are checked against ONNX Runtime's first, then both are timed in interleaved
rounds. Prints medians and ONNX Runtime's time over kiln's (above 1: kiln is faster).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import interleaved  # noqa: E402


def mlp(np, helper, numpy_helper, TensorProto):
    rng = np.random.default_rng(0)
    sizes = [784, 256, 128, 10]
    nodes, inits, previous = [], [], "x"
    for k, (m, n) in enumerate(zip(sizes, sizes[1:])):
        inits += [
            numpy_helper.from_array((rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(np.float32), f"w{k}"),
            numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, f"b{k}"),
        ]
        out = "y" if k == len(sizes) - 2 else f"h{k}"
        nodes.append(helper.make_node("Gemm", [previous, f"w{k}", f"b{k}"], [out if out == "y" else f"g{k}"]))
        if out != "y":
            nodes.append(helper.make_node("Relu", [f"g{k}"], [out]))
        previous = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 784])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 10])],
        inits,
    )
    return "MLP 784-256-128-10, batch 64", graph, rng.standard_normal((64, 784)).astype(np.float32)


def cnn(np, helper, numpy_helper, TensorProto):
    rng = np.random.default_rng(1)
    nodes, inits, previous, channels = [], [], "x", 3
    for k, width in enumerate((16, 32)):
        fan_in = channels * 9
        inits += [
            numpy_helper.from_array(
                (rng.standard_normal((width, channels, 3, 3)) * np.sqrt(2 / fan_in)).astype(np.float32), f"w{k}"
            ),
            numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, f"cb{k}"),
            numpy_helper.from_array(rng.random(width).astype(np.float32) + 0.5, f"scale{k}"),
            numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, f"bias{k}"),
            numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, f"mean{k}"),
            numpy_helper.from_array(rng.random(width).astype(np.float32) + 0.5, f"var{k}"),
        ]
        nodes += [
            helper.make_node("Conv", [previous, f"w{k}", f"cb{k}"], [f"c{k}"], pads=[1, 1, 1, 1]),
            helper.make_node(
                "BatchNormalization", [f"c{k}", f"scale{k}", f"bias{k}", f"mean{k}", f"var{k}"], [f"n{k}"]
            ),
            helper.make_node("Relu", [f"n{k}"], [f"r{k}"]),
            helper.make_node("MaxPool", [f"r{k}"], [f"p{k}"], kernel_shape=[2, 2], strides=[2, 2]),
        ]
        previous, channels = f"p{k}", width
    inits += [
        numpy_helper.from_array((rng.standard_normal((32 * 8 * 8, 10)) * 0.02).astype(np.float32), "fw"),
        numpy_helper.from_array(np.zeros(10, np.float32), "fb"),
    ]
    nodes += [
        helper.make_node("Flatten", [previous], ["flat"]),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 10])],
        inits,
    )
    return "CNN (Conv+BN+ReLU+MaxPool) x 2 + Gemm, 8 x 3 x 32 x 32", graph, rng.random((8, 3, 32, 32), np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", nargs="+", default=["default", "1", "2"])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    import kiln.onnx
    from kiln.runtime import threads

    models = [make(np, helper, numpy_helper, TensorProto) for make in (mlp, cnn)]
    for count in args.threads:
        threads.set_thread_count(threads.thread_count() if count == "default" else int(count))
        options = ort.SessionOptions()
        if count != "default":
            options.intra_op_num_threads = int(count)
        print(f"threads: {count} (kiln {threads._count}); medians of {args.rounds} interleaved rounds")
        for title, graph, x in models:
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            compiled = kiln.onnx.load(model)
            want = session.run(None, {"x": x})[0]
            np.testing.assert_allclose(compiled(x)[0], want, rtol=1e-4, atol=1e-4)
            times = interleaved(
                {"ort": lambda: session.run(None, {"x": x}), "kiln": lambda: compiled(x)}, rounds=args.rounds
            )
            print(
                f"  {title:<56} ort {times['ort'] * 1e3:8.3f} ms   kiln {times['kiln'] * 1e3:8.3f} ms   "
                f"ort/kiln {times['ort'] / times['kiln']:5.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
