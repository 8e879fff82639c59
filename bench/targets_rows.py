"""Row-wise workloads: softmax, the MLP training step in every spelling a user writes,
and float32 sums along rows, columns and whole arrays; kiln against numpy, PyTorch
(eager and ``torch.compile``) and JAX, timed in interleaved rounds.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py --only softmax,mlp,sums
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run.py --only softmax --threads 1

On a machine shared with other jobs a process runs only part of the time, and wall
time then measures the load more than the code (a library with more threads gets a
bigger share). With ``KILN_BENCH_CLOCK=process`` the rounds time the process's CPU time
instead (all its threads): with one thread, that is the work each library does.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PAUSE, interleaved, report  # noqa: E402


def timed(implementations: dict, rounds: int = 7) -> dict:
    """Median seconds per implementation, interleaved as in harness.interleaved; process CPU
    time when KILN_BENCH_CLOCK=process (see the module docstring)."""
    if os.environ.get("KILN_BENCH_CLOCK") != "process":
        return interleaved(implementations, rounds)
    import statistics
    import time

    for fn in implementations.values():
        fn()
    timings = {name: [] for name in implementations}
    for _ in range(rounds):
        for name, fn in implementations.items():
            time.sleep(PAUSE)
            runs, start = 0, time.process_time()
            while runs < 5 or (time.process_time() - start < 0.05 and runs < 50):
                fn()
                runs += 1
            timings[name].append((time.process_time() - start) / runs)
    return {name: statistics.median(t) for name, t in timings.items()}


def bench_softmax(np, kiln, found, quick):
    rows = 512 if quick else 4096
    x = np.random.default_rng(0).standard_normal((rows, 1024), dtype=np.float32)
    out = np.empty_like(x)
    compiled = kiln.compile(kiln.softmax)
    np.testing.assert_allclose(compiled(x), kiln.softmax(x), rtol=1e-5, atol=1e-7)
    impl = {
        "numpy": lambda: kiln.softmax(x),
        "kiln": lambda: compiled(x),
        "kiln (out=)": lambda: compiled(x, out=out),
    }
    if "torch" in found:
        torch = found["torch"]
        tx = torch.from_numpy(x)
        impl["torch"] = lambda: torch.softmax(tx, dim=-1)
        traced = _torch_compiled(torch, lambda t: torch.softmax(t, dim=-1), tx)
        if traced:
            impl["torch.compile"] = lambda: traced(tx)
    if "jax" in found:
        jax = found["jax"]
        jx, jitted = jax.numpy.asarray(x), jax.jit(lambda v: jax.nn.softmax(v, axis=-1))
        impl["jax"] = lambda: jitted(jx).block_until_ready()
    report(f"row softmax {rows}x1024 float32", timed(impl), "", None)


def _torch_compiled(torch, fn, *args):
    """torch.compile's function, or None where it cannot build (no C++ compiler)."""
    try:
        compiled = torch.compile(fn)
        compiled(*args)
    except Exception as error:  # inductor raises many kinds; the workload runs without it
        print(f"  (torch.compile unavailable: {type(error).__name__})")
        return None
    return compiled


