"""From a Python function and its arguments to a ``tensor``-level module.

The arguments are bound to the function's parameters and flattened into
leaves; each leaf becomes one function argument (named after its path, e.g.
``%params_w1``), and the function is run once on Tracers to record its ops.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import numpy as np

from kiln.dialects import builtin, verify
from kiln.dialects import func as F
from kiln.dialects.types import SUPPORTED_DTYPES, FunctionType, dtype_fix_hint, tensor_type
from kiln.errors import ArgumentError, DTypeError, KilnError, TracerConversionError
from kiln.frontend import pytree
from kiln.frontend.numpy_random_guard import refusing_numpy_random, watching_bound_draws
from kiln.frontend.specs import TensorSpec
from kiln.frontend.tracing import TraceContext, Tracer

_INT64 = np.iinfo(np.int64)
_UINT64 = np.iinfo(np.uint64)


@dataclass(frozen=True)
class LeafSpec:
    """What a compiled function is specialized on, per leaf: shape, dtype, weakness. A Python
    int is an int64 (a uint64 from 2**63 on) whatever its value: numpy's checks on the value
    run when the function is called (python_ints)."""

    spec: TensorSpec
    weak: bool = False


@dataclass
class BoundCall:
    """A call's arguments, bound to parameters; the traced ones flattened into leaves.

    Parameters left at their defaults and those named static are not traced:
    the function sees their Python values, and they are part of the cache key.
    """

    signature: inspect.Signature
    arguments: dict
    static: tuple
    treedef: pytree.TreeDef
    paths: list
    leaves: list

    def rebuild(self, leaves):
        """The (args, kwargs) to call the Python function with, from new leaves."""
        traced = [name for name in self.arguments if name not in dict(self.static)]
        arguments = dict(self.arguments)
        arguments.update(zip(traced, pytree.unflatten(self.treedef, leaves)))
        bound = inspect.BoundArguments(self.signature, arguments)
        return bound.args, bound.kwargs


def _takes_any_keyword(signature) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())


def bind(fn, args, kwargs, static_argnames=(), signature=None) -> BoundCall:
    signature = signature or inspect.signature(fn)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        # Python's bind reports a missing argument before an unknown keyword; the misspelt
        # keyword is usually the cause of both, so it is named first.
        unknown = [k for k in kwargs if k not in signature.parameters] if not _takes_any_keyword(signature) else []
        if unknown:
            raise ArgumentError(f"{fn.__name__}() got an unexpected keyword argument {unknown[0]!r}") from None
        raise ArgumentError(f"{fn.__name__}(): {exc}") from None
    static = tuple((k, v) for k, v in bound.arguments.items() if k in static_argnames)
    for name, value in static:
        try:
            hash(value)
        except TypeError:
            raise ArgumentError(f"static argument '{name}' must be hashable, got a {type(value).__name__}") from None
    traced = {k: v for k, v in bound.arguments.items() if k not in static_argnames}
    leaves, treedef = pytree.flatten_with_paths(tuple(traced.values()))
    names = list(traced)
    paths = [names[int(re.match(r"\[(\d+)\]", p).group(1))] + p[p.index("]") + 1 :] for p, _ in leaves]
    return BoundCall(signature, dict(bound.arguments), static, treedef, paths, [leaf for _, leaf in leaves])


def _changes_meaning(cls) -> bool:
    """Whether an ndarray subclass redefines what numpy's operations do on it: np.matrix,
    masked arrays, or one that overrides numpy's dispatch (NEP 13, NEP 18). Plain subclasses
    that only add attributes compute as ndarrays do."""
    return (
        issubclass(cls, (np.matrix, np.ma.MaskedArray))
        or cls.__array_ufunc__ is not np.ndarray.__array_ufunc__
        or cls.__array_function__ is not np.ndarray.__array_function__
    )


def leaf_spec(path: str, leaf) -> LeafSpec:
    """The spec of one argument leaf; a clear error for anything kiln cannot take."""
    if isinstance(leaf, TensorSpec):
        spec, weak = leaf, False
    elif isinstance(leaf, bool) or isinstance(leaf, (np.ndarray, np.generic)):
        if isinstance(leaf, np.ndarray) and _changes_meaning(type(leaf)):
            raise ArgumentError(
                f"argument '{path}' is a {type(leaf).__module__}.{type(leaf).__name__}, an ndarray subclass "
                "whose operations mean something else (np.matrix's * is a matrix product, a masked "
                "array skips masked elements); kiln compiles ndarray semantics, so pass np.asarray() "
                "of it, or for a masked array its filled data"
            )
        spec, weak = TensorSpec.of(leaf), False
    elif device_layout(leaf) is not None:  # an array in GPU memory: kiln.to_device, CuPy, PyTorch
        layout = device_layout(leaf)
        spec, weak = TensorSpec(layout["shape"], np.dtype(layout["typestr"])), False
    elif isinstance(leaf, (int, float)):
        if isinstance(leaf, int) and not _INT64.min <= leaf <= _UINT64.max:
            raise ArgumentError(
                f"argument '{path}' = {leaf} does not fit in int64 or uint64, the dtypes a Python int "
                "argument is traced in; make it a static argument (static_argnames=...)"
            )
        spec, weak = TensorSpec.of(leaf), True
    else:
        raise ArgumentError(
            f"argument '{path}' is a {type(leaf).__name__}; compiled functions take numpy "
            "arrays, Python scalars, and tuples, lists and dicts of them"
        )
    if spec.dtype not in SUPPORTED_DTYPES:
        supported = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise DTypeError(
            f"argument '{path}' has dtype {spec.dtype}, which kiln does not support (it supports {supported})"
            + dtype_fix_hint(spec.dtype)
        )
    return LeafSpec(spec, weak)


def device_layout(leaf):
    """The ``__cuda_array_interface__`` of an array in device memory (kiln's own DeviceArray
    gives it under another name when it is emulated in host memory), else None."""
    return getattr(leaf, "kiln_device_layout", None) or getattr(leaf, "__cuda_array_interface__", None)


def ssa_name(path: str) -> str:
    """``params['w1']`` -> ``params_w1``: a readable SSA name for an argument leaf."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", path).strip("_")
    return name if name and not name[0].isdigit() else f"arg_{name}"


