"""Loads and stores through computed indices: gathers (x[idx], x[:, idx], np.take,
np.take_along_axis) are one loop over the output reading through the index, and ufunc.at
applies its updates one by one in numpy's order (kiln.gather, kiln.scatter_at,
memref.load / memref.store). Oracles: numpy bit for bit, float64 central differences for
gradients, mlir-opt for the printed stages."""

import re

import numpy as np
import pytest
from test_mlir_opt import MLIR_OPT, STAGE_FORMS, mlir_opt

import kiln
from kiln.dialects import parse_ir, print_ir, verify
from kiln.dialects.diagnostics import VerificationError
from kiln.errors import OutOfBoundsError
from kiln.interpreters.affine_interpreter import run_affine

rng = np.random.default_rng(7)
DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.bool_]


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)  # bits: NaN payloads and -0.0 included


def values(shape, dtype):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(shape).astype(dtype)
        flat = x.reshape(-1)
        flat[: min(3, flat.size)] = np.array([np.nan, -0.0, np.inf], dtype)[: min(3, flat.size)]
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


# -- the loop IR ---------------------------------------------------------------------------------
INDEXED_IR = """func.func @f(%a: memref<4x8xf32>, %ix: memref<3xi64>, %out: memref<3x8xf32>) {
  affine.for %i = 0 to 3 {
    affine.for %j = 0 to 8 {
      %0 = affine.load %ix[%i] : memref<3xi64>
      %1 = arith.index_cast %0 : i64 to index
      %2 = affine.apply affine_map<(d0) -> (d0)>(%j)
      %3 = memref.load %a[%1, %2] : memref<4x8xf32>
      affine.store %3, %out[%i, %j] : memref<3x8xf32>
      memref.store %3, %a[%1, %2] : memref<4x8xf32>
    }
  }
  func.return
}"""


def test_indexed_loads_and_stores_print_parse_and_verify():
    module = parse_ir(INDEXED_IR)
    verify(module)
    text = print_ir(module)
    assert print_ir(parse_ir(text)) == text
    for line in ("memref.load %a[%1, %2] : memref<4x8xf32>", "memref.store %3, %a[%1, %2]", "arith.index_cast %0"):
        assert line in text


@pytest.mark.parametrize(
    "bad, message",
    [
        ("%3 = memref.load %a[%1] : memref<4x8xf32>", "takes 2 indices"),
        ("%3 = memref.load %a[%0, %2] : memref<4x8xf32>", "must be of type index"),
        ("%1 = arith.index_cast %0 : i64 to index\n      %9 = arith.index_cast %0 : i64 to i32", "converts between"),
    ],
)
def test_the_verifier_refuses_malformed_indexed_accesses(bad, message):
    pattern = {"memref.load": r"%3 = memref\.load .*", "arith.index_cast": r"%1 = arith\.index_cast .*"}
    key = "memref.load" if "memref.load" in bad else "arith.index_cast"
    text = re.sub(pattern[key], lambda m: bad, INDEXED_IR, count=1)
    with pytest.raises(VerificationError, match=message):
        verify(parse_ir(text))


