"""numpy's shape, layout and array-creation functions at their corners, on every target: special
values and integer extremes copied bit for bit, random pads, rolls, tiles, repeats and splits
against numpy, and the errors, each at the user's line. The op table holds the everyday cases."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln

TARGETS = ["interpret", "cpu", "cuda-emulate"]

SPECIALS = np.array([np.nan, -0.0, np.inf, -np.inf, 0.0, 1.5, -2.25, np.finfo(np.float64).tiny])
INT_EXTREMES = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, 0, 1, 2], np.int64)


def assert_exactly(got, want):
    """Same dtype and shape, equal values, NaN where numpy has NaN, and the same sign bits."""
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


COPIES = {
    "flip": lambda x: np.flip(x),
    "roll": lambda x: np.roll(x, 3),
    "tile": lambda x: np.tile(x, (2, 2)),
    "repeat_counts": lambda x: np.repeat(x, np.arange(x.size) % 3),
    "pad_reflect": lambda x: np.pad(x, (11, 4), mode="reflect"),
    "pad_symmetric": lambda x: np.pad(x, (3, 12), mode="symmetric"),
    "pad_wrap": lambda x: np.pad(x, (9, 17), mode="wrap"),
    "pad_edge": lambda x: np.pad(x, (2, 3), mode="edge"),
    "pad_constant": lambda x: np.pad(x, (1, 2), constant_values=(-0.0, np.nan)),
    "triu": lambda x: np.triu(x, -1),
    "diag": lambda x: np.diag(x, 1),
    "hstack": lambda x: np.hstack([x, x[::-1]]),
    "split": lambda x: np.concatenate(np.array_split(x, 3)[::-1]),
    "rot90": lambda x: np.rot90(np.reshape(x, (2, -1))),
    "meshgrid": lambda x: np.meshgrid(x, x[:3])[0],
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", COPIES)
def test_copying_functions_keep_nan_signed_zeros_infinities_and_integer_extremes(name, target):
    fn = COPIES[name]
    for values in (SPECIALS, SPECIALS.astype(np.float32), INT_EXTREMES, INT_EXTREMES.astype(np.int32)):
        if name == "pad_constant" and values.dtype.kind == "i":
            continue  # NaN has no integer value
        assert_exactly(kiln.compile(fn, target=target)(values), fn(values))


@pytest.mark.parametrize("target", TARGETS)
def test_diff_of_integer_extremes_wraps_as_numpy_does_and_of_specials_gives_nan(target):
    for values in (INT_EXTREMES, INT_EXTREMES.astype(np.int32), SPECIALS):
        with np.errstate(invalid="ignore"):
            want = np.diff(values, 2)
        assert_exactly(kiln.compile(lambda a: np.diff(a, 2), target=target)(values), want)


@pytest.mark.parametrize("target", TARGETS)
def test_linspace_with_traced_endpoints_matches_numpy_at_its_corners(target):
    """A zero step (equal ends) takes numpy's other formula, one sample is start, none is empty,
    endpoint=False leaves stop out, and an integer dtype floors (so -2.5 is -3)."""
    cases = [
        (lambda a, b: np.linspace(a, b, 5), (2.0, 2.0)),
        (lambda a, b: np.linspace(a, b, 1), (-1.0, 3.0)),
        (lambda a, b: np.linspace(a, b, 0), (-1.0, 3.0)),
        (lambda a, b: np.linspace(a, b, 4, endpoint=False), (np.float32(-1.0), np.float32(3.0))),
        (lambda a, b: np.linspace(a, b, 5, dtype=np.int64), (np.float64(-5.0), np.float64(5.0))),
        (lambda a, b: np.linspace(a, b, 3, retstep=True)[1], (np.float32(1.0), np.float32(2.0))),
        (lambda a, b: np.linspace(a, b, 4, axis=1), (np.array([0.0, 1.0]), np.array([[1.0, np.inf]]))),
    ]
    for fn, args in cases:
        with np.errstate(invalid="ignore"):
            want = fn(*args)
        assert_exactly(kiln.compile(fn, target=target)(*args), want)


def test_linspace_returns_numpys_nan_step_for_one_sample_and_a_traced_step_otherwise():
    y, step = kiln.compile(lambda a, b: np.linspace(a, b, 1, retstep=True), target="interpret")(0.0, 1.0)
    assert np.isnan(step)
    np.testing.assert_array_equal(y, [0.0])


def test_array_creation_inside_a_compiled_function_combines_with_traced_values():
    def f(x, t0, t1):
        grid = np.linspace(t0, t1, 4)  # traced endpoints
        ramp = np.arange(4, dtype=np.float32) + np.zeros(4) + np.ones(4, np.int32)
        square = np.eye(4, k=1) + np.identity(4) + np.tri(4, k=-1, dtype=np.int32) + np.full((4, 4), 0.5)
        return (square @ (x * grid + ramp)) + np.empty((4, 4)).shape[0] + np.full_like(x, 2)

    x = np.linspace(-1.0, 1.0, 4)
    for target in ("interpret", "cpu"):
        np.testing.assert_allclose(kiln.compile(f, target=target)(x, 0.5, 2.0), f(x, 0.5, 2.0), rtol=1e-12)


def test_empty_like_is_zeros_of_the_prototypes_shape_and_the_given_dtype():
    got = kiln.compile(lambda x: np.empty_like(x, dtype=np.int32))(np.ones((2, 3)))
    assert_exactly(got, np.zeros((2, 3), np.int32))


def test_ravel_and_flatten_take_c_and_fortran_order():
    x = np.arange(24.0).reshape(2, 3, 4)
    for fn in (lambda a: a.flatten("F"), lambda a: a.ravel("F"), lambda a: np.ravel(a, order="C")):
        assert_exactly(kiln.compile(fn)(x), fn(x))


@pytest.mark.parametrize("target", TARGETS)
def test_reshape_takes_fortran_order_and_a_write_through_it_follows_numpy(target):
    x = np.arange(24.0).reshape(2, 3, 4)
    for fn in (
        lambda a: a.reshape(4, -1, order="F"),
        lambda a: np.reshape(a, (6, 4), order="F"),
        lambda a: a.T.reshape((3, 8), order="F") * 2,
        lambda a: a[:, ::-1].reshape(24, order="F"),
    ):
        assert_exactly(kiln.compile(fn, target=target)(x), fn(x))

    def written(a):
        y = a.copy()
        v = y.T.reshape(4, 6, order="F")  # y.T is F-contiguous: its F-order reshape is a view of y
        v[0] = -1.0
        z = a.copy()  # C-contiguous: its F-order reshape is a copy, z keeps its elements
        w = z.reshape(4, 6, order="F")
        w[0] = -1.0
        return y, z

    for got, want in zip(kiln.compile(written, target=target)(x), written(x)):
        assert_exactly(got, want)


def test_meshgrid_and_split_return_numpys_containers():
    """A sparse grid without a copy is numpy's list, other grids tuples; splits are lists."""
    a, b = np.arange(3.0), np.arange(2.0)
    for fn in (
        lambda u, v: np.meshgrid(u, v, sparse=True, copy=False),
        lambda u, v: np.meshgrid(u, v, sparse=True),
        lambda u, v: np.meshgrid(u, v, indexing="ij"),
        lambda u, v: np.broadcast_arrays(u[:, None], v),
        lambda u, v: np.split(u, 3),
        lambda u, v: np.atleast_2d(u, v),
    ):
        got, want = kiln.compile(fn)(a, b), fn(a, b)
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_exactly(g, w)


