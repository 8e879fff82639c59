"""From an ONNX ``ModelProto`` to a Python function over numpy values, which kiln then
traces like any numpy function: the importer is a define-by-run front end whose "user
code" is the model's graph, node by node.

Each node's handler (``registry.OPS``) runs on numpy arrays where its inputs are known at
import time and on Tracers where they depend on a graph input, so constant subgraphs
(shape arithmetic, weight preprocessing) are computed once by numpy, and the rest is
recorded as ``tensor`` ops located at the node (``loc("model.onnx":<node number>:0)``).
Ops the table lacks but that the ONNX standard defines as a function of other ops
(``schema.has_function``) are expanded into that function's body, as the spec allows.
"""

from __future__ import annotations

import inspect
import os
import re

import numpy as np

from kiln.dialects import Location
from kiln.errors import ArgumentError, DTypeError, KilnError, UnsupportedError
from kiln.frontend.tracing import Tracer, source_location
from kiln.onnx.random_state import draws_random
from kiln.onnx.registry import OPS, Node, numpy_dtype, to_numpy

_DEFAULT_DOMAINS = ("", "ai.onnx")


# kiln's name on the package index belongs to another project, so installing the extra by
# that name would install theirs: kiln installs from its checkout.
ONNX_MISSING = "ONNX models need the onnx package: pip install onnx (or, in kiln's checkout, pip install -e '.[onnx]')"


def read_model(model):
    """`model` (a path, bytes or ``onnx.ModelProto``) parsed, its local functions inlined and
    checked by the ``onnx`` package; a model that does not parse or check is a ``KilnError``."""
    try:
        import onnx  # noqa: PLC0415 (the optional extra)
    except ImportError:
        raise KilnError(ONNX_MISSING) from None

    try:
        if isinstance(model, onnx.ModelProto):
            proto = model
        elif isinstance(model, (bytes, bytearray)):
            proto = onnx.load_from_string(bytes(model))
        elif isinstance(model, (str, os.PathLike)):
            if not os.path.isfile(model):
                if os.path.isdir(model):
                    raise KilnError(f"{os.fspath(model)} is a directory, not an ONNX model file")
                raise KilnError(f"no such ONNX model file: {os.fspath(model)}")
            proto = onnx.load(os.fspath(model))
        else:
            raise ArgumentError(
                f"kiln.onnx.load takes a path, bytes or an onnx.ModelProto, not a {type(model).__name__}"
            )
        onnx.checker.check_model(proto)
    except (onnx.checker.ValidationError, onnx.onnx_cpp2py_export.shape_inference.InferenceError) as exc:
        raise KilnError(f"the ONNX model does not pass onnx.checker: {exc}") from None
    except Exception as exc:  # protobuf's DecodeError and friends
        if isinstance(exc, KilnError):
            raise
        raise KilnError(f"could not read the ONNX model: {type(exc).__name__}: {exc}") from None
    if proto.functions:
        proto = onnx.inliner.inline_local_functions(proto)
    opset = _default_opset(proto)
    if opset > onnx.defs.onnx_opset_version():
        raise UnsupportedError(
            f"the model imports ONNX opset {opset}; the installed onnx package knows opsets up to "
            f"{onnx.defs.onnx_opset_version()} (upgrade onnx, or export the model for an older opset)"
        )
    if opset < OLDEST_OPSET:
        # Opsets before 7 broadcast by attributes (broadcast=1, axis) and mark inference by
        # is_test; onnx's version converter rewrites them into opset 7's numpy broadcasting.
        try:
            proto = onnx.version_converter.convert_version(proto, OLDEST_OPSET)
        except Exception as exc:
            raise UnsupportedError(
                f"the model imports ONNX opset {opset}; kiln imports opset {OLDEST_OPSET} and later, and "
                f"onnx's version converter could not raise this model to {OLDEST_OPSET}: {exc}"
            ) from None
    return proto


OLDEST_OPSET = 7


def _default_opset(proto) -> int:
    versions = [entry.version for entry in proto.opset_import if entry.domain in _DEFAULT_DOMAINS]
    return versions[0] if versions else OLDEST_OPSET


def parameter_names(names) -> list:
    """Python identifiers for ONNX value names ("input.1" -> "input_1"), distinct."""
    taken, result = set(), []
    for name in names:
        base = re.sub(r"\W", "_", name) or "input"
        if base[0].isdigit() or base in ("weights",):
            base = "input_" + base
        candidate, k = base, 1
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        result.append(candidate)
    return result


