"""The ``kiln`` dialect: kiln's tensor-level ops, value semantics, no loops.

The ops of the ``tensor`` stage. They are kiln's own, so they carry kiln's name: MLIR's
registered ``tensor`` dialect has ops of the same names with other meanings (its
``tensor.cast`` changes shapes; kiln's element-type conversion is ``kiln.convert``).
``mlir-opt --allow-unregistered-dialect`` reads this stage in its generic printed form.

Each op declares its operands and attributes, infers its result type with
numpy's rules, verifies what the declaration cannot say, and carries its numpy
reference semantics in ``evaluate`` (the interpreter and the tests' oracle).

No op broadcasts or promotes implicitly: elementwise operands have one type,
and the tracer inserts ``kiln.broadcast_to`` and ``kiln.convert`` to make
numpy's broadcasting and promotion explicit (this keeps autodiff and fusion
simple). A traced ``x * 2.0 + b`` with ``x: f32[4, 8]`` and ``b: f32[8]``::

    %0 = kiln.constant dense<2.0> : tensor<f32>
    %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4x8xf32>
    %2 = kiln.mul %x, %1 : tensor<4x8xf32>
    %3 = kiln.broadcast_to %b : (tensor<8xf32>) -> tensor<4x8xf32>
    %4 = kiln.add %2, %3 : tensor<4x8xf32>
"""

from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np

from .arith import float_to_int
from .diagnostics import DTypeError, OutOfBoundsError, ShapeError
from .elided import is_elements
from .ir import Operation
from .math import FLOAT_FUNCTIONS
from .printer import format_attr_dict, format_dense
from .traits import (
    CONSTANT_LIKE,
    CONTRACTION,
    ELEMENTWISE,
    MOVES_ELEMENTS,
    REDUCTION,
    TARGET_DEPENDENT_FLOAT,
    TERMINATOR,
    TRANSCENDENTAL,
    VIEW,
)
from .types import SCALAR_TYPES, TensorType, f16, f32, f64, i1, tensor_type

FLOAT = (f16, f32, f64)
INT = tuple(SCALAR_TYPES[name] for name in ("i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"))
NUMERIC = FLOAT + INT
ALL = NUMERIC + (i1,)


def _kinds(elements) -> str:
    return ", ".join(str(e) for e in elements)


