"""The digit classifier examples/c/main.c calls: examples/train_mlp.py's network, with the
weights it trained built into the library from the SafeTensors file it saved.

    python examples/train_mlp.py        # trains, then saves build/digits_mlp.safetensors
    kiln build examples/c/digits_model.py:classify --weights build/digits_mlp.safetensors -o build/

`--weights` binds the file's tensors to the `params` parameter by name (w1, b1, w2, b2), checks
their shapes and dtypes against its annotation, and compiles them in as constants: the C
function takes the image only.
"""

import os
import sys

import numpy as np

import kiln

HIDDEN = 64  # train_mlp.py's default --hidden
PARAMS = {"w1": kiln.f32[64, HIDDEN], "b1": kiln.f32[HIDDEN], "w2": kiln.f32[HIDDEN, 10], "b2": kiln.f32[10]}
WEIGHTS = os.path.join("build", "digits_mlp.safetensors")


def classify(params: PARAMS, image: kiln.f32[1, 64]):
    """The digit in an 8x8 image of pixels 0..16 (row-major), and the ten digits' probabilities."""
    hidden = kiln.relu(image / 16 @ params["w1"] + params["b1"])  # train_mlp.py's pixels are divided by 16
    logits = hidden @ params["w2"] + params["b2"]
    return np.argmax(logits, axis=1), kiln.softmax(logits)


if __name__ == "__main__":
    # What build/main prints for the first images of examples/data, computed by kiln in Python.
    path = sys.argv[1] if len(sys.argv) > 1 else WEIGHTS
    if not os.path.isfile(path):
        print(f"{path} does not exist yet: python examples/train_mlp.py writes it")
        sys.exit(0)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from train_mlp import load_digits

    images, labels = load_digits()
    params = kiln.load_weights(path)
    classify_compiled = kiln.compile(classify)
    for image, label in zip(images[:5] * 16, labels[:5]):
        digit, probabilities = classify_compiled(params, image[None, :])
        print(f"digit {digit[0]} (p = {probabilities[0, digit[0]]:.4f}), label {label}")