# -- gathers -------------------------------------------------------------------------------------
GATHERS = {
    "x[i]": lambda x, i: x[i],
    "x[:, i]": lambda x, i: x[:, i],
    "take": lambda x, i: np.take(x, i, axis=1),
    "take flat": lambda x, i: np.take(x, i),
    "x[i, i]": lambda x, i: x[i, i],
    "x[i, ::-1]": lambda x, i: x[i, ::-1],
    "x.T[i]": lambda x, i: x.T[i],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", list(GATHERS))
def test_gathers_match_numpy_bit_for_bit(name, dtype):
    fn = GATHERS[name]
    x = values((5, 5), dtype)
    i = np.array([4, -1, 0, 0, 2, -5, 4])  # repeated and negative
    assert_same(kiln.compile(fn)(x, i), fn(x, i))


@pytest.mark.parametrize("shape, index", [((1, 3), [0, 0, -1]), ((4, 1), [[3], [-4]]), ((3, 2), [])])
def test_gathers_with_one_or_no_elements(shape, index):
    x = values(shape, np.float32)
    i = np.array(index, np.int64)
    for fn in (GATHERS["x[i]"], lambda x, i: np.take(x, i, axis=0)):
        assert_same(kiln.compile(fn)(x, i), fn(x, i))


def test_take_along_axis_matches_numpy():
    def fn(a, i, j):
        return np.take_along_axis(a, i, axis=1), np.take_along_axis(a, j, axis=0), np.take_along_axis(a, i[:1], 1)

    for dtype in (np.float16, np.float64, np.int8, np.bool_):
        a = values((4, 6), dtype)
        i, j = rng.integers(-6, 6, (4, 3)), rng.integers(-4, 4, (2, 6))
        for got, want in zip(kiln.compile(fn)(a, i, j), fn(a, i, j)):
            assert_same(got, want)


def test_narrow_integer_indices_gather_as_numpy():
    x = values((7, 3), np.float32)
    for dtype in (np.int8, np.uint8, np.int16, np.int32, np.uint32):
        i = np.array([6, 1, 0, 6], dtype)
        assert_same(kiln.compile(lambda x, i: x[i])(x, i), x[i])


@pytest.mark.parametrize("bad", [5, -6, 99])
def test_an_index_out_of_range_is_an_out_of_bounds_error_naming_axis_and_size(bad):
    f = kiln.compile(lambda x, i: x[:, i])
    with pytest.raises(OutOfBoundsError, match="axis 1 with size 5"):
        f(np.ones((2, 5), np.float32), np.array([0, bad]))
    g = kiln.compile(lambda x, i: np.take_along_axis(x, i, axis=1))
    with pytest.raises(OutOfBoundsError, match="axis 1 with size 5"):
        g(np.ones((2, 5), np.float32), np.array([[0], [bad]]))


def test_the_gather_loop_nest_has_no_loop_over_the_indexed_axis():
    lowered = kiln.compile(lambda t, ids: t[ids]).lower(kiln.f32[5000, 64], kiln.i64[2048])
    affine = lowered.text("affine")
    nests = re.split(r"\n    affine\.for ", affine)
    gathers = [n for n in nests if "memref.load" in n]
    assert len(gathers) == 1
    assert not re.search(r"= 0 to 5000 ", gathers[0]), gathers[0]
    # 2048 rows of 64: a few microseconds, less than waking the thread pool costs; 65536 rows pay
    assert "affine.parallel" not in lowered.text("scheduled")
    big = kiln.compile(lambda t, ids: t[ids]).lower(kiln.f32[5000, 64], kiln.i64[65536])
    assert "affine.parallel" in big.text("scheduled")


@pytest.mark.parametrize("row", [1, 2, 37, 64, 67])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.float16, np.bool_])
def test_a_gathered_row_is_read_as_vectors_and_keeps_numpys_bits(row, dtype):
    """Along a gathered row the positions are consecutive, so the default schedule reads the row
    as vector.load (MLIR's load of consecutive elements at computed indices), with a scalar
    remainder; the bits stay numpy's (NaN, -0.0, inf in the table), negative indices included."""
    table = values((41, row), dtype)
    ids = rng.integers(-41, 41, 23)
    f = kiln.compile(lambda t, i: t[i])
    assert_same(f(table, ids), table[ids])
    assert_same(f(table[::-1], ids), table[::-1][ids])  # a reversed view: copied in first
    assert_same(kiln.compile(lambda t, i: t[i], target="interpret")(table, ids), table[ids])
    scheduled = f.lower(table, ids).text("scheduled")
    assert ("vector.load" in scheduled) == (row >= 8), scheduled


def test_a_vectorized_gather_runs_in_the_affine_interpreter_and_verifies():
    lowered = kiln.compile(lambda t, i: t[i] * 2).lower(kiln.f32[30, 19], kiln.i64[11])
    scheduled = lowered.text("scheduled")
    assert "vector.load" in scheduled
    table, ids = values((30, 19), np.float32), rng.integers(-30, 30, 11)
    (out,) = run_affine(parse_ir(scheduled), [table, ids])
    assert_same(out, table[ids] * 2)
    if MLIR_OPT is not None:
        mlir_opt(scheduled)


