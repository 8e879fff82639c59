"""Matrix products on the CUDA target: the default schedule stages tiles of A and B in
shared memory (cache_read on the GPU) and gives each thread a tile of results held in
registers. Checked in the fibre emulation (each block's threads run as cooperative fibres,
in forward and reverse order) against numpy in float64 on awkward shapes; the schedule is
checked in the IR and the CUDA C; the new IR prints, parses back and passes mlir-opt; and
a planted missing barrier gives wrong numbers."""

import numpy as np
import pytest
from planted import plant_cache_read_without_barrier
from test_mlir_opt import MLIR_OPT, canonical, mlir_opt

import kiln
from kiln.dialects import parse_ir, print_ir, verify
from kiln.interpreters.affine_interpreter import run_affine
from kiln.passes.schedule import Schedule, apply_schedule


@pytest.fixture(params=["forward", "reverse"])
def order(request, monkeypatch):
    monkeypatch.setenv("KILN_EMULATE_ORDER", request.param)
    return request.param


def matmul(a, b):
    return a @ b


def assert_matches_numpy(got, a, b):
    """Within float32 rounding of a K-term sum: |error| <= 2 K u (|a| @ |b|), u = 2^-24."""
    exact = a.astype(np.float64) @ b.astype(np.float64)
    depth = a.shape[-1]
    bound = 2 * max(depth, 1) * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert got.shape == exact.shape and got.dtype == np.float32
    finite = np.isfinite(exact)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exact))
    np.testing.assert_array_equal(got[np.isinf(exact)], exact[np.isinf(exact)])
    assert np.all(np.abs(got[finite] - exact[finite]) <= bound[finite] + 1e-30)


def inputs(shape, seed=0):
    *batch, m, k, n = shape  # one or more batch dimensions
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    b = rng.standard_normal((*batch, k, n)).astype(np.float32)
    return a, b


