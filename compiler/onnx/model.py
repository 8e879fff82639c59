"""``kiln.onnx.load`` and the compiled function it returns, ``OnnxFunction``."""

from __future__ import annotations

import os

import numpy as np

from kiln.errors import ArgumentError
from kiln.frontend.trace import ssa_name
from kiln.jit import CompiledFunction
from kiln.onnx import ops  # noqa: F401  (fills the op table)
from kiln.onnx.graph import GraphFunction, StaticValue, make_python_function, read_model
from kiln.onnx.random_state import CallCounter, draws_random
from kiln.onnx.registry import OPS


class OnnxFunction(CompiledFunction):
    """An imported ONNX model, compiled: a ``kiln.CompiledFunction`` whose positional
    parameters are the graph inputs that are not initializers (keywords may use the ONNX
    names too) and whose result is a tuple of numpy arrays in graph-output order.

    ``input_names``/``output_names`` are the graph's; with ``weights="arguments"`` the last
    parameter, ``weights``, is a dict of the float initializers and ``.weights`` holds the
    model's own values for it. A model with random ops takes ``random_state`` last
    (``uint32[4]``), filled on each call with a fresh state unless given (onnx/random_state.py).
    """

    def __init__(self, graph, fn, parameters: dict, weights_as_argument: bool, static_inputs=(), **options):
        unknown = sorted(set(static_inputs) - set(parameters))
        if unknown:
            raise ArgumentError(f"static_inputs {unknown} are not graph inputs of the model")
        self.static_inputs = tuple(static_inputs)
        self._static = [parameters[name] for name in static_inputs]
        super().__init__(fn, static_argnames=self._static, **options)
        self.graph = graph
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = list(graph.outputs)
        self._parameter_of = parameters
        self.weights = graph.argument_weights() if weights_as_argument else None
        self._random_calls = CallCounter() if draws_random(graph.nodes) else None

    def _renamed(self, kwargs: dict) -> dict:
        known = set(self._parameter_of) | set(self._parameter_of.values()) | {"weights", "random_state"}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ArgumentError(f"the model has no input {unknown[0]!r}; its inputs are {self.input_names}")
        return {self._parameter_of.get(k, k): v for k, v in kwargs.items()}

    def _bound(self, args, kwargs, call=True):
        """`args` and `kwargs` by parameter name, the static inputs' arrays made hashable, and
        the random state of this call (a placeholder of its type when only lowering)."""
        kwargs = self._renamed(kwargs)
        if self._random_calls is not None and "random_state" not in kwargs:
            kwargs["random_state"] = self._random_calls.next_state() if call else np.zeros(4, np.uint32)
        if not self._static:
            return args, kwargs
        names = list(self._signature.parameters)
        kwargs.update(zip(names, args))
        for name in self._static:
            if name in kwargs:
                kwargs[name] = StaticValue(kwargs[name])
        return (), kwargs

    def __call__(self, *args, out=None, **kwargs):
        if kwargs or self._random_calls is not None or self._static:
            args, kwargs = self._bound(args, kwargs)
        result = super().__call__(*args, out=out, **kwargs)
        return tuple(np.asarray(r) if isinstance(r, np.generic) else r for r in result)

    def lower(self, *args, **kwargs):
        args, kwargs = self._bound(args, kwargs, call=False)
        return super().lower(*args, **kwargs)

    def profile(self, *args, seconds: float = 2.0, **kwargs):
        args, kwargs = self._bound(args, kwargs, call=False)
        return super().profile(*args, seconds=seconds, **kwargs)


def load(
    model, *, weights: str = "constants", name: str | None = None, static_inputs=(), **compile_options
) -> OnnxFunction:
    """Import the ONNX model `model` (a path, bytes or an ``onnx.ModelProto``) and compile it.

    The model is parsed and checked with the ``onnx`` package (``onnx.checker``; local
    functions inlined). `weights` is ``"constants"`` (initializers are compiled in) or
    ``"arguments"`` (float initializers become one dict argument, ``weights``, so they
    change without a recompile and ``kiln.grad`` reaches them; integer initializers, which
    are shapes and indices, stay constants). `compile_options` are ``kiln.compile``'s
    (``target=``, ``schedule=``, ``optimize=``, ``debug=``, ...). `static_inputs` names graph
    inputs whose values are compiled in, as static arguments are (a new value is traced and
    compiled anew): those a model uses as shapes, axes, pads or counts, which kiln must know
    when it imports the model.

    Shapes are static: each new input shape is traced once, shape arithmetic in the graph is
    done then, and a value that would need a data-dependent shape raises
    ``kiln.UnsupportedError`` naming the node, its op type and opset, as do an unknown op,
    an attribute kiln does not support and a dtype it does not compute in (string, complex,
    bfloat16, float8). A model the checker refuses raises ``kiln.KilnError``.

    >>> import onnx
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "relu",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    >>> relu = kiln.onnx.load(helper.make_model(graph))
    >>> relu(np.array([-1.0, 0.0, 2.0], np.float32))
    (array([0., 0., 2.], dtype=float32),)
    """
    if weights not in ("constants", "arguments"):
        raise ValueError(f"weights must be 'constants' or 'arguments', got {weights!r}")
    source = os.path.basename(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else "model.onnx"
    proto = read_model(model)
    graph = GraphFunction(proto, source)
    name = name or _function_name(proto, source)
    fn, parameters = make_python_function(graph, weights == "arguments", name)
    return OnnxFunction(graph, fn, parameters, weights == "arguments", tuple(static_inputs), **compile_options)


def _function_name(proto, source: str) -> str:
    stem = proto.graph.name or os.path.splitext(source)[0]
    return ssa_name(stem) or "model"


def supported_ops() -> list:
    """The ONNX op types kiln imports directly (others with an ONNX function body are
    expanded into it)."""
    return sorted(OPS)
