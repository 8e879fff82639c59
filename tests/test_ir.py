"""The IR core as text: snapshots in, snapshots out; the verifier's refusals."""

import numpy as np
import pytest

from kiln.dialects import Builder, KilnError, ParseError, VerificationError, parse_ir, print_ir, verify
from kiln.dialects import func as F
from kiln.dialects import tensor as T
from kiln.dialects.builtin import ModuleOp
from kiln.dialects.types import FunctionType, tensor_type

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
        (np.zeros((0, 3), np.float64), "dense<[]> : tensor<0x3xf64>"),
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
