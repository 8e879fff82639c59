"""The CPU emulation of CUDA (target="cuda-emulate") gives barriers, shared memory, warp
shuffles and atomics their GPU meaning, so that a kernel that forgets a barrier gives a
wrong answer here instead of passing by luck. Each test runs hand-written CUDA C through
the same prelude and build as kiln's generated code; numpy is the oracle."""

import shutil
import subprocess

import numpy as np
import pytest

from kiln.codegen import nvcc
from kiln.codegen.cuda_prelude import PRELUDE
from kiln.codegen.status import STATUS
from kiln.errors import KilnError
from kiln.executable import status_error
from kiln.runtime.cuda import CudaFunction

ORDERS = ["forward", "reverse"]


def build(body: str, entry: str, num_args: int) -> CudaFunction:
    return CudaFunction(nvcc.build(PRELUDE + body, emulate=True), entry, num_args, emulate=True)


@pytest.fixture(params=ORDERS)
def order(request, monkeypatch):
    monkeypatch.setenv("KILN_EMULATE_ORDER", request.param)
    return request.param


# Each block reverses its share of x through shared memory: thread t writes its element,
# and after the barrier reads the one thread (n - 1 - t) wrote.
REVERSE = r"""
__global__ void reverse_k(const float *x, float *out, long long n) {
    KILN_SHARED(float, tile, 256)
    const long long base = (long long)blockIdx.x * blockDim.x, i = base + threadIdx.x;
    const long long size = n - base < blockDim.x ? n - base : blockDim.x;
    if (i < n) tile[threadIdx.x] = x[i];
    BARRIER
    if (i < n) out[i] = tile[size - 1 - threadIdx.x];
}
extern "C" int reverse(float *x, float *out, long long *n) {
    int status = 0;
    KILN_LAUNCH_COOP(reverse_k, (*n + 255) / 256, 1, 1, 256, 1, 1, x, out, *n);
    KILN_READ_STATUS(status);
    return status;
}
"""


def blockwise_reversed(x, block=256):
    return np.concatenate([x[k : k + block][::-1] for k in range(0, x.size, block)]) if x.size else x


@pytest.mark.parametrize("n", [1, 31, 256, 257, 1000])
def test_a_barrier_makes_every_threads_write_visible(n, order):
    f = build(REVERSE.replace("BARRIER", "__syncthreads();"), "reverse", 3)
    x = np.arange(n, dtype=np.float32) + 1
    out = np.full(n, np.nan, np.float32)
    assert f([x, out, np.array([n], np.int64)], []) == 0
    np.testing.assert_array_equal(out, blockwise_reversed(x))


@pytest.mark.parametrize("n", [2, 256, 1000])
def test_a_missing_barrier_gives_a_wrong_answer(n, order):
    """The planted bug: without the barrier a thread reads its partner's slot before the
    partner has written it, in either order of threads."""
    f = build(REVERSE.replace("BARRIER", ""), "reverse", 3)
    x = np.arange(n, dtype=np.float32) + 1
    out = np.zeros(n, np.float32)
    f([x, out, np.array([n], np.int64)], [])
    assert not np.array_equal(out, blockwise_reversed(x))


SHUFFLES = r"""
__global__ void shuffles_k(const float *x, float *xor_sum, float *down_sum, float *up, float *broadcast) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[i], b = x[i];
    for (int k = 16; k >= 1; k /= 2) a += __shfl_xor_sync(0xffffffffu, a, k);
    for (int k = 16; k >= 1; k /= 2) b += __shfl_down_sync(0xffffffffu, b, k);
    xor_sum[i] = a;
    down_sum[i] = b;
    up[i] = __shfl_up_sync(0xffffffffu, x[i], 1);
    broadcast[i] = __shfl_sync(0xffffffffu, x[i], 5);
}
extern "C" int shuffles(float *x, float *xor_sum, float *down_sum, float *up, float *broadcast) {
    int status = 0;
    KILN_LAUNCH_COOP(shuffles_k, 3, 1, 1, 64, 1, 1, x, xor_sum, down_sum, up, broadcast);
    KILN_READ_STATUS(status);
    return status;
}
"""


def test_warp_shuffles_exchange_values_between_the_lanes_of_a_warp(order):
    f = build(SHUFFLES, "shuffles", 5)
    x = np.random.default_rng(1).integers(-50, 50, 192).astype(np.float32)  # integers: sums exact
    xor_sum, down_sum, up, broadcast = (np.zeros(192, np.float32) for _ in range(4))
    assert f([x, xor_sum, down_sum, up, broadcast], []) == 0
    warps = x.reshape(-1, 32)
    np.testing.assert_array_equal(xor_sum, np.repeat(warps.sum(1), 32))  # every lane has its warp's sum
    np.testing.assert_array_equal(down_sum.reshape(-1, 32)[:, 0], warps.sum(1))  # lane 0 has it
    expected_up = warps.copy()
    expected_up[:, 1:] = warps[:, :-1]  # lane 0 has no lane below: it keeps its own value
    np.testing.assert_array_equal(up, expected_up.reshape(-1))
    np.testing.assert_array_equal(broadcast, np.repeat(warps[:, 5], 32))


ALLREDUCE = r"""
__global__ void allreduce_k(const float *x, float *sums, float *maxima, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f, m = i < n ? x[i] : -INFINITY;
    float s = kiln_block_allreduce<float, kiln_add>(v);
    float top = kiln_block_allreduce<float, kiln_maxf>(m);
    if (i < n) { sums[i] = s; maxima[i] = top; }
}
extern "C" int allreduce(float *x, float *sums, float *maxima, long long *shape) {
    int status = 0;
    KILN_LAUNCH_COOP(allreduce_k, (shape[0] + shape[1] - 1) / shape[1], 1, 1, shape[1], 1, 1, x, sums, maxima, shape[0]);
    KILN_READ_STATUS(status);
    return status;
}
"""


