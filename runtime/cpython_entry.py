"""One compiled signature as a CPython builtin function: the call path of plain arrays in C.

Calling native code from Python through cffi costs a few microseconds before the code
runs: the compiled function's ``__call__``, a dictionary lookup by the arguments' shapes
and dtypes, a cffi pointer per array, ``np.empty`` per result, the thread count, the
cffi call. For kernels of a few microseconds (an embedding lookup, a small layer) that
is most of the time. An *entry* does all of it in generated code:
``PyObject *entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)`` (`self` a
tuple whose first item is the caller's miss sentinel and whose others own the code), a
``METH_FASTCALL`` builtin (the convention CPython's own builtins use), generated as LLVM
IR for one signature. Per call it

- checks each argument is exactly a ``numpy.ndarray`` (no subclass) with the compiled
  number of dimensions, shape and dtype (its descriptor is numpy's own for that dtype),
  C-contiguous and aligned, reading the array's fields as numpy's inline accessors
  (``PyArray_DATA``, ``PyArray_NDIM``, ``PyArray_DIMS``, ``PyArray_DESCR``,
  ``PyArray_FLAGS``) do;
- allocates each result with numpy's ``PyArray_Empty``;
- releases the GIL, applies the process's thread count (``omp_set_num_threads``), calls the
  kernel, takes the GIL back;
- returns the result (a tuple of them where there are several).

Anything it does not prove returns `miss` itself (the caller's sentinel): wrong count,
another type, a view, another shape, a non-native descriptor, a failed status (the
checked path runs the code again and raises the error the status stands for). So a miss
is only slower, never wrong.

The field offsets and numpy's C-API slot are not assumed: ``_numpy_layout`` reads them
back from a live array and numpy's own header, and where anything differs (another
numpy ABI, a free-threaded or non-CPython interpreter) ``make_entry`` returns None and
calls keep the Python path.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
import sysconfig

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from kiln.runtime import threads
from kiln.runtime.native import LLVM_LOCK, LoadedObject

# numpy's array flags (ndarraytypes.h) and CPython's calling convention (methodobject.h).
NPY_ARRAY_C_CONTIGUOUS = 0x0001
NPY_ARRAY_ALIGNED = 0x0100
METH_FASTCALL = 0x0080

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)


class _MethodDef(ctypes.Structure):
    """CPython's PyMethodDef."""

    _fields_ = [
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


@functools.lru_cache(maxsize=None)
def _target_machine():
    """The host's target machine without optimization: an entry is a straight line of loads,
    compares and calls, which LLVM's fast instruction selector emits in a few milliseconds
    (at -O3 it took 35-65 ms). Use under LLVM_LOCK."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
        cpu=llvm.get_host_cpu_name(), opt=0, reloc="pic", codemodel="default"
    )


def _c_api(name: str) -> int:
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


@functools.lru_cache(maxsize=None)
def _numpy_layout():
    """The offsets of an ndarray's fields and the addresses this entry calls, checked on this
    interpreter and numpy; None where they cannot be relied on."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    empty_slot = _empty_slot()
    if empty_slot is None:
        return None
    try:
        from numpy._core import _multiarray_umath as multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as multiarray
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(multiarray._ARRAY_API, None)
    # PyArrayObject_fields (ndarraytypes.h): the object header, then data, nd, dimensions, strides,
    # base, descr, flags. Read back from an array whose every field is known.
    offsets = {"data": 16, "nd": 24, "dimensions": 32, "descr": 56, "flags": 64}
    probe = np.empty((3, 5), np.float32)
    base = id(probe)
    word = ctypes.c_ssize_t
    dims = word.from_address(base + offsets["dimensions"]).value
    if (
        word.from_address(base + 8).value != id(np.ndarray)
        or word.from_address(base + offsets["data"]).value != probe.ctypes.data
        or ctypes.c_int.from_address(base + offsets["nd"]).value != 2
        or (word * 2).from_address(dims)[:] != [3, 5]
        or word.from_address(base + offsets["descr"]).value != id(probe.dtype)
        or ctypes.c_int.from_address(base + offsets["flags"]).value != probe.flags.num
    ):
        return None
    number = 1.5
    pair = (probe, number)  # PyTupleObject (tupleobject.h): the object header, ob_size, then ob_item[]
    if word.from_address(id(pair) + 24).value != id(probe):
        return None
    # PyFloatObject (floatobject.h): the object header, then the double ob_fval
    if (
        word.from_address(id(number) + 8).value != id(float)
        or ctypes.c_double.from_address(id(number) + 16).value != 1.5
    ):
        return None
    return {
        **offsets,
        "ob_fval": 16,
        "ob_item": 24,
        "float": id(float),
        "ndarray": id(np.ndarray),
        "PyArray_Empty": ctypes.c_void_p.from_address(table + 8 * empty_slot).value,
        "Py_IncRef": _c_api("Py_IncRef"),
        "Py_DecRef": _c_api("Py_DecRef"),
        "PyTuple_New": _c_api("PyTuple_New"),
        "PyTuple_SetItem": _c_api("PyTuple_SetItem"),
        "PyEval_SaveThread": _c_api("PyEval_SaveThread"),
        "PyEval_RestoreThread": _c_api("PyEval_RestoreThread"),
        "PyCFunction_NewEx": _c_api("PyCFunction_NewEx"),
    }


def _empty_slot() -> int | None:
    """PyArray_Empty's slot in numpy's C-API table, as this numpy's header declares it (the
    slots are numpy's ABI, but read, not assumed); None without the header."""
    header = os.path.join(np.get_include(), "numpy", "__multiarray_api.h")
    try:
        with open(header) as f:
            text = f.read()
    except OSError:
        return None
    found = re.search(
        r"#define PyArray_Empty \\\s*\(\*\(PyObject \* \(\*\)\(int, npy_intp const \*, PyArray_Descr \*, int\)\) \\"
        r"\s*PyArray_API\[(\d+)\]\)",
        text,
    )
    return int(found.group(1)) if found else None


def make_entry(kernel_address: int, input_specs, output_specs, miss, as_tuple: bool = True, floats=(), keep=()):
    """A builtin function ``entry(*arrays)`` that calls the kernel at
    `kernel_address` (``int32_t f(void *in..., void *out...)``) on plain arrays of
    `input_specs` and returns fresh arrays of `output_specs` ((shape, dtype) pairs;
    zero-dimensional ones as arrays), as a tuple, or the one result itself where
    `as_tuple` is false; or `miss` where it cannot prove the call safe. The inputs at the
    positions `floats` are Python floats (weak scalars) instead, of a float32 or float64
    spec of shape (): the entry converts them as ``np.asarray(x, dtype)`` does (the
    nearest value, ties to even). The function owns `keep` (the objects that own the
    kernel's code) and its own code, so they live as long as it does. None where this
    interpreter or numpy is not one whose layout was checked, or a dtype has no native
    descriptor."""
    layout = _numpy_layout()
    count = threads.count_cell()
    if layout is None:
        return None
    descrs = []
    for k, (shape, dtype) in enumerate(input_specs):
        if k in floats and (shape != () or np.dtype(dtype) not in (np.float32, np.float64)):
            return None
    for _, dtype in list(input_specs) + list(output_specs):
        dtype = np.dtype(dtype)
        if not dtype.isnative or dtype is not np.dtype(dtype.char):
            return None
        descrs.append(id(dtype))
    if not as_tuple and len(output_specs) != 1:
        raise ValueError("only a single result can be returned as itself")
    module = _entry_module(kernel_address, input_specs, output_specs, descrs, layout, count, as_tuple, set(floats))
    with LLVM_LOCK:
        code = _target_machine().emit_object(llvm.parse_assembly(str(module)))
    loaded = LoadedObject(code)
    definition = _MethodDef(b"kiln_entry", loaded.global_address("entry"), METH_FASTCALL, None)
    new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)(
        layout["PyCFunction_NewEx"]
    )
    # A builtin function points at its PyMethodDef and code without owning them; it owns its
    # `self`, so `self` holds them (and the kernel's owners), with `miss` first for the code to
    # return. Any thread may drop the caller's last other reference while a call runs.
    return new(ctypes.addressof(definition), (miss, definition, loaded, *keep), None)


