"""kiln.profile: per-kernel rows that add up, FLOPs and bytes that are exact for
known kernels, the fused tensor ops named, and prefix variants that compute
what the full function computes."""
import numpy as np
import pytest

import kiln
from kiln.profiler import _compile_prefix, _units


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
    module = f.lower(*inputs)._pipeline.module("scheduled")
    units = _units(module.body.ops[-1])
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
    from kiln.cli import main
    root = __file__.rsplit("/tests/", 1)[0]
    assert main(["profile", f"{root}/examples/layernorm.py:layernorm", "--seconds", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kiln profile of layernorm:") and "\nk0 " in out and "\nnative " in out
    assert main(["profile", f"{root}/examples/nope.py:f"]) == 1
    assert "no such file" in capsys.readouterr().err
