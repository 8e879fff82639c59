"""Every op has the rules each stage needs: a tensor op its gradient (or a reason it has
none), its lowering and, if elementwise, its scalar rule; a loop-level op its LLVM handler
and its CUDA expression or statement. A new op that misses one is named here, not found
later by a user. Also: traits are inherited and implied, and notes take no part in CSE or
the kernels' structural hash."""

import inspect

import numpy as np
import pytest

import kiln  # (importing it registers every code generator's handlers)
from kiln.codegen import cuda_codegen
from kiln.codegen.cuda_ops import EXPRESSIONS
from kiln.codegen.llvm_emitter import HANDLERS
from kiln.dialects import OP_REGISTRY, parse_ir, traits
from kiln.dialects import affine as A
from kiln.dialects import math as M
from kiln.dialects import tensor as T
from kiln.dialects.traits import (
    AFFINE_ACCESS,
    AFFINE_READ,
    ALLOCATION,
    ELEMENTWISE,
    MOVES_ELEMENTS,
    TARGET_DEPENDENT_FLOAT,
    TERMINATOR,
    TRANSCENDENTAL,
    VIEW,
)
from kiln.passes.autodiff import NOT_DIFFERENTIABLE, VJP
from kiln.passes.canonicalize import canonicalize
from kiln.passes.cse import op_key
from kiln.passes.kernels import extract, kernel_names, structural_hash
from kiln.passes.lower_tensor_to_affine import LOWERINGS
from kiln.passes.scalar_rules import REDUCTION_COMBINE, SCALAR_RULES

LOOP_LEVEL_OPS = [cls for name, cls in sorted(OP_REGISTRY.items()) if name.split(".")[0] not in ("kiln", "builtin")]

# Loop-level ops the LLVM code generator has no handler for, and why none is needed.
LLVM_ELSEWHERE = {
    "func.func": "the function being emitted, not an op inside it",
    "memref.global": "a module-level constant, emitted as an LLVM global before the functions",
    "gpu.barrier": "made only by GPU schedules, which the CPU pipeline never applies",
}
# Loop-level ops that never reach the CUDA code generator: vectorize is a CPU schedule
# primitive (a CUDA function given one is refused: "no CUDA code for vector.broadcast").
CUDA_NEVER = {
    "affine.vector_load",
    "vector.load",
    "affine.vector_store",
    "vector.broadcast",
    "vector.reduction",
    "vector.extract",
    "vector.gather",
}


def test_every_tensor_op_has_a_gradient_rule_or_says_why_not():
    missing = [cls.name for cls in T.TENSOR_OPS if cls not in VJP and cls not in NOT_DIFFERENTIABLE]
    assert not missing, f"tensor ops with no VJP (passes/autodiff.py) and no NOT_DIFFERENTIABLE entry: {missing}"
    both = [cls.name for cls in NOT_DIFFERENTIABLE if cls in VJP]
    assert not both, f"marked non-differentiable but given a VJP: {both}"


def test_ops_marked_without_float_results_take_no_float():
    for cls, reason in NOT_DIFFERENTIABLE.items():
        if "never a float" in reason and cls is not T.CmpOp:  # kiln.cmp's result is i1 whatever it compares
            assert not set(cls.allowed) & set(T.FLOAT), cls.name


def test_every_tensor_op_lowers_to_loops():
    assert not [cls.name for cls in T.TENSOR_OPS if cls not in LOWERINGS], "no lowering in lower_tensor_to_affine"
    assert not [cls.name for cls in T.ELEMENTWISE_OPS if cls not in SCALAR_RULES], "no rule in scalar_rules"
    assert not [cls.name for cls in T.REDUCTION_OPS if cls not in REDUCTION_COMBINE], "no combine in scalar_rules"


def test_every_loop_level_op_has_an_llvm_handler():
    missing = [cls.name for cls in LOOP_LEVEL_OPS if cls not in HANDLERS and cls.name not in LLVM_ELSEWHERE]
    assert not missing, f"loop-level ops with no handler in compiler/codegen/llvm_*.py: {missing}"
    stale = [name for name in LLVM_ELSEWHERE if OP_REGISTRY[name] in HANDLERS]
    assert not stale, f"given a handler since: {stale}"


def test_every_scalar_op_has_a_cuda_expression():
    # arith and math ops compute one scalar each: an expression; arith.constant is a literal.
    scalar = [cls for cls in LOOP_LEVEL_OPS if cls.name.split(".")[0] in ("arith", "math")]
    missing = [cls.name for cls in scalar if cls not in EXPRESSIONS and cls.name != "arith.constant"]
    assert not missing, f"no CUDA expression in compiler/codegen/cuda_ops.py: {missing}"


