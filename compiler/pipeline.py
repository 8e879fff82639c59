"""The stages one compiled function goes through, computed on demand.

    tensor -> optimized -> affine -> scheduled -> llvm -> object code (cached on disk)

Object code is keyed by a hash of the traced tensor IR, the compile
options, the host CPU and kiln's version, so a second process finds it on disk
and skips every later stage.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from dataclasses import dataclass

from kiln import timings
from kiln.codegen import llvm_codegen, llvm_target
from kiln.codegen.constant_pool import ConstantPool, pool_symbol
from kiln.codegen.cuda_codegen import emit_cuda
from kiln.codegen.llvm_emitter import symbol_name
from kiln.dialects import print_ir
from kiln.passes import canonicalize, cse, dce, emulate_floats, fusion, lower_tensor_to_affine, memory_plan, remat  # noqa: F401, E501  (register the passes)
from kiln.passes.memory_plan import is_kernel, read_plan
from kiln.passes.registry import run_passes
from kiln.runtime import threads
from kiln.runtime.cache import DiskCache
from kiln.runtime.native import LLVM_LOCK
from kiln.scheduling import Scheduler
from kiln.target import GRAPH_PASSES, SCHEDULE, TARGETS, resolve_target
from kiln.tools.tuning_db import TuningDB
from kiln.version import __version__, source_roots

POOL_SUFFIX = ".const"  # the cache entry of an object's constant pool, beside its object code (.o)


@dataclass(frozen=True)
class NativeCode:
    """Object code and the data it links against: `symbols` maps each external data symbol
    (the constant pool) to its bytes, a uint8 array aligned to 64 bytes."""

    object: bytes
    symbols: dict
    from_cache: bool


STAGES = TARGETS["cpu"].stages


def run_pipeline(
    module, target, stop_after=None, after_each=None, *, start_after="tensor", graph_passes=None, scheduler=None
):
    """Run `target`'s pipeline (a ``kiln.target.Target`` or its name) on `module`, from the stage
    after `start_after` (the stage `module` is at) through `stop_after` (None: the last IR
    stage), and return the result. Passes change IR in place: give a copy of a module kept
    elsewhere. `after_each(name, module)` sees the module after every pass, and after each step
    of a given schedule (``schedule: split(k0.i, 8)``; once as ``schedule`` after a default one).
    `graph_passes` replaces the ``optimized`` stage's list (the function's options); `scheduler`
    runs the ``schedule`` step (a ``kiln.scheduling.Scheduler``; by default one with the target's
    recipes and no tuning records). This is the one driver of the stages: ``Pipeline`` (and so
    ``kiln.compile``), ``kiln.bisect``, ``kiln.profile`` and ``kiln tune`` all run it. A stage the
    target has not raises KeyError.

    >>> affine = run_pipeline(traced.clone({}), "cuda-emulate", stop_after="affine")
    """
    target = resolve_target(target)
    names = ["tensor"] + [stage for stage, _ in target.pipeline]
    for stage in (start_after, stop_after):
        if stage is not None and stage not in names:
            raise KeyError(f"target {target.name} has no stage {stage!r} (its stages: {', '.join(names)})")
    first = names.index(start_after) + 1
    last = len(names) - 1 if stop_after is None else names.index(stop_after)
    for stage, passes in target.pipeline[first - 1 : last]:
        if stage == "optimized" and graph_passes is not None:
            passes = tuple(graph_passes)
        for name in passes:
            if name == SCHEDULE:
                module = (scheduler or Scheduler(target))(module, after_each)
            else:
                module = run_passes(module, [target.pass_spec(name)], after_each=after_each)
    return module


@functools.lru_cache(maxsize=None)
def kiln_digest() -> str:
    """kiln's version and a hash of its own source: object code cached by one build of
    kiln is never served to another (an edited checkout, a git install without a new
    version number). Reading every source file takes milliseconds of each process start,
    so the hash is remembered in the disk cache under a stamp of the files' names, sizes,
    inodes and modification and change times: an edit changes the stamp (the change time
    even when a tool restores the modification time; file times move in clock ticks of a
    few milliseconds), and the contents are hashed again."""
    files = _source_files()
    stamp = hashlib.sha256(__version__.encode())
    for relative, path in files:
        st = os.stat(path)
        stamp.update(f"{relative}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode())
    cache = DiskCache()
    remembered = cache.load(stamp.hexdigest(), SOURCE_DIGEST)
    if remembered is not None:
        return remembered.decode()
    digest = hashlib.sha256(__version__.encode())
    for relative, path in files:
        with open(path, "rb") as f:
            digest.update(relative.encode() + b"\0" + f.read())
    cache.store(stamp.hexdigest(), digest.hexdigest().encode(), SOURCE_DIGEST, quiet=True)
    return digest.hexdigest()


SOURCE_DIGEST = ".source-digest"  # the cache entries kiln_digest remembers, beside object code (.o)


def _source_files() -> list:
    """(path relative to its package root, path) of every kiln source file, in a fixed order."""
    files = []
    for root in source_roots():
        for directory, subdirectories, names in os.walk(root):
            subdirectories.sort()
            files += [
                (os.path.relpath(os.path.join(directory, n), root), os.path.join(directory, n))
                for n in sorted(names)
                if n.endswith(".py")
            ]
    return files


class Pipeline:
    """One traced function's stages, each computed once on first use. Threads may share a
    pipeline: each stage is computed under the pipeline's lock, so it is computed once."""

    def __init__(
        self,
        name: str,
        tensor_module,
        graph_passes=GRAPH_PASSES,
        schedule=None,
        tuning_db=None,
        target="cpu",
        debug: bool = False,
    ):
        self.name = name
        self.target = resolve_target(target)
        self.debug = debug  # bounds-checked loads and stores
        self.graph_passes = tuple(graph_passes)
        self.requested_schedule = schedule  # None: the default schedule
        self.tuning_db_path = tuning_db  # None: the default database, if there is one; False: none
        self.schedule = None
        self.tuned_kernels = []
        self._modules = {"tensor": tensor_module}
        self._llvm_ir = None
        self._pool = None  # the scheduled module's large constants, laid out with the LLVM IR
        self._optimized_llvm = None
        self._lock = threading.RLock()

    def module(self, stage: str):
        with self._lock:
            return self._module(stage)

    def _module(self, stage: str):
        """`stage`'s module, run from the stage before it (computed first if need be). The graph
        passes and the schedule change IR in place, so they start from a copy."""
        if stage not in self._modules:
            stages = ["tensor"] + [s for s, _ in self.target.pipeline]
            if stage not in stages[1:]:
                raise KeyError(stage)
            previous = stages[stages.index(stage) - 1]
            module = self.module(previous)
            if stage in ("optimized", "scheduled"):
                module = module.clone({})
            if stage == "scheduled":
                scheduler = Scheduler(self.target, self.requested_schedule, self.tuning_db(), self.debug, self.name)
                with timings.timed(self.name, "schedule"):
                    module = run_pipeline(module, self.target, stage, start_after=previous, scheduler=scheduler)
                self.schedule, self.tuned_kernels = scheduler.schedule, scheduler.tuned_kernels
            else:
                module = self._run(module, previous, stage)
            self._modules[stage] = module
        return self._modules[stage]

    def _run(self, module, previous: str, stage: str):
        """run_pipeline from `previous` to `stage`, timing each pass (with the verification after it)."""
        last = time.perf_counter()

        def timed_pass(name, _module):
            nonlocal last
            now = time.perf_counter()
            timings.record(self.name, f"pass {name}", now - last)
            last = now

        return run_pipeline(
            module, self.target, stage, timed_pass, start_after=previous, graph_passes=self.graph_passes
        )

    def tuning_db(self):
        """The tuning database's records, read once per pipeline (None if there are none)."""
        if self.tuning_db_path is False or self.requested_schedule is not None:
            return None
        if not hasattr(self, "_tuning_db"):
            db = TuningDB(self.tuning_db_path or None)
            self._tuning_db = db if db.records else None
        return self._tuning_db

    def cuda_source(self) -> str:
        with self._lock:  # the emitter reads the scheduled module, which another thread may be building
            return emit_cuda(self.codegen_module())

    def text(
        self, stage: str, locations: bool = True, generic: bool = False, elide_constants: int | None = None
    ) -> str:
        """`stage`'s text; every constant in full unless `elide_constants` (print_ir's) says otherwise,
        since the cache key and KILN_DUMP_DIR's files are made from it."""
        if stage == "llvm":
            return self.optimized_llvm()
        if stage == "cuda":
            return self.cuda_source()
        text = print_ir(self.module(stage), locations=locations, generic=generic, elide_constants=elide_constants)
        if stage == "optimized":
            summary = f"// {self.kernel_count()} kernels"
            memory = self.memory_plan()
            if memory is not None:
                summary += f"; {memory}"
            text = summary + "\n" + text
        if stage == "scheduled":
            origin = "default" if self.requested_schedule is None else "given"
            if self.tuned_kernels:
                origin += f"; {', '.join(self.tuned_kernels)} from the tuning database"
            text = f"// schedule ({origin}): {self.schedule}\n" + text
        return text

    def kernels(self) -> list:
        """The optimized function's kernels: each becomes one loop nest."""
        function = self.module("optimized").body.ops[0]
        return [op for op in function.body.ops if is_kernel(op)]

    def kernel_count(self) -> int:
        return len(self.kernels())

    def memory_plan(self):
        return read_plan(self.module("optimized").body.ops[0])

    def llvm_ir(self) -> str:
        """LLVM IR as kiln writes it, before LLVM's optimizations."""
        with self._lock:
            if self._llvm_ir is None:
                with LLVM_LOCK:
                    tm = llvm_target.host_target_machine()
                    triple, layout = tm.triple, str(tm.target_data)
                scheduled = self.codegen_module()
                self._pool = ConstantPool.of(scheduled, self.pool_symbol)
                with timings.timed(self.name, "emit llvm ir"):
                    module = llvm_codegen.emit_module(scheduled, triple, layout, self.debug, self._pool)
                    self._llvm_ir = str(module)
            return self._llvm_ir

    def codegen_module(self):
        """What the code generator reads: a copy of the scheduled module through the target's
        ``codegen_passes`` (each kernel outlined into a private function), made on each call."""
        return run_passes(self.module("scheduled").clone({}), list(self.target.codegen_passes))

    @property
    def pool_symbol(self) -> str:
        """The symbol the object code reads its large constants through (see constant_pool)."""
        return pool_symbol(symbol_name(self.module("tensor").body.ops[0].sym_name))

    def optimized_llvm(self) -> str:
        """The ``llvm`` stage: LLVM IR after LLVM's optimization pipeline for the host CPU (O2)."""
        with self._lock:
            if self._optimized_llvm is None:
                self._optimized_llvm, _ = self._run_llvm(emit_object=False)
            return self._optimized_llvm

    def _run_llvm(self, emit_object: bool) -> tuple:
        """(the optimized LLVM IR, or None where object code is asked for; the object code or None).
        The optimized IR is printed only for the ``llvm`` stage: for a model with its weights as
        constants, printing it took seconds of every compile. LLVM runs under LLVM_LOCK, and the
        module is freed before the lock is let go."""
        text = self.llvm_ir()
        with LLVM_LOCK:
            with timings.timed(self.name, "llvm parse"):
                module = llvm_target.parse_and_verify(text)
            try:
                with timings.timed(self.name, "llvm optimize"):
                    llvm_target.optimize(module)
                if not emit_object:
                    return str(module), None
                with timings.timed(self.name, "object code"):
                    return None, llvm_target.emit_object(module)
            finally:
                module.close()

    def cache_key(self) -> str:
        """Everything the object code depends on: kiln's version and source, the host (CPU, features,
        whether a thread pool exists), the options, and the traced function. Every later
        stage is a deterministic function of these, so a second process that finds the key
        skips optimization, lowering, scheduling and LLVM altogether."""
        db = self.tuning_db()
        later = [self.target.pass_spec(name) for stage, names in self.target.pipeline[1:] for name in names]
        options = (
            f"passes={','.join(self.graph_passes)} then={','.join(later)} schedule={self.requested_schedule!r} "
            f"tuning={db.digest() if db else None} debug={self.debug}"
        )
        host = f"{llvm_target.host_fingerprint()} threads={threads.available()}"
        traced = print_ir(self.module("tensor"), locations=False, digest_constants=True)
        return hashlib.sha256(f"{kiln_digest()}\n{host}\n{options}\n{traced}".encode()).hexdigest()

    def object_code(self, cache: DiskCache | None = None) -> NativeCode:
        """The object code and its constant pool, from the disk cache or built (and stored there).

        The cache entry ``<key>.o`` holds the pool's size and the object code; ``<key>.const``
        the pool, mapped from the file rather than read (a model's weights: its pages are
        the file's, shared by every process that maps it). The pool is a second copy of the
        weights on disk, and what makes a warm start fast: without it a second process would
        run the graph passes and lowering again to make the constants they fold (transposed
        and packed weights). The pool is written before the object code, and an object whose
        pool is missing or damaged is built again."""
        cache = cache or DiskCache()
        with self._lock, timings.timed(self.name, "cache key"):
            key = self.cache_key()
        with self._lock, cache.writing(key):  # threads building one key: the first builds, the rest read it
            started = time.perf_counter()
            found = self._cached(cache, key)
            timings.record(self.name, "disk cache", time.perf_counter() - started, "hit" if found else "miss")
            if found is not None:
                return found
            _, code = self._run_llvm(emit_object=True)
            pool = self._pool
            with timings.timed(self.name, "cache store"):
                data = None
                if pool:
                    cache.store_mapped(key, pool.chunks(), POOL_SUFFIX)
                    data = cache.map(key, POOL_SUFFIX)
                    if data is None or len(data) != pool.nbytes:  # the cache cannot be written: keep it in memory
                        data = pool.buffer()
                cache.store(key, pool.nbytes.to_bytes(8, "little") + code)
            if pool:
                self._release_lowered()
            return NativeCode(code, {pool.symbol: data} if pool else {}, False)

    def _release_lowered(self) -> None:
        """Drop the stages after ``tensor``, made again if asked for: they hold the constants the
        graph passes fold (a model's transposed and packed weights), whose bytes are in the pool
        now, so keeping them would keep a second copy of the weights in memory."""
        for stage in ("optimized", "affine", "scheduled"):
            self._modules.pop(stage, None)
        self._llvm_ir = self._pool = None

    def _cached(self, cache: DiskCache, key: str):
        """The NativeCode stored under `key`, or None where it or its pool is missing or damaged."""
        entry = cache.load(key)
        if entry is None or len(entry) < 8:
            return None
        size, code = int.from_bytes(entry[:8], "little"), entry[8:]
        if not size:
            return NativeCode(code, {}, True)
        data = cache.map(key, POOL_SUFFIX)
        if data is None or len(data) != size:
            return None
        return NativeCode(code, {self.pool_symbol: data}, True)

    def dump(self, directory: str, digest: str, stages=STAGES) -> None:
        """Write each stage to `directory` (KILN_DUMP_DIR)."""
        os.makedirs(directory, exist_ok=True)
        for stage in stages:
            suffix = "ll" if stage == "llvm" else "mlir"
            with open(os.path.join(directory, f"{self.name}.{digest}.{stage}.{suffix}"), "w") as f:
                f.write(self.text(stage))
