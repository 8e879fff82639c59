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

from kiln.codegen import nvcc
from kiln.cuda_executable import CudaExecutable
from kiln.errors import ArgumentError, KilnError, StageError, user_facing
from kiln.executable import Compilation, Executable, OutOfBoundsStatus
from kiln.frontend import pytree
from kiln.frontend.specs import TensorSpec
from kiln.frontend.trace import bind, leaf_spec, trace
from kiln.frontend.tracing import Tracer
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.schedule import Schedule
from kiln.pipeline import GRAPH_PASSES, REMAT_PASSES, STAGES, Pipeline
from kiln.runtime.cuda import CudaUnavailable, check_gpu
from kiln.tools import debug as debug_mode
from kiln.tools.profiler import profile

TARGETS = ("cpu", "interpret", "cuda", "cuda-emulate")


class Lowered:
    """Every stage of one compiled signature, by name."""

    def __init__(self, pipeline: Pipeline, stages):
        self.name = pipeline.name
        self._pipeline = pipeline
        self.stages = list(stages)

    def module(self, stage: str = "tensor"):
        """The IR module of an MLIR-level stage (every stage but ``llvm``)."""
        self._check(stage)
        if stage == "llvm":
            raise StageError("the llvm stage is text: use .text('llvm')")
        return self._pipeline.module(stage)

    def text(self, stage: str = "tensor", locations: bool = True, generic: bool = False) -> str:
        """The IR of `stage`: MLIR syntax, or LLVM IR for ``llvm``; `locations` adds source lines."""
        self._check(stage)
        return self._pipeline.text(stage, locations, generic)

    @property
    def kernel_count(self) -> int:
        """How many kernels (loop nests, before output copies) the optimized function has."""
        return self._pipeline.kernel_count()

    @property
    def memory_plan(self):
        """The arena layout of intermediates: ``arena_bytes``, ``unplanned_bytes``, ``buffers``."""
        return self._pipeline.memory_plan()

    def _check(self, stage: str) -> None:
        if stage not in self.stages:
            raise StageError(f"no stage {stage!r}; this function has stages: {', '.join(self.stages)}")

    def __repr__(self) -> str:
        return f"<Lowered {self.name}: {', '.join(self.stages)}>"


