"""Print IR in MLIR's textual syntax.

Ops print in their custom form when they have one and in a uniform
"declarative" form otherwise::

    %2 = kiln.add %0, %1 : tensor<4x8xf32>
    %3 = kiln.reduce_sum %2 {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>

``generic=True`` prints every op in MLIR's generic form instead, which always
works (``"kiln.add"(%0, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>``).
The parser reads back both.
"""

from __future__ import annotations

import contextvars
import hashlib
import re

import numpy as np

from .affine_expr import AffineMap
from .elided import ELIDED, ElidedElements
from .ir import Block, Operation, Region, Value
from .types import TensorType, Type, scalar_type_of

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*$")
# Dense constants larger than this print as a hex blob, as MLIR does.
HEX_THRESHOLD = 16
# Whether hex blobs print as a digest of their bytes instead (print_ir's digest_constants).
_DIGESTS = contextvars.ContextVar("kiln_printer_digests", default=False)
# Constants of more elements than this print elided (print_ir's elide_constants); None: none do.
_ELIDE_OVER = contextvars.ContextVar("kiln_printer_elide_over", default=None)
# What Lowered.text and kiln dump elide by default: a 32x32 block still prints, weights do not.
ELIDE_CONSTANTS_OVER = 1024


def format_float(value, dtype) -> str:
    """Shortest text that reads back to the same value in `dtype`, with a '.' as MLIR requires."""
    value = np.dtype(dtype).type(value)
    if not np.isfinite(value):
        raise ValueError("non-finite floats have no decimal literal; print them as hex")
    magnitude = abs(float(value))
    if magnitude != 0 and (magnitude < 1e-4 or magnitude >= 1e16):
        return np.format_float_scientific(value, unique=True, trim="0")
    return np.format_float_positional(value, unique=True, trim="0")


def _format_element(value, dtype: np.dtype) -> str:
    if dtype == np.bool_:
        return "true" if value else "false"
    if dtype.kind == "f":
        return format_float(value, dtype)
    return str(int(value))


def format_dense(array: np.ndarray) -> str:
    """``dense<...> : tensor<...>``: a splat, nested literals, or a hex blob; or, for an array of
    more elements than print_ir's `elide_constants`, MLIR's ``dense_resource<__elided__> : tensor<...>``."""
    if isinstance(array, ElidedElements):
        return f"{ELIDED} : {TensorType(array.shape, scalar_type_of(array.dtype))}"
    array = np.asarray(array)
    type_text = str(TensorType(array.shape, scalar_type_of(array.dtype)))
    limit = _ELIDE_OVER.get()
    if limit is not None and array.size > limit and not _is_splat(array.reshape(-1)):
        return f"{ELIDED} : {type_text}"
    flat = array.reshape(-1)
    finite = array.dtype.kind != "f" or bool(np.isfinite(flat).all())
    if flat.size == 0:
        body = ""  # MLIR's empty literal, whatever the rank ([] is a literal of shape (0,) only)
    elif _is_splat(flat):
        body = _format_element(flat[0], array.dtype)
    elif finite and flat.size <= HEX_THRESHOLD:
        body = _nested(array)
    else:
        if array.dtype == np.bool_:  # MLIR packs i1 elements eight to a byte, the first in the lowest bit
            data = np.packbits(flat, bitorder="little")
        else:  # the bytes themselves where they are little-endian and contiguous: no copy of 100 MB of weights
            data = np.ascontiguousarray(flat, flat.dtype.newbyteorder("<")).view(np.uint8)
        if _DIGESTS.get():
            body = f'"sha256:{hashlib.sha256(data).hexdigest()}"'
        else:
            body = '"0x' + data.tobytes().hex().upper() + '"'
    return f"dense<{body}> : {type_text}"


def _is_splat(flat: np.ndarray) -> bool:
    """Whether `flat` prints as one element (a splat, which is short whatever its size)."""
    finite = flat.dtype.kind != "f" or bool(np.isfinite(flat).all())
    return finite and flat.size > 1 and bool((flat == flat[0]).all()) and not _has_signed_zeros(flat)


def _has_signed_zeros(flat: np.ndarray) -> bool:
    # -0.0 == 0.0, so a splat test alone would lose the sign of a zero.
    return flat.dtype.kind == "f" and bool(np.signbit(flat).any() != np.signbit(flat).all())


def _nested(array: np.ndarray) -> str:
    if array.ndim == 0:
        return _format_element(array[()], array.dtype)
    return "[" + ", ".join(_nested(sub) for sub in array) + "]"


def format_attribute(value) -> str:
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):  # MLIR writes NaN and infinities by their bits
            return f"0x{int(np.array(value, np.float64).view(np.uint64)):016X} : f64"
        return f"{format_float(value, np.float64)} : f64"
    if isinstance(value, AffineMap):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Type):
        return str(value)
    if isinstance(value, (np.ndarray, ElidedElements)):
        return format_dense(value)
    if isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return "array<i64" + "".join(f"{': ' if i == 0 else ', '}{int(v)}" for i, v in enumerate(value)) + ">"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(format_attribute(v) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r}")


def format_symbol(name: str) -> str:
    """``@f``, or ``@"<lambda>"`` for a name that is not a bare identifier."""
    return "@" + (name if _IDENTIFIER.match(name) else format_attribute(name))


def format_attr_dict(attributes: dict, skip=()) -> str:
    items = [(k, v) for k, v in attributes.items() if k not in skip]
    if not items:
        return ""
    return " {" + ", ".join(f"{k} = {format_attribute(v)}" for k, v in items) + "}"


