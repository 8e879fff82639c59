"""DLPack, the array-exchange protocol of numpy, PyTorch, CuPy and JAX, in ctypes.

An exporter hands out a PyCapsule that holds a managed tensor: a ``DLTensor``
(data pointer, device, shape, strides, element type) plus a deleter. A
consumer that takes the tensor renames the capsule ``"used_..."`` and calls the
deleter when it is done with the memory; a capsule destroyed unconsumed calls
the deleter itself. Two layouts exist (https://dmlc.github.io/dlpack/latest/c_api.html):
``DLManagedTensor`` in a capsule named ``"dltensor"``, which every consumer
accepts, and since DLPack 1.0 ``DLManagedTensorVersioned`` in one named
``"dltensor_versioned"``, which adds a version and flags (read-only, copied);
a consumer asks for the latter with ``max_version=(1, 0)`` or later, and numpy
makes a writable array only from it.

``export`` builds such a capsule for memory kiln owns (the deleter keeps the
owning object alive until the consumer lets go); ``Imported`` takes one from
another library, for memory numpy cannot hold (GPU memory).
"""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

CPU = 1  # kDLCPU
CUDA = 2  # kDLCUDA

VERSION = (1, 0)  # the DLPack version of the versioned layout kiln writes
IS_COPIED = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED

# DLDataTypeCode: kDLInt, kDLUInt, kDLFloat, kDLBool.
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
_KINDS = {code: kind for kind, code in _CODES.items()}

_LEGACY = b"dltensor"
_VERSIONED = b"dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# ``void (*deleter)(self)``: the struct's own address, typed as a plain pointer for both layouts.
_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_LAYOUTS = {_LEGACY: DLManagedTensor, _VERSIONED: DLManagedTensorVersioned}
# A capsule keeps the pointer to its name, not a copy: the names must outlive every capsule.
_USED = {_LEGACY: b"used_dltensor", _VERSIONED: b"used_dltensor_versioned"}

# The C API by raw object addresses: a capsule's destructor runs while the object is being
# freed, when a ``py_object`` argument would take a new reference to it.
_api = ctypes.pythonapi
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api)
)
_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_SetName", _api))

# Exported tensors not yet let go of, by the address of their managed struct: the struct,
# its shape array and the object that owns the memory, all kept alive here until the
# deleter runs (on whichever thread the consumer frees the tensor).
_exported: dict = {}
_exported_lock = threading.Lock()


# A consumer may free its tensor while the interpreter shuts down (a view kept in a module global
# or sys is freed after this module's globals are set to None). The C callbacks below must then
# still be there, and still find what they use: each is kept alive for good, because a freed
# callback's code is unmapped (a crash, not an exception), and reads only what its defaults hold.
def _kept_for_good(callback):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(callback))
    return callback


@_kept_for_good
@_Deleter
def _delete_exported(address, _exported=_exported, _lock=_exported_lock, _finalizing=sys.is_finalizing) -> None:
    if _finalizing():
        return  # the owner stays: freeing it now could run code whose modules are gone; the process frees all
    with _lock:
        _exported.pop(address, None)


# A consumer that refuses a capsule (numpy, handed GPU memory) sets its exception and then frees
# the capsule, so the destructor may start with an exception pending, and Python code cannot
# call into C with one pending. The destructor sets it aside first and puts it back last, through
# ctypes arguments made with the capsule (making them then would be such a call): per capsule,
# by its address, so that destructors on two threads never share them.
_fetch = ctypes.PYFUNCTYPE(None)(("PyErr_Fetch", _api))
_restore = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(("PyErr_Restore", _api))
_error_slots: dict = {}


@_kept_for_good
@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destroy_capsule(
    capsule,
    _error_slots=_error_slots,
    _fetch=_fetch,
    _layouts=_LAYOUTS,
    _is_valid=_is_valid,
    _get_pointer=_get_pointer,
    _addressof=ctypes.addressof,
    _restore=_restore,
) -> None:
    # Subscripts and the call that clears the error only: unpacking a tuple or calling any other
    # function would find the pending exception and raise it.
    entry = _error_slots[capsule]
    _fetch(*entry[1])
    slots = entry[0]
    del _error_slots[capsule]
    # Still under its first name: no consumer took the tensor, so nobody else will call its deleter.
    for name, layout in _layouts.items():
        if _is_valid(capsule, name):
            managed = layout.from_address(_get_pointer(capsule, name))
            managed.deleter(_addressof(managed))
    if slots[0].value:
        # ctypes raises the restored exception here, and reports it as unraisable as the callback
        # returns: the consumer's message is shown, but its caller sees a SystemError instead.
        _restore(*(slot.value for slot in slots))


