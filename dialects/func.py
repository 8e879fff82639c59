"""The ``func`` dialect: functions and returns, as in upstream MLIR.

func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.add %x, %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""

from __future__ import annotations

from .ir import Block, Operation, Region
from .printer import format_attr_dict, format_symbol
from .traits import TERMINATOR
from .types import FunctionType


class FuncOp(Operation):
    name = "func.func"
    attribute_names = ("sym_name", "function_type")
    num_regions = 1
    isolated_from_above = True
    restarts_numbering = True

    @classmethod
    def create(cls, name: str, input_types, result_types, arg_names=None, loc=None) -> "FuncOp":
        body = Block(list(input_types), arg_names)
        attributes = {"sym_name": name, "function_type": FunctionType(tuple(input_types), tuple(result_types))}
        return cls([], attributes, [], [Region([body])], loc=loc)

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def arguments(self) -> list:
        return self.body.args

    def verify(self) -> None:
        super().verify()
        ftype = self.function_type
        if not isinstance(ftype, FunctionType):
            raise self.error("func.func needs a function type")
        if [a.type for a in self.body.args] != list(ftype.inputs):
            raise self.error(f"@{self.sym_name}: block arguments do not match the function type {ftype}")
        if not self.body.ops or not isinstance(self.body.ops[-1], ReturnOp):
            raise self.error(f"@{self.sym_name} must end with func.return")

    def print_custom(self, printer) -> None:
        args = ", ".join(f"{printer.define(a)}: {a.type}" for a in self.body.args)
        printer.write(f"func.func {format_symbol(self.sym_name)}({args})")
        results = self.function_type.results
        if len(results) == 1:
            printer.write(f" -> {results[0]}")
        elif results:
            printer.write(" -> (" + ", ".join(map(str, results)) + ")")
        extra = format_attr_dict(self.attributes, skip=("sym_name", "function_type"))
        if extra:
            printer.write(" attributes" + extra)
        printer.write(" ")
        printer.print_region(self.regions[0])

    @classmethod
    def parse_custom(cls, parser, num_results: int) -> "FuncOp":
        name = parser.parse_symbol()
        parser.expect("(")
        args = parser.comma_list(parser.parse_argument, ")")
        results = parser.parse_type_list() if parser.accept("->") else []
        attributes = parser.parse_attr_dict() if parser.accept("attributes") else {}
        attributes.update(sym_name=name, function_type=FunctionType(tuple(t for _, t in args), tuple(results)))
        region = parser.parse_region(entry_args=args)
        return cls([], attributes, [], [region])


class ReturnOp(Operation):
    name = "func.return"
    traits = frozenset({TERMINATOR})
    operand_names = ("values*",)

    def infer_result_types(self):
        return []

    def verify(self) -> None:
        super().verify()
        func = self.parent.parent.parent if self.parent and self.parent.parent else None
        if isinstance(func, FuncOp):
            expected = list(func.function_type.results)
            got = [v.type for v in self.operands]
            if got != expected:
                raise self.error(
                    f"func.return gives ({', '.join(map(str, got))}) but @{func.sym_name} "
                    f"returns ({', '.join(map(str, expected))})"
                )

    def print_custom(self, printer) -> None:
        printer.write("func.return")
        if self.operands:
            printer.write(f" {printer.operands(self.operands)} : " + ", ".join(str(v.type) for v in self.operands))

    @classmethod
    def parse_custom(cls, parser, num_results: int) -> "ReturnOp":
        operands = parser.parse_operands()
        if operands:
            parser.expect(":")
            types = parser.comma_list_until(parser.parse_type, len(operands))
            if types != [v.type for v in operands]:
                parser.fail("func.return types do not match its operands")
        return cls(operands, {}, [])
