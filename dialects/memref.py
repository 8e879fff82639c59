"""The ``memref`` dialect: buffers, as in upstream MLIR.

memref.global "private" constant @cst_0 : memref<3xf32> = dense<[1.0, 2.0, 3.0]>
%0 = memref.get_global @cst_0 : memref<3xf32>
%1 = memref.alloc() {alignment = 64 : i64, kiln.buffer = "buf0"} : memref<4x8xf32>
%2 = memref.load %1[%r, %c] : memref<4x8xf32>
memref.store %2, %1[%c, %r] : memref<4x8xf32>
memref.dealloc %1 : memref<4x8xf32>

A buffer's name, which schedule steps (``cache_read``) and tuning records use, is an
attribute, not its SSA name (MLIR treats those as cosmetic; mlir-opt renumbers them):
``kiln.buffer`` on the op that makes it, and for a function's arguments the function's
``kiln.buffers`` list, one name per argument.
"""

from __future__ import annotations

from .affine import MemoryAccess, ScalarLoad, ScalarStore, VectorLoad
from .affine_expr import AffineMap, Dim
from .elided import is_elements
from .ir import Operation, declare_note
from .printer import format_attr_dict, format_attribute, format_dense, format_symbol
from .traits import ALLOCATION, MEMORY_READ, MEMORY_WRITE
from .types import MemRefType, index, scalar_type_of

ALIGNMENT = 64  # bytes; a cache line, and enough for any vector width
BUFFER = declare_note("kiln.buffer")
ARGUMENT_BUFFERS = declare_note("kiln.buffers")
IN_PLACE_OF = "kiln.in_place_of"  # on a view that overwrites another in place: that one's name


def buffer_name(value) -> str | None:
    """The name of the buffer `value` is (its op's ``kiln.buffer``, or for a function argument
    the function's ``kiln.buffers`` entry), or None if it has none."""
    op = getattr(value, "op", None)
    if op is not None:
        return op.attributes.get(BUFFER)
    region = value.block.parent
    names = region.parent.attributes.get(ARGUMENT_BUFFERS, ()) if region and region.parent else ()
    return names[value.index] if value.index < len(names) else None


def set_buffer_name(value, name: str) -> None:
    """Name the buffer `value` (an op result, or an argument of a function); its SSA name
    follows, for readers of the dump."""
    value.name_hint = name
    op = getattr(value, "op", None)
    if op is not None:
        op.attributes[BUFFER] = name
        return
    function = value.block.parent.parent
    names = list(function.attributes.get(ARGUMENT_BUFFERS, ()))
    names += [""] * (len(value.block.args) - len(names))
    names[value.index] = name
    function.attributes[ARGUMENT_BUFFERS] = tuple(names)


class _Allocation(Operation):
    """``memref.alloc`` and ``memref.alloca``: a new buffer of the result's type."""

    traits = frozenset({ALLOCATION})

    def verify(self):
        super().verify()
        if not isinstance(self.result.type, MemRefType):
            raise self.error(f"{self.name} makes a memref")
        if self.result.type.memory_space and self.name != "memref.alloca":
            # shared memory is declared by the kernel for each block, not allocated by the host
            raise self.error(f"a buffer in {self.result.type.memory_space} memory is made by memref.alloca")

    def print_custom(self, printer):
        extra = "".join(f", {k} = {format_attribute(v)}" for k, v in self.attributes.items())
        printer.write(f"{self.name}() {{alignment = {ALIGNMENT} : i64{extra}}} : {self.result.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        parser.expect("(")
        parser.expect(")")
        attributes = parser.parse_attr_dict()
        attributes.pop("alignment", None)  # always ALIGNMENT
        parser.expect(":")
        return cls([], attributes, [parser.parse_type()])


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
            or not is_elements(value)
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
        if parser.peek("dense_resource<"):  # printed elided
            value = parser.parse_elided_body(t)
        else:
            parser.expect("dense<")
            value = parser.parse_dense_body(t)
        return cls([], {"sym_name": name, "type": t, "initial_value": value})


class GetGlobalOp(Operation):
    name = "memref.get_global"
    attribute_names = ("name",)

    def print_custom(self, printer):
        printer.write(f"memref.get_global {format_symbol(self.attributes['name'])} : {self.result.type}")
        printer.write(format_attr_dict(self.attributes, skip=("name",)))

    @classmethod
    def parse_custom(cls, parser, num_results):
        name = parser.parse_symbol()
        parser.expect(":")
        result_type = parser.parse_type()
        return cls([], {**parser.parse_attr_dict(), "name": name}, [result_type])


class _IndexedAccess(MemoryAccess):
    """``memref.load`` and ``memref.store``: one element at `index`-typed operands, any
    values (an index read from memory: a gather's or a scatter's), where affine.load takes
    only affine expressions of loop variables. ``map`` is the identity, so that code
    generators and the interpreter address them as they do affine accesses."""

    @property
    def map(self) -> AffineMap:
        return AffineMap(len(self.indices), tuple(Dim(k) for k in range(len(self.indices))))

    def check_access(self) -> MemRefType:
        t = self.memref.type
        if not isinstance(t, MemRefType):
            raise self.error(f"{self.name} needs a memref, got {t}")
        if len(self.indices) != t.rank:
            raise self.error(f"{self.name} of {t} takes {t.rank} indices, got {len(self.indices)}")
        if any(v.type != index for v in self.indices):
            raise self.error(f"{self.name} indices must be of type index")
        return t

    def subscript(self, printer) -> str:
        return f"{printer.name_of(self.memref)}[{', '.join(printer.name_of(v) for v in self.indices)}]"

    @staticmethod
    def parse_access(parser):
        memref = parser.parse_value()
        parser.expect("[")
        return memref, parser.comma_list(parser.parse_value, "]"), {}


class LoadOp(ScalarLoad, _IndexedAccess):
    name = "memref.load"
    traits = frozenset({MEMORY_READ})


class StoreOp(ScalarStore, _IndexedAccess):
    name = "memref.store"
    traits = frozenset({MEMORY_WRITE})


class VectorLoadOp(VectorLoad, _IndexedAccess):
    """``vector.load %t[%row, %j] : memref<5000x64xf32>, vector<16xf32>``: consecutive
    elements along the last dimension from `index`-typed operands of any value (MLIR's
    vector.load), where affine.vector_load takes only affine expressions. A gather's row
    read through its index is one, vectorized along the row."""

    name = "vector.load"
    traits = frozenset({MEMORY_READ})


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
            f"memref.view {printer.name_of(self.source)}[{printer.name_of(self.byte_shift)}][]"
            f"{format_attr_dict(self.attributes)} : {self.source.type} to {self.result.type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        source = parser.parse_value()
        parser.expect("[")
        shift = parser.parse_value()
        parser.expect("]")
        parser.expect("[")
        parser.expect("]")
        attributes = parser.parse_attr_dict()
        parser.expect(":")
        parser.parse_type()
        parser.expect("to")
        return cls([source, shift], attributes, [parser.parse_type()])
