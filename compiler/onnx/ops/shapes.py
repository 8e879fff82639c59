"""ONNX shapes handlers."""

from __future__ import annotations
