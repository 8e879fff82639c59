"""ONNX DFT, STFT, MelWeightMatrix, Col2Im, GridSample and RoiAlign beyond the backend
suite's cases, against numpy's FFT and ONNX's reference implementation: padded and cut
signals, odd lengths, complex inputs, 3-D images, every padding mode, adaptive sampling."""

import numpy as np
import pytest
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_models import one_node_model  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

rng = np.random.default_rng(23)


def make_model(node, inputs: dict, initializers: dict | None = None, opset: int = 20):
    return one_node_model(node, inputs, initializers, opset)


def run(node, inputs: dict, initializers: dict | None = None, opset: int = 20):
    return kiln.onnx.load(make_model(node, inputs, initializers, opset))(*inputs.values())


def check(node, inputs: dict, initializers: dict | None = None, opset: int = 20, rtol=1e-5, atol=1e-5):
    model = make_model(node, inputs, initializers, opset)
    got = kiln.onnx.load(model)(*inputs.values())
    want = ReferenceEvaluator(model).run(None, inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def complex_parts(z):
    return np.stack([z.real, z.imag], axis=-1)


# -- DFT, STFT, MelWeightMatrix ----------------------------------------------------------------
@pytest.mark.parametrize("length", [5, 8, 13])
@pytest.mark.parametrize("axis", [1, 2, -2])
def test_dft_complex_input_padded_or_cut(length, axis):
    z = rng.standard_normal((2, 8, 7)) + 1j * rng.standard_normal((2, 8, 7))
    x = complex_parts(z)
    node = helper.make_node("DFT", ["x", "n", "axis"], ["y"])
    (got,) = run(node, {"x": x}, {"n": np.int64(length), "axis": np.int64(axis)})
    want = np.fft.fft(z, n=length, axis=axis % 4)
    np.testing.assert_allclose(got, complex_parts(want), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("length", [7, 10])
def test_dft_inverse_and_one_sided(length):
    signal = rng.standard_normal((3, length)).astype(np.float32)
    forward = helper.make_node("DFT", ["x", "", "axis"], ["y"], onesided=1)
    (spectrum,) = run(forward, {"x": signal[..., None]}, {"axis": np.int64(1)})
    np.testing.assert_allclose(spectrum, complex_parts(np.fft.rfft(signal, axis=1)), rtol=1e-4, atol=1e-4)
    inverse = helper.make_node("DFT", ["x", "n", "axis"], ["y"], onesided=1, inverse=1)
    (back,) = run(inverse, {"x": spectrum}, {"n": np.int64(length), "axis": np.int64(1)})
    np.testing.assert_allclose(back[..., 0], signal, rtol=1e-4, atol=1e-5)


def test_dft_float16_sums_in_float32():
    x = rng.standard_normal((2, 64, 1)).astype(np.float16)
    (got,) = run(helper.make_node("DFT", ["x", "", "axis"], ["y"]), {"x": x}, {"axis": np.int64(1)})
    assert got.dtype == np.float16
    want = complex_parts(np.fft.fft(x[..., 0].astype(np.float64), axis=1))
    np.testing.assert_allclose(got, want.astype(np.float16), rtol=2e-3, atol=1e-2)


def test_dft_opset_17_axis_attribute_and_full_inverse():
    z = rng.standard_normal((4, 6)) + 1j * rng.standard_normal((4, 6))
    node = helper.make_node("DFT", ["x"], ["y"], axis=1, inverse=1)
    (got,) = run(node, {"x": complex_parts(z).astype(np.float32)}, opset=17)
    np.testing.assert_allclose(got, complex_parts(np.fft.ifft(z, axis=1)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("onesided", [0, 1])
def test_stft_with_window_and_step(onesided):
    signal = rng.standard_normal((2, 50, 1)).astype(np.float32)
    window = np.hanning(12).astype(np.float32)
    node = helper.make_node("STFT", ["signal", "step", "window"], ["y"], onesided=onesided)
    check(node, {"signal": signal}, {"step": np.int64(5), "window": window}, opset=17, rtol=1e-4, atol=1e-4)


def test_stft_frame_length_without_window_on_a_complex_signal():
    signal = rng.standard_normal((1, 20, 2)).astype(np.float32)
    node = helper.make_node("STFT", ["signal", "step", "", "length"], ["y"], onesided=0)
    check(node, {"signal": signal}, {"step": np.int64(3), "length": np.int64(8)}, opset=17, rtol=1e-4, atol=1e-4)


def test_mel_weight_matrix():
    node = helper.make_node(
        "MelWeightMatrix", ["bins", "n", "rate", "low", "high"], ["y"], output_datatype=TensorProto.DOUBLE
    )
    values = {
        "bins": np.int64(10),
        "n": np.int64(64),
        "rate": np.int64(16000),
        "low": np.float32(100),
        "high": np.float32(7000),
    }
    check(node, {}, values, opset=17)


# -- Col2Im ---------------------------------------------------------------------------------
def test_col2im_3d_with_strides_dilations_and_pads():
    image, block = [5, 6, 4], [2, 2, 2]
    strides, dilations, pads = [1, 2, 1], [2, 1, 1], [1, 0, 1, 0, 1, 1]
    padded = [n + pads[i] + pads[i + 3] for i, n in enumerate(image)]
    grid = [(p - d * (b - 1) - 1) // s + 1 for p, b, d, s in zip(padded, block, dilations, strides)]
    x = rng.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(grid)))).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=strides, dilations=dilations, pads=pads)
    check(node, {"x": x}, {"image": np.array(image), "block": np.array(block)}, opset=18)


# -- GridSample, RoiAlign ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "mode, padding_mode, align_corners",
    [
        ("nearest", "zeros", 0),
        ("nearest", "reflection", 1),
        ("linear", "border", 0),
        ("linear", "reflection", 0),
        ("cubic", "zeros", 1),
        ("cubic", "reflection", 0),
    ],
)
def test_grid_sample_traced_grid(mode, padding_mode, align_corners):
    # 3-D for nearest and linear; cubic's 64 taps in 3-D compile slowly, so it is tested in 2-D.
    spatial = 2 if mode == "cubic" else 3
    x = rng.standard_normal((2, 2, 3, 4, 5)[: 2 + spatial]).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (2, 2, 3, 2)[: 1 + spatial] + (spatial,)).astype(np.float32)
    node = helper.make_node(
        "GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding_mode, align_corners=align_corners
    )
    check(node, {"x": x, "grid": grid}, opset=20, rtol=1e-4, atol=1e-4)


