"""The ``vector`` dialect: what loop vectorization needs beyond arith on vectors.

%b = vector.broadcast %s : f32 to vector<16xf32>
%r = vector.reduction <add>, %v : vector<16xf32> into f32
%g = vector.gather %t[%c0] [%offsets], %mask, %pass : memref<51xf64>, vector<8xindex>, vector<8xi1>, vector<8xf64> into vector<8xf64>
"""

from __future__ import annotations

import re

from .ir import Operation
from .traits import MEMORY_READ
from .types import MemRefType, VectorType, i1, index

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


class GatherOp(Operation):
    """Lanes read from positions computed at run time (MLIR's ``vector.gather``)::

        %g = vector.gather %edges[%c0] [%offsets], %mask, %pass : memref<51xf64>, vector<8xindex>, vector<8xi1>, vector<8xf64> into vector<8xf64>

    Lane l is the element at row-major position linearize(indices) + offsets[l] of the
    memref where mask[l] is true, else pass_thru[l]. What vectorization makes of a
    ``memref.load`` through an index the loop computed (a histogram's edges[bin], the label's
    column of each row of a cross-entropy); LLVM makes it a masked gather, an AVX2 or
    AVX-512 gather instruction. Errors (VerificationError): a base that is not a memref, one
    index per dimension not given, offsets that are not a vector of index, a mask or pass_thru
    of other lanes or element type."""

    name = "vector.gather"
    operand_names = ("base", "offsets", "mask", "pass_thru", "indices*")
    traits = frozenset({MEMORY_READ})

    @property
    def memref(self):
        return self.base

    def infer_result_types(self):
        base, offsets, mask, pass_thru = (v.type for v in self.operands[:4])
        if not isinstance(base, MemRefType) or len(self.indices) != base.rank:
            raise self.error(f"vector.gather takes a memref and one index per dimension, got {base}")
        if any(v.type != index for v in self.indices):
            raise self.error("vector.gather indices must be of type index")
        if not isinstance(offsets, VectorType) or offsets.element != index:
            raise self.error(f"vector.gather offsets must be a vector of index, got {offsets}")
        lanes = offsets.lanes
        if mask != VectorType(lanes, i1) or pass_thru != VectorType(lanes, base.element):
            raise self.error(f"vector.gather of {lanes} lanes of {base.element}: mask {mask}, pass_thru {pass_thru}")
        return [pass_thru]

    def print_custom(self, printer):
        name = printer.name_of
        indices = ", ".join(name(v) for v in self.indices)
        types = ", ".join(str(v.type) for v in self.operands[:4])
        printer.write(
            f"vector.gather {name(self.base)}[{indices}] [{name(self.offsets)}], {name(self.mask)}, "
            f"{name(self.pass_thru)} : {types} into {self.result.type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        base = parser.parse_value()
        parser.expect("[")
        indices = parser.comma_list(parser.parse_value, "]")
        parser.expect("[")
        offsets = parser.parse_value()
        parser.expect("]")
        parser.expect(",")
        mask = parser.parse_value()
        parser.expect(",")
        pass_thru = parser.parse_value()
        parser.expect(":")
        parser.comma_list_until(parser.parse_type, 4)
        parser.expect("into")
        parser.parse_type()
        return cls([base, offsets, mask, pass_thru, *indices], {})
