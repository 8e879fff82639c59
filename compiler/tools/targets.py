"""What a ``kiln`` command compiles, and at which input specs.

A target is ``path.py:function`` (the specs come from its parameter annotations, such as
``x: kiln.f32[256, 784]``; a dict parameter may be bound to the tensors of a SafeTensors
file with ``--weights``) or an ONNX model, ``model.onnx`` (the specs come from its graph
inputs; a symbolic dimension is given a size with ``--input-shape name=1,3,224,224``).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass

import numpy as np

from kiln.dialects import Location
from kiln.errors import KilnError, as_user_error, display_path, filtering_off
from kiln.frontend import pytree
from kiln.frontend.specs import TensorSpec
from kiln.frontend.trace import ssa_name
from kiln.jit import CompiledFunction, compile
from kiln.target import resolve_target
from kiln.tools.weights import bind_weights, load_weights


@dataclass
class Target:
    """A compiled function, the specs to lower it at, and (for an ONNX model) the graph's
    input and output names, which a built library's header uses. With ONNX weights as an
    argument, `weights` is their value, the last argument, which `specs` leave out."""

    compiled: CompiledFunction
    specs: list
    input_names: list | None = None
    output_names: list | None = None
    weights: dict | None = None

    def example_arguments(self, seed: int = 0) -> list:
        """Random arrays for the specs (and the model's own weights after them)."""
        arguments = random_arguments(self.specs, seed)
        return arguments if self.weights is None else [*arguments, self.weights]


def random_arguments(specs, seed: int = 0) -> list:
    """Arrays for annotated specs (nested ones too): normal floats, small integers, coin-flip bools."""
    rng = np.random.default_rng(seed)

    def array(spec):
        if spec.dtype.kind == "f":
            return rng.standard_normal(spec.shape).astype(spec.dtype)
        if spec.dtype.kind == "b":
            return rng.random(spec.shape) < 0.5
        return rng.integers(-8, 8, spec.shape).astype(spec.dtype)

    arguments = []
    for spec in specs:
        leaves, treedef = pytree.flatten(spec)
        arguments.append(pytree.unflatten(treedef, [array(leaf) for leaf in leaves]))
    return arguments


def load_target(
    target: str,
    input_shapes: list | None = None,
    weights: str | None = None,
    weights_param: str | None = None,
    onnx_weights: str = "constants",
    compile_target: str | None = None,
) -> Target:
    """`target` (``path.py:function`` or ``model.onnx``) compiled, with its input specs.

    `input_shapes` are ``name=d0,d1,...`` strings for an ONNX model's inputs; `weights` a
    SafeTensors file bound to a Python function's dict parameter (`weights_param`, or the
    only one whose annotation is a dict of specs); `onnx_weights` is ``kiln.onnx.load``'s
    `weights` ("constants" or "arguments"). `compile_target` is ``kiln.compile``'s `target`
    (``"cpu"``, ``"cuda"``, ...); None keeps the function's own (``cpu`` unless the file
    compiled it for another)."""
    if compile_target is not None:
        resolve_target(compile_target)  # an unknown name raises, listing the known ones
    if is_onnx(target):
        if weights is not None or weights_param is not None:
            raise KilnError("--weights binds a Python function's dict parameter; an ONNX model carries its own weights")
        return load_onnx(target, parse_input_shapes(input_shapes or []), onnx_weights, compile_target or "cpu")
    if input_shapes:
        raise KilnError("--input-shape is for ONNX models; a Python function's shapes come from its annotations")
    compiled, specs = load_function(target, compile_target)
    if weights is not None:
        compiled, specs = bind_weights_file(compiled, specs, weights, weights_param)
    elif weights_param is not None:
        raise KilnError("--weights-param names the parameter that --weights binds; give --weights too")
    return Target(compiled, specs)


def is_onnx(target: str) -> bool:
    return target.lower().endswith(".onnx")


def load_function(target: str, compile_target: str | None = None):
    """Import ``path.py:function`` and return (the compiled function, its input specs).
    `compile_target` (``"cuda"``, ...) recompiles a function the file compiled for another
    target; None keeps its own."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise KilnError(f"expected path.py:function or model.onnx, got {target!r}")
    if not os.path.isfile(path):
        raise KilnError(f"no such file: {path}")
    module_name = "_kiln_cli_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file failed to import: say where, in one line
        error = as_user_error(exc)
        if error is None or filtering_off():
            raise
        raise error from None
    finally:
        sys.path.pop(0)
    fn = getattr(module, name, None)
    if fn is None:
        raise KilnError(f"{path} has no function {name!r}")
    if not isinstance(fn, CompiledFunction):
        compiled = compile(fn, target=compile_target or "cpu")
    elif compile_target is None or compile_target == fn.target:
        compiled = fn
    else:
        compiled = CompiledFunction(fn.fn, target=compile_target, **_options(fn, with_target=False))
    return compiled, annotated_specs(compiled.fn)


def _options(compiled: CompiledFunction, with_target: bool = True) -> dict:
    """`compiled`'s compile options, to make another CompiledFunction like it."""
    options = {
        "static_argnames": compiled.static_argnames,
        "optimize": compiled.optimize,
        "remat": compiled.remat,
        "schedule": compiled.schedule,
        "tuning_db": compiled.tuning_db,
        "debug": compiled.debug,
    }
    return {"target": compiled.target, **options} if with_target else options


def annotated_specs(fn) -> list:
    """The spec of each parameter of `fn`, from its annotation (a spec, or a dict or tuple of them)."""
    try:
        annotations = inspect.get_annotations(fn, eval_str=True)
    except Exception as exc:  # a string annotation (from __future__ import annotations) that fails
        error = as_user_error(exc)
        if error is None or filtering_off():
            raise
        if error.loc is None or error.loc.file.startswith("<"):  # evaluated from a string: no line of its own
            code = inspect.unwrap(fn).__code__
            error = type(error)(error.message, Location(display_path(code.co_filename), code.co_firstlineno))
        raise error from None
    specs = []
    for param in inspect.signature(fn).parameters.values():
        if param.name not in annotations:
            raise KilnError(
                f"parameter '{param.name}' of {fn.__name__} has no input spec; annotate it, "
                f"e.g. {param.name}: kiln.f32[8, 4]"
            )
        spec = annotations[param.name]
        if not all(isinstance(leaf, TensorSpec) for leaf in pytree.flatten(spec)[0]):
            raise KilnError(f"the annotation of '{param.name}' is not a kiln spec like kiln.f32[8, 4]: {spec!r}")
        specs.append(spec)
    return specs


# ----- --weights: a dict parameter bound to a SafeTensors file -----


def bind_weights_file(compiled: CompiledFunction, specs: list, path: str, param: str | None):
    """`compiled` with its dict parameter `param` (by default the only dict one) fixed to the
    tensors of the SafeTensors file `path`, which become constants; returns it and the specs
    of the parameters left."""
    parameters = list(inspect.signature(compiled.fn).parameters)
    index = _weights_parameter(compiled.__name__, parameters, specs, param)
    values = bind_weights(specs[index], load_weights(path), what=os.path.basename(path))
    bound = _without_parameter(compiled.fn, index, values)
    options = _options(compiled)
    del options["static_argnames"]  # the bound function's parameters are numbered anew
    return CompiledFunction(bound, **options), specs[:index] + specs[index + 1 :]


def _weights_parameter(function: str, parameters: list, specs: list, param: str | None) -> int:
    dicts = [name for name, spec in zip(parameters, specs) if isinstance(spec, dict)]
    if param is not None:
        if param not in parameters:
            raise KilnError(f"--weights-param {param}: {function} has no parameter {param!r}")
        if param not in dicts:
            raise KilnError(f"--weights-param {param}: the annotation of {param!r} is not a dict of specs")
        return parameters.index(param)
    if len(dicts) != 1:
        found = f"{len(dicts)} ({', '.join(dicts)})" if dicts else "none"
        raise KilnError(
            f"--weights binds the parameter of {function} annotated with a dict of specs, "
            f"and {function} has {found}; name one with --weights-param"
        )
    return parameters.index(dicts[0])


def _without_parameter(fn, index: int, value):
    """`fn` with its parameter number `index` fixed to `value`, and gone from its signature."""
    signature = inspect.signature(fn)
    left = [p for k, p in enumerate(signature.parameters.values()) if k != index]

    @functools.wraps(fn)
    def bound(*args):
        return fn(*args[:index], value, *args[index:])

    bound.__signature__ = signature.replace(parameters=left)
    return bound


# ----- ONNX models -----


def load_onnx(path: str, input_shapes: dict, weights: str = "constants", compile_target: str = "cpu") -> Target:
    """The ONNX model at `path` at its graph inputs' shapes (`input_shapes`, input name ->
    shape, for the ones it leaves symbolic), its weights compiled in or (``weights=
    "arguments"``) passed as the last argument, compiled for `compile_target`."""
    if not os.path.isfile(path):
        raise KilnError(f"no such file: {path}")
    import kiln.onnx  # noqa: PLC0415 (the ONNX front end, which needs the optional onnx package)

    name = ssa_name(os.path.splitext(os.path.basename(path))[0]) or "model"
    try:
        compiled = kiln.onnx.load(path, weights=weights, name=name, target=compile_target)
    except ModuleNotFoundError as exc:
        if exc.name != "onnx":
            raise
        from kiln.onnx.graph import ONNX_MISSING  # noqa: PLC0415

        raise KilnError(ONNX_MISSING) from None
    inputs = compiled.graph.inputs
    unknown = sorted(set(input_shapes) - {v.name for v in inputs})
    if unknown:
        names = ", ".join(v.name for v in inputs) or "none"
        raise KilnError(f"--input-shape {unknown[0]}: the model has no input {unknown[0]!r} (its inputs: {names})")
    specs = [
        TensorSpec(_input_shape(value, input_shapes.get(value.name)), dtype)
        for value, dtype in zip(inputs, compiled.graph.input_dtypes)
    ]
    return Target(compiled, specs, list(compiled.input_names), list(compiled.output_names), compiled.weights)


def parse_input_shapes(options: list) -> dict:
    """``["x=1,3,224,224", "s="]`` -> ``{"x": (1, 3, 224, 224), "s": ()}``."""
    shapes = {}
    for option in options:
        name, sep, dims = option.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            shape = None
        if not sep or not name or shape is None or any(d < 0 for d in shape):
            raise KilnError(f"--input-shape takes name=d0,d1,... (e.g. x=1,3,224,224), got {option!r}")
        if name in shapes:
            raise KilnError(f"--input-shape gives {name!r} twice")
        shapes[name] = shape
    return shapes


def _input_shape(value, given: tuple | None) -> tuple:
    """The shape of the graph input `value`: its own, or `given`, which must agree with it."""
    tensor_type = value.type.tensor_type
    dims = list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
    shown = "an unknown rank" if dims is None else f"shape [{', '.join(_dim_text(d) for d in dims)}]"
    if given is not None:
        fixed = dims is None or (
            len(dims) == len(given)
            and all(not d.HasField("dim_value") or d.dim_value == n for d, n in zip(dims, given))
        )
        if not fixed:
            raise KilnError(
                f"--input-shape {value.name}={','.join(map(str, given))} does not fit the model's input "
                f"{value.name!r} of {shown}"
            )
        return given
    if dims is not None and all(d.HasField("dim_value") for d in dims):
        return tuple(d.dim_value for d in dims)
    if dims is None:
        raise KilnError(
            f"the model's input {value.name!r} has {shown}; kiln compiles static shapes: "
            f"give its shape with --input-shape {value.name}=d0,d1,..."
        )
    symbolic = [_dim_text(d) for d in dims if not d.HasField("dim_value")]
    example = ",".join(str(d.dim_value) if d.HasField("dim_value") else "1" for d in dims)
    which = f"dimension {symbolic[0]} is" if len(symbolic) == 1 else f"dimensions {', '.join(symbolic)} are"
    raise KilnError(
        f"the model's input {value.name!r} has {shown}, whose {which} symbolic; kiln compiles static shapes: "
        f"give the input's shape with --input-shape {value.name}={example}"
    )


def _dim_text(dim) -> str:
    if dim.HasField("dim_value"):
        return str(dim.dim_value)
    return dim.dim_param or "?"
