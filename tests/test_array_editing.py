"""numpy's array editing functions at their corners: every form of insert's and delete's
positions, block's nesting rules, the in-place writers reaching views, choose's modes, pad's ramp
and statistic modes with special values and integer rounding, the apply_* loops, and the errors,
each at the user's line. The op table holds the everyday cases."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln

TARGETS = ["interpret", "cpu", "cuda-emulate"]

SPECIALS = np.array([np.nan, -0.0, np.inf, -np.inf, 0.0, 1.5, -2.25], np.float64)


def assert_same(got, want):
    """Same dtype and shape, equal values (floats to numpy's rounding), NaN where numpy has NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind == "f":
        tol = 2e-6 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def check(fn, *args, target="interpret"):
    assert_same(kiln.compile(fn, target=target)(*args), fn(*args))


x35 = np.arange(15, dtype=np.float64).reshape(3, 5) - 7.5
i35 = np.arange(15, dtype=np.int32).reshape(3, 5) * 3 - 20


# -- insert, delete, append, resize, block ------------------------------------------------------
INSERTS = {
    "scalar_flat": lambda x: np.insert(x, 4, -1.0),
    "scalar_end": lambda x: np.insert(x, x.shape[1], [9.0, 8.0, 7.0], axis=1),
    "negative": lambda x: np.insert(x, -5, 0.5, axis=1),
    "scalar_row_block": lambda x: np.insert(x, 1, [[1.0], [2.0]], axis=0),
    "one_element_list": lambda x: np.insert(x, [1], [[1.0], [2.0], [3.0]], axis=1),
    "duplicates_in_order": lambda x: np.insert(x, [2, 2, 0, 5], [10.0, 20.0, 30.0, 40.0], axis=1),
    "unsorted_values": lambda x: np.insert(x, [3, 1], x[:, :2], axis=1),
    "slice_reversed": lambda x: np.insert(x, slice(None, None, -2), -3.0, axis=1),
    "empty_list": lambda x: np.insert(x, [], 1.0),
    "traced_values_cast": lambda x: np.insert(x.astype(np.int64), 2, x[0, :1] * 1.9, axis=0),
    "bool_array": lambda x: np.insert(x > 0, 1, x[:, 0], axis=1),
    "one_position_many_values": lambda x: np.insert(x, [4], [1.0, 2.0, 3.0]),
    "one_position_column": lambda x: np.insert(x, np.array([-2]), x[:, :2], axis=1),
    "mask_positions": lambda x: np.insert(x, np.array([False, True, True]), -1.0, axis=0),
}


@pytest.mark.parametrize("name", INSERTS)
def test_insert_matches_numpy(name):
    check(INSERTS[name], x35)


DELETES = {
    "int_negative": lambda x: np.delete(x, -1),
    "slice_negative_step": lambda x: np.delete(x, slice(4, None, -2), axis=1),
    "repeated": lambda x: np.delete(x, [1, 1, -4], axis=1),
    "empty_list": lambda x: np.delete(x, [], axis=0),
    "everything": lambda x: np.delete(x, slice(None), axis=0),
    "mask": lambda x: np.delete(x, np.array([True, False, True]), axis=0),
    "array_2d": lambda x: np.delete(x, np.array([[0], [4]]), axis=1),
}


@pytest.mark.parametrize("name", DELETES)
def test_delete_matches_numpy(name):
    check(DELETES[name], x35)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 6),
    st.lists(st.integers(-7, 7), max_size=4),
    st.sampled_from([None, 0, 1, -1]),
    st.booleans(),
)
def test_insert_and_delete_match_numpy_on_random_positions(n, positions, axis, as_int):
    x = np.arange(3 * n, dtype=np.int64).reshape(3, n) - 4
    obj = positions[0] if as_int and positions else positions

    def edit(a):
        return np.delete(np.insert(a, obj, -100, axis=axis), obj, axis=axis)

    for fn in (
        lambda a: np.insert(a, obj, a.reshape(-1)[:1] * 7, axis=axis),
        lambda a: np.delete(a, obj, axis=axis),
        edit,
    ):
        try:
            want = fn(x)
        except IndexError:
            with pytest.raises(IndexError):
                kiln.compile(fn, target="interpret")(x)
            continue
        except ValueError:
            with pytest.raises(ValueError):
                kiln.compile(fn, target="interpret")(x)
            continue
        assert_same(kiln.compile(fn, target="interpret")(x), want)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["maximum", "minimum", "mean", "median", "linear_ramp"]),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=2),
    st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=2, max_size=2),
    st.sampled_from([np.float64, np.int32]),
)
def test_pad_statistics_match_numpy_on_random_widths(mode, widths, lengths, dtype):
    x = (np.arange(20).reshape(4, 5) * 7 % 11 - 5).astype(dtype)
    keywords = {"end_values": lengths} if mode == "linear_ramp" else {"stat_length": lengths}

    def fn(a):
        return np.pad(a, widths, mode, **keywords)

    check(fn, x)


