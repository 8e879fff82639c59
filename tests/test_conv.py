"""kiln.conv2d compiled against a numpy oracle written from the definition, on awkward
shapes: both lowerings (the flat matrix product and the direct nest), strides, paddings,
single pixels, channel counts that are not a multiple of any vector width, and gradients
against finite differences."""

import dataclasses

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


GROUPED = [  # (x shape, filters, kernel, stride, padding, groups)
    ((1, 6, 7, 7), 6, 3, 1, 1, 6),  # depthwise
    ((2, 6, 9, 9), 12, 3, 2, 1, 3),  # two filters per group, strided
    ((1, 8, 13, 13), 8, 3, 2, 1, 8),  # depthwise, strided
    ((3, 4, 5, 5), 6, 1, 1, 0, 2),  # grouped 1x1, as in ShuffleNet
    ((1, 4, 9, 9), 4, 9, 1, 0, 2),  # a kernel as large as the input: the direct nest
    ((1, 9, 11, 11), 9, 5, 1, 2, 9),
]


def grouped_oracle(x, w, stride, padding, groups):
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    parts = [oracle(x[:, k * cg : (k + 1) * cg], w[k * fg : (k + 1) * fg], stride, padding) for k in range(groups)]
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,f,k,stride,padding,groups", GROUPED)
def test_grouped_conv2d_matches_the_definition(xs, f, k, stride, padding, groups, dtype):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((f, xs[1] // groups, k, k)).astype(dtype)
    compiled = kiln.compile(lambda x, w: kiln.conv2d(x, w, stride=stride, padding=padding, groups=groups))
    want = grouped_oracle(x.astype(np.float64), w.astype(np.float64), (stride,) * 2, (padding,) * 2, groups)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(compiled(x, w), want, rtol=tol, atol=tol * k * k * xs[1])
    eager = kiln.conv2d(x, w, stride=stride, padding=padding, groups=groups)
    np.testing.assert_allclose(eager, want, rtol=tol, atol=tol * k * k * xs[1])


@pytest.mark.parametrize(
    "xs,ws,stride,padding,groups", [((2, 6, 7, 6), (6, 1, 3, 3), 2, 1, 6), ((1, 4, 5, 5), (6, 2, 3, 3), 1, 1, 2)]
)
def test_grouped_conv2d_gradients_match_finite_differences(xs, ws, stride, padding, groups):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)

    def loss(x, w):
        return np.sum(np.tanh(kiln.conv2d(x, w, stride=stride, padding=padding, groups=groups)))

    kiln.gradcheck(loss, x, w, argnums=(0, 1))


def test_groups_that_do_not_fit_are_errors():
    with pytest.raises(kiln.ShapeError, match="groups"):
        kiln.compile(lambda x, w: kiln.conv2d(x, w, groups=4))(np.ones((1, 6, 5, 5)), np.ones((4, 1, 3, 3)))
    with pytest.raises(kiln.ArgumentError, match="groups"):
        kiln.conv2d(np.ones((1, 2, 5, 5)), np.ones((2, 1, 3, 3)), groups=0)


@pytest.mark.parametrize(
    "h,k,stride,pads",
    [
        (224, 7, 2, [3, 3, 3, 3]),
        (56, 3, 2, [1, 1, 1, 1]),
        (13, 3, 2, [1, 1, 1, 1]),
        (10, 3, 2, [2, 1, 2, 1]),
        (11, 3, 3, [2, 0, 1, 3]),
    ],
)
def test_onnx_conv_pads_that_the_last_window_does_not_reach(h, k, stride, pads):
    """An ONNX Conv whose end padding is partly unread (stride 2 over an even size) runs as a
    symmetric kiln.conv2d without copying the input; the numbers are the definition's."""
    from onnx import helper
    from onnx_models import one_node_model

    x = rng.standard_normal((2, 3, h, h)).astype(np.float32)
    w = rng.standard_normal((4, 3, k, k)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k, k], strides=[stride] * 2, pads=pads)
    got = kiln.onnx.load(one_node_model(node, {"x": x}, {"w": w}))(x)[0]
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    want = oracle(padded, w.astype(np.float64), (stride, stride), (0, 0))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * k * k * 3)


