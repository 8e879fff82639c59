"""GPU schedules: ``bind`` puts loops on block and thread indices; the kernels it gives
are checked in host emulation on awkward shapes (and on a GPU, where there is one), its
misuse gets a ScheduleError, and the bound loops print as MLIR that mlir-opt accepts."""

import numpy as np
import pytest
from targets import NEEDS_GPU
from test_mlir_opt import MLIR_OPT, mlir_opt

import kiln
from kiln.dialects import parse_ir, print_ir


def bias_tanh(x, b):
    return np.tanh(x + b)


def matmul_softmax(a, b):
    return kiln.softmax(a @ b)


BIAS_TANH = (
    kiln.Schedule()
    .split("k0.i", 8)
    .bind("k0.i.o", "blockIdx.x")
    .bind("k0.i.i", "threadIdx.y")
    .bind("k0.j", "threadIdx.x")
)
# A row per block for the softmax kernel (its exp, computed into a row buffer on a CPU, is
# computed where the sum and the division need it here), the matmul tiled 4x4 over blocks and threads.
MATMUL_SOFTMAX = (
    kiln.Schedule()
    .tile(["k0.i", "k0.j"], [4, 4])
    .bind("k0.i.o", "blockIdx.y")
    .bind("k0.j.o", "blockIdx.x")
    .bind("k0.i.i", "threadIdx.y")
    .bind("k0.j.i", "threadIdx.x")
    .bind("k1.i", "blockIdx.x")
    .bind("k1.j", "threadIdx.x")
)


@pytest.mark.parametrize("shape", [(1, 1), (37, 33), (8, 1), (61, 257)])
def test_bound_elementwise_kernel_gives_numpys_numbers(shape):
    f = kiln.compile(bias_tanh, target="cuda-emulate", schedule=BIAS_TANH)
    rng = np.random.default_rng(7)
    x, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[1:]).astype(np.float32)
    text = f.lower(x, b).text("cuda")
    assert "for (long long v3 = blockIdx.x; v3 < " in text and "+= blockDim.y" in text
    np.testing.assert_allclose(f(x, b), np.tanh(x + b), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 5, 3), (13, 11, 17)])
def test_bound_matmul_and_softmax_give_numpys_numbers(m, k, n):
    f = kiln.compile(matmul_softmax, target="cuda-emulate", schedule=MATMUL_SOFTMAX)
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    assert "KILN_LAUNCH3(" in f.lower(a, b).text("cuda")
    np.testing.assert_allclose(f(a, b), kiln.softmax(a @ b), rtol=1e-12)


