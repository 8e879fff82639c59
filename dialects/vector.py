"""The ``vector`` dialect: what loop vectorization needs beyond arith on vectors.

%b = vector.broadcast %s : f32 to vector<16xf32>
%r = vector.reduction <add>, %v : vector<16xf32> into f32
"""

from __future__ import annotations

import re

from .ir import Operation
from .types import VectorType

_KIND = re.compile(r"[a-z]+")
KINDS = ("add", "mul", "maximumf", "minimumf", "maxsi", "minsi", "maxui", "minui", "and", "or")


class BroadcastOp(Operation):
    name = "vector.broadcast"
    operand_names = ("source",)

    def verify(self):
        super().verify()
        t = self.result.type
        if not isinstance(t, VectorType) or t.element != self.source.type:
            raise self.error(f"vector.broadcast of {self.source.type} to {t}")

    def print_custom(self, printer):
        printer.write(f"vector.broadcast {printer.name_of(self.source)} : {self.source.type} to {self.result.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        source = parser.parse_value()
        parser.expect(":")
        parser.parse_type()
        parser.expect("to")
        return cls([source], {}, [parser.parse_type()])


class ReductionOp(Operation):
    """All lanes combined into one scalar by `kind`."""

    name = "vector.reduction"
    operand_names = ("vector",)
    attribute_names = ("kind",)

    def infer_result_types(self):
        t = self.vector.type
        if not isinstance(t, VectorType) or self.attributes.get("kind") not in KINDS:
            raise self.error(f"vector.reduction takes a vector and one of {', '.join(KINDS)}")
        return [t.element]

    def print_custom(self, printer):
        printer.write(
            f"vector.reduction <{self.kind}>, {printer.name_of(self.vector)} : {self.vector.type} "
            f"into {self.result.type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        parser.expect("<")
        kind = parser.match(_KIND).group(0)
        parser.expect(">")
        parser.expect(",")
        vector = parser.parse_value()
        parser.expect(":")
        parser.parse_type()
        parser.expect("into")
        parser.parse_type()
        return cls([vector], {"kind": kind})


class ExtractOp(Operation):
    """One lane of a vector: ``vector.extract %v[3] : f32 from vector<16xf32>``."""

    name = "vector.extract"
    operand_names = ("vector",)
    attribute_names = ("position",)

    def infer_result_types(self):
        t = self.vector.type
        position = self.attributes.get("position")
        if not isinstance(t, VectorType) or not isinstance(position, int) or not 0 <= position < t.lanes:
            raise self.error("vector.extract takes a vector and a lane within it")
        return [t.element]

    def print_custom(self, printer):
        printer.write(
            f"vector.extract {printer.name_of(self.vector)}[{self.position}] : {self.result.type} "
            f"from {self.vector.type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        vector = parser.parse_value()
        parser.expect("[")
        position = parser.parse_int()
        parser.expect("]")
        parser.expect(":")
        parser.parse_type()
        parser.expect("from")
        parser.parse_type()
        return cls([vector], {"position": position})
