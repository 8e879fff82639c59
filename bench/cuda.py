"""kiln's CUDA backend against numpy on the CPU and PyTorch on the GPU (cuBLAS, cuDNN),
in one run, with the device's limits measured in the same run.

    python bench/cuda.py                 # needs an NVIDIA GPU and nvcc
    python bench/cuda.py --quick         # smaller sizes
    python bench/cuda.py --markdown      # the results as a Markdown table (docs/cuda.md)
    python bench/cuda.py --emulate       # target="cuda-emulate", tiny sizes: checks this script
                                         # on a machine without a GPU (its times mean nothing)

Workloads: matmuls (up to 4096^2, float32), a fused elementwise chain, row softmax,
layernorm, an MLP training step (bench/mlp_step.py: value_and_grad and SGD) and a
3x3 convolution. Every kiln result is first checked against numpy's (PyTorch's
too); a workload whose result differs is marked WRONG and the exit status is 1.

kiln's inputs are on the device (kiln.to_device) and its results stay there, so
its figures are kernel time plus kiln's per-call work (launches, the
synchronization, allocating the arena and the results); numpy gets host arrays,
PyTorch device tensors, synchronized after every call. The implementations take
turns, one call each per round, as many rounds as fit in --budget seconds (at
least 3, at most --repeats), and each figure is the median: a noisy machine
slows all of them alike. Ratios: another's time over this one's (above 1: faster).

The limits: memory bandwidth is that of a device-to-device copy (cudaMemcpy, and
PyTorch's copy_ where it is installed; the higher counts), each byte read once
and written once; FP32 arithmetic is PyTorch's float32 matmul with TF32 off
where PyTorch is installed, else the nominal figure (SMs x FP32 lanes per SM x 2 x
the maximum SM clock), labelled nominal. Bandwidth-bound workloads are shown as
a fraction of the first, matmuls, the MLP step and the convolution of the second.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp_step  # noqa: E402  (bench/ is not a package)

f32 = np.float32


@dataclass
class Workload:
    name: str
    work: float  # bytes moved or floating-point operations per call
    compute_bound: bool  # work is FLOPs (measured against FP32), else bytes (against bandwidth)
    fn: Callable  # traced by kiln; takes `inputs` (arrays or dicts of arrays)
    inputs: list
    numpy_fn: Callable  # the same computation in numpy on the host: the oracle, and timed
    torch_fn: Callable | None  # (torch, *inputs as CUDA tensors) -> result
    tol: float  # relative to the largest magnitude of numpy's result


# -- the workloads ---------------------------------------------------------------------------


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + f32(1e-5)) * gamma + beta


def numpy_conv3x3(x, w):
    """A 3x3 convolution, padding 1, as one BLAS matrix product over the windows (im2col)."""
    n, c, h, width = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # n, c, h, w, 3, 3
    columns = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * width, c * 9)
    out = columns @ w.reshape(w.shape[0], c * 9).T
    return np.ascontiguousarray(out.reshape(n, h, width, w.shape[0]).transpose(0, 3, 1, 2))


def torch_mlp_step(torch, p, x, y, lr=0.01):
    """bench/mlp_step.py's step, on PyTorch tensors: the loss's value and the updated parameters."""
    p = {k: v.detach().requires_grad_() for k, v in p.items()}
    h = torch.relu(x @ p["w0"] + p["b0"])
    h = torch.relu(h @ p["w1"] + p["b1"])
    logits = h @ p["w2"] + p["b2"]
    value = -(y * torch.log_softmax(logits, dim=1)).sum(1).mean()
    grads = torch.autograd.grad(value, list(p.values()))
    with torch.no_grad():
        return value.detach(), {k: v - lr * g for (k, v), g in zip(p.items(), grads)}


def sizes(scale: str) -> dict:
    """Problem sizes: "full" for a GPU, "quick" smaller, "tiny" for the emulation."""
    return {
        "full": dict(matmul=(1024, 2048, 4096), chain=1 << 24, rows=(4096, 1024), batch=1024, conv=(8, 64, 56, 64)),
        "quick": dict(matmul=(512, 1024), chain=1 << 20, rows=(1024, 512), batch=256, conv=(2, 32, 28, 32)),
        "tiny": dict(matmul=(17, 32), chain=1000, rows=(7, 33), batch=8, conv=(1, 3, 9, 4)),
    }[scale]


def workloads(scale: str):
    size = sizes(scale)
    rng = np.random.default_rng(0)

    def normal(*shape):
        return rng.standard_normal(shape).astype(f32)

    for m in size["matmul"]:
        yield Workload(
            f"matmul {m}x{m}x{m} f32",
            2.0 * m**3,
            True,
            lambda a, b: a @ b,
            [normal(m, m), normal(m, m)],
            lambda a, b: a @ b,
            lambda torch, a, b: a @ b,
            1e-4,
        )
    n = size["chain"]
    yield Workload(
        f"fused chain tanh(x*y+z), {n}",
        4.0 * n * 4,  # three reads and a write
        False,
        lambda x, y, z: np.tanh(x * y + z),
        [normal(n) for _ in range(3)],
        lambda x, y, z: np.tanh(x * y + z),
        lambda torch, x, y, z: torch.tanh(x * y + z),
        1e-5,
    )
    rows, cols = size["rows"]
    yield Workload(
        f"row softmax {rows}x{cols}",
        2.0 * rows * cols * 4,  # the least any softmax moves: a read and a write
        False,
        kiln.softmax,
        [normal(rows, cols)],
        numpy_softmax,
        lambda torch, x: torch.softmax(x, dim=-1),
        1e-5,
    )
    yield Workload(
        f"layernorm {rows}x{cols}",
        2.0 * rows * cols * 4 + 2 * cols * 4,
        False,
        layernorm,
        [normal(rows, cols), normal(cols), normal(cols)],
        layernorm,
        lambda torch, x, g, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5),
        1e-4,
    )
    batch = size["batch"]
    step, numpy_step, params, x, y, _ = mlp_step.make(np, batch)
    weights = sum(p.size for name, p in params.items() if name.startswith("w"))
    yield Workload(
        f"MLP training step 784-512-512-10, batch {batch}",
        6.0 * batch * weights,  # forward 2 FLOPs per weight and example, backward about 4
        True,
        step,
        [params, x, y],
        numpy_step,
        torch_mlp_step,
        1e-4,
    )
    n, c, hw, f = size["conv"]
    yield Workload(
        f"conv2d 3x3 pad 1, {n}x{c}x{hw}x{hw} -> {f} filters",
        2.0 * n * f * hw * hw * c * 9,
        True,
        lambda x, w: kiln.conv2d(x, w, padding=1),
        [normal(n, c, hw, hw), normal(f, c, 3, 3) / np.sqrt(9 * c).astype(f32)],
        numpy_conv3x3,
        lambda torch, x, w: torch.nn.functional.conv2d(x, w, padding=1),
        1e-4,
    )


# -- inputs, results and their comparison ----------------------------------------------------


def tree_map(f, tree):
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(f, v) for v in tree)
    return f(tree)


def leaves(tree) -> list:
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [leaf for v in tree for leaf in leaves(v)]
    return [tree]


def host(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a PyTorch tensor
        return value.detach().cpu().numpy()
    return value.numpy() if isinstance(value, kiln.DeviceArray) else np.asarray(value)


def difference(got, want, tol: float) -> str | None:
    """None where every leaf of `got` is within `tol` of numpy's (relative to the largest
    magnitude of numpy's leaf, NaN where numpy has NaN), else what differs."""
    got, want = leaves(got), leaves(want)
    if len(got) != len(want):
        return f"{len(got)} results, numpy has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = host(g), np.asarray(w)
        if g.shape != w.shape:
            return f"result {k} has shape {g.shape}, numpy's {w.shape}"
        scale = max(1.0, float(np.nanmax(np.abs(w)))) if w.size else 1.0
        close = np.isclose(g, w, rtol=tol, atol=tol * scale, equal_nan=True)
        if not close.all():
            error = np.abs(g.astype(np.float64) - w)
            worst = float(np.max(error, initial=0.0, where=np.isfinite(error)))
            return (
                f"result {k}: {int((~close).sum())} of {close.size} elements differ, "
                f"max |kiln - numpy| = {worst:.3g} where both are finite (tolerance {tol * scale:.3g})"
            )
    return None


