"""A float32 matmul: the schedules tutorial's subject, and what `kiln tune` will tune.

kiln dump examples/matmul.py:matmul --stage scheduled
"""

import numpy as np

import kiln

N = 512


@kiln.compile
def matmul(a: kiln.f32[N, N], b: kiln.f32[N, N]):
    return a @ b


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((N, N), dtype=np.float32) for _ in range(2))
    error = np.abs(matmul(a, b) - a @ b).max()
    print(f"matmul {N}x{N}x{N}: max |kiln - numpy| = {error:.2e}")
    print(matmul.lower(a, b).text("scheduled", locations=False).splitlines()[0])