class TensorOp(Operation):
    """Shared checks: operands are tensors, attribute tuples are well formed."""

    def tensor_operand(self, index: int) -> TensorType:
        t = self.operands[index].type
        if not isinstance(t, TensorType):
            raise self.error(f"{self.name} operand #{index} must be a tensor, got {t}")
        return t

    def int_tuple(self, key: str, length: int | None = None) -> tuple:
        value = self.attributes.get(key)
        if not isinstance(value, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(f"{self.name} attribute '{key}' must be a tuple of integers, got {value!r}")
        if length is not None and len(value) != length:
            raise self.error(f"{self.name} attribute '{key}' needs {length} entries, got {len(value)}")
        return value

    def check_element(self, t: TensorType, allowed) -> None:
        if t.element not in allowed:
            raise self.error(f"{self.name} does not take {t.element} (it takes {_kinds(allowed)})", DTypeError)

    def evaluate(self, *inputs):
        """numpy reference semantics: input arrays in, one result array out."""
        raise NotImplementedError(f"{self.name} has no reference semantics")


# -- elementwise -------------------------------------------------------------
class ElementwiseOp(TensorOp):
    traits = frozenset({ELEMENTWISE})
    allowed: ClassVar[tuple] = NUMERIC
    numpy_fn: ClassVar[Callable]

    def infer_result_types(self):
        types = [self.tensor_operand(i) for i in range(len(self.operands))]
        first = types[0]
        for t in types[1:]:
            if t.shape != first.shape:
                raise self.error(
                    f"{self.name} operands have different shapes {first.shape} and {t.shape} "
                    "(broadcasting must be explicit)",
                    ShapeError,
                )
            if t.element != first.element:
                raise self.error(
                    f"{self.name} operands have different element types {first.element} and {t.element}", DTypeError
                )
        self.check_element(first, self.allowed)
        return [self.result_type(first)]

    def result_type(self, operand: TensorType) -> TensorType:
        return operand

    def evaluate(self, *inputs):
        return type(self).numpy_fn(*inputs)


def _elementwise(class_name, op_name, operands, numpy_fn, allowed=NUMERIC, traits=frozenset()):
    cls = type(
        class_name,
        (ElementwiseOp,),
        {
            "name": op_name,
            "traits": frozenset(traits),
            "operand_names": operands,
            "allowed": allowed,
            "numpy_fn": staticmethod(numpy_fn),
            "__doc__": f"``{op_name}``: elementwise numpy.{numpy_fn.__name__}.",
            "__module__": __name__,
        },
    )
    return cls


_BINARY = ("lhs", "rhs")
_UNARY = ("operand",)
AddOp = _elementwise("AddOp", "kiln.add", _BINARY, np.add)
SubOp = _elementwise("SubOp", "kiln.sub", _BINARY, np.subtract)
MulOp = _elementwise("MulOp", "kiln.mul", _BINARY, np.multiply)
DivOp = _elementwise("DivOp", "kiln.div", _BINARY, np.true_divide, FLOAT)
MaximumOp = _elementwise("MaximumOp", "kiln.maximum", _BINARY, np.maximum)
MinimumOp = _elementwise("MinimumOp", "kiln.minimum", _BINARY, np.minimum)
PowOp = _elementwise("PowOp", "kiln.pow", _BINARY, np.power, traits={TRANSCENDENTAL})
AndOp = _elementwise("AndOp", "kiln.and", _BINARY, np.logical_and, (i1,))
OrOp = _elementwise("OrOp", "kiln.or", _BINARY, np.logical_or, (i1,))
NegOp = _elementwise("NegOp", "kiln.neg", _UNARY, np.negative)
AbsOp = _elementwise("AbsOp", "kiln.abs", _UNARY, np.absolute)
ExpOp = _elementwise("ExpOp", "kiln.exp", _UNARY, np.exp, FLOAT, {TRANSCENDENTAL})
LogOp = _elementwise("LogOp", "kiln.log", _UNARY, np.log, FLOAT, {TRANSCENDENTAL})
SqrtOp = _elementwise("SqrtOp", "kiln.sqrt", _UNARY, np.sqrt, FLOAT)
TanhOp = _elementwise("TanhOp", "kiln.tanh", _UNARY, np.tanh, FLOAT, {TRANSCENDENTAL})
SinOp = _elementwise("SinOp", "kiln.sin", _UNARY, np.sin, FLOAT, {TRANSCENDENTAL})
CosOp = _elementwise("CosOp", "kiln.cos", _UNARY, np.cos, FLOAT, {TRANSCENDENTAL})
NotOp = _elementwise("NotOp", "kiln.not", _UNARY, np.logical_not, (i1,))
FModOp = _elementwise("FModOp", "kiln.fmod", _BINARY, np.fmod)
RemainderOp = _elementwise("RemainderOp", "kiln.remainder", _BINARY, np.remainder)
FloorDivideOp = _elementwise("FloorDivideOp", "kiln.floor_divide", _BINARY, np.floor_divide)
BitwiseAndOp = _elementwise("BitwiseAndOp", "kiln.bitwise_and", _BINARY, np.bitwise_and, INT)
BitwiseOrOp = _elementwise("BitwiseOrOp", "kiln.bitwise_or", _BINARY, np.bitwise_or, INT)
BitwiseXorOp = _elementwise("BitwiseXorOp", "kiln.bitwise_xor", _BINARY, np.bitwise_xor, INT)
LeftShiftOp = _elementwise("LeftShiftOp", "kiln.left_shift", _BINARY, np.left_shift, INT)
RightShiftOp = _elementwise("RightShiftOp", "kiln.right_shift", _BINARY, np.right_shift, INT)


class CheckIndexOp(ElementwiseOp):
    """``kiln.check_index``: its operand, an integer index into an axis of `size` (the
    `axis`-th of the array indexed, as numpy's message names it), checked to lie in
    [-size, size): every element outside is an OutOfBoundsError, raised when the function
    runs (native code returns a status naming the check, which its caller raises)::

        %1 = kiln.check_index %0 {size = 5, axis = 0} : tensor<4xi64>
    """

    name = "kiln.check_index"
    operand_names = _UNARY
    attribute_names = ("size", "axis")
    allowed = INT

    def result_type(self, operand):
        for key in self.attribute_names:
            value = self.attributes.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self.error(f"kiln.check_index attribute '{key}' must be an integer >= 0, got {value!r}")
        return operand

    @property
    def message(self) -> str:
        """numpy's message for an index, or the optional string attribute `msg` where the
        checked value is not an index to the user (np.bincount's input values)."""
        return self.attributes.get("msg") or f"index is out of bounds for axis {self.axis} with size {self.size}"

    def evaluate(self, index):
        unsigned = np.asarray(index).dtype.kind == "u"
        bad = (index >= self.size) if unsigned else (index < -self.size) | (index >= self.size)
        if bad.any():
            first = int(np.asarray(index)[bad].flat[0])
            if self.attributes.get("msg"):  # the value checked may be a stand-in (a negative one moved past the end)
                raise OutOfBoundsError(self.attributes["msg"], self.loc)
            raise OutOfBoundsError(
                f"index {first} is out of bounds for axis {self.axis} with size {self.size}", self.loc
            )
        return index


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Op"


# One kiln op per row of the math dialect's table of float functions, named as numpy
# names it (kiln.arcsin is math.asin one element at a time): kiln.tan, kiln.floor, ...
FLOAT_FUNCTION_OPS = {
    f.op: _elementwise(
        _camel(f.numpy_fn.__name__),
        f"kiln.{f.numpy_fn.__name__}",
        _BINARY if len(f.op.operand_names) == 2 else _UNARY,
        f.numpy_fn,
        FLOAT,
        () if f.exact else {TRANSCENDENTAL},
    )
    for f in FLOAT_FUNCTIONS
}
globals().update((op.__name__, op) for op in FLOAT_FUNCTION_OPS.values())

COMPARISONS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


class CmpOp(ElementwiseOp):
    """``kiln.cmp``: elementwise comparison; `predicate` is eq, ne, lt, le, gt or ge."""

    name = "kiln.cmp"
    operand_names = _BINARY
    attribute_names = ("predicate",)
    allowed = ALL

    def result_type(self, operand):
        if self.attributes.get("predicate") not in COMPARISONS:
            raise self.error(
                f"kiln.cmp predicate must be one of {', '.join(COMPARISONS)}, got {self.attributes.get('predicate')!r}"
            )
        return operand.with_element(i1)

    def evaluate(self, lhs, rhs):
        return COMPARISONS[self.predicate](lhs, rhs)


class SelectOp(TensorOp):
    """``kiln.select``: np.where(condition, true_value, false_value), all of one shape."""

    name = "kiln.select"
    traits = frozenset({ELEMENTWISE, MOVES_ELEMENTS})
    operand_names = ("condition", "true_value", "false_value")

    def infer_result_types(self):
        cond, a, b = (self.tensor_operand(i) for i in range(3))
        if cond.element != i1:
            raise self.error(f"kiln.select condition must be i1, got {cond.element}", DTypeError)
        if not cond.shape == a.shape == b.shape:
            raise self.error(f"kiln.select operands have shapes {cond.shape}, {a.shape}, {b.shape}", ShapeError)
        if a.element != b.element:
            raise self.error(f"kiln.select values have types {a.element} and {b.element}", DTypeError)
        return [a]

    def evaluate(self, cond, a, b):
        return np.where(cond, a, b)


class ConvertOp(TensorOp):
    """``kiln.convert``: numpy's astype to the result's element type (same shape)."""

    name = "kiln.convert"
    traits = frozenset({ELEMENTWISE, MOVES_ELEMENTS})
    operand_names = _UNARY

    def verify(self):
        super().verify()
        src, dst = self.tensor_operand(0), self.result.type
        if not isinstance(dst, TensorType) or dst.shape != src.shape:
            raise self.error(f"kiln.convert must keep the shape: {src} -> {dst}", ShapeError)
        self.check_element(src, ALL)
        self.check_element(dst, ALL)

    def evaluate(self, x):
        dtype = self.result.type.dtype
        if x.dtype.kind == "f" and dtype.kind in "iu":  # one answer for NaN and out of range
            return float_to_int(x, dtype)
        return x.astype(dtype)


class BitcastOp(TensorOp):
    """``kiln.bitcast``: numpy's ``x.view(dtype)`` for a dtype of the same itemsize: each
    element's bits read as the result's element type (same shape; bool takes no part, its
    bytes are not all values). ``x.view(np.int32)`` of ``x: f32[4]``::

        %0 = kiln.bitcast %x : (tensor<4xf32>) -> tensor<4xi32>

    is, one element at a time, ``arith.bitcast %a : f32 to i32``.
    """

    name = "kiln.bitcast"
    traits = frozenset({ELEMENTWISE, MOVES_ELEMENTS})
    operand_names = _UNARY

    def verify(self):
        super().verify()
        src, dst = self.tensor_operand(0), self.result.type
        if not isinstance(dst, TensorType) or dst.shape != src.shape:
            raise self.error(f"kiln.bitcast must keep the shape: {src} -> {dst}", ShapeError)
        self.check_element(src, NUMERIC)
        self.check_element(dst, NUMERIC)
        if src.dtype.itemsize != dst.dtype.itemsize:
            raise self.error(f"kiln.bitcast must keep the bit width: {src.element} -> {dst.element}", DTypeError)

    def evaluate(self, x):
        return np.asarray(x).view(self.result.type.dtype)


class ConstantOp(TensorOp):
    """``kiln.constant``: a dense array known at compile time."""

    name = "kiln.constant"
    traits = frozenset({CONSTANT_LIKE, MOVES_ELEMENTS})
    attribute_names = ("value",)

    def infer_result_types(self):
        value = self.attributes.get("value")
        if not is_elements(value):
            raise self.error("kiln.constant value must be a numpy array")
        try:
            return [tensor_type(value.shape, value.dtype)]
        except KeyError:
            raise self.error(f"kiln.constant of unsupported dtype {value.dtype}", DTypeError) from None

    def evaluate(self):
        return self.value

    def print_custom(self, printer):
        printer.write(f"kiln.constant {format_dense(self.value)}")

    @classmethod
    def parse_custom(cls, parser, num_results):
        if parser.peek("dense_resource<"):  # printed elided
            return cls([], {"value": parser.parse_elided()})
        parser.expect("dense<")
        return cls([], {"value": parser.parse_dense()})


# -- reductions --------------------------------------------------------------
class ReduceOp(TensorOp):
    traits = frozenset({REDUCTION})
    operand_names = _UNARY
    attribute_names = ("axes", "keepdims")
    allowed: ClassVar[tuple] = NUMERIC
    numpy_fn: ClassVar[Callable]

    def infer_result_types(self):
        t = self.tensor_operand(0)
        self.check_element(t, self.allowed)
        axes = self.int_tuple("axes")
        if list(axes) != sorted(set(axes)) or any(not 0 <= a < t.rank for a in axes):
            raise self.error(
                f"{self.name} axes {axes} must be sorted, unique and in range for rank {t.rank}", ShapeError
            )
        if not isinstance(self.attributes.get("keepdims"), bool):
            raise self.error(f"{self.name} keepdims must be a bool")
        if self.numpy_fn is not np.sum and any(t.shape[a] == 0 for a in axes):
            raise self.error(f"{self.name} over an empty axis has no identity", ShapeError)
        if self.keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(t.shape))
        else:
            shape = tuple(d for i, d in enumerate(t.shape) if i not in axes)
        return [t.with_shape(shape)]

    def evaluate(self, x):
        return np.asarray(type(self).numpy_fn(x, axis=self.axes, keepdims=self.keepdims)).astype(x.dtype, copy=False)


