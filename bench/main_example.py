"""The README's main example, timed: examples/train_mlp.py's training step in kiln against
the same step in numpy (and in PyTorch where installed), at the example's sizes, on a quiet
machine and with one core kept busy, on 1 and 2 threads.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/main_example.py
    python bench/main_example.py --threads 1 --rounds 5

The step is the example's own (``sgd_step``: forward, softmax cross-entropy,
``kiln.value_and_grad``, SGD on a dict of parameters; batch 64, MLP 64-64-10), called as
the example calls it, ``train_step(params, x, onehot, lr)`` with a Python float `lr`.
numpy's step is the example's hand-written ``numpy_step``. The load is a child process
spinning in a loop (one core's worth), started before the timed rounds and stopped after
them. Each pass sets every library to the same thread count (kiln through
kiln.runtime.threads, numpy's OpenBLAS and PyTorch through threadpoolctl or their own
setters where available). Prints medians of interleaved rounds and numpy's time over
kiln's (above 1: kiln is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from harness import interleaved  # noqa: E402


def _spin(stop_at: float) -> None:
    """One core's worth of load until `stop_at` (a bound, should the parent die first)."""
    while time.time() < stop_at:
        pass


@contextlib.contextmanager
def busy_core(seconds_at_most: float):
    """A child process that keeps one core busy while the block runs."""
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=_spin, args=(time.time() + seconds_at_most,), daemon=True)
    child.start()
    time.sleep(0.2)  # let it reach its loop
    try:
        yield
    finally:
        child.terminate()
        child.join()


def blas_threads(count: int):
    """numpy's BLAS pool limited to `count` threads (threadpoolctl), or nothing without it."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    import numpy as np
    import train_mlp

    from kiln.runtime import threads

    rng = np.random.default_rng(0)
    images, labels = train_mlp.load_digits()
    params = train_mlp.init_params(rng, 64)
    x = images[:64]
    onehot = np.eye(10, dtype=np.float32)[labels[:64]]
    lr = 0.5
    loss, _ = train_mlp.train_step(params, x, onehot, lr)
    ref_loss, _ = train_mlp.numpy_step(params, x, onehot, np.float32(lr))
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    implementations = {
        "numpy": lambda: train_mlp.numpy_step(params, x, onehot, np.float32(lr)),
        "kiln": lambda: train_mlp.train_step(params, x, onehot, lr),
    }
    try:
        import torch

        tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        tx, ty = torch.tensor(x), torch.tensor(onehot)

        def torch_step():
            for value in tp.values():
                value.grad = None
            hidden = torch.relu(tx @ tp["w1"] + tp["b1"])
            logits = hidden @ tp["w2"] + tp["b2"]
            value = -(ty * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
            value.backward()
            with torch.no_grad():
                return value, {k: v - lr * v.grad for k, v in tp.items()}

        implementations["torch"] = torch_step
    except ImportError:
        torch = None
    print(f"examples/train_mlp.py's step: batch 64, MLP 64-64-10; medians of {args.rounds} interleaved rounds")
    for count in args.threads:
        threads.set_thread_count(count)
        if torch is not None:
            torch.set_num_threads(count)
        for load in ("quiet", "one core busy"):
            with blas_threads(count), busy_core(600) if load != "quiet" else contextlib.nullcontext():
                times = interleaved(implementations, rounds=args.rounds)
            cells = "   ".join(f"{name} {seconds * 1e3:7.4f} ms" for name, seconds in times.items())
            print(f"  {count} thread(s), {load:<14} {cells}   numpy/kiln {times['numpy'] / times['kiln']:5.2f}x")


if __name__ == "__main__":
    main()