@pytest.mark.parametrize("target", TARGETS)
def test_editing_keeps_special_values_and_integer_extremes(target):
    limits = np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max], np.int64)
    check(lambda x: np.append(np.insert(x, [0, 3], x[::-1][:2]), x[:1]), SPECIALS, target=target)
    check(lambda a: np.delete(np.resize(a, (3, 3)), [1, -1], axis=1), limits, target=target)
    check(lambda x: np.block([[x[:3], x[3:6]], [x[1:], x[:0]]]), SPECIALS, target=target)


def test_append_promotes_as_numpy():
    check(lambda a: np.append(a, 2.5), np.arange(3, dtype=np.int32))
    check(lambda a: np.append(a, np.float32(2.5)), np.arange(3, dtype=np.uint8))
    check(lambda a, b: np.append(a, b, axis=-1), x35.astype(np.float32), i35)


@pytest.mark.parametrize("shape", [(), 0, (0, 4), 7, (2, 3, 2), [4]])
def test_resize_fills_cyclically(shape):
    check(lambda a: np.resize(a[::-1], shape), i35)
    check(lambda a: np.resize(a[:0], shape), x35)


def test_block_follows_numpys_nesting():
    check(lambda x: np.block(x), x35)
    check(lambda x: np.block([[x[0, 0]], [2.0]]), x35)  # 0-d blocks become (1, 1)
    check(lambda x: np.block([[x], [x[:1]]]), x35)
    check(lambda x: np.block([x[0], x[1, :2]]), x35)
    check(lambda x: np.block([[[x[:, :2]], [x[:, 2:4]]]]), x35)  # (1, 2, 3, 2): depth 3 below rank 2
    check(lambda x, a: np.block([[x, a]]), x35.astype(np.float32), i35.astype(np.uint8))


# -- in-place writers ------------------------------------------------------------------------------
def test_put_along_axis_writes_through_views_and_the_last_duplicate_wins():
    def fn(x, i, v):
        y = x * 1
        view = y[:, ::-1]
        np.put_along_axis(view, i, v, axis=1)
        return y, view

    index = np.array([[0, 0, -1], [4, 2, 4], [-5, 1, 1]])
    for target in TARGETS:
        got, want = kiln.compile(fn, target=target)(x35, index, x35[:, :3]), fn(x35, index, x35[:, :3])
        for g, w in zip(got, want):
            assert_same(g, w)


def test_put_along_axis_without_an_axis_writes_the_flat_array():
    def fn(x, v):
        y = x * 1
        np.put_along_axis(y[1:], np.array([9, -1, 0, 9]), v, axis=None)  # a contiguous view: numpy writes y
        return y

    check(fn, x35, x35[0, :4])
    check(fn, x35, np.float64(np.nan))


def test_put_along_axis_broadcasts_indices_and_values():
    def fn(x, v):
        y = x + 0
        np.put_along_axis(y, np.array([[1, 3]]), v, axis=1)
        return y

    check(fn, x35, np.float64(-0.0))
    check(fn, x35, np.array([[1.5], [2.5], [3.5]]))


@pytest.mark.parametrize(
    "shape, wrap", [((5, 3), False), ((5, 3), True), ((7, 2), True), ((3, 5), True), ((1, 1), False)]
)
def test_fill_diagonal_as_numpy(shape, wrap):
    def fn(x, v):
        y = x * 1
        np.fill_diagonal(y, v, wrap=wrap)
        return y

    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    check(fn, x, np.array([-1.0, -2.0], np.float32))
    check(fn, x.astype(np.int64), 7.9)  # numpy's flat assignment casts unsafely


def test_fill_diagonal_of_a_view_writes_its_base():
    def fn(x):
        y = x * 1
        np.fill_diagonal(y[:, 1:4], np.nan)
        return y

    check(fn, x35)


