"""``@kiln.compile``: trace once per input signature, compile, run native code.

A compiled function is specialized on the structure of its arguments and on
each leaf's shape, dtype and weakness (Python scalars are weak, as in numpy 2);
each signature is traced and compiled once. ``target="interpret"`` runs the
traced ``tensor`` function in the reference interpreter instead. A compiled
function may be called from several threads at once: a signature that two of
them need is traced and compiled by one while the other waits.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import threading

import numpy as np

from kiln import debug as debug_mode
from kiln import plain_call, timings
from kiln.aot import Lowered, Signature
from kiln.dlpack import dlpack_leaves
from kiln.errors import ArgumentError, KilnError, user_facing
from kiln.executable import Compilation, call_signature
from kiln.frontend.specs import TensorSpec
from kiln.frontend.trace import bind, leaf_spec, trace
from kiln.frontend.tracing import Tracer
from kiln.passes.schedule import Schedule
from kiln.pipeline import Pipeline
from kiln.runtime import config
from kiln.target import GRAPH_PASSES, LEGALIZE_PASSES, REMAT_PASSES, resolve_target
from kiln.tools.profiler import profile


def target_stages(target) -> tuple:
    """The stages a function compiled for `target` (a name of ``kiln.target.TARGETS``, or a Target) goes through."""
    return resolve_target(target).stages


class CompiledFunction:
    """A numpy function compiled by ``kiln.compile``: call it as the function itself.

    Arguments are numpy arrays (any layout: what is not C-contiguous is copied), Python
    scalars, objects with ``__dlpack__`` (PyTorch tensors, taken without a copy), device
    arrays, and tuples, lists and dicts of them; results are numpy arrays (numpy scalars
    for 0-d) in the structure the function returns, or written into ``out=``. Each new
    structure, shape, dtype or static value is traced and compiled once, then reused.
    Bad arguments raise ``kiln.ArgumentError`` or ``kiln.DTypeError``, tracing errors
    (``kiln.ShapeError``, ``kiln.UnsupportedError``, ...) point at your line.
    ``lower(*args)`` gives one signature's stages as a ``kiln.Lowered``, whose
    ``compile()`` is that signature's ``kiln.Compiled``; ``compilations`` lists what was
    compiled so far.

    >>> f = kiln.compile(lambda x, w: np.maximum(x @ w, 0))
    >>> f(np.ones((2, 3), np.float32), np.full((3, 2), -1.0, np.float32))
    array([[0., 0.],
           [0., 0.]], dtype=float32)
    >>> len(f.compilations)
    1
    """

    def __init__(
        self,
        fn,
        target: str = "cpu",
        static_argnames=(),
        optimize: bool = True,
        remat: bool = False,
        schedule=None,
        tuning_db=None,
        debug=None,
    ):
        self.target_info = resolve_target(target)  # the one place the name is looked at
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.target = self.target_info.name
        self.debug = debug_mode.enabled(debug)
        self.optimize = optimize
        self.remat = remat
        self.schedule = _as_schedule(schedule)
        self.tuning_db = tuning_db
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        self._signature = inspect.signature(fn)
        unknown = [n for n in self.static_argnames if n not in self._signature.parameters]
        if unknown:
            raise KilnError(f"static_argnames {unknown} are not parameters of {fn.__name__}")
        self._traces: dict = {}
        self._executables: dict = {}
        self._plain_calls = plain_call.PlainCalls()  # the fast path
        self._signature_locks: dict = {}  # key -> the lock held while tracing or compiling that signature
        self._lock = threading.Lock()  # guards _signature_locks

    def _once(self, table: dict, key, build):
        """table[key], built by the first thread that needs it; others wait for that one."""
        if key in table:
            return table[key]
        with self._lock:
            lock = self._signature_locks.setdefault(key, threading.RLock())
        with lock:
            if key not in table:
                table[key] = build()
        return table[key]

    def _specialize(self, args, kwargs, allow_specs: bool):
        call = bind(self.fn, args, kwargs, self.static_argnames, self._signature)
        if any(type(leaf) is not np.ndarray and hasattr(leaf, "__dlpack__") for leaf in call.leaves):
            call.leaves = dlpack_leaves(call.paths, call.leaves)  # PyTorch tensors and the like, without copies
        leaves = call.leaves
        if any(isinstance(leaf, Tracer) for leaf in leaves):
            return call, None  # called from inside another trace
        # The dispatch key is cheap for arrays (the common case); everything else goes through leaf_spec.
        key = (
            call.treedef,
            call.static,
            tuple(
                (leaf.shape, leaf.dtype) if type(leaf) is np.ndarray else self._leaf_key(path, leaf, allow_specs)
                for path, leaf in zip(call.paths, leaves)
            ),
        )
        self._once(self._traces, key, lambda: self._trace(call))
        return call, key

    def _trace(self, call) -> tuple:
        specs = [leaf_spec(path, leaf) for path, leaf in zip(call.paths, call.leaves)]
        with timings.timed(self.fn.__name__, "trace"):
            traced = trace(self.fn, call, specs)
        passes = (REMAT_PASSES if self.remat else GRAPH_PASSES) if self.optimize else LEGALIZE_PASSES
        pipeline = Pipeline(
            self.fn.__name__, traced.module, passes, self.schedule, self.tuning_db, self.target_info, self.debug
        )
        _dump(pipeline, self.stages)
        return traced, pipeline

    @staticmethod
    def _leaf_key(path, leaf, allow_specs):
        if isinstance(leaf, TensorSpec) and not allow_specs:
            raise ArgumentError(f"argument '{path}' is a spec ({leaf!r}); specs are for .lower(), calls need arrays")
        spec = leaf_spec(path, leaf)
        if not spec.weak:  # the key of an array of this shape and dtype: one trace serves both
            return spec.spec.shape, spec.spec.dtype
        return spec.spec.shape, spec.spec.dtype, spec.weak

    @property
    def stages(self) -> tuple:
        return self.target_info.stages

    @user_facing
    def lower(self, *args, **kwargs) -> Lowered:
        """One signature of this function, from arrays or specs like ``kiln.f32[8, 4]`` (any
        argument structure a call takes), as a ``kiln.Lowered``: its stages by name, and
        ``.compile()`` for its native code. Raises what a call would for arguments it cannot
        take (``kiln.ArgumentError``, ``kiln.DTypeError``) and the errors of tracing
        (``kiln.ShapeError``, ``kiln.UnsupportedError``, ...) at your line.

        >>> f = kiln.compile(lambda x: np.exp(x).sum())
        >>> f.lower(kiln.f32[3]).stages
        ['tensor', 'optimized', 'affine', 'scheduled', 'llvm']
        """
        call, key = self._specialize(args, kwargs, allow_specs=True)
        traced, pipeline = self._traces[key]
        specs = [leaf_spec(path, leaf) for path, leaf in zip(call.paths, call.leaves)]
        build = (lambda: None) if self.target_info.make_executable is None else (lambda: self._executable(key))
        signature = Signature(
            self.fn,
            self._signature,
            self.static_argnames,
            call,
            specs,
            traced,
            pipeline,
            self.target,
            self.debug,
            self.stages,
            build,
        )
        return Lowered(signature)

    @property
    def compilations(self) -> list:
        """One record per signature compiled to native code so far: cache hit or not, and the time it took."""
        records = []
        for key, executable in list(self._executables.items()):  # other threads may be adding to it
            traced, _ = self._traces[key]
            signature = str(traced.function.function_type)
            records.append(Compilation(signature, executable.from_cache, executable.seconds))
        return records

    def _executable(self, key):
        return self._once(self._executables, key, lambda: self._build(key))

    def _build(self, key):
        traced, pipeline = self._traces[key]
        return self.target_info.make_executable(pipeline, traced)

    @user_facing
    def __call__(self, *args, out=None, **kwargs):
        result = self._plain_calls.call(args, kwargs, out)
        return self._checked_call(args, kwargs, out) if result is plain_call.MISS else result

    def _checked_call(self, args, kwargs, out):
        """A call with every check: binding, pytrees, the signature, conversions, out=."""
        call, key = self._specialize(args, kwargs, allow_specs=False)
        if key is None:
            return self.fn(*args, **kwargs)  # called from inside another trace: inline it
        traced, pipeline = self._traces[key]
        executable = None if self.target_info.make_executable is None else self._executable(key)
        if not self.debug and executable is not None and self._plain_calls.lookup(args) is None:
            plain = plain_call.PlainCall.of(call, args, kwargs, executable, traced)
            if plain is not None:
                self._plain_calls.add(plain)
        return call_signature(traced, pipeline, executable, self.debug, call.leaves, out)

    def profile(self, *args, seconds: float = 2.0, **kwargs):
        """Per-kernel time, bytes and FLOPs on these arguments: see kiln.profile."""
        return profile(self, *args, seconds=seconds, **kwargs)

    def __repr__(self) -> str:
        return f"<kiln.compile {self.fn.__qualname__} target={self.target}>"


def _dump(pipeline: Pipeline, stages) -> None:
    """With KILN_DUMP_DIR set, write every stage of each new signature to files."""
    directory = config.get("KILN_DUMP_DIR")
    if directory:
        digest = hashlib.sha256(pipeline.text("tensor").encode()).hexdigest()[:10]
        pipeline.dump(directory, digest, stages)


def _as_schedule(schedule):
    """A Schedule from a Schedule, a list of steps, YAML text or a YAML file (None: the default)."""
    if schedule is None or isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, (list, tuple)):
        return Schedule(schedule)
    if isinstance(schedule, str):
        if os.path.isfile(schedule):
            with open(schedule) as f:
                return Schedule.from_yaml(f.read())
        return Schedule.from_yaml(schedule)
    raise ArgumentError(f"schedule= takes a kiln.Schedule, a list of steps or YAML, not {type(schedule).__name__}")


def compile(
    fn=None,
    *,
    target: str = "cpu",
    static_argnames=(),
    optimize: bool = True,
    remat: bool = False,
    schedule=None,
    tuning_db=None,
    debug=None,
):
    """Compile a numpy function: ``@kiln.compile`` or ``kiln.compile(fn, target="cpu")``.

    `target` is ``"cpu"`` (native code for this machine), ``"interpret"``
    (the reference interpreter, slow, for checking), ``"cuda"`` (an NVIDIA GPU)
    or ``"cuda-emulate"`` (the CUDA C run on the CPU).

    Arguments are traced, so the compiled code serves any values of the same
    shapes and dtypes. Parameters named in `static_argnames` (an axis, a flag)
    are passed as Python values instead and compiled in, one trace per value;
    so are parameters left at their defaults. ``optimize=False`` skips the graph
    passes (one loop nest per op, no memory plan), for comparison and debugging.
    ``remat=True`` recomputes cheap elementwise values where they are read again
    much later (a training step's activations) instead of keeping them in memory.
    ``schedule=`` replaces the default schedules with your own steps (a
    ``kiln.Schedule``, a list like ``[("vectorize", "k0.j", 16)]``, or YAML).
    Without one, kernels found in the tuning database (``kiln tune``; the file
    `tuning_db`, else $KILN_TUNING_DB, else tuning.yaml in the user's data
    directory, ~/.local/share/kiln on Linux; False: none) use its schedules. ``debug=True`` (or $KILN_DEBUG=1) bounds-checks every load
    and store of the native code and reports the first op that makes NaN or
    infinity from finite inputs, with your line; it is slower.

    Returns a ``kiln.CompiledFunction``; an unknown `target`, or ``"cuda"`` without nvcc,
    the CUDA runtime or a GPU, raises ``kiln.KilnError``.

    >>> @kiln.compile
    ... def predict(x, w, b):
    ...     return np.maximum(x @ w + b, 0)
    >>> x, w, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.zeros(4, np.float32)
    >>> predict(x, w, b)
    array([[3., 3., 3., 3.],
           [3., 3., 3., 3.]], dtype=float32)
    >>> predict.lower(kiln.f32[64, 3], kiln.f32[3, 4], kiln.f32[4]).compile()
    <Compiled predict(kiln.f32[64, 3], kiln.f32[3, 4], kiln.f32[4]) target=cpu>
    """
    if fn is None:
        return lambda f: CompiledFunction(f, target, static_argnames, optimize, remat, schedule, tuning_db, debug)
    return CompiledFunction(fn, target, static_argnames, optimize, remat, schedule, tuning_db, debug)
