"""A two-layer perceptron, compiled with kiln and checked against numpy.

python examples/mlp.py                         # run it, compare, print the traced IR
kiln dump examples/mlp.py:predict --stage tensor
"""

import numpy as np

import kiln

BATCH, FEATURES, HIDDEN, CLASSES = 64, 784, 128, 10


# The parameters' specs, for `kiln dump` / `kiln build`, which read input shapes from annotations.
PARAMS = {
    "w1": kiln.f32[FEATURES, HIDDEN],
    "b1": kiln.f32[HIDDEN],
    "w2": kiln.f32[HIDDEN, CLASSES],
    "b2": kiln.f32[CLASSES],
}


@kiln.compile
def predict(x: kiln.f32[BATCH, FEATURES], params: PARAMS):
    hidden = kiln.relu(x @ params["w1"] + params["b1"])
    return kiln.softmax(hidden @ params["w2"] + params["b2"])


def init_params(rng):
    return {
        "w1": (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": np.zeros(CLASSES, np.float32),
    }


def main():
    rng = np.random.default_rng(0)
    params = init_params(rng)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)

    probabilities = predict(x, params)
    reference = predict.fn(x, params)  # the same Python function, run by numpy
    error = np.abs(probabilities - reference).max()
    print(f"predict: {probabilities.shape} {probabilities.dtype}, max |kiln - numpy| = {error:.2e}")
    print(f"first row: {np.round(probabilities[0], 3)}")
    print()
    print(predict.lower(x, params).text("tensor", locations=False))
    if error > 1e-5:
        raise SystemExit("kiln and numpy disagree")


if __name__ == "__main__":
    main()