class ReduceSumOp(ReduceOp):
    """``kiln.reduce_sum`` over `axes`; the element type is kept (the tracer widens first, as numpy does)."""

    name = "kiln.reduce_sum"
    traits = frozenset({TARGET_DEPENDENT_FLOAT})
    numpy_fn = staticmethod(np.sum)


def _ieee_at_zeros(numpy_fn, sign: float):
    """np.max (np.min) with IEEE 754's maximum (minimum) between signed zeros: 0.0 > -0.0, so
    the answer does not depend on the order of evaluation, and every schedule and target
    gives it. numpy's does: its float maximum picks the later of two equal values, so
    np.max([0.0, -0.0]) is -0.0 but np.max([-0.0, 0.0]) is 0.0."""

    def reduce(x, axis, keepdims):
        result = np.asarray(numpy_fn(x, axis=axis, keepdims=keepdims))
        if x.dtype.kind != "f":
            return result
        zero = x.dtype.type(sign)
        present = np.any((x == 0) & (np.signbit(x) == np.signbit(zero)), axis=axis, keepdims=keepdims)
        return np.where((result == 0) & present, zero, result)

    return reduce


class ReduceMaxOp(ReduceOp):
    """``kiln.reduce_max`` over `axes`: NaN if any element is, and 0.0 over -0.0."""

    name = "kiln.reduce_max"
    allowed = ALL
    numpy_fn = staticmethod(_ieee_at_zeros(np.max, 0.0))


