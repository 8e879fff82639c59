"""The MLP training step of the benchmarks (784-512-512-10, batch 256), annotated
so that the command line can tune and dump it:

    kiln tune examples/train_step.py:train_step --trials 40
    kiln dump examples/train_step.py:train_step --stage scheduled
    python examples/train_step.py      # one step on random data, its loss beside numpy's
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


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    params = {name: (rng.standard_normal(spec.shape) * 0.05).astype(np.float32) for name, spec in PARAMS.items()}
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)]
    step = kiln.compile(train_step)
    value, updated = step(params, x, y)
    reference = loss(params, x, y)  # the same loss, run by numpy
    lowered = step.lower(params, x, y)
    print(f"train step (MLP 784-512-512-10, batch {BATCH}): {lowered.kernel_count} kernels, {lowered.memory_plan}")
    print(f"loss {float(value):.6f}, numpy {float(reference):.6f}: |kiln - numpy| = {abs(value - reference):.2e}")
    print(f"largest parameter update: {max(float(np.abs(updated[k] - params[k]).max()) for k in params):.2e}")
    if abs(value - reference) > 1e-4:
        raise SystemExit("kiln and numpy disagree")
