"""Cold compiles of whole models: ONNX's SqueezeNet and ResNet-50, each imported and
compiled by kiln in a new process with an empty cache, its first call included, beside the
time ONNX Runtime takes to create a session for the same model. Needs onnx (and
onnxruntime for the comparison); ``--quick`` compiles SqueezeNet alone.

    python bench/run.py --only compile-models
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from harness import ROOT

SCRIPT = """
import os, sys, time
sys.path[:0] = [{examples!r}, {tests!r}]
import numpy as np
import onnx
import kiln, kiln.onnx
if {name!r} == "resnet50":
    import onnx_resnet
    model = onnx_resnet.resnet50(0)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
else:
    import test_onnx_zoo as zoo
    model = onnx.load(os.path.join(zoo.LIGHT, "light_{name}.onnx"))
    x = zoo._input(model)
    zoo._weights_as_initializers(model)
start = time.perf_counter()
fn = kiln.onnx.load(model, weights="arguments")
fn(x, fn.weights)
kiln_seconds = time.perf_counter() - start
ort_seconds = float("nan")
if {with_ort!r}:
    import onnxruntime
    start = time.perf_counter()
    onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_seconds = time.perf_counter() - start
print(kiln_seconds, ort_seconds)
"""


def bench_compile_models(np, kiln, found, quick):
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("\ncold compile of ONNX models: onnx is not installed, skipped")
        return
    print("\ncold compile of ONNX models (a new process, an empty cache; weights as an argument; first call included)")
    for name in ("squeezenet",) if quick else ("squeezenet", "resnet50"):
        script = SCRIPT.format(
            examples=os.path.join(ROOT, "examples"),
            tests=os.path.join(ROOT, "tests"),
            name=name,
            with_ort="onnxruntime" in found,
        )
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, KILN_CACHE_DIR=cache)
            out = subprocess.run(
                [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
            ).stdout.split()
        kiln_seconds, ort_seconds = float(out[-2]), float(out[-1])
        peer = f"   onnxruntime session: {ort_seconds:.2f} s" if ort_seconds == ort_seconds else ""
        print(f"  {name:<12} kiln {kiln_seconds:>7.2f} s{peer}")


WORKLOADS = {"compile-models": bench_compile_models}
