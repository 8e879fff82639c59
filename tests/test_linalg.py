"""numpy's linear algebra beyond matmul at its corners: einsum on random subscripts against
numpy, contractions lowered to matmul, integer products wrapping as numpy's, norms of special
values, the decompositions refused by name, and the errors at the user's line. The op table
holds the everyday cases."""

import re
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln

TARGETS = ["interpret", "cpu", "cuda-emulate"]


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, want)


# -- einsum ---------------------------------------------------------------------------------------
@st.composite
def einsum_problems(draw):
    """1 to 3 operands over the labels a-d (sizes 1-3), labels repeated within and across
    operands, sometimes a '...' of up to 2 broadcast dims, an implicit or explicit output."""
    sizes = {c: draw(st.integers(1, 3)) for c in "abcd"}
    broadcast = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    use_ellipsis = draw(st.booleans())
    terms, operands = [], []
    for _ in range(draw(st.integers(1, 3))):
        labels = draw(st.lists(st.sampled_from("abcd"), max_size=4))
        shape = [sizes[c] for c in labels]
        if use_ellipsis:
            rank = draw(st.integers(0, len(broadcast)))
            dims = [draw(st.sampled_from([1, d])) for d in broadcast[len(broadcast) - rank :]]
            at = draw(st.integers(0, len(labels)))
            labels, shape = labels[:at] + ["..."] + labels[at:], shape[:at] + dims + shape[at:]
        terms.append("".join(labels))
        operands.append(np.arange(1, np.prod(shape) + 1, dtype=np.float64).reshape(shape) % 7 - 3)
    subscripts = ",".join(terms)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t if c in string.ascii_letters})
        out = draw(st.permutations(used).flatmap(lambda p: st.integers(0, len(p)).map(lambda k: p[:k])))
        subscripts += "->" + ("..." if use_ellipsis else "") + "".join(out)
    return subscripts, operands


@settings(max_examples=80, deadline=None)
@given(einsum_problems())
def test_einsum_matches_numpy_on_random_subscripts(problem):
    subscripts, operands = problem

    def f(*xs):
        return np.einsum(subscripts, *xs)

    assert_same(kiln.compile(f, target="interpret")(*operands), f(*operands))


def _tensor_ops(fn, *args):
    return [op.name for op in kiln.compile(fn).lower(*args).module("tensor").walk()]


@pytest.mark.parametrize(
    "subscripts, shapes",
    [
        ("ij,jk->ik", [(64, 32), (32, 16)]),
        ("bij,bjk->bik", [(4, 8, 16), (4, 16, 8)]),
        ("ij,kj", [(8, 16), (4, 16)]),
        ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
        ("...j,j", [(2, 3, 4), (4,)]),
    ],
)
def test_einsum_contracts_with_matmul_not_a_multiply_and_a_sum(subscripts, shapes):
    operands = [np.ones(s, np.float32) for s in shapes]
    names = _tensor_ops(lambda *xs: np.einsum(subscripts, *xs), *operands)
    assert "kiln.matmul" in names and "kiln.reduce_sum" not in names and "kiln.mul" not in names, names


def test_einsum_without_a_contraction_is_a_broadcast_multiply():
    names = _tensor_ops(lambda a, b: np.einsum("i,j->ij", a, b), np.ones(3), np.ones(4))
    assert "kiln.mul" in names and "kiln.matmul" not in names, names


@pytest.mark.parametrize("target", TARGETS)
def test_integer_products_wrap_around_as_numpys_do(target):
    big = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 3, -1], np.int64)
    fns = [
        lambda a: np.einsum("i,i", a, a),
        lambda a: np.einsum("i,j->ij", a, a),
        lambda a: np.tensordot(a, a, 1),
        lambda a: np.outer(a, a),
        lambda a: np.kron(a, a[:2]),
        lambda a: np.vdot(a, a),
        lambda a: np.einsum("i->", a.astype(np.int32)),
    ]
    for fn in fns:
        assert_same(kiln.compile(fn, target=target)(big), fn(big))


@pytest.mark.parametrize("target", TARGETS)
def test_products_carry_nan_and_infinities_as_numpy_does(target):
    x = np.array([np.inf, -0.0, 2.0, np.nan, -np.inf, 1.0])
    fns = [
        lambda a: np.outer(a, a),
        lambda a: np.kron(a[:3], a[3:]),
        lambda a: np.cross(a[:3], a[3:]),
        lambda a: np.einsum("i,j->ji", a, a[::-1]),
    ]
    for fn in fns:
        with np.errstate(invalid="ignore"):
            want = fn(x)
        got = kiln.compile(fn, target=target)(x)
        np.testing.assert_array_equal(got, want)