# (M, K, N), or (batch, M, K, N): register tiles where a tile divides M and N, shared-memory
# tiles with idle edge threads where none does (primes, 65 x 127), the default mapping below.
SHAPES = [
    (1, 1, 1),
    (1, 300, 1),
    (7, 13, 5),
    (64, 64, 64),
    (65, 127, 33),
    (200, 300, 100),
    (31, 37, 41),
    (127, 61, 131),
    (48, 1, 80),
    (3, 32, 17, 48),
    # batched with ragged edges: the tile's copy runs inside the batch loop, and every thread
    # of an edge block must take its share of it (idle for the results, not for the copy)
    (3, 17, 40, 17),
    (3, 65, 127, 33),
    (2, 3, 17, 40, 19),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_default_matmul_schedule_gives_numpys_numbers(shape, order):
    a, b = inputs(shape)
    f = kiln.compile(matmul, target="cuda-emulate")
    assert_matches_numpy(f(a, b), a, b)


def test_nan_and_inf_flow_through_the_tiles_as_in_numpy(order):
    """A NaN in A spoils its row, an inf in B its column (inf * 0 in a sum is NaN), at the
    tiles' edges and in their middle, with signed zeros as operands."""
    for shape in [(64, 64, 64), (65, 40, 33)]:
        a, b = inputs(shape, seed=3)
        a[0, 5], a[-1, -1], a[17, 0] = np.nan, np.inf, -0.0
        b[3, -1], b[-1, 0], b[0, 16] = -np.inf, np.nan, np.inf
        f = kiln.compile(matmul, target="cuda-emulate")
        with np.errstate(invalid="ignore"):
            assert_matches_numpy(f(a, b), a, b)


def kernels(cuda: str) -> str:
    """The generated kernels and host code, without the prelude (which has barriers of its own)."""
    return cuda[cuda.index("__global__ void kiln_matmul_k0") :]


def scheduled(shape):
    a, b = inputs(shape)
    return kiln.compile(matmul, target="cuda").lower(a, b)


def test_the_default_schedule_stages_tiles_in_shared_memory_and_accumulates_in_registers():
    lowered = scheduled((128, 96, 128))
    text = lowered.text("scheduled")
    assert "schedule (default): tile([k0.i, k0.j], [64, 64]); tile([k0.i.i, k0.j.i], [16, 16])" in text
    assert "unroll_jam(k0.i.i.o, 4); unroll_jam(k0.j.i.o, 4); split(k0.r, 16)" in text
    assert "cache_read(k0.r.o, a); cache_read(k0.r.o, b)" in text
    assert "memref<64x16xf32, #gpu.address_space<workgroup>>" in text
    assert "memref<16x64xf32, #gpu.address_space<workgroup>>" in text
    assert "%1:16 = affine.for %k0.r.o = 0 to 6 iter_args(" in text  # 4 x 4 accumulators a thread
    assert text.count("gpu.barrier") == 2
    cuda = kernels(lowered.text("cuda"))
    assert "KILN_SHARED(float, v" in cuda and cuda.count("__syncthreads();") == 2
    assert "KILN_LAUNCH_COOP(kiln_matmul_k0, 2, 2, 1, 16, 16, 1," in cuda


def test_sizes_no_tile_divides_keep_shared_memory_with_idle_edge_threads():
    lowered = scheduled((65, 127, 33))
    text = lowered.text("scheduled")
    assert "tile([k0.i, k0.j], [16, 16]); split(k0.r, 16)" in text and "unroll_jam" not in text
    assert "#gpu.address_space<workgroup>" in text
    cuda = kernels(lowered.text("cuda"))
    assert "const bool v5_active = v5 < " in cuda and "if (v5_active && v6_active) v2[" in cuda


@pytest.mark.parametrize("shape", [(7, 13, 5), (1, 300, 1), (16, 8, 16)])
def test_small_products_keep_one_thread_per_result(shape):
    lowered = scheduled(shape)
    assert "schedule (default): (none)" in lowered.text("scheduled")
    cuda = kernels(lowered.text("cuda"))
    assert "KILN_SHARED" not in cuda and "KILN_LAUNCH_COOP" not in cuda


def test_a_matmul_with_bias_and_relu_in_its_kernel_is_tiled_too(order):
    fn = lambda a, b, c: np.maximum(a @ b + c, 0.0)  # noqa: E731
    a, b = inputs((96, 70, 64), seed=5)
    c = np.random.default_rng(6).standard_normal(64).astype(np.float32)
    f = kiln.compile(fn, target="cuda-emulate")
    text = f.lower(a, b, c).text("scheduled")
    assert "cache_read(k0.r.o, a); cache_read(k0.r.o, b)" in text
    exact = np.maximum(a.astype(np.float64) @ b + c, 0.0)
    np.testing.assert_allclose(f(a, b, c), exact, rtol=1e-5, atol=70 * 2.0**-20 * np.abs(exact).max())


def test_the_scheduled_ir_round_trips_and_computes_the_same():
    """The new ops and types (gpu.barrier, workgroup memrefs, bound copy loops, jammed
    accumulators) print, parse back to the same text, and run to numpy's numbers."""
    lowered = kiln.compile(matmul, target="cuda").lower(kiln.f32[32, 24], kiln.f32[24, 48])
    assert "gpu.barrier" in lowered.text("scheduled")
    module = lowered.module("scheduled")
    again = parse_ir(print_ir(module))
    assert print_ir(again) == print_ir(module)
    a, b = inputs((32, 24, 48), seed=2)
    (got,) = run_affine(again, [a, b])  # one thread: the barriers wait for no one
    assert_matches_numpy(got, a, b)


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found")
def test_every_gpu_step_round_trips_through_mlir_opt():
    """The steps the GPU recipes use, applied to IR that mlir-opt renumbered, give the same
    IR as applied to kiln's own; and mlir-opt accepts what they make."""
    text = kiln.compile(matmul, target="cuda").lower(kiln.f32[32, 20], kiln.f32[20, 48]).text("affine")
    steps = Schedule(
        [
            ["tile", ["k0.i", "k0.j"], [16, 16]],
            ["tile", ["k0.i.i", "k0.j.i"], [8, 8]],
            ["reorder", ["k0.i.i.i", "k0.j.i.i", "k0.i.i.o", "k0.j.i.o"]],
            ["unroll_jam", "k0.i.i.o", 2],
            ["unroll_jam", "k0.j.i.o", 2],
            ["split", "k0.r", 8],
            ["bind", "k0.i.o", "blockIdx.y"],
            ["bind", "k0.j.o", "blockIdx.x"],
            ["bind", "k0.i.i.i", "threadIdx.y"],
            ["bind", "k0.j.i.i", "threadIdx.x"],
            ["cache_read", "k0.r.o", "a"],
            ["cache_read", "k0.r.o", "b"],
        ]
    )
    assert Schedule.from_yaml(steps.to_yaml()) == steps
    original, renamed = parse_ir(text), parse_ir(mlir_opt(text, "--mlir-print-local-scope"))
    apply_schedule(original, steps, verify_each=True, gpu=True)
    apply_schedule(renamed, steps, verify_each=True, gpu=True)
    printed = print_ir(original)
    assert "gpu.barrier" in printed and "#gpu.address_space<workgroup>" in printed
    assert print_ir(parse_ir(mlir_opt(printed, "--mlir-print-local-scope"))).count("gpu.barrier") == 2
    assert canonical(renamed) == canonical(original)


def test_a_planted_missing_barrier_gives_wrong_numbers(monkeypatch, order):
    """Without the barrier after the copy a thread reads shared slots the other threads have
    not written yet: the emulation, like a GPU, gives wrong numbers, in either order."""
    plant_cache_read_without_barrier(monkeypatch)
    a, b = inputs((64, 64, 64), seed=4)
    f = kiln.compile(matmul, target="cuda-emulate")
    assert kernels(f.lower(a, b).text("cuda")).count("__syncthreads();") == 1
    got = f(a, b)
    assert not np.allclose(got, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)


def refused(schedule, shape=(64, 256, 64)):
    a, b = inputs(shape)
    return kiln.compile(matmul, target="cuda", schedule=kiln.Schedule(schedule)).lower(a, b).text("scheduled")


BLOCKS = [["bind", "k0.i.o", "blockIdx.y"], ["bind", "k0.j.o", "blockIdx.x"]]


def test_a_cache_read_outside_a_block_loop_is_refused():
    with pytest.raises(kiln.ScheduleError, match=r"cache_read\(k0.r, a\).*inside a loop bound to blockIdx"):
        refused([["cache_read", "k0.r", "a"]])


TILED = [["tile", ["k0.i", "k0.j"], [16, 16]], ["split", "k0.r", 8], *BLOCKS]
THREADS = [["bind", "k0.i.i", "threadIdx.y"], ["bind", "k0.j.i", "threadIdx.x"]]


def test_a_cache_read_of_a_bound_loop_says_to_stage_in_a_loop_inside_it():
    with pytest.raises(
        kiln.ScheduleError, match=r"k0.i.o is bound|bound to blockIdx.y; stage tiles in an unbound loop"
    ):
        refused([*TILED, *THREADS, ["cache_read", "k0.i.o", "a"]])


def test_staging_one_buffer_twice_in_a_loop_is_refused_by_name():
    with pytest.raises(kiln.ScheduleError, match=r"a is already staged in shared memory in this loop"):
        refused([*TILED, *THREADS, ["cache_read", "k0.r.o", "a"], ["cache_read", "k0.r.o", "a"]])


def test_more_threads_along_z_than_a_block_has_are_refused_around_barriers():
    """CUDA's blockDim.z is at most 64; a cooperative loop needs one thread per iteration."""
    steps = [["split", "k0.i", 100], ["split", "k0.r", 8], ["bind", "k0.i.o", "blockIdx.x"]]
    steps += [["bind", "k0.i.i", "threadIdx.z"], ["bind", "k0.j", "threadIdx.x"], ["cache_read", "k0.r.o", "a"]]
    with pytest.raises(kiln.ScheduleError, match=r"threadIdx.z, which a block has at most 64 of"):
        refused(steps, shape=(100, 24, 4))


def test_a_tile_too_large_for_shared_memory_is_refused():
    """A 64 x 256 tile of A is 64 KiB; a block has 48."""
    steps = [["tile", ["k0.i", "k0.j"], [64, 64]], *BLOCKS, ["bind", "k0.i.i", "threadIdx.y"]]
    with pytest.raises(kiln.ScheduleError, match=r"64x256 tile of 65536 bytes is too large for the 48 KiB"):
        refused([*steps, ["cache_read", "k0.j.i", "a"]])


def test_a_buffer_the_kernel_writes_is_refused():
    text = """module {
  func.func @f(%x: memref<4x8xf32>, %y: memref<4x8xf32>) attributes {kiln.buffers = ["x", "y"]} {
    %c = arith.constant 0.0 : f32
    affine.for %i = 0 to 4 {
      affine.for %j = 0 to 8 {
        affine.for %r = 0 to 1 {
          %v = affine.load %x[%i, %j] : memref<4x8xf32>
          affine.store %v, %y[%i, %j] : memref<4x8xf32>
        } {kiln.loop = "k0.r"}
        affine.store %c, %x[%i, %j] : memref<4x8xf32>
      } {kiln.loop = "k0.j", kiln.bind = "threadIdx.x"}
    } {kiln.loop = "k0.i", kiln.bind = "blockIdx.x"}
    func.return
  }
}"""
    with pytest.raises(kiln.ScheduleError, match="the kernel also writes x"):
        apply_schedule(parse_ir(text), Schedule([["cache_read", "k0.r", "x"]]), gpu=True)


def test_a_loop_whose_bound_depends_on_a_thread_index_is_refused():
    """The k loop inside a thread loop with a partial tile: threads would disagree on how
    many barriers they reach."""
    steps = [["tile", ["k0.i", "k0.j"], [16, 16]], ["split", "k0.r", 8], *BLOCKS]
    steps += [["bind", "k0.i.i", "threadIdx.y"], ["reorder", ["k0.j.i", "k0.r.o"]]]
    with pytest.raises(kiln.ScheduleError):
        refused([*steps, ["cache_read", "k0.r.i", "a"]], shape=(20, 20, 20))


def test_the_verifier_refuses_shared_memory_the_host_would_allocate():
    text = """module {
  func.func @f(%x: memref<4xf32>) attributes {kiln.buffers = ["x"]} {
    %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32, #gpu.address_space<workgroup>>
    func.return
  }
}"""
    with pytest.raises(kiln.KilnError, match="in workgroup memory is made by memref.alloca"):
        verify(parse_ir(text))


def test_an_unknown_memory_space_is_a_parse_error():
    with pytest.raises(kiln.KilnError, match=r"expected a memory space: #gpu.address_space<workgroup>"):
        parse_ir("module {\n  func.func @f(%x: memref<4xf32, #gpu.address_space<private>>) {\n    func.return\n  }\n}")
