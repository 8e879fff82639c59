"""The outline-kernels pass: each kernel's top-level nests in a private function, called
where they were, computing what they computed (the affine interpreter and numpy are the
oracles); what stays inline, and why; the numberings that outlive it."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import kiln
from kiln.codegen.cuda_codegen import emit_cuda
from kiln.codegen.llvm_emitter import access_sites
from kiln.codegen.llvm_ops import accumulates
from kiln.codegen.status import check_sites
from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import parse_ir, print_ir
from kiln.dialects.diagnostics import KilnError
from kiln.dialects.verifier import verify
from kiln.interpreters.affine_interpreter import run_affine
from kiln.passes.gpu_launch import bound, launch_of
from kiln.passes.outline_kernels import can_outline, outline_kernels
from kiln.passes.registry import run_passes

# Views of the arena at constant offsets, a scalar from a whole-array reduction, a global.
CASES = {
    "matmul_relu_share": (
        lambda x, w, b: np.maximum(x @ w + b, 0) / np.maximum(x @ w + b, 0).sum(),
        [(5, 7), (7, 3), (3,)],
    ),
    "softmax": (lambda x: np.exp(x - x.max(axis=1, keepdims=True)) / np.exp(x).sum(), [(4, 9)]),
    "constant": (lambda x: x * np.arange(11, dtype=np.float32) + 1, [(3, 11)]),
    "one_element": (lambda x: np.tanh(x) * 2, [(1,)]),
}


def _lowered(name):
    fn, shapes = CASES[name]
    return kiln.compile(fn).lower(*[kiln.f32[s] for s in shapes])


def _inputs(name, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in CASES[name][1]]


def _split(module):
    functions = [op for op in module.body.ops if isinstance(op, F.FuncOp)]
    return [f for f in functions if not f.is_private], {f.sym_name: f for f in functions if f.is_private}


@pytest.mark.parametrize("name", sorted(CASES))
def test_outlined_module_computes_what_the_scheduled_one_does(name):
    lowered = _lowered(name)
    scheduled = lowered.module("scheduled")
    outlined = run_passes(scheduled.clone({}), ["outline-kernels"])
    (public,), callees = _split(outlined)
    assert outlined.body.ops[-1] is public  # readers of a scheduled module run its last function
    calls = [op for op in public.body.ops if isinstance(op, F.CallOp)]
    assert calls and len(calls) == len(callees)
    for call in calls:
        callee = callees[call.attributes["callee"]]
        assert call.attributes["callee"] == f"{public.sym_name}_{call.attributes['kiln.kernel']}"
        assert [v.type for v in call.operands] == list(callee.function_type.inputs)
    inputs = _inputs(name)
    expected = run_affine(scheduled, inputs)
    for got, want in zip(run_affine(outlined, inputs), expected):
        np.testing.assert_array_equal(got, want)  # the same ops in the same order: the same bits
    fn, _ = CASES[name]
    np.testing.assert_allclose(lowered.compile()(*inputs), fn(*inputs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_printed_outlined_module_parses_back_to_the_same_text(name):
    text = print_ir(_lowered(name).pipeline.codegen_module())
    assert "func.func private @" in text and "func.call @" in text
    assert print_ir(parse_ir(text)) == text


def test_a_nest_that_gives_a_value_stays_inline_and_its_value_is_an_argument():
    module = _lowered("matmul_relu_share").pipeline.codegen_module()
    (public,), callees = _split(module)
    loops = [op for op in public.body.ops if op.name == "affine.for"]
    assert loops and all(loop.results for loop in loops)  # only the sum's loop is left
    takes_scalar = [c for c in callees.values() if any(str(a.type) == "f32" for a in c.arguments)]
    assert takes_scalar, print_ir(module)
    # A buffer is passed as its base, an argument or the arena; a view of it is made again inside.
    for call in [op for op in public.body.ops if isinstance(op, F.CallOp)]:
        producers = [getattr(v, "op", None) for v in call.operands if str(v.type).startswith("memref")]
        assert all(p is None or p.name == "memref.alloc" for p in producers), print_ir(module)
    assert any(op.name == "memref.view" for c in callees.values() for op in c.body.ops)


# Three nests of kernel k0: the first apart (an allocation between), the other two together.
SPLIT_KERNEL = """
module {
  func.func @f(%x: memref<4xf32>, %out0: memref<4xf32>) {
    affine.for %k0.i = 0 to 4 {
      %0 = affine.load %x[%k0.i] : memref<4xf32>
      affine.store %0, %out0[%k0.i] : memref<4xf32>
    } {kiln.loop = "k0.i"}
    %a = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    affine.for %k0.j = 0 to 4 {
      %1 = affine.load %out0[%k0.j] : memref<4xf32>
      %2 = arith.addf %1, %1 : f32
      affine.store %2, %a[%k0.j] : memref<4xf32>
    } {kiln.loop = "k0.j"}
    affine.for %k0.l = 0 to 4 {
      %3 = affine.load %a[%k0.l] : memref<4xf32>
      affine.store %3, %out0[%k0.l] : memref<4xf32>
    } {kiln.loop = "k0.l"}
    memref.dealloc %a : memref<4xf32>
    func.return
  }
}
"""


def test_nests_of_one_kernel_that_are_not_together_get_functions_of_their_own():
    module = outline_kernels(parse_ir(SPLIT_KERNEL))
    (public,), callees = _split(module)
    assert sorted(callees) == ["f_k0", "f_k0_1"]
    assert [len(c.body.ops) for c in (callees["f_k0"], callees["f_k0_1"])] == [2, 3]  # nests, then func.return
    assert [op.name for op in public.body.ops] == [
        "func.call", "memref.alloc", "func.call", "memref.dealloc", "func.return"
    ]  # fmt: skip
    x = np.array([1.0, -0.0, np.inf, np.nan], np.float32)
    (got,) = run_affine(module, [x])
    np.testing.assert_array_equal(got, x + x)


def test_an_empty_function_has_nothing_to_outline():
    module = outline_kernels(parse_ir("module {\n  func.func @f() {\n    func.return\n  }\n}\n"))
    assert len(module.body.ops) == 1


def test_access_and_check_numberings_are_the_same_outlined():
    """Debug builds name a failing access or check by its number in the scheduled function:
    walking each call's callee in its place gives the outlined module the same numbers."""
    fn = kiln.compile(lambda x, i: np.take(x, i) * 2)
    lowered = fn.lower(kiln.f32[7], kiln.i64[5])
    scheduled = lowered.module("scheduled").body.ops[-1]
    (public,), callees = _split(lowered.pipeline.codegen_module())
    for sites in (access_sites, check_sites):
        before, after = sites(scheduled), sites(public, callees)
        assert [str(op.name) for op in before] == [str(op.name) for op in after]
        assert len(before) > 0 or sites is check_sites


