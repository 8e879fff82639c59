"""Layer normalization over the last axis, as in a transformer block."""

import numpy as np

import kiln

ROWS, WIDTH = 37, 96


@kiln.compile
def layernorm(x: kiln.f32[ROWS, WIDTH], gamma: kiln.f32[WIDTH], beta: kiln.f32[WIDTH]):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, WIDTH)).astype(np.float32)
    gamma, beta = rng.random(WIDTH).astype(np.float32), rng.random(WIDTH).astype(np.float32)
    error = np.abs(layernorm(x, gamma, beta) - layernorm.fn(x, gamma, beta)).max()
    print(f"layernorm {x.shape}: max |kiln - numpy| = {error:.2e}")
