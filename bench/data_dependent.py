"""The data-dependent workloads (gathers, top-k, histograms, scans, convolutions): kiln
against numpy (and ONNX Runtime for the ONNX Gather) at a base size and at 10x it, on one
thread and on two, interleaved in one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/data_dependent.py
    python bench/data_dependent.py --scales 1 --threads 1 --rounds 5

Each row is one workload at one size; the base sizes are the ones a new user tried
(an embedding lookup of 256 ids in a 5000 x 64 table, a cross-entropy over 512 x 100,
an ONNX Gather of 64 ids from a 30000 x 128 embedding, the top 5 of 512 x 128 scores by
argsort and by kiln.top_k, a 50-bin histogram of 100 000 values, a cumsum moving average
of 100 000 float64, np.convolve "same" with 31 taps at n = 1 000 / 10 000 / 100 000).
At 10x, the counted axis grows: ten times the ids, rows, samples or signal. numpy runs
every one of these on one thread; kiln's thread count changes between passes
(kiln.runtime.threads.set_thread_count) and numpy is timed again in each pass. Every
result is checked against numpy's (or ONNX Runtime's) before timing. Prints medians and
the ratio numpy / kiln (above 1: kiln is faster). A shared machine moves these by tens of
percent between runs.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import interleaved  # noqa: E402


def workloads(np, scale: int):
    """(title, function or None, arguments, reference or None): the function runs as it is
    under numpy and compiled under kiln; a reference (a callable of the arguments) replaces
    numpy as the peer where the workload is an ONNX model."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((5000, 64)).astype(np.float32)
    ids = rng.integers(0, 5000, 256 * scale)
    yield f"table[ids]: 5000 x 64, {256 * scale} ids", lambda t, i: t[i], (table, ids), None

    n = 512 * scale
    logp = np.log(rng.dirichlet(np.ones(100), n)).astype(np.float32)
    labels = rng.integers(0, 100, n)
    yield (
        f"cross-entropy: {n} x 100",
        lambda lp, y: -lp[np.arange(lp.shape[0]), y].mean(),
        (logp, labels),
        None,
    )

    scores = rng.standard_normal((512 * scale, 128)).astype(np.float32)
    yield (
        f"np.argsort(-s, axis=1)[:, :5]: {512 * scale} x 128",
        lambda s: np.argsort(-s, axis=1)[:, :5],
        (scores,),
        None,
    )

    samples = rng.random(100_000 * scale)
    yield (
        f"np.histogram(bins=50, range=(0, 1)): {100_000 * scale}",
        lambda x: np.histogram(x, bins=50, range=(0, 1))[0],
        (samples,),
        None,
    )

    def moving_average(x):
        total = np.cumsum(x)
        return (total[50:] - total[:-50]) / 50

    signal = rng.standard_normal(100_000 * scale)
    yield f"cumsum moving average: {100_000 * scale} float64", moving_average, (signal,), None

    taps = rng.standard_normal(31)
    for size in (1_000, 10_000, 100_000):
        s = rng.standard_normal(size * scale)
        yield (
            f"np.convolve(s, w, 'same'): n = {size * scale}, 31 taps",
            lambda a, w: np.convolve(a, w, "same"),
            (s, taps),
            None,
        )


def top_k_workload(np, scale: int):
    import kiln

    rng = np.random.default_rng(1)
    scores = rng.standard_normal((512 * scale, 128)).astype(np.float32)
    return (
        f"kiln.top_k(s, 5) vs argsort: {512 * scale} x 128",
        lambda s: kiln.top_k(s, 5)[1],
        lambda s: np.argsort(-s, axis=1, kind="stable")[:, :5],
        (scores,),
    )


def onnx_gather(np, scale: int):
    """(title, kiln function, ONNX Runtime function, arguments), or None without onnx/onnxruntime."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    import kiln.onnx

    rng = np.random.default_rng(2)
    weights = rng.standard_normal((30000, 128)).astype(np.float32)
    count = 64 * scale
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)],
        "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [count])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [count, 128])],
        [numpy_helper.from_array(weights, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ.get("KILN_NUM_THREADS", "1"))
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    compiled = kiln.onnx.load(model)
    ids = rng.integers(0, 30000, count)
    return (
        f"ONNX Gather: 30000 x 128, {count} ids",
        lambda i: compiled(i)[0],
        lambda i: session.run(None, {"ids": i})[0],
        (ids,),
    )


def row(title, peer_name, times) -> str:
    peer, ours = times[peer_name], times["kiln"]
    return f"  {title:<50} {peer_name} {peer * 1e6:>10.1f} us   kiln {ours * 1e6:>10.1f} us   {peer / ours:>7.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # numpy and ONNX Runtime's pools: one thread
    import numpy as np

    import kiln
    from kiln.runtime import threads

    for scale in args.scales:
        for count in args.threads:
            threads.set_thread_count(count)
            os.environ["KILN_NUM_THREADS"] = str(count)
            print(f"{scale}x sizes, kiln on {count} thread(s), numpy on 1; medians of {args.rounds} interleaved rounds")
            for title, fn, inputs, _ in workloads(np, scale):
                compiled = kiln.compile(fn)
                np.testing.assert_allclose(compiled(*inputs), fn(*inputs), rtol=1e-5, atol=1e-6)
                times = interleaved(
                    {"numpy": lambda: fn(*inputs), "kiln": lambda: compiled(*inputs)}, rounds=args.rounds
                )
                print(row(title, "numpy", times), flush=True)
            title, ours, reference, inputs = top_k_workload(np, scale)
            compiled = kiln.compile(ours)
            np.testing.assert_array_equal(compiled(*inputs), reference(*inputs))
            times = interleaved(
                {"numpy": lambda: reference(*inputs), "kiln": lambda: compiled(*inputs)}, rounds=args.rounds
            )
            print(row(title, "numpy", times), flush=True)
            gather = onnx_gather(np, scale)
            if gather is None:
                print("  ONNX Gather: skipped (onnx and onnxruntime are not installed)")
                continue
            title, ours, reference, inputs = gather
            np.testing.assert_array_equal(ours(*inputs), reference(*inputs))
            times = interleaved({"ort": lambda: reference(*inputs), "kiln": lambda: ours(*inputs)}, rounds=args.rounds)
            print(row(title, "ort", times), flush=True)


if __name__ == "__main__":
    main()