class GraphFunction:
    """A model's main graph as a callable on numpy values or Tracers.

    ``inputs`` are the graph inputs that are not initializers, in graph order;
    ``weights`` the initializers (name -> numpy array); ``outputs`` the graph's output names.
    """

    def __init__(self, model, source: str = "model.onnx"):
        import onnx  # noqa: PLC0415

        self.source = source
        graph = model.graph
        # The nodes alone, copied out of the model: keeping the model would keep a second copy
        # of every weight (the initializers' bytes) for as long as the compiled function lives.
        # (A message read from the model keeps all of it alive: the inputs are copied too.)
        kept = onnx.GraphProto(node=graph.node, input=graph.input)
        self.nodes = kept.node
        self.opsets = {entry.domain: entry.version for entry in model.opset_import}
        self.weights = {t.name: to_numpy(t) for t in graph.initializer}
        self.inputs = [v for v in kept.input if v.name not in self.weights]
        self.input_dtypes = [self._value_dtype(v) for v in self.inputs]
        self.outputs = [v.name for v in graph.output]
        self.expected = _inferred_types(model)
        self.check_ops(graph.node)

    def check_ops(self, nodes) -> None:
        """Refuse, when the model is loaded rather than at its first call, every node whose op
        kiln can neither import nor expand (what depends on shapes waits for the trace)."""
        import onnx  # noqa: PLC0415

        for index, proto in enumerate(nodes):
            name = proto.name or f"#{index}"
            domain = proto.domain or ""
            if domain not in _DEFAULT_DOMAINS:
                version = self.opsets.get(domain, "?")
                raise UnsupportedError(
                    f"ONNX node {name!r} ({proto.op_type}, {domain} opset {version}) is in domain {domain!r}; "
                    "kiln imports the default ONNX domain only"
                )
            if proto.op_type not in OPS:
                opset = self.opsets.get("", self.opsets.get("ai.onnx", OLDEST_OPSET))
                try:
                    schema = onnx.defs.get_schema(proto.op_type, opset, "")
                except onnx.defs.SchemaError:
                    schema = None
                if schema is None or not (schema.has_function or schema.has_context_dependent_function):
                    raise UnsupportedError(
                        f"ONNX node {name!r} ({proto.op_type}, opset {opset}): is not supported by kiln yet"
                    )
            for attribute in proto.attribute:
                for subgraph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                    self.check_ops(subgraph.node)

    @staticmethod
    def _value_dtype(value_info):
        if not value_info.type.HasField("tensor_type"):
            raise UnsupportedError(f"graph input {value_info.name!r} is not a tensor; kiln imports tensor inputs only")
        return numpy_dtype(value_info.type.tensor_type.elem_type, what=f"graph input {value_info.name!r}")

    def check_arguments(self, arguments: list) -> None:
        """Each argument has its graph input's dtype and rank, and its fixed dimensions."""
        for value_info, dtype, argument in zip(self.inputs, self.input_dtypes, arguments):
            if not hasattr(argument, "dtype"):
                raise ArgumentError(
                    f"ONNX input {value_info.name!r} takes an array of {dtype}, got a {type(argument).__name__}"
                )
            got_dtype, got_shape = np.dtype(argument.dtype), tuple(argument.shape)
            if got_dtype != dtype:
                raise DTypeError(f"ONNX input {value_info.name!r} is {dtype}, got an array of {got_dtype}")
            dims = value_info.type.tensor_type.shape.dim
            if value_info.type.tensor_type.HasField("shape") and (
                len(dims) != len(got_shape)
                or any(d.HasField("dim_value") and d.dim_value != n for d, n in zip(dims, got_shape))
            ):
                wanted = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
                raise ArgumentError(f"ONNX input {value_info.name!r} has shape {wanted}, got {list(got_shape)}")

    def argument_weights(self) -> dict:
        """The initializers ``weights="arguments"`` makes an argument: the float ones."""
        return {name: value for name, value in self.weights.items() if value.dtype.kind == "f"}

    def check_weights(self, weights) -> None:
        """`weights` has exactly the float initializers' names, each with its dtype and shape:
        a misspelt or missing name would otherwise run with the model's own value."""
        expected = self.argument_weights()
        if not isinstance(weights, dict):
            raise ArgumentError(
                f"weights must be a dict of the model's float initializers, got a {type(weights).__name__}"
            )
        missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
        if missing or extra:
            raise ArgumentError(
                "weights must have exactly the model's float initializers"
                + (f"; missing {missing[:5]}" if missing else "")
                + (f"; not in the model {extra[:5]}" if extra else "")
            )
        for name, value in weights.items():
            want = expected[name]
            if np.dtype(value.dtype) != want.dtype:
                raise DTypeError(f"weight {name!r} is {want.dtype}, got {np.dtype(value.dtype)}")
            if tuple(value.shape) != want.shape:
                raise ArgumentError(f"weight {name!r} has shape {list(want.shape)}, got {list(value.shape)}")

    def __call__(self, arguments: list, weights: dict | None = None, random_state=None) -> tuple:
        values = dict(self.weights)
        if weights is not None:
            self.check_weights(weights)
            values.update(weights)
        self.check_arguments(arguments)
        values.update((v.name, a) for v, a in zip(self.inputs, arguments))
        self.run_nodes(self.nodes, values, self.opsets, top_level=True, random_state=random_state)
        missing = [name for name in self.outputs if name not in values]
        if missing:
            raise KilnError(f"the ONNX graph never computes its outputs {missing}")
        return tuple(values[name] for name in self.outputs)

    def run_nodes(self, nodes, values: dict, opsets: dict, top_level: bool = False, random_state=None) -> None:
        for index, proto in enumerate(nodes):
            domain = proto.domain or ""
            if domain not in _DEFAULT_DOMAINS:
                raise UnsupportedError(
                    f"ONNX node {proto.name or '#' + str(index)!r} ({proto.op_type}) is in domain {domain!r}; "
                    "kiln imports the default ONNX domain only"
                )
            opset = opsets.get("", opsets.get("ai.onnx", 1))
            node = Node(proto, opset, index, self._subgraph_runner(values, opsets), random_state)
            inputs = []
            for name in proto.input:
                if name and name not in values:
                    raise KilnError(f"ONNX node {node.name!r} ({node.op_type}) reads {name!r}, which nothing computes")
                inputs.append(values[name] if name else None)
            location = Location(self.source, index + 1, 0) if top_level else None
            with source_location(location) if location else _nothing():
                results = self.run_node(node, inputs, values)
            if not isinstance(results, tuple):
                results = (results,)
            for name, result in zip(proto.output, results):
                if name:
                    values[name] = self._checked(node, name, result)

    def _subgraph_runner(self, outer: dict, opsets: dict):
        def run_graph(graph, inputs: dict) -> list:
            return self.run_subgraph(graph, inputs, outer, opsets)

        return run_graph

    def run_subgraph(self, graph, inputs: dict, outer: dict, opsets: dict) -> list:
        """The outputs of the subgraph `graph` run in a child scope of `outer`: the outer
        values, then the subgraph's initializers, then `inputs` (by the subgraph's input
        names), each shadowing the one before. The outer scope is left as it was."""
        scope = dict(outer)
        scope.update((t.name, to_numpy(t)) for t in graph.initializer)
        scope.update(inputs)
        self.run_nodes(graph.node, scope, opsets)
        missing = [v.name for v in graph.output if v.name not in scope]
        if missing:
            raise KilnError(f"the ONNX subgraph {graph.name!r} never computes its outputs {missing}")
        return [scope[v.name] for v in graph.output]

    def run_node(self, node: Node, inputs: list, values: dict):
        definition = OPS.get(node.op_type)
        if definition is None:
            return self.expand_function(node, inputs)
        if node.opset < definition.since:
            raise node.error(f"kiln imports {node.op_type} from opset {definition.since} on")
        unknown = sorted(node.attribute_names - definition.attributes)
        if unknown:
            raise node.error(f"attribute {unknown[0]!r} is not supported")
        try:
            return definition.handler(node, *inputs)
        except KilnError as exc:
            if f"ONNX node {node.name!r}" in str(exc):
                raise
            raise type(exc)(f"ONNX node {node.name!r} ({node.op_type}, opset {node.opset}): {exc}") from None

    def expand_function(self, node: Node, inputs: list):
        """An op the table lacks, run as the function body the ONNX standard gives it."""
        import onnx  # noqa: PLC0415

        try:
            schema = onnx.defs.get_schema(node.op_type, node.opset, "")
        except onnx.defs.SchemaError:
            raise node.error("is not an ONNX operator kiln knows") from None
        body = None
        if schema.has_function:
            body = schema.function_body
        elif schema.has_context_dependent_function:
            types = [_type_proto(value).SerializeToString() for value in inputs]
            body = onnx.FunctionProto()
            body.ParseFromString(schema.get_context_dependent_function(node.proto.SerializeToString(), types))
        if body is None:
            raise node.error("is not supported by kiln yet")
        scope = {formal: value for formal, value in zip(body.input, inputs) if value is not None}
        nodes = [_bind_attributes(n, node.proto, schema) for n in body.node]
        opsets = {entry.domain: entry.version for entry in body.opset_import} or {"": node.opset}
        self.run_nodes(nodes, scope, opsets)
        return tuple(scope.get(name) for name in body.output)

    def _checked(self, node: Node, name: str, value):
        if value is None:
            return value
        if not isinstance(value, Tracer):
            value = np.asarray(value)
        expected = self.expected.get(name)
        if expected is not None and np.dtype(value.dtype) != expected:
            raise KilnError(
                f"internal: ONNX node {node.name!r} ({node.op_type}, opset {node.opset}) made {name!r} of "
                f"{value.dtype}, but ONNX's type inference says {expected}"
            )
        return value


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _inferred_types(model) -> dict:
    """value name -> numpy dtype, as ``onnx.shape_inference`` gives them (where it can)."""
    import onnx  # noqa: PLC0415

    try:
        inferred = onnx.shape_inference.infer_shapes(_without_large_initializers(model))
    except Exception:  # an inference gap is not the model's fault; kiln checks less then
        return {}
    types = {}
    for value in list(inferred.graph.value_info) + list(inferred.graph.output):
        elem_type = value.type.tensor_type.elem_type if value.type.HasField("tensor_type") else 0
        try:
            types[value.name] = numpy_dtype(elem_type) if elem_type else None
        except UnsupportedError:
            pass
    return {name: dtype for name, dtype in types.items() if dtype is not None}


