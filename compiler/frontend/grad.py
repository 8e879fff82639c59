"""Gradients as a graph transform, at trace time.

Inside a traced function (the usual case, ``kiln.compile(kiln.grad(loss))`` or
a training step that calls ``kiln.value_and_grad``), the function is traced on
its own, transformed by ``passes/autodiff.py``, and the result's ops are
inlined into the enclosing trace: the ``tensor`` stage shows the forward and
backward graph together, each op with the user's source line. Calling a gradient
directly on arrays compiles it; that is the driver's job (``kiln.transforms``).
"""

from __future__ import annotations

import functools

import numpy as np

from kiln.errors import ArgumentError, DTypeError, KilnError, user_facing
from kiln.frontend import python_ints, pytree
from kiln.frontend.specs import TensorSpec
from kiln.frontend.trace import LeafSpec, leaf_spec, ssa_name, trace_flat
from kiln.frontend.tracing import Tracer, current_context, is_tracing
from kiln.passes.autodiff import value_and_grad as differentiate


class GradFunction:
    """`fn`'s gradient with respect to `argnums` (an int or a non-empty tuple of ints),
    traced into the enclosing trace when called; with `with_value`, the call returns
    ``(fn(*args), gradients)``."""

    def __init__(self, fn, argnums, with_value: bool):
        if isinstance(argnums, int) and not isinstance(argnums, bool):
            self.argnums, self.single = (argnums,), True
        elif isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums):
            self.argnums, self.single = argnums, False
        else:
            raise ArgumentError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.with_value = with_value

    @user_facing
    def __call__(self, *args, **kwargs):
        if not is_tracing():
            raise KilnError(
                f"the gradient of {getattr(self.fn, '__name__', 'a function')} is traced inside a "
                "compiled function; call it through kiln.grad or kiln.compile"
            )
        return self._traced(args, kwargs)

    def _traced(self, args, kwargs):
        name = getattr(self.fn, "__name__", "function")
        for index in self.argnums:
            if not -len(args) <= index < len(args):
                raise ArgumentError(
                    f"argnums {index} is out of range: {name} was called with "
                    f"{len(args)} positional argument{'s' if len(args) != 1 else ''}"
                )
        argnums = [index % len(args) for index in self.argnums]
        entries, treedef = pytree.flatten_with_paths((args, kwargs))
        paths = [_readable(path) for path, _ in entries]
        leaves = [leaf for _, leaf in entries]
        # Which leaves belong to which differentiated argument.
        starts = np_cumsum([pytree.flatten(a)[1].num_leaves for a in args])
        wrt_groups = [list(range(starts[i], starts[i + 1])) for i in argnums]
        specs = [_spec_of(path, leaf) for path, leaf in zip(paths, leaves)]
        for group, index in zip(wrt_groups, argnums):
            for k in group:
                if not np.dtype(specs[k].spec.dtype).kind == "f":
                    raise DTypeError(
                        f"cannot differentiate {name} with respect to argument {index} "
                        f"({paths[k]}, {specs[k].spec.dtype}): gradients need float inputs"
                    )

        def build(tracers):
            call_args, call_kwargs = pytree.unflatten(treedef, tracers)
            result = self.fn(*call_args, **call_kwargs)
            if isinstance(result, (tuple, list, dict)):
                raise KilnError(f"kiln.grad needs {name} to return one scalar, not a {type(result).__name__}")
            return result

        # A Python int leaf is the enclosing trace's value: its checks are that trace's.
        exact = [python_ints.exact(leaf) for leaf in leaves]
        sub = trace_flat(name, build, specs, [ssa_name(p) for p in paths], exact)
        current_context().int_checks.extend(sub.int_checks)
        wrt = [k for group in wrt_groups for k in group]
        transformed = differentiate(sub.function, wrt)

        ctx = current_context()
        inputs = [
            leaf if isinstance(leaf, Tracer) else ctx.constant(np.asarray(leaf, spec.spec.dtype))
            for leaf, spec in zip(leaves, specs)
        ]
        value, *grads = inline(ctx, transformed, inputs + sub.captures)
        grads = iter(grads)
        structured = [
            pytree.unflatten(pytree.flatten(args[i])[1], [next(grads) for _ in group])
            for i, group in zip(argnums, wrt_groups)
        ]
        result = structured[0] if self.single else tuple(structured)
        return (value, result) if self.with_value else result


def inline(ctx, function, arguments) -> list:
    """Copy `function`'s ops into the trace `ctx`, its arguments bound to `arguments` (Tracers)."""
    mapping = dict(zip(function.arguments, arguments))
    body = function.body.ops
    for op in body[:-1]:
        operands = [mapping[v] for v in op.operands]
        mapping[op.result] = ctx.emit(type(op), operands, dict(op.attributes), op.result.type, loc=op.loc)
    return [mapping[v] for v in body[-1].operands]


def _spec_of(path, leaf):
    if isinstance(leaf, Tracer):
        return LeafSpec(TensorSpec(leaf.shape, leaf.dtype), leaf.weak)
    return leaf_spec(path, leaf)


def _readable(path: str) -> str:
    """A leaf path of the ((args), {kwargs}) pair, as the user wrote it: ``args[1]['w']``."""
    if path.startswith("[0]"):
        return "args" + path[3:]
    return "kwargs" + path[3:]


def np_cumsum(counts) -> list:
    total, starts = 0, [0]
    for count in counts:
        total += count
        starts.append(total)
    return starts
