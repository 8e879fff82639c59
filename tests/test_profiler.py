"""kiln.profile: per-kernel rows that add up, FLOPs and bytes that are exact for
known kernels, the fused tensor ops named, and prefix variants that compute
what the full function computes."""

import numpy as np
import pytest

import kiln
from kiln.passes.cost_analysis import kernel_units
from kiln.tools.profiler import _compile_prefix


def mlp(x, w, b, v):
    return kiln.softmax(np.maximum(x @ w + b, 0) @ v)


def args(m=13, k=7, n=5, p=3, dtype=np.float32):
    rng = np.random.default_rng(9)
    return [rng.standard_normal(s).astype(dtype) for s in [(m, k), (k, n), (n,), (n, p)]]


def test_rows_add_up_and_name_every_kernel_of_the_scheduled_ir():
    f = kiln.compile(mlp)
    profile = kiln.profile(f, *args(), seconds=0.2)
    scheduled = f.lower(*args()).text("scheduled")
    assert [k.name for k in profile.kernels] == [f"k{n}" for n in range(len(profile.kernels))]
    for k in profile.kernels:
        assert f"%{k.name}." in scheduled
    total = profile.outside_seconds + sum(k.seconds for k in profile.kernels)
    assert total == pytest.approx(profile.native_seconds, rel=1e-9)
    assert sum(k.share for k in profile.kernels) == pytest.approx(1 - profile.outside_seconds / profile.native_seconds)
    assert profile.kernels_after_fusion == len(profile.kernels) < profile.kernels_before_fusion
    assert profile.kernels[0].ops[:4] == ["matmul", "broadcast_to", "add", "constant"]
    text = str(profile)
    assert "k0" in text and "GFLOP/s" in text and "native" in text


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 7, 5), (64, 33, 17)])
def test_a_matmuls_flops_and_bytes_are_exact(m, k, n):
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    profile = kiln.compile(lambda a, b: a @ b).profile(a, b, seconds=0.05)
    (kernel,) = profile.kernels
    assert kernel.flops == 2 * m * n * k
    assert kernel.bytes == 8 * (m * k + k * n + m * n)
    assert kernel.ops == ["matmul"]


def test_the_full_prefix_computes_what_the_function_computes():
    f = kiln.compile(mlp)
    inputs = args(dtype=np.float64)
    want = f(*inputs)
    module = f.lower(*inputs).pipeline.module("scheduled")
    units = kernel_units(module.body.ops[-1])
    _, native = _compile_prefix(module, units, len(units), 5)
    out = np.empty_like(want)
    assert native(inputs + [out]) == 0
    np.testing.assert_array_equal(out, want)
    _, empty = _compile_prefix(module, units, 0, 5)
    assert empty(inputs + [np.empty_like(want)]) == 0  # no kernel at all still runs


def test_profile_refuses_other_targets():
    with pytest.raises(kiln.KilnError, match="times native CPU code"):
        kiln.profile(kiln.compile(mlp, target="interpret"), *args())


def test_kiln_profile_on_the_command_line(capsys):
    from kiln.tools.cli import main

    root = __file__.rsplit("/tests/", 1)[0]
    assert main(["profile", f"{root}/examples/layernorm.py:layernorm", "--seconds", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kiln profile of layernorm:") and "\nk0 " in out and "\nnative " in out
    assert main(["profile", f"{root}/examples/nope.py:f"]) == 1
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "values",
    [
        [1.0, 2.0, 3.0],
        [3.0, 2.0, 1.0],
        [1.0, 0.5, 2.0, 1.9, 5.0],
        [0.0],
        [],
        [2.0, 2.0, -1.0, 7.0],
    ],
)
def test_prefix_times_are_fitted_non_decreasing(values):
    fitted = kiln.tools.profiler.non_decreasing(values)
    assert len(fitted) == len(values) and all(b >= a for a, b in zip(fitted, fitted[1:]))
    assert sum(fitted) == pytest.approx(sum(values))  # pooling keeps the total
    if all(b >= a for a, b in zip(values, values[1:])):
        assert fitted == values


def test_noise_that_makes_a_kernel_look_negative_gives_zero_not_a_negative_time(monkeypatch):
    # Prefix medians as a noisy machine gives them: the prefix with k1 looks faster than
    # the one without it (outside 10 us, k0 40 us, k1 "-3 us", then 20 us a kernel).
    def scripted(calls, seconds):
        prefixes = [10e-6, 50e-6, 47e-6]
        while len(prefixes) < len(calls) - 1:
            prefixes.append(prefixes[-1] + 20e-6)
        return prefixes[: len(calls) - 1] + [prefixes[-1] + 5e-6]

    monkeypatch.setattr(kiln.tools.profiler, "_interleaved", scripted)
    profile = kiln.profile(kiln.compile(mlp), *args(), seconds=0.01)
    assert len(profile.kernels) >= 2
    times = [k.seconds for k in profile.kernels]
    assert min(times) >= 0 and times[1] == 0.0 and times[0] == pytest.approx(38.5e-6)
    assert profile.outside_seconds + sum(times) == pytest.approx(profile.native_seconds)
    text = str(profile)
    assert "~0" in text and "nan" not in text and " -0" not in text


@pytest.mark.parametrize(
    "shapes",
    [
        [(0, 5), (5, 3)],
        [(4, 0), (0, 3)],
        [(1, 1), (1, 1)],
        [(13, 7), (7, 1)],
        [(2, 3), (3, 0)],
    ],
    ids=str,
)
def test_times_are_never_negative_and_rates_never_nan(shapes):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s) for s in shapes)
    f = kiln.compile(lambda a, b: np.maximum(a @ b, 0) + np.exp(a).sum())
    profile = kiln.profile(f, a, b, seconds=0.02)
    for k in profile.kernels:
        assert k.seconds >= 0 and 0 <= k.share <= 1
        for rate in (k.gb_per_s, k.gflop_per_s):
            assert rate is None or (np.isfinite(rate) and rate >= 0)
    assert profile.outside_seconds >= 0 and profile.native_seconds >= 0
    text = str(profile)
    assert "nan" not in text and "inf" not in text and " -0." not in text


def test_rates_of_a_kernel_with_no_time_print_as_a_dash():
    from kiln.tools.profiler import KernelProfile, Profile

    row = KernelProfile("k0", 0.0, 0.0, 0, 0, ["add"])
    assert row.gb_per_s is None and row.gflop_per_s is None
    text = str(Profile("f", kernels=[row]))
    line = next(l for l in text.splitlines() if l.startswith("k0"))
    assert "~0" in line and " - " in line and "nan" not in text