def _entry_module(kernel_address, input_specs, output_specs, descrs, layout, count, as_tuple, floats) -> ir.Module:
    module = ir.Module("kiln_entry")
    module.triple = llvm.get_process_triple()
    entry = ir.Function(module, ir.FunctionType(_i8p, [_i8p, _i8p.as_pointer(), _i64]), "entry")
    owner, args, nargs = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    miss_block = entry.append_basic_block("miss")
    # self is the tuple (miss, ...): its first item, PyTuple_GET_ITEM(self, 0).
    miss_object = b.load(b.bitcast(b.gep(owner, [ir.Constant(_i64, layout["ob_item"])]), _i8p.as_pointer()))

    def c_function(name, result, *params):
        return c_function_at(b, layout[name], result, *params)

    def field(obj, name, type_):
        address = b.gep(obj, [ir.Constant(_i64, layout[name])])
        return b.load(b.bitcast(address, type_.as_pointer()))

    def require(condition):
        passed = entry.append_basic_block()
        b.cbranch(condition, passed, miss_block)
        b.position_at_end(passed)

    def equal(value, constant):
        return b.icmp_unsigned("==", value, ir.Constant(value.type, constant))

    # The reference counting calls first: the miss block uses them, so they must dominate it.
    incref = c_function("Py_IncRef", ir.VoidType(), _i8p)
    decref = c_function("Py_DecRef", ir.VoidType(), _i8p)
    # A Python float's value, converted, lives in this call's frame while the kernel reads it.
    scalars = {k: b.alloca(_float_type(input_specs[k][1])) for k in sorted(floats)}

    # Arguments: the count, then each array's type, dimensions, shape, descriptor and flags.
    require(equal(nargs, len(input_specs)))
    pointers = []
    for k, (shape, _) in enumerate(input_specs):
        array = b.load(b.gep(args, [ir.Constant(_i64, k)]))
        type_ = b.load(b.bitcast(b.gep(array, [ir.Constant(_i64, 8)]), _i64.as_pointer()))
        if k in scalars:
            require(equal(type_, layout["float"]))
            value = field(array, "ob_fval", ir.DoubleType())
            if scalars[k].type.pointee != value.type:
                value = b.fptrunc(value, scalars[k].type.pointee)  # IEEE round to nearest, ties to even
            b.store(value, scalars[k])
            pointers.append(b.bitcast(scalars[k], _i8p))
            continue
        require(equal(type_, layout["ndarray"]))
        require(equal(field(array, "nd", _i32), len(shape)))
        dims = field(array, "dimensions", _i64.as_pointer())
        for axis, size in enumerate(shape):
            require(equal(b.load(b.gep(dims, [ir.Constant(_i64, axis)])), size))
        require(equal(b.ptrtoint(field(array, "descr", _i8p), _i64), descrs[k]))
        wanted = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
        require(equal(b.and_(field(array, "flags", _i32), ir.Constant(_i32, wanted)), wanted))
        pointers.append(field(array, "data", _i8p))

    # Results: PyArray_Empty(nd, dims, descr, 0), which steals a reference to the descriptor.
    empty = c_function("PyArray_Empty", _i8p, _i32, _i64.as_pointer(), _i8p, _i32)
    results = []

    def release_results():
        for result in results:
            b.call(decref, [result])

    for k, (shape, _) in enumerate(output_specs):
        dims = ir.GlobalVariable(module, ir.ArrayType(_i64, max(len(shape), 1)), f"dims{k}")
        dims.initializer = ir.Constant(dims.value_type, list(shape) or [0])
        dims.global_constant, dims.linkage = True, "private"
        descr = ir.Constant(_i64, descrs[len(input_specs) + k]).inttoptr(_i8p)
        b.call(incref, [descr])
        result = b.call(empty, [ir.Constant(_i32, len(shape)), b.bitcast(dims, _i64.as_pointer()), descr, _i32(0)])
        with b.if_then(b.icmp_unsigned("==", result, ir.Constant(_i8p, None)), likely=False):
            release_results()  # the MemoryError numpy set stands
            b.ret(result)
        results.append(result)
        pointers.append(field(result, "data", _i8p))

    # The call, without the GIL, with the process's thread count; results with no elements need none.
    if any(int(np.prod(shape)) for shape, _ in output_specs):
        state = b.call(c_function("PyEval_SaveThread", _i8p), [])
        if count is not None:
            cell, set_threads = count
            value = b.load(ir.Constant(_i64, cell).inttoptr(_i32.as_pointer()))
            b.call(c_function_at(b, set_threads, ir.VoidType(), _i32), [value])
        kernel = c_function_at(b, kernel_address, _i32, *[_i8p] * len(pointers))
        status = b.call(kernel, pointers)
        b.call(c_function("PyEval_RestoreThread", ir.VoidType(), _i8p), [state])
        with b.if_then(b.icmp_unsigned("!=", status, _i32(0)), likely=False):
            release_results()
            b.call(incref, [miss_object])
            b.ret(miss_object)

    if not as_tuple:
        b.ret(results[0])
    else:
        new_tuple = c_function("PyTuple_New", _i8p, _i64)
        set_item = c_function("PyTuple_SetItem", _i32, _i8p, _i64, _i8p)
        tuple_ = b.call(new_tuple, [ir.Constant(_i64, len(results))])
        with b.if_then(b.icmp_unsigned("==", tuple_, ir.Constant(_i8p, None)), likely=False):
            release_results()
            b.ret(tuple_)
        for k, result in enumerate(results):
            b.call(set_item, [tuple_, ir.Constant(_i64, k), result])  # steals the reference
        b.ret(tuple_)

    b.position_at_end(miss_block)
    b.call(incref, [miss_object])
    b.ret(miss_object)
    return module


def _float_type(dtype):
    return ir.FloatType() if np.dtype(dtype) == np.float32 else ir.DoubleType()


def c_function_at(b: ir.IRBuilder, address: int, result, *params):
    """A call target at a fixed address in this process."""
    return b.inttoptr(ir.Constant(_i64, address), ir.FunctionType(result, params).as_pointer())