@pytest.mark.parametrize(
    "xs, ws, stride, padding, groups",
    [
        ((0, 3, 7, 9), (4, 3, 3, 3), 1, 0, 1),  # no images
        ((0, 4, 7, 9), (4, 1, 3, 3), 2, 1, 4),  # no images, depthwise, strided
        ((2, 0, 7, 9), (4, 0, 3, 3), 1, 1, 1),  # no channels: every output is an empty sum, 0
        ((2, 3, 7, 9), (0, 3, 3, 3), 1, 1, 1),  # no filters
        ((2, 4, 7, 9), (0, 2, 3, 3), 2, 0, 2),  # no filters, grouped
    ],
)
def test_conv2d_with_a_size_0_dimension_matches_the_definition(xs, ws, stride, padding, groups):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    got = kiln.compile(lambda x, w: kiln.conv2d(x, w, stride=stride, padding=padding, groups=groups))(x, w)
    want = grouped_oracle(x, w, pair(stride), pair(padding), groups)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


LAYOUTS = [  # (n, c, h, w, kh, kw, sh, sw, ph, pw): strides that skip the last rows, kernels below the stride
    (1, 2, 7, 7, 3, 3, 1, 1, 1, 1),
    (1, 1, 9, 9, 2, 2, 2, 2, 0, 0),
    (3, 1, 8, 5, 1, 1, 3, 2, 0, 0),
    (2, 1, 14, 14, 3, 3, 1, 1, 1, 1),
    (1, 1, 13, 11, 3, 2, 2, 1, 0, 1),
    (2, 1, 23, 23, 7, 7, 2, 2, 3, 3),
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 0),
]


