"""Sorting along an axis (sort, argsort, partition, top_k) and what builds on it (median, quantile)."""

from __future__ import annotations

from kiln.frontend.numpy_api import FUNCTION_RULES

FUNCTION_RULES.update({})
