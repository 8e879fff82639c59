"""Every case of the op table: interpreted through kiln vs plain numpy."""
import numpy as np
import pytest

import kiln
from kiln.dialects import parse_ir, print_ir
from kiln.dialects.tensor import TENSOR_OPS
from op_table import CASES


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != numpy's {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != numpy's {want.shape}"
    if want.dtype.kind == "f":
        tol = 2e-6 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_interpreted_matches_numpy(case):
    want = case.fn(*case.args)
    got = kiln.compile(case.fn, target="interpret")(*case.args)
    assert_same(got, want)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_native_matches_numpy(case):
    want = case.fn(*case.args)
    got = kiln.compile(case.fn)(*case.args)
    assert_same(got, want)


@pytest.mark.parametrize("stage", ["tensor", "affine"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_ir_round_trips(case, stage):
    module = kiln.compile(case.fn).lower(*case.args).module(stage)
    text = print_ir(module)
    assert print_ir(parse_ir(text)) == text
    generic = print_ir(module, generic=True)
    assert print_ir(parse_ir(generic), generic=True) == generic
    assert print_ir(parse_ir(generic)) == text


def test_table_covers_every_tensor_op():
    """Every tensor op is made by some case, forward or in its gradient (tensor.fused: by fusion)."""
    used = set()
    for case in CASES:
        lowered = kiln.compile(case.fn).lower(*case.args)
        used.update(op.name for stage in ("tensor", "optimized") for op in lowered.module(stage).walk())
        wrt = tuple(i for i, a in enumerate(case.args) if np.asarray(a).dtype.kind == "f")
        if wrt and np.asarray(case.fn(*case.args)).dtype.kind == "f":
            loss = kiln.grad(lambda *a, fn=case.fn: np.sum(fn(*a)), argnums=wrt)
            used.update(op.name for op in kiln.compile(loss).lower(*case.args).module("tensor").walk())
    missing = {cls.name for cls in TENSOR_OPS} - used
    assert not missing, f"tensor ops with no case in the op table: {sorted(missing)}"