def test_every_other_loop_level_op_is_a_cuda_statement():
    """Loops, accesses, buffers, checks and barriers are statements cuda_codegen writes itself:
    it names the op's class, or asks for a trait the op has (``has_trait(LOOP_LIKE)``)."""
    source = inspect.getsource(cuda_codegen)
    trait_names = {trait: name for name, trait in vars(traits).items() if isinstance(trait, traits.Trait)}

    def written(cls):
        asked = any(f"has_trait({trait_names[t]})" in source for t in cls.all_traits)
        return asked or f".{cls.__name__})" in source or f".{cls.__name__}," in source

    statements = [
        cls
        for cls in LOOP_LEVEL_OPS
        if cls.name.split(".")[0] not in ("arith", "math") and cls.name not in CUDA_NEVER | {"func.func"}
    ]
    missing = [cls.name for cls in statements if not written(cls)]
    assert not missing, f"loop-level ops compiler/codegen/cuda_codegen.py never writes: {missing}"


# -- traits -------------------------------------------------------------------------------
def test_traits_are_inherited_and_implied():
    assert T.AddOp.has_trait(ELEMENTWISE) and T.AddOp([], None, []).has_trait(ELEMENTWISE)  # class and op
    assert T.ExpOp.has_trait(TRANSCENDENTAL) and T.ExpOp.has_trait(TARGET_DEPENDENT_FLOAT)
    assert T.TransposeOp.has_trait(VIEW) and T.TransposeOp.has_trait(MOVES_ELEMENTS)
    assert A.VectorLoadOp.has_trait(AFFINE_READ) and A.VectorLoadOp.has_trait(AFFINE_ACCESS)
    assert not T.AddOp.has_trait(TARGET_DEPENDENT_FLOAT) and not T.MatmulOp.has_trait(ELEMENTWISE)


def test_exactly_the_last_op_of_every_block_is_a_terminator():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    lowered = kiln.compile(softmax).lower(kiln.f32[3, 5])
    for stage in ("tensor", "optimized", "affine", "scheduled"):
        blocks = [b for op in lowered.module(stage).walk() for r in op.regions for b in r.blocks]
        for block in blocks:
            if block.ops and block.ops[0].name != "func.func":  # a module's body ends with no terminator
                assert [op.has_trait(TERMINATOR) for op in block.ops] == [False] * (len(block.ops) - 1) + [True]
    ops = list(lowered.module("affine").walk())
    allocations = [op for op in ops if op.has_trait(ALLOCATION)]
    assert allocations == [op for op in ops if op.name in ("memref.alloc", "memref.alloca")] != []


def test_math_library_calls_are_transcendental_and_exact_functions_are_not():
    """The float functions' table says which are exact (floor, ceil, ...): those fold, the others do not."""
    for f in M.FLOAT_FUNCTIONS:
        assert T.FLOAT_FUNCTION_OPS[f.op].has_trait(TRANSCENDENTAL) is (not f.exact), f.op.name


@pytest.mark.parametrize(
    "op, folds",
    [("kiln.exp", False), ("kiln.arctan", False), ("kiln.floor", True), ("kiln.sqrt", True), ("kiln.neg", True)],
)
def test_canonicalize_folds_only_what_every_target_computes_alike(op, folds):
    module = parse_ir(f"""module {{
  func.func @f() -> tensor<3xf32> {{
    %0 = kiln.constant dense<[0.5, -1.5, 2.25]> : tensor<3xf32>
    %1 = {op} %0 : tensor<3xf32>
    func.return %1 : tensor<3xf32>
  }}
}}""")
    body = canonicalize(module).body.ops[0].body.ops
    assert (len(body) == 2 and isinstance(body[0], T.ConstantOp)) is folds
    if folds:
        with np.errstate(invalid="ignore"):  # the square root of -1.5 is NaN, as numpy says
            want = OP_REGISTRY[op].numpy_fn(np.float32([0.5, -1.5, 2.25]))
        np.testing.assert_array_equal(body[0].value, want)


# -- notes --------------------------------------------------------------------------------
def test_notes_take_no_part_in_cse_keys():
    x = T.ConstantOp([], {"value": np.float32([1, 2])}).result
    first, second = T.NegOp([x], {}), T.NegOp([x], {A.LOOP: "k0.i"})
    assert second.semantic_attributes() == {} and A.LOOP in second.attributes  # kept, and printed
    assert op_key(first) == op_key(second)
    lt, gt = (T.CmpOp([x, x], {"predicate": p}) for p in ("lt", "gt"))
    assert op_key(lt) != op_key(gt)  # a semantic attribute counts


def test_structural_hash_ignores_loop_and_buffer_names():
    def kernel(loop, buffer):
        module = parse_ir(f"""module {{
  func.func @f(%x: memref<4xf32>, %out0: memref<4xf32>) attributes {{kiln.buffers = ["{buffer}", "out0"]}} {{
    affine.for %i = 0 to 4 {{
      %0 = affine.load %x[%i] : memref<4xf32>
      affine.store %0, %out0[%i] : memref<4xf32>
    }} {{kiln.loop = "{loop}"}}
    func.return
  }}
}}""")
        function = module.body.ops[0]
        return structural_hash(extract(function, kernel_names(function)[0]))

    assert kernel("k0.i", "x") == kernel("k3.j", "weights")
