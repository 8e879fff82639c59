"""Indexing, item assignment and ufunc.at beyond the op table: numpy's exact semantics on
edge values, views and aliasing, the errors, and random keys against numpy."""

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ops import assert_same

import kiln

rng = np.random.default_rng(15)


def numpy_and_kiln(fn, *args, target=None):
    """fn run by numpy (on copies of the arrays, which numpy may write) and compiled by kiln."""
    want = fn(*(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args))
    got = kiln.compile(fn, target=target)(*args) if target else kiln.compile(fn)(*args)
    return got, want


def same(fn, *args, target=None):
    got, want = numpy_and_kiln(fn, *args, target=target)
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        assert_same(g, w)


# -- gathers ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_gather_keeps_nan_infinities_and_the_sign_of_zero(dtype):
    x = np.array([-0.0, np.nan, np.inf, -np.inf, 0.0, -1.5], dtype)
    index = np.array([0, 0, 1, 2, 3, 4, -6, 5])
    got, want = numpy_and_kiln(lambda x, i: x[i], x, index)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)  # NaN where numpy has NaN


def test_a_constant_index_that_is_a_slice_compiles_to_the_slice():
    x = rng.standard_normal((4, 13)).astype(np.float32)
    text = kiln.compile(lambda x: x[:, [1, 4, 7, 10]]).lower(x).text("tensor")
    assert "kiln.slice" in text and "kiln.reduce_max" not in text and "kiln.cmp" not in text
    text = kiln.compile(lambda x: x[:, [3, 3, 3]]).lower(x).text("tensor")
    assert "kiln.broadcast_to" in text and "kiln.reduce_max" not in text
    text = kiln.compile(lambda x, i: x[:, i]).lower(x, np.array([3, 1])).text("tensor")
    assert "kiln.gather" in text and "kiln.reduce_max" not in text  # one load per element, no comparison


def test_a_repeated_index_gets_the_sum_of_its_gradients():
    x = rng.standard_normal(5)
    w = rng.standard_normal(4)
    for index in (np.array([0, 0, 3, -2]), [0, 0, 3, -2]):
        grad = kiln.compile(kiln.grad(lambda x, i: np.sum(x[i] * w)))(x, np.array(index))
        np.testing.assert_allclose(grad, [w[0] + w[1], 0, 0, w[2] + w[3], 0], rtol=1e-12)
        grad = kiln.compile(kiln.grad(lambda x: np.sum(x[index] * w)))(x)
        np.testing.assert_allclose(grad, [w[0] + w[1], 0, 0, w[2] + w[3], 0], rtol=1e-12)


def test_assignment_gradients_skip_overwritten_values():
    def loss(x, v):
        y = x.copy()
        y[[1, 3, 1]] = v  # v[0] is overwritten by v[2]
        return np.sum(y * np.arange(1.0, 5.0))

    gx, gv = kiln.compile(kiln.grad(loss, argnums=(0, 1)))(np.ones(4), np.ones(3))
    np.testing.assert_array_equal(gx, [1, 0, 3, 0])
    np.testing.assert_array_equal(gv, [0, 4, 2])
    assert kiln.gradcheck(loss, np.ones(4), rng.standard_normal(3), argnums=(0, 1)).ok


def test_add_at_gradients_reach_every_repeat():
    def loss(x, v):
        y = x.copy()
        np.add.at(y, [0, 0, 2], v)
        np.maximum.at(y, [1, 1], v[:2])
        return np.sum(y * np.array([1.0, 2.0, 3.0]))

    x, v = np.array([0.5, -3.0, 1.0]), np.array([0.25, -1.0, 2.0])
    gx, gv = kiln.compile(kiln.grad(loss, argnums=(0, 1)))(x, v)
    np.testing.assert_array_equal(gv, [1 + 2, 1, 3])  # v[0] wins the maximum at position 1
    np.testing.assert_array_equal(gx, [1, 0, 3])
    assert kiln.gradcheck(loss, x, v, argnums=(0, 1)).ok


