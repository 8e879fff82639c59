"""Lowering tensor -> affine, checked as text: a small function, its loop nests.

Views (broadcast, transpose, reshape, slice) must show up as index arithmetic
in the loads, never as copies."""

import textwrap

import numpy as np
import pytest
from op_table import CASES

import kiln
from kiln.dialects import affine_expr as ax
from kiln.dialects import parse_ir, print_ir, verify
from kiln.dialects.verifier import verify_memory_plan
from kiln.passes.lower_tensor_to_affine import lower_tensor_to_affine


def affine_text(fn, *specs, optimize=True):
    return kiln.compile(fn, optimize=optimize).lower(*specs).text("affine", locations=False)


def expect(text):
    return textwrap.dedent(text).lstrip("\n")


def test_broadcast_is_an_index_not_a_copy():
    assert affine_text(lambda x, b: x + b, kiln.f32[3, 5], kiln.f32[5]) == expect("""
        module {
          func.func @"<lambda>"(%x: memref<3x5xf32>, %b: memref<5xf32>, %out0: memref<3x5xf32>) attributes {kiln.buffers = ["x", "b", "out0"]} {
            affine.for %k0.i = 0 to 3 {
              affine.for %k0.j = 0 to 5 {
                %0 = affine.load %x[%k0.i, %k0.j] : memref<3x5xf32>
                %1 = affine.load %b[%k0.j] : memref<5xf32>
                %2 = arith.addf %0, %1 : f32
                affine.store %2, %out0[%k0.i, %k0.j] : memref<3x5xf32>
              } {kiln.loop = "k0.j"}
            } {kiln.loop = "k0.i"}
            func.return
          }
        }
    """)


def test_reduction_carries_its_accumulator_through_iter_args():
    assert affine_text(lambda x: x.T.sum(axis=1), kiln.f32[3, 4]) == expect("""
        module {
          func.func @"<lambda>"(%x: memref<3x4xf32>, %out0: memref<4xf32>) attributes {kiln.buffers = ["x", "out0"]} {
            %0 = arith.constant 0.0 : f32
            affine.for %k0.i = 0 to 4 {
              %1 = affine.for %k0.r = 0 to 3 iter_args(%acc0 = %0) -> (f32) {
                %2 = affine.load %x[%k0.r, %k0.i] : memref<3x4xf32>
                %3 = arith.addf %acc0, %2 : f32
                affine.yield %3 : f32
              } {kiln.loop = "k0.r"}
              affine.store %1, %out0[%k0.i] : memref<4xf32>
            } {kiln.loop = "k0.i"}
            func.return
          }
        }
    """)


def test_reshape_and_reversed_slice_become_floordiv_and_mod():
    text = affine_text(lambda x: x.reshape(6, 2)[::-1], kiln.i32[3, 4])
    assert (
        "affine.load %x[(%k0.i * -2 + %k0.j + 10) floordiv 4, (%k0.i * -2 + %k0.j + 10) mod 4] : memref<3x4xi32>"
        in text
    )
    assert "memref.alloc" not in text


def test_matmul_is_a_loop_nest_with_a_reduction():
    assert affine_text(lambda a, b: a @ b, kiln.f64[2, 3], kiln.f64[3, 4]) == expect("""
        module {
          func.func @"<lambda>"(%a: memref<2x3xf64>, %b: memref<3x4xf64>, %out0: memref<2x4xf64>) attributes {kiln.buffers = ["a", "b", "out0"]} {
            %0 = arith.constant 0.0 : f64
            affine.for %k0.i = 0 to 2 {
              affine.for %k0.j = 0 to 4 {
                %1 = affine.for %k0.r = 0 to 3 iter_args(%acc0 = %0) -> (f64) {
                  %2 = affine.load %a[%k0.i, %k0.r] : memref<2x3xf64>
                  %3 = affine.load %b[%k0.r, %k0.j] : memref<3x4xf64>
                  %4 = arith.mulf %2, %3 : f64
                  %5 = arith.addf %acc0, %4 : f64
                  affine.yield %5 : f64
                } {kiln.loop = "k0.r"}
                affine.store %1, %out0[%k0.i, %k0.j] : memref<2x4xf64>
              } {kiln.loop = "k0.j"}
            } {kiln.loop = "k0.i"}
            func.return
          }
        }
    """)