@NEEDS_GPU
@pytest.mark.parametrize("shape", [(1, 1), (37, 33), (61, 257), (1030, 3)])  # 8 x 257 threads: above 1024
def test_bound_schedules_give_numpys_numbers_on_the_gpu(shape):
    rng = np.random.default_rng(9)
    x, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[1:]).astype(np.float32)
    f = kiln.compile(bias_tanh, target="cuda", schedule=BIAS_TANH)
    np.testing.assert_allclose(f(x, b), np.tanh(x + b), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(f(kiln.to_device(x), kiln.to_device(b)).numpy(), np.tanh(x + b), rtol=1e-6, atol=1e-7)
    m, k, n = shape[0], 5, shape[1]
    a, w = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    g = kiln.compile(matmul_softmax, target="cuda", schedule=MATMUL_SOFTMAX)
    np.testing.assert_allclose(g(a, w), kiln.softmax(a @ w), rtol=1e-12)


@pytest.mark.parametrize(
    "schedule,message",
    [
        (kiln.Schedule().bind("k0.i", "warp.x"), "the axis must be one of blockIdx.x"),
        (
            kiln.Schedule().bind("k1.r", "threadIdx.y"),
            r"bind\(k1.r, threadIdx.y\): it carries a value .* only threadIdx.x",
        ),
        (
            kiln.Schedule().bind("k1.r", "blockIdx.x"),
            r"bind\(k1.r, blockIdx.x\): it carries a value .* only threadIdx.x",
        ),
        (
            kiln.Schedule().bind("k1.i", "threadIdx.y").bind("k1.r", "threadIdx.x"),
            r"bind\(k1.r, threadIdx.x\): it is inside k1.i, bound to threadIdx.y: the threads would reach",
        ),
        (
            kiln.Schedule().bind("k1.j", "threadIdx.y").bind("k1.r", "threadIdx.x"),
            "k1.j is bound to threadIdx.y in this kernel, and the block-wide combine",
        ),
        (
            kiln.Schedule().bind("k1.r", "threadIdx.x").bind("k1.j", "threadIdx.y"),
            r"bind\(k1.j, threadIdx.y\): the reduction k1.r is bound to threadIdx.x",
        ),
        (kiln.Schedule().bind("k0.i", "blockIdx.x").bind("k0.j", "blockIdx.x"), "k0.i is already bound to blockIdx.x"),
        (kiln.Schedule().bind("k0.i", "blockIdx.x").split("k0.i", 2), "bind loops after the other steps"),
        (kiln.Schedule().vectorize("k1.j", 4), "vectorize is a CPU schedule step; the CUDA backend runs"),
    ],
)
def test_misused_gpu_schedules_are_refused_by_name(schedule, message):
    f = kiln.compile(matmul_softmax, target="cuda-emulate", schedule=schedule)
    with pytest.raises(kiln.ScheduleError, match=message):
        f.lower(kiln.f64[7, 5], kiln.f64[5, 3]).text("cuda")


def test_a_loop_inside_a_reduction_cannot_be_bound():
    f = kiln.compile(
        lambda x: x.sum(axis=1),
        target="cuda-emulate",
        schedule=kiln.Schedule().split("k0.r", 4).bind("k0.r.i", "threadIdx.x"),
    )
    with pytest.raises(kiln.ScheduleError, match="only loops without iter_args|carries a value"):
        f.lower(kiln.f32[6, 9]).text("cuda")


def test_bind_on_the_cpu_target_says_to_use_cuda():
    f = kiln.compile(bias_tanh, schedule=BIAS_TANH)
    with pytest.raises(kiln.ScheduleError, match="bind is a GPU schedule step .*target='cuda'"):
        f(np.ones((9, 4), np.float32), np.ones(4, np.float32))


def test_bound_loops_round_trip_through_the_printer_and_parser():
    text = (
        kiln.compile(bias_tanh, target="cuda-emulate", schedule=BIAS_TANH)
        .lower(kiln.f32[37, 33], kiln.f32[33])
        .text("scheduled", locations=False)
    )
    body = text.split("\n", 1)[1]  # after the schedule comment
    assert '} {kiln.loop = "k0.i.o", kiln.bind = "blockIdx.x"}' in body
    assert print_ir(parse_ir(body), locations=False) == body


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
def test_mlir_opt_accepts_bound_loops():
    lowered = kiln.compile(matmul_softmax, target="cuda-emulate", schedule=MATMUL_SOFTMAX).lower(
        kiln.f32[7, 5], kiln.f32[5, 3]
    )
    assert "kiln.bind" in mlir_opt(lowered.text("scheduled"))


def test_a_loop_bound_to_threadIdx_z_launches_at_most_64_threads_along_z():
    """CUDA's limit for blockDim.z: a longer loop strides over the 64 (a launch of 100 along z
    is an invalid configuration on every GPU)."""
    f = kiln.compile(np.tanh, target="cuda-emulate", schedule=kiln.Schedule().bind("k0.i", "threadIdx.z"))
    source = f.lower(kiln.f32[100, 3]).text("cuda")
    assert "KILN_LAUNCH3(kiln_tanh_k0, 1, 1, 1, 1, 1, 64," in source
    x = np.random.default_rng(0).standard_normal((100, 3)).astype(np.float32)
    np.testing.assert_allclose(f(x), np.tanh(x), rtol=1e-6)