def mlp_losses(np, kiln):
    """The cross-entropy loss as users spell it: kiln's helpers, or numpy written out."""

    def helpers(p, x, y):
        h = kiln.relu(x @ p["w0"] + p["b0"])
        h = kiln.relu(h @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -np.mean(np.sum(y * (logits - kiln.logsumexp(logits, axis=1, keepdims=True)), axis=1))

    def spelled_out(p, x, y):
        h = np.maximum(x @ p["w0"] + p["b0"], 0)
        h = np.maximum(h @ p["w1"] + p["b1"], 0)
        z = h @ p["w2"] + p["b2"]
        m = z.max(axis=1, keepdims=True)
        lse = m + np.log(np.exp(z - m).sum(axis=1, keepdims=True))
        return -np.mean(np.sum(y * (z - lse), axis=1))

    return {"logsumexp, relu": helpers, "spelled out": spelled_out}


def bench_mlp(np, kiln, found, quick):
    import mlp_step

    batch = 64 if quick else 256
    _, numpy_step, params, x, y, torch_step = mlp_step.make(np, batch)
    reference, _ = numpy_step(params, x, y)
    for loss_name, loss in mlp_losses(np, kiln).items():
        for lr_name, lr in (("np.float32 lr", np.float32(0.01)), ("Python float lr", 0.01)):
            step = mlp_step.sgd_step(kiln, loss, lr)
            compiled = kiln.compile(step)
            value, new = compiled(params, x, y)
            assert abs(float(value) - float(reference)) < 1e-3 * abs(float(reference))
            assert all(new[k].dtype == np.float32 for k in new)
            impl = {"numpy (hand-written)": lambda: numpy_step(params, x, y), "kiln": lambda: compiled(params, x, y)}
            if "jax" in found:
                impl["jax"] = _jax_step(found["jax"], loss, lr, params, x, y)
            if "torch" in found:
                impl["torch eager"] = torch_step(found["torch"])
            report(
                f"MLP training step, batch {batch}, loss with {loss_name}, {lr_name}",
                timed(impl, rounds=5),
                "steps/s",
                lambda s: 1 / s,
            )


def _jax_step(jax, loss, lr, params, x, y):
    """The same numpy-style loss traced by jax.numpy, differentiated by jax.grad, jitted."""
    import types

    jnp = jax.numpy
    shim = types.SimpleNamespace(relu=lambda v: jnp.maximum(v, 0), logsumexp=jax.nn.logsumexp)
    source = loss.__code__
    globals_ = dict(loss.__globals__, np=jnp, kiln=shim)
    jax_loss = types.FunctionType(source, globals_, loss.__name__, loss.__defaults__, _cells(loss, jnp, shim))

    @jax.jit
    def step(p, x, y):
        value, grads = jax.value_and_grad(jax_loss)(p, x, y)
        return value, {k: p[k] - lr * grads[k] for k in p}

    jp = {k: jnp.asarray(v) for k, v in params.items()}
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    return lambda: jax.block_until_ready(step(jp, jx, jy))


def _cells(fn, jnp, shim):
    """The closure of `fn` with numpy and kiln swapped for jax.numpy and its helpers."""
    import types

    if not fn.__closure__:
        return None
    swap = {"np": jnp, "kiln": shim}
    return tuple(
        types.CellType(swap.get(name, cell.cell_contents))
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__)
    )


def bench_sums(np, kiln, found, quick):
    rng = np.random.default_rng(0)
    square = rng.random((1024, 1024), dtype=np.float32)
    flat = rng.random(10**6 if quick else 10**7, dtype=np.float32)
    cases = [
        ("row sums 1024x1024", lambda v: v.sum(axis=1), square),
        ("column sums 1024x1024", lambda v: v.sum(axis=0), square),
        ("whole sum 1024x1024", lambda v: v.sum(), square),
        (f"whole sum {flat.size:.0e}", lambda v: v.sum(), flat),
    ]
    for title, fn, x in cases:
        compiled = kiln.compile(fn)
        exact = fn(x.astype(np.float64))
        got = compiled(x)
        np.testing.assert_allclose(got, exact, rtol=1e-5)
        impl = {"numpy": lambda: fn(x), "kiln": lambda: compiled(x)}
        if "torch" in found:
            tx = found["torch"].from_numpy(x)
            impl["torch"] = lambda: fn(tx)
        if "jax" in found:
            jax = found["jax"]
            jx, jitted = jax.numpy.asarray(x), jax.jit(fn)
            impl["jax"] = lambda: jitted(jx).block_until_ready()
        report(f"{title} float32", timed(impl), "GB/s", lambda s: x.nbytes / s / 1e9)


WORKLOADS = {"softmax": bench_softmax, "mlp": bench_mlp, "sums": bench_sums}
