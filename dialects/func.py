"""The ``func`` dialect: functions, calls and returns, as in upstream MLIR.

func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.add %x, %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

A ``private`` function (``sym_visibility = "private"``) is seen only inside its module: the
``outline-kernels`` pass makes one per kernel, called once with ``func.call`` (which calls
only such functions of the same module and gives no results; the verifier checks each
call against the module's functions, ``CallOp.verify_callee``).
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

    @property
    def is_private(self) -> bool:
        return self.attributes.get("sym_visibility") == "private"

    def print_custom(self, printer) -> None:
        args = ", ".join(f"{printer.define(a)}: {a.type}" for a in self.body.args)
        visibility = "private " if self.is_private else ""
        printer.write(f"func.func {visibility}{format_symbol(self.sym_name)}({args})")
        results = self.function_type.results
        if len(results) == 1:
            printer.write(f" -> {results[0]}")
        elif results:
            printer.write(" -> (" + ", ".join(map(str, results)) + ")")
        extra = format_attr_dict(self.attributes, skip=("sym_name", "function_type", "sym_visibility"))
        if extra:
            printer.write(" attributes" + extra)
        printer.write(" ")
        printer.print_region(self.regions[0])

    @classmethod
    def parse_custom(cls, parser, num_results: int) -> "FuncOp":
        private = parser.accept("private")
        name = parser.parse_symbol()
        parser.expect("(")
        args = parser.comma_list(parser.parse_argument, ")")
        results = parser.parse_type_list() if parser.accept("->") else []
        attributes = parser.parse_attr_dict() if parser.accept("attributes") else {}
        attributes.update(sym_name=name, function_type=FunctionType(tuple(t for _, t in args), tuple(results)))
        if private:
            attributes["sym_visibility"] = "private"
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


class CallOp(Operation):
    """``func.call @f_k0(%a, %b) : (memref<16xf32>, f32) -> ()``: runs the private function
    `callee` of the same module on the operands. Calls give no results here (a kernel writes
    its buffers); the callee's argument types must be the operands' (checked by the verifier
    with the module at hand, ``verify_callee``)."""

    name = "func.call"
    attribute_names = ("callee",)
    operand_names = ("args*",)

    def infer_result_types(self):
        return []

    def verify(self) -> None:
        super().verify()
        if self.results:
            raise self.error("func.call gives no results here")

    def verify_callee(self, functions: dict) -> None:
        """Check the call against its module's functions (name -> FuncOp), as MLIR's
        SymbolUserOpInterface does once per module with a symbol table: the callee exists,
        is private, and takes the operands' types."""
        callee = functions.get(self.attributes["callee"])
        if callee is None:
            raise self.error(f"func.call: the module has no function @{self.attributes['callee']}")
        if not callee.is_private:
            raise self.error(f"func.call calls only private functions; @{callee.sym_name} is public")
        if [v.type for v in self.operands] != list(callee.function_type.inputs):
            raise self.error(f"func.call's operand types do not match @{callee.sym_name}'s {callee.function_type}")

    def print_custom(self, printer) -> None:
        printer.write(f"func.call {format_symbol(self.attributes['callee'])}({printer.operands(self.operands)})")
        printer.write(format_attr_dict(self.attributes, skip=("callee",)))
        printer.write(" : (" + ", ".join(str(v.type) for v in self.operands) + ") -> ()")

    @classmethod
    def parse_custom(cls, parser, num_results: int) -> "CallOp":
        callee = parser.parse_symbol()
        parser.expect("(")
        operands = parser.comma_list(parser.parse_value, ")")
        attributes = parser.parse_attr_dict()
        parser.expect(":")
        function_type = parser.parse_function_type()
        if list(function_type.inputs) != [v.type for v in operands] or function_type.results:
            parser.fail("func.call's type does not match its operands, or gives results")
        return cls(operands, {**attributes, "callee": callee}, [])


def walk_inlined(function: FuncOp, callees: dict | None = None):
    """`function.walk()`, with the body of each func.call's callee (from `callees`, name ->
    private FuncOp) walked in the call's place: the ops in the order they ran before
    ``outline-kernels`` moved them, so numberings made on either form agree (the recomputed
    views and constants at a callee's start are walked too; they are no accesses or checks)."""
    for op in function.walk():
        yield op
        if callees and isinstance(op, CallOp) and op.attributes["callee"] in callees:
            for inner in callees[op.attributes["callee"]].body.ops:
                yield from walk_inlined(inner, callees)