@pytest.mark.parametrize("target", TARGETS)
def test_place_with_a_traced_mask_cycles_values_over_the_trues(target):
    def fn(x, v):
        y = x * 1
        np.place(y, x > 0, v)
        return y

    check(fn, x35, np.array([1.5, -2.5, 3.5, 0.25]), target=target)
    check(fn, x35 - 100, np.array([1.5]), target=target)  # no True: unchanged
    check(fn, i35, np.array([7, -1], np.int16), target=target)

    def from_list(x):
        y = x * 1
        np.place(y, x > 0, [7.9, -1.2])  # a list is converted unsafely, an array only by the 'safe' rule
        return y

    check(from_list, i35, target=target)


def test_place_with_a_constant_mask_and_a_view():
    def fn(x):
        y = x * 1
        np.place(y.T, np.eye(5, 3, dtype=bool), [10, 20])
        return y

    check(fn, i35)


# -- choose, ediff1d, vander ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["wrap", "clip"])
def test_choose_modes(mode):
    check(lambda i, x: np.choose(i, [x, x * 2, np.float32(-1)], mode=mode), np.arange(-4, 11).reshape(3, 5), x35)


def test_choose_from_one_array_and_broadcasts():
    check(lambda x: np.choose(np.array([[1], [0], [2]]), x[:, :1]), x35)
    check(lambda x: np.choose(np.array([1, 0, 2, 1, 0]), x), x35)
    check(lambda i, x: np.choose(i, x), np.array([2, 2, 0, 1, 0], np.uint8), i35)


def test_ediff1d_keeps_the_input_dtype():
    check(lambda a: np.ediff1d(a, to_end=np.array([1, 2], np.int8)), i35.astype(np.int16) * 2000)
    check(lambda x: np.ediff1d(x, to_begin=np.nan, to_end=[[np.inf]]), x35.astype(np.float32))
    check(lambda x: np.ediff1d(x[:1]), SPECIALS)


@pytest.mark.parametrize("target", TARGETS)
def test_vander(target):
    check(lambda x: np.vander(x, 4), SPECIALS, target=target)
    check(lambda x: np.vander(x, 0), SPECIALS, target=target)
    check(lambda x: np.vander(x, 1, increasing=True), np.arange(4, dtype=np.uint8), target=target)
    check(lambda x: np.vander(x, 6), np.array([-3, 2, 7], np.int64), target=target)


# -- pad's ramp and statistic modes ----------------------------------------------------------------
PADS = {
    "ramp_default": lambda x: np.pad(x, ((1, 2), (3, 0)), "linear_ramp"),
    "ramp_traced_end": lambda x: np.pad(x, 2, "linear_ramp", end_values=x[0, 0]),
    "ramp_width_one": lambda x: np.pad(x, ((0, 1), (1, 0)), "linear_ramp", end_values=((5, 6), (7, 8))),
    "max_stat_longer_than_axis": lambda x: np.pad(x, 2, "maximum", stat_length=10),
    "min_per_side": lambda x: np.pad(x, ((1, 2), (2, 1)), "minimum", stat_length=((1, 3), (2, 1))),
    "mean_default": lambda x: np.pad(x, ((3, 0), (1, 4)), "mean"),
    "median_even": lambda x: np.pad(x, 1, "median", stat_length=(2, 4)),
    "zero_width": lambda x: np.pad(x, 0, "mean"),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint8])
@pytest.mark.parametrize("name", PADS)
def test_pad_statistic_and_ramp_modes(name, dtype):
    check(PADS[name], (x35 * 3 + 30).astype(dtype))


def test_integer_mean_and_median_round_half_to_even():
    check(lambda a: np.pad(a, (2, 2), "mean", stat_length=2), np.array([1, 2, 5, 4], np.int64))
    check(lambda a: np.pad(a, (1, 1), "median", stat_length=2), np.array([3, 4, 8, 11], np.int32))
    check(lambda a: np.pad(a, (5, 3), "linear_ramp", end_values=(-7, 9)), np.array([2, 3], np.int32))


def test_bool_statistics_are_cast_not_rounded():
    mask = np.array([[True, False, False], [False, False, False]])
    for mode in ("mean", "median", "maximum", "minimum", "linear_ramp"):
        check(lambda b: np.pad(b, 1, mode), mask)  # a mean of 1/3 is True, as numpy's bool cast


