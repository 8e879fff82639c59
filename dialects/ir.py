"""The IR core: values, operations, blocks and regions.

An operation has a dialect-qualified name, SSA operands, typed results,
attributes and regions. Each op class declares what it takes at the top::

    class MatmulOp(Operation):
        name = "kiln.matmul"
        operand_names = ("lhs", "rhs")       # op.lhs, op.rhs
        attribute_names = ()                  # op.<attr> for each

        def infer_result_types(self): ...    # numpy's rules, in one place
        def verify(self): ...                # what the declaration cannot say

An operand name ending in ``*`` is variadic (it takes all remaining operands).
Attributes are plain Python values (bool, int, float, str, tuples, types,
numpy arrays); the location is a note kept apart from them.

An op class declares its traits (``traits = frozenset({ELEMENTWISE})``, see
``traits.py``); ``op.has_trait(T)`` and ``cls.has_trait(T)`` ask for one, inherited
and implied traits included.

Some attributes are notes, not meaning: a loop's name, a buffer's name. They print in
the attribute dictionary like the others (as MLIR prints its discardable attributes),
but two ops that differ only in notes compute the same thing: common-subexpression
elimination and the kernels' structural hash compare ``semantic_attributes()``. A
dialect declares its note keys with ``declare_note``.
"""

from __future__ import annotations

from typing import ClassVar

from .diagnostics import VerificationError
from .types import Type

OP_REGISTRY: dict = {}
NOTE_KEYS: set = set()  # attribute keys that are notes (declare_note)


def declare_note(key: str) -> str:
    """Declare the attribute `key` a note: printed, kept by clone, left out of
    ``semantic_attributes()``. Returns `key`, so a dialect writes ``LOOP = declare_note("kiln.loop")``."""
    NOTE_KEYS.add(key)
    return key


class Value:
    """An SSA value: an op result or a block argument."""

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.name_hint = name_hint
        self.uses: list = []  # (operation, operand index) pairs

    def replace_all_uses_with(self, new: "Value") -> None:
        for op, index in list(self.uses):
            op.set_operand(index, new)


class OpResult(Value):
    def __init__(self, type: Type, op: "Operation", index: int):
        super().__init__(type)
        self.op = op
        self.index = index