def test_bool_einsum_and_tensordot_keep_numpys_bool_results():
    a, b = np.array([[True, False], [False, False]]), np.array([True, True])
    fns = [
        lambda u, v: np.einsum("ij,j", u, v),
        lambda u, v: np.einsum("ij->i", u),
        lambda u, v: np.tensordot(u, v, 1),
        lambda u, v: np.vdot(u[0], v),
    ]
    for fn in fns:
        assert_same(kiln.compile(fn)(a, b), fn(a, b))


# -- norms -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ord", [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1])
def test_vector_norms_of_special_values_match_numpy(ord, target):
    def f(a):
        return np.stack([np.linalg.norm(row, ord) for row in a])

    x = np.array([[3.0, -4.0, 0.0], [np.inf, 1.0, 2.0], [np.nan, 1.0, 0.0], [0.0, -0.0, 0.0], [1e-300, 1e-300, 0.0]])
    with np.errstate(all="ignore"):
        want = f(x)
        got = kiln.compile(f, target=target)(x)
    assert_same(got, want)


def test_norms_of_empty_vectors_are_zero_where_numpy_sums_or_maxes_from_0_and_an_error_where_it_takes_a_min():
    empty = np.zeros(0)
    for ord in (None, 1, 2, 3, np.inf):  # numpy's inf norm is a max with initial=0
        assert_same(kiln.compile(lambda a, o=ord: np.linalg.norm(a, o))(empty), np.linalg.norm(empty, ord))
    with pytest.raises(kiln.ShapeError, match="empty axis"):
        kiln.compile(lambda a: np.linalg.norm(a, -np.inf))(empty)


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (0, 0), (2, 0, 3)])
@pytest.mark.parametrize("ord", [1, -1, np.inf, -np.inf, "fro"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms_of_empty_matrices_match_numpy_or_refuse_alike(shape, ord, keepdims):
    axis = (0, 1) if len(shape) == 2 else (2, 0)
    x = np.zeros(shape)
    try:
        want = np.linalg.norm(x, ord, axis, keepdims)
    except ValueError:
        with pytest.raises(ValueError):
            kiln.compile(lambda a: np.linalg.norm(a, ord, axis, keepdims))(x)
        return
    assert_same(kiln.compile(lambda a: np.linalg.norm(a, ord, axis, keepdims))(x), want)


@pytest.mark.parametrize(
    "subscripts, shapes",
    [
        ("ij,jk", [(3, 1), (0, 2)]),
        ("ij,jk", [(3, 0), (1, 2)]),
        ("ij,jk->ik", [(3, 1), (4, 2)]),
        ("i,i", [(1,), (0,)]),
        ("i,i->i", [(0,), (1,)]),
        ("...ij,...jk->...ik", [(2, 1, 3, 4), (0, 4, 2)]),
        ("...ij,...jk->...ik", [(0, 1, 3, 4), (5, 4, 2)]),
        ("...ij,...jk->...ik", [(2, 0, 3, 4), (5, 4, 2)]),  # 0 against 5: refused
        ("i,j,i->ij", [(3,), (2,), (1,)]),
        ("i,j,i->ij", [(0,), (2,), (1,)]),
        ("ij,ji->ij", [(0, 3), (3, 0)]),
    ],
)
def test_einsum_broadcasts_a_label_of_size_1_against_any_size_0_included(subscripts, shapes):
    args = [np.arange(1.0, 1.0 + np.prod(s)).reshape(s) for s in shapes]
    try:
        want = np.einsum(subscripts, *args)
    except ValueError:
        with pytest.raises(ValueError):
            kiln.compile(lambda *a: np.einsum(subscripts, *a))(*args)
        return
    assert_same(kiln.compile(lambda *a: np.einsum(subscripts, *a))(*args), want)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: np.linalg.norm(x, axis=(0, 2)),
        lambda x: np.linalg.norm(x, "fro", axis=(1, 0), keepdims=True),
        lambda x: np.linalg.norm(x, 1, axis=(2, 1)),
        lambda x: np.linalg.norm(x, -np.inf, axis=(0, 1)),
        lambda x: np.linalg.norm(x, 2, axis=-1, keepdims=True),
        lambda x: np.linalg.vector_norm(x),
        lambda x: np.linalg.vector_norm(x, axis=(2, 0), ord=np.inf),
        lambda x: np.linalg.vector_norm(x, axis=1, keepdims=True, ord=0),
        lambda x: np.linalg.vector_norm(x, keepdims=True, ord=-2),
        lambda x: np.linalg.matrix_norm(x, ord=np.inf, keepdims=True),
        lambda x: np.linalg.matrix_norm(x.astype(np.int32), ord=-1),
    ],
)
def test_norm_axes_keepdims_and_integer_inputs_match_numpy(fn):
    x = np.arange(24.0).reshape(2, 3, 4) - 11.5
    assert_same(kiln.compile(fn)(x), fn(x))


