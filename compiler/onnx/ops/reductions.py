"""ONNX reductions handlers."""

from __future__ import annotations