class ReduceMinOp(ReduceOp):
    """``kiln.reduce_min`` over `axes`: NaN if any element is, and -0.0 over 0.0."""

    name = "kiln.reduce_min"
    allowed = ALL
    numpy_fn = staticmethod(_ieee_at_zeros(np.min, -0.0))


# -- scans -------------------------------------------------------------------
# A scan's combiners, by `kind`: the elementwise op each step applies (numpy's ufunc whose
# accumulate it is), and the value the running result starts from, so that the first step
# gives x[0] exactly (-0.0 + x is x for every float x, -0.0 included).
SCAN_KINDS = {
    "add": (AddOp, {"f": -0.0, "i": 0, "b": False}),
    "mul": (MulOp, {"f": 1.0, "i": 1, "b": True}),
    "max": (MaximumOp, {"f": -np.inf, "i": "min", "b": False}),
    "min": (MinimumOp, {"f": np.inf, "i": "max", "b": True}),
    "and": (AndOp, {"b": True}),
    "or": (OrOp, {"b": False}),
    "bitwise_and": (BitwiseAndOp, {"i": -1}),
    "bitwise_or": (BitwiseOrOp, {"i": 0}),
    "bitwise_xor": (BitwiseXorOp, {"i": 0}),
}


def scan_identity(kind: str, dtype):
    """The start of a `kind` scan's running value in `dtype`, as a numpy scalar."""
    dtype = np.dtype(dtype)
    start = SCAN_KINDS[kind][1]["b" if dtype == np.bool_ else "f" if dtype.kind == "f" else "i"]
    if start in ("min", "max"):
        start = getattr(np.iinfo(dtype), start)
    return np.array(start).astype(dtype)[()]  # -1 as uint8 is 255: every bit set


