"""ONNX's nine light zoo networks with real (random) weights, loaded and run in one process.

    python bench/zoo_weights.py                      # all nine, then the first again: ten loads in turn
    python bench/zoo_weights.py --models bvlc_alexnet,vgg19 --cache-dir ~/.cache/kiln
    python bench/zoo_weights.py --memory --models bvlc_alexnet,vgg19   # each load in a process of its own

The zoo files make their weights with ConstantOfShape (every weight one value); here each
becomes an initializer of random values of the same shape, as in a trained model, so the
weights are hundreds of MB of constants compiled into the program. Each network is written
to a file, loaded with ``kiln.onnx.load(path)`` and run twice over (the second load finds the
first's object code and constant pool in the disk cache), and its outputs are compared with
ONNX Runtime's. Printed per load: seconds to load and run, and how much resident memory the
loaded function holds beyond what the process held before (anonymous memory, and pages
mapped from files: the constant pool in the cache), beside the weights' size.

By default the disk cache is a new temporary directory, so the first load of each network
compiles it. With ``--memory`` each load runs in a new process instead (a cold one that
compiles, then a warm one that finds the cache), so the memory it reports is the loaded
function's alone, not what earlier loads left in the allocator. Needs onnx and onnxruntime
(``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def resident() -> dict:
    """This process's resident memory in MiB: anonymous and file-backed (Linux's /proc)."""
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("RssAnon", "RssFile")}


def measure_one(path: str) -> None:
    """Load and run the model at `path` once, printing as JSON the resident memory it added."""
    import numpy as np

    import kiln.onnx

    gc.collect()
    before = resident()
    started = time.perf_counter()
    fn = kiln.onnx.load(path)
    x = np.load(path + ".input.npy")
    fn(x)
    seconds = time.perf_counter() - started
    gc.collect()
    after = resident()
    print(json.dumps({"seconds": seconds, **{k: after[k] - before[k] for k in after}}))


def main() -> int:
    from test_onnx_zoo import LIGHT, MODELS, _input, _random_weights, _weights_as_initializers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo names")
    parser.add_argument("--cache-dir", help="KILN_CACHE_DIR (default: a new temporary directory)")
    parser.add_argument("--loads", type=int, default=2, help="loads of each network in turn")
    parser.add_argument("--memory", action="store_true", help="each load in a new process: memory per load")
    parser.add_argument("--measure-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_one:
        measure_one(args.measure_one)
        return 0
    work = tempfile.mkdtemp(prefix="kiln-zoo-")
    os.environ["KILN_CACHE_DIR"] = args.cache_dir or os.path.join(work, "cache")

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    import kiln.onnx

    names = args.models.split(",")
    schedule = names + names[:1]  # the first again at the end: a later load beside all the others
    prepared = {}
    failures = 0
    print(
        f"{'network':<14} {'load':>4} {'weights MiB':>11} {'load+run s':>10} {'anon MiB':>9} {'mapped MiB':>10}  vs ORT"
    )
    for index, name in enumerate(schedule):
        if name not in prepared:
            model = onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
            filled = _weights_as_initializers(model)
            weights = _random_weights(filled, seed=sum(map(ord, name)))
            for t in model.graph.initializer:
                if t.name in weights:
                    t.CopyFrom(numpy_helper.from_array(weights[t.name], t.name))
            path = os.path.join(work, f"{name}.onnx")
            onnx.save(model, path)
            x = _input(model)
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            expected = session.run(None, {session.get_inputs()[0].name: x})
            nbytes = sum(v.nbytes for v in weights.values())
            prepared[name] = (path, x, expected, nbytes)
            del model, filled, weights, session
        path, x, expected, nbytes = prepared[name]
        if args.memory:
            if index == len(names):
                break
            np.save(path + ".input.npy", x)
            for load in ("cold", "warm"):
                command = [sys.executable, os.path.abspath(__file__), "--measure-one", path]
                result = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
                print(
                    f"{name:<14} {load:>4} {nbytes / 2**20:>11.0f} {result['seconds']:>10.1f} "
                    f"{result['RssAnon']:>9.0f} {result['RssFile']:>10.0f}",
                    flush=True,
                )
            continue
        for load in range(args.loads if index < len(names) else 1):
            gc.collect()
            before = resident()
            started = time.perf_counter()
            fn = kiln.onnx.load(path)
            got = fn(x)
            seconds = time.perf_counter() - started
            gc.collect()
            after = resident()
            scale = max(float(np.abs(e).max()) for e in expected)
            error = max(float(np.abs(g - e).max()) for g, e in zip(got, expected)) / scale
            ok = error < 1e-3
            failures += not ok
            print(
                f"{name:<14} {load + 1:>4} {nbytes / 2**20:>11.0f} {seconds:>10.1f} "
                f"{after['RssAnon'] - before['RssAnon']:>9.0f} {after['RssFile'] - before['RssFile']:>10.0f}  "
                f"{'equal' if ok else 'DIFFERENT'} (max error {error:.1e} of the output's scale)",
                flush=True,
            )
            del fn, got
    if not args.memory:
        print(f"{len(names) * args.loads + 1} loads in one process; {failures} differed from ONNX Runtime")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
