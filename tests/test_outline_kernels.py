"""The outline-kernels pass: each kernel's top-level nests in a private function, called
where they were, computing what they computed (the affine interpreter and numpy are the
oracles); what stays inline, and why; the numberings that outlive it."""

import numpy as np
import pytest

import kiln
from kiln.codegen.llvm_emitter import access_sites
from kiln.codegen.status import check_sites
from kiln.dialects import func as F
from kiln.dialects import parse_ir, print_ir
from kiln.dialects.diagnostics import KilnError
from kiln.dialects.verifier import verify
from kiln.interpreters.affine_interpreter import run_affine
from kiln.passes.outline_kernels import outline_kernels
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


def test_nests_of_one_kernel_that_are_not_together_get_functions_of_their_own():
    text = """
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
    module = outline_kernels(parse_ir(text))
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