@pytest.mark.parametrize(
    "key",
    [
        (Ellipsis, [1, -1]),
        ([[0], [2]], slice(None), [3, 0]),  # separated: the broadcast axes go first
        (slice(1, None), [0, 0], [1, 2]),  # adjacent: in place
        (None, 1, slice(None, None, -1), [3]),  # the int counts as an array index
        (np.array([True, False, True]), 0),
        (np.ones((3, 2), bool), slice(None)),
        (slice(0, 0), [1]),
        ([], slice(None), 1),
    ],
)
def test_mixed_keys_follow_numpys_rules(key):
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    if isinstance(key[0], np.ndarray) and key[0].shape == (3, 2):
        key = (key[0], key[1])
    same(lambda x: x[key], x)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_traced_keys_gather_and_assign_as_numpy_does(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    x = rng.standard_normal(shape)
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    index_shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    key = [slice(None)] * len(shape)
    indices = []
    for a in sorted(axes):
        indices.append(rng.integers(-shape[a], shape[a], index_shape))
        key[a] = None  # filled in by the traced argument

    def gather(x, *indices):
        k, it = list(key), iter(indices)
        return x[tuple(next(it) if e is None else e for e in k)]

    def assign(x, *indices):
        y = x.copy()
        k, it = list(key), iter(indices)
        at = tuple(next(it) if e is None else e for e in k)
        y[at] = -7.0
        y[at] = y[at] * 2 + x[at]  # a value per element (equal at repeated indices)
        return y

    same(gather, x, *indices, target="interpret")
    same(assign, x, *indices, target="interpret")


# -- out of range -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda x: x[[0, 4]], "index 4 is out of bounds for axis 0 with size 3"),
        (lambda x: x[:, [-6]], "index -6 is out of bounds for axis 1 with size 5"),
        (lambda x: np.take(x, [15]), "index 15 is out of bounds for axis 0 with size 15"),
        (lambda x: np.take_along_axis(x, np.array([[5]]), 1), "index 5 is out of bounds for axis 1 with size 5"),
        (lambda x: x[np.ones(4, bool)], "boolean index did not match indexed array along axis 0"),
        (lambda x: x[0, 1, 2], "too many indices for array"),
        (lambda x: x[np.array([0.5])], "integer"),
    ],
)
def test_constant_indices_out_of_range_raise_index_errors_while_tracing(fn, message):
    x = np.zeros((3, 5), np.float32)
    with pytest.raises(kiln.errors.OutOfBoundsError, match=re.escape(message)) as info:
        kiln.compile(fn)(x)
    assert isinstance(info.value, IndexError) and "test_indexing.py:" in str(info.value)


def test_constant_out_of_range_assignment_raises_too():
    def f(x):
        y = x.copy()
        y[[1, 3]] = 0
        return y

    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        kiln.compile(f)(np.zeros(3))


# -- masks ----------------------------------------------------------------------------------------------
def test_a_traced_mask_whose_result_size_depends_on_the_data_names_np_where():
    def f(x):
        return x[x > 0]

    with pytest.raises(kiln.UnsupportedError, match=r"np\.where\(mask, x, 0\)"):
        kiln.compile(f)(np.ones(3))


def test_assigning_through_a_traced_mask_is_a_select():
    def f(x, m, row):
        y = x.copy()
        y[x < 0] = 0
        y[m] = row  # each selected row gets the same values
        y[m] += 0.5
        return y

    x = rng.standard_normal((5, 3))
    same(f, x, rng.random(5) < 0.5, rng.standard_normal(3))
    w = rng.standard_normal((5, 3))
    loss = lambda x, m, row: np.sum(f(x, m, row) * w)  # noqa: E731
    assert kiln.gradcheck(loss, x, rng.random(5) < 0.5, rng.standard_normal(3), argnums=(0, 2)).ok


@pytest.mark.parametrize("target", ["cpu", "interpret", "cuda-emulate"])
def test_a_traced_mask_mixed_with_ints_and_slices_assigns_as_numpy(target):
    """y[mask, 0] = v, y[:, mask] op= v, y[..., mask, 1:3] = v: the other indices pick a region
    and the mask selects in it; the values broadcast to one selected element."""

    def f(y, m, m3, v):
        y = y.copy()
        y[m, 0] = 7.0
        y[m, 1:3] += v
        y[:, m3[:4]] *= -2
        y[..., m3[1:]] = np.float32(0.5)
        return y

    def g(z, m):
        z = z.copy()
        z[:, m, 0] = -1
        z[m[:2], ::2] -= 3
        z[1, m, 1:] = 9
        z[1, m, 0] += 4  # ints and the mask adjacent: numpy keeps the selection in place
        return z

    y = rng.standard_normal((5, 4)).astype(np.float32)[::-1]
    m, m3 = np.array([True, False, True, True, False]), np.array([False, True, True, False, True])
    same(f, y, m[::-1], m3, np.array([1.0, 2.0], np.float32), target=target)
    same(g, np.arange(24).reshape(2, 3, 4), np.array([True, False, True]), target=target)


