"""Random float16 accumulations for differential fuzzing: a reduction or a matrix product of
a random float16 array (or a reversed or strided view of it), with special values mixed in,
compiled by kiln and compared with numpy bit for bit. Only the accumulations whose rounding
kiln follows (the rows of docs/numpy.md's "float16 accumulation" table marked as numpy's):
sums and products along a contiguous axis, means along any axis, matrix products; and
ufunc.at with constant, repeated indices in several dtypes, whose updates apply in order."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import kiln

H = np.float16
SIZES = (0, 1, 2, 3, 7, 13, 64, 127, 331)
SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 65504.0, 6e-8)

# name -> (the function of one array, traced by kiln and run by numpy alike)
REDUCTIONS = {
    "sum": lambda x: np.sum(x, axis=-1),
    "sum_all": lambda x: np.sum(x),
    "prod": lambda x: np.prod(x, axis=-1),
    "prod_all": lambda x: np.prod(x),
    "mean_first": lambda x: np.mean(x, axis=0),
    "mean_last": lambda x: np.mean(x, axis=-1),
    "matmul": lambda x: x @ x[::-1].T,
}
VIEWS = {
    "whole": lambda x: x,
    "reversed": lambda x: x[..., ::-1],
    "every_other": lambda x: x[..., ::2],
    "rows_reversed": lambda x: x[::-1],
}


@st.composite
def accumulations(draw):
    """(reduction name, view name, float16 input): rows and columns of the listed sizes,
    values near 1 for products (so they neither overflow nor vanish) and spread for the rest."""
    name, view = draw(st.sampled_from(sorted(REDUCTIONS))), draw(st.sampled_from(sorted(VIEWS)))
    shape = (draw(st.sampled_from(SIZES[1:6])), draw(st.sampled_from(SIZES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = 0.01 if name.startswith("prod") else 30.0
    x = 1 + rng.standard_normal(shape) * scale if name.startswith("prod") else rng.standard_normal(shape) * scale
    x = x.astype(H)
    for _ in range(draw(st.integers(0, 2))):
        if x.size:
            x.flat[draw(st.integers(0, x.size - 1))] = draw(st.sampled_from(SPECIALS))
    return name, view, x


def check_accumulation(name, view, x):
    """kiln's result of REDUCTIONS[name] on VIEWS[view](x) has numpy's bits."""
    reduce_, take = REDUCTIONS[name], VIEWS[view]

    def program(a):
        return reduce_(take(a))

    with np.errstate(all="ignore"):
        expected = np.asarray(program(x))
    got = np.asarray(kiln.compile(program)(x))
    assert got.dtype == expected.dtype == H, (name, view, got.dtype, expected.dtype)
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16), err_msg=f"{name} of {view} {x!r}")


AT_UFUNCS = (np.add, np.subtract, np.multiply, np.maximum, np.minimum)
AT_DTYPES = (np.float16, np.float32, np.float64, np.int16, np.uint8)


@st.composite
def at_updates(draw):
    """(ufunc, array, constant indices with repeats, values): numpy's ufunc.at on a random
    array of a random dtype, many updates landing on few positions."""
    ufunc, dtype = draw(st.sampled_from(AT_UFUNCS)), np.dtype(draw(st.sampled_from(AT_DTYPES)))
    n = draw(st.sampled_from(SIZES[1:6]))
    index = draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = 1000.0 if dtype.kind == "f" else 50.0
    y = (rng.standard_normal(n) * scale).astype(dtype)
    v = (rng.standard_normal(len(index)) * scale / 10).astype(dtype)
    if dtype.kind == "f" and len(index):
        v[draw(st.integers(0, len(index) - 1))] = draw(st.sampled_from(SPECIALS))
    return ufunc, y, index, v


def check_at(ufunc, y, index, v):
    """kiln's ufunc.at(y, index, v) has numpy's bits."""

    def update(a, b):
        a = a.copy()
        ufunc.at(a, index, b)
        return a

    expected = y.copy()
    with np.errstate(all="ignore"):
        ufunc.at(expected, index, v)
    got = kiln.compile(update)(y, v)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8), err_msg=f"{ufunc.__name__}.at {index}")
