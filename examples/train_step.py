"""The MLP training step of the benchmarks (784-512-512-10, batch 256), annotated
so that the command line can tune and dump it:

    kiln tune examples/train_step.py:train_step --trials 40
    kiln dump examples/train_step.py:train_step --stage scheduled
"""

import numpy as np

import kiln

BATCH = 256
PARAMS = {
    "w0": kiln.f32[784, 512],
    "b0": kiln.f32[512],
    "w1": kiln.f32[512, 512],
    "b1": kiln.f32[512],
    "w2": kiln.f32[512, 10],
    "b2": kiln.f32[10],
}


def loss(p, x, y):
    h = kiln.relu(x @ p["w0"] + p["b0"])
    h = kiln.relu(h @ p["w1"] + p["b1"])
    logits = h @ p["w2"] + p["b2"]
    return -np.mean(np.sum(y * (logits - kiln.logsumexp(logits, axis=1, keepdims=True)), axis=1))


def train_step(params: PARAMS, x: kiln.f32[BATCH, 784], y: kiln.f32[BATCH, 10]):
    value, grads = kiln.value_and_grad(loss)(params, x, y)
    return value, {k: params[k] - np.float32(0.01) * grads[k] for k in params}
