"""ONNX's random ops draw on every call (from kiln.random, see kiln/onnx/random_state.py):
RandomUniform, RandomNormal and their Like forms, Bernoulli, Multinomial and Dropout in
training mode. Their bits differ from onnxruntime's by design, so the checks are of
distributions (Kolmogorov-Smirnov, chi-square at significance 0.001), dtypes and shapes,
fresh draws per call, and a seed's reproducible sequence across loads. The statistics are
computed for a fixed random_state, so each is one number, not a new draw per run."""

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import one_node_model  # noqa: E402
from test_random import _chi_square, _chi_square_critical, _ks_critical, _ks_statistic, _normal_cdf  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

STATE = np.array([0x2545F491, 0x4F6CDD1D, 0, 7], np.uint32)  # load entropy, call count


def generator(op_type, shape, **attributes):
    elem_type = attributes.get("dtype", TensorProto.FLOAT)
    graph = helper.make_graph(
        [helper.make_node(op_type, [], ["y"], shape=list(shape), **attributes)], "g", [],
        [helper.make_tensor_value_info("y", elem_type, list(shape))],
    )  # fmt: skip
    return kiln.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_random_uniform_is_uniform_and_drawn_on_every_call():
    n = 20000
    model = generator("RandomUniform", (n,), low=-2.0, high=3.0)
    (first,), (second,) = model(random_state=STATE), model()
    assert first.dtype == np.float32 and first.shape == (n,)
    assert np.all((first >= -2) & (first < 3))
    assert _ks_statistic(first, lambda x: (x + 2) / 5) < _ks_critical(n)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("dtype, onnx_dtype", [(np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE)])