class Printer:
    def __init__(self, locations: bool = True, generic: bool = False):
        self.locations = locations
        self.generic = generic
        self.lines: list[str] = []
        self.current = ""
        self.indent = 0
        self.names: dict = {}
        self.used_names: set = set()
        self.counter = 0

    # -- output --------------------------------------------------------------
    def write(self, text: str) -> None:
        self.current += text

    def newline(self) -> None:
        self.lines.append("  " * self.indent + self.current if self.current else "")
        self.current = ""

    def text(self) -> str:
        if self.current:
            self.newline()
        return "\n".join(self.lines) + "\n"

    # -- SSA names -----------------------------------------------------------
    def name_of(self, value: Value) -> str:
        try:
            return self.names[value]
        except KeyError:
            return "%<<UNKNOWN VALUE>>"

    def _fresh(self, hint: str | None) -> str:
        if hint and _IDENTIFIER.match(hint):
            name, k = hint, 1
            while name in self.used_names:
                name, k = f"{hint}_{k}", k + 1
        else:
            while str(self.counter) in self.used_names:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        self.used_names.add(name)
        return "%" + name

    def define(self, value: Value) -> str:
        self.names[value] = self._fresh(value.name_hint)
        return self.names[value]

    def define_results(self, op: Operation) -> str:
        if not op.results:
            return ""
        if len(op.results) == 1:
            return self.define(op.results[0]) + " = "
        base = self._fresh(None)
        for i, result in enumerate(op.results):
            self.names[result] = f"{base}#{i}"
        return f"{base}:{len(op.results)} = "

    def operands(self, values) -> str:
        return ", ".join(self.name_of(v) for v in values)

    # -- ops, regions, blocks ------------------------------------------------
    def print_op(self, op: Operation) -> None:
        saved = None
        if op.restarts_numbering:
            saved = (self.names, self.used_names, self.counter)
            self.names, self.used_names, self.counter = dict(self.names), set(), 0
        self.write(self.define_results(op))
        if self.generic:
            self.print_generic(op)
        else:
            op.print_custom(self)
        if self.locations and op.loc is not None:
            self.write(f" {op.loc}")
        self.newline()
        if saved is not None:
            self.names, self.used_names, self.counter = saved

    def print_generic(self, op: Operation) -> None:
        self.write(f'"{op.name}"({self.operands(op.operands)})')
        if op.regions:
            self.write(" (")
            for i, region in enumerate(op.regions):
                if i:
                    self.write(", ")
                self.print_region(region, entry_args=True)
            self.write(")")
        self.write(format_attr_dict(op.attributes))
        ins = tuple(v.type for v in op.operands)
        outs = tuple(r.type for r in op.results)
        self.write(f" : {_function_text(ins, outs)}")

    def print_uniform(self, op: Operation) -> None:
        """The declarative custom form shared by every op without its own."""
        self.write(op.name)
        if op.operands:
            self.write(" " + self.operands(op.operands))
        self.write(format_attr_dict(op.attributes))
        ins = [v.type for v in op.operands]
        outs = [r.type for r in op.results]
        if len(outs) == 1 and all(t == outs[0] for t in ins):
            self.write(f" : {outs[0]}")
        else:
            self.write(f" : {_function_text(ins, outs)}")

    def print_region(self, region: Region, entry_args: bool = False) -> None:
        self.write("{")
        self.newline()
        self.indent += 1
        for i, block in enumerate(region.blocks):
            if i or (entry_args and block.args):
                self.print_block_label(block, i)
            for op in block.ops:
                self.print_op(op)
        self.indent -= 1
        self.write("}")

    def print_block_label(self, block: Block, index: int) -> None:
        args = ", ".join(f"{self.define(a)}: {a.type}" for a in block.args)
        self.indent -= 1
        self.write(f"^bb{index}" + (f"({args})" if args else "") + ":")
        self.newline()
        self.indent += 1


def _function_text(ins, outs) -> str:
    ins_text = ", ".join(map(str, ins))
    outs_text = str(outs[0]) if len(outs) == 1 else "(" + ", ".join(map(str, outs)) + ")"
    return f"({ins_text}) -> {outs_text}"


def print_ir(
    op: Operation,
    locations: bool = True,
    generic: bool = False,
    digest_constants: bool = False,
    elide_constants: int | None = None,
) -> str:
    """The text of `op` (usually a module) in MLIR syntax. With `digest_constants`, a constant that
    would print as a hex blob prints as the SHA-256 of its bytes instead: text that identifies the
    IR (a cache key) without spelling out 100 MB of weights, and that no parser reads back.

    `elide_constants=N` prints a constant of more than N elements (a splat excepted, which is
    short) as ``dense_resource<__elided__> : tensor<...>``, as MLIR's
    ``--mlir-elide-elementsattrs-if-larger=N`` does: text for reading, which parses back to IR
    whose elided constants have no value (see kiln.dialects.elided). None, the default, prints
    every element, as anything that hashes or re-parses the text needs."""
    if elide_constants is not None and (isinstance(elide_constants, bool) or elide_constants < 0):
        raise ValueError(f"elide_constants is a number of elements (>= 0) or None, not {elide_constants!r}")
    tokens = _DIGESTS.set(digest_constants), _ELIDE_OVER.set(elide_constants)
    try:
        printer = Printer(locations=locations, generic=generic)
        printer.print_op(op)
        return printer.text()
    finally:
        _DIGESTS.reset(tokens[0])
        _ELIDE_OVER.reset(tokens[1])
