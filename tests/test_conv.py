"""kiln.conv2d compiled against a numpy oracle written from the definition, on awkward
shapes: both lowerings (the flat matrix product and the direct nest), strides, paddings,
single pixels, channel counts that are not a multiple of any vector width, and gradients
against finite differences."""

import numpy as np
import pytest

import kiln
from kiln.passes.lower_conv import FlatLayout

rng = np.random.default_rng(7)


def oracle(x, w, stride, padding):
    """out[n, f, i, j] = sum over c, a, b of x_padded[n, c, i*sh + a, j*sw + b] * w[f, c, a, b]."""
    (sh, sw), (ph, pw) = stride, padding
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    padded = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), x.dtype)
    padded[:, :, ph : ph + h, pw : pw + wd] = x
    oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    for a in range(kh):
        for b in range(kw):
            tap = padded[:, :, a : a + sh * (oh - 1) + 1 : sh, b : b + sw * (ow - 1) + 1 : sw]
            out += np.tensordot(tap, w[:, :, a, b], axes=([1], [1])).transpose(0, 3, 1, 2)
    return out


CASES = [  # (x shape, w shape, stride, padding)
    ((1, 3, 7, 7), (5, 3, 3, 3), 1, 1),
    ((2, 4, 13, 11), (9, 4, 3, 3), 2, 1),
    ((1, 5, 1, 1), (7, 5, 1, 1), 1, 0),
    ((3, 2, 9, 8), (4, 2, 7, 7), 2, 3),
    ((1, 17, 13, 13), (19, 17, 3, 3), 1, 2),
    ((1, 3, 8, 8), (2, 3, 1, 1), 2, 0),
    ((2, 3, 10, 10), (4, 3, 5, 5), 3, 2),
    ((5, 6, 7, 7), (11, 6, 1, 1), 1, 0),
    ((1, 3, 23, 23), (8, 3, 7, 7), 2, 3),
    ((2, 3, 13, 9), (4, 3, 2, 3), (2, 1), (0, 1)),
]


def pair(v):
    return (v, v) if np.ndim(v) == 0 else tuple(v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,stride,padding", CASES)
def test_conv2d_matches_the_definition(xs, ws, stride, padding, dtype):
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    f = kiln.compile(lambda x, w: kiln.conv2d(x, w, stride=stride, padding=padding))
    got = f(x, w)
    want = oracle(x.astype(np.float64), w.astype(np.float64), pair(stride), pair(padding))
    assert got.dtype == dtype and got.shape == want.shape
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * ws[1] * ws[2] * ws[3])


def test_integer_convolutions_are_exact():
    x = rng.integers(-9, 9, (2, 3, 11, 6)).astype(np.int32)
    w = rng.integers(-9, 9, (5, 3, 3, 3)).astype(np.int32)
    f = kiln.compile(lambda x, w: kiln.conv2d(x, w, stride=2, padding=1))
    np.testing.assert_array_equal(f(x, w), oracle(x, w, (2, 2), (1, 1)).astype(np.int32))


def test_both_lowerings_are_exercised():
    """The cases above cover the flat layout and the direct nest (a kernel nearly as large as
    its input, where the flat layout would compute mostly thrown-away columns)."""
    waste = [FlatLayout(*x[:1], *x[1:], *w[2:], *pair(s), *pair(p)).waste for x, w, s, p in CASES]
    assert min(waste) <= 2.0 < max(waste)


@pytest.mark.parametrize(
    "xs,ws,stride,padding", [((2, 3, 7, 6), (4, 3, 3, 3), 2, 1), ((1, 2, 5, 5), (3, 2, 1, 1), 1, 0)]
)
def test_conv2d_gradients_match_finite_differences(xs, ws, stride, padding):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    kiln.gradcheck(
        lambda x, w: np.sum(np.tanh(kiln.conv2d(x, w, stride=stride, padding=padding))), x, w, argnums=(0, 1)
    )