@dataclass
class TracedFunction:
    module: builtin.ModuleOp
    function: F.FuncOp
    out_treedef: pytree.TreeDef
    captures: list  # Tracers of enclosing traces, passed as the last arguments
    int_checks: list  # python_ints.IntCheck: numpy's checks on Python int arguments, run at call time


def trace_flat(name: str, build, specs: list, names: list, exact_leaves=None) -> TracedFunction:
    """Record `build(tracers)`, one Tracer per spec, as a verified function `name`.
    `exact_leaves` says how to get each Python int leaf's value (python_ints.exact) when the
    leaves are not the call's own arguments (a kiln.grad inside a trace)."""
    input_types = [tensor_type(s.spec.shape, s.spec.dtype) for s in specs]
    function = F.FuncOp.create(name, input_types, [], names)
    module = builtin.ModuleOp.empty()
    module.body.append(function)
    ctx = TraceContext(function)
    tracers = [Tracer(arg, ctx, s.weak) for arg, s in zip(function.arguments, specs)]
    for k, (arg, s) in enumerate(zip(function.arguments, specs)):
        if s.weak and s.spec.dtype.kind in "iu":
            ctx.exact_ints[arg] = _leaf(k) if exact_leaves is None else exact_leaves[k]
    with ctx.active(), refusing_numpy_random():
        outputs, out_treedef = pytree.flatten(_run(ctx, build, tracers))
        values = [_output_value(ctx, leaf, i) for i, leaf in enumerate(outputs)]
    function.body.append(F.ReturnOp(values, {}, []))
    inputs = tuple(a.type for a in function.arguments)  # captures were appended while tracing
    function.attributes["function_type"] = FunctionType(inputs, tuple(v.type for v in values))
    verify(module)
    return TracedFunction(module, function, out_treedef, ctx.captures, ctx.int_checks)


def _leaf(k: int):
    return lambda leaves: int(leaves[k])


# numpy's own error when it needed a traced value concretely (the Tracer's refusal, which it
# replaces), by what numpy says, and what it means at the user's line.
_NUMPY_REFUSALS = (
    (
        TypeError,
        "expected a sequence of integers or a single integer",
        "a traced value cannot be a shape or size (np.zeros(n), np.ones((n, m)), np.full(n, v)): shapes "
        "must be known while tracing; pass it as a static argument (kiln.compile(fn, static_argnames=...)) "
        "or make the array with np.zeros_like(x, shape=...)",
    ),
    (
        ValueError,
        "setting an array element",
        "a traced value cannot be stored into a numpy array (y[...] = traced, where y came from "
        "np.zeros, np.empty or np.array): numpy would need its value while tracing. Make y a traced "
        "array and assign into that, e.g. y = np.zeros_like(x, shape=(3,))",
    ),
)


def _run(ctx: TraceContext, build, tracers):
    """`build(tracers)`, with numpy's own errors for a traced value it needed concretely, a
    size (`np.zeros(n)`) or an element stored into an ndarray (`y = np.zeros(3); y[0] = x[0]`),
    explained at the user's line."""
    try:
        return build(tracers)
    except (TypeError, ValueError) as exc:
        refused = ctx.refused_conversion
        for kind, said, meaning in _NUMPY_REFUSALS:
            if refused is not None and isinstance(exc, kind) and said in str(exc):
                raise TracerConversionError(meaning, refused.loc) from None
        raise


def trace(fn, call: BoundCall, specs: list) -> TracedFunction:
    """Run `fn` on Tracers standing for `call`'s leaves; record a verified module."""

    def build(tracers):
        args, kwargs = call.rebuild(tracers)
        return fn(*args, **kwargs)

    with watching_bound_draws(fn):
        traced = trace_flat(fn.__name__, build, specs, [ssa_name(p) for p in call.paths])
    if traced.captures:
        raise KilnError(f"{fn.__name__} reads traced values of an enclosing function; pass them as arguments")
    return traced


def _output_value(ctx: TraceContext, leaf, index: int):
    if isinstance(leaf, Tracer):
        return ctx.value_of(leaf)
    if isinstance(leaf, (bool, int, float, np.ndarray, np.generic)):
        array = np.asarray(leaf)
        if array.dtype not in SUPPORTED_DTYPES:
            raise DTypeError(
                f"result #{index} has dtype {array.dtype}, which kiln does not support" + dtype_fix_hint(array.dtype)
            )
        return ctx.constant(array).value
    raise ArgumentError(
        f"result #{index} is a {type(leaf).__name__}; compiled functions return arrays, "
        "scalars, and tuples, lists and dicts of them"
    )
