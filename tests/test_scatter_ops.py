"""Scatters that store: item assignment by traced index arrays (x[idx] = v, x[:, idx] = v,
x[i, j] = v, np.put, np.put_along_axis), ONNX ScatterND and ScatterElements with every
reduction, and the gathers of several index arrays (one kiln.gather through a linearized
index). Oracles: numpy bit for bit (the last of repeated indices wins, in C order), ONNX's
reference implementation, float64 central differences for gradients, mlir-opt for the
printed stages."""

import re
import shutil

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx_models import one_node_model
from test_indexed_access import DTYPES, assert_same, central_differences, values
from test_mlir_opt import MLIR_OPT, STAGE_FORMS, mlir_opt

import kiln
import kiln.onnx
from kiln.dialects import tensor_indexed as TI
from kiln.dialects.diagnostics import ShapeError, VerificationError
from kiln.dialects.types import TensorType, f32, i64
from kiln.errors import OutOfBoundsError

rng = np.random.default_rng(11)
REPEATED = np.array([3, -1, 0, 3, 5, -6, 3])  # 3 three times, 5 and -1 the same row of six


def _assigning(key):
    """fn(x, i, v): a copy of x with x[key(i)] = v, as numpy writes it."""

    def fn(x, i, v):
        x = x.copy()
        x[key(i)] = v
        return x

    return fn