# -- against numpy on random arguments ----------------------------------------------------------
MODES = ["constant", "edge", "reflect", "symmetric", "wrap"]


@st.composite
def pad_arguments(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    widths = [(draw(st.integers(0, 9)), draw(st.integers(0, 9))) for _ in shape]
    mode = draw(st.sampled_from(MODES))
    keywords = {}
    if mode in ("reflect", "symmetric"):
        keywords["reflect_type"] = draw(st.sampled_from(["even", "odd"]))
    if mode == "constant":
        keywords["constant_values"] = draw(st.sampled_from([0, -1.5, ((1, 2),), [(3, 4)] * len(shape)]))
    return shape, widths, mode, keywords


@settings(max_examples=60, deadline=None)
@given(pad_arguments())
def test_pad_matches_numpy_on_random_widths_and_modes(arguments):
    shape, widths, mode, keywords = arguments
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) * 1.25 - 3

    def f(a):
        return np.pad(a, widths, mode=mode, **keywords)

    np.testing.assert_allclose(kiln.compile(f, target="interpret")(x), f(x), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.lists(st.integers(-20, 20), min_size=1, max_size=3),
    st.lists(st.integers(0, 3), min_size=0, max_size=4),
    st.data(),
)
def test_roll_tile_repeat_and_split_match_numpy(shape, shifts, reps, data):
    x = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
    axes = [data.draw(st.integers(-len(shape), len(shape) - 1)) for _ in shifts]
    axis = data.draw(st.integers(0, len(shape) - 1))
    counts = data.draw(st.lists(st.integers(0, 3), min_size=shape[axis], max_size=shape[axis]))
    points = sorted(data.draw(st.lists(st.integers(-6, 6), max_size=3)))
    functions = [
        lambda a: np.roll(a, shifts, axis=axes),
        lambda a: np.roll(a, shifts[0]),
        lambda a: np.tile(a, reps),
        lambda a: np.repeat(a, counts, axis=axis),
        lambda a: np.concatenate([p * (k + 1) for k, p in enumerate(np.split(a, points, axis=axis))], axis=axis),
    ]
    for fn in functions:
        assert_exactly(kiln.compile(fn, target="interpret")(x), fn(x))