def test_a_traced_mask_mixed_where_numpy_moves_the_selection_first_is_refused():
    def f(z, m):
        z = z.copy()
        z[:, m, :, 0] = 1.0  # numpy puts the selected axis first, ahead of the slices
        return z

    with pytest.raises(kiln.UnsupportedError, match="mixed with other indices"):
        kiln.compile(f)(np.zeros((2, 3, 4, 5)), np.array([True, False, True]))
    with pytest.raises(kiln.UnsupportedError, match=r"np\.where\(mask, x, 0\)"):
        kiln.compile(lambda y, m: y[m, 0])(np.zeros((3, 2)), np.array([True, False, True]))


def test_a_traced_mask_with_one_value_per_selected_element_is_refused():
    def f(x, v):
        y = x.copy()
        y[x > 0] = v
        return y

    with pytest.raises(kiln.UnsupportedError, match=r"np\.where\(mask, v, x\)"):
        kiln.compile(f)(np.ones(3), np.ones(3))


# -- assignment: numpy's casts and views -------------------------------------------------------------------
def test_assignment_casts_as_numpy_does_and_refuses_what_numpy_refuses():
    def f(a, x):
        b = a.copy()
        b[:2] = x[:2]  # float to int: truncated
        b[2] = True
        b[3] = -2.7
        return b

    same(f, np.zeros(4, np.int32), np.array([1.9, -1.9, 5.0]))

    def overflow(a):
        b = a.copy()
        b[0] = 2**40
        return b

    with pytest.raises(OverflowError):
        kiln.compile(overflow)(np.zeros(2, np.int32))

    def nan_into_int(a):
        b = a.copy()
        b[0] = float("nan")
        return b

    with pytest.raises(ValueError, match="cannot convert float nan to integer"):
        kiln.compile(nan_into_int)(np.zeros(2, np.int64))


def test_in_place_operators_keep_the_dtype_and_shape_as_numpy_requires():
    def widen(a):
        b = a.copy()
        b += 1.5
        return b

    with pytest.raises(kiln.DTypeError, match="same_kind"):
        kiln.compile(widen)(np.zeros(3, np.int32))

    def grow(x, y):
        z = x.copy()
        z += y
        return z

    with pytest.raises(kiln.ShapeError, match="non-broadcastable output operand"):
        kiln.compile(grow)(np.zeros(3), np.zeros((2, 3)))
    same(grow, np.zeros((2, 3), np.float32), np.arange(3.0))  # float32 += float64: same kind


def _views(x):
    y = x.copy()
    alias = y
    row = y[1]
    row[::2] = 5  # through a basic-indexing view
    y[1, 1] = -5  # and row shows it
    col = y.T[:, 2]
    col += 1
    flat = y.reshape(-1)  # contiguous: a view
    flat[-1] = 9
    copied = y.T.reshape(-1)  # not contiguous: numpy copies
    copied[0] = 100
    every_other = y[:, ::2].reshape(-1)  # a copy as well
    every_other[:] = 0
    rows = y[::2].reshape(2, 2, -1)  # a view again: its rows keep their own stride
    rows[1, 0] = -1
    y += 0.5  # in place: the alias sees it
    return alias, row, col, flat, copied, every_other, rows


def test_views_share_writes_with_their_base_as_in_numpy():
    same(_views, rng.standard_normal((4, 6)).astype(np.float32))


def test_copies_and_new_arrays_do_not_alias():
    def f(x):
        y = x.copy()
        pieces = [y.copy(), y.astype(np.float32), np.copy(y), y.flatten(), y[[0, 1]], np.concatenate([y]), +y]
        for p in pieces:
            p[0] = 7
        return (y,) + tuple(pieces)

    same(f, rng.standard_normal((2, 3)).astype(np.float32))


def test_a_view_of_a_scalar_index_is_a_view():
    def f(x, i):
        y = x.copy()
        row = y[i]
        row[1:] = 0
        y[i, 0] = 7
        return y, row

    same(f, rng.standard_normal((3, 4)), np.int64(-1))


def test_the_callers_array_is_never_written():
    def f(x):
        x[0] = 5
        x += 1
        np.add.at(x, [1, 1], 2.0)
        return x * 1

    x = np.arange(4.0)
    before = x.copy()
    for target in ("interpret", "cpu"):
        np.testing.assert_array_equal(kiln.compile(f, target=target)(x), [6, 6, 3, 4])
        np.testing.assert_array_equal(x, before)


