"""What a call and a start cost, apart from the work: small arrays, and compiling from the cache.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py --only small_calls,compile --threads 1

``small_calls``: ``x + 1`` on float32 arrays of 4, 64 and 1024 elements, called in a loop,
in microseconds per call: numpy, kiln, JAX's jit and PyTorch where installed. At 4
elements every library measures its own call overhead.

``compile``: the MLP training step of ``bench/mlp_step.py`` compiled in a new process,
first with an empty disk cache (cold), then with the cache filled (warm): ``import kiln``,
then compile and first call, with the seconds of each compile stage of the warm start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from harness import ROOT, interleaved

CALLS = 1000  # calls per timed run: one call is too short to time alone
WARM_RUNS = 5  # warm starts are a few tens of milliseconds: one process is at the mercy of the load


def bench_small_calls(np, kiln, found, quick):
    for n in (4, 64) if quick else (4, 64, 1024):
        x = np.arange(n, dtype=np.float32)
        compiled = kiln.compile(lambda x: x + 1)
        np.testing.assert_array_equal(compiled(x), x + 1)
        impl = {"numpy": lambda: x + 1, "kiln": lambda: compiled(x)}
        if "jax" in found:
            jax = found["jax"]
            jitted, jx = jax.jit(lambda x: x + 1), jax.numpy.asarray(x)
            impl["jax.jit"] = lambda: jitted(jx).block_until_ready()
        if "torch" in found:
            tx = found["torch"].from_numpy(x)
            impl["torch"] = lambda: tx + 1
        loops = {name: _repeated(fn) for name, fn in impl.items()}
        times = interleaved(loops)
        print(f"\nx + 1 on {n} float32, one call at a time (us per call)")
        for name, seconds in times.items():
            print(f"  {name:<22}{seconds / CALLS * 1e6:>10.2f} us {times['numpy'] / seconds:>8.2f}x numpy")


def _repeated(fn):
    def run():
        for _ in range(CALLS):
            fn()

    return run


COMPILE_SCRIPT = """
import json, sys, time
start = time.perf_counter()
import numpy as np
numpy_imported = time.perf_counter()
import kiln
from kiln import timings
imported = time.perf_counter()
sys.path.insert(0, {bench!r})
import mlp_step
step, _, params, x, y, _ = mlp_step.make(np, {batch})
made = time.perf_counter()
with timings.collect() as stages:
    compiled = kiln.compile(step)
    compiled(params, x, y)
done = time.perf_counter()
compiled(params, x, y)
again = time.perf_counter()
print(json.dumps({{
    "import_numpy": numpy_imported - start, "import_kiln": imported - numpy_imported,
    "first_call": done - made, "second_call": again - done,
    "from_cache": compiled.compilations[0].from_cache,
    "stages": [(s.stage + (f" ({{s.note}})" if s.note else ""), s.seconds) for s in stages],
}}))
"""


def bench_compile(np, kiln, found, quick):
    batch = 64 if quick else 256
    script = COMPILE_SCRIPT.format(bench=os.path.join(ROOT, "bench"), batch=batch)
    print(
        f"\ncompile the MLP training step, batch {batch} (each in a new process; times after import; "
        f"warm: the median of {WARM_RUNS} processes)"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache)

        def run():
            result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
            return json.loads(result.stdout)

        cold = run()
        warm = sorted((run() for _ in range(WARM_RUNS)), key=lambda r: r["first_call"])[WARM_RUNS // 2]
        for label, r in (("cold (empty cache)", cold), ("warm (cache filled)", warm)):
            print(
                f"  {label:<22}compile + first call {r['first_call'] * 1e3:>8.1f} ms (a second call "
                f"{r['second_call'] * 1e3:.1f} ms), from cache: {r['from_cache']}; import kiln "
                f"{r['import_kiln'] * 1e3:.0f} ms (numpy {r['import_numpy'] * 1e3:.0f} ms)"
            )
        print("  the warm start's compile stages (the rest is the first call's work):")
        for stage, seconds in warm["stages"]:
            print(f"    {stage:<28}{seconds * 1e3:>8.2f} ms")


WORKLOADS = {"small_calls": bench_small_calls, "compile": bench_compile}