def test_an_out_of_bounds_index_is_still_reported():
    fn = kiln.compile(lambda x, i: np.take(x, i) * 2)
    with pytest.raises(IndexError, match="out of bounds"):
        fn(np.arange(7, dtype=np.float32), np.array([0, 9], np.int64))


def test_a_call_to_a_missing_or_public_function_does_not_verify():
    base = """
module {
  func.func @g(%x: memref<4xf32>) {
    func.return
  }
  func.func @f(%x: memref<4xf32>) {
    func.call @CALLEE(%x) : (memref<4xf32>) -> ()
    func.return
  }
}
"""
    with pytest.raises(KilnError, match="public"):
        verify(parse_ir(base.replace("CALLEE", "g")))
    with pytest.raises(KilnError, match="no function"):
        verify(parse_ir(base.replace("CALLEE", "h")))


# -- the GPU targets: one function a nest, its call noted with the launch ----------------------
MLIR_OPT = next(
    (p for p in ("/usr/lib/llvm-19/bin/mlir-opt", shutil.which("mlir-opt") or "") if p and os.access(p, os.X_OK)), None
)


def _scatter_add(x, i):
    y = x.copy()
    np.add.at(y, i, 1.0)
    return y


# A plain nest on a 1-D grid, a row reduction bound to blocks and threads (cooperative), a
# tiled matmul staging tiles in shared memory behind barriers, a scatter whose loop over its
# (repeated) index runs in one thread, a softmax whose whole-array sum stays inline and
# reaches its kernel as an argument, and an empty tensor (nothing launched).
_RNG = np.random.default_rng(7)
GPU_CASES = {
    "elementwise": (lambda x: np.tanh(x) * 2, [np.linspace(-3, 3, 37, dtype=np.float32)]),
    "row_sum": (lambda x: x.sum(axis=-1), [_RNG.standard_normal((5, 70)).astype(np.float32)]),
    "matmul": (
        lambda a, b: a @ b,
        [_RNG.standard_normal((64, 48)).astype(np.float32), _RNG.standard_normal((48, 32)).astype(np.float32)],
    ),
    "scatter_add": (_scatter_add, [np.zeros(7, np.float32), np.array([3, 3, 0, 6, 3], np.int64)]),
    "softmax_share": (CASES["softmax"][0], [_RNG.standard_normal((4, 9)).astype(np.float32)]),
    "empty": (lambda x: x * 2 + 1, [np.zeros((0, 5), np.float32)]),
}


def _gpu_lowered(name, target="cuda-emulate"):
    fn, inputs = GPU_CASES[name]
    return kiln.compile(fn, target=target).lower(*inputs)


