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

from .affine_expr import AffineMap, Const, Dim, substitute
from .ir import Block, Operation, Region, declare_note
from .printer import format_attr_dict
from .traits import AFFINE_MAPPED, AFFINE_READ, AFFINE_WRITE, LOOP_LIKE, TERMINATOR
from .types import MemRefType, VectorType, index

# A loop's name, which schedules, tuning records and tools use ("k0.i", "k0.i.o", ...). It is an
# attribute because MLIR treats SSA names as cosmetic: mlir-opt renumbers them, the attribute stays.
LOOP = declare_note("kiln.loop")
BIND = "kiln.bind"  # a GPU schedule's hardware index for a loop: "blockIdx.x", "threadIdx.y", ...
GPU_AXES = tuple(f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx") for axis in "xyz")


def loop_name(loop) -> str:
    """The name of an ``affine.for`` or ``affine.parallel`` (its ``kiln.loop`` attribute)."""
    return loop.attributes.get(LOOP, "?")


def set_loop_name(loop, name: str) -> None:
    """Rename a loop; its induction variable's SSA name follows, for readers of the dump."""
    loop.attributes[LOOP] = name
    loop.induction_variable.name_hint = name


def constant_limit(loop):
    """A loop's constant bound, or the constant in its ``min`` bound (a split's partial last
    tile: ``min(16, N - 16 * i)`` has 16); None if it has none. On the GPU, the threads a
    block has for a thread loop whose threads cooperate: where the bound is below the limit,
    the extra threads only help to copy and wait at the barriers."""
    if loop.constant_bounds:
        return loop.upper
    constants = [e.value for e in loop.upper_map.results if isinstance(e, Const)]
    return min(constants) if constants else None


def kernel_of(loop) -> str:
    """The kernel a loop belongs to: ``k2`` for ``k2.i.o``."""
    return loop_name(loop).split(".")[0]


class ForOp(Operation):
    """``affine.for`` from a constant lower bound, with step, to a constant upper bound or to
    the minimum of affine expressions of enclosing loops' variables (how split loops end
    their last, partial tile)::

        affine.for %ii = 0 to min affine_map<(d0) -> (32, d0 * -32 + 100)>(%io) { ... }

    Operands: the upper bound's operands (``bound_count`` of them), then the iter_args inits.
    Discardable attributes (``kiln.loop``, ``kiln.bind``) print after the body, as MLIR's
    ``affine.for`` takes them: ``affine.for %i = 0 to 4 { ... } {kiln.loop = "k0.i"}``.
    """

    name = "affine.for"
    traits = frozenset({LOOP_LIKE})
    operand_names = ("operands*",)
    attribute_names = ("lower", "upper", "step")
    num_regions = 1

    @classmethod
    def create(cls, lower: int, upper, step: int = 1, inits=(), iv_name="i", bound_operands=(), loc=None):
        """`upper` is an int, or a tuple of AffineExprs over `bound_operands` (their minimum);
        `iv_name` names the loop (``kiln.loop``) and its induction variable."""
        body = Block([index] + [v.type for v in inits], [iv_name] + [f"acc{k}" for k in range(len(inits))])
        attributes = {**_bounds(lower, upper, step, len(bound_operands)), LOOP: iv_name}
        return cls(list(bound_operands) + list(inits), attributes, [v.type for v in inits], [Region([body])], loc=loc)

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def induction_variable(self):
        return self.body.args[0]

    @property
    def bound_operands(self) -> list:
        return self.operands[: self.attributes.get("bound_count", 0)]

    @property
    def inits(self) -> list:
        return self.operands[self.attributes.get("bound_count", 0) :]

    @property
    def upper_map(self):
        return self.attributes.get("upper_map")

    @property
    def constant_bounds(self) -> bool:
        return self.upper_map is None

    @property
    def trip_count(self) -> int:
        """Iterations, for constant bounds; for a min bound, the most it can have."""
        if self.constant_bounds:
            return len(range(self.lower, self.upper, self.step))
        constants = [e.value for e in self.upper_map.results if isinstance(e, Const)]
        return len(range(self.lower, min(constants), self.step)) if constants else -1

    def verify(self):
        super().verify()
        if not all(isinstance(self.attributes[k], int) for k in ("lower", "upper", "step")) or self.step < 1:
            raise self.error("affine.for needs integer bounds and a positive step")
        if self.upper_map is not None and self.upper_map.num_dims != len(self.bound_operands):
            raise self.error("affine.for: the upper bound map does not fit its operands")
        if any(v.type != index for v in self.bound_operands):
            raise self.error("affine.for bound operands must be of type index")
        block = self.body
        carried = [v.type for v in self.inits]
        if [a.type for a in block.args] != [index] + carried or [r.type for r in self.results] != carried:
            raise self.error("affine.for: iter_args, block arguments and results must match")
        if not block.ops or not isinstance(block.ops[-1], YieldOp):
            raise self.error("affine.for body must end with affine.yield")
        if [v.type for v in block.ops[-1].operands] != carried:
            raise self.error("affine.yield must give one value per iter_arg, of its type")

    def print_custom(self, printer):
        iv = printer.define(self.induction_variable)
        printer.write(f"affine.for {iv} = {self.lower} to ")
        if self.constant_bounds:
            printer.write(str(self.upper))
        else:
            printer.write(f"min {self.upper_map}({printer.operands(self.bound_operands)})")
        if self.step != 1:
            printer.write(f" step {self.step}")
        if self.inits:
            pairs = ", ".join(
                f"{printer.define(a)} = {printer.name_of(v)}" for a, v in zip(self.body.args[1:], self.inits)
            )
            printer.write(f" iter_args({pairs}) -> ({', '.join(str(v.type) for v in self.inits)})")
        printer.write(" ")
        print_body(printer, self.body)
        printer.write(format_attr_dict(self.attributes, skip=FOR_ATTRIBUTES))

    @classmethod
    def parse_custom(cls, parser, num_results):
        iv = parser.parse_argument_name()
        parser.expect("=")
        lower = parser.parse_int()
        parser.expect("to")
        bound_operands, upper = [], None
        if parser.accept("min"):
            upper_map = parser.parse_affine_map()
            parser.expect("(")
            bound_operands = parser.parse_operands()
            parser.expect(")")
            upper = upper_map.results
        else:
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
        # The loop's name comes from its attributes only: an SSA name is no name.
        attributes = {**_bounds(lower, upper, step, len(bound_operands)), **parser.parse_attr_dict()}
        return cls(list(bound_operands) + inits, attributes, types, [region])


class ParallelOp(Operation):
    """``affine.parallel``: iterations that may run at once, on several threads::

    affine.parallel (%i) = (0) to (64) { ... }
    """

    name = "affine.parallel"
    traits = frozenset({LOOP_LIKE})
    attribute_names = ("upper",)
    num_regions = 1

    @classmethod
    def create(cls, upper: int, iv_name="i", loc=None) -> "ParallelOp":
        """`iv_name` names the loop (``kiln.loop``) and its induction variable."""
        return cls([], {"upper": upper, LOOP: iv_name}, [], [Region([Block([index], [iv_name])])], loc=loc)

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def induction_variable(self):
        return self.body.args[0]

    def verify(self):
        super().verify()
        if [a.type for a in self.body.args] != [index] or not isinstance(self.upper, int):
            raise self.error("affine.parallel here runs one index from 0 to a constant")
        if not self.body.ops or not isinstance(self.body.ops[-1], YieldOp) or self.body.ops[-1].operands:
            raise self.error("affine.parallel body must end with an empty affine.yield")

    def print_custom(self, printer):
        iv = printer.define(self.induction_variable)
        printer.write(f"affine.parallel ({iv}) = (0) to ({self.upper}) ")
        print_body(printer, self.body)
        printer.write(format_attr_dict(self.attributes, skip=("upper",)))

    @classmethod
    def parse_custom(cls, parser, num_results):
        parser.expect("(")
        iv = parser.parse_argument_name()
        parser.expect(")")
        parser.expect("=")
        parser.expect("(")
        parser.expect("0")
        parser.expect(")")
        parser.expect("to")
        parser.expect("(")
        upper = parser.parse_int()
        parser.expect(")")
        region = parser.parse_region(entry_args=[(iv, index)])
        if not region.block.ops or not isinstance(region.block.ops[-1], YieldOp):
            region.block.append(YieldOp([], {}))
        return cls([], {"upper": upper, **parser.parse_attr_dict()}, [], [region])


FOR_ATTRIBUTES = ("lower", "upper", "step", "upper_map", "bound_count")  # the custom syntax says these


def _bounds(lower: int, upper, step: int, bound_count: int) -> dict:
    """An affine.for's bound attributes; `upper` is an int or a tuple of AffineExprs (their minimum)."""
    if isinstance(upper, int):
        return {"lower": lower, "upper": upper, "step": step}
    return {
        "lower": lower,
        "upper": -1,
        "step": step,
        "upper_map": AffineMap(bound_count, tuple(upper)),
        "bound_count": bound_count,
    }


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
    traits = frozenset({TERMINATOR})
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


class MemoryAccess(Operation):
    """An access to one memref: [the value stored,] the memref, its index operands."""

    operand_names = ("operands*",)  # [value,] memref, indices...
    memref_position = 0

    @property
    def memref(self):
        return self.operands[self.memref_position]

    @property
    def indices(self):
        return self.operands[self.memref_position + 1 :]


class _Access(MemoryAccess):
    """Shared by load and store: a memref operand indexed by an affine map of index operands."""

    attribute_names = ("map",)

    @staticmethod
    def parse_access(parser):
        memref, operands, amap = parse_subscript(parser)
        return memref, operands, {"map": amap}

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
        # The parser numbers the indices in the order the text first names them, and sums
        # print their terms in index order; printed with that numbering, the text parses
        # back to the map it shows (%a[%j, %i * 18 + %j * 6] would come back as %j * 6 + %i * 18).
        order = []
        stack = list(reversed(self.map.results))
        while stack:
            expr = stack.pop()
            if isinstance(expr, Dim) and expr.index not in order:
                order.append(expr.index)
            stack.extend(reversed(expr.children()))
        renumbered = [Dim(order.index(i)) if i in order else Dim(i) for i in range(self.map.num_dims)]
        names = [printer.name_of(self.indices[i]) for i in order]
        results = (substitute(r, renumbered).render(names) for r in self.map.results)
        return f"{printer.name_of(self.memref)}[{', '.join(results)}]"


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


class ApplyOp(Operation):
    """``%a = affine.apply affine_map<(d0, d1) -> (d0 * 64 + d1)>(%i, %j)``: one index
    computed from loop induction variables, for an access that is not affine as a whole
    (``memref.load`` through an index read from memory). Its operands and map are rewritten
    by the schedules like an access's (``memref_position`` -1: no memref before them)."""

    name = "affine.apply"
    traits = frozenset({AFFINE_MAPPED})
    operand_names = ("operands*",)
    attribute_names = ("map",)
    memref_position = -1

    @property
    def indices(self):
        return self.operands

    def infer_result_types(self):
        m = self.attributes.get("map")
        if not isinstance(m, AffineMap) or len(m.results) != 1 or m.num_dims != len(self.operands):
            raise self.error(f"affine.apply: the map must have one result and one dim per operand, got {m}")
        if any(v.type != index for v in self.operands):
            raise self.error("affine.apply operands must be of type index")
        return [index]

    def print_custom(self, printer):
        names = ", ".join(printer.name_of(v) for v in self.operands)
        printer.write(f"affine.apply {self.map}({names})")

    @classmethod
    def parse_custom(cls, parser, num_results):
        amap = parser.parse_affine_map()
        parser.expect("(")
        operands = parser.comma_list(parser.parse_value, ")")
        return cls(operands, {"map": amap})


class ScalarLoad:
    """What affine.load and memref.load share: one element of the memref at the subscript
    (``parse_access`` reads it: the memref, its index operands, the op's attributes)."""

    def infer_result_types(self):
        return [self.check_access().element]

    def print_custom(self, printer):
        printer.write(f"{self.name} {self.subscript(printer)} : {self.memref.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        memref, operands, attributes = cls.parse_access(parser)
        parser.expect(":")
        parser.parse_type()
        return cls([memref, *operands], attributes)


class ScalarStore:
    """What affine.store and memref.store share: operand 0 written at the subscript."""

    memref_position = 1

    def infer_result_types(self):
        t = self.check_access()
        if self.operands[0].type != t.element:
            raise self.error(f"{self.name} of {self.operands[0].type} into {t}")
        return []

    def print_custom(self, printer):
        printer.write(
            f"{self.name} {printer.name_of(self.operands[0])}, {self.subscript(printer)} : {self.memref.type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        value = parser.parse_value()
        parser.expect(",")
        memref, operands, attributes = cls.parse_access(parser)
        parser.expect(":")
        parser.parse_type()
        return cls([value, memref, *operands], attributes)


class LoadOp(ScalarLoad, _Access):
    name = "affine.load"
    traits = frozenset({AFFINE_READ})


class StoreOp(ScalarStore, _Access):
    name = "affine.store"
    traits = frozenset({AFFINE_WRITE})


class VectorLoad:
    """What affine.vector_load and vector.load share: `lanes` consecutive elements along the
    last dimension from the subscript, ``%v = <name> %A[...] : memref<...>, vector<16xf32>``."""

    def verify(self):
        super().verify()
        t = self.check_access()
        if not isinstance(self.result.type, VectorType) or self.result.type.element != t.element:
            raise self.error(f"{self.name} of {t} must give a vector of {t.element}")

    def print_custom(self, printer):
        printer.write(f"{self.name} {self.subscript(printer)} : {self.memref.type}, {self.result.type}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        memref, operands, attributes = cls.parse_access(parser)
        parser.expect(":")
        parser.parse_type()
        parser.expect(",")
        return cls([memref, *operands], attributes, [parser.parse_type()])


class VectorLoadOp(VectorLoad, _Access):
    """``affine.vector_load %A[%i, %j] : memref<8x64xf32>, vector<16xf32>``: consecutive
    elements along the last dimension, starting at the index."""

    name = "affine.vector_load"
    traits = frozenset({AFFINE_READ})


class VectorStoreOp(_Access):
    name = "affine.vector_store"
    traits = frozenset({AFFINE_WRITE})
    memref_position = 1

    def infer_result_types(self):
        t = self.check_access()
        v = self.operands[0].type
        if not isinstance(v, VectorType) or v.element != t.element:
            raise self.error(f"affine.vector_store of {v} into {t}")
        return []

    def print_custom(self, printer):
        printer.write(
            f"affine.vector_store {printer.name_of(self.operands[0])}, {self.subscript(printer)} : "
            f"{self.memref.type}, {self.operands[0].type}"
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        value = parser.parse_value()
        parser.expect(",")
        memref, operands, amap = parse_subscript(parser)
        parser.expect(":")
        parser.parse_type()
        parser.expect(",")
        parser.parse_type()
        return cls([value, memref, *operands], {"map": amap})


def partials_escape(loop, update) -> bool:
    """Whether `update`, the op that computes one of `loop`'s carried values, has a result read
    by anything but the loop's yield: a scan (kiln.scan) stores every partial value, so its
    steps can neither be reordered nor split into lanes or threads, as a reduction's can."""
    terminator = loop.body.ops[-1]
    return any(user is not terminator for result in update.results for user, _ in result.uses)
