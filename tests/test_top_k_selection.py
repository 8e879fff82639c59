"""Sorted prefixes as selections: a slice of the first k <= 16 positions of a sort (numpy's
``np.argsort(x)[..., :k]``, ``np.sort(x)[..., :k]``, ``kiln.top_k``) becomes ``kiln.sort``
with ``count = k``, lowered to an O(n k) selection (passes/lower_sort.py, _select). The
oracle is numpy's stable sort cut to k, bit for bit: ties in index order, NaN last (first in
descending order), -0.0 equal to 0.0 and kept where it was, NaN payloads kept in the values,
integer limits, every dtype, on every target that runs code."""

import numpy as np
import pytest
from stage_checks import MLIR_OPT, assert_mlir_opt_accepts_every_stage
from test_sorting_ops import DTYPES, bits_equal, keys, stable_argsort

import kiln
from kiln.dialects import tensor_sort as TS
from kiln.passes.canonicalize import SELECTION_MAX


def descending_order(x):
    return TS.stable_order(x, descending=True)


def sorts_of(lowered, stage="optimized"):
    return [op for op in lowered.module(stage).walk() if isinstance(op, TS.SortOp)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_prefix_of_argsort_and_sort_in_every_dtype(dtype, k):
    x = keys((6, 23), dtype, seed=k)
    f = kiln.compile(lambda a: (np.argsort(a, axis=1)[:, :k], np.sort(a, axis=1)[:, :k]))
    got_index, got_values = f(x)
    bits_equal(got_index, stable_argsort(x, 1)[:, :k])
    bits_equal(got_values, np.sort(x, axis=1, kind="stable")[:, :k])
    assert all(op.count == k for op in sorts_of(f.lower(x)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_top_k_is_the_descending_stable_order_cut_to_k(dtype):
    x = keys((5, 4, 19), dtype, seed=3)
    values, index = kiln.compile(lambda a: kiln.top_k(a, 4))(x)
    want = descending_order(x)[..., :4]
    bits_equal(index, want)
    bits_equal(values, np.take_along_axis(x, want, axis=-1))


@pytest.mark.parametrize("n, k", [(2, 1), (17, 16), (17, 1), (64, 7), (127, 3)])
def test_lengths_around_k(n, k):
    x = np.random.default_rng(n).standard_normal((7, n)).astype(np.float32)  # 7 rows: groups of 1
    x[:, ::5] = x[0, 0]  # ties across the row
    f = kiln.compile(lambda a: np.argsort(-a, axis=1)[:, :k])
    bits_equal(f(x), stable_argsort(-x, 1)[:, :k])


def test_nan_payloads_and_signed_zeros_come_back_unchanged():
    payloads = np.array([0x7FC00001, 0xFFC00002, 0x7F800003], np.uint32).view(np.float32)
    x = np.array([[1.0, payloads[0], -0.0, 0.0, payloads[1], -1.0, payloads[2], -0.0]], np.float32)
    got = kiln.compile(lambda a: np.sort(a, axis=1)[:, : 8 - 1])(x)
    want = np.sort(x, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_lead_slices_and_non_contiguous_views():
    x = keys((9, 2, 40), np.float64, seed=5)
    f = kiln.compile(lambda a: np.argsort(a[::-1, :, ::2], axis=-1)[1:7:2, :, :3])
    bits_equal(f(x), stable_argsort(x[::-1, :, ::2], -1)[1:7:2, :, :3])


def test_what_stays_a_full_sort():
    spec = kiln.f32[4, 40]
    for fn in (
        lambda a: np.argsort(a, axis=1)[:, : SELECTION_MAX + 1],  # too many for a selection
        lambda a: np.argsort(a, axis=1)[:, 1:4],  # not a prefix
        lambda a: np.argsort(a, axis=1)[:, :6:2],  # strided
    ):
        assert [op.count for op in sorts_of(kiln.compile(fn).lower(spec))] == [40]
    both = kiln.compile(lambda a: (np.argsort(a, axis=1)[:, :3], np.argsort(a, axis=1))).lower(spec)
    assert sorted(op.count for op in sorts_of(both)) in ([40], [3, 40])


@pytest.mark.parametrize("target", ["interpret", "cuda-emulate"])
def test_other_targets(target):
    x = keys((6, 19), np.float32, seed=9)
    got = kiln.compile(lambda a: kiln.top_k(a, 5), target=target)(x)
    bits_equal(got[1], descending_order(x)[:, :5])


def test_gradient_of_selected_values_matches_finite_differences():
    x = np.random.default_rng(4).permutation(60).reshape(5, 12) * 0.37  # distinct: no ties
    assert kiln.gradcheck(lambda a: np.sum(kiln.top_k(a, 3)[0] ** 2), x).ok
    assert kiln.gradcheck(lambda a: np.sum(np.sort(a, axis=1)[:, :4] * np.arange(4.0)), x).ok


def test_the_op_refuses_a_count_outside_the_row():
    from kiln.dialects.diagnostics import KilnError
    from kiln.dialects.ir import Block
    from kiln.dialects.types import TensorType, f32

    block = Block([TensorType((3, 5), f32)])
    for count in (-1, 6, 2.5, True):
        with pytest.raises(KilnError, match="count must be an int in"):
            TS.SortOp([block.args[0]], {"order": "ascending", "returns": "values", "count": count}).verify()


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
def test_mlir_opt_accepts_every_stage_of_selections():
    for fn, spec in [
        (lambda a: np.argsort(-a, axis=1)[:, :5], kiln.f32[8, 33]),
        (lambda a: kiln.top_k(a, 2), kiln.u64[3, 5]),
        (lambda a: np.sort(a)[..., :3], kiln.i8[2, 3, 9]),
    ]:
        assert_mlir_opt_accepts_every_stage(kiln.compile(fn).lower(spec))
