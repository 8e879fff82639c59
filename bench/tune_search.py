"""Does the evolutionary search beat random search? Same kernel, same number of
trials, several seeds; prints the best time each strategy found.

    python bench/tune_search.py [--trials 40] [--seeds 3]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kiln  # noqa: E402
from kiln.passes.kernels import extract  # noqa: E402
from kiln.tools.tuner import KernelBench, tune_kernel  # noqa: E402

KERNELS = {
    "matmul 512": (lambda a, b: a @ b, (kiln.f32[512, 512], kiln.f32[512, 512])),
    "matmul 384x1000x200": (lambda a, b: a @ b, (kiln.f32[384, 1000], kiln.f32[1000, 200])),
    "a @ b.T 256x512x512": (lambda a, b: a @ b.T, (kiln.f32[256, 512], kiln.f32[512, 512])),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'kernel':<22}{'strategy':<11}{'default ms':>11}{'best ms (per seed)':>30}{'median':>9}")
    for name, (fn, specs) in KERNELS.items():
        module = extract(kiln.compile(fn).lower(*specs).module("affine").body.ops[-1], "k0")
        bench = KernelBench(module)
        for strategy in ("evolution", "random"):
            bests, default = [], None
            for seed in range(args.seeds):
                result = tune_kernel(module, args.trials, seed, strategy, bench=bench)
                bests.append(result.best_seconds * 1e3)
                default = result.default_seconds * 1e3
            shown = " ".join(f"{b:.3f}" for b in bests)
            print(f"{name:<22}{strategy:<11}{default:>11.3f}{shown:>30}{statistics.median(bests):>9.3f}")


if __name__ == "__main__":
    main()