def test_a_computed_index_that_does_not_move_along_a_row_is_not_vectorized():
    """t[i, j] with both traced: the element read moves through the index, not along the row;
    vectorizing must not treat the index as consecutive."""
    t = values((13, 17), np.float32)
    i, j = rng.integers(0, 13, 40), rng.integers(0, 17, 40)
    f = kiln.compile(lambda t, i, j: t[i, j])
    assert_same(f(t, i, j), t[i, j])
    assert "vector.load" not in f.lower(t, i, j).text("scheduled")


@pytest.mark.parametrize("size", [65536, 70001])
def test_checked_indices_in_a_loop_long_enough_for_the_thread_pool(size):
    """A gather or scatter long enough that its loop runs on the thread pool: the bounds check
    then sits in the parallel loop's body, a function of its own, and still raises (this
    crashed the code generator at 65536 indices)."""
    table = values((9, 3), np.float32)
    ids = rng.integers(-9, 9, size)
    assert_same(kiln.compile(lambda t, i: t[i])(table, ids), table[ids])
    assert_same(
        kiln.compile(lambda t, i: np.take(t[:, 0], i, mode="clip"))(table, ids), np.take(table[:, 0], ids, mode="clip")
    )
    counts = kiln.compile(lambda i: np.bincount(i, minlength=9))(ids % 9)
    assert_same(counts, np.bincount(ids % 9, minlength=9))
    y = np.zeros(9, np.float64)
    assert_same(kiln.compile(_at(np.add))(y, ids, np.ones(size)), _at(np.add)(y, ids, np.ones(size)))
    bad = ids.copy()
    bad[size // 2] = 9
    with pytest.raises(OutOfBoundsError, match="out of bounds for axis 0 with size 9"):
        kiln.compile(lambda t, i: t[i])(table, bad)


def test_a_scatter_loop_stays_sequential():
    def fn(y, i, v):
        y = y.copy()
        np.add.at(y, i, v)
        return y

    scheduled = kiln.compile(fn).lower(kiln.f32[4096], kiln.i64[200000], kiln.f32[200000]).text("scheduled")
    nest = scheduled[: scheduled.index("memref.store")]
    nest = nest[nest.rindex("\n    affine.") :]
    assert nest.lstrip().startswith("affine.for"), nest
    assert "vector" not in scheduled[scheduled.index("memref.load") : scheduled.index("memref.store")]


# -- ufunc.at ------------------------------------------------------------------------------------
def _at(ufunc, key=None):
    def fn(y, i, v):
        y = y.copy()
        ufunc.at(y, i if key is None else key(i), v)
        return y

    return fn


def test_add_at_applies_every_update_in_order_as_numpy():
    cases = [
        (np.array([1e16]), [0, 0, 0], np.array([1.0, 1.0, -1e16])),
        (np.array([1e16]), [0, 0, 0], np.array([-1e16, 1.0, 1.0])),
        (np.array([0.0, 1e16]), [1, -1, 0, 1], np.array([1.0, 1.0, 3.0, -1e16])),
        (np.array([1e8], np.float32), [0, 0, 0, 0], np.array([4.0, 4.0, 4.0, -1e8], np.float32)),
        (np.array([2048.0], np.float16), [0, 0, 0], np.array([1.0, 1.0, 1.0], np.float16)),
    ]
    for y, i, v in cases:
        want = y.copy()
        np.add.at(want, i, v)
        assert_same(kiln.compile(_at(np.add))(y, np.array(i), v), want)
        assert_same(kiln.compile(lambda y, v: _at(np.add)(y, i, v))(y, v), want)  # constant indices


UFUNCS = [np.add, np.subtract, np.multiply, np.maximum, np.minimum]


# numpy refuses np.subtract on bools (so does kiln: test_indexing)
@pytest.mark.parametrize(
    "ufunc, dtype",
    [(u, d) for u in UFUNCS for d in DTYPES if not (u is np.subtract and d == np.bool_)],
    ids=lambda p: getattr(p, "__name__", None) or np.dtype(p).name,
)
def test_ufunc_at_matches_numpy_for_every_dtype(ufunc, dtype):
    y, v = values((3, 6), dtype), values((3, 7), dtype)
    i = np.array([5, 5, -1, 0, 2, 5, -6])
    want = y.copy()
    with np.errstate(all="ignore"):
        ufunc.at(want, (slice(None), i), v)
    assert_same(kiln.compile(_at(ufunc, lambda i: (slice(None), i)))(y, i, v), want)


def test_ufunc_at_with_a_wider_update_dtype_rounds_each_update_to_the_array():
    y = np.array([1.0, 0.0], np.float16)
    v = np.array([1e-4, 1e-4, 1e-4, 0.3], np.float32)
    i = np.array([0, 0, 0, 1])
    want = y.copy()
    np.add.at(want, i, v)
    assert_same(kiln.compile(_at(np.add))(y, i, v), want)


def test_ufunc_at_out_of_range_and_empty():
    with pytest.raises(OutOfBoundsError, match="axis 0 with size 3"):
        kiln.compile(_at(np.add))(np.zeros(3), np.array([0, 3]), np.ones(2))
    y = np.arange(3.0)
    assert_same(kiln.compile(_at(np.add))(y, np.zeros(0, np.int64), np.ones(0)), y)


# -- gradients -----------------------------------------------------------------------------------
def central_differences(fn, args, k, eps=1e-6):
    x = args[k]
    grad = np.zeros_like(x)
    for j in range(x.size):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[k].flat[j] += eps
        down[k].flat[j] -= eps
        grad.flat[j] = (fn(*up) - fn(*down)) / (2 * eps)
    return grad


WEIGHTS = rng.standard_normal(64)


def _weighted(y):
    return np.sum(y.reshape(-1) * WEIGHTS[: y.size])


LOSSES = {
    "x[i]": (lambda x, i: _weighted(x[i]), (4, 3)),
    "x[:, i]": (lambda x, i: _weighted(np.sin(x[:, i])), (3, 4)),
    "take_along_axis": (lambda x, i: _weighted(np.take_along_axis(x, i[:, None] % 3, axis=1)), (4, 3)),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_gather_gradients_match_central_differences(name):
    fn, shape = LOSSES[name]
    x = rng.standard_normal(shape)
    i = np.array([3, 0, -1, 3])
    got = kiln.compile(kiln.grad(fn))(x, i)
    np.testing.assert_allclose(got, central_differences(lambda x: fn(x, i), [x], 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
def test_ufunc_at_gradients_match_central_differences(ufunc):
    def loss(y, v, i):
        y = y * 1.0
        ufunc.at(y, i, v)
        return _weighted(y)

    y = rng.standard_normal(6)
    v = rng.standard_normal(7) + 2.0
    v[3] = 0.0  # a zero factor: the product's gradient without dividing by it
    i = np.array([1, 1, 5, 1, 0, -1, 1])
    got = kiln.compile(kiln.grad(loss, argnums=(0, 1)))(y, v, i)
    for k in (0, 1):
        want = central_differences(lambda y, v: loss(y, v, i), [y, v], k)
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-8)


# -- other targets and mlir-opt ------------------------------------------------------------------
def test_cuda_emulation_gathers_and_scatters_as_numpy():
    x = values((6, 5), np.float32)
    i = np.array([5, -1, 0, 0, 2])
    assert_same(kiln.compile(GATHERS["x[i]"], target="cuda-emulate")(x, i), x[i])
    y, v = np.array([1e8, 0.0], np.float32), np.array([4.0, 4.0, 1.0, -1e8], np.float32)
    want = y.copy()
    np.add.at(want, [0, 0, 1, 0], v)
    assert_same(kiln.compile(_at(np.add), target="cuda-emulate")(y, np.array([0, 0, 1, 0]), v), want)


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
@pytest.mark.parametrize(
    "fn, args",
    [
        (GATHERS["x[i, i]"], (kiln.f32[5, 5], kiln.i64[7])),
        (lambda x, i: np.take_along_axis(x, i, axis=0), (kiln.f16[4, 3], kiln.i32[2, 3])),
        (_at(np.maximum, lambda i: (slice(None), i)), (kiln.i8[3, 4], kiln.i64[9], kiln.i8[3, 9])),
        (kiln.grad(lambda x, i: _weighted(x[i])), (kiln.f64[4, 3], kiln.i64[5])),
    ],
)
def test_every_stage_of_indexed_access_is_accepted_by_mlir_opt(fn, args):
    lowered = kiln.compile(fn).lower(*args)
    for stage, (generic, flags) in STAGE_FORMS.items():
        mlir_opt(lowered.text(stage, generic=generic), *flags)
