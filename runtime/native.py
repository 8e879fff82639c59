"""Load object code into this process and call its functions with numpy arrays.

Object code is linked in memory by LLVM's MCJIT loader (no system linker or
compiler is needed at run time); functions are called through cffi with one
pointer per array, and return a status code. Loaded functions may be called
from any number of threads at once; loading itself takes ``LLVM_LOCK``.
"""

from __future__ import annotations

import ctypes.util
import functools
import threading

import _cffi_backend
import llvmlite.binding as llvm

from kiln.runtime import threads

# cffi's C implementation of its FFI object (the class of every compiled cffi module's
# `ffi`): its cast parses C types itself and its from_buffer is a C function, where the
# pure-Python cffi.FFI() loads pycparser on first use and wraps each from_buffer in Python,
# which is a third of the cost of calling a small function.
_ffi = _cffi_backend.FFI()

# llvmlite parses into LLVM's one global context, kiln shares one target machine, and
# MCJIT links into process-wide state: none of these may be used by two threads at once
# (llvmlite releases the GIL inside LLVM). Every use of llvmlite.binding holds this lock.
LLVM_LOCK = threading.RLock()


# The C and math libraries by the names glibc's dynamic loader finds without a search; where
# they are not those, ctypes.util.find_library names them (it runs ldconfig: milliseconds that
# a warm start from the disk cache would otherwise spend on every process start).
_GLIBC_NAMES = {"c": "libc.so.6", "m": "libm.so.6"}


@functools.lru_cache(maxsize=None)
def make_c_libraries_visible() -> None:
    """Let the loader resolve the C and math library functions the code calls
    (aligned_alloc, free, memset, expf, tanh, ...); LLVM does not search the
    process's libraries unless they are loaded through it."""
    for name, soname in _GLIBC_NAMES.items():
        try:
            llvm.load_library_permanently(soname)
        except RuntimeError:
            path = ctypes.util.find_library(name)
            if path is None:
                raise OSError(f"cannot find the system's lib{name}, which compiled code calls") from None
            llvm.load_library_permanently(path)


def host_target_machine():
    """A new LLVM target machine for this process's CPU: its triple, CPU name and every
    feature it has (so LLVM's vectorizers use the widest vector units), position-independent
    code. The one definition of the host target: code generation optimizes and emits object
    code with it, and the loader links with it. Call under ``LLVM_LOCK``."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=3,
        reloc="pic",
        codemodel="default",
    )


class LoadedObject:
    """Object code linked into the process; keep it alive while its functions are used.

    `symbols` binds data the code declares external (a model's weights, outside the object
    code) to numpy arrays: each name resolves to its array's address while this object is
    linked, and the arrays live as long as this object. The names are bound again before
    every link, under ``LLVM_LOCK``, so two objects may use one name for different arrays."""

    def __init__(self, object_code: bytes, symbols: dict | None = None):
        self._data = dict(symbols or {})  # what the linked code points into
        with LLVM_LOCK:
            make_c_libraries_visible()
            threads.available()  # loads libgomp for code with parallel loops
            for name, array in self._data.items():
                llvm.add_symbol(name, array.ctypes.data)
            # Each engine takes ownership of its target machine, so each gets a new one.
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_target_machine())
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
            self._engine.finalize_object()

    def function(self, name: str, num_args: int) -> "NativeFunction":
        with LLVM_LOCK:
            address = self._engine.get_function_address(name)
        if not address:
            raise KeyError(f"the object code has no function {name!r}")
        return NativeFunction(self, address, num_args)

    def global_address(self, name: str) -> int:
        """The address of the global `name` (a variable or a function) of the object code
        (KeyError if none)."""
        with LLVM_LOCK:
            address = self._engine.get_global_value_address(name)
        if not address:
            raise KeyError(f"the object code has no global {name!r}")
        return address


# A C-contiguous numpy array's data as a `void *` argument; read-only arrays too (from_buffer
# requires a writable buffer only when asked). The C function itself: a wrapper would cost
# as much as the call.
pointer = _ffi.from_buffer


@functools.lru_cache(maxsize=None)
def _wide_ffi():
    """cffi's Python FFI object, whose C parser takes function types of any arity; its `void *`
    is the C one's own type, so pointers from `pointer` pass to its functions unchanged."""
    import cffi

    return cffi.FFI()


class NativeFunction:
    """``int32_t f(void *a0, void *a1, ...)`` called with C-contiguous numpy arrays.
    ``c_function`` is the function itself, for callers that pass ``pointer(array)``s."""

    def __init__(self, owner: LoadedObject, address: int, num_args: int):
        self._owner = owner  # the code lives as long as the engine that loaded it
        signature = f"int32_t(*)({', '.join(['void *'] * num_args) or 'void'})"
        try:
            self.c_function = _ffi.cast(signature, address)
        except _ffi.error:  # "internal type complexity limit": a few hundred arguments (a model's weights)
            self.c_function = _wide_ffi().cast(signature, address)
        self.address = address
        self.num_args = num_args

    def __call__(self, arrays) -> int:
        """Call with arrays the caller has already checked; returns the status code."""
        return self.c_function(*map(pointer, arrays))