def test_constants_are_globals_and_concat_writes_at_offsets():
    assert affine_text(lambda x: np.concatenate([x, np.array([7, 8], np.int64)]), kiln.i64[3]) == expect("""
        module {
          memref.global "private" constant @cst_0 : memref<2xi64> = dense<[7, 8]>
          func.func @"<lambda>"(%x: memref<3xi64>, %out0: memref<5xi64>) attributes {kiln.buffers = ["x", "out0"]} {
            %0 = memref.get_global @cst_0 : memref<2xi64>
            affine.for %k0.i = 0 to 3 {
              %1 = affine.load %x[%k0.i] : memref<3xi64>
              affine.store %1, %out0[%k0.i] : memref<5xi64>
            } {kiln.loop = "k0.i"}
            affine.for %k1.i = 0 to 2 {
              %2 = affine.load %0[%k1.i] : memref<2xi64>
              affine.store %2, %out0[%k1.i + 3] : memref<5xi64>
            } {kiln.loop = "k1.i"}
            func.return
          }
        }
    """)


def test_unoptimized_intermediates_are_allocated_and_freed():
    text = affine_text(lambda c, x: np.where(c, x, 0).astype(np.float32), kiln.bool_[4], kiln.i32[4], optimize=False)
    assert '%buf0 = memref.alloc() {alignment = 64 : i64, kiln.buffer = "buf0"} : memref<4xi32>' in text
    assert "%4 = arith.select %1, %2, %3 : i32" in text
    assert "%6 = arith.sitofp %5 : i32 to f32" in text
    assert text.index("memref.dealloc %buf0 : memref<4xi32>") > text.index("arith.sitofp")


def test_a_returned_input_or_view_is_copied_into_its_output():
    text = affine_text(lambda x: (x, x.T), kiln.f32[2, 3])
    assert "affine.store %0, %out0[%k0.i, %k0.j] : memref<2x3xf32>" in text
    assert "affine.load %x[%k1.j, %k1.i] : memref<2x3xf32>" in text


def test_a_fused_row_softmax_is_one_loop_nest_with_exp_in_a_row_buffer():
    """The maximum, then exp into a row buffer on the stack, its sum and the division, all in
    the row loop: x is read and the result written once, and exp is computed once."""
    assert affine_text(kiln.softmax, kiln.f32[3, 4]) == expect("""
        module {
          func.func @softmax(%x: memref<3x4xf32>, %out0: memref<3x4xf32>) attributes {kiln.buffers = ["x", "out0"]} {
            %0 = arith.constant 0xFF800000 : f32
            %1 = arith.constant 0.0 : f32
            affine.for %k0.i = 0 to 3 {
              %row0 = memref.alloca() {alignment = 64 : i64, kiln.buffer = "row0"} : memref<4xf32>
              %2 = affine.for %k0.r = 0 to 4 iter_args(%acc0 = %0) -> (f32) {
                %3 = affine.load %x[%k0.i, %k0.r] : memref<3x4xf32>
                %4 = arith.maximumf %acc0, %3 : f32
                affine.yield %4 : f32
              } {kiln.loop = "k0.r"}
              affine.for %k0.row = 0 to 4 {
                %5 = affine.load %x[%k0.i, %k0.row] : memref<3x4xf32>
                %6 = arith.subf %5, %2 : f32
                %7 = math.exp %6 : f32
                affine.store %7, %row0[%k0.row] : memref<4xf32>
              } {kiln.loop = "k0.row"}
              %8 = affine.for %k0.r1 = 0 to 4 iter_args(%acc0_1 = %1) -> (f32) {
                %9 = affine.load %row0[%k0.r1] : memref<4xf32>
                %10 = arith.addf %acc0_1, %9 : f32
                affine.yield %10 : f32
              } {kiln.loop = "k0.r1"}
              affine.for %k0.j = 0 to 4 {
                %11 = affine.load %row0[%k0.j] : memref<4xf32>
                %12 = arith.divf %11, %8 : f32
                affine.store %12, %out0[%k0.i, %k0.j] : memref<3x4xf32>
              } {kiln.loop = "k0.j"}
            } {kiln.loop = "k0.i"}
            func.return
          }
        }
    """)