ASSIGNMENTS = {  # name: (key, x's shape, v's shape for REPEATED)
    "x[i]": (lambda i: i, (6, 3), (7, 3)),
    "x[:, i]": (lambda i: (slice(None), i), (2, 6), (2, 7)),
    "x[i, 1]": (lambda i: (i, 1), (6, 3), (7,)),
    "x[i, i]": (lambda i: (i, i), (6, 6), (7,)),
    "x[i, :, i]": (lambda i: (i, slice(None), i), (6, 2, 6), (7, 2)),  # not adjacent: B first
    "x[::-1][i]": (lambda i: (slice(None, None, -1),), (6, 3), None),  # see test_views
    "x[i[:, None], i[None, :2]]": (lambda i: (i[:, None], i[None, :2]), (6, 6), (7, 2)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", [n for n, (_, _, v) in ASSIGNMENTS.items() if v is not None])
def test_assignment_by_traced_indices_matches_numpy_bit_for_bit(name, dtype):
    key, x_shape, v_shape = ASSIGNMENTS[name]
    x, v = values(x_shape, dtype), values(v_shape, dtype)  # NaN, -0.0 and inf among the floats
    want = x.copy()
    want[key(REPEATED)] = v
    assert_same(kiln.compile(_assigning(key))(x, REPEATED, v), want)


def test_the_last_of_repeated_indices_wins_and_broadcast_values_are_stored():
    x = np.zeros(4, np.float32)
    i = np.array([1, 1, 1, -3, 2])
    v = np.array([1.0, 2.0, 3.0, -0.0, np.nan], np.float32)
    want = x.copy()
    want[i] = v
    assert_same(kiln.compile(_assigning(lambda i: i))(x, i, v), want)
    assert want[1] == 0.0 and np.signbit(want[1])  # -0.0, the last write
    want = np.zeros((4, 3), np.float16)
    want[i] = np.float16(7)
    assert_same(kiln.compile(_assigning(lambda i: i))(np.zeros((4, 3), np.float16), i, np.float16(7)), want)


def test_values_are_cast_to_the_array_dtype_as_numpy_assigns():
    x = np.zeros(5, np.int8)
    i = np.array([4, 0, 4])
    v = np.array([300, -129, 7], np.int64)
    want = x.copy()
    with np.errstate(all="ignore"):
        want[i] = v
    assert_same(kiln.compile(_assigning(lambda i: i))(x, i, v), want)


def test_narrow_integer_indices():
    x, v = values((6, 3), np.float32), values((7, 3), np.float32)
    for dtype in (np.int8, np.uint8, np.int16, np.int32, np.uint64):
        i = (REPEATED % 6).astype(dtype)
        want = x.copy()
        want[i] = v
        assert_same(kiln.compile(_assigning(lambda i: i))(x, i, v), want)


def test_sizes_zero_and_one():
    fn = kiln.compile(_assigning(lambda i: i))
    x = values((5, 2), np.float64)
    assert_same(fn(x, np.zeros(0, np.int64), np.zeros((0, 2))), x)
    one = values((1, 2), np.float64)
    assert_same(fn(one, np.array([0, -1, 0]), np.arange(6.0).reshape(3, 2)), np.array([[4.0, 5.0]]))
    empty_rows = np.zeros((3, 0), np.float32)
    assert_same(fn(empty_rows, np.array([2, 0]), np.zeros((2, 0), np.float32)), empty_rows)


@pytest.mark.parametrize("bad, axis, size", [(6, 0, 6), (-7, 0, 6), (2**40, 0, 6)])
def test_an_index_out_of_range_is_an_out_of_bounds_error_naming_axis_size_and_line(bad, axis, size):
    fn = kiln.compile(_assigning(lambda i: i))
    with pytest.raises(OutOfBoundsError, match=f"axis {axis} with size {size}") as raised:
        fn(np.zeros((6, 3)), np.array([0, bad]), np.ones((2, 3)))
    assert "test_scatter_ops.py" in str(raised.value)
    g = kiln.compile(_assigning(lambda i: (slice(None), i)))
    with pytest.raises(OutOfBoundsError, match="axis 1 with size 4"):
        g(np.zeros((2, 4)), np.array([4]), np.ones((2, 1)))


def test_views_non_contiguous_and_reversed():
    def through_view(x, i, v):
        x = x.copy()
        r = x[::-1, ::2]  # a view: writing it writes x
        r[i] = v
        return x

    x, i, v = values((6, 5), np.float32), np.array([0, -1, 2, 0]), values((4, 3), np.float32)
    want = x.copy()
    want[::-1, ::2][i] = v
    assert_same(kiln.compile(through_view)(x, i, v), want)
    # a non-contiguous, reversed argument
    base = values((12, 4), np.float32)
    arg = base[::-2]
    want = arg.copy()
    want[REPEATED] = 2
    assert_same(kiln.compile(_assigning(lambda i: i))(arg, REPEATED, np.full((7, 4), 2, np.float32)), want)


def test_masks_traced_and_constant():
    def masked(x, m, v):
        x = x.copy()
        x[m] = v
        return x

    x = values((4, 5), np.float64)
    m = rng.random((4, 5)) < 0.5
    want = x.copy()
    want[m] = -0.0
    assert_same(kiln.compile(masked)(x, m, -0.0), want)
    rows = np.array([True, False, True, True])
    want = x.copy()
    want[rows] = np.arange(5.0)
    assert_same(kiln.compile(masked)(x, rows, np.arange(5.0)), want)


def test_put_and_put_along_axis():
    def put(a, i, v):
        a = a.copy()
        np.put(a, i, v)
        return a

    a, v = values((3, 4), np.int16), values((5,), np.int16)
    i = np.array([11, 0, -1, 11, 5])
    want = a.copy()
    np.put(want, i, v)
    assert_same(kiln.compile(put)(a, i, v), want)

    def along(a, i, v):
        a = a.copy()
        np.put_along_axis(a, i, v, axis=1)
        return a

    a, i, v = values((3, 6), np.float32), np.array([[0, 0, 5], [2, -1, 1], [1, 1, 1]]), values((3, 3), np.float32)
    want = a.copy()
    np.put_along_axis(want, i, v, axis=1)
    assert_same(kiln.compile(along)(a, i, v), want)


# -- the IR: one scatter, no loop over the indexed axis --------------------------------------------
def test_assignment_is_one_store_scatter_with_no_loop_over_the_indexed_axis():
    lowered = kiln.compile(_assigning(lambda i: i)).lower(kiln.f32[100000, 64], kiln.i64[1000], kiln.f32[1000, 64])
    tensor = lowered.text("tensor")
    assert tensor.count("kiln.scatter_at") == 1 and 'kind = "store"' in tensor
    assert "kiln.transpose" not in lowered.text("optimized")  # stored along axis 0, not moved last
    assert not [line for line in tensor.splitlines() if "kiln.select" in line and "100000" in line]  # no select over x
    affine = lowered.text("affine")
    nests = re.split(r"\n    affine\.for ", affine)
    stores = [n for n in nests if "memref.store" in n]
    assert len(stores) == 1
    assert not re.search(r"= 0 to 100000 ", stores[0]), stores[0]
    assert "memref.load" not in stores[0]  # a store reads nothing back


def test_several_index_arrays_gather_once_through_a_linearized_index():
    lowered = kiln.compile(lambda x, i, j: x[i, :, j]).lower(kiln.f32[50, 3, 40], kiln.i64[7, 1], kiln.i64[5])
    tensor = lowered.text("tensor")
    assert tensor.count("kiln.gather") == 1
    nests = [n for n in re.split(r"\n    affine\.for ", lowered.text("affine")) if "memref.load" in n]
    assert len(nests) == 1 and not re.search(r"= 0 to (50|40|2000) ", nests[0]), nests[0]
    x, i, j = values((50, 3, 40), np.float32), rng.integers(-50, 50, (7, 1)), rng.integers(-40, 40, 5)
    assert_same(kiln.compile(lambda x, i, j: x[i, :, j])(x, i, j), x[i, :, j])


def test_the_store_kind_in_the_dialect():
    dest, index = TensorType((3, 4), f32), TensorType((5,), i64)
    source = TensorType((5, 4), f32)
    from kiln.dialects.ir import Block

    block = Block([dest, index, source])
    op = TI.ScatterAtOp(list(block.args), {"kind": "store", "axis": 0})
    op.verify()
    got = op.evaluate(np.zeros((3, 4), np.float32), np.array([1, 2, 1, 0, 1]), np.arange(20.0).reshape(5, 4))
    want = np.zeros((3, 4), np.float32)
    want[[1, 2, 1, 0, 1]] = np.arange(20.0).reshape(5, 4)
    assert_same(got, want)
    with pytest.raises((VerificationError, ShapeError), match="source"):
        TI.ScatterAtOp(list(block.args), {"kind": "store"}).verify()  # the last axis: (3, 5) wanted
    with pytest.raises(VerificationError, match="kind must be one of"):
        TI.ScatterAtOp(list(block.args), {"kind": "replace", "axis": 0}).verify()


# -- gradients -------------------------------------------------------------------------------------
WEIGHTS = rng.standard_normal(128)


@pytest.mark.parametrize("name", ["x[i]", "x[:, i]", "x[i, i]", "x[i, :, i]"])
def test_assignment_gradients_match_central_differences(name):
    key, x_shape, v_shape = ASSIGNMENTS[name]

    def loss(x, v, i):
        y = x * 1.0
        y[key(i)] = np.sin(v)
        return np.sum(y.reshape(-1) * WEIGHTS[: y.size])

    x, v = rng.standard_normal(x_shape), rng.standard_normal(v_shape)
    got = kiln.compile(kiln.grad(loss, argnums=(0, 1)))(x, v, REPEATED)
    for k in (0, 1):
        want = central_differences(lambda x, v: loss(x, v, REPEATED), [x, v], k)
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-8)
    overwritten = np.take(got[1], [0, 1, 2, 3], axis=1 if name == "x[:, i]" else 0)
    assert np.all(overwritten == 0)  # updates 0..3 are overwritten by later ones: no gradient


# -- CUDA C ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_cuda_emulation_stores_in_index_order(order, monkeypatch):
    monkeypatch.setenv("KILN_EMULATE_ORDER", order)  # threads and blocks run backwards: a race shows
    for name in ("x[i]", "x[:, i]", "x[i, i]"):
        key, x_shape, v_shape = ASSIGNMENTS[name]
        x, v = values(x_shape, np.float32), values(v_shape, np.float32)
        want = x.copy()
        want[key(REPEATED)] = v
        assert_same(kiln.compile(_assigning(key), target="cuda-emulate")(x, REPEATED, v), want)

    def add_at(y, i, v):  # order matters: 1e8 + 4 + 4 rounds differently from 4 + 4 + 1e8
        y = y.copy()
        np.add.at(y, (slice(None), i), v)
        return y

    y = np.array([[1e8, 0.0]] * 3, np.float32)
    i, v = np.array([0, 0, 1, 0]), np.array([[4.0, 4.0, 1.0, -1e8]] * 3, np.float32)
    want = y.copy()
    np.add.at(want, (slice(None), i), v)
    assert_same(kiln.compile(add_at, target="cuda-emulate")(y, i, v), want)


def test_cuda_scatter_loops_over_the_index_stay_in_one_thread():
    cuda = kiln.compile(_assigning(lambda i: (slice(None), i)), target="cuda-emulate")
    text = cuda.lower(kiln.f32[64, 10], kiln.i64[7], kiln.f32[64, 7]).text("cuda")
    kernel = next(k for k in text.split("__global__ void ")[1:] if "v2[" in k and "for (long long v" in k)
    assert "t < 64LL" in kernel  # the rows spread over threads; each runs its 7 stores in order


@pytest.mark.parametrize("target", ["interpret", "cpu", "cuda-emulate"])
def test_several_adjacent_and_separated_index_arrays_on_every_target(target):
    def fn(x, i, j, v):
        x = x.copy()
        x[i, :, j] = v  # separated: the broadcast axis first
        x[:, i, j[:2, None]] = 5  # adjacent: stored through their flat index
        return x

    x, v = values((6, 6, 6), np.float64), values((4, 6), np.float64)
    i, j = np.array([1, -1, 1, 3]), np.array([0, 2, 0, -3])
    assert_same(kiln.compile(fn, target=target)(x, i, j, v), fn(x.copy(), i, j, v))


@pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="nvcc not found (install the CUDA toolkit to check the CUDA C)"
)
def test_nvcc_accepts_the_cuda_c_of_store_scatters(tmp_path):
    from kiln.codegen import nvcc
    from kiln.runtime.cache import DiskCache

    lowered = kiln.compile(_assigning(lambda i: (i, i)), target="cuda-emulate").lower(
        kiln.f16[6, 6], kiln.i64[7], kiln.f16[7]
    )
    nvcc.build(lowered.text("cuda"), emulate=False, cache=DiskCache(str(tmp_path)))