def test_statistics_see_nan_as_numpy():
    check(lambda x: np.pad(x, 2, "maximum"), SPECIALS)
    check(lambda x: np.pad(x, 1, "mean", stat_length=3), SPECIALS[3:])
    check(lambda x: np.pad(x[1:], (1, 1), "minimum", stat_length=2), SPECIALS)


def test_pad_of_an_empty_array_keeps_its_shape():
    check(lambda x: np.pad(x[:0], ((0, 0), (1, 2)), "mean"), x35)


# -- apply_along_axis, apply_over_axes --------------------------------------------------------------
def test_apply_along_axis_stacks_as_numpy():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 11
    check(lambda x: np.apply_along_axis(np.max, 1, x), x)
    check(lambda x: np.apply_along_axis(lambda v: v[0], -1, x), x)
    check(lambda x: np.apply_along_axis(np.diag, 2, x), x)  # a (4, 4) result per line: (2, 3, 4, 4)
    check(lambda x: np.apply_along_axis(np.diag, 0, x), x)
    check(lambda x: np.apply_along_axis(lambda v, scale=1: v.sum() * scale > 0, 1, x, scale=-1), x)
    check(lambda x: np.apply_along_axis(lambda v: 3, 0, x), x)  # a Python int: int64 results
    check(lambda a: np.apply_along_axis(np.cumsum, 1, a), i35.astype(np.int8))


def test_apply_along_axis_casts_later_results_to_the_first_ones_dtype():
    def fn(a):
        calls = []

        def line(v):
            calls.append(v)
            return v.sum() if len(calls) == 1 else v.sum() * 0.75  # int64, then float64 cast to int64

        return np.apply_along_axis(line, 1, a)

    check(fn, i35)


def test_apply_over_axes():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check(lambda x: np.apply_over_axes(np.sum, x, [0, -1]), x)
    check(lambda x: np.apply_over_axes(np.mean, x, 1), x)
    check(lambda x: np.apply_over_axes(lambda a, k: np.cumsum(a, axis=k), x, (2, 0)), x)


