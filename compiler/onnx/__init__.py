"""ONNX models in: ``kiln.onnx.load`` imports a model into kiln's ``tensor`` IR, and every
later stage (graph passes, autodiff, schedules, tuning, ``kiln build``, CUDA C) serves it
as it serves a traced numpy function. ``kiln.onnx.Backend`` runs ONNX's own backend tests.

Needs the optional ``onnx`` package (``pip install onnx``, or ``pip install -e '.[onnx]'`` in
kiln's checkout); ``import kiln`` does not.
"""

from kiln.onnx.model import OnnxFunction, load, supported_ops

__all__ = ["load", "OnnxFunction", "Backend", "BackendRep", "supported_ops"]


def __getattr__(name):
    # The backend subclasses onnx's own Backend, so importing it imports the onnx package;
    # it loads on first use, and kiln.onnx.load alone never needs it.
    if name in ("Backend", "BackendRep"):
        from kiln.onnx import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'kiln.onnx' has no attribute {name!r}")
