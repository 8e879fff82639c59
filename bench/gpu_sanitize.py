"""A few of kiln's CUDA kernels, each called once on awkward sizes and checked against
numpy: the program bench/gpu_check.sh runs under compute-sanitizer (memcheck,
racecheck, synccheck, initcheck), so that an out-of-bounds access, a shared-memory
race or a barrier that not every thread reaches is reported by the tool.

    python bench/gpu_sanitize.py                          # build the libraries, run, check
    compute-sanitizer --tool memcheck python bench/gpu_sanitize.py
    python bench/gpu_sanitize.py --target cuda-emulate    # the same on the CPU
    python bench/gpu_sanitize.py --build-only             # nvcc only (KILN_CUDA_ARCH), no GPU needed

The first, plain run builds the libraries into kiln's disk cache, so the runs under
the tool (tens of times slower at everything) only load them. Sizes are primes or
just past a power of two, so every grid-stride and bound loop has a ragged end. Exit
status 1 when a result differs from numpy's.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time

import numpy as np

import kiln


def bias_tanh(x, b):
    return np.tanh(x + b)


# A schedule that binds loops to blocks and threads (see docs/cuda.md): its kernel takes
# the launch shape from the loops, not the one-thread-per-element default.
BOUND = kiln.Schedule().split("k0.i", 8).bind("k0.i.o", "blockIdx.x").bind("k0.i.i", "threadIdx.y")
BOUND = BOUND.bind("k0.j", "threadIdx.x")


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def kernels(rng):
    """(name, function, inputs, schedule or None, relative tolerance) for each program."""
    f32 = np.float32

    def normal(*shape):
        return rng.standard_normal(shape).astype(f32)

    with_nan = normal(100_003)
    with_nan[50_001] = np.nan
    return [
        (
            "elementwise chain tanh(x*y+z)",
            lambda x, y, z: np.tanh(x * y + z),
            [normal(65_537) for _ in range(3)],
            None,
            1e-6,
        ),
        ("row softmax 257x1001", kiln.softmax, [normal(257, 1001)], None, 1e-5),
        ("layernorm 129x769", layernorm, [normal(129, 769), normal(769), normal(769)], None, 1e-4),
        ("matmul 67x131 @ 131x45", lambda a, b: a @ b, [normal(67, 131), normal(131, 45)], None, 1e-4),
        ("whole-tensor sum of 300007", lambda x: x.sum(), [normal(300_007)], None, 1e-3),
        ("whole-tensor max with a NaN", lambda x: x.max(), [with_nan], None, 0.0),
        ("row sums 1031x17", lambda x: x.sum(axis=1), [normal(1031, 17)], None, 1e-5),
        ("bound schedule 61x257", bias_tanh, [normal(61, 257), normal(257)], BOUND, 1e-6),
    ]


def build_only(programs) -> int:
    """Build each program's library with nvcc into kiln's disk cache, side by side (the CUDA C
    needs no GPU to print or compile); 1 if nvcc refuses one."""
    from kiln.codegen import nvcc

    try:
        flags = " ".join(nvcc.arch_flags()) or "(nvcc's default architecture)"
    except ValueError as exc:
        print(f"SUMMARY: FAILED: {exc}")
        return 1

    def build(program):
        name, fn, inputs, schedule, _ = program
        source = kiln.compile(fn, target="cuda", schedule=schedule).lower(*inputs).text("cuda")
        try:
            nvcc.build(source, emulate=False)
            return f"built  {name}"
        except Exception as exc:  # nvcc's complaint, or no nvcc: reported per program
            return f"FAILED {name}: {str(exc).strip()[-1500:]}"

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        lines = list(pool.map(build, programs))
    print("\n".join(lines))
    built = sum(line.startswith("built") for line in lines)
    print(
        f"SUMMARY: {built} of {len(programs)} programs built with nvcc {flags} in {time.perf_counter() - started:.0f} s"
    )
    return 0 if built == len(programs) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="cuda", choices=["cuda", "cuda-emulate"])
    parser.add_argument("--build-only", action="store_true", help="build the libraries with nvcc; run nothing")
    args = parser.parse_args()
    wrong, programs = 0, kernels(np.random.default_rng(0))
    if args.build_only:
        return build_only(programs)
    for name, fn, inputs, schedule, rtol in programs:
        compiled = kiln.compile(fn, target=args.target, schedule=schedule)
        got = np.asarray(compiled(*inputs))
        want = fn(*[i.astype(np.float64) for i in inputs]).astype(np.float32)  # an oracle rounded once
        try:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
            print(f"ok     {name}")
        except AssertionError as exc:
            wrong += 1
            print(f"WRONG  {name}: {str(exc).strip().splitlines()[-1]}")
    print(f"SUMMARY: {wrong} of {len(programs)} programs differ from numpy")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