def test_grid_sample_refuses_3d_before_opset_20():
    node = helper.make_node("GridSample", ["x", "grid"], ["y"])
    with pytest.raises(kiln.UnsupportedError, match="2-D"):
        run(node, {"x": np.zeros((1, 1, 2, 2, 2), np.float32), "grid": np.zeros((1, 1, 1, 1, 3), np.float32)}, opset=16)


def _rois():
    return np.array([[0.0, 0.0, 7.5, 5.0], [1.2, 2.5, 3.0, 9.5], [-1.0, 3.0, 12.0, 4.0]], np.float32)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_adaptive_sampling(mode, transform):
    x = rng.standard_normal((2, 3, 10, 8)).astype(np.float32)
    node = helper.make_node(
        "RoiAlign",
        ["x", "rois", "batch"],
        ["y"],
        mode=mode,
        coordinate_transformation_mode=transform,
        output_height=3,
        output_width=2,
        spatial_scale=0.8,
    )
    check(node, {"x": x}, {"rois": _rois(), "batch": np.array([1, 0, 1])}, opset=16, rtol=1e-4, atol=1e-5)


def test_roi_align_traced_regions_with_a_fixed_grid():
    x = rng.standard_normal((2, 3, 10, 8)).astype(np.float32)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], sampling_ratio=3, output_height=2)
    check(node, {"x": x, "rois": _rois(), "batch": np.array([1, 0, 1])}, opset=16, rtol=1e-4, atol=1e-5)


