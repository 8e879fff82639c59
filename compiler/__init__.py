"""kiln: an ahead-of-time tensor compiler for numpy code.

@kiln.compile
def predict(x, w, b):
    return np.maximum(x @ w + b, 0)

predict(x, w, b)                              # numpy in, numpy out
print(predict.lower(kiln.f32[64, 784], kiln.f32[784, 10], kiln.f32[10]).text("tensor"))
"""

from kiln import random
from kiln.aot import Compiled, Lowered
from kiln.devices import to_device
from kiln.dlpack import from_dlpack
from kiln.errors import (
    ArgumentError,
    CudaUnavailable,
    DTypeError,
    GradientMismatchError,
    IntegerOverflowError,
    InvalidValueError,
    KilnError,
    LoadError,
    NonFiniteError,
    OutOfBoundsError,
    ParseError,
    ScheduleError,
    ShapeError,
    StageError,
    TracerBoolError,
    TracerConversionError,
    UnsupportedError,
    VerificationError,
)
from kiln.frontend.nn import conv2d, logsumexp, relu, sigmoid, softmax, top_k
from kiln.frontend.specs import TensorSpec, bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from kiln.jit import CompiledFunction, compile
from kiln.library import load
from kiln.passes.schedule import Schedule
from kiln.runtime.cuda import DeviceArray
from kiln.tools.bisect import BisectReport, bisect
from kiln.tools.gradcheck import GradcheckReport, gradcheck
from kiln.tools.profiler import Profile, profile
from kiln.tools.weights import load_weights, save_weights
from kiln.transforms import grad, value_and_grad
from kiln.version import __version__

__all__ = [
    "compile",
    "CompiledFunction",
    "Lowered",
    "Compiled",
    "grad",
    "value_and_grad",
    "gradcheck",
    "GradcheckReport",
    "GradientMismatchError",
    "IntegerOverflowError",
    "InvalidValueError",
    "TensorSpec",
    "f16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "bool_",
    "relu",
    "sigmoid",
    "softmax",
    "top_k",
    "logsumexp",
    "conv2d",
    "random",
    "KilnError",
    "ShapeError",
    "DTypeError",
    "VerificationError",
    "ParseError",
    "TracerBoolError",
    "TracerConversionError",
    "UnsupportedError",
    "OutOfBoundsError",
    "ArgumentError",
    "StageError",
    "__version__",
    "NonFiniteError",
    "Schedule",
    "ScheduleError",
    "load",
    "LoadError",
    "CudaUnavailable",
    "to_device",
    "from_dlpack",
    "DeviceArray",
    "profile",
    "Profile",
    "bisect",
    "BisectReport",
    "save_weights",
    "load_weights",
]


def __getattr__(name):
    # kiln.onnx (the ONNX front end) is imported on first use: `import kiln` stays light.
    if name == "onnx":
        import importlib

        return importlib.import_module("kiln.onnx")
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
