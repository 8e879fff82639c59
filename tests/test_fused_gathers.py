"""Gathers inside kernels: a kiln.gather whose index is computed elementwise joins the kernel
that computes it (passes/fusion.py), and a vectorized loop reads it with vector.gather
(passes/vectorize.py), one lane per computed position. numpy's histogram is then one kernel
for the bins (each value's bin, the two edges around it, the correction) and a scatter-add.
Oracles: numpy's results bit for bit, on awkward inputs (NaN, infinities, values on the
edges and outside the range, -0.0, sizes 0, 1 and primes); mlir-opt for the IR; the affine
interpreter running the scheduled stage (vector.gather included); finite differences for
the gradient through a fused gather."""

import numpy as np
import pytest
from stage_checks import MLIR_OPT, assert_mlir_opt_accepts_every_stage

import kiln
from kiln.interpreters.affine_interpreter import run_affine

rng = np.random.default_rng(77)


def awkward(n, dtype=np.float64):
    x = rng.random(n).astype(dtype) * 1.2 - 0.1  # some below 0, some above 1
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 0.5, 0.02, 0.98, -0.1], dtype)
    x[: min(n, specials.size)] = specials[: min(n, specials.size)]
    return x


@pytest.mark.parametrize("n", [0, 1, 2, 13, 10007])
@pytest.mark.parametrize("bins", [1, 7, 50])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_is_numpys(n, bins, dtype):
    x = awkward(n, dtype)
    f = kiln.compile(lambda a: np.histogram(a, bins=bins, range=(0, 1))[0])
    np.testing.assert_array_equal(f(x), np.histogram(x, bins=bins, range=(0, 1))[0])


def test_histogram_bins_are_one_vectorized_kernel():
    lowered = kiln.compile(lambda a: np.histogram(a, bins=50, range=(0, 1))[0]).lower(kiln.f64[4096])
    assert lowered.kernel_count <= 4  # the bins, the scatter-add (and its zero fill), the output copy
    scheduled = lowered.text("scheduled")
    assert "vector.gather" in scheduled, scheduled


def test_the_interpreter_runs_the_scheduled_gathers():
    x = awkward(257)
    lowered = kiln.compile(lambda a: np.histogram(a, bins=9, range=(0, 1))[0]).lower(x)
    (got,) = run_affine(lowered.module("scheduled"), [x])
    np.testing.assert_array_equal(got, np.histogram(x, bins=9, range=(0, 1))[0])


def fused_cases():
    table = rng.standard_normal(37)
    ints = rng.integers(-(2**62), 2**62, 37)
    flags = rng.random(37) < 0.5
    i = rng.integers(-37, 37, 301)
    yield "computed index", lambda t, i: np.sin(t[(i * 3 + 1) % 37]) * 2.0, (table, i)
    yield "integer table", lambda t, i: t[np.abs(i) % 37] + 1, (ints, i)
    yield "bool table", lambda t, i: np.logical_not(t[np.abs(i) % 37]), (flags, i)
    yield "negative index", lambda t, i: t[i] * t[i], (table, i)
    logp = np.log(rng.dirichlet(np.ones(10), 203))
    labels = rng.integers(0, 10, 203)
    yield "cross-entropy", lambda lp, y: -lp[np.arange(lp.shape[0]), y].mean(), (logp, labels)
    scores = rng.standard_normal((19, 23))
    cols = rng.integers(0, 23, (19, 5))
    yield "take_along_axis", lambda s, c: np.take_along_axis(s, c, axis=1) * 3, (scores, cols)
    rows = rng.integers(0, 19, (4, 23))
    yield "take_along_axis 0", lambda s, r: np.take_along_axis(s, r, axis=0) - 1, (scores, rows)  # strided lanes
    yield "interp", lambda x: np.interp(x, np.linspace(0, 1, 40), np.cos(np.linspace(0, 3, 40))), (awkward(1001),)
    yield "digitize", lambda x: np.digitize(x, np.linspace(0, 1, 17)), (awkward(333),)


@pytest.mark.parametrize("case", list(fused_cases()), ids=lambda c: c[0])
def test_fused_gathers_give_numpys_results(case):
    _, fn, args = case
    want = fn(*args)
    for target in ("cpu", "interpret", "cuda-emulate"):
        got = np.asarray(kiln.compile(fn, target=target)(*args))
        if want.ndim == 0 and want.dtype.kind == "f":  # a mean: the GPU's sum adds in another order
            np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=target)
        else:
            np.testing.assert_array_equal(got, want, err_msg=target)


def test_an_index_out_of_range_still_raises():
    f = kiln.compile(lambda t, i: t[i * 2] + 1.0)
    with pytest.raises(kiln.OutOfBoundsError, match="axis 0 with size 5"):
        f(np.ones(5), np.array([0, 1, 3]))


def test_gradient_through_a_fused_gather():
    table = rng.standard_normal(11)
    i = rng.integers(0, 11, 40)
    assert kiln.gradcheck(lambda t: np.sum(np.sin(t[(i * 7) % 11]) ** 2), table).ok


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt not found (Debian: apt-get install mlir-19-tools)")
def test_mlir_opt_accepts_every_stage_with_vector_gathers():
    for fn, spec in [
        (lambda a: np.histogram(a, bins=50, range=(0, 1))[0], kiln.f64[1000]),
        (lambda t, i: t[(i * 3 + 1) % 37] * 2.0, (kiln.f32[37], kiln.i64[64])),
    ]:
        lowered = kiln.compile(fn).lower(*(spec if isinstance(spec, tuple) else (spec,)))
        assert_mlir_opt_accepts_every_stage(lowered)


def test_an_index_out_of_range_in_a_dropped_part_still_raises():
    """numpy gathers every index before the slice: one outside the axis raises even where the
    slice drops it (canonicalize moves slices before converts and negations only)."""
    f = kiln.compile(lambda x, i: (-x[i].astype(np.float32))[:1])
    with pytest.raises(kiln.OutOfBoundsError, match="axis 0 with size 5"):
        f(np.ones(5), np.array([0, 9]))
