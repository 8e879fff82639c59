"""kiln: an ahead-of-time tensor compiler for numpy code.

    @kiln.compile
    def predict(x, w, b):
        return np.maximum(x @ w + b, 0)

    predict(x, w, b)                              # numpy in, numpy out
    print(predict.lower(kiln.f32[64, 784], kiln.f32[784, 10], kiln.f32[10]).text("tensor"))
"""
from .errors import (ArgumentError, DTypeError, KilnError, NonFiniteError, OutOfBoundsError, ParseError, ShapeError,
                     StageError,
                     TracerBoolError, TracerConversionError, UnsupportedError, VerificationError)
from .grad import grad, value_and_grad
from .gradcheck import GradcheckReport, GradientMismatchError, gradcheck
from .cuda_target import to_device
from .jit import CompiledFunction, Lowered, compile
from .profiler import Profile, profile
from .bisect import BisectReport, bisect
from .nn import conv2d, logsumexp, relu, sigmoid, softmax
from .specs import TensorSpec, bool_, f32, f64, i32, i64
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.schedule import Schedule
from kiln.runtime.library import LoadError, load
from kiln.runtime.cuda import DeviceArray

__version__ = "0.1.0"

__all__ = [
    "compile", "CompiledFunction", "Lowered", "grad", "value_and_grad", "gradcheck", "GradcheckReport", "GradientMismatchError", "TensorSpec", "f32", "f64", "i32", "i64", "bool_",
    "relu", "sigmoid", "softmax", "logsumexp", "conv2d",
    "KilnError", "ShapeError", "DTypeError", "VerificationError", "ParseError", "TracerBoolError",
    "TracerConversionError", "UnsupportedError", "OutOfBoundsError", "ArgumentError", "StageError", "__version__",
    "NonFiniteError",
    "Schedule", "ScheduleError", "load", "LoadError", "to_device", "DeviceArray", "profile", "Profile", "bisect", "BisectReport",
]
