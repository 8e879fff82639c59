"""The ``affine`` dialect: loop nests and memory accesses with affine indices.

    %sum = affine.for %i = 0 to 13 iter_args(%acc = %zero) -> (f32) {
      %v = affine.load %A[%i * 2 + 1] : memref<27xf32>
      %next = arith.addf %acc, %v : f32
      affine.yield %next : f32
    }
    affine.store %sum, %B[] : memref<f32>

Loop bounds are constants for now; index expressions are AffineExprs over
the access's index operands (loop induction variables).
"""
from __future__ import annotations

from .affine_expr import AffineMap, Dim
from .ir import Block, Operation, Region
from .types import MemRefType, index


class ForOp(Operation):
    name = "affine.for"
    operand_names = ("inits*",)
    attribute_names = ("lower", "upper", "step")
    num_regions = 1

    @classmethod
    def create(cls, lower: int, upper: int, step: int = 1, inits=(), iv_name="i", loc=None) -> "ForOp":
        body = Block([index] + [v.type for v in inits], [iv_name] + [f"acc{k}" for k in range(len(inits))])
        return cls(list(inits), {"lower": lower, "upper": upper, "step": step},
                   [v.type for v in inits], [Region([body])], loc=loc)

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def induction_variable(self):
        return self.body.args[0]

    @property
    def trip_count(self) -> int:
        return len(range(self.lower, self.upper, self.step))

    def verify(self):
        super().verify()
        if not all(isinstance(self.attributes[k], int) for k in ("lower", "upper", "step")) or self.step < 1:
            raise self.error("affine.for needs integer bounds and a positive step")
        block = self.body
        carried = [v.type for v in self.operands]
        if [a.type for a in block.args] != [index] + carried or [r.type for r in self.results] != carried:
            raise self.error("affine.for: iter_args, block arguments and results must match")
        if not block.ops or not isinstance(block.ops[-1], YieldOp):
            raise self.error("affine.for body must end with affine.yield")
        if [v.type for v in block.ops[-1].operands] != carried:
            raise self.error("affine.yield must give one value per iter_arg, of its type")

    def print_custom(self, printer):
        iv = printer.define(self.induction_variable)
        printer.write(f"affine.for {iv} = {self.lower} to {self.upper}")
        if self.step != 1:
            printer.write(f" step {self.step}")
        if self.operands:
            pairs = ", ".join(f"{printer.define(a)} = {printer.name_of(v)}"
                              for a, v in zip(self.body.args[1:], self.operands))
            printer.write(f" iter_args({pairs}) -> ({', '.join(str(v.type) for v in self.operands)})")
        printer.write(" ")
        print_body(printer, self.body)

    @classmethod
    def parse_custom(cls, parser, num_results):
        iv, _ = parser.parse_argument_name(), None
        parser.expect("=")
        lower = parser.parse_int()
        parser.expect("to")
        upper = parser.parse_int()
        step = parser.parse_int() if parser.accept("step") else 1
        args, inits, types = [(iv, index)], [], []
        if parser.accept("iter_args("):
            def pair():
                name = parser.parse_argument_name()
                parser.expect("=")
                inits.append(parser.parse_value())
                return name
            names = parser.comma_list(pair, ")")
            parser.expect("->")
            types = parser.parse_type_list()
            args += list(zip(names, types))
        region = parser.parse_region(entry_args=args)
        body = region.block
        if not body.ops or not isinstance(body.ops[-1], YieldOp):
            body.append(YieldOp([], {}))
        return cls(inits, {"lower": lower, "upper": upper, "step": step}, types, [region])


def print_body(printer, block: Block) -> None:
    """A region's block, leaving out an empty terminator as MLIR does."""
    printer.write("{")
    printer.newline()
    printer.indent += 1
    for op in block.ops:
        if isinstance(op, YieldOp) and not op.operands:
            continue
        printer.print_op(op)
    printer.indent -= 1
    printer.write("}")


class YieldOp(Operation):
    name = "affine.yield"
    operand_names = ("values*",)

    def infer_result_types(self):
        return []

    def print_custom(self, printer):
        printer.write("affine.yield")
        if self.operands:
            printer.write(f" {printer.operands(self.operands)} : " + ", ".join(str(v.type) for v in self.operands))

    @classmethod
    def parse_custom(cls, parser, num_results):
        operands = parser.parse_operands()
        if operands:
            parser.expect(":")
            parser.comma_list_until(parser.parse_type, len(operands))
        return cls(operands, {})


class _Access(Operation):
    """Shared by load and store: a memref operand indexed by an affine map of index operands."""
    operand_names = ("operands*",)  # [value,] memref, indices...
    attribute_names = ("map",)
    memref_position = 0

    @property
    def memref(self):
        return self.operands[self.memref_position]

    @property
    def indices(self):
        return self.operands[self.memref_position + 1:]

    def check_access(self):
        t, m = self.memref.type, self.attributes.get("map")
        if not isinstance(t, MemRefType):
            raise self.error(f"{self.name} needs a memref, got {t}")
        if not isinstance(m, AffineMap) or len(m.results) != t.rank or m.num_dims != len(self.indices):
            raise self.error(f"{self.name}: the index map does not fit {t} and {len(self.indices)} indices")
        if any(v.type != index for v in self.indices):
            raise self.error(f"{self.name} indices must be of type index")
        return t

    def subscript(self, printer) -> str:
        names = [printer.name_of(v) for v in self.indices]
        return f"{printer.name_of(self.memref)}[{', '.join(r.render(names) for r in self.map.results)}]"


def parse_subscript(parser):
    """``%A[%i * 2, 3]`` -> (memref, index operands, map)."""
    memref = parser.parse_value()
    parser.expect("[")
    operands = []

    def atom():
        if not parser.peek("%"):
            return None
        value = parser.parse_value()
        if value not in operands:
            operands.append(value)
        return Dim(operands.index(value))

    results = parser.comma_list(lambda: parser.parse_affine_expr(atom), "]")
    return memref, operands, AffineMap(len(operands), tuple(results))


class LoadOp(_Access):
    name = "affine.load"

    def infer_result_types(self):
        return [self.check_access().element]

    def print_custom(self, printer):
        printer.write(f"affine.load {self.subscript(printer)} : {self.memref.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        memref, operands, amap = parse_subscript(parser)
        parser.expect(":")
        parser.parse_type()
        return cls([memref, *operands], {"map": amap})


class StoreOp(_Access):
    name = "affine.store"
    memref_position = 1

    def infer_result_types(self):
        t = self.check_access()
        if self.operands[0].type != t.element:
            raise self.error(f"affine.store of {self.operands[0].type} into {t}")
        return []

    def print_custom(self, printer):
        printer.write(f"affine.store {printer.name_of(self.operands[0])}, {self.subscript(printer)} : "
                      f"{self.memref.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        value = parser.parse_value()
        parser.expect(",")
        memref, operands, amap = parse_subscript(parser)
        parser.expect(":")
        parser.parse_type()
        return cls([value, memref, *operands], {"map": amap})