# -- the device and its limits ---------------------------------------------------------------


class Device:
    """The CUDA runtime kiln loaded (so that its device memory is this one's), or host memory
    under the emulation: synchronization, raw copies and device attributes."""

    def __init__(self, emulate: bool):
        self.emulate = emulate
        self.runtime = None
        if not emulate:
            from kiln.runtime import cuda  # the same libcudart, hence the same device pointers

            self.runtime = cuda._cudart()
            self.runtime.cudaDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]

    def synchronize(self) -> None:
        if self.runtime is not None:
            self.runtime.cudaDeviceSynchronize()

    def attribute(self, number: int) -> int | None:
        if self.runtime is None:
            return None
        value = ctypes.c_int(0)
        return value.value if self.runtime.cudaDeviceGetAttribute(ctypes.byref(value), number, 0) == 0 else None

    def copy_seconds(self, nbytes: int, repeats: int) -> float:
        """The least time of a device-to-device copy of `nbytes`."""
        target = "cuda-emulate" if self.emulate else "cuda"
        source = kiln.to_device(np.ones(nbytes // 4, f32), target)
        destination = kiln.to_device(np.zeros(nbytes // 4, f32), target)
        best = float("inf")
        for _ in range(repeats + 1):  # the first copy maps the pages
            self.synchronize()
            start = time.perf_counter()
            if self.emulate:
                ctypes.memmove(destination.pointer, source.pointer, source.nbytes)
            else:
                error = self.runtime.cudaMemcpy(destination.pointer, source.pointer, source.nbytes, 3)  # on the device
                if error:
                    raise RuntimeError(f"cudaMemcpy device to device failed with CUDA error {error}")
            self.synchronize()
            best = min(best, time.perf_counter() - start)
        assert host(destination)[-1] == 1.0, "the copy did not arrive"
        return best


# Single-precision lanes per SM, by compute capability (NVIDIA's CUDA C programming guide).
FP32_LANES = {(6, 0): 64, (7, 0): 64, (7, 5): 64, (8, 0): 64}


def smi(field: str) -> str:
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"], capture_output=True, text=True
        )
    except FileNotFoundError:
        return ""
    return result.stdout.strip().splitlines()[0].strip() if result.returncode == 0 and result.stdout.strip() else ""


def measure_limits(device: Device, torch, scale: str) -> dict:
    """Memory bandwidth (bytes/s) and FP32 rate (FLOP/s), each with how it was found."""
    limits = {}
    nbytes = {"full": 1 << 30, "quick": 1 << 28, "tiny": 1 << 20}[scale]
    copies = {"cudaMemcpy device to device": 2 * nbytes / device.copy_seconds(nbytes, 10)}
    if torch is not None:
        source = torch.ones(nbytes // 4, device="cuda")
        destination = torch.empty_like(source)
        best = float("inf")
        for _ in range(11):
            torch.cuda.synchronize()
            start = time.perf_counter()
            destination.copy_(source)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        copies["torch copy_"] = 2 * nbytes / best
        del source, destination
    how = max(copies, key=copies.get)
    each = ", ".join(f"{name} {rate / 1e9:.1f} GB/s" for name, rate in copies.items())
    limits["bandwidth"] = (copies[how], f"measured: the best of {each}; {nbytes >> 20} MiB read and written")
    if torch is not None:
        m = {"full": 8192, "quick": 4096, "tiny": 64}[scale]
        a, b = torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")
        best = float("inf")
        for _ in range(6):
            torch.cuda.synchronize()
            start = time.perf_counter()
            a @ b
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        limits["fp32"] = (2.0 * m**3 / best, f"measured: torch.matmul {m}^2 float32, TF32 off")
    elif not device.emulate:
        major, minor = device.attribute(75), device.attribute(76)  # cudaDevAttrComputeCapabilityMajor/Minor
        sms = device.attribute(16)  # cudaDevAttrMultiProcessorCount
        clock = smi("clocks.max.sm")  # MHz
        if None not in (major, minor, sms) and clock.isdigit():
            lanes = FP32_LANES.get((major, minor), 128)
            rate = 2.0 * sms * lanes * int(clock) * 1e6
            how = f"nominal: {sms} SMs x {lanes} FP32 lanes x 2 x {clock} MHz, not measured (no PyTorch with CUDA)"
            limits["fp32"] = (rate, how)
    return limits


# -- timing ----------------------------------------------------------------------------------


def interleaved(calls: dict, budget: float, max_rounds: int) -> dict:
    """Median seconds per call of each implementation, taking turns a call each per round."""
    first = {}
    for name, call in calls.items():  # warm-up: builds, caches, page mappings; then one timed call
        call()
        start = time.perf_counter()
        call()
        first[name] = time.perf_counter() - start
    rounds = int(min(max_rounds, max(3, budget / max(sum(first.values()), 1e-9))))
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


# -- the run ---------------------------------------------------------------------------------


def measure(w: Workload, target: str, device: Device, torch, limits: dict, args) -> list:
    """The rows of one workload: its result checked against numpy's, then timed."""
    want = w.numpy_fn(*w.inputs)
    compiled = kiln.compile(w.fn, target=target)
    on_device = tree_map(lambda a: kiln.to_device(a, target), w.inputs)
    checks = {"kiln": difference(compiled(*on_device), want, w.tol)}

    def kiln_call():
        compiled(*on_device)
        device.synchronize()

    calls = {"numpy (CPU)": lambda: w.numpy_fn(*w.inputs), f"kiln {target}": kiln_call}
    if torch is not None and w.torch_fn is not None:
        tensors = tree_map(lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda(), w.inputs)
        checks["torch"] = difference(w.torch_fn(torch, *tensors), want, w.tol)

        def torch_call():
            w.torch_fn(torch, *tensors)
            torch.cuda.synchronize()

        calls["torch (GPU)"] = torch_call
    seconds = interleaved(calls, args.budget, args.repeats)
    limit = limits.get("fp32" if w.compute_bound else "bandwidth")
    rows = []
    for who, s in seconds.items():
        rate = w.work / s
        check = checks.get(who.split()[0])
        row = {
            "workload": w.name,
            "implementation": who,
            "ms": s * 1e3,
            "rate": f"{rate / 1e12:.2f} TFLOP/s" if w.compute_bound else f"{rate / 1e9:.1f} GB/s",
            "of limit": f"{rate / limit[0]:.1%}" if limit and who != "numpy (CPU)" else "",
            "vs numpy": seconds["numpy (CPU)"] / s,
            "vs torch": seconds["torch (GPU)"] / s if "torch (GPU)" in seconds else None,
            "check": "oracle" if who == "numpy (CPU)" else ("ok" if check is None else f"WRONG: {check}"),
        }
        rows.append(row)
        print(
            f"  {who:22s} {row['ms']:10.3f} ms {row['rate']:>16s} {row['of limit']:>7s}"
            f" {row['vs numpy']:8.2f}x numpy"
            + (f" {row['vs torch']:6.2f}x torch" if row["vs torch"] is not None else "")
            + f"  {row['check']}",
            file=sys.stderr,
        )
    return rows


def run(args) -> tuple[list, dict, list]:
    """The result rows, the limits and the header lines."""
    target = "cuda-emulate" if args.emulate else "cuda"
    scale = "tiny" if args.emulate else ("quick" if args.quick else "full")
    device = Device(args.emulate)
    torch = None
    try:
        import torch as _torch

        if _torch.cuda.is_available() and not args.emulate:
            torch = _torch
            # FP32 proper, the arithmetic kiln does: TF32 would round the inputs to 10-bit mantissas.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    except ImportError:
        pass
    gpu = smi("name") or "unknown (no nvidia-smi)"
    capability = smi("compute_cap")
    header = [
        f"device: {'none (cuda-emulate: kiln runs on the CPU, times mean nothing)' if args.emulate else gpu}"
        + (f", compute capability {capability}, driver {smi('driver_version')}" if capability else ""),
        f"kiln target: {target}; KILN_CUDA_ARCH={os.environ.get('KILN_CUDA_ARCH', '') or '(unset: nvcc default)'}",
        "peers: numpy (CPU, "
        + f"{os.cpu_count()} cores)"
        + (f", PyTorch {torch.__version__} on the GPU (cuBLAS, cuDNN)" if torch else ", no PyTorch with CUDA here"),
    ]
    for line in header:
        print(line, file=sys.stderr)
    limits = measure_limits(device, torch, scale)
    for what, (rate, how) in limits.items():
        unit = "GB/s" if what == "bandwidth" else "TFLOP/s"
        value = rate / 1e9 if what == "bandwidth" else rate / 1e12
        header.append(f"limit, {'memory bandwidth' if what == 'bandwidth' else 'FP32'}: {value:.1f} {unit} ({how})")
        print(header[-1], file=sys.stderr)
    if "fp32" not in limits:
        header.append(
            "limit, FP32: " + ("none under the emulation" if args.emulate else "unknown (no PyTorch, no clock)")
        )
    if args.markdown:  # row by row as each workload ends: a run stopped early still leaves a table
        print(markdown_head(header), end="", flush=True)
    rows = []
    for w in workloads(scale):
        print(f"\n{w.name}", file=sys.stderr)
        try:
            measured = measure(w, target, device, torch, limits, args)
        except Exception as exc:  # one workload kiln cannot build or run: named, and the others still run
            message = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
            measured = [dict(workload=w.name, implementation=f"kiln {target}", check=f"ERROR: {message}")]
            print(f"  ERROR: {message}", file=sys.stderr)
        rows += measured
        if args.markdown:
            print("".join(markdown_row(r) for r in measured), end="", flush=True)
    return rows, limits, header


def markdown_head(header: list) -> str:
    """The header lines as a list, then the table's head."""
    lines = [f"- {line}" for line in header]
    lines += [
        "",
        "| workload | implementation | ms | rate | of the limit | vs numpy | vs torch | check |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    return "\n".join(lines) + "\n"


def markdown_row(r: dict) -> str:
    cells = [
        r["workload"],
        r["implementation"],
        f"{r['ms']:.3f}" if "ms" in r else "",
        r.get("rate", ""),
        r.get("of limit", ""),
        f"{r['vs numpy']:.2f}x" if "vs numpy" in r else "",
        f"{r['vs torch']:.2f}x" if r.get("vs torch") is not None else "",
        r["check"].replace("|", "\\|"),
    ]
    return "| " + " | ".join(cells) + " |\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--emulate", action="store_true", help='target="cuda-emulate" with tiny sizes, on the CPU')
    parser.add_argument(
        "--target", choices=["cuda", "cuda-emulate"], default="cuda", help="--target cuda-emulate is --emulate"
    )
    parser.add_argument("--markdown", action="store_true", help="print the results as a Markdown table")
    parser.add_argument("--repeats", type=int, default=20, help="at most this many rounds per workload")
    parser.add_argument("--budget", type=float, default=None, help="seconds of rounds per workload (3; quick 1)")
    args = parser.parse_args(argv)
    args.emulate = args.emulate or args.target == "cuda-emulate"
    if args.budget is None:
        args.budget = 1.0 if args.quick or args.emulate else 3.0
    if not args.emulate:
        try:
            kiln.to_device(np.zeros(1, f32))  # says what is missing: nvcc, the CUDA runtime or a GPU
        except kiln.KilnError as exc:
            print(
                f"bench/cuda.py: {exc} (python bench/cuda.py --emulate checks this script without one)", file=sys.stderr
            )
            return 2
    rows, _, _ = run(args)
    wrong = [r for r in rows if r["check"].startswith(("WRONG", "ERROR"))]
    for r in wrong:
        print(f"{r['workload']}, {r['implementation']}: {r['check']}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
