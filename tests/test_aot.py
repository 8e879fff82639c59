"""Ahead of time, as in JAX: ``f.lower(...).compile()`` gives a ``Compiled`` that computes what
numpy computes, takes only the signature it was lowered for (a clear error naming the argument
otherwise, and never a new trace), and reports FLOPs, bytes and memory that match counts made by
hand."""

import numpy as np
import pytest
from targets import NEEDS_CXX

import kiln

COMPILED_TARGETS = ["cpu", pytest.param("cuda-emulate", marks=NEEDS_CXX)]


def chain(x, w, v, u):
    return ((x @ w) @ v @ v) @ u


def chain_args(m=5, k=3, h=7, n=2, dtype=np.float32):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(dtype) for s in [(m, k), (k, h), (h, h), (h, n)]]


@pytest.mark.parametrize("target", COMPILED_TARGETS + ["interpret"])
def test_compiled_gives_numpys_numbers_and_writes_out(target):
    args = chain_args()
    compiled = kiln.compile(chain, target=target).lower(*args).compile()
    want = chain(*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(compiled(*args), want, rtol=1e-5, atol=1e-5)
    out = np.empty((5, 2), np.float32)
    assert compiled(*args, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(kiln.ArgumentError, match=r"out= leaf #0 is float32\[5, 3\], the result is float32\[5, 2\]"):
        compiled(*args, out=np.empty((5, 3), np.float32))


@pytest.mark.parametrize("target", COMPILED_TARGETS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 7, 5), (64, 33, 17)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_matmul_costs_2mkn_flops_and_reads_and_writes_each_operand_once(target, m, k, n, dtype):
    compiled = kiln.compile(lambda a, b: a @ b, target=target).lower(np.ones((m, k), dtype), np.ones((k, n), dtype))
    cost = compiled.compile().cost_analysis()
    size = np.dtype(dtype).itemsize
    (kernel,) = cost["kernels"]
    assert kernel["flops"] == cost["flops"] == 2 * m * k * n
    assert kernel["bytes_read"] == cost["bytes_read"] == (m * k + k * n) * size
    assert kernel["bytes_written"] == cost["bytes_written"] == m * n * size
    assert cost["bytes_accessed"] == (m * k + k * n + m * n) * size


@pytest.mark.parametrize("target", COMPILED_TARGETS)
@pytest.mark.parametrize("n", [1, 100, 1027])
def test_an_elementwise_op_moves_n_times_itemsize_bytes_per_operand(target, n):
    compiled = kiln.compile(lambda a, b: a * b, target=target).lower(kiln.f64[n], kiln.f64[n]).compile()
    cost = compiled.cost_analysis()
    assert (cost["flops"], cost["bytes_read"], cost["bytes_written"]) == (n, 2 * n * 8, n * 8)


def test_costs_add_up_over_kernels():
    m, k, h, n = 5, 3, 7, 2
    cost = kiln.compile(chain).lower(*chain_args(m, k, h, n)).compile().cost_analysis()
    assert [c["flops"] for c in cost["kernels"]] == [2 * m * k * h, 2 * m * h * h, 2 * m * h * h, 2 * m * h * n]
    # Each kernel reads its two operands and writes its result, f32: 4 bytes an element.
    reads = [m * k + k * h, m * h + h * h, m * h + h * h, m * h + h * n]
    assert [c["bytes_read"] for c in cost["kernels"]] == [4 * r for r in reads]
    assert [c["bytes_written"] for c in cost["kernels"]] == [4 * m * h] * 3 + [4 * m * n]
    for key in ("flops", "bytes_read", "bytes_written", "bytes_accessed"):
        assert cost[key] == sum(c[key] for c in cost["kernels"])


@pytest.mark.parametrize("target", COMPILED_TARGETS)
def test_memory_analysis_matches_the_intermediates_counted_by_hand(target):
    m, k, h, n = 5, 3, 7, 2
    memory = kiln.compile(chain, target=target).lower(*chain_args(m, k, h, n)).compile().memory_analysis()
    assert memory["argument_bytes"] == 4 * (m * k + k * h + h * h + h * n)
    assert memory["output_bytes"] == 4 * m * n
    # Three m x h intermediates, each in a 64-byte-aligned block; the first is dead once the
    # second is made, so the third takes its bytes (a matmul never writes over its own input).
    block = -(-4 * m * h // 64) * 64
    assert memory["bytes_without_reuse"] == 3 * block
    assert memory["arena_bytes"] == 2 * block


def test_without_graph_passes_there_is_no_arena():
    memory = kiln.compile(chain, optimize=False).lower(*chain_args()).compile().memory_analysis()
    assert memory["arena_bytes"] is None and memory["bytes_without_reuse"] is None
    assert memory["output_bytes"] == 4 * 5 * 2


def test_the_interpreter_has_no_costs_to_report():
    compiled = kiln.compile(chain, target="interpret").lower(*chain_args()).compile()
    with pytest.raises(kiln.StageError, match="cost_analysis reads the scheduled stage"):
        compiled.cost_analysis()
    with pytest.raises(kiln.StageError, match="memory_analysis reads the optimized stage"):
        compiled.memory_analysis()


def test_text_stages_and_repr():
    lowered = kiln.compile(chain).lower(*chain_args())
    compiled = lowered.compile()
    assert compiled.stages == lowered.stages == ["tensor", "optimized", "affine", "scheduled", "llvm"]
    assert compiled.as_text() == compiled.text("llvm") == lowered.as_text()
    assert "define" in compiled.as_text()
    assert compiled.text("tensor") == lowered.text("tensor")
    assert (
        repr(compiled) == "<Compiled chain(kiln.f32[5, 3], kiln.f32[3, 7], kiln.f32[7, 7], kiln.f32[7, 2]) target=cpu>"
    )
    with pytest.raises(kiln.StageError, match="no stage 'cuda'"):
        compiled.text("cuda")


@NEEDS_CXX
def test_the_cuda_targets_last_stage_is_cuda_c():
    compiled = kiln.compile(chain, target="cuda-emulate").lower(*chain_args()).compile()
    assert compiled.stages[-1] == "cuda"
    assert "__global__" in compiled.as_text()


def test_lowering_and_compiling_ahead_is_the_compilation_calls_use():
    f = kiln.compile(chain)
    args = chain_args()
    compiled = f.lower(kiln.f32[5, 3], kiln.f32[3, 7], kiln.f32[7, 7], kiln.f32[7, 2]).compile()
    assert len(f.compilations) == 1
    np.testing.assert_array_equal(f(*args), compiled(*args))
    assert len(f.compilations) == 1


def test_size_zero_and_non_contiguous_arguments():
    f = kiln.compile(lambda a, b: (a * 2.0).sum(axis=1) + b)
    empty = f.lower(kiln.f32[0, 3], kiln.f32[0]).compile()
    result = empty(np.ones((0, 3), np.float32), np.ones(0, np.float32))
    assert result.shape == (0,) and result.dtype == np.float32
    strided = f.lower(kiln.f32[4, 3], kiln.f32[4]).compile()
    big = np.arange(48, dtype=np.float32).reshape(8, 6)
    a, b = big[::2, ::2], big[1::2, 5]  # every other row and column: not contiguous
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    np.testing.assert_array_equal(strided(a, b), (a * 2.0).sum(axis=1) + b)


def _lowered_with_a_dict():
    f = kiln.compile(lambda x, params, scale=1.0: (x @ params["w"] + params["b"]) * scale)
    compiled = f.lower(kiln.f32[2, 3], {"w": kiln.f32[3, 4], "b": kiln.f32[4]}).compile()
    x, w, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.ones(4, np.float32)
    return f, compiled, x, w, b


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda c, x, w, b: c(x.astype(np.float64), {"w": w, "b": b}),
            r"argument 'x' is kiln.f64\[2, 3\]; .* kiln.f32\[2, 3\]",
        ),
        (lambda c, x, w, b: c(x[0], {"w": w, "b": b}), r"argument 'x' is kiln.f32\[3\]; .* for kiln.f32\[2, 3\]"),
        (lambda c, x, w, b: c(x, {"w": w, "b": b[:3]}), r"argument 'params\['b'\]' is kiln.f32\[3\]; .* kiln.f32\[4\]"),
        (lambda c, x, w, b: c(x, {"w": w}), r"structure differs .*: missing params\['b'\]"),
        (lambda c, x, w, b: c(x, {"w": w, "b": b, "c": b}), r"unexpected params\['c'\]"),
        (lambda c, x, w, b: c(x, [w, b]), r"missing params\['b'\], params\['w'\]; unexpected params\[0\]"),
        (lambda c, x, w, b: c(x, {"w": w, "b": b}, scale=2.0), r"structure differs"),
        (lambda c, x, w, b: c(kiln.f32[2, 3], {"w": w, "b": b}), r"argument 'x' is a spec"),
        (lambda c, x, w, b: c(2.0, {"w": w, "b": b}), r"argument 'x' is a Python float; .* kiln.f32\[2, 3\]"),
        (lambda c, x, w, b: c("x", {"w": w, "b": b}), r"argument 'x' is a str"),
        (lambda c, x, w, b: c(x), r"missing a required argument: 'params'"),
    ],
)
def test_arguments_of_another_signature_are_refused_by_name(call, message):
    f, compiled, x, w, b = _lowered_with_a_dict()
    with pytest.raises(kiln.ArgumentError, match=message):
        call(compiled, x, w, b)
    assert len(f.compilations) == 1  # refused, not traced and compiled again


