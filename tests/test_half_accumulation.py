"""float16 reductions round where numpy's do: along a contiguous axis numpy's ``HALF_add``
and ``HALF_multiply`` reduce loops accumulate in float32 and round to float16 once
(numpy/_core/src/umath/loops.c.src), so a sum of 3000 ones is 3000 and a product of 1000
float16(1.001) is 2.654. numpy is the oracle, bit for bit; the rules per op are the table
"float16 accumulation" in docs/numpy.md. Scans, and sums along an axis numpy's iterator does not
run innermost, round every step: their rows are checked here and, shape by shape, in
tests/test_scans.py."""

import numpy as np
import pytest

import kiln

H = np.float16


def same_bits(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype == H
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))


def near_one(shape, seed):
    rng = np.random.default_rng(seed)
    return (1 + rng.standard_normal(shape) * 0.01).astype(H)


@kiln.compile
def prod_all(x):
    return np.prod(x)


@kiln.compile
def prod_rows(x):
    return np.prod(x, axis=-1)


@kiln.compile
def prod_reversed(x):
    return np.prod(x[::-1])


@kiln.compile
def prod_every_other(x):
    return np.prod(x[::2])


def test_product_of_a_thousand_halves_rounds_once():
    x = np.full(1000, 1.001, H)
    same_bits(prod_all(x), np.prod(x))  # 2.654; rounding each multiply gave 2.617


@pytest.mark.parametrize("n", [0, 1, 2, 7, 13, 127, 331])
def test_products_of_any_length(n):
    x = near_one(n, n)
    same_bits(prod_all(x), np.prod(x))
    same_bits(prod_reversed(x), np.prod(x[::-1]))
    same_bits(prod_every_other(x), np.prod(x[::2]))


def test_products_of_rows_and_of_a_whole_matrix():
    x = near_one((5, 97), 3)
    same_bits(prod_rows(x), np.prod(x, axis=-1))
    same_bits(prod_all(x), np.prod(x))


def test_a_partial_product_past_float16s_range_does_not_overflow():
    # 300 * 300 is past 65504, but numpy's float32 accumulator holds it: 300 * 300 / 300 = 300
    x = np.array([300, 300, 1 / 300], H)
    same_bits(prod_all(x), np.prod(x))
    assert np.isfinite(prod_all(x))


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf, -0.0, 0.0, 65504.0, 6e-8])
def test_products_with_special_values(special):
    x = near_one(11, 7)
    x[4] = special
    same_bits(prod_all(x), np.prod(x))
    same_bits(prod_all(x[:1] * 0 + special), np.prod(x[:1] * 0 + special))


@kiln.compile
def sum_all(x):
    return np.sum(x)


@pytest.mark.parametrize("n", [0, 1, 3000, 4099])
def test_contiguous_sums_round_once(n):
    x = np.ones(n, H)
    same_bits(sum_all(x), np.sum(x))  # 3000 ones are 3000: float32 accumulates them exactly
    y = (np.random.default_rng(n).standard_normal(n) * 100).astype(H)
    same_bits(sum_all(y), np.sum(y))


@kiln.compile
def mean_columns(x):
    return np.mean(x, axis=0)


@kiln.compile
def matmul(a, b):
    return a @ b


def test_means_accumulate_in_float32_along_any_axis():
    x = np.ones((3000, 2), H)  # numpy's mean sums in float32 even where its sum would round each step
    same_bits(mean_columns(x), np.mean(x, axis=0))
    y = (np.random.default_rng(5).standard_normal((257, 3)) * 50).astype(H)
    same_bits(mean_columns(y), np.mean(y, axis=0))


@pytest.mark.parametrize("n", [1, 3, 701])
def test_means_divide_the_float32_sum_not_a_rounded_one(n):
    x = (np.random.default_rng(n).standard_normal((n, 4)) * 20 + 300).astype(H)  # sums pass 65504
    same_bits(mean_columns(x), np.mean(x, axis=0))
    same_bits(mean_columns(x[::-1, ::2]), np.mean(x[::-1, ::2], axis=0))
    small = np.array([[3.771], [19.22], [-16.06]], H)  # its sum rounded to float16 first ends an ulp off
    same_bits(mean_columns(small), np.mean(small, axis=0))


