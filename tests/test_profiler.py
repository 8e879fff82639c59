"""kiln.profile: per-kernel rows that add up, FLOPs and bytes that are exact for
known kernels, every nest labelled by the tensor op that made it, and one probed
build that computes what the function computes."""

import numpy as np
import pytest

import kiln
from kiln.codegen import llvm_target
from kiln.passes.cost_analysis import kernel_units
from kiln.tools import profiler
from kiln.tools.peak import Peak, fma_loop_ir, measure_peak
from kiln.tools.profiler import _compile_probed, _ticks


def mlp(x, w, b, v):
    return kiln.softmax(np.maximum(x @ w + b, 0) @ v)


def args(m=13, k=7, n=5, p=3, dtype=np.float32):
    rng = np.random.default_rng(9)
    return [rng.standard_normal(s).astype(dtype) for s in [(m, k), (k, n), (n,), (n, p)]]


def test_rows_name_every_kernel_of_the_scheduled_ir():
    f = kiln.compile(mlp)
    profile = kiln.profile(f, *args(), seconds=0.2)
    scheduled = f.lower(*args()).text("scheduled")
    assert [k.name for k in profile.kernels] == [f"k{n}" for n in range(len(profile.kernels))]
    for k in profile.kernels:
        assert f"%{k.name}." in scheduled
    assert profile.outside_seconds >= 0 and all(k.seconds >= 0 for k in profile.kernels)
    assert all(k.share == pytest.approx(k.seconds / profile.native_seconds) for k in profile.kernels)
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_probed_build_computes_what_numpy_does_and_counts_every_kernel(dtype):
    f = kiln.compile(mlp)
    inputs = args(dtype=dtype)
    x, w, b, v = (a.astype(np.float64) for a in inputs)
    z = np.maximum(x @ w + b, 0) @ v
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    module = f.lower(*inputs).pipeline.module("scheduled")
    units = kernel_units(module.body.ops[-1])
    loaded, native = _compile_probed(module, units, 5)
    ticks = _ticks(loaded, len(units) + 1)
    out = np.empty((13, 3), dtype)
    assert native(inputs + [out]) == 0
    np.testing.assert_allclose(out, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
    first = ticks.copy()
    assert native(inputs + [out]) == 0
    spent = ticks - first  # each call adds its ticks: every kernel ran and was counted once
    assert (spent > 0).all() and spent[:-1].sum() <= spent[-1]  # the kernels lie inside the whole body


def test_one_build_serves_every_kernel(monkeypatch):
    f = kiln.compile(mlp)
    f(*args())  # the function's own code, built (or found in the cache) before counting
    builds = []
    emit = llvm_target.emit_object
    monkeypatch.setattr(llvm_target, "emit_object", lambda code: builds.append(1) or emit(code))
    profile = kiln.profile(f, *args(), seconds=0.02)
    assert len(profile.kernels) >= 3 and len(builds) == 1  # not one build per kernel


def test_every_nest_of_a_convolution_is_labelled_by_it():
    # A convolution lowers to several nests (packing, the matmul, the epilogue): each is the
    # conv's, and the kernels after it keep their own labels.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 9, 9)).astype(np.float32)
    w1, w2 = rng.standard_normal((5, 3, 3, 3)).astype(np.float32), rng.standard_normal((2, 5, 3, 3)).astype(np.float32)
    f = kiln.compile(lambda x, w1, w2: np.tanh(kiln.conv2d(kiln.relu(kiln.conv2d(x, w1, padding=1)), w2)).sum())
    profile = kiln.profile(f, x, w1, w2, seconds=0.02)
    labels = [k.ops for k in profile.kernels if k.name != "scalar"]
    nests = [op for op in f.lower(x, w1, w2).module("affine").body.ops[-1].body.ops if op.name == "affine.for"]
    assert len(labels) == len({kiln.dialects.affine.kernel_of(n) for n in nests}) > 4
    relu = labels.index(["maximum"])
    assert relu > 1 and all(ops == ["conv2d"] for ops in labels[:relu])
    assert labels[-1] == ["tanh", "reduce_sum"] and all(ops == ["conv2d"] for ops in labels[relu + 1 : -1])


def test_each_kernel_is_counted_as_itself():
    a, b = np.ones((160, 160)), np.ones((160, 160))
    profile = kiln.compile(lambda a, b, c: (a @ b, c + 1)).profile(a, b, np.ones(3), seconds=0.1)
    (matmul,) = [k for k in profile.kernels if k.ops == ["matmul"]]
    (add,) = [k for k in profile.kernels if k.ops == ["add"]]
    assert matmul.flops > 1000 * add.flops  # each kernel is counted as itself: 8 MFLOP against three additions


def test_the_header_counts_in_the_singular_and_plural():
    one = str(
        profiler.Profile(
            "f",
            kernels=[profiler.KernelProfile("k0", 1e-3, 1.0, 8, 2, ["add"])],
            kernels_after_fusion=1,
            kernels_before_fusion=1,
        )
    )
    assert one.startswith("kiln profile of f: 1 kernel (1 before fusion) in 1 timed region, ")
    two = str(profiler.Profile("f", kernels_after_fusion=2, kernels_before_fusion=3))
    assert two.startswith("kiln profile of f: 2 kernels (3 before fusion) in 0 timed regions, ")


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


def test_a_kernel_the_counter_saw_take_no_time_is_zero_not_negative(monkeypatch):
    # Every call's ticks for k1 are zero (as for a kernel far shorter than the counter's step).
    def scripted(run_native, run_call, ticks, seconds):
        run_native()
        kernels = [4000, 0] + [1000] * (len(ticks) - 3)
        per_call = [np.array([*kernels, sum(kernels) + 700]) for _ in range(5)]  # 700 ticks outside them
        return 50e-6, 60e-6, per_call

    monkeypatch.setattr(profiler, "_measure", scripted)
    monkeypatch.setattr(profiler, "_counter_rate", lambda loaded: 1e8)  # 10 ns a tick
    profile = kiln.profile(kiln.compile(mlp), *args(), seconds=0.01)
    times = [k.seconds for k in profile.kernels]
    assert len(times) >= 2 and times[0] == pytest.approx(40e-6) and times[1] == 0.0
    assert profile.outside_seconds == pytest.approx(7e-6) and profile.native_seconds == 50e-6
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


def test_a_kernels_share_of_the_measured_peak_counts_the_cores_it_ran_on():
    peak = Peak(gflop_per_s=4.0, lanes=8, chains=12)
    parallel = profiler.KernelProfile("k0", 1.0, 0.5, 8, 2_000_000_000, ["matmul"], cores=2)
    serial = profiler.KernelProfile("k1", 1.0, 0.5, 8, 2_000_000_000, ["matmul"])
    copy = profiler.KernelProfile("k2", 1.0, 0.5, 8, 0, ["copy"])
    assert parallel.of_peak(4.0) == 0.25 and serial.of_peak(4.0) == 0.5 and copy.of_peak(4.0) is None
    text = str(profiler.Profile("f", kernels=[parallel, serial, copy], peak=peak))
    assert "peak 4.0 GFLOP/s a core (float32 FMA, measured: 12 chains of 8-lane vectors)" in text
    rows = {line.split()[0]: line for line in text.splitlines()}
    assert rows["k0"].endswith(" 25%  matmul") and rows["k1"].endswith(" 50%  matmul")
    assert rows["k2"].endswith(" -  copy")


def test_the_peak_loop_keeps_every_chain_on_the_hosts_widest_vectors():
    text = fma_loop_ir(8, 12, llvm_target.host_target_machine().triple)
    assert text.count("call <8 x float> @llvm.fma.v8f32") == 12
    llvm_target.parse_and_verify(text)  # valid LLVM IR
    peak = measure_peak()  # its rate is a measurement (bench/, docs/benchmarks.md), not checked here
    assert peak.lanes == llvm_target.vector_bits() // 32
    assert peak.chains == min(16, llvm_target.vector_registers() - 4)
    assert peak is measure_peak()  # measured once a process


def test_a_profile_reports_the_peak_it_was_measured_against():
    p = kiln.profile(kiln.compile(mlp), *args(), seconds=0.05)
    assert p.peak is measure_peak()
    assert "peak" in str(p).splitlines()[1] and all(0 < k.cores for k in p.kernels)
