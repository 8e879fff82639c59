"""The IR core as text: snapshots in, snapshots out; the verifier's refusals."""

import re

import numpy as np
import pytest

from kiln.dialects import Builder, KilnError, ParseError, VerificationError, parse_ir, print_ir, verify
from kiln.dialects import affine as A
from kiln.dialects import func as F
from kiln.dialects import memref as MR
from kiln.dialects import tensor as T
from kiln.dialects.builtin import ModuleOp
from kiln.dialects.parser import Parser
from kiln.dialects.printer import format_dense
from kiln.dialects.types import FunctionType, TensorType, scalar_type_of, tensor_type

SCALE_AND_SUM = """\
module {
  func.func @scale_and_sum(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4xf32>, tensor<4x8xi1>) {
    %0 = kiln.constant dense<2.0> : tensor<f32> loc("model.py":3:9)
    %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4x8xf32> loc("model.py":3:9)
    %2 = kiln.mul %x, %1 : tensor<4x8xf32> loc("model.py":3:9)
    %3 = kiln.broadcast_to %b : (tensor<8xf32>) -> tensor<4x8xf32>
    %4 = kiln.add %2, %3 : tensor<4x8xf32>
    %5 = kiln.reduce_sum %4 {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
    %6 = kiln.cmp %4, %2 {predicate = "lt"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
    func.return %5, %6 : tensor<4xf32>, tensor<4x8xi1>
  }
}
"""


def test_custom_form_round_trips_exactly():
    module = parse_ir(SCALE_AND_SUM)
    verify(module)
    assert print_ir(module) == SCALE_AND_SUM


def test_parsed_module_has_the_written_structure():
    function = parse_ir(SCALE_AND_SUM).lookup("scale_and_sum")
    assert [a.name_hint for a in function.arguments] == ["x", "b"]
    assert [op.name for op in function.body.ops] == [
        "kiln.constant",
        "kiln.broadcast_to",
        "kiln.mul",
        "kiln.broadcast_to",
        "kiln.add",
        "kiln.reduce_sum",
        "kiln.cmp",
        "func.return",
    ]
    mul = function.body.ops[2]
    assert mul.lhs is function.arguments[0] and mul.loc.file == "model.py" and mul.loc.line == 3
    assert function.function_type == FunctionType(
        (tensor_type((4, 8), np.float32), tensor_type((8,), np.float32)),
        (tensor_type((4,), np.float32), tensor_type((4, 8), np.bool_)),
    )


def test_generic_form_reads_back_to_the_same_module():
    module = parse_ir(SCALE_AND_SUM)
    generic = print_ir(module, generic=True)
    assert '"kiln.add"(%2, %3) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>' in generic
    assert print_ir(parse_ir(generic)) == SCALE_AND_SUM


def test_locations_can_be_left_out():
    text = print_ir(parse_ir(SCALE_AND_SUM), locations=False)
    assert "loc(" not in text
    assert "%2 = kiln.mul %x, %1 : tensor<4x8xf32>\n" in text


def _constant_text(array):
    module = ModuleOp.empty()
    function = F.FuncOp.create("c", [], [tensor_type(array.shape, array.dtype)])
    module.body.append(function)
    value = Builder(function.body).create(T.ConstantOp, [], {"value": array}).result
    Builder(function.body).create(F.ReturnOp, [value])
    text = print_ir(module)
    again = parse_ir(text).lookup("c").body.ops[0].value
    assert again.dtype == array.dtype and again.shape == array.shape
    np.testing.assert_array_equal(again, array)
    assert np.array_equal(np.signbit(again), np.signbit(array)) if array.dtype.kind == "f" else True
    return function.body.ops[0], text


@pytest.mark.parametrize(
    "array, form",
    [
        (np.full((2, 3), 1.5, np.float32), "dense<1.5> : tensor<2x3xf32>"),
        (np.array([[1, -2], [3, 4]], np.int64), "dense<[[1, -2], [3, 4]]> : tensor<2x2xi64>"),
        (np.array([True, False]), "dense<[true, false]> : tensor<2xi1>"),
        (np.array(0.1, np.float32), "dense<0.1> : tensor<f32>"),
        (np.array([1e-30, 3e20]), "dense<[1.0e-30, 3.0e+20]> : tensor<2xf64>"),
        (np.array([0.0, -0.0], np.float32), "dense<[0.0, -0.0]> : tensor<2xf32>"),
        (np.array([np.nan, np.inf], np.float32), 'dense<"0x0000C07F0000807F"> : tensor<2xf32>'),
        (np.arange(20, dtype=np.int32), 'dense<"0x00000000010000000200000003000000'),
        (np.zeros((0, 3), np.float64), "dense<> : tensor<0x3xf64>"),
    ],
)
def test_constants_print_compactly_and_read_back_exactly(array, form):
    _, text = _constant_text(array)
    assert form in text


