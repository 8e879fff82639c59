"""numpy parity on corners the fuzzer found: maximum and minimum at signed zeros,
matmul of bool and integer arrays, and reductions over an axis of a 0-d array.
numpy's answer is the expected value throughout, compared bit for bit (the sign
of a zero, NaN, the dtype), on the CPU, the interpreter and the emulated CUDA."""
import shutil
import warnings

import numpy as np
import pytest

import kiln
from kiln import KilnError

TARGETS = ["cpu", "interpret",
           pytest.param("cuda-emulate", marks=pytest.mark.skipif(shutil.which("g++") is None,
                                                                 reason="no C++ compiler (g++) for the emulation"))]


def run(fn, target, *args):
    return kiln.compile(fn, target=target)(*args)


def expected_of(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def assert_same(got, expected):
    """Equal in value, shape, dtype, NaN-ness and the sign of every zero."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# -- reductions over an axis of a 0-d array --------------------------------------------
ZERO_D_REDUCTIONS = {
    "sum0": lambda x: np.sum(x, axis=0),
    "sum-1-keepdims": lambda x: np.sum(x, axis=-1, keepdims=True),
    "max-1-keepdims": lambda x: np.max(x, axis=-1, keepdims=True),
    "min0": lambda x: np.min(x, axis=0),
    "amax0": lambda x: np.amax(x, axis=np.int64(0)),
    "prod-1": lambda x: np.prod(x, axis=-1),
    "any0": lambda x: np.any(x, axis=0),
    "all-1": lambda x: np.all(x, axis=-1, keepdims=True),
    "argmax0": lambda x: np.argmax(x, axis=0),
    "argmin-1-keepdims": lambda x: np.argmin(x, axis=-1, keepdims=True),
    "squeeze0": lambda x: np.squeeze(x, axis=0),
    "add.reduce-1": lambda x: np.add.reduce(x, axis=-1),
    "maximum.reduce0": lambda x: np.maximum.reduce(x, axis=0),
    "method": lambda x: x.max(axis=0) + x.sum(-1),
    "softmax": lambda x: kiln.softmax(x),
    "logsumexp-1": lambda x: kiln.logsumexp(x, axis=-1),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(ZERO_D_REDUCTIONS))
@pytest.mark.parametrize("value", [np.array(2.0), np.array(-0.0, np.float32), np.array(np.nan),
                                   np.array(7, np.int32), np.array(True)], ids=repr)
def test_reduction_over_an_axis_of_a_0d_array(target, name, value):
    fn = ZERO_D_REDUCTIONS[name]
    if name in ("softmax", "logsumexp-1") and value.dtype.kind != "f":
        pytest.skip("float helpers")
    assert_same(run(fn, target, value), expected_of(fn, value))


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_of_a_python_float(target):
    """kiln.softmax(0.5) is 1.0 eagerly; so is the compiled softmax of a float argument."""
    assert_same(run(kiln.softmax, target, 0.5), kiln.softmax(0.5))
    assert_same(run(kiln.softmax, target, 0.5), np.float64(1.0))


@pytest.mark.parametrize("fn", [lambda x: np.sum(x, axis=1), lambda x: np.sum(x, axis=(0,)),
                                lambda x: np.max(x, axis=(-1,)), lambda x: np.mean(x, axis=0),
                                lambda x: np.var(x, axis=-1), lambda x: np.std(x, axis=0),
                                lambda x: np.argmax(x, axis=1), lambda x: np.squeeze(x, axis=(0,))],
                         ids=["sum1", "sum(0,)", "max(-1,)", "mean0", "var-1", "std0", "argmax1", "squeeze(0,)"])
def test_0d_axes_numpy_rejects_are_rejected(fn):
    value = np.array(2.0)
    with pytest.raises(np.exceptions.AxisError):
        fn(value)
    with pytest.raises(KilnError, match="out of range"):
        run(fn, "cpu", value)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("axis", [(), 0, None])
def test_sum_over_no_axes_starts_at_zero(target, axis):
    """numpy's sum starts at 0.0, so a sum over no axes (or over a 0-d array) turns -0.0 into 0.0."""
    x = np.array([-0.0, 1.0, -0.0, np.nan, -np.inf], np.float32)
    fn = (lambda a: np.sum(a, axis=())) if axis == () else (lambda a: np.sum(a[0], axis=axis))
    assert_same(run(fn, target, x), expected_of(fn, x))


# -- matmul of bool and integer arrays ---------------------------------------------------
MATMUL_SHAPES = [((2, 2), (2, 2)), ((1, 1), (1, 1)), ((3, 5), (5, 4)), ((7, 13), (13, 17)), ((16, 33), (33, 40)),
                 ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((2, 5, 7), (7, 3)), ((7,), (7,)), ((7,), (7, 4)), ((4, 7), (7,))]


def _operands(dtype, shapes, rng):
    if dtype == np.bool_:
        return [rng.random(s) < 0.25 for s in shapes]
    info = np.iinfo(dtype)  # the whole range, so sums of products wrap around as numpy's do
    return [rng.integers(info.min, info.max, s, dtype=dtype, endpoint=True) for s in shapes]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_of_bool_and_integer_arrays(target, dtype, shapes):
    a, b = _operands(dtype, shapes, np.random.default_rng(len(shapes[0]) * 100 + shapes[0][-1]))
    assert_same(run(lambda x, y: x @ y, target, a, b), expected_of(np.matmul, a, b))


@pytest.mark.parametrize("target", TARGETS)
def test_bool_matmul_examples(target):
    assert_same(run(lambda x: x @ x, target, np.ones((2, 2), bool)), np.ones((2, 2), bool))
    a = np.array([[True, False], [False, False]])
    assert_same(run(lambda x, y: x @ y, target, a, a.T), a @ a.T)
    views = np.random.default_rng(5).random((12, 10)) < 0.3  # strided, reversed and transposed views
    left, right = views[::-2, 1::3], views[:6, ::-2].T[:3]
    assert_same(run(lambda x, y: np.dot(x, y), target, left, right), np.dot(left, right))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("other", [np.int32, np.int64, np.float32])
def test_bool_matmul_with_another_dtype_promotes(target, other):
    rng = np.random.default_rng(3)
    a, b = rng.random((3, 4)) < 0.5, (rng.integers(-5, 5, (4, 2))).astype(other)
    assert_same(run(lambda x, y: x @ y, target, a, b), a @ b)
    assert_same(run(lambda x, y: x @ y, target, b.T, a.T), b.T @ a.T)