def test_writing_a_read_only_view_raises_numpys_error():
    def f(x):
        b = np.broadcast_to(x, (2, 3))
        b[0, 0] = 1
        return b

    with pytest.raises(ValueError, match="read-only"):
        kiln.compile(f)(np.zeros(3))


# -- ufunc.at ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.maximum, np.minimum])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_ufunc_at_accumulates_every_repeat(ufunc, dtype):
    def f(a, i, v):
        b = a.copy()
        ufunc.at(b, i, v)
        return b

    a = np.array([3, -2, 0, 5, 1], dtype)
    v = np.array([2, -1, 3, 4, -2, 2], dtype)
    same(f, a, np.array([0, 0, 4, -1, 4, 0]), v, target="interpret")
    same(lambda a, v: f(a, [1, 1, 1, 2, 0, 0], v), a, v)


def test_ufunc_at_keeps_nan_and_signed_zeros():
    def f(a, v):
        b = a.copy()
        np.maximum.at(b, [0, 0, 1], v)
        np.add.at(b, [3], 1.0)  # the -0.0 at index 2 is untouched
        return b

    a = np.array([1.0, 2.0, -0.0, 0.0])
    with np.errstate(invalid="ignore"):  # numpy's maximum warns on NaN
        got, want = numpy_and_kiln(f, a, np.array([np.nan, 0.5, 3.0]))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_ufunc_at_on_bools_and_its_errors():
    def f(m):
        b = m.copy()
        np.add.at(b, [0, 0, 2], True)
        np.multiply.at(b, [1], False)
        return b

    same(f, np.array([False, True, False, True]))

    def widen(a):
        b = a.copy()
        np.add.at(b, [0], 0.5)
        return b

    with pytest.raises(kiln.DTypeError, match="same_kind"):
        kiln.compile(widen)(np.zeros(3, np.int64))

    def unsupported(a):
        np.true_divide.at(a, [0], 2.0)
        return a

    with pytest.raises(kiln.UnsupportedError, match=r"np\.divide\.at is not supported"):
        kiln.compile(unsupported)(np.ones(3))


# -- np.take and np.take_along_axis ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_take_modes_with_traced_and_constant_indices(mode):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    index = np.array([[4, 0], [-5, 2]]) if mode == "raise" else np.array([[7, 0], [-6, 12]])
    same(lambda x, i: np.take(x, i, axis=1, mode=mode), x, index)
    same(lambda x: x.take(index, mode=mode), x)
    same(lambda x: np.take(x, 2, axis=0, mode=mode), x)


def test_take_along_axis_with_argsort_and_argmax():
    x = rng.standard_normal((4, 6))
    same(lambda x: np.take_along_axis(x, np.argsort(x, axis=1), axis=1), x)
    same(lambda x: np.take_along_axis(x, np.argmax(x, axis=0, keepdims=True), axis=0), x)


VIEWING_AND_COPYING = {
    "flip": lambda y: np.flip(y, 1),
    "fliplr_of_transpose": lambda y: np.fliplr(y.T),
    "flipud": np.flipud,
    "rot90": np.rot90,
    "atleast_3d": np.atleast_3d,
    "split": lambda y: np.split(y, 2, axis=1)[1],
    "array_split": lambda y: np.array_split(y, 2)[1],
    "vsplit": lambda y: np.vsplit(y, 3)[2],
    "broadcast_arrays": lambda y: np.broadcast_arrays(y[:1], y)[1],  # (a broadcast one is read-only in kiln)
    "permute_dims": lambda y: np.permute_dims(y, (1, 0)),
    "squeeze_expand_dims": lambda y: np.squeeze(np.expand_dims(y, 0)),
    "ravel_of_transpose": lambda y: np.ravel(y.T),
    "tile": lambda y: np.tile(y, 1),
    "repeat": lambda y: np.repeat(y, 1, axis=0),
    "roll": lambda y: np.roll(y, 0),
    "pad": lambda y: np.pad(y, 0),
    "concatenate": lambda y: np.concatenate([y]),
    "sort": lambda y: np.sort(y, axis=1),
    "triu": lambda y: np.triu(y, -5),
    "where": lambda y: np.where(True, y, 0.0),
    "clip": lambda y: np.clip(y, -100, 100),
}


