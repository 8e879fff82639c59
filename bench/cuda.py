"""kiln's CUDA backend against numpy on the CPU and PyTorch on the GPU, in one run.

    python bench/cuda.py            # needs an NVIDIA GPU and nvcc
    python bench/cuda.py --quick    # smaller sizes

kiln's inputs are on the device (kiln.to_device) and its results stay there,
so the figures are kernel time plus kiln's per-call work (the launches, the
synchronization, allocating the results); numpy gets host arrays, PyTorch
device tensors, synchronized after every call. Each figure is the median of
--repeats calls; ratios are against numpy (above 1: faster). Every kiln
result is first checked against numpy.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np

import kiln


def workloads(quick: bool):
    n = 1 << (20 if quick else 24)
    rows, cols = (1024, 512) if quick else (4096, 1024)
    m = 256 if quick else 1024
    rng = np.random.default_rng(0)
    f32 = np.float32
    yield (
        "chain tanh(x*y+z)",
        lambda x, y, z: np.tanh(x * y + z),
        lambda t, x, y, z: t.tanh(x * y + z),
        [rng.standard_normal(n).astype(f32) for _ in range(3)],
        3 * n * 4 + n * 4,
        "GB/s",
    )
    yield (
        "softmax rows",
        kiln.softmax,
        lambda t, x: t.softmax(x, dim=-1),
        [rng.standard_normal((rows, cols)).astype(f32)],
        2 * rows * cols * 4,
        "GB/s",
    )
    yield (
        f"matmul {m}^3",
        lambda a, b: a @ b,
        lambda t, a, b: a @ b,
        [rng.standard_normal((m, m)).astype(f32) for _ in range(2)],
        2 * m**3,
        "GFLOP/s",
    )
    yield (
        "row centering",
        lambda x: x - x.mean(axis=1, keepdims=True),
        lambda t, x: x - x.mean(1, keepdims=True),
        [rng.standard_normal((rows, cols)).astype(f32)],
        2 * rows * cols * 4,
        "GB/s",
    )


def timed(call, sync, repeats: int) -> float:
    call()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--target",
        default="cuda",
        choices=["cuda", "cuda-emulate"],
        help="cuda-emulate checks this script on a machine without a GPU (its times mean nothing)",
    )
    args = parser.parse_args()
    if args.target == "cuda":
        try:
            kiln.compile(lambda x: x, target="cuda")
        except kiln.KilnError as exc:
            raise SystemExit(f"bench/cuda.py: {exc}")
    try:
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except FileNotFoundError:
        gpu = ""
    print(f"GPU: {gpu or 'unknown (no nvidia-smi)'}")
    peers = {}
    try:  # PyTorch on the GPU
        import torch

        if torch.cuda.is_available():
            peers["torch"] = (torch, lambda a: torch.from_numpy(a).cuda(), torch.cuda.synchronize)
    except ImportError:
        pass
    print("peers on the GPU:", ", ".join(peers) or "none (install PyTorch with CUDA or CuPy to compare)")
    for name, fn, peer_fn, inputs, work, unit in workloads(args.quick):
        compiled = kiln.compile(fn, target=args.target)
        on_device = [kiln.to_device(a, args.target) for a in inputs]
        np.testing.assert_allclose(compiled(*on_device).numpy(), fn(*inputs), rtol=2e-3, atol=2e-3)
        results = {
            "numpy (CPU)": timed(lambda: fn(*inputs), lambda: None, args.repeats),
            f"kiln {args.target}": timed(lambda: compiled(*on_device), lambda: None, args.repeats),
        }
        for peer, (module, to_device, sync) in peers.items():
            tensors = [to_device(a) for a in inputs]
            results[f"{peer} (GPU)"] = timed(lambda: peer_fn(module, *tensors), sync, args.repeats)
        base = results["numpy (CPU)"]
        print(f"\n{name}")
        for who, seconds in results.items():
            rate = work / seconds / 1e9
            print(f"  {who:18s} {seconds * 1e3:9.3f} ms  {rate:8.1f} {unit}  {base / seconds:7.2f}x numpy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
