"""ONNX activations handlers."""

from __future__ import annotations