def test_roi_align_refuses_traced_regions_with_an_adaptive_grid():
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"])
    inputs = {"x": np.zeros((1, 1, 4, 4), np.float32), "rois": _rois()}
    with pytest.raises(kiln.UnsupportedError, match="sampling_ratio 0"):
        run(node, inputs, {"batch": np.zeros(3, np.int64)}, opset=16)


# -- TfIdfVectorizer ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("shape", [(12,), (3, 9)])
def test_tfidf_vectorizer_with_skips(mode, shape):
    x = rng.integers(0, 4, shape).astype(np.int32)
    pool = [0, 1, 3, 0, 1, 1, 2, 3, 3, 2, 0, 1, 2]  # 1-grams 0 1 3, 2-grams (0 1) (1 2) (3 3), a 3-gram
    node = helper.make_node(
        "TfIdfVectorizer",
        ["x"],
        ["y"],
        mode=mode,
        min_gram_length=1,
        max_gram_length=3,
        max_skip_count=2,
        ngram_counts=[0, 3, 9],
        ngram_indexes=[6, 0, 1, 2, 3, 5, 4],
        pool_int64s=pool,
        weights=[0.5, 1.0, 2.0, 3.0, 0.25, 1.5, 4.0],
    )
    check(node, {"x": x}, opset=9)


def test_tfidf_vectorizer_two_grams_only_without_weights():
    # (the reference fails without weights; TFIDF without them is the counts)
    x = rng.integers(0, 3, (2, 10)).astype(np.int64)
    grams = [(0, 0), (1, 1), (2, 2)]
    node = helper.make_node(
        "TfIdfVectorizer",
        ["x"],
        ["y"],
        mode="TFIDF",
        min_gram_length=2,
        max_gram_length=2,
        max_skip_count=0,
        ngram_counts=[0, 2],
        ngram_indexes=[3, 4, 0, 1, 2],
        pool_int64s=[1, 2, 0, 0, 1, 1, 2, 2],
    )
    (got,) = run(node, {"x": x}, opset=9)
    want = np.zeros((2, 5), np.float32)
    for row in range(2):
        for a, b in zip(x[row, :-1], x[row, 1:]):
            if (a, b) in grams:
                want[row, grams.index((a, b))] += 1
    np.testing.assert_array_equal(got, want)


# -- NonMaxSuppression -------------------------------------------------------------------------
@pytest.mark.parametrize("center_point_box", [0, 1])
@pytest.mark.parametrize("score_threshold", [None, 0.35])
def test_non_max_suppression_on_constants(center_point_box, score_threshold):
    boxes = rng.uniform(0, 10, (2, 12, 4)).astype(np.float32)
    if center_point_box:
        boxes[..., 2:] = rng.uniform(1, 4, (2, 12, 2))
    scores = rng.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    scores[0, 0, 3] = scores[0, 0, 5]  # a tie, broken by the box index
    values = {"boxes": boxes, "scores": scores, "limit": np.array([4]), "iou": np.array([0.2], np.float32)}
    names = ["boxes", "scores", "limit", "iou"]
    if score_threshold is not None:
        values["floor"] = np.array([score_threshold], np.float32)
        names.append("floor")
    node = helper.make_node("NonMaxSuppression", names, ["y"], center_point_box=center_point_box)
    model = make_model(node, {}, values, opset=11)
    (got,) = kiln.onnx.load(model)()
    (want,) = ReferenceEvaluator(model).run(None, {})
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64


def test_non_max_suppression_refuses_traced_boxes():
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"])
    inputs = {"boxes": np.zeros((1, 2, 4), np.float32)}
    with pytest.raises(kiln.UnsupportedError, match="number of boxes selected"):
        run(node, inputs, {"scores": np.zeros((1, 1, 2), np.float32)}, opset=11)
