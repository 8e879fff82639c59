"""What numpy-exact elementwise code costs: kiln's code against the same kernels built the
inexact way (every float add allowed to fuse a multiply into an FMA; np.maximum as IEEE
maximum, which orders -0.0 below 0.0 where numpy does not).

    python bench/exact_semantics.py

Each figure is the best of --repeats calls into an out= array; the ratio is exact time over
inexact time (above 1: exactness costs that much). Results are checked against numpy first.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import kiln
import kiln.codegen.llvm_ops as llvm_ops
from kiln.dialects import arith, tensor
from kiln.passes import scalar_rules


def build(fn, args, exact: bool):
    """`fn` compiled as kiln does, or with the inexact rules put back while it compiles."""
    # a cache of its own: the cache key is the traced function, the same for both builds
    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-bench-")
    saved = llvm_ops.accumulates, scalar_rules.SCALAR_RULES[tensor.MaximumOp]
    if not exact:
        llvm_ops.accumulates = lambda op: True
        scalar_rules.SCALAR_RULES[tensor.MaximumOp] = scalar_rules.by_kind(arith.MaximumFOp, arith.MaxSIOp)
    try:
        compiled = kiln.compile(fn)
        compiled(*args)  # compiles now, under these rules
        return compiled
    finally:
        llvm_ops.accumulates, scalar_rules.SCALAR_RULES[tensor.MaximumOp] = saved


def best(f, args, out, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(*args, out=out)
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=200)
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(options.size).astype(np.float32)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    workloads = [
        ("x * 1.5 + x * x + 0.25", lambda x: x * 1.5 + x * x + 0.25, (x,)),
        ("relu: np.maximum(x, 0.0)", lambda x: np.maximum(x, 0.0), (x,)),
        ("a @ b (fuses either way)", lambda a, b: a @ b, (a, b)),
    ]
    for name, fn, args in workloads:
        exact, inexact = build(fn, args, True), build(fn, args, False)
        expected = fn(*args)
        np.testing.assert_allclose(exact(*args), expected, rtol=1e-4, atol=1e-4)
        out = np.empty_like(expected)
        # the two alternate, so that a busy machine slows both alike
        pairs = [(best(exact, args, out, options.repeats), best(inexact, args, out, options.repeats)) for _ in range(3)]
        t_exact, t_inexact = min(p[0] for p in pairs), min(p[1] for p in pairs)
        print(
            f"{name:28s} exact {t_exact * 1e6:9.1f} us   inexact {t_inexact * 1e6:9.1f} us   "
            f"ratio {t_exact / t_inexact:.2f}"
        )


if __name__ == "__main__":
    main()