class CompiledFunction:
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
        if target not in TARGETS:
            raise KilnError(f"unknown target {target!r}; this version of kiln compiles for: {', '.join(TARGETS)}")
        if target == "cuda":
            try:
                nvcc.check_compiler()
                check_gpu()
            except CudaUnavailable as exc:
                raise KilnError(str(exc)) from None
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.target = target
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
        traced = trace(self.fn, call, specs)
        passes = (REMAT_PASSES if self.remat else GRAPH_PASSES) if self.optimize else ()
        pipeline = Pipeline(
            self.fn.__name__, traced.module, passes, self.schedule, self.tuning_db, self.target, self.debug
        )
        _dump(pipeline, self.stages)
        return traced, pipeline

    @staticmethod
    def _leaf_key(path, leaf, allow_specs):
        if isinstance(leaf, TensorSpec) and not allow_specs:
            raise ArgumentError(f"argument '{path}' is a spec ({leaf!r}); specs are for .lower(), calls need arrays")
        spec = leaf_spec(path, leaf)
        return spec.spec.shape, spec.spec.dtype, spec.weak, spec.wide

    @property
    def stages(self) -> tuple:
        if self.target == "interpret":
            return ("tensor",)
        if self.target.startswith("cuda"):
            return ("tensor", "optimized", "affine", "scheduled", "cuda")
        return STAGES

    @user_facing
    def lower(self, *args, **kwargs) -> Lowered:
        """The stages of this function for arrays or specs like ``kiln.f32[8, 4]``."""
        _, key = self._specialize(args, kwargs, allow_specs=True)
        _, pipeline = self._traces[key]
        return Lowered(pipeline, self.stages)

    @property
    def compilations(self) -> list:
        """One record per signature compiled to native code so far: cache hit or not, and the time it took."""
        records = []
        for key, executable in list(self._executables.items()):  # other threads may be adding to it
            traced, _ = self._traces[key]
            signature = str(traced.function.function_type)
            records.append(Compilation(signature, executable.from_cache, executable.seconds))
        return records

    def _executable(self, key) -> Executable:
        return self._once(self._executables, key, lambda: self._build(key))

    def _build(self, key):
        traced, pipeline = self._traces[key]
        if self.target.startswith("cuda"):
            return CudaExecutable(pipeline, traced, emulate=self.target == "cuda-emulate")
        return Executable(pipeline, traced)

    @user_facing
    def __call__(self, *args, out=None, **kwargs):
        call, key = self._specialize(args, kwargs, allow_specs=False)
        if key is None:
            return self.fn(*args, **kwargs)  # called from inside another trace: inline it
        traced, _ = self._traces[key]
        out_leaves = None if out is None else _check_out(out, traced)
        if self.target == "interpret":
            results = run_function(traced.function, [np.asarray(leaf) for leaf in call.leaves])
            # The interpreter may hand back inputs or constants themselves; results are always fresh arrays.
            results = [np.array(r, copy=True) for r in results]
            if out_leaves is not None:
                for target, result in zip(out_leaves, results):
                    np.copyto(target, result)
        else:
            try:
                results = self._executable(key).run(call.leaves, out_leaves)  # native: CPU or CUDA
            except OutOfBoundsStatus as exc:
                raise debug_mode.out_of_bounds_error(self._traces[key][1], exc.status) from None
            if self.debug:
                debug_mode.check_finite(traced.function, [np.asarray(leaf) for leaf in call.leaves])
        if out is not None:
            return out
        return pytree.unflatten(
            traced.out_treedef, [r[()] if isinstance(r, np.ndarray) and r.ndim == 0 else r for r in results]
        )

    def profile(self, *args, seconds: float = 2.0, **kwargs):
        """Per-kernel time, bytes and FLOPs on these arguments: see kiln.profile."""
        return profile(self, *args, seconds=seconds, **kwargs)

    def __repr__(self) -> str:
        return f"<kiln.compile {self.fn.__qualname__} target={self.target}>"


def _check_out(out, traced) -> list:
    targets, out_treedef = pytree.flatten(out)
    if out_treedef != traced.out_treedef:
        raise ArgumentError("out= must have the same structure as the function's results")
    for i, (target, t) in enumerate(zip(targets, traced.function.function_type.results)):
        if not isinstance(target, np.ndarray):
            raise ArgumentError(f"out= leaf #{i} is a {type(target).__name__}, not a numpy array")
        if target.shape != t.shape or target.dtype != t.dtype:
            raise ArgumentError(
                f"out= leaf #{i} is {target.dtype}{list(target.shape)}, the result is {t.dtype}{list(t.shape)}"
            )
        if not target.flags.writeable:
            raise ArgumentError(f"out= leaf #{i} is read-only")
    # Two results written into one memory cannot both be delivered: which survives would
    # depend on the order kiln happens to write them in.
    for i, a in enumerate(targets):
        for j in range(i):
            if np.shares_memory(a, targets[j]):
                raise ArgumentError(f"out= leaves #{j} and #{i} overlap in memory; give each result its own array")
    return targets


def _dump(pipeline: Pipeline, stages) -> None:
    """With KILN_DUMP_DIR set, write every stage of each new signature to files."""
    directory = os.environ.get("KILN_DUMP_DIR")
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
    """
    if fn is None:
        return lambda f: CompiledFunction(f, target, static_argnames, optimize, remat, schedule, tuning_db, debug)
    return CompiledFunction(fn, target, static_argnames, optimize, remat, schedule, tuning_db, debug)