# -- errors, at the user's line ---------------------------------------------------------------------
x34 = np.ones((3, 4), np.float32)
x3 = np.ones(3, np.float32)

ERRORS = [
    (lambda x: np.flip(x, 2), x34, kiln.ShapeError, "axis 2 is out of range"),
    (lambda x: np.fliplr(x), x3, kiln.ShapeError, "np.fliplr needs an array of rank 2"),
    (lambda x: np.rot90(x, 1, (0, 0)), x34, kiln.ShapeError, "the axes must differ"),
    (lambda x: np.roll(x, (1, 2, 3), axis=(0, 1)), x34, kiln.ShapeError, "do not broadcast"),
    (lambda x: np.roll(x, 1.5), x34, kiln.ArgumentError, "shift must be an integer"),
    (lambda x: np.tile(x, -1), x34, kiln.ShapeError, "negative repetitions"),
    (lambda x: np.repeat(x, [1, -1, 2]), x3, kiln.ShapeError, "may not be negative"),
    (lambda x: np.repeat(x, [1, 2], axis=1), x34, kiln.ShapeError, "2 counts for an axis of length 4"),
    (lambda x: np.repeat(x, [1.5, 2.0, 1.0]), x3, kiln.ArgumentError, "counts must be integers"),
    (lambda x: np.repeat(x, x.astype(np.int64)), x3, kiln.UnsupportedError, "traced counts"),
    (lambda x: np.pad(x, -1), x34, kiln.ShapeError, "can't contain negative values"),
    (lambda x: np.pad(x, ((1, 2), (3, 4), (5, 6))), x34, kiln.ShapeError, "does not give a"),
    (lambda x: np.pad(x, 1, mode="nonsense"), x34, kiln.ArgumentError, "mode 'nonsense'"),
    (lambda x: np.pad(x, 1, mode=np.sum), x34, kiln.UnsupportedError, "function as the mode"),
    (lambda x: np.pad(x, 1, mode="edge", constant_values=1), x34, kiln.ArgumentError, "constant_values"),
    (lambda x: np.pad(x, 1, mode="reflect", reflect_type="both"), x34, kiln.ArgumentError, "reflect_type"),
    (lambda x: np.pad(x[:0], 1, mode="wrap"), x34, kiln.ShapeError, "can't extend empty axis 0"),
    (lambda x: np.triu(x[0, 0]), x34, kiln.ShapeError, "rank 1 or more"),
    (lambda x: np.diff(x, -1), x34, kiln.ShapeError, "must be non-negative"),
    (lambda x: np.diff(x[0, 0]), x34, kiln.ShapeError, "at least one dimensional"),
    (lambda x: np.diag(x[None]), x34, kiln.ShapeError, "1-d or 2-d"),
    (lambda x: np.hstack(x), x34, kiln.ArgumentError, "list or tuple of arrays"),
    (lambda x: np.vstack([x, x3[:2]]), x34, kiln.ShapeError, "cannot concatenate"),
    (lambda x: np.vstack([x], dtype=np.int32), x34, kiln.DTypeError, "according to the rule 'same_kind'"),
    (lambda x: np.split(x, 3, axis=1), x34, kiln.ShapeError, r"np\.array_split allows unequal"),
    (lambda x: np.array_split(x, 0), x34, kiln.ShapeError, "number sections must be larger than 0"),
    (lambda x: np.vsplit(x[0], 1), x34, kiln.ShapeError, "only works on arrays of 2 or more"),
    (lambda x: x.flatten("K"), x34, kiln.UnsupportedError, "memory layout"),
    (lambda x: np.ravel(x, "Z"), x34, kiln.ArgumentError, "order must be one of"),
    (lambda x: np.meshgrid(x, x, indexing="xx"), x34, kiln.ArgumentError, "'xy' and 'ij'"),
    (lambda x: np.linspace(x, x, -1), x34, kiln.ShapeError, "must be non-negative"),
    (lambda x: np.linspace(x, x, x.shape[0] + x[0, 0]), x34, kiln.UnsupportedError, "known while tracing"),
    (lambda x: np.full((2, 2), x[0, 0], dtype=np.float32), x34, kiln.UnsupportedError, r"np\.full_like"),
    (lambda x: np.full((2, 2), x[0, 0]), x34, kiln.errors.TracerConversionError, r"np\.full_like"),
]


@pytest.mark.parametrize("fn, arg, error, message", ERRORS, ids=[e[3] for e in ERRORS])
def test_bad_arguments_raise_a_clear_error_at_the_users_line(fn, arg, error, message):
    with pytest.raises(error, match=message) as info:
        kiln.compile(fn, target="interpret")(arg)
    assert re.search(r"test_shapes\.py:\d+", str(info.value)), str(info.value)