@pytest.mark.parametrize("block", [32, 96, 1024])
@pytest.mark.parametrize("special", [None, np.nan, np.inf, -0.0])
def test_the_block_allreduce_gives_every_thread_the_blocks_result(block, special, order):
    f = build(ALLREDUCE, "allreduce", 4)
    n = 3 * block - 7  # the last block partly filled
    x = np.random.default_rng(2).integers(-1000, 1000, n).astype(np.float32)
    if special is not None:
        x[block + 3] = special
    sums, maxima = np.zeros(n, np.float32), np.zeros(n, np.float32)
    assert f([x, sums, maxima, np.array([n, block], np.int64)], []) == 0
    for k in range(0, n, block):
        part = x[k : k + block]
        np.testing.assert_array_equal(sums[k : k + block], np.full(part.size, part.sum(dtype=np.float64), np.float32))
        np.testing.assert_array_equal(maxima[k : k + block], np.full(part.size, np.max(part), np.float32))


ATOMICS = r"""
__global__ void atomics_k(int *count, double *total, int *largest, unsigned long long *wide) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(count, 1);
    atomicAdd(total, 0.5);
    atomicMax(largest, (int)(i % 1000));
    atomicAdd(wide, 4294967296ULL);
}
extern "C" int atomics(int *count, double *total, int *largest, unsigned long long *wide) {
    int status = 0;
    KILN_LAUNCH(atomics_k, 500, 128, count, total, largest, wide);
    KILN_READ_STATUS(status);
    return status;
}
"""


def test_atomics_from_blocks_on_several_host_threads_lose_no_update(monkeypatch):
    monkeypatch.setenv("KILN_EMULATE_THREADS", "4")
    f = build(ATOMICS, "atomics", 4)
    count, total = np.zeros(1, np.int32), np.zeros(1, np.float64)
    largest, wide = np.full(1, -1, np.int32), np.zeros(1, np.uint64)
    assert f([count, total, largest, wide], []) == 0
    assert count[0] == 500 * 128
    assert total[0] == 500 * 128 * 0.5
    assert largest[0] == 999
    assert wide[0] == 500 * 128 * 4294967296


DIVERGENT = r"""
__global__ void divergent_k(float *x) {
    if (threadIdx.x == 0) return;  /* thread 0 never reaches the barrier */
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}
extern "C" int divergent(float *x) {
    int status = 0;
    KILN_LAUNCH_COOP(divergent_k, 1, 1, 1, 64, 1, 1, x);
    KILN_READ_STATUS(status);
    return status;
}
"""


def test_a_barrier_not_every_thread_reaches_is_reported(order):
    f = build(DIVERGENT, "divergent", 1)
    status = f([np.zeros(64, np.float32)], [])
    assert status == STATUS["barrier divergence"]
    error = status_error(status)
    assert isinstance(error, KilnError) and "did not all reach the same barrier" in str(error)
    assert f([np.zeros(64, np.float32)], []) == STATUS["barrier divergence"]  # the next call starts afresh


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_accepts_every_kernel_written_for_the_emulation(tmp_path):
    """The emulation defines CUDA's own overloads only (atomicMax has no float form, for
    one): what builds for the CPU must build for the GPU too."""
    source = tmp_path / "kernels.cu"
    source.write_text(
        PRELUDE + REVERSE.replace("BARRIER", "__syncthreads();") + SHUFFLES + ALLREDUCE + ATOMICS + DIVERGENT
    )
    result = subprocess.run(
        ["nvcc", "-c", "-arch=sm_80", str(source), "-o", str(tmp_path / "kernels.o")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


OVERSIZED = r"""
__global__ void oversized_k(float *x) { x[threadIdx.x] = 1.0f; }
extern "C" int oversized(float *x, long long *dims) {
    KILN_LAUNCH3(oversized_k, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], x);
    return (int)cudaGetLastError();
}
"""


@pytest.mark.parametrize(
    "dims",
    [(1, 1, 1, 1025, 1, 1), (1, 1, 1, 1, 1, 65), (1, 1, 1, 64, 32, 1), (1, 65536, 1, 1, 1, 1), (0, 1, 1, 32, 1, 1)],
)
def test_a_launch_a_gpu_would_refuse_is_refused_as_an_invalid_configuration(dims):
    """CUDA's limits: 1024 threads a block, 64 along z, 65535 blocks along y and z, none empty."""
    f = build(OVERSIZED, "oversized", 2)
    x = np.zeros(2048, np.float32)
    assert f([x, np.array(dims, np.int64)], []) == 9  # cudaErrorInvalidConfiguration
    assert not x.any()  # nothing ran
    assert f([x, np.array((2, 1, 1, 32, 1, 1), np.int64)], []) == 0  # the error was read and cleared
    assert x[:32].all()


@pytest.mark.parametrize(
    "variable, value",
    [("KILN_EMULATE_ORDER", "backwards"), ("KILN_EMULATE_THREADS", "-1"), ("KILN_EMULATE_THREADS", "100000")],
)
def test_a_mistyped_emulation_variable_is_an_error_naming_it(variable, value, monkeypatch):
    """Read at every launch: a typo would quietly test another order, or start a host thread per block."""
    import kiln

    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable):
        kiln.compile(lambda x: x.max(axis=-1), target="cuda-emulate")(np.ones((70000, 40), np.float32))
