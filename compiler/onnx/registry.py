"""The ONNX operator table: one Python handler per ``op_type`` of the default domain.

A handler receives a `Node` (attributes, the opset the model imports, where the node is)
and the node's input values, and returns its output value or a tuple of them. Values are
numpy arrays while they are known at import time (initializers, constants, shapes) and
Tracers once they depend on a graph input, and handlers are written once, in numpy, for
both: numpy computes the constant part of a model at import time (ONNX's shape arithmetic
folds away, as the issue of static shapes requires) and the tracer records the rest as
``tensor`` ops. Semantics follow the ONNX operator specification
(https://onnx.ai/onnx/operators/), opset by opset where they changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kiln.errors import ArgumentError, KilnError, UnsupportedError
from kiln.frontend.traced_ops import context_of, lift
from kiln.frontend.tracing import Tracer
from kiln.onnx.random_state import node_key

_REQUIRED = object()


@dataclass(frozen=True)
class OpDef:
    handler: object
    attributes: frozenset  # every attribute the handler reads; any other is refused
    since: int  # the first opset this handler serves (older opsets are refused)


OPS: dict[str, OpDef] = {}


def op(*op_types: str, attributes=(), since: int = 1):
    """Register the decorated handler for `op_types`; `attributes` are the names it reads."""

    def register(handler):
        for op_type in op_types:
            if op_type in OPS:
                raise KilnError(f"ONNX op {op_type} registered twice")
            OPS[op_type] = OpDef(handler, frozenset(attributes), since)
        return handler

    return register


class Node:
    """One ``NodeProto`` being imported: its attributes as Python values and the opset
    of its domain. ``error()`` builds the exception that names the node."""

    def __init__(self, proto, opset: int, index: int, graph_runner=None, random_state=None):
        import onnx  # noqa: PLC0415 (the optional extra, imported only when a model is)

        self.proto = proto
        self._graph_runner = graph_runner
        self._random_state = random_state  # uint32[4] per call, for the random ops (onnx/random_state.py)
        self.opset = opset
        self.index = index
        self.op_type = proto.op_type
        self.name = proto.name or f"#{index}"
        self._attributes = {}
        for attribute in proto.attribute:
            if attribute.ref_attr_name:
                raise self.error(f"attribute {attribute.name!r} refers to a function attribute")
            self._attributes[attribute.name] = onnx.helper.get_attribute_value(attribute)

    @property
    def attribute_names(self) -> set:
        """The names of the attributes the node sets."""
        return set(self._attributes)

    def __contains__(self, name: str) -> bool:
        return name in self._attributes

    def attr(self, name: str, default=_REQUIRED):
        """The attribute `name` as a Python value (int, float, str, list, numpy array for a
        tensor); `default` when the node leaves it out, else an error naming the node."""
        if name not in self._attributes:
            if default is _REQUIRED:
                raise self.error(f"the required attribute {name!r} is missing", ArgumentError)
            return default
        value = self._attributes[name]
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode() for v in value]
        if hasattr(value, "data_type"):  # a TensorProto
            return to_numpy(value, self)
        return value

    def ints(self, name: str, default=None):
        value = self.attr(name, default)
        return None if value is None else [int(v) for v in value]

    def run_graph(self, graph, inputs: dict) -> list:
        """The outputs of `graph` (one of this node's GRAPH attributes, e.g. If's
        ``then_branch``), run with `inputs` (name -> value) bound to its inputs in a scope
        that also sees every value of the scope this node runs in, as ONNX's subgraphs do."""
        if self._graph_runner is None:
            raise self.error("cannot run a subgraph outside of a model being imported")
        return self._graph_runner(graph, inputs)

    def random_key(self):
        """This node's kiln.random key for the current call (see onnx/random_state.py)."""
        if self._random_state is None:
            raise self.error("random ops inside a control-flow subgraph (If, Loop, Scan) are not supported")
        return node_key(self, self._random_state)

    def error(self, message: str, cls=UnsupportedError) -> KilnError:
        return cls(f"ONNX node {self.name!r} ({self.op_type}, opset {self.opset}): {message}")


def to_numpy(tensor, node: Node | None = None) -> np.ndarray:
    """A ``TensorProto``'s value as a numpy array (the ``onnx`` package reads it, with its
    external data); a dtype kiln does not compute in is an ``UnsupportedError``."""
    from onnx import numpy_helper  # noqa: PLC0415

    numpy_dtype(tensor.data_type, node, tensor.name)
    return numpy_helper.to_array(tensor)


_NUMPY_DTYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}


def numpy_dtype(elem_type: int, node: Node | None = None, what: str = "") -> np.dtype:
    """The numpy dtype of ONNX's ``TensorProto.DataType`` `elem_type`; the types kiln
    does not compute in (string, complex, bfloat16, the float8/float4 and 4-bit integer
    types) raise ``UnsupportedError``."""
    if elem_type in _NUMPY_DTYPES:
        return np.dtype(_NUMPY_DTYPES[elem_type])
    import onnx  # noqa: PLC0415

    name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
    message = f"{what + ': ' if what else ''}ONNX type {name} is not supported by kiln"
    raise node.error(message) if node is not None else UnsupportedError(message)


def is_traced(value) -> bool:
    return isinstance(value, Tracer)


def traced_if(data, *others):
    """`data` as a Tracer where any of `others` is one, else `data` itself. A handler that
    indexes `data` by an index computed from `others` with ``np.take``, ``data[index]`` or
    ``data[index] = ...`` must: where `data` is an initializer and the index depends on a
    graph input, numpy would read the traced index as an array (a ``TracerConversionError``),
    because these dispatch on `data` alone (``np.take_along_axis`` dispatches on both)."""
    if not is_traced(data) and any(is_traced(x) for x in others):
        return lift(context_of(others), data, data.dtype)
    return data


def constant(node: Node, value, what: str) -> np.ndarray:
    """`value` as a numpy array known at import time: shapes, axes, pads and the like must
    be, because kiln's shapes are static."""
    if value is None:
        return None
    if is_traced(value):
        raise node.error(
            f"input {what!r} must be known when the model is imported (an initializer, a Constant or "
            "computed from shapes), because kiln compiles static shapes; here it depends on a graph input"
        )
    return np.asarray(value)
