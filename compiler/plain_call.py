"""The fast path of a call whose arguments are plain numpy arrays and Python floats, given
positionally, alone or in tuples, lists and dicts.

On small arrays a compiled function's time goes to the call, not to native code:
binding arguments to parameters, flattening them, building the signature key,
converting each array, then packing the results. For the commonest calls, every
argument a C-contiguous aligned ``numpy.ndarray`` or a Python float (or a tuple, list,
dict or namedtuple of them: a training step's parameters) given by position, no
keywords and no ``out=``, the checked path (``CompiledFunction`` and
``call_signature``) proves once per signature that all of that is redundant, and
registers a ``PlainCall``:

- the binding: positional arguments bind by position, so every call with the same
  structure binds as the registering call did (which had no static argument among
  them, and whose flattened arguments were the bound leaves themselves);
- the trace: a plain array's part of the signature key is its shape and dtype, and a
  Python float's is its type alone (a weak scalar), so equal structures, shapes and
  dtypes select the same compiled code;
- the conversions: each array already has the compiled dtype and shape; the one
  check left per call is layout (C-contiguous and aligned), and an array that fails
  it takes the checked path, which copies it; a float is converted as the checked path
  converts it (``np.asarray(x, dtype)``);
- the results: fresh arrays, which overlap nothing.

The checks themselves run in generated code (``runtime/cpython_entry.py``) where the
interpreter allows, and in ``PlainCall.__call__`` where it does not. Anything else (a
Python int, whose value numpy's rules check; another array type; keywords; ``out=``; a
new shape) finds no entry or fails a check and takes the checked path, whose errors
name the problem. A status from native code does too: the checked path runs the code
again and raises the error the status stands for.
"""

from __future__ import annotations

import operator
import threading

import numpy as np

from kiln.frontend import pytree
from kiln.runtime import cpython_entry, threads
from kiln.runtime.native import pointer

MISS = object()  # the fast path could not prove the call safe: take the checked path
_shape_and_dtype = operator.attrgetter("shape", "dtype")


def _tuple_of_leaves(count: int) -> pytree.TreeDef:
    """The structure of `count` plain positional arguments, or of a flat tuple of results."""
    return pytree.TreeDef("tuple", None, (pytree.LEAF,) * count)


def _missed(*args):
    return MISS


class PlainCalls:
    """The PlainCalls of one compiled function, and the entry of the one called last, which
    the next call tries first (its own checks are the lookup: a call with other shapes
    misses and finds its PlainCall here). Signatures of plain arrays alone are found by
    their (shape, dtype) pairs, the others by trying each."""

    def __init__(self):
        self.table: dict = {}
        self.structured: list = []
        self.entry = _missed  # entry(*args): the result, or MISS

    def add(self, plain: PlainCall) -> None:
        if plain.key is not None:
            self.table[plain.key] = plain
        else:
            self.structured.append(plain)

    def lookup(self, args: tuple):
        """The PlainCall registered for these arguments, else None."""
        try:
            found = self.table.get(tuple(map(_shape_and_dtype, args)))
        except Exception:  # not arrays alone: a structure, or the checked path says what is wrong
            found = None
        if found is None:
            found = next((plain for plain in self.structured if plain.takes(args)), None)
        return found

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
        self.entry = plain.entry()
        result = self.entry(*args)
        return plain(args) if result is MISS else result


