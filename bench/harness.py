"""What every benchmark shares: one thread count for every library, the peers that are
installed, interleaved timing rounds and the report format.

Workload modules (``bench/targets_*.py``) each define ``WORKLOADS = {name: function}``;
a function takes ``(np, kiln, found, quick)``, where ``found`` maps a peer's name
(``torch``, ``jax``, ``onnxruntime``, ``numexpr``) to its module when installed.
``bench/run.py`` finds them all.
"""

from __future__ import annotations

import os
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = ("numexpr", "torch", "jax", "onnxruntime")


def configure_threads(threads: int) -> None:
    """Before any numeric library loads: the same thread count for all."""
    for name in (
        "KILN_NUM_THREADS",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    ):
        os.environ[name] = str(threads)
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}")


def thread_and_round_arguments(doc: str, rounds: int = 7):
    """--threads (default 1) and --rounds parsed, the threads configured before numpy loads."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=rounds)
    args = parser.parse_args()
    configure_threads(args.threads)
    print(f"{args.threads} thread(s), medians of {args.rounds} interleaved rounds")
    return args


def peers():
    found, missing = {}, []
    for name in PEERS:
        try:
            found[name] = __import__(name)
        except ImportError:
            missing.append(name)
    if "torch" in found:
        found["torch"].set_num_threads(int(os.environ["KILN_NUM_THREADS"]))
    return found, missing


PAUSE = 0.15  # seconds between implementations: spinning threads of one library's pool go to sleep


def interleaved(implementations: dict, rounds: int = 7, min_time: float = 0.05) -> dict:
    """Median seconds per implementation; every round runs each one in turn.

    On a machine with few cores, a thread pool that just finished keeps its
    threads spinning for a while (OpenBLAS for ~0.1 s), starving the next
    library's threads; the pause before each implementation lets them sleep."""
    for fn in implementations.values():
        fn()  # warm-up: compilation, caches, page mappings
    timings = {name: [] for name in implementations}
    for _ in range(rounds):
        for name, fn in implementations.items():
            time.sleep(PAUSE)
            fn()
            runs, start = 0, time.perf_counter()
            while True:
                fn()
                runs += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_time or runs >= 50:
                    break
            timings[name].append(elapsed / runs)
    return {name: statistics.median(t) for name, t in timings.items()}


def report(title, times, unit, per_call=None):
    """One table: time, `unit` (a rate from seconds) and the ratio to numpy."""
    print(f"\n{title}")
    baseline = times.get("numpy")
    for name, seconds in times.items():
        rate = f"{per_call(seconds):>10.1f} {unit}" if per_call else ""
        ratio = f"{baseline / seconds:>8.2f}x numpy" if baseline else ""
        print(f"  {name:<22}{seconds * 1e3:>10.3f} ms {rate} {ratio}")


def against_numpy(workloads, rounds: int, check, width: int = 48) -> None:
    """One line per workload (title, function, arguments): the function as it is under numpy
    and compiled under kiln, `check(kiln's result, numpy's)` first, then timed interleaved."""
    import kiln

    for title, fn, inputs in workloads:
        compiled = kiln.compile(fn)
        check(compiled(*inputs), fn(*inputs))
        times = interleaved({"numpy": lambda: fn(*inputs), "kiln": lambda: compiled(*inputs)}, rounds=rounds)
        print(
            f"  {title:<{width}} numpy {times['numpy'] * 1e6:>9.1f} us   kiln {times['kiln'] * 1e6:>9.1f} us   "
            f"{times['numpy'] / times['kiln']:>6.2f}x numpy"
        )


def report_against_numpy(cases, compiled, rounds: int) -> None:
    """For each (title, numpy function, array) of `cases` and its kiln function in `compiled`:
    interleaved times of both on that array, reported in elements per second."""
    for (title, fn, x), f in zip(cases, compiled):
        times = interleaved({"numpy": lambda fn=fn, x=x: fn(x), "kiln": lambda f=f, x=x: f(x)}, rounds=rounds)
        report(title, times, "Melem/s", lambda s, n=x.size: n / s / 1e6)