# -- errors --------------------------------------------------------------------------------------------
ERRORS = [
    (lambda x: np.insert(x, int(x.shape[0]) + 100, 1.0), kiln.OutOfBoundsError, "out of bounds for axis 0"),
    (lambda x: np.insert(x, [0, -20], 1.0, axis=1), kiln.OutOfBoundsError, "index -20 is out of bounds"),
    (lambda x: np.insert(x, x[0, 0], 1.0), kiln.ArgumentError, "np.insert's indices must be known while tracing"),
    (lambda x: np.insert(x, [1.5], 1.0), kiln.OutOfBoundsError, "integer"),
    (lambda x: np.insert(x, [[1], [2]], 1.0), kiln.ShapeError, "one dimensional or scalar"),
    (lambda x: np.delete(x, np.array([], np.float64)), kiln.OutOfBoundsError, "integer"),
    (lambda x: np.insert(x, 0, x[:2, :2], axis=1), kiln.ShapeError, r"shapes \(2, 2\) and \(3, 2\) do not broadcast"),
    (lambda x: np.delete(x, 3, axis=0), kiln.OutOfBoundsError, "index 3 is out of bounds for axis 0 with size 3"),
    (lambda x: np.delete(x, np.array([True, False]), axis=1), kiln.ShapeError, "match the axis length of 5"),
    (lambda x: np.delete(x, x[0] > 0), kiln.ArgumentError, "np.delete's indices"),
    (lambda x: np.append(x, x[0], axis=0), kiln.ShapeError, "cannot concatenate"),
    (lambda x: np.resize(x, (2, -1)), kiln.ShapeError, "must be non-negative"),
    (lambda x: np.resize(x, x.shape[0] * x[0, 0]), kiln.ArgumentError, "new_shape must be known"),
    (lambda x: np.block([x, (x, x)]), kiln.ArgumentError, r"arrays\[1\] is a tuple"),
    (lambda x: np.block([[x], x]), kiln.ShapeError, "List depths are mismatched"),
    (lambda x: np.block([x, []]), kiln.ShapeError, r"List at arrays\[1\] cannot be empty"),
    (
        lambda x: np.put_along_axis(np.zeros((3, 5)), np.zeros((3, 1), int), x[:, :1], 1),
        kiln.UnsupportedError,
        "traced array",
    ),
    (lambda x: np.put_along_axis(x * 1, np.zeros((3, 1)), 1.0, 1), kiln.OutOfBoundsError, "integer array"),
    (lambda x: np.put_along_axis(x * 1, np.zeros(3, int), 1.0, 1), kiln.ShapeError, "same number of dimensions"),
    (lambda x: np.put_along_axis(x * 1, np.zeros((3, 1), int), 1.0, None), kiln.ShapeError, "single dimension"),
    (lambda x: np.put_along_axis((x * 1).T, np.array([0]), 1.0, None), kiln.ShapeError, "read-only"),
    (
        lambda x: np.put_along_axis(x * 1, np.zeros((3, 1), int), x[:2, :1], 1),
        kiln.ShapeError,
        "could not be broadcast to indexing result",
    ),
    (lambda x: np.put_along_axis(x * 1, np.array([[0], [5], [1]]), 1.0, 1), kiln.OutOfBoundsError, "index 5 is out"),
    (lambda x: np.fill_diagonal(x[0] * 1, 1.0), kiln.ShapeError, "at least 2-d"),
    (lambda x: np.fill_diagonal(np.reshape(x * 1, (1, 3, 5)), 1.0), kiln.ShapeError, "equal length"),
    (lambda x: np.place(x * 1, x[0] > 0, 1.0), kiln.ShapeError, "same size"),
    (lambda x: np.place(x * 1, np.ones((3, 5), bool), []), kiln.ShapeError, "Cannot insert from an empty array"),
    (lambda x: np.place(x.astype(np.float32), x > 0, x[0]), kiln.DTypeError, "according to the rule 'safe'"),
    (lambda x: np.choose(np.array([0, 3]), [x[0, :2], x[1, :2]]), kiln.ShapeError, "invalid entry in choice array"),
    (lambda x: np.choose(x[0] > 0, [x[0], x[1]], mode="bounce"), kiln.ArgumentError, "clipmode must be one of"),
    (lambda x: np.choose(x[0], [x[0], x[1]]), kiln.DTypeError, "according to the rule 'safe'"),
    (lambda x: np.ediff1d(x.astype(np.uint8), to_begin=-1), kiln.DTypeError, "dtype of `to_begin` must be compatible"),
    (lambda x: np.vander(x), kiln.ShapeError, "one-dimensional"),
    (lambda x: np.vander(x[0], x.shape[0] + x[0, 0]), kiln.ArgumentError, "np.vander's N must be known"),
    (lambda x: np.pad(x, 1, "maximum", stat_length=0), kiln.ShapeError, "stat_length of 0 yields no value"),
    (lambda x: np.pad(x, 1, "mean", end_values=1), kiln.ArgumentError, "end_values do not apply to mode 'mean'"),
    (lambda x: np.pad(x[:0], 1, "median"), kiln.ShapeError, "can't extend empty axis 0"),
    (lambda x: np.pad(x, 1, "linear_ramp", stat_length=2), kiln.ArgumentError, "stat_length do not apply"),
    (lambda x: np.apply_along_axis(np.sum, 1, x[:0]), kiln.ShapeError, "iteration dimensions are 0"),
    (
        lambda x: np.apply_over_axes(lambda a, k: np.sum(a), x, 0),
        kiln.ShapeError,
        "not returning an array of the correct",
    ),
]


@pytest.mark.parametrize("fn, error, message", ERRORS, ids=[f"{i}" for i in range(len(ERRORS))])
def test_bad_arguments_raise_numpys_error_at_the_users_line(fn, error, message):
    with pytest.raises(error, match=message) as info:
        kiln.compile(fn, target="interpret")(x35)
    assert re.search(r"test_array_editing\.py:\d+", str(info.value)), str(info.value)


def test_kiln_errors_are_numpys_exception_classes():
    """The classes user code catches around numpy: IndexError, ValueError, TypeError."""
    with pytest.raises(IndexError):
        kiln.compile(lambda x: np.delete(x, 9), target="interpret")(x35[0])
    with pytest.raises(ValueError):
        kiln.compile(lambda x: np.block([[x], x]), target="interpret")(x35)
    with pytest.raises(TypeError):
        kiln.compile(lambda x: np.ediff1d(x.astype(np.uint8), to_begin=-1), target="interpret")(x35)


def test_insert_refuses_a_value_the_dtype_cannot_hold_as_numpy():
    x = np.arange(5, dtype=np.int8)
    with pytest.raises(OverflowError):
        kiln.compile(lambda x: np.insert(x, 0, 300))(x)
    with pytest.raises(ValueError):
        kiln.compile(lambda x: np.insert(x, 0, np.nan))(x)
