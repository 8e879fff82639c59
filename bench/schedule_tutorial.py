"""The schedules tutorial's measurements: a 512x512x512 float32 matmul, one
schedule step at a time, GFLOP/s after each (median of interleaved runs).

    python bench/schedule_tutorial.py
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402

import kiln  # noqa: E402

N = 512
STAGES = [
    ("naive", []),
    ("split j by 32", [("split", "k0.j", 32)]),
    ("tile i, j by 32 x 64", [("tile", ["k0.i", "k0.j"], [32, 64])]),
    ("vectorize j (16 lanes)", [("vectorize", "k0.j", 16)]),
    (
        "+ 8 rows jammed (unroll_jam i, reorder)",
        [("unroll_jam", "k0.i", 8), ("reorder", ["k0.j", "k0.i.u"]), ("vectorize", "k0.j", 16)],
    ),
    (
        "+ 2 vectors jammed",
        [
            ("unroll_jam", "k0.i", 8),
            ("reorder", ["k0.j", "k0.i.u"]),
            ("vectorize", "k0.j", 16),
            ("unroll_jam", "k0.j", 2),
        ],
    ),
    (
        "+ pack B panels (cache_read)",
        [
            ("unroll_jam", "k0.i", 8),
            ("reorder", ["k0.j", "k0.i.u"]),
            ("vectorize", "k0.j", 16),
            ("unroll_jam", "k0.j", 2),
            ("cache_read", "k0.j.u", "b"),
        ],
    ),
    (
        "+ parallel (2 threads)",
        [
            ("unroll_jam", "k0.i", 8),
            ("reorder", ["k0.j", "k0.i.u"]),
            ("vectorize", "k0.j", 16),
            ("unroll_jam", "k0.j", 2),
            ("cache_read", "k0.j.u", "b"),
            ("parallel", "k0.j.u"),
        ],
    ),
]


def main():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((N, N), dtype=np.float32) for _ in range(2))
    compiled = []
    for name, steps in STAGES:
        fn = kiln.compile(lambda a, b: a @ b, schedule=steps)
        np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-3, atol=1e-3)
        compiled.append((name, fn))
    timings = {name: [] for name, _ in compiled}
    timings["numpy"] = []
    for _ in range(5):
        for name, fn in compiled + [("numpy", lambda a, b: a @ b)]:
            time.sleep(0.15)
            fn(a, b)
            start, runs = time.perf_counter(), 0
            while time.perf_counter() - start < 0.2 and runs < 20:
                fn(a, b)
                runs += 1
            timings[name].append((time.perf_counter() - start) / runs)
    for name, values in timings.items():
        seconds = statistics.median(values)
        print(f"{name:<42}{seconds * 1e3:>10.2f} ms {2 * N**3 / seconds / 1e9:>8.1f} GFLOP/s")


if __name__ == "__main__":
    main()