# -- mlir-opt --------------------------------------------------------------------------------------
@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
@pytest.mark.parametrize(
    "fn, args",
    [
        (_assigning(lambda i: i), (kiln.f32[6, 3], kiln.i64[7], kiln.f32[7, 3])),
        (_assigning(lambda i: (i, slice(None), i)), (kiln.i8[6, 2, 6], kiln.i32[7], kiln.i8[7, 2])),
        (_assigning(lambda i: (slice(None), i)), (kiln.f16[2, 6], kiln.i64[7], kiln.f16[2, 7])),
        (_assigning(lambda i: (slice(None), i, i)), (kiln.f32[2, 6, 6], kiln.i64[7], kiln.f32[2, 7])),  # axes = 2
    ],
)
def test_every_stage_of_a_store_scatter_is_accepted_by_mlir_opt(fn, args):
    lowered = kiln.compile(fn).lower(*args)
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
def test_a_store_scatters_gradient_is_accepted_by_mlir_opt():
    def loss(x, v, i):
        y = x * 1.0
        y[i] = v
        return np.sum(y * y)

    lowered = kiln.compile(kiln.grad(loss, argnums=(0, 1))).lower(kiln.f64[6, 3], kiln.f64[7, 3], kiln.i64[7])
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)


# -- ONNX ScatterND, ScatterElements, GatherND, GatherElements ------------------------------------
def _onnx_check(node, inputs, opset=18):
    model = one_node_model(node, inputs, None, opset)
    got = kiln.onnx.load(model)(*inputs.values())
    want = ReferenceEvaluator(model).run(None, inputs)
    for g, w in zip(got, want):
        assert_same(g, w)