# -- what needs a decomposition, and wrong arguments -------------------------------------------------
DECOMPOSITIONS = [
    ("inv", lambda m: np.linalg.inv(m)),
    ("solve", lambda m: np.linalg.solve(m, m[0])),
    ("svd", lambda m: np.linalg.svd(m)),
    ("eigh", lambda m: np.linalg.eigh(m)),
    ("eig", lambda m: np.linalg.eig(m)),
    ("det", lambda m: np.linalg.det(m)),
    ("slogdet", lambda m: np.linalg.slogdet(m)),
    ("cholesky", lambda m: np.linalg.cholesky(m)),
    ("qr", lambda m: np.linalg.qr(m)),
    ("lstsq", lambda m: np.linalg.lstsq(m, m[0])),
    ("pinv", lambda m: np.linalg.pinv(m)),
    ("matrix_rank", lambda m: np.linalg.matrix_rank(m)),
]


@pytest.mark.parametrize("name, fn", DECOMPOSITIONS, ids=[d[0] for d in DECOMPOSITIONS])
def test_decompositions_are_refused_by_name(name, fn):
    with pytest.raises(kiln.UnsupportedError, match=rf"np\.linalg\.{name} needs a matrix decomposition") as info:
        kiln.compile(fn)(np.eye(3))
    assert re.search(r"test_linalg\.py:\d+", str(info.value))


m33 = np.eye(3)

ERRORS = [
    (lambda m: np.linalg.norm(m, 2), kiln.UnsupportedError, "singular value decomposition"),
    (lambda m: np.linalg.norm(m, "nuc"), kiln.UnsupportedError, "ord='nuc'"),
    (lambda m: np.linalg.matrix_norm(m, ord=-2), kiln.UnsupportedError, "ord=-2"),
    (lambda m: np.linalg.norm(m, 3), kiln.ArgumentError, "invalid norm order 3 for matrices"),
    (lambda m: np.linalg.norm(m[0], "fro"), kiln.ArgumentError, "invalid norm order 'fro' for vectors"),
    (lambda m: np.linalg.norm(m, axis=(0, 0)), kiln.ShapeError, "duplicate axes"),
    (lambda m: np.linalg.norm(m[None], 1), kiln.ShapeError, "improper number of dimensions"),
    (lambda m: np.linalg.matrix_power(m, -1), kiln.UnsupportedError, "matrix inverse"),
    (lambda m: np.linalg.matrix_power(m[:2], 2), kiln.ShapeError, "must be square"),
    (lambda m: np.einsum("ij,jk", m), kiln.ArgumentError, "name 2 operands, 1 were given"),
    (lambda m: np.einsum("i1", m), kiln.ArgumentError, "invalid subscript '1'"),
    (lambda m: np.einsum("ij->k", m), kiln.ArgumentError, "output subscript 'k' never appeared"),
    (lambda m: np.einsum("ij->ii", m), kiln.ArgumentError, "repeat a label"),
    (lambda m: np.einsum("i", m), kiln.ShapeError, "operand 0 has 2 dimensions"),
    (lambda m: np.einsum("...i->i", m), kiln.ShapeError, "has no '...'"),
    (lambda m: np.einsum("ij,jk", m, m[:2]), kiln.ShapeError, "label 'j' has sizes 3 and 2"),
    (lambda m: np.einsum("ii", m[:2]), kiln.ShapeError, "collapsing index 'i' don't match"),
    (lambda m: np.einsum("ij", m, out=m), kiln.UnsupportedError, "out="),
    (lambda m: np.einsum("i,i", m[0], m[0], dtype=np.int32), kiln.DTypeError, "rule 'safe'"),
    (lambda m: np.tensordot(m, m[:2], 1), kiln.ShapeError, "shape-mismatch for sum"),
    (lambda m: np.tensordot(m, m, ([0, 1], [0])), kiln.ShapeError, "shape-mismatch for sum"),
    (lambda m: np.inner(m, m[:, :2]), kiln.ShapeError, "last dimensions differ"),
    (lambda m: np.vdot(m, m[0]), kiln.ShapeError, "different lengths"),
    (lambda m: np.cross(m[:, :1], m), kiln.ShapeError, "dimension must be 2 or 3"),
    (lambda m: np.linalg.cross(m[:, :2], m[:, :2]), kiln.ShapeError, "3-dimensional vectors"),
    (lambda m: np.linalg.outer(m, m[0]), kiln.ShapeError, "must be one-dimensional"),
    (lambda m: np.linalg.multi_dot([m]), kiln.ArgumentError, "at least two arrays"),
    (lambda m: np.linalg.multi_dot([m, m[None], m]), kiln.ShapeError, "must be two-dimensional"),
]


@pytest.mark.parametrize("fn, error, message", ERRORS, ids=[e[2] for e in ERRORS])
def test_bad_arguments_raise_a_clear_error_at_the_users_line(fn, error, message):
    with pytest.raises(error, match=re.escape(message)) as info:
        kiln.compile(fn, target="interpret")(m33)
    assert re.search(r"test_linalg\.py:\d+", str(info.value)), str(info.value)