class ScanOp(TensorOp):
    """``kiln.scan``: the inclusive scan of a tensor along `axis`, numpy's ufunc.accumulate
    (np.cumsum is kind "add"): ``out[..., 0] = x[..., 0]`` and ``out[..., j] =
    combine(out[..., j - 1], x[..., j])``, strictly in that order, as numpy's loop runs.
    After every step the running value is rounded to `rounding` (the element type itself,
    or f16 for a float16 scan computed in f32: numpy rounds each float16 step). Same shape
    and element type in and out::

        %1 = kiln.scan %0 {axis = 1, kind = "add", rounding = f16} : tensor<3x4xf32>

    The combiner is named by `kind` (a row of SCAN_KINDS: add, mul, max, min, and, or,
    bitwise_and/or/xor), not held in a region: each kind is one elementwise op, so lowering
    reuses that op's scalar rule, autodiff has one rule per kind, the CUDA and LLVM code
    generators see ordinary arith in a loop, and the op prints in a form ``mlir-opt`` reads
    (a region of kiln ops inside would need a region interpreter in every consumer, for
    combiners numpy does not have anyway). Errors: an unknown kind, an axis out of range,
    an element type the kind's op does not take, a `rounding` that is not the element type
    or f16 below f32/f64."""

    name = "kiln.scan"
    operand_names = _UNARY
    attribute_names = ("axis", "kind", "rounding")

    def infer_result_types(self):
        t = self.tensor_operand(0)
        kind, axis, rounding = self.attributes["kind"], self.attributes["axis"], self.attributes["rounding"]
        if kind not in SCAN_KINDS:
            raise self.error(f"kiln.scan kind must be one of {', '.join(SCAN_KINDS)}, got {kind!r}")
        if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < t.rank:
            raise self.error(f"kiln.scan axis {axis!r} is out of range for rank {t.rank}", ShapeError)
        combine, starts = SCAN_KINDS[kind]
        self.check_element(t, combine.allowed)
        if ("b" if t.element == i1 else "f" if t.element in FLOAT else "i") not in starts:
            raise self.error(f"kiln.scan kind {kind!r} does not take {t.element}", DTypeError)
        if rounding != t.element and not (rounding == f16 and t.element in (f32, f64)):
            raise self.error(
                f"kiln.scan rounding must be {t.element} or f16 (of f32 or f64), got {rounding}", DTypeError
            )
        return [t]

    def evaluate(self, x):
        """numpy's loop, one step at a time along the axis, every other axis at once."""
        combine = SCAN_KINDS[self.kind][0].numpy_fn
        rounded = self.rounding.dtype
        moved = np.moveaxis(np.asarray(x), self.axis, -1)
        out = np.empty_like(moved)
        running = np.full(moved.shape[:-1], scan_identity(self.kind, moved.dtype), moved.dtype)
        for j in range(moved.shape[-1]):
            running = np.asarray(combine(running, moved[..., j])).astype(rounded).astype(moved.dtype)
            out[..., j] = running
        return np.moveaxis(out, -1, self.axis)


# -- linear algebra ----------------------------------------------------------
class MatmulOp(TensorOp):
    """``kiln.matmul``: [..., M, K] x [..., K, N] -> [..., M, N]; batch dims equal (broadcast is explicit)."""

    name = "kiln.matmul"
    traits = frozenset({CONTRACTION, TARGET_DEPENDENT_FLOAT})
    operand_names = _BINARY

    def infer_result_types(self):
        a, b = self.tensor_operand(0), self.tensor_operand(1)
        if a.rank < 2 or a.rank != b.rank:
            raise self.error(f"kiln.matmul needs operands of one rank >= 2, got {a} and {b}", ShapeError)
        if a.shape[:-2] != b.shape[:-2]:
            raise self.error(f"kiln.matmul batch dimensions differ: {a.shape[:-2]} and {b.shape[:-2]}", ShapeError)
        if a.shape[-1] != b.shape[-2]:
            raise self.error(
                f"matmul: contracted dimensions differ: {a.shape} @ {b.shape} ({a.shape[-1]} != {b.shape[-2]})",
                ShapeError,
            )
        if a.element != b.element:
            raise self.error(f"kiln.matmul operands have types {a.element} and {b.element}", DTypeError)
        self.check_element(a, ALL)  # bool: numpy's OR of ANDs
        return [a.with_shape(a.shape[:-1] + b.shape[-1:])]

    def evaluate(self, a, b):
        return np.matmul(a, b)


