"""The ``memref`` dialect: buffers, as in upstream MLIR.

memref.global "private" constant @cst_0 : memref<3xf32> = dense<[1.0, 2.0, 3.0]>
%0 = memref.get_global @cst_0 : memref<3xf32>
%1 = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
memref.dealloc %1 : memref<4x8xf32>
"""

from __future__ import annotations

import numpy as np

from .ir import Operation
from .printer import format_dense, format_symbol
from .types import MemRefType, scalar_type_of

ALIGNMENT = 64  # bytes; a cache line, and enough for any vector width


class _Allocation(Operation):
    """``memref.alloc`` and ``memref.alloca``: a new buffer of the result's type."""

    def verify(self):
        super().verify()
        if not isinstance(self.result.type, MemRefType):
            raise self.error(f"{self.name} makes a memref")

    def print_custom(self, printer):
        printer.write(f"{self.name}() {{alignment = {ALIGNMENT} : i64}} : {self.result.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        parser.expect("(")
        parser.expect(")")
        parser.parse_attr_dict()
        parser.expect(":")
        return cls([], {}, [parser.parse_type()])


class AllocOp(_Allocation):
    """A buffer on the heap, freed by memref.dealloc."""

    name = "memref.alloc"


class AllocaOp(_Allocation):
    """A small buffer on the stack of the running function (or thread): a packed tile."""

    name = "memref.alloca"


class DeallocOp(Operation):
    name = "memref.dealloc"
    operand_names = ("memref",)

    def infer_result_types(self):
        return []

    def print_custom(self, printer):
        printer.write(f"memref.dealloc {printer.name_of(self.memref)} : {self.memref.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        operand = parser.parse_value()
        parser.expect(":")
        parser.parse_type()
        return cls([operand], {})


class GlobalOp(Operation):
    """A constant buffer at module level (captured arrays, literals)."""

    name = "memref.global"
    attribute_names = ("sym_name", "type", "initial_value")

    def infer_result_types(self):
        return []

    def verify(self):
        super().verify()
        value, t = self.initial_value, self.type
        if (
            not isinstance(t, MemRefType)
            or not isinstance(value, np.ndarray)
            or value.shape != t.shape
            or scalar_type_of(value.dtype) != t.element
        ):
            raise self.error(f"memref.global @{self.sym_name}: its value does not match {t}")

    def print_custom(self, printer):
        dense = format_dense(self.initial_value).rsplit(" : ", 1)[0]  # the memref type says the rest
        printer.write(f'memref.global "private" constant {format_symbol(self.sym_name)} : {self.type} = {dense}')

    @classmethod
    def parse_custom(cls, parser, num_results):
        parser.accept('"private"')
        parser.expect("constant")
        name = parser.parse_symbol()
        parser.expect(":")
        t = parser.parse_type()
        parser.expect("=")
        parser.expect("dense<")
        value = parser.parse_dense_body(t)
        return cls([], {"sym_name": name, "type": t, "initial_value": value})


class GetGlobalOp(Operation):
    name = "memref.get_global"
    attribute_names = ("name",)

    def print_custom(self, printer):
        printer.write(f"memref.get_global {format_symbol(self.attributes['name'])} : {self.result.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        name = parser.parse_symbol()
        parser.expect(":")
        return cls([], {"name": name}, [parser.parse_type()])


class ViewOp(Operation):
    """A typed buffer at a byte offset of an ``i8`` arena (memory planning's placements)."""

    name = "memref.view"
    operand_names = ("source", "byte_shift")

    def verify(self):
        super().verify()
        source, t = self.source.type, self.result.type
        if not isinstance(source, MemRefType) or source.element.name != "i8" or source.rank != 1:
            raise self.error(f"memref.view takes a 1-d i8 memref, got {source}")
        if not isinstance(t, MemRefType):
            raise self.error("memref.view makes a memref")

    def print_custom(self, printer):
        printer.write(
            f"memref.view {printer.name_of(self.source)}[{printer.name_of(self.byte_shift)}][] : "
            f"{self.source.type} to {self.result.type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        source = parser.parse_value()
        parser.expect("[")
        shift = parser.parse_value()
        parser.expect("]")
        parser.expect("[")
        parser.expect("]")
        parser.expect(":")
        parser.parse_type()
        parser.expect("to")
        return cls([source, shift], {}, [parser.parse_type()])