class BlockArgument(Value):
    def __init__(self, type: Type, block: "Block", index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index


class Block:
    def __init__(self, arg_types=(), arg_names=None):
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        self.args = [BlockArgument(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def append(self, op: "Operation") -> "Operation":
        op.parent = self
        self.ops.append(op)
        return op

    def add_argument(self, type: Type, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(arg)
        return arg


class Region:
    def __init__(self, blocks=()):
        self.blocks: list[Block] = []
        for block in blocks:
            self.append(block)
        self.parent: Operation | None = None

    def append(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The only block of a single-block region."""
        if len(self.blocks) != 1:
            raise VerificationError(f"expected a region with one block, found {len(self.blocks)}")
        return self.blocks[0]


class Operation:
    name: ClassVar[str] = ""
    operand_names: ClassVar[tuple] = ()
    attribute_names: ClassVar[tuple] = ()
    num_regions: ClassVar[int] = 0
    # Ops whose regions cannot see values defined outside them (func.func, kiln.fused).
    isolated_from_above: ClassVar[bool] = False
    # Ops inside which printed SSA numbering starts again from %0 (functions, modules).
    restarts_numbering: ClassVar[bool] = False
    # What the class declares (traits.py); all_traits adds its bases' and the implied ones.
    traits: ClassVar[frozenset] = frozenset()
    all_traits: ClassVar[frozenset] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = set()
        for klass in cls.__mro__:
            for trait in vars(klass).get("traits", ()):
                declared |= trait.closure()
        cls.all_traits = frozenset(declared)
        if cls.__dict__.get("name"):
            if cls.name in OP_REGISTRY:
                raise ValueError(f"operation {cls.name} is defined twice")
            OP_REGISTRY[cls.name] = cls

    def __init__(self, operands=(), attributes=None, result_types=None, regions=(), loc=None):
        self.operands: list[Value] = []
        self.attributes: dict = dict(attributes or {})
        self.loc = loc
        self.parent: Block | None = None
        self.regions: list[Region] = []
        for region in regions:
            region.parent = self
            self.regions.append(region)
        for value in operands:
            self._add_operand(value)
        if result_types is None:
            self.verify_arity()
            result_types = self.infer_result_types()
            if result_types is None:
                raise VerificationError(f"{self.name} needs explicit result types", loc)
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]

    # -- declared operands and attributes ------------------------------------
    def __getattr__(self, key):
        # Only reached when normal lookup fails: resolve declared names.
        cls = type(self)
        if key in cls.attribute_names:
            try:
                return self.attributes[key]
            except KeyError:
                raise self.error(f"{self.name} is missing attribute '{key}'") from None
        names = cls.operand_names
        if key in names:
            return self.operands[names.index(key)]
        if key + "*" in names:
            return self.operands[names.index(key + "*") :]
        raise AttributeError(f"{cls.__name__} has no attribute {key!r}")

    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise VerificationError(f"{self.name} has {len(self.results)} results, not one", self.loc)
        return self.results[0]

    # -- use lists -----------------------------------------------------------
    def _add_operand(self, value: Value) -> None:
        if not isinstance(value, Value):
            raise VerificationError(f"{self.name}: operand {value!r} is not an IR value", self.loc)
        value.uses.append((self, len(self.operands)))
        self.operands.append(value)

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        old.uses.remove((self, index))
        value.uses.append((self, index))
        self.operands[index] = value

    def set_operands(self, values) -> None:
        """Replace the whole operand list (its length may change)."""
        for index, value in enumerate(self.operands):
            value.uses.remove((self, index))
        self.operands = []
        for value in values:
            self._add_operand(value)

    def erase(self) -> None:
        """Remove this op from its block; its results must have no uses left."""
        for result in self.results:
            if result.uses:
                raise VerificationError(f"cannot erase {self.name}: its result is still used", self.loc)
        for index, value in enumerate(self.operands):
            value.uses.remove((self, index))
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    # -- traits and notes ----------------------------------------------------
    @classmethod
    def has_trait(cls, trait) -> bool:
        """Whether this op (class) has `trait`: declared, inherited or implied."""
        return trait in cls.all_traits

    def semantic_attributes(self) -> dict:
        """The attributes that say what the op computes: every attribute but the notes."""
        return {k: v for k, v in self.attributes.items() if k not in NOTE_KEYS}

    # -- semantics (overridden per op) ---------------------------------------
    def infer_result_types(self):
        """Result types from operands and attributes, or None if not inferable."""
        return None

    def verify(self) -> None:
        """Check the op's invariants; raise self.error(...) when one fails."""
        self.verify_arity()
        inferred = self.infer_result_types()
        if inferred is not None and list(inferred) != [r.type for r in self.results]:
            got = ", ".join(str(r.type) for r in self.results)
            want = ", ".join(map(str, inferred))
            raise self.error(f"{self.name} result type is {got}, expected {want}")

    def verify_arity(self) -> None:
        names = type(self).operand_names
        variadic = any(n.endswith("*") for n in names)
        fixed = len(names) - variadic
        if (len(self.operands) < fixed) if variadic else (len(self.operands) != fixed):
            raise self.error(f"{self.name} takes {fixed}{'+' if variadic else ''} operands, got {len(self.operands)}")
        for key in type(self).attribute_names:
            if key not in self.attributes:
                raise self.error(f"{self.name} is missing attribute '{key}'")
        if len(self.regions) != self.num_regions:
            raise self.error(f"{self.name} takes {self.num_regions} regions, got {len(self.regions)}")

    # -- text form (overridden by ops with a custom syntax) -------------------
    def print_custom(self, printer) -> None:
        printer.print_uniform(self)

    @classmethod
    def parse_custom(cls, parser, num_results: int) -> "Operation":
        return parser.parse_uniform(cls, num_results)

    def error(self, message: str, cls=VerificationError):
        return cls(message, self.loc)

    # -- traversal -----------------------------------------------------------
    def walk(self):
        """This op and every op nested in it, parents before children (no recursion)."""
        stack = [self]
        while stack:
            op = stack.pop()
            yield op
            for region in reversed(op.regions):
                for block in reversed(region.blocks):
                    stack.extend(reversed(block.ops))

    def clone(self, mapping: dict) -> "Operation":
        """A deep copy; operands are looked up in `mapping` (value -> value), which the
        copy's results and block arguments are added to. Values not in it are kept."""
        regions = []
        for region in self.regions:
            new_region = Region()
            for block in region.blocks:
                new_block = new_region.append(Block([a.type for a in block.args], [a.name_hint for a in block.args]))
                mapping.update(zip(block.args, new_block.args))
                for op in block.ops:
                    new_block.append(op.clone(mapping))
            regions.append(new_region)
        copy = type(self)(
            [mapping.get(v, v) for v in self.operands],
            dict(self.attributes),
            [r.type for r in self.results],
            regions,
            loc=self.loc,
        )
        for old, new in zip(self.results, copy.results):
            new.name_hint = old.name_hint
            mapping[old] = new
        return copy

    def __repr__(self) -> str:
        return f"<{self.name} at {id(self):#x}>"