def test_a_python_scalar_signature_takes_any_such_scalar_and_nothing_else():
    f = kiln.compile(lambda x, s: x * s)
    compiled = f.lower(np.ones(3, np.float32), 2.0).compile()
    np.testing.assert_array_equal(compiled(np.ones(3, np.float32), 3.5), np.full(3, 3.5, np.float32))
    with pytest.raises(kiln.ArgumentError, match="argument 's' is kiln.f64\\[\\]; .* for a Python float"):
        compiled(np.ones(3, np.float32), np.float64(3.5))
    ints = kiln.compile(lambda x, n: x + n).lower(np.ones(3, np.int64), 1).compile()
    np.testing.assert_array_equal(ints(np.ones(3, np.int64), 7), np.full(3, 8))
    np.testing.assert_array_equal(ints(np.ones(3, np.int64), 2**40), np.full(3, 2**40 + 1))
    with pytest.raises(kiln.ArgumentError, match="argument 'n' is a Python int from 2..63 on; .* for a Python int"):
        ints(np.ones(3, np.int64), 2**63)


def test_static_arguments_are_part_of_the_signature():
    f = kiln.compile(lambda x, axis: x.sum(axis=axis), static_argnames="axis")
    compiled = f.lower(kiln.f32[2, 3], axis=1).compile()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(compiled(x, axis=1), x.sum(axis=1))
    with pytest.raises(kiln.ArgumentError, match="static argument 'axis' is 0; this function was compiled for 1"):
        compiled(x, axis=0)