class Conv2DOp(TensorOp):
    """``kiln.conv2d``: NCHW input, FCHW weight, symmetric zero padding, no bias. An optional
    ``groups`` attribute (default 1) splits the channels into groups convolved apart: the
    weight is then (F, C / groups, KH, KW) and filter f reads the channels of group
    f // (F / groups), as in every framework's grouped and depthwise convolutions."""

    name = "kiln.conv2d"
    traits = frozenset({TARGET_DEPENDENT_FLOAT})
    operand_names = ("input", "weight")
    attribute_names = ("stride", "padding")

    @property
    def groups(self) -> int:
        return self.attributes.get("groups", 1)

    def infer_result_types(self):
        x, w = self.tensor_operand(0), self.tensor_operand(1)
        if x.element != w.element:
            raise self.error(f"conv2d operands have types {x.element} and {w.element}", DTypeError)
        self.check_element(x, NUMERIC)
        groups = self.groups
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise self.error(f"kiln.conv2d attribute 'groups' must be an integer >= 1, got {groups!r}")
        try:
            shape = conv2d_shape(x.shape, w.shape, self.int_tuple("stride", 2), self.int_tuple("padding", 2), groups)
        except ShapeError as exc:
            raise self.error(exc.message, ShapeError) from None
        return [x.with_shape(shape)]

    def evaluate(self, x, w):
        return conv2d_reference(x, w, self.stride, self.padding, self.groups)


def conv2d_shape(x_shape, w_shape, stride, padding, groups: int = 1) -> tuple:
    """The (N, F, OH, OW) result of an NCHW input and an (F, C / groups, KH, KW) weight, or
    ``ShapeError``: the one statement of conv2d's shape rules, for the op and for eager numpy
    calls alike."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ShapeError(f"conv2d takes an NCHW input and an FCHW weight, got shapes {x_shape} and {w_shape}")
    if x_shape[1] != w_shape[1] * groups:
        raise ShapeError(f"conv2d: input has {x_shape[1]} channels, weight expects {w_shape[1]} x {groups} groups")
    if w_shape[0] % groups:
        raise ShapeError(f"conv2d: {w_shape[0]} filters do not split into {groups} groups")
    if min(stride) < 1 or min(padding) < 0:
        raise ShapeError(f"conv2d needs stride >= 1 and padding >= 0, got {stride} and {padding}")
    out = [(x_shape[2 + i] + 2 * padding[i] - w_shape[2 + i]) // stride[i] + 1 for i in range(2)]
    if min(out) < 1:
        raise ShapeError(f"conv2d: a {tuple(w_shape[2:])} kernel does not fit the padded {tuple(x_shape[2:])} input")
    return (x_shape[0], w_shape[0], *out)


def conv2d_reference(x, w, stride=(1, 1), padding=(0, 0), groups: int = 1):
    """NCHW convolution in numpy (cross-correlation, as in every ML framework), grouped as
    ``Conv2DOp`` says; shapes are checked by ``conv2d_shape``."""
    conv2d_shape(x.shape, w.shape, stride, padding, groups)
    (sh, sw), (ph, pw) = stride, padding
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, w.shape[2:], axis=(2, 3))[:, :, ::sh, ::sw]
    n, c = x.shape[:2]
    windows = windows.reshape((n, groups, c // groups) + windows.shape[2:])
    weights = w.reshape((groups, w.shape[0] // groups) + w.shape[1:])
    out = np.einsum("ngchwij,gfcij->ngfhw", windows, weights)
    return out.reshape((n, w.shape[0]) + out.shape[3:]).astype(x.dtype, copy=False)


# -- layout --------------------------------------------------------------------
class ReshapeOp(TensorOp):
    """``kiln.reshape`` to the result type's shape (row-major order, same size)."""

    name = "kiln.reshape"
    traits = frozenset({VIEW})
    operand_names = _UNARY

    def verify(self):
        super().verify()
        src, dst = self.tensor_operand(0), self.result.type
        if not isinstance(dst, TensorType) or dst.element != src.element:
            raise self.error(f"kiln.reshape must keep the element type: {src} -> {dst}", DTypeError)
        if dst.size != src.size:
            raise self.error(
                f"cannot reshape {src.shape} ({src.size} elements) to {dst.shape} ({dst.size} elements)", ShapeError
            )

    def evaluate(self, x):
        return x.reshape(self.result.type.shape)


