"""Bad inputs get numpy's answer or a clear exception, never a wrong answer: each case is
checked against numpy (the same result, or an exception of the Python class numpy raises,
whose message names the problem and, while tracing, the user's line)."""

import re

import numpy as np
import pytest

import kiln


def numpy_error(fn, *args):
    """The exception numpy raises for fn(*args) (the test fails if it raises none)."""
    with pytest.raises(Exception) as info:
        fn(*args)
    return type(info.value)


def refuses_as_numpy(fn, args, error, match, compiled_args=None):
    """kiln raises `error` (message matching `match`, at this file's line when tracing) where
    numpy raises an exception of a class `error` derives from."""
    assert issubclass(error, numpy_error(fn, *args))
    with pytest.raises(error, match=match) as info:
        kiln.compile(fn)(*(args if compiled_args is None else compiled_args))
    return info.value


def at_user_line(error):
    assert re.search(r"test_input_errors\.py:\d+: ", str(error)), str(error)


# -- np.searchsorted's sorter --------------------------------------------------------------------
A = np.array([3.0, 1.0, 2.0])
V = np.array([1.5, 2.5, 0.0, 7.0])


@pytest.mark.parametrize(
    "sorter, error, match",
    [
        (np.array([1, 2]), kiln.ShapeError, r"sorter\.size must equal a\.size.*2.*3"),
        (np.array([1, 2, 0, 0]), kiln.ShapeError, r"sorter\.size must equal a\.size"),
        (np.array([[1, 2, 0]]), kiln.ArgumentError, r"could not parse sorter.*1-d.*\(1, 3\)"),
        (np.array([1.0, 2.0, 0.0]), kiln.DTypeError, r"sorter must only contain integers.*float64"),
        (np.array([True, False, True]), kiln.DTypeError, r"sorter must only contain integers.*bool"),
        (np.array([1, 2, 0], np.uint64), kiln.InvalidValueError, r"could not parse sorter.*uint64"),
    ],
)
@pytest.mark.parametrize("traced", [True, False], ids=["traced", "constant"])
def test_searchsorted_refuses_a_bad_sorter_while_tracing(sorter, error, match, traced):
    if traced:
        fn, args = (lambda a, v, s: np.searchsorted(a, v, sorter=s)), (A, V, sorter)
    else:
        fn, args = (lambda a, v: np.searchsorted(a, v, sorter=sorter)), (A, V)
    at_user_line(refuses_as_numpy(fn, args, error, match))


@pytest.mark.parametrize("bad", [3, 5, -1, -3])
def test_searchsorted_refuses_a_sorter_entry_out_of_range(bad):
    sorter = np.array([1, 2, bad])
    constant = refuses_as_numpy(
        lambda a, v: np.searchsorted(a, v, sorter=sorter),
        (A, V),
        kiln.InvalidValueError,
        f"Sorter index out of range.*{bad}",
    )
    at_user_line(constant)
    # a traced sorter is checked when the function runs; numpy refuses negative entries too
    # (np.take would count them from the end)
    numpy_error(lambda a, v, s: np.searchsorted(a, v, sorter=s), A, V, sorter)
    with pytest.raises(kiln.OutOfBoundsError, match=r"out of bounds for axis 0 with size 3"):
        kiln.compile(lambda a, v, s: np.searchsorted(a, v, sorter=s))(A, V, sorter)


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.int64])
def test_searchsorted_with_a_good_sorter_matches_numpy(dtype):
    sorter = np.argsort(A).astype(dtype)
    expected = np.searchsorted(A, V, sorter=sorter)
    np.testing.assert_array_equal(kiln.compile(lambda a, v, s: np.searchsorted(a, v, sorter=s))(A, V, sorter), expected)
    np.testing.assert_array_equal(
        kiln.compile(lambda s: np.searchsorted([3.0, 1.0, 2.0], V, sorter=s))(sorter), expected
    )
    np.testing.assert_array_equal(kiln.compile(lambda a: np.searchsorted(a, V, sorter=list(sorter)))(A), expected)


# -- a dtype of the other byte order --------------------------------------------------------------
@pytest.mark.parametrize("code", ["f4", "f8", "i8", "u2"])
def test_a_dtype_of_the_other_byte_order_is_refused_with_the_fix(code):
    swapped = np.dtype(code).newbyteorder("S")
    x = np.arange(3).astype(swapped)
    with pytest.raises(kiln.DTypeError, match=re.escape(f".astype('={code}')")):
        kiln.compile(lambda x: x + 1)(x)
    with pytest.raises(kiln.DTypeError, match=re.escape(f".astype('={code}')")) as info:
        kiln.compile(lambda y: y + x)(np.arange(3).astype(code))  # a captured constant
    at_user_line(info.value)
    fixed = x.astype(f"={code}")
    np.testing.assert_array_equal(kiln.compile(lambda x: x + 1)(fixed), x + 1)