class PlainCall:
    """One compiled signature, called with plain arrays and floats; made by ``PlainCall.of``.
    `key` is the inputs' (shape, dtype) pairs where the arguments are plain arrays alone,
    else None."""

    def __init__(self, executable, in_treedef: pytree.TreeDef, floats: frozenset, out_treedef: pytree.TreeDef):
        self._input_specs = tuple(executable.input_specs)
        flat = in_treedef == _tuple_of_leaves(len(self._input_specs))
        self.key = self._input_specs if flat and not floats else None
        self._read = pytree.reader(in_treedef)
        self._floats = floats  # positions of the leaves that are Python floats
        self._c_function = executable.native.c_function
        self._output_specs = tuple(executable.output_specs)
        # Results with no elements need no code run (as in Executable.run).
        self._writes = any(int(np.prod(shape)) for shape, _ in self._output_specs)
        self._single = out_treedef == pytree.LEAF
        self._out_treedef = out_treedef
        self._executable = executable  # the code the entry calls lives as long as this
        self._flat = flat
        self._entry = None
        self._making = threading.Lock()

    @classmethod
    def of(cls, call, args: tuple, kwargs: dict, executable, traced):
        """A PlainCall for this checked call's signature, or None when its arguments are not
        plain arrays and floats bound as they are given, or `executable` is not plain native
        CPU code."""
        if kwargs or call.static or getattr(executable, "native", None) is None:
            return None
        leaves, treedef = pytree.flatten(args)
        if treedef != call.treedef or len(leaves) != len(call.leaves):
            return None
        if pytree.reader(treedef)(args) is None:
            return None  # a container subclass (OrderedDict, a tuple subclass): later calls could not find it
        if any(leaf is not bound for leaf, bound in zip(leaves, call.leaves)):
            return None  # defaults, variadic parameters or conversions: not the arguments as given
        specs = list(executable.input_specs)
        floats = frozenset(k for k, leaf in enumerate(leaves) if type(leaf) is float)
        for k, (leaf, (shape, dtype)) in enumerate(zip(leaves, specs)):
            if k in floats:
                if shape != () or dtype not in (np.float32, np.float64):
                    return None
            elif type(leaf) is not np.ndarray or (leaf.shape, leaf.dtype) != (shape, dtype):
                return None
        return cls(executable, treedef, floats, traced.out_treedef)

    @classmethod
    def of_signature(cls, call, specs: list, executable, traced):
        """A PlainCall for a lowered signature (``Compiled``), or None unless every leaf is an
        array spec (not a Python scalar's) of a parameter that a positional argument binds:
        the first len(specs) parameters, none of them static or variadic."""
        if call.static or getattr(executable, "native", None) is None or any(s.weak for s in specs):
            return None
        flat = _tuple_of_leaves(len(specs))
        if call.treedef != flat:
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
        return cls(executable, flat, frozenset(), traced.out_treedef)

    def takes(self, args: tuple) -> bool:
        """Whether `args` have this signature's structure, shapes and dtypes (layout aside)."""
        return self._leaves(args) is not None

    def _leaves(self, args: tuple):
        """The leaves of `args` where they have this signature's structure, shapes and dtypes."""
        leaves = self._read(args)
        if leaves is None:
            return None
        for k, (leaf, spec) in enumerate(zip(leaves, self._input_specs)):
            if k in self._floats:
                if type(leaf) is not float:
                    return None
            elif type(leaf) is not np.ndarray or _shape_and_dtype(leaf) != spec:
                return None
        return leaves

    def entry(self):
        """entry(*args): the call in generated code (runtime/cpython_entry.py) where this
        interpreter allows, else this object's own path; results in the function's structure.
        Made when first asked for, which is the signature's second call: code called once
        does not pay for generating it (some milliseconds)."""
        with self._making:  # threads meeting here make it once
            if self._entry is None:
                self._entry = self._make_entry(self._executable, self._flat)
        return self._entry

    def _make_entry(self, executable, flat: bool):
        made = cpython_entry.make_entry(
            executable.native.address,
            self._input_specs,
            self._output_specs,
            MISS,
            as_tuple=not self._single,
            floats=self._floats,
            keep=(executable,),
        )
        if made is None:
            return self._python_entry
        native = made
        scalars = any(not shape for shape, _ in self._output_specs)
        tuple_of_leaves = _tuple_of_leaves(len(self._output_specs))
        if flat and not scalars and (self._single or self._out_treedef == tuple_of_leaves):
            return native
        read, results = self._read, self._results

        def structured(*args):
            leaves = read(args)
            if leaves is None:
                return MISS
            outputs = native(*leaves)
            if outputs is MISS:
                return MISS
            return results([outputs] if self._single else outputs)

        return structured

    def _python_entry(self, *args):
        """The entry without generated code."""
        return self(args)

    def __call__(self, args: tuple):
        """The function's results for `args`, or MISS when the checked path must take the call."""
        leaves = self._leaves(args)
        if leaves is None:
            return MISS
        pointers = []
        for k, (leaf, (_, dtype)) in enumerate(zip(leaves, self._input_specs)):
            if k in self._floats:
                leaf = np.asarray(leaf, dtype)
                leaves[k] = leaf  # alive until the call returns
            elif not (leaf.flags.c_contiguous and leaf.flags.aligned):
                return MISS
            pointers.append(pointer(leaf))
        outputs = [np.empty(shape, dtype) for shape, dtype in self._output_specs]
        if self._writes:
            threads.use_in_this_thread()
            if self._c_function(*pointers, *map(pointer, outputs)):
                return MISS
        return self._results(outputs)

    def _results(self, outputs):
        """The results in the function's structure, zero-dimensional ones as numpy scalars."""
        if self._single:
            return _scalar(outputs[0])
        return pytree.unflatten(self._out_treedef, [r[()] if r.ndim == 0 else r for r in outputs])


def _scalar(result):
    """A zero-dimensional result as numpy returns one: a scalar."""
    return result[()] if result.ndim == 0 else result