# Initializers larger than this are weights, never shapes or axes that inference reads.
_INFERENCE_INITIALIZER_BYTES = 64 * 1024


def _without_large_initializers(model):
    """`model` with its large initializers as typed graph inputs instead: the types inference
    gives are the same (only small integer initializers, shapes and axes, feed its values),
    and onnx's inference, which copies the whole model twice through bytes, no longer copies
    the weights (VGG-19's 548 MB took 6 s of every load)."""
    import onnx  # noqa: PLC0415

    graph = model.graph
    sizes = [(t, t.ByteSize()) for t in graph.initializer]
    if all(size <= _INFERENCE_INITIALIZER_BYTES for _, size in sizes):
        return model
    listed = {v.name for v in graph.input}
    light = onnx.GraphProto(
        name=graph.name,
        node=graph.node,
        input=graph.input,
        output=graph.output,
        value_info=graph.value_info,
        initializer=[t for t, size in sizes if size <= _INFERENCE_INITIALIZER_BYTES],
        sparse_initializer=graph.sparse_initializer,
    )
    light.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t, size in sizes
        if size > _INFERENCE_INITIALIZER_BYTES and t.name not in listed
    )
    return onnx.ModelProto(
        ir_version=model.ir_version, opset_import=model.opset_import, graph=light, functions=model.functions
    )


