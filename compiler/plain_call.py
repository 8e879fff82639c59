"""The fast path of a call whose arguments are plain numpy arrays, given positionally.

On small arrays a compiled function's time goes to the call, not to native code:
binding arguments to parameters, flattening them, building the signature key,
converting each array, then packing the results. For the commonest call, every
argument a C-contiguous aligned ``numpy.ndarray`` given by position, no keywords
and no ``out=``, the checked path (``CompiledFunction`` and ``call_signature``)
proves once per signature that all of that is redundant, and registers a
``PlainCall`` under the arguments' (shape, dtype) pairs:

- the binding: positional arguments bind by position, so every call with as many of
  them binds as the registering call did (which had no static argument among them,
  and one leaf per argument);
- the trace: a plain array's part of the signature key is its shape and dtype, so
  equal pairs select the same compiled code;
- the conversions: each array already has the compiled dtype and shape; the one
  check left per call is layout (C-contiguous and aligned), and an array that fails
  it takes the checked path, which copies it;
- the results: fresh arrays, which overlap nothing.

Anything else (a Python scalar, a list, another array type, keywords, ``out=``, a
new shape) finds no entry or fails a check and takes the checked path, whose errors
name the problem. A status from native code does too: the checked path runs the
code again and raises the error the status stands for.
"""

from __future__ import annotations

import operator

import numpy as np

from kiln.frontend import pytree
from kiln.runtime import cpython_entry, threads
from kiln.runtime.native import pointer

MISS = object()  # the fast path could not prove the call safe: take the checked path
_shape_and_dtype = operator.attrgetter("shape", "dtype")


def _missed(*args):
    return MISS


class PlainCalls:
    """The PlainCalls of one compiled function by their arguments' (shape, dtype) pairs, and
    the entry of the one called last, which the next call tries first (its own checks are
    the lookup: a call with other shapes misses and finds its PlainCall here)."""

    def __init__(self):
        self.table: dict = {}
        self.entry = _missed  # entry(*args): the result, or MISS

    def add(self, plain: PlainCall) -> None:
        self.table[plain.key] = plain

    def lookup(self, args: tuple):
        """The PlainCall registered for these arguments' (shape, dtype) pairs, else None."""
        try:
            return self.table.get(tuple(map(_shape_and_dtype, args)))
        except Exception:  # not array-like, or unhashable attributes: the checked path says what is wrong
            return None

    def call(self, args: tuple, kwargs: dict, out):
        """The result of calling through the fast path, or MISS where it does not apply: keywords,
        out=, or arguments no registered PlainCall takes."""
        if out is not None or kwargs:
            return MISS
        result = self.entry(*args)
        if result is not MISS:
            return result
        plain = self.lookup(args)
        if plain is None:
            return MISS
        self.entry = plain.entry
        return plain(args)


class PlainCall:
    """One compiled signature, called with plain arrays; made by ``PlainCall.of``."""

    def __init__(self, executable, out_treedef: pytree.TreeDef):
        self.key = tuple(executable.input_specs)
        self._c_function = executable.native.c_function
        self._output_specs = tuple(executable.output_specs)
        # Results with no elements need no code run (as in Executable.run).
        self._writes = any(int(np.prod(shape)) for shape, _ in self._output_specs)
        self._single = out_treedef == pytree.LEAF
        self._out_treedef = out_treedef
        self._executable = executable  # the code the entry calls lives as long as this
        self.entry = self._entry(executable)

    def _entry(self, executable):
        """entry(*args): the call in generated code (runtime/cpython_entry.py) where this
        interpreter allows, else this object's own path; results in the function's structure."""
        made = cpython_entry.make_entry(
            executable.native.address, self.key, self._output_specs, MISS, as_tuple=not self._single
        )
        if made is None:
            return self._python_entry
        native, self._keep = made
        scalars = [k for k, (shape, _) in enumerate(self._output_specs) if not shape]
        if self._single:
            return native if not scalars else lambda *args: _scalar(native(*args))
        flat = self._out_treedef == pytree.TreeDef("tuple", None, (pytree.LEAF,) * len(self._output_specs))
        if flat and not scalars:
            return native

        def structured(*args):
            results = native(*args)
            if results is MISS:
                return MISS
            return pytree.unflatten(self._out_treedef, [r[()] if r.ndim == 0 else r for r in results])

        return structured

    @classmethod
    def of(cls, call, args: tuple, kwargs: dict, executable, traced):
        """A PlainCall for this checked call's signature, or None when its arguments are not
        plain arrays bound one to a parameter, or `executable` is not plain native CPU code."""
        if kwargs or call.static or getattr(executable, "native", None) is None:
            return None
        if call.treedef != pytree.TreeDef("tuple", None, (pytree.LEAF,) * len(args)):
            return None
        if len(call.leaves) != len(args) or any(
            type(a) is not np.ndarray or leaf is not a for a, leaf in zip(args, call.leaves)
        ):
            return None
        if [(a.shape, a.dtype) for a in args] != list(executable.input_specs):
            return None
        return cls(executable, traced.out_treedef)

    @classmethod
    def of_signature(cls, call, specs: list, executable, traced):
        """A PlainCall for a lowered signature (``Compiled``), or None unless every leaf is an
        array spec (not a Python scalar's) of a parameter that a positional argument binds:
        the first len(specs) parameters, none of them static or variadic."""
        if call.static or getattr(executable, "native", None) is None or any(s.weak for s in specs):
            return None
        if call.treedef != pytree.TreeDef("tuple", None, (pytree.LEAF,) * len(specs)):
            return None
        positional = [
            name
            for name, p in call.signature.parameters.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if list(call.arguments) != positional[: len(specs)]:
            return None
        if [(s.spec.shape, s.spec.dtype) for s in specs] != list(executable.input_specs):
            return None
        return cls(executable, traced.out_treedef)

    def _python_entry(self, *args):
        """The entry without generated code: this signature's arrays only (the lookup's test)."""
        if len(args) != len(self.key) or any(type(a) is not np.ndarray for a in args):
            return MISS
        return self(args) if tuple(map(_shape_and_dtype, args)) == self.key else MISS

    def __call__(self, args: tuple):
        """The function's results for `args`, or MISS when the checked path must take the call."""
        pointers = []
        for a in args:
            if type(a) is not np.ndarray:
                return MISS
            flags = a.flags
            if not (flags.c_contiguous and flags.aligned):
                return MISS
            pointers.append(pointer(a))
        outputs = [np.empty(shape, dtype) for shape, dtype in self._output_specs]
        if self._writes:
            threads.use_in_this_thread()
            if self._c_function(*pointers, *map(pointer, outputs)):
                return MISS
        if self._single:
            return _scalar(outputs[0])
        return pytree.unflatten(self._out_treedef, [r[()] if r.ndim == 0 else r for r in outputs])


def _scalar(result):
    """A zero-dimensional result as numpy returns one: a scalar (MISS passes through)."""
    return result[()] if type(result) is np.ndarray and result.ndim == 0 else result
