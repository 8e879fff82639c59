"""Call compiled CUDA code: a shared library (built by ``kiln.codegen.nvcc``) loaded
through cffi, with device memory and host<->device copies through libcudart.

An emulated library (the same source built as C++ for the CPU, the grid and block
loops explicit) is called on host memory: how kiln checks its CUDA kernels on
machines without a GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import cffi
import numpy as np

from kiln.runtime import config, dlpack


class CudaUnavailable(Exception):
    """target='cuda' on a machine without nvcc, the CUDA runtime or an NVIDIA GPU."""


@functools.lru_cache(maxsize=None)
def _cudart():
    path = ctypes.util.find_library("cudart")
    candidates = [path] if path else []
    candidates += ["libcudart.so", "/usr/local/cuda/lib64/libcudart.so"]
    for candidate in candidates:
        try:
            runtime = ctypes.CDLL(candidate)
        except OSError:
            continue
        # Without argtypes ctypes passes Python ints as 32-bit C ints: host pointers would be cut.
        runtime.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        runtime.cudaFree.argtypes = [ctypes.c_void_p]
        runtime.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        runtime.cudaGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
        runtime.cudaGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
        runtime.cudaGetErrorString.restype = ctypes.c_char_p
        runtime.cudaGetDeviceProperties.argtypes = [ctypes.c_void_p, ctypes.c_int]
        runtime.cudaDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        runtime.cudaEventCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        runtime.cudaEventDestroy.argtypes = [ctypes.c_void_p]
        runtime.cudaEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        runtime.cudaEventSynchronize.argtypes = [ctypes.c_void_p]
        runtime.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
        return runtime
    return None


# What the emulation returns, named where there is no CUDA runtime to ask (cudaGetErrorString's words).
_EMULATED_ERRORS = {9: "invalid configuration argument"}


def error_string(error: int) -> str:
    runtime = _cudart()
    if runtime is not None:
        message = runtime.cudaGetErrorString(error).decode()
    else:
        message = _EMULATED_ERRORS.get(error, "no CUDA runtime to name it")
    return f"CUDA error {error} ({message})"


def _check(runtime, error: int, what: str) -> None:
    if error:
        raise RuntimeError(f"{what} failed: {error_string(error)}")


def check_gpu() -> None:
    """Raise CudaUnavailable saying what is missing: the CUDA runtime or a GPU."""
    runtime = _cudart()
    if runtime is None:
        raise CudaUnavailable("target='cuda' needs the CUDA runtime (libcudart), and it cannot be loaded")
    count = ctypes.c_int(0)
    error = runtime.cudaGetDeviceCount(ctypes.byref(count))
    if error != 0 or count.value == 0:
        detail = error_string(error) if error else "0 devices"
        raise CudaUnavailable(
            f"target='cuda' needs an NVIDIA GPU, and none is available (cudaGetDeviceCount: {detail})"
        )


# cudaDeviceAttr values (driver_types.h; fixed since CUDA 5): read one by one, because the
# layout of cudaDeviceProp after its first field, the name, changes between CUDA versions.
ATTRIBUTE_MULTIPROCESSORS = 16
ATTRIBUTE_MAJOR = 75
ATTRIBUTE_MINOR = 76
PROPERTIES_BYTES = 8192  # more than any CUDA version's cudaDeviceProp (about 1 KiB)


def device_properties() -> dict:
    """The current GPU: ``{"name": str, "major": int, "minor": int, "multiprocessors": int}``
    (compute capability major.minor), from cudaGetDeviceProperties (the name, its first
    field) and cudaDeviceGetAttribute. Raises CudaUnavailable without a runtime or a GPU."""
    check_gpu()
    runtime = _cudart()
    device = ctypes.c_int(0)
    _check(runtime, runtime.cudaGetDevice(ctypes.byref(device)), "cudaGetDevice")
    properties = ctypes.create_string_buffer(PROPERTIES_BYTES)
    _check(runtime, runtime.cudaGetDeviceProperties(properties, device.value), "cudaGetDeviceProperties")
    values = {}
    for key, attribute in (
        ("major", ATTRIBUTE_MAJOR),
        ("minor", ATTRIBUTE_MINOR),
        ("multiprocessors", ATTRIBUTE_MULTIPROCESSORS),
    ):
        value = ctypes.c_int(0)
        _check(runtime, runtime.cudaDeviceGetAttribute(ctypes.byref(value), attribute, device.value), key)
        values[key] = value.value
    name = properties.raw[:256].split(b"\0", 1)[0].decode(errors="replace")
    return {"name": name, **values}


class EventTimer:
    """Times GPU work with CUDA events: ``timer(fn)`` records an event, calls `fn`, records
    another, waits for it and returns the seconds between the two on the GPU's clock
    (cudaEventElapsedTime; about half a microsecond of resolution). Raises CudaUnavailable
    without a CUDA runtime, RuntimeError when a CUDA call fails."""

    def __init__(self):
        self.runtime = _require_runtime()
        self.start, self.stop = ctypes.c_void_p(), ctypes.c_void_p()
        _check(self.runtime, self.runtime.cudaEventCreate(ctypes.byref(self.start)), "cudaEventCreate")
        _check(self.runtime, self.runtime.cudaEventCreate(ctypes.byref(self.stop)), "cudaEventCreate")

    def __call__(self, fn) -> float:
        runtime = self.runtime
        _check(runtime, runtime.cudaEventRecord(self.start, None), "cudaEventRecord")
        fn()
        _check(runtime, runtime.cudaEventRecord(self.stop, None), "cudaEventRecord")
        _check(runtime, runtime.cudaEventSynchronize(self.stop), "cudaEventSynchronize")
        milliseconds = ctypes.c_float(0.0)
        _check(
            runtime,
            runtime.cudaEventElapsedTime(ctypes.byref(milliseconds), self.start, self.stop),
            "cudaEventElapsedTime",
        )
        return milliseconds.value / 1e3

    def __del__(self):
        for event in (getattr(self, "start", None), getattr(self, "stop", None)):
            if event is not None and event.value:
                self.runtime.cudaEventDestroy(event)


class DeviceArray:
    """An array that stays in GPU memory between calls (host memory under emulation).

    `shape` is a tuple of ints, `dtype` a numpy dtype kiln supports (float32, float64,
    int32, int64, bool); the elements are C-contiguous, ``nbytes`` = size * itemsize bytes.
    Compiled functions take it, or any object with ``__cuda_array_interface__`` (CuPy,
    PyTorch CUDA tensors), without copying, and return their results as DeviceArrays
    when any input was one. ``.numpy()`` copies to the host. Other libraries take it
    without a copy through DLPack (``torch.from_dlpack``, ``cupy.from_dlpack``; for the
    emulated kind, in host memory, ``np.from_dlpack``), and through
    ``__cuda_array_interface__`` on a GPU. Constructing one raises ``CudaUnavailable``
    where there is no CUDA runtime, except with ``emulate=True``.

    >>> d = kiln.to_device(np.arange(4, dtype=np.float32), target="cuda-emulate")
    >>> d
    DeviceArray(shape=(4,), dtype=float32, host memory, emulated)
    >>> view = np.from_dlpack(d)  # no copy: writes through one show through the other
    >>> view[0] = 7
    >>> d.numpy()
    array([7., 1., 2., 3.], dtype=float32)
    """

    def __init__(self, shape, dtype, emulate: bool = False):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.emulate = emulate
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._imported = None  # the DLPack tensor whose memory this is, when another library owns it
        if emulate:
            self._host = np.empty(self.shape, self.dtype)
            self.pointer = self._host.ctypes.data
            self.device_id = 0
        else:
            runtime = _require_runtime()
            pointer, device = ctypes.c_void_p(), ctypes.c_int(0)
            _check(runtime, runtime.cudaGetDevice(ctypes.byref(device)), "cudaGetDevice")
            _check(runtime, runtime.cudaMalloc(ctypes.byref(pointer), max(1, self.nbytes)), "cudaMalloc")
            self.pointer = pointer.value
            self.device_id = device.value

    @classmethod
    def from_numpy(cls, array, emulate: bool = False) -> "DeviceArray":
        array = np.ascontiguousarray(array)
        device = cls(array.shape, array.dtype, emulate)
        device._copy(device.pointer, array.ctypes.data, 1)
        return device

    @classmethod
    def adopt(cls, imported: dlpack.Imported) -> "DeviceArray":
        """A DeviceArray over the GPU memory of a consumed DLPack tensor, without a copy; the
        memory goes back to its owner when the DeviceArray is freed. ``ValueError`` for a
        tensor that is not C-contiguous in CUDA memory."""
        if imported.device[0] != dlpack.CUDA:
            imported.release()
            raise ValueError(f"a DLPack tensor on device type {imported.device[0]} is not in CUDA memory")
        if not imported.is_c_contiguous():
            imported.release()
            raise ValueError("a DLPack tensor is not C-contiguous; make a contiguous copy on the device first")
        array = cls.__new__(cls)
        array.shape, array.dtype, array.emulate = imported.shape, imported.dtype, False
        array.nbytes = int(np.prod(array.shape, dtype=np.int64)) * array.dtype.itemsize
        array.pointer, array.device_id, array._imported = imported.pointer, imported.device[1], imported
        return array

    def numpy(self) -> np.ndarray:
        """A host copy."""
        host = np.empty(self.shape, self.dtype)
        self._copy(host.ctypes.data, self.pointer, 2)
        return host

    def __array__(self, dtype=None, copy=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def _copy(self, destination: int, source: int, kind: int) -> None:
        if self.emulate:
            ctypes.memmove(destination, source, self.nbytes)
        else:
            runtime = _require_runtime()
            _check(runtime, runtime.cudaMemcpy(destination, source, self.nbytes, kind), "cudaMemcpy")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def kiln_device_layout(self) -> dict:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.pointer, False),
            "version": 3,
            "strides": None,
        }

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.emulate:  # CuPy or PyTorch must not take a host address for a device one
            raise AttributeError("an emulated DeviceArray lives in host memory")
        return self.kiln_device_layout

    def __dlpack_device__(self) -> tuple:
        """(DLPack device type, device id): (2, id) for CUDA memory, (1, 0) for the host
        memory of an emulated array."""
        return (dlpack.CPU, 0) if self.emulate else (dlpack.CUDA, self.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this array's memory (no copy unless ``copy=True``), which keeps
        the array alive until the consumer is done with it. kiln's kernels have finished when a
        call returns, so a consumer's `stream` needs no synchronization. ``BufferError`` for
        another device than ``__dlpack_device__()``, or ``copy=False`` across devices."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            if tuple(dl_device)[0] != dlpack.CPU or copy is False:
                raise BufferError(f"a DeviceArray on {self.__dlpack_device__()} cannot be exported to {dl_device}")
            return self.numpy().__dlpack__()
        source = self
        if copy:
            source = DeviceArray(self.shape, self.dtype, self.emulate)
            source._copy(source.pointer, self.pointer, 3)
        # The versioned layout for consumers that ask for it: numpy makes writable arrays only from it.
        versioned = max_version is not None and tuple(max_version) >= dlpack.VERSION
        return dlpack.export(
            source.pointer,
            source.shape,
            source.dtype,
            source.__dlpack_device__(),
            source,
            versioned,
            dlpack.IS_COPIED if copy else 0,
        )

    def __repr__(self) -> str:
        where = "host memory, emulated" if self.emulate else "GPU"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, {where})"

    def __del__(self):
        if not self.emulate and getattr(self, "_imported", None) is None and getattr(self, "pointer", None):
            runtime = _cudart()
            if runtime is not None:
                runtime.cudaFree(self.pointer)
            self.pointer = None


def _require_runtime():
    runtime = _cudart()
    if runtime is None:
        raise CudaUnavailable("the CUDA runtime (libcudart) cannot be loaded")
    return runtime


def device_pointer(value, shape, dtype):
    """The device address of a DeviceArray or ``__cuda_array_interface__`` object of this
    shape and dtype, None for anything else; a clear error when it does not match."""
    layout = getattr(value, "kiln_device_layout", None) or getattr(value, "__cuda_array_interface__", None)
    if layout is None:
        return None
    if tuple(layout["shape"]) != tuple(shape):
        raise ValueError(f"a device array has shape {tuple(layout['shape'])}, the compiled code expects {tuple(shape)}")
    if np.dtype(layout["typestr"]) != np.dtype(dtype):
        raise ValueError(
            f"a device array has dtype {np.dtype(layout['typestr'])}, the compiled code expects "
            f"{np.dtype(dtype)}; convert it on the device first"
        )
    strides = layout.get("strides")
    if strides is not None and tuple(strides) != np.empty(shape, dtype).strides:
        raise ValueError("a device array is not C-contiguous; make a contiguous copy on the device first")
    return layout["data"][0]


def check_emulation_environment() -> None:
    """Raise ValueError naming the variable if ``KILN_EMULATE_ORDER`` (``forward`` or
    ``reverse``) or ``KILN_EMULATE_THREADS`` (1 to 64 host threads) is set to anything else:
    the emulation reads them at every launch, and a typo would quietly test something else."""
    config.get("KILN_EMULATE_ORDER")  # each raises for a value its parser refuses
    config.get("KILN_EMULATE_THREADS")


class CudaFunction:
    """The host entry of a built library, called with arguments that are host arrays (copied
    to the device and back) or device addresses (used as they are)."""

    def __init__(self, library_path: str, entry: str, num_args: int, emulate: bool):
        self.ffi = cffi.FFI()
        self.ffi.cdef(f"int {entry}({', '.join(['void *'] * num_args) or 'void'});")
        self.lib = self.ffi.dlopen(library_path)
        self.entry = getattr(self.lib, entry)
        self.emulate = emulate

    def __call__(self, inputs, outputs) -> int:
        """`inputs` and `outputs` hold numpy arrays or ints (device addresses)."""
        if self.emulate:
            check_emulation_environment()
            return self.entry(
                *[
                    self.ffi.cast("void *", a)
                    if isinstance(a, int)
                    else self.ffi.from_buffer(a, require_writable=False)
                    for a in inputs + outputs
                ]
            )
        runtime = _require_runtime()
        owned, addresses = [], []
        try:
            for array in inputs + outputs:
                if isinstance(array, int):
                    addresses.append(array)
                    continue
                pointer = ctypes.c_void_p()
                _check(runtime, runtime.cudaMalloc(ctypes.byref(pointer), max(1, array.nbytes)), "cudaMalloc")
                owned.append(pointer)
                addresses.append(pointer.value)
            for array, address in zip(inputs, addresses):
                if not isinstance(array, int):
                    _check(
                        runtime,
                        runtime.cudaMemcpy(address, array.ctypes.data, array.nbytes, 1),
                        "cudaMemcpy to the GPU",
                    )
            status = self.entry(*[self.ffi.cast("void *", a or 0) for a in addresses])
            if status == 0:
                for array, address in zip(outputs, addresses[len(inputs) :]):
                    if not isinstance(array, int):
                        _check(
                            runtime,
                            runtime.cudaMemcpy(array.ctypes.data, address, array.nbytes, 2),
                            "cudaMemcpy from the GPU",
                        )
            return status
        finally:
            for pointer in owned:
                runtime.cudaFree(pointer)