@pytest.mark.parametrize("name", VIEWING_AND_COPYING)
def test_numpy_functions_return_views_or_copies_as_numpy_does(name):
    """A write through the result reaches the argument exactly where numpy's result is a view
    and a write to the argument shows in the result exactly then."""
    f = VIEWING_AND_COPYING[name]

    def through_result(x):
        y = x.copy()
        r = f(y)
        r[..., 0] = 7.0
        return y

    def through_argument(x):
        y = x.copy()
        r = f(y)
        y[-1] = -1.0
        return r * 1

    x = np.arange(12.0).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(through_result, x)
        same(through_argument, x)


def test_an_element_is_a_scalar_copy_and_scalars_rebind_in_place_operators():
    def f(x):
        y = x.copy()
        r = y[0]
        r += 1  # numpy: a scalar, y keeps its element
        t = np.sum(y)
        kept = t
        t += 1  # a scalar: kept keeps its value
        z = y[1, ...]
        z += 100  # a 0-d array view: writes y
        s = y[2]
        y[2] = -5  # s was copied before
        return y, r, t, kept, s * 1

    same(f, np.arange(4.0))


# -- numpy's other in-place writes: out=, ndarray.sort, np.copyto, *_like(shape=) ----------------
@pytest.mark.parametrize("target", ["cpu", "interpret"])
def test_ufunc_out_writes_a_traced_array_and_its_views(target):
    def f(x, y):
        w = y * 1
        view = w[::-1]
        np.add(x, 1, out=w)  # the view sees it
        np.multiply(w, 2, out=w)
        q, r = np.divmod(w, 3.0, out=(np.empty_like(w), y.copy()))
        return w, view * 1, q, r

    same(f, np.array([3.0, -1.0, 2.5]), np.array([-1.0, 5.0, 6.0]), target=target)


@pytest.mark.parametrize("target", ["cpu", "interpret"])
def test_ufunc_where_with_out_keeps_outs_elements_where_false(target):
    def safe_divide(a, b):
        return np.divide(a, b, out=np.full_like(a, -1.0), where=b != 0)

    same(safe_divide, np.array([1.0, 2.0, -0.0, 3.0]), np.array([2.0, 0.0, 0.0, -1.0]), target=target)


def test_ufunc_out_follows_numpys_casting_and_shape_rules():
    def into_int(x):
        w = np.zeros_like(x, dtype=np.int64)
        np.add(x, 0.5, out=w)
        return w

    with pytest.raises(kiln.DTypeError, match="same_kind"):
        kiln.compile(into_int)(np.arange(3.0))
    with pytest.raises(kiln.ShapeError, match="non-broadcastable output"):
        kiln.compile(lambda x: np.add(x, 1, out=x[:1]))(np.arange(3.0))


def test_ndarray_sort_and_partition_sort_in_place_through_views():
    def f(x):
        y = x.copy()
        y[1:].sort()  # a view: sorts those elements of y
        z = x.copy()
        z.partition(2)
        return y, np.sort(z[:2]), z[2:3] * 1

    same(f, np.array([5.0, 3.0, np.nan, -1.0, 2.0]))


def test_copyto_and_like_with_shape_make_traced_arrays_to_assign_into():
    def f(x, y):
        a = np.zeros_like(x, shape=(2, 3))
        a[0] = x
        np.copyto(a[1], y, where=y > 0)
        b = np.full_like(x, 7, shape=4, dtype=np.int32)
        b[1:3] = x[:2]  # cast on assignment, as numpy's setitem
        return a, b

    same(f, np.array([1.5, -2.0, 3.0]), np.array([-1.0, 5.0, 6.0]))
    with pytest.raises(kiln.DTypeError, match="according to the rule 'same_kind'"):
        kiln.compile(lambda x: np.copyto(np.zeros_like(x, dtype=np.int32), x))(np.ones(2))


def test_put_and_putmask_of_no_values_write_nothing_as_numpy():
    def f(x):
        y = x * 1
        np.put(y, [0, 1], np.zeros(0))
        np.putmask(y, y > 0, [])
        return y

    same(f, np.array([1.5, -2.0, 3.0]))


def test_a_python_scalar_under_a_traced_mask_stays_weak_as_numpy_casts_it():
    m = np.array([True, False, True])

    def add(y, m):
        y = y.copy()
        y[m] += 5  # uint8 + a Python int stays uint8
        y[m] *= 2
        return y

    same(add, np.array([1, 2, 250], np.uint8), m)
    for value, error in ((300, OverflowError), (np.nan, ValueError)):

        def put(y, m, value=value):
            y = y.copy()
            y[m] = value  # numpy refuses a value int8 cannot hold
            return y

        with pytest.raises(error):
            kiln.compile(put)(np.zeros(3, np.int8), m)
