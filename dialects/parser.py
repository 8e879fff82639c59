"""Read back the text the printer writes (custom and generic forms).

A small recursive-descent parser working directly on characters: MLIR's type
syntax (``tensor<4x8xf32>``) is context sensitive, so regular expressions at
the current position serve better than a separate token stream.
"""

from __future__ import annotations

import re

import numpy as np

from . import affine_expr as ax
from .builtin import ModuleOp
from .diagnostics import ParseError
from .elided import ElidedElements
from .ir import OP_REGISTRY, Block, Operation, Region, Value
from .location import Location
from .types import MEMORY_SPACES, SCALAR_TYPES, FunctionType, MemRefType, TensorType, VectorType

_WS = re.compile(r"(\s|//[^\n]*)*")
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_VALUE_ID = re.compile(r"%([A-Za-z_$.][A-Za-z0-9_$.]*|[0-9]+)(#[0-9]+)?")
_ARG_ID = re.compile(r"%([A-Za-z_$.][A-Za-z0-9_$.]*|[0-9]+)")
_RESULT_ID = re.compile(r"%([A-Za-z_$.][A-Za-z0-9_$.]*|[0-9]+)(:[0-9]+)?")
_SYMBOL = re.compile(r"@([A-Za-z_][A-Za-z0-9_$.]*)")
_NUMBER = re.compile(r"[-+]?(\d+\.\d*([eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_DIMS = re.compile(r"((?:\d+x)*)")
_DIVISION = re.compile(r"(floordiv|ceildiv|mod)\b")
_DIGITS = re.compile(r"\d+")
_HEX = re.compile(r"0x[0-9A-Fa-f]+")


class Parser:
    def __init__(self, text: str, filename: str = "<string>"):
        self.text = text
        self.filename = filename
        self.pos = 0
        self.scopes: list[dict] = [{}]

    # -- characters ----------------------------------------------------------
    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self, literal: str) -> bool:
        self.skip()
        return self.text.startswith(literal, self.pos)

    def accept(self, literal: str) -> bool:
        if self.peek(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.accept(literal):
            self.fail(f"expected '{literal}'")

    def match(self, pattern: re.Pattern):
        self.skip()
        m = pattern.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        return m

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def fail(self, message: str):
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1)
        found = self.text[self.pos : self.pos + 20].split("\n")[0]
        raise ParseError(f"{self.filename}:{line}:{col + 1}: {message} (found '{found}')")

    def comma_list(self, item, close: str) -> list:
        """Items separated by ',' up to (and consuming) `close`."""
        items = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            self.expect(",")

    # -- values --------------------------------------------------------------
    def define(self, name: str, value: Value) -> None:
        if name in self.scopes[-1]:
            self.fail(f"redefinition of {name}")
        self.scopes[-1][name] = value

    def parse_value(self) -> Value:
        m = self.match(_VALUE_ID)
        if not m:
            self.fail("expected an SSA value")
        name = "%" + m.group(1)
        for scope in reversed(self.scopes):
            if name in scope:
                value = scope[name]
                break
        else:
            self.fail(f"use of undefined value {name}")
        if m.group(2):
            if not isinstance(value, list):
                self.fail(f"{name} has a single result")
            index = int(m.group(2)[1:])
            if index >= len(value):
                self.fail(f"{name} has only {len(value)} results")
            return value[index]
        if isinstance(value, list):
            self.fail(f"{name} has {len(value)} results; use {name}#k")
        return value

    def parse_operands(self) -> list:
        operands = []
        if self.peek("%"):
            operands.append(self.parse_value())
            while self.accept(","):
                operands.append(self.parse_value())
        return operands

    def parse_argument_name(self) -> str:
        m = self.match(_ARG_ID)
        if not m:
            self.fail("expected a name like %i")
        return m.group(0)

    def comma_list_until(self, item, count: int) -> list:
        """Exactly `count` items separated by ','."""
        items = [item()]
        for _ in range(count - 1):
            self.expect(",")
            items.append(item())
        return items

    def parse_argument(self) -> tuple:
        """`%name: type`, as in function signatures and block labels."""
        m = self.match(_ARG_ID)
        if not m:
            self.fail("expected an argument like %x: f32")
        self.expect(":")
        return m.group(0), self.parse_type()

    def parse_symbol(self) -> str:
        if self.accept('@"'):
            self.pos -= 1
            return self.parse_string()
        m = self.match(_SYMBOL)
        if not m:
            self.fail("expected a symbol name like @f")
        return m.group(1)

    # -- types ---------------------------------------------------------------
    def parse_type(self):
        if self.peek("("):
            return self.parse_function_type()
        m = self.match(_BARE_ID)
        if not m:
            self.fail("expected a type")
        word = m.group(0)
        if word in SCALAR_TYPES:
            return SCALAR_TYPES[word]
        if word in ("tensor", "memref"):
            self.expect("<")
            dims = _DIMS.match(self.text, self.pos)
            self.pos = dims.end()
            shape = tuple(int(d) for d in dims.group(1).split("x") if d)
            element = self.parse_type()
            if element not in SCALAR_TYPES.values():
                self.fail(f"a {word}'s element type must be a scalar type")
            space = ""
            if word == "memref" and self.peek(","):
                self.expect(",")
                space = self.parse_memory_space()
            self.expect(">")
            return TensorType(shape, element) if word == "tensor" else MemRefType(shape, element, space)
        if word == "vector":
            self.expect("<")
            lanes = self.parse_int()
            self.pos = self.text.index("x", self.pos) + 1
            element = self.parse_type()
            self.expect(">")
            return VectorType(lanes, element)
        self.pos = m.start()
        self.fail(f"unknown type '{word}'")

    def parse_memory_space(self) -> str:
        """``#gpu.address_space<workgroup>`` (a GPU block's shared memory), the one kiln uses."""
        m = self.match(re.compile(r"#gpu\.address_space<(\w+)>"))
        if not m or m.group(1) not in MEMORY_SPACES:
            self.fail(f"expected a memory space: {', '.join(f'#gpu.address_space<{s}>' for s in MEMORY_SPACES)}")
        return m.group(1)

    def parse_type_list(self) -> list:
        """`(t1, t2)` or a single bare type."""
        if self.accept("("):
            return self.comma_list(self.parse_type, ")")
        return [self.parse_type()]

    def parse_function_type(self) -> FunctionType:
        self.expect("(")
        inputs = self.comma_list(self.parse_type, ")")
        self.expect("->")
        return FunctionType(tuple(inputs), tuple(self.parse_type_list()))

    # -- attributes ----------------------------------------------------------
    def parse_attr_dict(self) -> dict:
        attributes = {}
        if not self.accept("{"):
            return attributes

        def entry():
            m = self.match(_BARE_ID)
            if not m:
                self.fail("expected an attribute name")
            self.expect("=")
            attributes[m.group(0)] = self.parse_attribute()

        self.comma_list(entry, "}")
        return attributes

    def parse_attribute(self):
        if self.accept("true"):
            return True
        if self.accept("false"):
            return False
        if self.peek('"'):
            return self.parse_string()
        if self.accept("["):
            return tuple(self.comma_list(self.parse_attribute, "]"))
        if self.accept("array<"):
            self.expect("i64")
            values = []
            if self.accept(":"):
                values = [self.parse_int()]
                while self.accept(","):
                    values.append(self.parse_int())
            self.expect(">")
            return tuple(values)
        if self.accept("dense<"):
            return self.parse_dense()
        if self.peek("dense_resource<"):
            return self.parse_elided()
        if self.peek("affine_map<"):
            return self.parse_affine_map()
        m = self.match(_HEX)
        if m:
            self.expect(":")
            self.expect("f64")
            return float(np.array(int(m.group(0), 16), np.uint64).view(np.float64))
        m = self.match(_NUMBER)
        if m:
            text = m.group(0)
            is_float = any(c in text for c in ".eE")
            if self.accept(":"):
                is_float = self.parse_type() in (SCALAR_TYPES["f32"], SCALAR_TYPES["f64"])
            return float(text) if is_float else int(text)
        return self.parse_type()

    def parse_int(self) -> int:
        m = self.match(_NUMBER)
        if not m or not m.group(0).lstrip("+-").isdigit():
            self.fail("expected an integer")
        return int(m.group(0))

    def parse_string(self) -> str:
        m = self.match(_STRING)
        if not m:
            self.fail("expected a string")
        return re.sub(r"\\(.)", r"\1", m.group(1))

    def parse_dense(self) -> np.ndarray:
        """The part of ``dense<...> : tensor<...>`` after ``dense<``."""
        body = self._dense_body()
        self.expect(":")
        start = self.pos
        type_ = self.parse_type()
        if not isinstance(type_, TensorType):
            self.pos = start
            self.fail("a dense attribute needs a tensor type")
        return self._dense_array(body, type_)

    def parse_elided(self) -> ElidedElements:
        """MLIR's elided elements, ``dense_resource<__elided__> : tensor<...>``: the type, no value.
        Other resources (data in a file's ``{-# dialect_resources #-}`` section) are not read."""
        self._elided_marker()
        self.expect(":")
        start = self.pos
        type_ = self.parse_type()
        if not isinstance(type_, TensorType):
            self.pos = start
            self.fail("an elided constant needs a tensor type")
        return ElidedElements(type_.shape, type_.element.dtype)

    def parse_elided_body(self, type_) -> ElidedElements:
        """``dense_resource<__elided__>`` whose type `type_` is given elsewhere (memref.global)."""
        self._elided_marker()
        return ElidedElements(type_.shape, type_.element.dtype)

    def _elided_marker(self) -> None:
        start = self.pos
        self.expect("dense_resource<")
        if not self.accept("__elided__"):
            self.pos = start
            self.fail("dense_resource<...> is read only as dense_resource<__elided__> (a constant printed elided)")
        self.expect(">")

    def parse_dense_body(self, type_) -> np.ndarray:
        """The part of ``dense<...>`` after ``dense<``, its shape and type given by `type_`."""
        return self._dense_array(self._dense_body(), type_)

    def _dense_body(self):
        if self.peek(">"):
            body = ("literal", [])  # dense<>: no elements
        else:
            body = ("hex", self.parse_string()) if self.peek('"') else ("literal", self.parse_dense_literal())
        self.expect(">")
        return body

    def _dense_bits(self, raw: bytes, type_) -> np.ndarray:
        """i1 hex data as MLIR writes it: eight elements to a byte, the first in the lowest bit.
        One byte per element (how kiln wrote i1 before it followed MLIR) is read too."""
        packed = -(-type_.size // 8)
        if len(raw) == packed:
            bits = np.unpackbits(np.frombuffer(raw, np.uint8), count=type_.size, bitorder="little")
        elif len(raw) == type_.size:
            bits = np.frombuffer(raw, np.uint8)
        else:
            self.fail(f"hex data has {len(raw)} bytes, {type_} needs {packed} (eight i1 elements to a byte)")
        return bits.astype(np.bool_).reshape(type_.shape)

    def _dense_array(self, body, type_) -> np.ndarray:
        dtype = type_.dtype
        if body[0] == "hex":
            if not body[1].startswith("0x"):
                self.fail("a hex dense attribute starts with 0x")
            raw = bytes.fromhex(body[1][2:])
            if dtype == np.bool_:
                return self._dense_bits(raw, type_)
            storage = dtype.newbyteorder("<")
            if len(raw) != type_.size * np.dtype(storage).itemsize:
                self.fail(f"hex data has {len(raw)} bytes, {type_} needs {type_.size * np.dtype(storage).itemsize}")
            return np.frombuffer(raw, storage).astype(dtype).reshape(type_.shape)
        try:
            array = np.array(body[1], dtype=dtype)
        except (ValueError, OverflowError) as exc:
            self.fail(f"bad dense literal for {type_}: {exc}")
        if array.ndim == 0 and type_.rank > 0:
            return np.full(type_.shape, array, dtype=dtype)
        if array.size == 0 and type_.size == 0:
            return array.reshape(type_.shape)
        if array.shape != type_.shape:
            self.fail(f"dense literal of shape {array.shape} does not match {type_}")
        return array

    def parse_dense_literal(self):
        if self.accept("["):
            return self.comma_list(self.parse_dense_literal, "]")
        if self.accept("true"):
            return True
        if self.accept("false"):
            return False
        m = self.match(_NUMBER)
        if not m:
            self.fail("expected a number in a dense literal")
        text = m.group(0)
        return float(text) if any(c in text for c in ".eE") else int(text)

    # -- affine expressions --------------------------------------------------
    def parse_affine_expr(self, atom) -> ax.AffineExpr:
        """``d0 * 4 + d1``-style text; `atom()` parses a dimension (``d0`` or an SSA name)
        and returns its expression, or None if the text there is not one."""
        expr = self._affine_term(atom)
        while True:
            if self.accept("+"):
                expr = expr + self._affine_term(atom)
            elif self.peek("-") and not self.peek("->"):
                self.pos += 1
                expr = expr - self._affine_term(atom)
            else:
                return expr

    def _affine_term(self, atom) -> ax.AffineExpr:
        expr = self._affine_factor(atom)
        while True:
            if self.accept("*"):
                expr = expr * self._affine_factor(atom)
            elif m := self.match(_DIVISION):
                op = m.group(1)
                divisor = self._affine_factor(atom)
                if not isinstance(divisor, ax.Const):
                    self.fail(f"{op} needs a constant")
                expr = {"floordiv": ax.floordiv, "ceildiv": ax.ceildiv, "mod": ax.mod}[op](expr, divisor.value)
            else:
                return expr

    def _affine_factor(self, atom) -> ax.AffineExpr:
        if self.accept("("):
            expr = self.parse_affine_expr(atom)
            self.expect(")")
            return expr
        if self.peek("-"):
            self.pos += 1
            return self._affine_factor(atom) * -1
        m = self.match(_DIGITS)
        if m:
            return ax.Const(int(m.group(0)))
        found = atom()
        if found is None:
            self.fail("expected an affine expression")
        return found

    def parse_affine_map(self) -> ax.AffineMap:
        """``affine_map<(d0, d1) -> (d0 + 1, d1)>``."""
        self.expect("affine_map<(")
        names = self.comma_list(lambda: self.match(_BARE_ID).group(0), ")")
        self.expect("->")
        self.expect("(")

        def dim():
            m = self.match(_BARE_ID)
            if not m or m.group(0) not in names:
                return None
            return ax.Dim(names.index(m.group(0)))

        results = self.comma_list(lambda: self.parse_affine_expr(dim), ")")
        self.expect(">")
        return ax.AffineMap(len(names), tuple(results))

    def parse_location(self):
        if not self.accept("loc("):
            return None
        if self.accept("unknown"):
            self.expect(")")
            return None
        file = self.parse_string()
        self.expect(":")
        line = self.parse_int()
        self.expect(":")
        col = self.parse_int()
        self.expect(")")
        return Location(file, line, col)

    # -- ops -----------------------------------------------------------------
    def parse_op(self) -> Operation:
        names = []
        if self.peek("%"):

            def result_def():
                m = self.match(_RESULT_ID)
                if not m:
                    self.fail("expected a result name")
                return "%" + m.group(1), int(m.group(2)[1:]) if m.group(2) else 1

            names.append(result_def())
            while self.accept(","):
                names.append(result_def())
            self.expect("=")
        num_results = sum(n for _, n in names)
        start = self.pos
        if self.peek('"'):
            op = self.parse_generic(num_results)
        else:
            m = self.match(_BARE_ID)
            if not m:
                self.fail("expected an operation")
            # MLIR prints these without their dialect (func.func's default dialect is func).
            name = {"module": "builtin.module", "return": "func.return", "call": "func.call"}.get(
                m.group(0), m.group(0)
            )
            if name not in OP_REGISTRY:
                self.pos = start
                self.fail(f"unknown operation '{name}'")
            op = OP_REGISTRY[name].parse_custom(self, num_results)
        loc = self.parse_location()
        if loc is not None:
            op.loc = loc
        if len(op.results) != num_results:
            self.pos = start
            self.fail(f"{op.name} has {len(op.results)} results but {num_results} names")
        results = iter(op.results)
        for name, count in names:
            group = [next(results) for _ in range(count)]
            if count == 1:
                if not name[1:].isdigit():
                    group[0].name_hint = name[1:]
                self.define(name, group[0])
            else:
                self.define(name, group)
        return op

    def parse_generic(self, num_results: int) -> Operation:
        start = self.pos
        name = self.parse_string()
        if name not in OP_REGISTRY:
            self.pos = start
            self.fail(f"unknown operation '{name}'")
        self.expect("(")
        operands = self.parse_operands()
        self.expect(")")
        regions = []
        if self.accept("("):
            regions = self.comma_list(self.parse_region, ")")
        attributes = self.parse_attr_dict()
        self.expect(":")
        ftype = self.parse_function_type()
        if len(ftype.inputs) != len(operands):
            self.fail(f"{len(operands)} operands but {len(ftype.inputs)} operand types")
        return OP_REGISTRY[name](operands, attributes, list(ftype.results), regions)

    def parse_uniform(self, cls, num_results: int) -> Operation:
        operands = self.parse_operands()
        attributes = self.parse_attr_dict()
        self.expect(":")
        if self.peek("("):
            ftype = self.parse_function_type()
            ins, outs = list(ftype.inputs), list(ftype.results)
        else:
            t = self.parse_type()
            ins, outs = [t] * len(operands), [t] * num_results
        if len(ins) != len(operands):
            self.fail(f"{len(operands)} operands but {len(ins)} operand types")
        for value, t in zip(operands, ins):
            if value.type != t:
                self.fail(f"operand has type {value.type}, but the op says {t}")
        return cls(operands, attributes, outs)

    def parse_region(self, entry_args=None) -> Region:
        """`{ ops }` or `{ ^bb0(%a: t): ops }`; `entry_args` = [(name, type)] given by the op."""
        self.expect("{")
        self.scopes.append({})
        region = Region()
        block = region.append(Block())
        args = list(entry_args or ())
        if self.accept("^bb0"):
            if self.accept("("):
                args += self.comma_list(self.parse_argument, ")")
            self.expect(":")
        for name, type_ in args:
            self.define(name, block.add_argument(type_, None if name[1:].isdigit() else name[1:]))
        while not self.accept("}"):
            if self.at_end():
                self.fail("unterminated region")
            if self.peek("^"):
                self.fail("regions with several blocks are not supported")
            block.append(self.parse_op())
        self.scopes.pop()
        return region


def parse_ir(text: str, filename: str = "<string>") -> Operation:
    """Parse a module (or bare top-level ops, which are wrapped in one)."""
    parser = Parser(text, filename)
    ops = []
    while not parser.at_end():
        ops.append(parser.parse_op())
    if len(ops) == 1 and isinstance(ops[0], ModuleOp):
        return ops[0]
    module = ModuleOp.empty()
    for op in ops:
        module.body.append(op)
    return module
