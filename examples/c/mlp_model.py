"""The model examples/c/main.c calls: an MLP forward pass with its weights built in.

kiln build examples/c/mlp_model.py:mlp -o build/
"""

import numpy as np

import kiln

_rng = np.random.default_rng(42)
W1 = (_rng.standard_normal((16, 32)) / 4).astype(np.float32)
B1 = (_rng.standard_normal(32) / 10).astype(np.float32)
W2 = (_rng.standard_normal((32, 4)) / 6).astype(np.float32)


def mlp(x: kiln.f32[2, 16]):
    """Class probabilities for two inputs of 16 features; the weights are constants."""
    return kiln.softmax(kiln.relu(x @ W1 + B1) @ W2)


def example_input():
    """The input main.c uses: x[i][j] = (i * 16 + j) / 32 - 0.5."""
    return (np.arange(32, dtype=np.float32).reshape(2, 16) / 32 - 0.5).astype(np.float32)


if __name__ == "__main__":
    # What build/main prints, computed here by kiln's native code instead of the shipped library.
    for row in kiln.compile(mlp)(example_input()):
        print(" ".join(f"{p:.6f}" for p in row))
