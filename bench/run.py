"""Time kiln's compiled code against numpy on a few workloads, in one run.

    python bench/run.py              # all workloads
    python bench/run.py --quick      # smaller sizes, for a smoke test

Each timing is the median of repeated calls after a warm-up; the ratio
columns are numpy's time divided by kiln's (above 1: kiln is faster), for kiln
without graph optimization (one loop nest per op) and with it. The
machines this runs on are shared and noisy: compare ratios from one run,
not absolute times across runs. Also measures compile time with a cold and a
warm disk cache, each in a fresh process.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import kiln


def median_seconds(fn, *args, repeat=15, min_time=0.2):
    fn(*args)  # warm-up (and, for kiln, compilation)
    timings = []
    deadline = time.perf_counter() + min_time
    while len(timings) < repeat or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn(*args)
        timings.append(time.perf_counter() - start)
        if len(timings) >= 200:
            break
    return statistics.median(timings)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def mlp(x, w1, b1, w2, b2):
    return softmax(np.maximum(x @ w1 + b1, 0) @ w2 + b2)


def workloads(scale: int = 1):
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    n = 1024 * scale
    yield "tiny x+1", lambda x: x + 1, (f32(4),)  # per-call overhead
    yield "fma x*y+z", lambda x, y, z: x * y + z, (f32(n, 1024), f32(n, 1024), f32(n, 1024))
    yield "tanh", np.tanh, (f32(n, 1024),)
    yield "sum rows", lambda x: x.sum(axis=1), (f32(n, 1024),)
    yield "softmax rows", softmax, (f32(n // 2, 1000),)
    yield "layernorm", layernorm, (f32(n // 2, 768), f32(768), f32(768))
    yield "matmul 256", lambda a, b: a @ b, (f32(256, 256), f32(256, 256))
    yield "mlp 64x784", mlp, (f32(64, 784), f32(784, 128), f32(128), f32(128, 10), f32(10))


COMPILE_SCRIPT = """
import time, numpy as np
start = time.perf_counter()
import kiln
from bench.run import mlp
f = kiln.compile(mlp)
args = [np.ones(s, np.float32) for s in [(64, 784), (784, 128), (128,), (128, 10), (10,)]]
f(*args)
print(time.perf_counter() - start, f.compilations[0].from_cache, f.compilations[0].seconds)
"""


def compile_times():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache, PYTHONPATH=root)
        rows = []
        for label in ("cold cache", "warm cache"):
            out = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], env=env, cwd=root,
                                 capture_output=True, text=True, check=True).stdout.split()
            rows.append((label, float(out[0]), out[1] == "True", float(out[2])))
        return rows


def print_memory_table():
    """Kernels and arena bytes of the examples' functions, unoptimized vs optimized."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import attention
    import layernorm
    import mlp
    import train_mlp

    rng = np.random.default_rng(0)
    params = train_mlp.init_params(rng, 64)
    batch = (params, np.zeros((64, 64), np.float32), np.zeros((64, 10), np.float32), 0.5)
    cases = [("mlp.predict", kiln.compile(mlp.predict.fn), (kiln.f32[64, 784], mlp.init_params(rng))),
             ("layernorm", kiln.compile(layernorm.layernorm.fn), (kiln.f32[37, 96], kiln.f32[96], kiln.f32[96])),
             ("attention", kiln.compile(attention.attention.fn), (kiln.f32[13, 32],) * 3),
             ("train step", kiln.compile(train_mlp.sgd_step), batch),
             ("train step remat", kiln.compile(train_mlp.sgd_step, remat=True), batch)]
    print(f"{'function':<18}{'kernels':>9}{'fused':>7}{'intermediates B':>17}{'arena B':>9}")
    for name, compiled, args in cases:
        unfused = kiln.compile(compiled.fn, optimize=False).lower(*args)
        lowered = compiled.lower(*args)
        memory = lowered.memory_plan
        print(f"{name:<18}{unfused.kernel_count:>9}{lowered.kernel_count:>7}{memory.unplanned_bytes:>17}"
              f"{memory.arena_bytes:>9}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer repeats")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or 'cpu'}; "
          f"numpy {np.__version__}, kiln {kiln.__version__}")
    print(f"{'workload':<16}{'numpy ms':>11}{'unfused ms':>12}{'kiln ms':>11}{'numpy/unfused':>15}"
          f"{'numpy/kiln':>12}{'kernels':>10}")
    for name, fn, inputs in workloads(1):
        if args.quick and name in ("fma x*y+z", "tanh", "sum rows", "softmax rows", "layernorm"):
            inputs = (inputs[0][:64],) + inputs[1:]
            if name == "fma x*y+z":
                inputs = tuple(a[:64] for a in inputs)
        compiled, unfused = kiln.compile(fn), kiln.compile(fn, optimize=False)
        for version in (compiled, unfused):
            for got, want in zip(np.atleast_1d(version(*inputs)), np.atleast_1d(fn(*inputs))):
                np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
        t_numpy = median_seconds(fn, *inputs)
        t_unfused = median_seconds(unfused, *inputs)
        t_kiln = median_seconds(compiled, *inputs)
        kernels = f"{unfused.lower(*inputs).kernel_count}->{compiled.lower(*inputs).kernel_count}"
        print(f"{name:<16}{t_numpy * 1e3:>11.3f}{t_unfused * 1e3:>12.3f}{t_kiln * 1e3:>11.3f}"
              f"{t_numpy / t_unfused:>15.2f}{t_numpy / t_kiln:>12.2f}{kernels:>10}")
    print()
    print_memory_table()
    print()
    print(f"{'compile (mlp)':<16}{'process s':>11}{'from cache':>12}{'compile s':>11}")
    for label, total, hit, seconds in compile_times():
        print(f"{label:<16}{total:>11.3f}{str(hit):>12}{seconds:>11.3f}")


if __name__ == "__main__":
    main()