def test_float32_constants_keep_every_bit():
    values = np.random.default_rng(1).standard_normal(7).astype(np.float32)
    _constant_text(values)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %y : tensor<4xf32>\n}",
            "use of undefined value %y",
        ),
        (
            "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = tensor.bogus %x : tensor<4xf32>\n}",
            "unknown operation 'tensor.bogus'",
        ),
        ("func.func @f(%x: tensor<4xf33>) {\n}", "unknown type 'f33'"),
        (
            "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = kiln.add %x, %x : tensor<5xf32>\n}",
            "operand has type tensor<4xf32>, but the op says tensor<5xf32>",
        ),
        (
            "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %x = kiln.neg %x : tensor<4xf32>\n}",
            "redefinition of %x",
        ),
    ],
)
def test_parse_errors_name_the_problem_and_the_line(text, message):
    with pytest.raises(ParseError, match=message) as info:
        parse_ir(text, "bad.mlir")
    assert "bad.mlir:" in str(info.value)


@pytest.mark.parametrize(
    "body, message",
    [
        (
            "%0 = kiln.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>\n  func.return %0 : tensor<5xf32>",
            r"result type is tensor<5xf32>, expected tensor<4xf32>",
        ),
        (
            "%0 = kiln.reshape %x : (tensor<4xf32>) -> tensor<3xf32>\n  func.return %0 : tensor<3xf32>",
            r"cannot reshape \(4,\) \(4 elements\) to \(3,\)",
        ),
        ("%0 = kiln.neg %x : tensor<4xf32>", "must end with func.return"),
        ("%0 = kiln.exp %i : tensor<4xi32>\n  func.return %x : tensor<4xf32>", "kiln.exp does not take i32"),
        ("func.return %i : tensor<4xi32>", r"func.return gives \(tensor<4xi32>\) but @f returns"),
    ],
)
def test_verifier_refuses_broken_ir(body, message):
    text = f"func.func @f(%x: tensor<4xf32>, %i: tensor<4xi32>) -> tensor<4xf32> {{\n  {body}\n}}"
    with pytest.raises(KilnError, match=message):  # VerificationError, ShapeError or DTypeError
        verify(parse_ir(text))


def test_verifier_catches_a_use_before_its_definition():
    module = parse_ir(SCALE_AND_SUM)
    ops = module.lookup("scale_and_sum").body.ops
    ops[1], ops[2] = ops[2], ops[1]  # the mul now uses %1 before it is defined
    with pytest.raises(VerificationError, match="used before it is defined"):
        verify(module)


def test_erase_refuses_an_op_whose_result_is_used_and_rewiring_updates_uses():
    module = parse_ir(SCALE_AND_SUM)
    function = module.lookup("scale_and_sum")
    constant = function.body.ops[0]
    with pytest.raises(VerificationError, match="still used"):
        constant.erase()
    add = function.body.ops[4]
    add.result.replace_all_uses_with(function.body.ops[2].result)
    assert not add.result.uses
    add.erase()
    verify(module)
    assert "kiln.add" not in print_ir(module)


def test_symbols_that_are_not_identifiers_are_quoted():
    module = ModuleOp.empty()
    function = F.FuncOp.create("<lambda>", [], [])
    Builder(function.body).create(F.ReturnOp, [])
    module.body.append(function)
    text = print_ir(module)
    assert 'func.func @"<lambda>"() {' in text
    assert print_ir(parse_ir(text)) == text


# -- the memory plan, checked from the affine IR -------------------------------------------
# Three kernels: a = exp(x); b = f(a) at b's offset; out = a + b. `a` is read by the last
# kernel, so it is live with `b` from the second kernel on.
ARENA = """\
func.func @f(%x: memref<4x4xf32>, %out0: memref<4x4xf32>) attributes {{kiln.buffers = ["x", "out0"]}} {{
  %arena = memref.alloc() {{alignment = 64 : i64, kiln.buffer = "arena"}} : memref<{arena}xi8>
  %c0 = arith.constant 0 : index
  %cb = arith.constant {offset} : index
  %a = memref.view %arena[%c0][] {{kiln.buffer = "a"}} : memref<{arena}xi8> to memref<4x4xf32>
  %b = memref.view %arena[%cb][] {{kiln.buffer = "b"{in_place}}} : memref<{arena}xi8> to memref<4x4xf32>
  affine.for %i = 0 to 4 {{
    affine.for %j = 0 to 4 {{
      %0 = affine.load %x[%i, %j] : memref<4x4xf32>
      %1 = math.exp %0 : f32
      affine.store %1, %a[%i, %j] : memref<4x4xf32>
    }} {{kiln.loop = "k0.j"}}
  }} {{kiln.loop = "k0.i"}}
  affine.for %i = 0 to 4 {{
    affine.for %j = 0 to 4 {{
      %0 = affine.load %a[{read}] : memref<4x4xf32>
      %1 = arith.negf %0 : f32
      affine.store %1, %b[%i, %j] : memref<4x4xf32>
    }} {{kiln.loop = "k1.j"}}
  }} {{kiln.loop = "k1.i"}}
  affine.for %i = 0 to 4 {{
    affine.for %j = 0 to 4 {{
      %0 = affine.load %{last}[%i, %j] : memref<4x4xf32>
      %1 = affine.load %b[%i, %j] : memref<4x4xf32>
      %2 = arith.addf %0, %1 : f32
      affine.store %2, %out0[%i, %j] : memref<4x4xf32>
    }} {{kiln.loop = "k2.j"}}
  }} {{kiln.loop = "k2.i"}}
  memref.dealloc %arena : memref<{arena}xi8>
  func.return
}}
"""