# -- np.bincount ----------------------------------------------------------------------------------
# (with traced weights, so that kiln's np.bincount, not numpy's, sees the constant input)
def test_bincount_of_uint64_is_numpys():
    x, w = np.array([1, 0, 3, 3], np.uint64), np.arange(4.0)
    np.testing.assert_array_equal(kiln.compile(lambda w: np.bincount(x, w))(w), np.bincount(x, w))
    np.testing.assert_array_equal(kiln.compile(lambda x: np.bincount(x, minlength=6))(x), np.bincount(x, minlength=6))
    huge = np.array([2**63 + 1, 1], np.uint64)  # numpy converts it to a negative int64
    error = refuses_as_numpy(
        lambda w: np.bincount(huge, w), (np.ones(2),), kiln.InvalidValueError, "'list' argument must have no negative"
    )
    at_user_line(error)


@pytest.mark.parametrize("x", [np.array([1, -1]), np.array([7, 1]), np.array([2**63 + 1, 1], np.uint64)])
def test_bincount_names_the_inputs_values_when_the_function_runs(x):
    with pytest.raises(kiln.OutOfBoundsError, match=r"np\.bincount: the input's values must lie in 0\.\.4") as info:
        kiln.compile(lambda x: np.bincount(x, minlength=5))(x)
    at_user_line(info.value)


@pytest.mark.parametrize(
    "x, minlength, error, match",
    [
        (np.array([1.0, 2.0]), 0, kiln.DTypeError, r"dtype\('float64'\) to dtype\('int64'\) according to the rule"),
        (np.array([1, -2]), 0, kiln.InvalidValueError, "'list' argument must have no negative elements"),
        (np.array([1, 2]), -1, kiln.InvalidValueError, "'minlength' must not be negative"),
    ],
)
def test_bincount_refuses_as_numpy(x, minlength, error, match):
    w = np.ones(x.shape)
    at_user_line(refuses_as_numpy(lambda w: np.bincount(x, w, minlength=minlength), (w,), error, match))


# -- histograms whose edges are not finite ---------------------------------------------------------
WIDE = np.array([-1e308, 1e308, 0.0])
Y = np.array([0.0, 1.0, 3.0])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: np.histogram2d(x, y, 4, range=[(-1e308, 1e308), (0, 1)]),
        lambda x, y: np.histogramdd(np.stack([x, y], 1), 4, range=[(-1e308, 1e308), (0, 1)]),
    ],
)
def test_a_range_whose_width_overflows_is_refused_while_tracing(fn):
    numpy_error(fn, WIDE, Y)  # numpy: "invalid entry in coordinates array" for this data, NaN edges for others
    with pytest.raises(
        kiln.ShapeError, match=r"range\[0\] = \(-1e\+308, 1e\+308\) is too wide.*overflows float64"
    ) as info:
        kiln.compile(fn)(WIDE, Y)
    at_user_line(info.value)
    with pytest.raises(ValueError, match="Too many bins"):  # np.histogram's own refusal, as numpy's
        kiln.compile(lambda x: np.histogram(x, 4, range=(-1e308, 1e308)))(WIDE)


@pytest.mark.parametrize(
    "x", [WIDE, np.array([0.0, np.nan, 1.0]), np.array([0.0, np.inf, 1.0])], ids=["wide", "nan", "inf"]
)
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: np.histogram(x, 4),
        lambda x, y: np.histogram2d(x, y, 4),
        lambda x, y: np.histogramdd(np.stack([x, y], 1), 4),
    ],
    ids=["histogram", "histogram2d", "histogramdd"],
)
def test_data_without_finite_edges_raise_when_the_function_runs(x, fn):
    numpy_error(fn, x, Y)
    with pytest.raises(kiln.OutOfBoundsError, match="bin edges of dimension 0.*are not finite") as info:
        kiln.compile(fn)(x, Y)
    at_user_line(info.value)
    for got, want in zip(kiln.compile(fn)(Y, Y), fn(Y, Y)):  # finite data: numpy's answer
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want) if not isinstance(want, list) else want)


# -- the offending index of a run-time check -----------------------------------------------------
@pytest.mark.parametrize("index", [np.array([0, 7, 2]), np.array([0, -7]), np.array([3, 9], np.int32)])
@pytest.mark.parametrize(
    "fn", [lambda x, i: x[i], lambda x, i: np.take(x, i), lambda x, i: x[i + 1]], ids=["getitem", "take", "computed"]
)
def test_a_failed_index_check_names_numpys_first_offending_index(fn, index):
    x = np.arange(5.0)
    with pytest.raises(IndexError) as expected:
        fn(x, index)
    with pytest.raises(kiln.OutOfBoundsError, match=re.escape(str(expected.value))) as info:
        kiln.compile(fn)(x, index)
    at_user_line(info.value)
