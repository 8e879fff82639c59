"""``builtin.module``: the top-level container of functions."""

from __future__ import annotations

from .ir import Block, Operation, Region
from .printer import format_attr_dict


class ModuleOp(Operation):
    name = "builtin.module"
    num_regions = 1
    isolated_from_above = True
    restarts_numbering = True

    @classmethod
    def empty(cls) -> "ModuleOp":
        return cls([], {}, [], [Region([Block()])])

    @property
    def body(self) -> Block:
        return self.regions[0].block

    def lookup(self, symbol: str):
        for op in self.body.ops:
            if op.attributes.get("sym_name") == symbol:
                return op
        raise KeyError(f"no symbol @{symbol} in the module")

    def verify(self) -> None:
        super().verify()
        self.regions[0].block  # exactly one block
        seen = set()
        for op in self.body.ops:
            symbol = op.attributes.get("sym_name")
            if symbol in seen:
                raise op.error(f"symbol @{symbol} is defined twice")
            seen.add(symbol)

    def print_custom(self, printer) -> None:
        printer.write("module" + (" attributes" + format_attr_dict(self.attributes) if self.attributes else "") + " ")
        printer.print_region(self.regions[0])

    @classmethod
    def parse_custom(cls, parser, num_results: int) -> "ModuleOp":
        attributes = parser.parse_attr_dict() if parser.accept("attributes") else {}
        return cls([], attributes, [], [parser.parse_region()])