REDUCTIONS = ["none", "add", "mul", "max", "min"]
ONNX_DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64]


def _onnx_values(shape, dtype, reduction):
    v = values(shape, dtype)
    if np.dtype(dtype).kind == "f" and reduction in ("max", "min"):
        # the reference's max and min are Python's (NaN loses to whichever comes first), not IEEE's
        v[~np.isfinite(v)] = 1.5
    if np.dtype(dtype).kind in "iu":
        v = (v % 5).astype(dtype)  # products that stay in range of the reference's int arithmetic
    return v


@pytest.mark.parametrize("dtype", ONNX_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_onnx_scatter_elements_matches_the_reference(reduction, dtype):
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)
    i = np.array([[1, 1, -3, 0], [3, 2, 2, 2], [0, 0, 0, 0]], np.int64)
    inputs = {"x": _onnx_values((3, 4), dtype, reduction), "i": i, "u": _onnx_values((3, 4), dtype, reduction)}
    _onnx_check(node, inputs)


@pytest.mark.parametrize("dtype", ONNX_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_onnx_scatter_nd_matches_the_reference(reduction, dtype):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    i = np.array([[[1, 0], [-4, 2]], [[1, 0], [3, -1]], [[1, 0], [0, 0]]], np.int64)  # (1, 0) three times
    inputs = {"x": _onnx_values((4, 3, 2), dtype, reduction), "i": i, "u": _onnx_values((3, 2, 2), dtype, reduction)}
    _onnx_check(node, inputs)
    rows = np.array([[2], [2], [-1]], np.int64)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    inputs = {"x": _onnx_values((4, 3), dtype, reduction), "i": rows, "u": _onnx_values((3, 3), dtype, reduction)}
    _onnx_check(node, inputs)


def test_onnx_scatters_out_of_range_raise_and_size_zero_and_one():
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)
    model = one_node_model(
        node, {"x": np.zeros((3, 2), np.float32), "i": np.zeros((1, 2), np.int64), "u": np.zeros((1, 2), np.float32)}
    )
    run = kiln.onnx.load(model)
    with pytest.raises(OutOfBoundsError, match="size 3"):
        run(np.zeros((3, 2), np.float32), np.array([[0, 3]]), np.ones((1, 2), np.float32))
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    _onnx_check(node, {"x": values((1, 2), np.float32), "i": np.array([[0], [-1]]), "u": values((2, 2), np.float32)})
    _onnx_check(
        node, {"x": values((3, 2), np.float32), "i": np.zeros((0, 1), np.int64), "u": np.zeros((0, 2), np.float32)}
    )


def test_onnx_gathers_match_the_reference_and_gather_once():
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    inputs = {"x": values((3, 5), np.float32), "i": np.array([[4, -1, 0], [2, 2, 2], [0, 1, -5]], np.int64)}
    _onnx_check(node, inputs)
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    inputs = {"x": values((4, 3, 2), np.float16), "i": np.array([[1, 0], [-4, 2], [1, 0]], np.int64)}
    _onnx_check(node, inputs)
    model = one_node_model(node, inputs)
    text = kiln.onnx.load(model).lower(kiln.f16[4, 3, 2], kiln.i64[3, 2]).text("tensor")
    assert text.count("kiln.gather") == 1
