"""Single-head scaled dot-product attention with a causal mask."""

import numpy as np

import kiln

SEQ, DIM = 13, 32


@kiln.compile
def attention(q: kiln.f32[SEQ, DIM], k: kiln.f32[SEQ, DIM], v: kiln.f32[SEQ, DIM]):
    scores = q @ k.T / np.sqrt(np.float32(DIM))
    causal = np.tril(np.ones((SEQ, SEQ), dtype=bool))  # a captured constant
    scores = np.where(causal, scores, -np.inf)
    return kiln.softmax(scores, axis=-1) @ v


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((SEQ, DIM)).astype(np.float32) for _ in range(3))
    error = np.abs(attention(q, k, v) - attention.fn(q, k, v)).max()
    print(f"attention {q.shape}: max |kiln - numpy| = {error:.2e}")
