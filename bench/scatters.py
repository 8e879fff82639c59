"""Scatters that store through a traced index: kiln against numpy (and onnxruntime), interleaved.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/scatters.py
    python bench/scatters.py --threads 2 --rounds 11

Workloads: ``x[idx] = v`` into a 100 000 x 64 float32 table (1000 rows, repeated indices
among them), ``np.put`` of 1000 values into 1 000 000, and ONNX ScatterElements (axis 0, the
same table and a 1000 x 64 index) against onnxruntime where it is installed. Each is one
kiln.scatter_at of kind store, a sequential loop over the updates storing through the
index, after a copy of the destination (kiln's functions do not write their arguments, so
both sides copy: numpy's ``x.copy()`` is in the timed function). Times are medians of
interleaved rounds (see bench/harness.py); the ratio is the other's time over kiln's (above
1: kiln is faster). Each pair checks its results against each other before timing.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import against_numpy, interleaved, thread_and_round_arguments  # noqa: E402


def workloads(np):
    """(title, function, arguments): each function runs as it is under numpy and compiled under kiln."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((100_000, 64)).astype(np.float32)
    rows = rng.integers(-100_000, 100_000, 1000)
    updates = rng.standard_normal((1000, 64)).astype(np.float32)

    def assign(x, i, v):
        x = x.copy()
        x[i] = v
        return x

    yield "x[idx] = v: 100 000 x 64 table, 1000 rows", assign, (table, rows, updates)

    def put(a, i, v):
        a = a.copy()
        np.put(a, i, v)
        return a

    flat = rng.standard_normal(1_000_000).astype(np.float32)
    positions = rng.integers(0, 1_000_000, 1000)
    yield "np.put: 1000 values into 1 000 000", put, (flat, positions, updates[:, 0].copy())


def onnx_scatter_elements(np):
    """(title, onnx model, inputs) of ScatterElements on the table of `workloads`, or None
    without onnx."""
    try:
        from onnx import TensorProto, helper
    except ImportError:
        return None
    rng = np.random.default_rng(1)
    data = rng.standard_normal((100_000, 64)).astype(np.float32)
    indices = rng.integers(0, 100_000, (1000, 64))
    updates = rng.standard_normal((1000, 64)).astype(np.float32)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)
    graph = helper.make_graph(
        [node],
        "scatter",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, data.shape),
            helper.make_tensor_value_info("i", TensorProto.INT64, indices.shape),
            helper.make_tensor_value_info("u", TensorProto.FLOAT, updates.shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, data.shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return "ONNX ScatterElements: 100 000 x 64, 1000 x 64 updates", model, (data, indices, updates)


def main() -> None:
    args = thread_and_round_arguments(__doc__)
    import numpy as np

    against_numpy(workloads(np), args.rounds, np.testing.assert_array_equal, width=52)
    found = onnx_scatter_elements(np)
    if found is None:
        print("  ONNX ScatterElements: onnx is not installed")
        return
    title, model, inputs = found
    import kiln.onnx

    compiled = kiln.onnx.load(model)
    contenders = {"kiln": lambda: compiled(*inputs)}
    try:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = args.threads
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feeds = dict(zip("xiu", inputs))
        np.testing.assert_array_equal(compiled(*inputs)[0], session.run(None, feeds)[0])
        contenders["onnxruntime"] = lambda: session.run(None, feeds)
    except ImportError:
        print("  (onnxruntime is not installed: kiln alone)")
    times = interleaved(contenders, rounds=args.rounds)
    line = f"  {title:<52} kiln {times['kiln'] * 1e6:>9.1f} us"
    if "onnxruntime" in times:
        line += f"   onnxruntime {times['onnxruntime'] * 1e6:>9.1f} us   {times['onnxruntime'] / times['kiln']:>6.2f}x"
    print(line)


if __name__ == "__main__":
    main()
