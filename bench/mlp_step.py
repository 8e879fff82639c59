"""The MLP training step the benchmarks time: 784-512-512-10, ReLU, softmax
cross-entropy, SGD; as kiln code, as hand-written numpy, and in PyTorch."""

import kiln


def make(np, batch):
    rng = np.random.default_rng(0)
    sizes = [784, 512, 512, 10]
    params = {}
    for k, (m, n) in enumerate(zip(sizes, sizes[1:])):
        params[f"w{k}"] = (rng.standard_normal((m, n)) * np.sqrt(2 / m)).astype(np.float32)
        params[f"b{k}"] = np.zeros(n, np.float32)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    lr = np.float32(0.01)

    def loss(p, x, y):
        h = kiln.relu(x @ p["w0"] + p["b0"])
        h = kiln.relu(h @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -np.mean(np.sum(y * (logits - kiln.logsumexp(logits, axis=1, keepdims=True)), axis=1))

    step = sgd_step(kiln, loss, lr)

    def numpy_step(p, x, y):
        h0 = x @ p["w0"] + p["b0"]
        a0 = np.maximum(h0, 0)
        h1 = a0 @ p["w1"] + p["b1"]
        a1 = np.maximum(h1, 0)
        logits = a1 @ p["w2"] + p["b2"]
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        value = -np.mean(np.sum(y * log_probs, axis=1))
        g = (np.exp(log_probs) - y) / x.shape[0]
        grads = {"w2": a1.T @ g, "b2": g.sum(0)}
        g = (g @ p["w2"].T) * (h1 > 0)
        grads.update(w1=a0.T @ g, b1=g.sum(0))
        g = (g @ p["w1"].T) * (h0 > 0)
        grads.update(w0=x.T @ g, b0=g.sum(0))
        return value, {k: p[k] - lr * grads[k] for k in p}

    def torch_step(torch):
        tp = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in params.items()}
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)

        def run():
            h = torch.relu(tx @ tp["w0"] + tp["b0"])
            h = torch.relu(h @ tp["w1"] + tp["b1"])
            logits = h @ tp["w2"] + tp["b2"]
            value = -(ty * torch.log_softmax(logits, dim=1)).sum(1).mean()
            grads = torch.autograd.grad(value, list(tp.values()))
            with torch.no_grad():
                return value, {k: v - float(lr) * g for (k, v), g in zip(tp.items(), grads)}

        return run

    return step, numpy_step, params, x, y, torch_step


def sgd_step(kiln, loss, lr):
    """One step of plain SGD on `loss`: its value and the updated parameters."""

    def step(p, x, y):
        value, grads = kiln.value_and_grad(loss)(p, x, y)
        return value, {k: p[k] - lr * grads[k] for k in p}

    return step