class TransposeOp(TensorOp):
    """``kiln.transpose``: result dim i is operand dim permutation[i]."""

    name = "kiln.transpose"
    traits = frozenset({VIEW})
    operand_names = _UNARY
    attribute_names = ("permutation",)

    def infer_result_types(self):
        t = self.tensor_operand(0)
        perm = self.int_tuple("permutation")
        if sorted(perm) != list(range(t.rank)):
            raise self.error(f"{perm} is not a permutation of the {t.rank} axes of {t}", ShapeError)
        return [t.with_shape(tuple(t.shape[p] for p in perm))]

    def evaluate(self, x):
        return np.transpose(x, self.permutation)


class BroadcastToOp(TensorOp):
    """``kiln.broadcast_to`` the result shape, aligning trailing dims as numpy does."""

    name = "kiln.broadcast_to"
    traits = frozenset({VIEW})
    operand_names = _UNARY

    def verify(self):
        super().verify()
        src, dst = self.tensor_operand(0), self.result.type
        if not isinstance(dst, TensorType) or dst.element != src.element:
            raise self.error(f"kiln.broadcast_to must keep the element type: {src} -> {dst}", DTypeError)
        lead = dst.rank - src.rank
        if lead < 0 or any(s not in (1, d) for s, d in zip(src.shape, dst.shape[lead:])):
            raise self.error(f"cannot broadcast {src.shape} to {dst.shape}", ShapeError)

    def evaluate(self, x):
        return np.broadcast_to(x, self.result.type.shape)


class StridedSlice(TensorOp):
    """What kiln.slice and kiln.insert_slice share: a strided box of a tensor."""

    attribute_names = ("start", "stop", "step")

    def slice_shape(self, t: TensorType) -> tuple:
        """The shape of the strided slice of `t`, checking that it stays inside `t`."""
        start, stop, step = (self.int_tuple(k, t.rank) for k in ("start", "stop", "step"))
        shape = []
        for dim, (a, b, s) in enumerate(zip(start, stop, step)):
            if s == 0:
                raise self.error(f"{self.name} step cannot be zero", ShapeError)
            count = len(range(a, b, s))
            last = a + (count - 1) * s
            if count and not (0 <= a < t.shape[dim] and 0 <= last < t.shape[dim]):
                raise self.error(
                    f"{self.name} {a}:{b}:{s} reaches outside dim {dim} of size {t.shape[dim]}", ShapeError
                )
            shape.append(count)
        return tuple(shape)

    def key(self) -> tuple:
        """The numpy index of the slice."""
        return tuple(slice(a, b if b >= 0 else None, s) for a, b, s in zip(self.start, self.stop, self.step))


class SliceOp(StridedSlice):
    """``kiln.slice``: per dim, indices start, start+step, ... short of stop (Python's
    ``slice.indices`` normal form; step may be negative, stop -1 then means "past the front")."""

    name = "kiln.slice"
    traits = frozenset({VIEW})
    operand_names = _UNARY

    def infer_result_types(self):
        t = self.tensor_operand(0)
        return [t.with_shape(self.slice_shape(t))]

    def evaluate(self, x):
        return x[self.key()]


class InsertSliceOp(StridedSlice):
    """``kiln.insert_slice``: `dest` with its strided slice (as kiln.slice's) replaced by
    `source`. Made by autodiff: the gradient of a slice, and the dilation in conv2d's."""

    name = "kiln.insert_slice"
    traits = frozenset({MOVES_ELEMENTS})
    operand_names = ("source", "dest")

    def infer_result_types(self):
        source, dest = self.tensor_operand(0), self.tensor_operand(1)
        if self.slice_shape(dest) != source.shape:
            raise self.error(
                f"kiln.insert_slice: the slice of {dest} has shape {self.slice_shape(dest)}, the source {source.shape}",
                ShapeError,
            )
        if source.element != dest.element:
            raise self.error(f"kiln.insert_slice of {source.element} into {dest.element}", DTypeError)
        return [dest]

    def evaluate(self, source, dest):
        result = np.array(dest, copy=True)
        result[self.key()] = source
        return result


