"""Train a digit classifier whose whole training step is one compiled function.

    python examples/train_mlp.py [--epochs 10] [--batch 64] [--hidden 64] [--save build/digits_mlp.safetensors]

Data: the UCI handwritten digits (8x8 images, 1797 samples, shipped in
examples/data). The step (forward, softmax cross-entropy, backward through
kiln.value_and_grad, SGD update of a dict of parameters) runs as native code;
the same step written by hand in numpy runs beside it, both for its time and as
a check that kiln computes the same numbers. The trained parameters are saved
with kiln.save_weights (SafeTensors), which examples/c/digits_model.py builds
into a C library: kiln build examples/c/digits_model.py:classify --weights FILE.
"""

import argparse
import gzip
import os
import statistics
import time

import numpy as np

import kiln

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.csv.gz")


def load_digits():
    with gzip.open(DATA, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return table[:, :-1] / 16.0, table[:, -1].astype(np.int64)


def init_params(rng, hidden):
    return {
        "w1": (rng.standard_normal((64, hidden)) * np.sqrt(2 / 64)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, 10)) * np.sqrt(1 / hidden)).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }


def predict(params, x):
    hidden = kiln.relu(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def loss_fn(params, x, onehot):
    logits = predict(params, x)
    log_probs = logits - kiln.logsumexp(logits, axis=1, keepdims=True)
    return -np.mean(np.sum(onehot * log_probs, axis=1))


def sgd_step(params, x, onehot, lr):
    loss, grads = kiln.value_and_grad(loss_fn)(params, x, onehot)
    return loss, {name: params[name] - lr * grads[name] for name in params}


# remat=True: activations are recomputed in the backward pass rather than kept.
train_step = kiln.compile(sgd_step, remat=True)


@kiln.compile
def accuracy(params, x, labels):
    logits = predict(params, x)
    best = logits.max(axis=1, keepdims=True)
    # the predicted class is the one whose logit is the row's maximum
    hits = np.sum((logits == best) * (labels == np.arange(10)), axis=1)
    return np.mean(hits > 0)


def numpy_step(params, x, onehot, lr):
    """The same step with a hand-written backward pass."""
    pre = x @ params["w1"] + params["b1"]
    hidden = np.maximum(pre, 0)
    logits = hidden @ params["w2"] + params["b2"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -np.mean(np.sum(onehot * log_probs, axis=1))
    d_logits = (np.exp(log_probs) - onehot) / x.shape[0]
    d_hidden = d_logits @ params["w2"].T * (pre > 0)
    grads = {"w2": hidden.T @ d_logits, "b2": d_logits.sum(axis=0), "w1": x.T @ d_hidden, "b1": d_hidden.sum(axis=0)}
    return loss, {name: params[name] - lr * grads[name] for name in params}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument(
        "--save",
        default=os.path.join("build", "digits_mlp.safetensors"),
        help="SafeTensors file for the trained parameters (default: build/digits_mlp.safetensors)",
    )
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    images, labels = load_digits()
    order = rng.permutation(len(images))
    test, train = order[:360], order[360:]
    x_train, y_train, x_test, y_test = images[train], labels[train], images[test], labels[test]
    onehot = np.eye(10, dtype=np.float32)[y_train]
    params = init_params(rng, args.hidden)
    reference = {name: value.copy() for name, value in params.items()}
    steps = len(x_train) // args.batch
    print(
        f"digits: {len(x_train)} train, {len(x_test)} test; MLP 64-{args.hidden}-10; "
        f"{steps} steps of {args.batch} per epoch"
    )
    example = (params, x_train[: args.batch], onehot[: args.batch], args.lr)
    kept = kiln.compile(sgd_step).lower(*example)
    recomputed = train_step.lower(*example)
    print(f"train step: {kept.kernel_count} kernels, {kept.memory_plan}")
    print(
        f"  with remat: {recomputed.kernel_count} kernels, arena {recomputed.memory_plan.arena_bytes} bytes "
        f"({kept.memory_plan.arena_bytes - recomputed.memory_plan.arena_bytes} fewer)"
    )
    print(f"{'epoch':>5} {'loss':>8} {'train acc':>10} {'test acc':>9} {'kiln step':>10} {'numpy step':>11}")
    worst = 0.0
    for epoch in range(1, args.epochs + 1):
        shuffle = rng.permutation(len(x_train))
        losses, kiln_times, numpy_times = [], [], []
        for k in range(steps):
            batch = shuffle[k * args.batch : (k + 1) * args.batch]
            x, t = x_train[batch], onehot[batch]
            start = time.perf_counter()
            loss, params = train_step(params, x, t, args.lr)
            kiln_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            ref_loss, reference = numpy_step(reference, x, t, np.float32(args.lr))
            numpy_times.append(time.perf_counter() - start)
            losses.append(loss)
            worst = max(worst, abs(float(loss) - float(ref_loss)))
        print(
            f"{epoch:>5} {np.mean(losses):>8.4f} {accuracy(params, x_train, y_train[:, None]):>10.3f} "
            f"{accuracy(params, x_test, y_test[:, None]):>9.3f} {statistics.median(kiln_times) * 1e3:>8.3f}ms "
            f"{statistics.median(numpy_times) * 1e3:>9.3f}ms"
        )
    drift = max(float(np.abs(params[n] - reference[n]).max()) for n in params)
    print(f"kiln vs hand-written numpy: max loss difference {worst:.2e}, max parameter difference {drift:.2e}")
    test_accuracy = accuracy(params, x_test, y_test[:, None])
    if test_accuracy < 0.9:
        raise SystemExit(f"the model did not learn: test accuracy {test_accuracy:.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
    kiln.save_weights(args.save, params)
    print(f"trained parameters saved to {args.save}")


if __name__ == "__main__":
    main()
