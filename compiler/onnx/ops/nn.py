"""ONNX nn handlers."""

from __future__ import annotations
