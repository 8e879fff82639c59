"""Every case of the op table: interpreted through kiln vs plain numpy."""

import itertools
import warnings

import numpy as np
import pytest
from op_table import BINARY_DTYPE_OPS, CASES, OPERAND_KINDS, UNARY_DTYPE_OPS

import kiln
from kiln.dialects import parse_ir, print_ir
from kiln.dialects.tensor import TENSOR_OPS


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != numpy's {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != numpy's {want.shape}"
    if want.dtype.kind == "f":
        # float16 results are numpy's rounded once from float32, where libm may differ by an ulp
        tol = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 2e-6}.get(want.dtype, 1e-12)
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
    """Every tensor op is made by some case, forward or in its gradient (kiln.fused: by fusion)."""
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


def _outcome(fn, *args):
    """What `fn(*args)` gives, as an array, or the exception it raised."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(fn(*args))
    except Exception as exc:  # noqa: BLE001 (numpy refusing a mix is an outcome to compare too)
        return exc


def assert_like_numpy(fn, args, kiln_fn, what):
    """kiln gives numpy's dtype and values, or refuses clearly where numpy refuses."""
    want, got = _outcome(fn, *args), _outcome(kiln_fn, *args)
    if isinstance(want, Exception):
        assert isinstance(got, kiln.KilnError), f"{what}: numpy raises {want!r}, kiln gives {got!r}"
        return
    assert not isinstance(got, Exception), f"{what}: numpy gives {want.dtype}, kiln raises {got!r}"
    assert got.dtype == want.dtype, f"{what}: kiln gives {got.dtype}, numpy {want.dtype}"
    assert_same(got, want)


@pytest.mark.parametrize("name", UNARY_DTYPE_OPS)
def test_result_dtype_matches_numpy_unary(name):
    fn = UNARY_DTYPE_OPS[name]
    compiled = kiln.compile(fn, target="interpret")
    for kind, a in OPERAND_KINDS.items():
        if kind == "bool" and name in ("-x", "abs"):
            continue  # Python's own -True and abs(True) are ints; numpy is not involved
        assert_like_numpy(fn, (a,), compiled, f"{name} of {kind}")


@pytest.mark.parametrize("name", BINARY_DTYPE_OPS)
def test_result_dtype_matches_numpy_binary(name):
    """Both operands as arguments (a Python scalar argument is weak, as in numpy), and the
    second captured by the traced function as a constant."""
    fn = BINARY_DTYPE_OPS[name]
    compiled = kiln.compile(fn, target="interpret")
    for (kind_a, a), (kind_b, b) in itertools.product(OPERAND_KINDS.items(), OPERAND_KINDS.items()):
        if kind_a == kind_b == "bool" and name.startswith(("a ", "divmod")):
            continue  # Python's own True + True is 2 (and divmod(True, True) ints): numpy is not involved
        assert_like_numpy(fn, (a, b), compiled, f"{name} of ({kind_a}, {kind_b})")

        def captured(x, b=b):
            return fn(x, b)

        assert_like_numpy(
            captured, (a,), kiln.compile(captured, target="interpret"), f"{name} of ({kind_a}, captured {kind_b})"
        )