def test_random_normal_matches_the_normal_cdf(dtype, onnx_dtype):
    n = 20000
    (z,) = generator("RandomNormal", (100, n // 100), mean=1.0, scale=2.0, dtype=onnx_dtype)(random_state=STATE)
    assert z.dtype == dtype and z.shape == (100, n // 100)
    assert _ks_statistic(z.ravel(), lambda x: _normal_cdf((x - 1.0) / 2.0)) < _ks_critical(n)


def test_a_seed_gives_the_same_sequence_of_draws_in_every_load():
    a, b = generator("RandomNormal", (64,), seed=3.0), generator("RandomNormal", (64,), seed=3.0)
    first, second = a()[0], a()[0]
    assert not np.array_equal(first, second)  # a seeded node still draws anew on each call
    assert np.array_equal(b()[0], first) and np.array_equal(b()[0], second)
    other = generator("RandomNormal", (64,), seed=4.0)()[0]
    assert not np.array_equal(other, first)
    unseeded = generator("RandomNormal", (64,)), generator("RandomNormal", (64,))
    assert not np.array_equal(unseeded[0]()[0], unseeded[1]()[0])  # each load draws its own


def test_an_explicit_random_state_replays_a_call():
    model = generator("RandomUniform", (16,))
    state = np.array([1, 2, 3, 4], np.uint32)
    assert np.array_equal(model(random_state=state)[0], model(random_state=state)[0])


def test_like_forms_take_the_inputs_shape_and_dtype():
    x = np.zeros((3, 500), np.float64)
    node = helper.make_node("RandomUniformLike", ["x"], ["y"], low=5.0, high=6.0)
    (u,) = kiln.onnx.load(one_node_model(node, {"x": x}))(x, random_state=STATE)
    assert u.dtype == np.float64 and u.shape == x.shape and np.all((u >= 5) & (u < 6))
    node = helper.make_node("RandomNormalLike", ["x"], ["y"], dtype=TensorProto.FLOAT)
    (z,) = kiln.onnx.load(one_node_model(node, {"x": x}))(x, random_state=STATE)
    assert z.dtype == np.float32 and z.shape == x.shape
    assert _ks_statistic(z.ravel(), _normal_cdf) < _ks_critical(z.size)


def test_bernoulli_is_one_with_the_given_probability():
    p = np.array([0.0, 0.2, 0.5, 0.9, 1.0], np.float32)
    batch = np.tile(p, (4000, 1))
    node = helper.make_node("Bernoulli", ["p"], ["y"], dtype=TensorProto.INT64)
    model = kiln.onnx.load(one_node_model(node, {"p": batch}, opset=15))
    (draws,) = model(batch, random_state=STATE)
    assert draws.dtype == np.int64 and set(np.unique(draws)) <= {0, 1}
    ones = draws.sum(axis=0)
    assert ones[0] == 0 and ones[-1] == 4000
    for k in (1, 2, 3):
        assert _chi_square([ones[k], 4000 - ones[k]], [4000 * p[k], 4000 * (1 - p[k])]) < _chi_square_critical(1)
    assert not np.array_equal(model(batch)[0], draws)


def test_multinomial_samples_classes_by_their_probabilities():
    probabilities = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.0, 0.3]])
    logits = np.log(np.maximum(probabilities, 1e-30)).astype(np.float32)
    node = helper.make_node("Multinomial", ["x"], ["y"], sample_size=6000, dtype=TensorProto.INT64)
    (samples,) = kiln.onnx.load(one_node_model(node, {"x": logits}, opset=7))(logits, random_state=STATE)
    assert samples.dtype == np.int64 and samples.shape == (2, 6000)
    for row, p in zip(samples, probabilities):
        counts = np.bincount(row, minlength=4)
        kept = p > 0
        assert np.all(counts[~kept] == 0)
        assert _chi_square(counts[kept], 6000 * p[kept]) < _chi_square_critical(int(kept.sum()) - 1)


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.9])
def test_training_dropout_draws_a_mask_per_call_and_scales_what_it_keeps(ratio):
    x = np.random.default_rng(0).uniform(1, 2, (50, 40)).astype(np.float32)
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    model = kiln.onnx.load(one_node_model(node, {"x": x}, {"r": np.float32(ratio), "t": np.bool_(True)}, opset=13))
    y, mask = model(x, random_state=STATE)
    assert mask.dtype == np.bool_ and y.dtype == np.float32
    np.testing.assert_allclose(y, np.where(mask, x / np.float32(1 - ratio), 0), rtol=1e-6)
    kept = int(mask.sum())
    assert _chi_square([kept, mask.size - kept], [mask.size * (1 - ratio), mask.size * ratio]) < _chi_square_critical(1)
    assert not np.array_equal(model(x)[1], mask)


def test_training_dropout_with_a_ratio_given_at_run_time():
    x = np.ones((100, 50), np.float32)
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    ratio = np.float32(0.3)
    model = kiln.onnx.load(one_node_model(node, {"x": x, "r": ratio}, {"t": np.bool_(True)}, opset=13))
    y, mask = model(x, ratio, random_state=STATE)
    np.testing.assert_allclose(y, np.where(mask, np.float32(1) / (np.float32(1) - ratio), 0), rtol=1e-6)
    kept = int(mask.sum())
    assert _chi_square([kept, mask.size - kept], [mask.size * 0.7, mask.size * 0.3]) < _chi_square_critical(1)
    y, mask = model(x, np.float32(0.0))
    assert mask.all() and np.array_equal(y, x)


def test_random_ops_inside_a_subgraph_are_refused():
    body = helper.make_graph(
        [helper.make_node("RandomUniform", [], ["u"], shape=[2])], "then", [],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [2])],
    )  # fmt: skip
    node = helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    c = np.array(True)
    with pytest.raises(kiln.UnsupportedError, match="control-flow subgraph"):
        kiln.onnx.load(one_node_model(node, {"c": c}))(c)


def test_a_non_float_dtype_is_refused():
    with pytest.raises(kiln.UnsupportedError, match="float type"):
        generator("RandomUniform", (2,), dtype=TensorProto.INT32)()