@pytest.mark.parametrize("multiple", [1, 4, 8, 16])
@pytest.mark.parametrize("shape", LAYOUTS)
def test_the_flat_layout_holds_every_input_and_tap_and_computes_whole_vectors(shape, multiple):
    """The rule the flat lowering rests on: each input element has its place in the panel, each
    tap of each computed column lies inside the panel, each output is a computed column, and
    the columns are whole vectors of `multiple` lanes, past the last output by less than one
    padded image row plus a vector."""
    g = FlatLayout(*shape, multiple)
    n, _, h, w, kh, kw, sh, sw, ph, pw = shape
    places = [
        b * g.image + (y + ph) // sh * g.phase_cols + (x + pw) // sw
        for b in range(n)
        for y in range(h)
        for x in range(w)
    ]
    assert max(places) < g.panel_length
    taps = [(i // sh) * g.phase_cols + j // sw for i in range(kh) for j in range(kw)]
    assert g.columns - 1 + max(taps) < g.panel_length
    outputs = [
        b * g.image + y * g.phase_cols + x for b in range(n) for y in range(g.out_rows) for x in range(g.out_cols)
    ]
    assert max(outputs) < g.columns and g.columns % multiple == 0
    assert g.columns - max(outputs) <= g.phase_cols + multiple


@pytest.mark.parametrize("bits", [128, 512])
@pytest.mark.parametrize("xs,ws,stride,padding", CASES[:4] + CASES[-2:])
def test_conv2d_lowered_for_other_vector_widths_matches_the_definition(monkeypatch, xs, ws, stride, padding, bits):
    """The CPU target rounds a convolution's columns to the host's vectors; other hosts' widths
    (SSE's 128 bits, AVX-512's 512) give the same numbers, and their own cache entries."""
    from kiln import target as targets

    host = dataclasses.replace(
        targets.TARGETS["cpu"], host_options=lambda: {"lower-tensor-to-affine": f"vector-bits={bits}"}
    )
    monkeypatch.setitem(targets.TARGETS, "cpu", host)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    f = kiln.compile(lambda x, w: kiln.conv2d(x, w, stride=stride, padding=padding))
    (sh, sw), (ph, pw) = pair(stride), pair(padding)
    layout = FlatLayout(*xs, *ws[2:], sh, sw, ph, pw, bits // 32)
    if layout.waste <= 2.0:  # the flat lowering: its wide buffer has the width's columns
        affine = f.lower(x, w).text("affine", locations=False)
        assert f"memref<{ws[0]}x{layout.columns}xf32>" in affine
    want = oracle(x.astype(np.float64), w.astype(np.float64), pair(stride), pair(padding))
    np.testing.assert_allclose(f(x, w), want, rtol=1e-4, atol=1e-4 * ws[1] * ws[2] * ws[3])


@pytest.mark.parametrize("xs,ws,stride,padding", CASES)
def test_a_convolution_read_by_other_ops_matches_the_definition(xs, ws, stride, padding):
    """An intermediate convolution is read where the flat lowering computed it (a view of its
    wide columns, no copy to NCHW): its readers index those columns right, a second
    convolution's packing included."""
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    w2 = rng.standard_normal((3, ws[0], 1, 1)).astype(np.float32)

    def block(x, w, w2):
        y = kiln.conv2d(x, w, stride=stride, padding=padding)
        z = np.maximum(y, 0) + y * 0.5  # read twice, as a residual block reads it
        return kiln.conv2d(z, w2), z.sum(axis=(2, 3))

    got, sums = kiln.compile(block)(x, w, w2)
    y = oracle(x.astype(np.float64), w.astype(np.float64), pair(stride), pair(padding))
    z = np.maximum(y, 0) + y * 0.5
    np.testing.assert_allclose(got, oracle(z, w2.astype(np.float64), (1, 1), (0, 0)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(sums, z.sum(axis=(2, 3)), rtol=1e-4, atol=1e-3)


def test_an_intermediate_convolution_is_not_copied_out_and_an_unpadded_panel_zeroes_only_its_tail():
    f = kiln.compile(lambda x, w: np.maximum(kiln.conv2d(x, w), 0))
    affine = f.lower(kiln.f32[1, 4, 8, 8], kiln.f32[6, 4, 3, 3]).text("affine", locations=False)
    nests = [line for line in affine.splitlines() if line.startswith("    affine.for")]
    # the panel's zero tail (6 output rows of 8 make 48 columns, which the taps reach past
    # by 2*8 + 2: 66, of which the input fills 64), the input's copy, the product, and the
    # ReLU reading the wide columns: no copy to NCHW between
    assert nests[0].startswith("    affine.for %k0.i = 0 to 4") and len(nests) == 4
    assert "affine.for %k0.j = 0 to 2 " in affine and "memref<4x1x1x66xf32>" in affine
    assert "affine.load %buf1[%k3.j, %k3.i * 64 + %k3.k * 8 + %k3.l]" in affine


def test_a_convolutions_buffers_are_planned_in_the_arena():
    """The panel lives while its convolution runs and the wide columns while the result is
    read, so the memory plan places both in the arena: the arena grows by the largest
    panel, not by every convolution's, and nothing else is allocated. A reader of the
    result never overwrites it in place (its bytes hold the wide layout, not NCHW)."""

    def net(x, w1, w2, w3):
        y = np.maximum(kiln.conv2d(x, w1, padding=1), 0)
        y = np.maximum(kiln.conv2d(y, w2, padding=1), 0)
        return kiln.conv2d(y, w3, padding=1).sum()

    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    ws = [rng.standard_normal(s).astype(np.float32) for s in [(8, 3, 3, 3), (8, 8, 3, 3), (4, 8, 3, 3)]]
    f = kiln.compile(net)
    lowered = f.lower(x, *ws)
    affine = lowered.text("affine", locations=False)
    assert affine.count("memref.alloc(") == 1  # the arena alone
    optimized = lowered.module("optimized").body.ops[0]
    convs = [op for op in optimized.body.ops if op.name == "kiln.conv2d"]
    assert len(convs) == 3 and all("scratch_offset" in op.attributes for op in convs)
    plan = lowered.pipeline.memory_plan()
    assert not plan.conflicts() and plan.arena_bytes < plan.unplanned_bytes
    want = x.astype(np.float64)
    for w in ws[:2]:
        want = np.maximum(oracle(want, w.astype(np.float64), (1, 1), (1, 1)), 0)
    want = oracle(want, ws[2].astype(np.float64), (1, 1), (1, 1)).sum()
    np.testing.assert_allclose(f(x, *ws), want, rtol=1e-4)