def arena_ir(offset=64, arena=128, in_place="", read="%i, %j", last="a"):
    return parse_ir(ARENA.format(offset=offset, arena=arena, in_place=in_place, read=read, last=last))


def test_views_of_the_arena_that_do_not_overlap_verify():
    verify(arena_ir(offset=64))


def test_live_views_that_share_bytes_are_refused():
    message = r"views a \(bytes 0 to 64, used by top-level ops 5 to 7\) and b \(bytes 32 to 96, used by top-level ops 6"
    with pytest.raises(VerificationError, match=message):
        verify(arena_ir(offset=32))


def test_a_view_past_the_end_of_its_arena_is_refused():
    with pytest.raises(VerificationError, match="memref.view b: bytes 96 to 160 lie outside its arena of 128 bytes"):
        verify(arena_ir(offset=96))


def test_a_result_written_in_place_of_a_dead_input_verifies():
    # b overwrites a element by element: the last kernel reads b, not a.
    verify(arena_ir(offset=0, arena=64, in_place=', kiln.in_place_of = "a"', last="b"))


def test_in_place_is_refused_where_the_input_is_still_read_later():
    with pytest.raises(VerificationError, match="b is marked in place of a, which is still used after"):
        verify(arena_ir(offset=0, arena=64, in_place=', kiln.in_place_of = "a"', last="a"))


def test_in_place_is_refused_where_a_read_is_of_another_element():
    # Reading a transposed, the kernel would read elements it has already overwritten.
    with pytest.raises(VerificationError, match="the kernel reads a where it does not then write b at the same index"):
        verify(arena_ir(offset=0, arena=64, in_place=', kiln.in_place_of = "a"', read="%j, %i", last="b"))


def test_in_place_is_refused_at_another_offset():
    with pytest.raises(VerificationError, match="b is marked in place of a but its bytes are not the same"):
        verify(arena_ir(offset=32, in_place=', kiln.in_place_of = "a"', last="b"))


def test_overlap_without_the_in_place_mark_is_refused():
    with pytest.raises(VerificationError, match="share bytes .neither is marked kiln.in_place_of the other"):
        verify(arena_ir(offset=0, arena=64, last="b"))


def test_loop_and_buffer_names_are_attributes_that_survive_renamed_ssa_values():
    text = print_ir(arena_ir())
    assert print_ir(parse_ir(text)) == text
    names = {}
    renamed = re.sub(r"%[A-Za-z_][A-Za-z0-9_.$]*", lambda m: names.setdefault(m[0], f"%v{len(names)}"), text)
    assert "%k0" not in renamed and "%a " not in renamed
    function = parse_ir(renamed).body.ops[0]
    loops = [op for op in function.walk() if isinstance(op, A.ForOp)]
    assert [A.loop_name(op) for op in loops] == ["k0.i", "k0.j", "k1.i", "k1.j", "k2.i", "k2.j"]
    views = [op.result for op in function.body.ops if isinstance(op, MR.ViewOp)]
    assert [MR.buffer_name(v) for v in views] == ["a", "b"]
    assert [MR.buffer_name(a) for a in function.arguments] == ["x", "out0"]


def test_a_loop_without_its_attribute_has_no_name_whatever_its_ssa_name():
    function = parse_ir(print_ir(arena_ir()).replace('{kiln.loop = "k0.i"}', "")).body.ops[0]
    first = next(op for op in function.body.ops if isinstance(op, A.ForOp))
    assert first.induction_variable.name_hint == "i" and A.loop_name(first) == "?"


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 17, 169])
def test_bool_dense_hex_is_mlirs_packed_bits(size):
    values = np.random.default_rng(size).random(size) < 0.4
    values[:1] = True  # not a splat
    text = format_dense(values)
    if size > 16:  # large constants are hex: np.packbits with little bit order is MLIR's layout
        assert text.startswith(f'dense<"0x{np.packbits(values, bitorder="little").tobytes().hex().upper()}">')
    type_ = TensorType(values.shape, scalar_type_of(np.dtype(bool)))
    body = text[len("dense<") : text.index("> :")]
    np.testing.assert_array_equal(Parser(body + ">").parse_dense_body(type_), values)


def test_bool_hex_of_the_wrong_length_is_refused_by_name():
    with pytest.raises(ParseError, match="eight i1 elements to a byte"):
        parse_ir('func.func @f() {\n  %0 = kiln.constant dense<"0x0102"> : tensor<100xi1>\n  func.return\n}')