def data_type(dtype) -> DLDataType:
    """The DLPack element type of a numpy dtype; ``BufferError`` for one DLPack cannot describe."""
    dtype = np.dtype(dtype)
    if dtype.kind not in _CODES:
        raise BufferError(f"DLPack has no element type for {dtype}")
    return DLDataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)


def numpy_dtype(t: DLDataType) -> np.dtype:
    """The numpy dtype of a DLPack element type; ``BufferError`` for one numpy has not."""
    if t.lanes != 1 or t.code not in _KINDS or t.bits % 8 or (t.code == _CODES["f"] and t.bits not in (16, 32, 64)):
        raise BufferError(f"DLPack element type (code {t.code}, {t.bits} bits, {t.lanes} lanes) has no numpy dtype")
    kind = _KINDS[t.code]
    return np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{t.bits // 8}")


def export(pointer: int, shape, dtype, device: tuple, owner, versioned: bool = False, flags: int = 0) -> object:
    """A capsule for the C-contiguous array of `shape` and `dtype` at address `pointer` on
    `device` ((device type, id)); `owner` is kept alive until the consumer is done with it.
    ``versioned`` writes the DLPack 1.0 layout, with `flags`; else the unversioned one."""
    shape = tuple(int(n) for n in shape)
    name = _VERSIONED if versioned else _LEGACY
    managed = _LAYOUTS[name]()
    if versioned:
        managed.version = DLPackVersion(*VERSION)
        managed.flags = flags
    extents = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    tensor = managed.dl_tensor
    tensor.data = pointer
    tensor.device = DLDevice(*device)
    tensor.ndim = len(shape)
    tensor.dtype = data_type(dtype)
    tensor.shape = extents
    tensor.strides = None  # NULL: compact row-major
    tensor.byte_offset = 0
    managed.deleter = _delete_exported
    address = ctypes.addressof(managed)
    with _exported_lock:
        _exported[address] = (managed, extents, owner)
    slots = (ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p())
    try:
        capsule = _new_capsule(address, name, ctypes.cast(_destroy_capsule, ctypes.c_void_p))
    except BaseException:
        with _exported_lock:
            _exported.pop(address, None)
        raise
    _error_slots[id(capsule)] = (slots, tuple(ctypes.byref(slot) for slot in slots))
    return capsule


class Imported:
    """A tensor taken from a DLPack capsule (either layout): its address (byte offset applied),
    shape, strides in elements (None: row-major), dtype and device. The memory stays valid
    until ``release()``, which calls the producer's deleter once (as freeing this object does).
    ``BufferError`` for anything but an unconsumed capsule, or an element type numpy lacks."""

    def __init__(self, capsule):
        self._lock = threading.Lock()
        self._managed = None
        names = [n for n in _LAYOUTS if type(capsule).__name__ == "PyCapsule" and _is_valid(id(capsule), n)]
        if not names:
            raise BufferError("not a DLPack capsule, or one already consumed")
        (name,) = names
        self._managed = _LAYOUTS[name].from_address(_get_pointer(id(capsule), name))
        _set_name(id(capsule), _USED[name])  # ours now: the capsule will not call the deleter
        tensor = self._managed.dl_tensor
        self.device = (tensor.device.device_type, tensor.device.device_id)
        self.shape = tuple(tensor.shape[k] for k in range(tensor.ndim))
        self.strides = tuple(tensor.strides[k] for k in range(tensor.ndim)) if tensor.strides else None
        self.pointer = (tensor.data or 0) + tensor.byte_offset
        try:
            self.dtype = numpy_dtype(tensor.dtype)
        except BufferError:
            self.release()
            raise

    def is_c_contiguous(self) -> bool:
        if self.strides is None:
            return True
        expected = 1
        for n, stride in reversed(list(zip(self.shape, self.strides))):
            if n != 1 and stride != expected:
                return False
            expected *= n
        return True

    def release(self, _addressof=ctypes.addressof) -> None:
        with self._lock:
            managed, self._managed = self._managed, None
        if managed is not None and managed.deleter:
            managed.deleter(_addressof(managed))

    def __del__(self, _finalizing=sys.is_finalizing):
        # At shutdown the producer's deleter may belong to a library already torn down: leave it.
        if getattr(self, "_managed", None) is not None and not _finalizing():
            self.release()