def test_a_fused_layernorm_is_one_loop_nest():
    text = affine_text(
        lambda x, g: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g,
        kiln.f32[5, 7],
        kiln.f32[7],
    )
    function = text.split("func.func", 1)[1]
    assert function.count("\n    affine.for") == 1  # one nest; its row loop holds two reductions and the output loop
    assert function.count("iter_args") == 2 and "memref.alloc" not in function


def test_planned_intermediates_are_views_of_one_arena():
    text = affine_text(lambda x: np.tanh(x.sum(axis=0)) @ x.T, kiln.f32[3, 5])
    assert '%arena = memref.alloc() {alignment = 64 : i64, kiln.buffer = "arena"} : memref<128xi8>' in text
    assert (
        '%0 = arith.constant 0 : index\n    %buf0 = memref.view %arena[%0][] {kiln.buffer = "buf0"} : '
        "memref<128xi8> to memref<5xf32>"
    ) in text
    assert (
        '%6 = arith.constant 64 : index\n    %buf1 = memref.view %arena[%6][] {kiln.buffer = "buf1"} : '
        "memref<128xi8> to memref<1x3xf32>"
    ) in text
    assert "memref.dealloc %arena : memref<128xi8>" in text


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_the_memory_plan_of_every_program_verifies_from_its_printed_ir(case):
    """What the verifier checks is in the text: views, offsets, names and in-place marks."""
    lowered = kiln.compile(case.fn).lower(*case.args)
    for stage in ("affine", "scheduled"):
        for function in parse_ir(lowered.text(stage)).body.ops:
            if function.name == "func.func":
                verify_memory_plan(function)


def test_a_result_the_plan_writes_over_its_input_is_marked_in_place():
    def f(x, w):
        e = np.exp(x)
        return (np.tanh(e) * 2 + e / e.sum(axis=0, keepdims=True)) @ w

    text = affine_text(f, kiln.f32[4, 4], kiln.f32[4, 4])
    assert '%buf0 = memref.view %arena[%0][] {kiln.buffer = "buf0"} : memref<128xi8> to memref<4x4xf32>' in text
    assert (
        '%buf2 = memref.view %arena[%8][] {kiln.buffer = "buf2", kiln.in_place_of = "buf0"} : '
        "memref<128xi8> to memref<4x4xf32>"
    ) in text


def test_the_pass_runs_alone_on_parsed_ir():
    module = parse_ir(
        expect("""
        func.func @neg(%x: tensor<3xf32>) -> tensor<3xf32> {
          %0 = kiln.neg %x : tensor<3xf32>
          func.return %0 : tensor<3xf32>
        }
    """)
    )
    lowered = lower_tensor_to_affine(module)
    verify(lowered)
    assert print_ir(lowered) == expect("""
        module {
          func.func @neg(%x: memref<3xf32>, %out0: memref<3xf32>) attributes {kiln.buffers = ["x", "out0"]} {
            affine.for %k0.i = 0 to 3 {
              %0 = affine.load %x[%k0.i] : memref<3xf32>
              %1 = arith.negf %0 : f32
              affine.store %1, %out0[%k0.i] : memref<3xf32>
            } {kiln.loop = "k0.i"}
            func.return
          }
        }
    """)


@pytest.mark.parametrize(
    "src, dst",
    [((4, 6), (6, 4)), ((2, 3, 5), (5, 6)), ((7,), (7, 1)), ((1, 5), (5,)), ((12,), (2, 2, 3)), ((2, 2, 3), (3, 4))],
)
def test_reshape_index_arithmetic_reads_every_element_in_order(src, dst):
    x = np.arange(np.prod(src)).reshape(src).astype(np.int64)
    np.testing.assert_array_equal(kiln.compile(lambda v: v.reshape(dst))(x), x.reshape(dst))


def test_affine_expressions_simplify_and_print_like_mlir():
    d0, d1 = ax.Dim(0), ax.Dim(1)
    assert str((d0 * -1 + 3) * 3 + (d1 + 1)) == "d0 * -3 + d1 + 10"
    assert str(ax.floordiv(d0 * 4 + d1, 6)) == "(d0 * 4 + d1) floordiv 6"
    assert str(d0 * 1 + 0) == "d0" and str(d0 - 1) == "d0 - 1"
    assert ax.divide_in_range(d0 * 3 + d1, 3, (4, 3)) == (d0, d1)
    assert ax.bounds(ax.mod(d0 * -2 + 5, 4), (3,)) == (0, 3)