def _type_proto(value):
    import onnx  # noqa: PLC0415

    if value is None:
        return onnx.TypeProto()
    elem_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(value.dtype))
    return onnx.helper.make_tensor_type_proto(elem_type, list(value.shape))


def _bind_attributes(body_node, caller, schema):
    """A function-body node with its ``ref_attr_name`` attributes replaced by the calling
    node's values (or the schema's defaults; left out when neither has one)."""
    if not any(a.ref_attr_name for a in body_node.attribute):
        return body_node
    import onnx  # noqa: PLC0415

    given = {a.name: a for a in caller.attribute}
    node = onnx.NodeProto()
    node.CopyFrom(body_node)
    del node.attribute[:]
    for attribute in body_node.attribute:
        if not attribute.ref_attr_name:
            node.attribute.append(attribute)
            continue
        source = given.get(attribute.ref_attr_name)
        if source is None:
            default = schema.attributes.get(attribute.ref_attr_name)
            if default is None or not default.default_value.name:
                continue
            source = default.default_value
        bound = onnx.AttributeProto()
        bound.CopyFrom(source)
        bound.name = attribute.name
        node.attribute.append(bound)
    return node


class StaticValue:
    """A graph input's array passed by value (``static_inputs``): hashable, so that kiln
    traces and compiles once per distinct value, as it does for a static argument."""

    def __init__(self, array):
        self.array = np.asarray(array)
        self._key = (self.array.dtype.str, self.array.shape, self.array.tobytes())

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, StaticValue) and self._key == other._key


def make_python_function(graph: GraphFunction, weights_as_argument: bool, name: str):
    """A Python function with one parameter per graph input (then ``weights`` when weights
    are an argument, and ``random_state`` when the graph draws random numbers, see
    onnx/random_state.py) returning the tuple of graph outputs, for ``kiln.compile``."""
    names = parameter_names([v.name for v in graph.inputs])
    random = draws_random(graph.nodes)

    def model(*args):
        args = [a.array if isinstance(a, StaticValue) else a for a in args]
        state = weights = None
        if random:
            *args, state = args
        if weights_as_argument:
            *args, weights = args
        return graph(list(args), weights, state)

    parameters = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    if weights_as_argument:
        parameters.append(inspect.Parameter("weights", inspect.Parameter.POSITIONAL_OR_KEYWORD))
    if random:
        parameters.append(inspect.Parameter("random_state", inspect.Parameter.POSITIONAL_OR_KEYWORD))
    model.__signature__ = inspect.Signature(parameters)
    model.__name__ = model.__qualname__ = name
    return model, dict(zip([v.name for v in graph.inputs], names))