@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_a_gpu_kernel_call_carries_the_launch_its_nest_gets(name):
    lowered = _gpu_lowered(name)
    scheduled = lowered.module("scheduled").body.ops[-1]
    (public,), callees = _split(lowered.pipeline.codegen_module())
    calls = [op for op in public.body.ops if isinstance(op, F.CallOp)]
    # each nest that gives no value is a kernel of its own, in the order it ran
    nests = [op for op in scheduled.body.ops if can_outline(op)]
    assert len(calls) == len(nests) == len(callees) and calls
    for call, nest in zip(calls, nests):
        callee = callees[call.attributes["callee"]]
        (moved,) = [op for op in callee.body.ops if op.name == "affine.for"]
        assert A.kernel_of(moved) == A.kernel_of(nest) == call.attributes["kiln.kernel"]
        launch = launch_of(moved)
        assert call.attributes["kiln.grid"] == launch.grid and call.attributes["kiln.block"] == launch.block
        assert call.attributes["kiln.cooperative"] == launch.cooperative
        assert len(launch.grid) == len(launch.block) == 3
        # a GPU kernel's views are its parameters: passed, not made again
        assert not any(op.name == "memref.view" for op in callee.body.ops)
    # the printer launches each callee with its call's sizes
    source = lowered.text("cuda")
    for call in calls:
        callee = callees[call.attributes["callee"]]
        (moved,) = [op for op in callee.body.ops if op.name == "affine.for"]
        grid, block = call.attributes["kiln.grid"], call.attributes["kiln.block"]
        if 0 in grid:
            continue
        if bound(moved):
            macro = "KILN_LAUNCH_COOP" if call.attributes["kiln.cooperative"] else "KILN_LAUNCH3"
            assert re.search(rf"{macro}\(kiln_\w+_k\d+, {', '.join(map(str, grid + block))}[,)]", source)
        else:
            assert re.search(rf"KILN_LAUNCH\(kiln_\w+_k\d+, {grid[0]}, {block[0]}[,)]", source)


def test_the_gpu_launches_are_the_ones_each_kind_of_nest_needs():
    def launches(name):
        (public,), _ = _split(_gpu_lowered(name).pipeline.codegen_module())
        calls = [op for op in public.body.ops if isinstance(op, F.CallOp)]
        return [
            (c.attributes["kiln.grid"], c.attributes["kiln.block"], c.attributes["kiln.cooperative"]) for c in calls
        ]

    assert launches("elementwise") == [((1, 1, 1), (37, 1, 1), False)]  # one thread an element
    assert launches("empty") == [((0, 1, 1), (1, 1, 1), False)]  # nothing to launch
    (row,) = launches("row_sum")
    assert row[0][0] == 5 and row[1][0] % 32 == 0 and row[2]  # a block a row, whole warps
    assert any(cooperative and block[0] * block[1] * block[2] > 1 for _, block, cooperative in launches("matmul"))
    # the scatter's loop over its index runs in one thread, in the index's order
    assert ((1, 1, 1), (1, 1, 1), False) in launches("scatter_add")


@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_the_gpu_outlined_module_computes_what_numpy_does(name):
    fn, inputs = GPU_CASES[name]
    got = _gpu_lowered(name).compile()(*[a.copy() for a in inputs])
    np.testing.assert_allclose(got, fn(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_the_gpu_outlined_module_is_accepted_by_mlir_opt(name):
    text = print_ir(_gpu_lowered(name, "cuda").pipeline.codegen_module())
    assert "kiln.grid = array<i64: " in text and "kiln.block = array<i64: " in text
    result = subprocess.run([MLIR_OPT, "-"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, f"mlir-opt rejected the outlined module:\n{result.stderr}\n{text}"


def test_a_gpu_kernel_function_with_two_nests_is_refused_by_the_cuda_printer():
    # the CPU form groups a kernel's consecutive nests in one function; a GPU launches each alone
    assert len(_split(outline_kernels(parse_ir(SPLIT_KERNEL), launch=True))[1]) == 3
    with pytest.raises(NotImplementedError, match="one loop nest"):
        emit_cuda(outline_kernels(parse_ir(SPLIT_KERNEL)))


def test_a_scalar_argument_of_a_kernel_is_not_an_accumulator():
    """A float add of an outlined kernel's scalar argument (a whole-array sum) rounds its
    product first, as numpy does and as it did inline: only an iter_arg may fuse (FMA)."""
    lowered = kiln.compile(lambda x: x * x + x.sum(), target="cuda").lower(kiln.f32[64])
    _, callees = _split(lowered.pipeline.codegen_module())
    adds = [
        op
        for c in callees.values()
        for op in c.walk()
        if op.name == "arith.addf" and any(v in c.arguments for v in op.operands)
    ]
    assert adds and not any(accumulates(op) for op in adds)
