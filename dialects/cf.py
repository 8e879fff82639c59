"""The ``cf`` dialect's ``cf.assert``, as in upstream MLIR: a run-time check.

    cf.assert %inside, "index is out of bounds for axis 0 with size 5"

When the ``i1`` condition is false the compiled function goes on (its results are then
unspecified) and returns a status that names this assert; the caller raises its message
at its location. ``kiln.check_index`` lowers to one.
"""

from __future__ import annotations

from .ir import Operation
from .printer import format_attribute
from .types import i1


class AssertOp(Operation):
    name = "cf.assert"
    operand_names = ("condition",)
    attribute_names = ("msg",)

    def infer_result_types(self):
        if self.condition.type != i1:
            raise self.error(f"cf.assert takes an i1 condition, got {self.condition.type}")
        if not isinstance(self.attributes.get("msg"), str):
            raise self.error("cf.assert needs a string attribute 'msg'")
        return []

    def print_custom(self, printer):
        printer.write(f"cf.assert {printer.name_of(self.condition)}, {format_attribute(self.msg)}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        condition = parser.parse_value()
        parser.expect(",")
        return cls([condition], {"msg": parser.parse_string()})
