"""An MLP forward pass whose weights are arrays it captures: `kiln build` makes them
constants of the library (docs/build.md builds it and calls it from Python; the C program,
examples/c/main.c, calls digits_model.py's classifier, whose weights come from a file).

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
    """The input docs/build.md uses: x[i][j] = (i * 16 + j) / 32 - 0.5."""
    return (np.arange(32, dtype=np.float32).reshape(2, 16) / 32 - 0.5).astype(np.float32)


if __name__ == "__main__":
    # What the built library computes (docs/build.md), computed here by kiln's native code.
    for row in kiln.compile(mlp)(example_input()):
        print(" ".join(f"{p:.6f}" for p in row))