class ConcatOp(TensorOp):
    """``kiln.concat`` of one or more tensors along `axis`."""

    name = "kiln.concat"
    traits = frozenset({MOVES_ELEMENTS})
    operand_names = ("inputs*",)
    attribute_names = ("axis",)

    def infer_result_types(self):
        types = [self.tensor_operand(i) for i in range(len(self.operands))]
        first, axis = types[0], self.attributes.get("axis")
        if not isinstance(axis, int) or not 0 <= axis < first.rank:
            raise self.error(f"kiln.concat axis {axis!r} is out of range for rank {first.rank}", ShapeError)
        for t in types[1:]:
            if t.element != first.element:
                raise self.error(f"kiln.concat inputs have types {first.element} and {t.element}", DTypeError)
            if t.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
                raise self.error(f"cannot concatenate {first.shape} and {t.shape} along axis {axis}", ShapeError)
        shape = list(first.shape)
        shape[axis] = sum(t.shape[axis] for t in types)
        return [first.with_shape(tuple(shape))]

    def evaluate(self, *inputs):
        return np.concatenate(inputs, axis=self.axis)


class FusedOp(TensorOp):
    """``kiln.fused``: a group of ops that becomes one loop nest.

    The body sees only its block arguments (the group's inputs); it ends with
    ``kiln.yield`` of the group's result. Values inside never touch memory.
    An ``arena_offset`` attribute, when present, places the result in the
    function's memory arena::

        %2 = kiln.fused(%in0 = %x, %in1 = %b) -> tensor<4x8xf32> {
          %0 = kiln.broadcast_to %in1 : (tensor<8xf32>) -> tensor<4x8xf32>
          %1 = kiln.add %in0, %0 : tensor<4x8xf32>
          %2 = kiln.tanh %1 : tensor<4x8xf32>
          kiln.yield %2 : tensor<4x8xf32>
        }
    """

    name = "kiln.fused"
    operand_names = ("inputs*",)
    num_regions = 1
    isolated_from_above = True

    @property
    def body(self):
        return self.regions[0].block

    def verify(self):
        super().verify()
        body = self.body
        if [a.type for a in body.args] != [v.type for v in self.operands]:
            raise self.error("kiln.fused: block arguments must match the inputs")
        if not body.ops or not isinstance(body.ops[-1], YieldOp):
            raise self.error("kiln.fused body must end with kiln.yield")
        if [v.type for v in body.ops[-1].operands] != [r.type for r in self.results]:
            raise self.error("kiln.fused: kiln.yield must match the results")

    def evaluate(self, *inputs):
        env = dict(zip(self.body.args, inputs))
        for op in self.body.ops[:-1]:
            env[op.results[0]] = np.asarray(op.evaluate(*(env[v] for v in op.operands)))
        (result,) = (env[v] for v in self.body.ops[-1].operands)
        return result

    def print_custom(self, printer):
        pairs = ", ".join(f"{printer.define(a)} = {printer.name_of(v)}" for a, v in zip(self.body.args, self.operands))
        results = [str(r.type) for r in self.results]
        printer.write(f"kiln.fused({pairs})")
        printer.write(format_attr_dict(self.attributes))
        printer.write(f" -> {results[0] if len(results) == 1 else '(' + ', '.join(results) + ')'} ")
        printer.print_region(self.regions[0])

    @classmethod
    def parse_custom(cls, parser, num_results):
        parser.expect("(")
        names, inputs = [], []

        def pair():
            names.append(parser.parse_argument_name())
            parser.expect("=")
            inputs.append(parser.parse_value())

        parser.comma_list(pair, ")")
        attributes = parser.parse_attr_dict()
        parser.expect("->")
        types = parser.parse_type_list()
        region = parser.parse_region(entry_args=list(zip(names, [v.type for v in inputs])))
        return cls(inputs, attributes, types, [region])


class YieldOp(Operation):
    """``kiln.yield``: the results of a kiln.fused body."""

    name = "kiln.yield"
    traits = frozenset({TERMINATOR})
    operand_names = ("values*",)

    def infer_result_types(self):
        return []

    def print_custom(self, printer):
        printer.write(
            f"kiln.yield {printer.operands(self.operands)} : " + ", ".join(str(v.type) for v in self.operands)
        )

    @classmethod
    def parse_custom(cls, parser, num_results):
        operands = parser.parse_operands()
        parser.expect(":")
        parser.comma_list_until(parser.parse_type, len(operands))
        return cls(operands, {})


TENSOR_OPS = tuple(
    cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, TensorOp) and cls.__dict__.get("name")
)


def ops_with(trait) -> tuple:
    """The tensor op classes that have `trait` (for tables keyed by op class)."""
    return tuple(cls for cls in TENSOR_OPS if cls.has_trait(trait))


ELEMENTWISE_OPS = ops_with(ELEMENTWISE)
REDUCTION_OPS = ops_with(REDUCTION)
VIEW_OPS = ops_with(VIEW)