@pytest.mark.parametrize("k", [1, 13, 3001])
def test_matrix_products_round_once(k):
    rng = np.random.default_rng(k)
    a, b = rng.standard_normal((3, k)).astype(H), rng.standard_normal((k, 5)).astype(H)
    same_bits(matmul(a, b), a @ b)
    ones = np.ones((1, k), H)
    same_bits(matmul(ones, ones.T), ones @ ones.T)  # 3000, where float16 steps stop at 2048


@kiln.compile
def add_at_indexed(y, v):
    y = y.copy()
    y[np.array([0, 0, 1])] += v
    return y


def test_an_augmented_assignment_writes_a_repeated_index_once():
    y, v = np.array([2048, 0, 5], H), np.array([1, 2, 3], H)
    expected = y.copy()
    expected[np.array([0, 0, 1])] += v
    same_bits(add_at_indexed(y, v), expected)


# -- ONNX pools: ONNX's reference averages each window with numpy (float32), rounding once --
def _pool_model(op, in_shape, out_shape, **attributes):
    onnx = pytest.importorskip("onnx")
    helper, f16 = onnx.helper, onnx.TensorProto.FLOAT16
    node = helper.make_node(op, ["x"], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", f16, in_shape)],
        [helper.make_tensor_value_info("y", f16, out_shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _against_reference(model, x):
    from onnx.reference import ReferenceEvaluator

    same_bits(kiln.onnx.load(model)(x)[0], ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_a_sixteen_by_sixteen_average_pool_rounds_once():
    x = (np.random.default_rng(1).standard_normal((1, 2, 20, 20)) * 10 + 100).astype(H)
    _against_reference(_pool_model("AveragePool", [1, 2, 20, 20], [1, 2, 5, 5], kernel_shape=[16, 16]), x)


@pytest.mark.parametrize("include_pad", [0, 1])
def test_padded_strided_average_pools(include_pad):
    x = (np.random.default_rng(2).standard_normal((1, 1, 7, 11)) * 3).astype(H)
    x[0, 0, 3, 4], x[0, 0, 6, 10] = -0.0, 60000  # a window of 60000s averages to 60000, its sum would be inf
    x[0, 0, 5:, 9:] = 60000
    model = _pool_model(
        "AveragePool",
        [1, 1, 7, 11],
        [1, 1, 4, 6],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        count_include_pad=include_pad,
    )
    _against_reference(model, x)


@pytest.mark.parametrize("special", [np.nan, np.inf, 1.0])
def test_global_average_pools_do_not_overflow(special):
    x = (np.random.default_rng(3).standard_normal((1, 3, 40, 40)) + 100).astype(H)  # sums past 65504
    x[0, 1, 7, 5] = special
    _against_reference(_pool_model("GlobalAveragePool", [1, 3, 40, 40], [1, 3, 1, 1]), x)


@kiln.compile
def var_rows(x):
    return np.var(x, axis=-1), np.std(x, axis=-1)


@pytest.mark.parametrize("scale, offset", [(3.0, 0.0), (20.0, 300.0)])
def test_variances_take_numpys_float16_mean(scale, offset):
    # numpy's _var, unlike _mean, sums float16 to a float16 mean: past 65504 it is inf there too
    x = (np.random.default_rng(9).standard_normal((4, 331)) * scale + offset).astype(H)
    for got, expected in zip(var_rows(x), (np.var(x, axis=-1), np.std(x, axis=-1))):
        same_bits(got, expected)


# -- ufunc.at: numpy applies each update in index order, rounding in the array's dtype ----------
AT_UFUNCS = (np.add, np.subtract, np.multiply, np.maximum, np.minimum)
AT_DTYPES = (np.float16, np.float32, np.float64, np.int8, np.uint8, np.int64, np.bool_)


def _numpy_at(ufunc, y, index, v):
    y = y.copy()
    with np.errstate(all="ignore"):
        ufunc.at(y, index, v)
    return y


def _kiln_at(ufunc, index):
    def update(y, v):
        y = y.copy()
        ufunc.at(y, index, v)
        return y

    return kiln.compile(update)


def test_updates_apply_in_order_not_combined_first():
    y, v = np.array([1e16]), np.array([1, 1, -1e16])
    np.testing.assert_array_equal(_kiln_at(np.add, [0, 0, 0])(y, v), _numpy_at(np.add, y, [0, 0, 0], v))  # 0, not 2
    y16, v16 = np.array([2048, 5], H), np.array([1, 1, 1, 2], H)
    same_bits(_kiln_at(np.add, [0, 0, 0, -1])(y16, v16), _numpy_at(np.add, y16, [0, 0, 0, -1], v16))  # 2048


# numpy's subtract refuses booleans
AT_CASES = [(u, d) for u in AT_UFUNCS for d in AT_DTYPES if not (u is np.subtract and d == np.bool_)]


@pytest.mark.parametrize("ufunc, dtype", AT_CASES, ids=lambda c: getattr(c, "__name__", None) or np.dtype(c).name)
def test_repeated_indices_in_every_dtype(ufunc, dtype):
    rng = np.random.default_rng(11)
    index = [3, 0, 3, 3, -2, 0, 4, 3]
    if np.dtype(dtype).kind == "f":
        y, v = (rng.standard_normal(5) * 100).astype(dtype), (rng.standard_normal(8) * 100).astype(dtype)
        y[1], v[2], v[5] = -0.0, np.finfo(dtype).max, np.nan
    elif dtype == np.bool_:
        y, v = rng.integers(0, 2, 5).astype(bool), rng.integers(0, 2, 8).astype(bool)
    else:
        info = np.iinfo(dtype)
        y, v = rng.integers(info.min, info.max, 5, dtype=dtype, endpoint=True), rng.integers(-3, 90, 8).astype(dtype)
        y[0] = info.max
    got, expected = _kiln_at(ufunc, index)(y, v), _numpy_at(ufunc, y, index, v)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_repeated_rows_and_columns_of_a_matrix():
    rng = np.random.default_rng(12)
    y = (rng.standard_normal((3, 4)) * 1000).astype(H)
    rows, cols = np.array([2, 0, 2, 2]), np.array([1, 1, 1, -1])
    v = rng.standard_normal((4, 4)).astype(H)

    def by_rows(a, b):
        a = a.copy()
        np.add.at(a, rows, b)
        return a

    def by_points(a, b):
        a = a.copy()
        np.add.at(a, (rows, cols), b[0])
        return a

    same_bits(kiln.compile(by_rows)(y, v), _numpy_at(np.add, y, rows, v))
    same_bits(kiln.compile(by_points)(y, v), _numpy_at(np.add, y, (rows, cols), v[0]))


@pytest.mark.parametrize("indices", [False, True])
def test_float16_max_pools_are_exact(indices):
    x = np.random.default_rng(4).standard_normal((1, 2, 20, 20)).astype(H)
    x[0, 0, 3, 3], x[0, 1, 0, 0], x[0, 1, 19, 19] = -np.inf, -0.0, 65504  # (the reference skips NaNs)
    model = _pool_model("MaxPool", [1, 2, 20, 20], [1, 2, 5, 5], kernel_shape=[16, 16])
    if indices:
        onnx = pytest.importorskip("onnx")
        model.graph.node[0].output.append("i")
        model.graph.output.append(onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [1, 2, 5, 5]))
    from onnx.reference import ReferenceEvaluator

    got, expected = kiln.onnx.load(model)(x), ReferenceEvaluator(model).run(None, {"x": x})
    same_bits(got[0], expected[0])
    if indices:  # each index names an element holding the maximum
        same_bits(x.reshape(-1)[got[1]], expected[0])


# -- LpPool and Resize: the spec's formula in float32, one rounding at the end --
def within_one_ulp(got, exact):
    """`got` (float16) is `exact` (float64) rounded, or its neighbour: a float32 sum in
    another order can fall on the other side of a float16 rounding boundary."""
    got = np.asarray(got)
    assert got.dtype == H
    with np.errstate(over="ignore"):  # a result past 65504 rounds to inf, as it should
        nearest = exact.astype(H)
    ulps = np.abs(got.view(np.int16).astype(np.int32) - nearest.view(np.int16).astype(np.int32))
    assert ulps.max() <= 1, f"{ulps.max()} ulps from the exact result"
    assert np.mean(ulps == 0) > 0.95  # rounded once: nearly all bits equal, not just close


def _lp_windows(x, k, p):
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (k, k), axis=(2, 3))[:, :, ::k, ::k]
    return (np.abs(windows) ** p).sum(axis=(-1, -2)) ** (1 / p)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_a_sixteen_by_sixteen_lp_pool_rounds_once(p):
    x = (np.random.default_rng(5).standard_normal((1, 2, 32, 32)) * 4).astype(H)
    x[0, 0, 0, :4] = [-0.0, 60000, -60000, 1e-7]  # powers past 65504 and below float16's subnormals
    model = _pool_model("LpPool", [1, 2, 32, 32], [1, 2, 2, 2], kernel_shape=[16, 16], strides=[16, 16], p=p)
    within_one_ulp(kiln.onnx.load(model)(x)[0], _lp_windows(x, 16, p))


def test_a_global_lp_pool_whose_squares_pass_float16s_range_is_finite():
    x = np.full((1, 2, 9, 9), 300, H)  # 300**2 is inf in float16, the 2-norm 2700 is not
    x[0, 1] = np.random.default_rng(6).standard_normal((9, 9)).astype(H)
    model = _pool_model("GlobalLpPool", [1, 2, 9, 9], [1, 2, 1, 1], p=2)
    exact = np.sqrt((x.astype(np.float64) ** 2).sum(axis=(2, 3), keepdims=True))
    within_one_ulp(kiln.onnx.load(model)(x)[0], exact)


def _resize_model(mode, in_shape, out_shape):
    onnx = pytest.importorskip("onnx")
    helper, f16 = onnx.helper, onnx.TensorProto.FLOAT16
    sizes = helper.make_tensor("sizes", onnx.TensorProto.INT64, [len(out_shape)], out_shape)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode)
    graph = helper.make_graph(
        [node],
        "resize",
        [helper.make_tensor_value_info("x", f16, in_shape)],
        [helper.make_tensor_value_info("y", f16, out_shape)],
        initializer=[sizes],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_a_two_axis_resize_rounds_once_not_after_each_axis(mode):
    from onnx.reference import ReferenceEvaluator

    x = (np.random.default_rng(7).standard_normal((1, 1, 13, 17)) * 50).astype(H)
    model = _resize_model(mode, [1, 1, 13, 17], [1, 1, 29, 31])
    # The reference weighs in float64 and casts once at the end: the exact result, rounded.
    reference = ReferenceEvaluator(model).run(None, {"x": x})[0]
    within_one_ulp(kiln.onnx.load(model)(x)[0], reference.astype(np.float64))


def test_scans_and_strided_sums_round_every_step():
    # numpy's float16 accumulate and its sum along a kept inner axis add in float16, one step at a time
    ones = np.ones((3000, 2), H)
    same_bits(kiln.compile(lambda x: np.cumsum(x, axis=0))(ones), np.cumsum(ones, axis=0))  # ends at 2048
    same_bits(kiln.compile(lambda x: x.sum(0))(ones), ones.sum(0))  # 2048
    same_bits(kiln.compile(lambda x: x.mean(0))(ones), ones.mean(0))  # a mean sums in float32: 1
    same_bits(kiln.compile(lambda x: x.sum(0))(ones[:, :1].copy()), ones[:, :1].sum(0))  # (3000, 1): 3000
