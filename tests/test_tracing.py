"""Tracing: pytrees, scalars, constants, methods, caching, specs and dumps."""

import collections
import copy
import inspect
import os
import pickle
import re
import traceback
import warnings

import numpy as np
import pytest

import kiln

rng = np.random.default_rng(7)


def test_dict_of_parameters_model():
    def mlp(params, x):
        h = np.tanh(x @ params["w1"] + params["b1"])
        return h @ params["w2"] + params["b2"]

    params = {
        "w2": rng.standard_normal((5, 3)),
        "w1": rng.standard_normal((7, 5)),
        "b1": rng.standard_normal(5),
        "b2": rng.standard_normal(3),
    }
    x = rng.standard_normal((11, 7))
    np.testing.assert_allclose(kiln.compile(mlp)(params, x), mlp(params, x), rtol=1e-12)
    text = kiln.compile(mlp).lower(params, x).text()
    # leaves are named after their path, dict keys in sorted order
    assert (
        "func.func @mlp(%params_b1: tensor<5xf64>, %params_b2: tensor<3xf64>, %params_w1: tensor<7x5xf64>, "
        "%params_w2: tensor<5x3xf64>, %x: tensor<11x7xf64>)" in text
    )


def test_nested_containers_in_and_out():
    Pair = collections.namedtuple("Pair", "first second")

    @kiln.compile
    def f(pair, items):
        return {"sum": pair.first + pair.second, "list": [items[0] * 2, (items[1], None)]}

    a, b = np.ones(3), np.arange(3.0)
    out = f(Pair(a, b), [np.float32(1.5), np.int64(4)])
    np.testing.assert_array_equal(out["sum"], a + b)
    assert out["list"][0] == 3.0 and out["list"][0].dtype == np.float32
    assert out["list"][1][0] == 4 and out["list"][1][1] is None


def test_python_scalar_arguments_are_weak_like_in_numpy():
    @kiln.compile
    def scale(x, factor):
        return x * factor

    x = np.ones(4, np.float32)
    result = scale(x, 0.5)
    assert result.dtype == np.float32  # as numpy: float32 array * Python float stays float32
    np.testing.assert_array_equal(result, x * 0.5)
    assert scale(np.ones(2, np.int32), 3).dtype == np.int32
    assert scale(np.ones(2, np.int32), 0.5).dtype == np.float64
    assert scale(2.0, 3) == 6.0 and isinstance(scale(2.0, 3), np.float64)


def test_zero_dimensional_results_are_numpy_scalars():
    result = kiln.compile(lambda x: x.sum())(np.arange(5.0))
    assert isinstance(result, np.float64) and result == 10.0


def test_captured_arrays_become_constants_at_trace_time():
    table = np.array([1.0, 2.0, 3.0])

    @kiln.compile
    def f(x):
        return x * table

    text = f.lower(kiln.f64[3]).text()
    assert "kiln.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf64>" in text
    first = f(np.ones(3))
    table[:] = 0  # the trace captured the values it saw
    np.testing.assert_array_equal(f(np.ones(3)), first)


def test_zero_stride_constants_stay_broadcasts():
    # A filled weight (np.broadcast_to, ONNX's ConstantOfShape) is its distinct elements and a
    # broadcast, never a copy of every element.
    fill = np.broadcast_to(np.float32(0.5), (512, 1024))
    rows = np.broadcast_to(np.arange(3, dtype=np.float32)[:, None], (3, 1024))
    f = kiln.compile(lambda x, y: (x + fill, y * rows))
    x, y = np.ones((512, 1024), np.float32), np.ones((3, 1024), np.float32)
    text = f.lower(x, y).text()
    assert "kiln.constant dense<0.5> : tensor<f32>" in text
    assert "kiln.constant dense<[[0.0], [1.0], [2.0]]> : tensor<3x1xf32>" in text
    assert not [line for line in text.splitlines() if "kiln.constant" in line and "1024" in line]
    got_fill, got_rows = f(x, y)
    np.testing.assert_array_equal(got_fill, x + fill)
    np.testing.assert_array_equal(got_rows, y * rows)


def test_one_trace_per_signature():
    calls = []

    @kiln.compile
    def f(x, y):
        calls.append(1)
        return x + y

    f(np.ones(3), 1.0)
    f(np.zeros(3), 2.0)  # same shapes and dtypes: cached
    assert len(calls) == 1
    f(np.ones(4), 1.0)  # new shape
    f(np.ones(3, np.float32), 1.0)  # new dtype
    f(np.ones(3), 1)  # a weak int is not a weak float
    f(np.ones(3), np.float64(1.0))  # a numpy scalar is strong
    assert len(calls) == 5


def test_keyword_arguments_defaults_and_static_arguments():
    @kiln.compile(static_argnames="axis")
    def normalize(x, axis, eps=1e-6):
        return x / (np.sum(x, axis=axis, keepdims=True) + eps)

    x = rng.random((3, 5)) + 0.1
    np.testing.assert_allclose(normalize(x, axis=0), normalize.fn(x, 0), rtol=1e-12)
    np.testing.assert_allclose(normalize(x, 1), normalize.fn(x, 1), rtol=1e-12)
    np.testing.assert_allclose(normalize(x, 1, eps=0.5), normalize.fn(x, 1, eps=0.5), rtol=1e-12)
    assert "%eps" not in normalize.lower(x, 1).text()  # a default is compiled in
    assert "%eps" in normalize.lower(x, 1, eps=0.5).text()  # a passed value is traced


def test_array_methods_and_attributes():
    @kiln.compile
    def f(x):
        assert x.shape == (4, 6) and x.ndim == 2 and x.dtype == np.float32 and x.size == 24 and len(x) == 4
        y = x.T.reshape(3, 8).transpose().astype(np.float64)
        return (
            y.sum(axis=0),
            y.mean(),
            y.max(axis=1, keepdims=True),
            y.min(),
            y.var(axis=0),
            y.std(),
            x.squeeze(),
            x[None].swapaxes(0, 1).ravel(),
            x.clip(0, 1),
            x.dot(x.T),
            [r for r in x[:2]],
        )

    x = rng.standard_normal((4, 6)).astype(np.float32)
    got, want = f(x), f.fn(x)
    for g, w in zip(got[:-1], want[:-1]):
        np.testing.assert_allclose(g, w, rtol=1e-6)
        assert np.asarray(g).dtype == np.asarray(w).dtype
    np.testing.assert_array_equal(got[-1][1], x[1])


def test_lower_with_specs_and_stages():
    @kiln.compile
    def predict(x, w, b):
        return np.maximum(x @ w + b, 0)

    lowered = predict.lower(kiln.f32[64, 784], kiln.f32[784, 10], kiln.f32[10])
    assert lowered.stages == ["tensor", "optimized", "affine", "scheduled", "llvm"]
    text = lowered.text("tensor")
    assert text.startswith(
        "module {\n  func.func @predict(%x: tensor<64x784xf32>, %w: tensor<784x10xf32>, "
        "%b: tensor<10xf32>) -> tensor<64x10xf32> {\n"
    )
    line = inspect.getsourcelines(predict.fn)[1] + 2
    assert re.search(
        r"kiln.matmul %x, %w : \(tensor<64x784xf32>, tensor<784x10xf32>\) -> tensor<64x10xf32> "
        rf'loc\("[^"]*test_tracing\.py":{line}:\d+\)',
        text,
    ), text


def test_specs_print_like_they_are_written():
    assert repr(kiln.f32[64, 784]) == "kiln.f32[64, 784]"
    assert kiln.bool_[3].dtype == np.bool_ and kiln.i64[()].shape == ()


def test_out_writes_into_given_arrays():
    f = kiln.compile(lambda x: (x + 1, x.sum()))
    a, s = np.empty(3), np.empty(())
    result = f(np.arange(3.0), out=(a, s))
    assert result[0] is a and result[1] is s
    np.testing.assert_array_equal(a, [1, 2, 3])
    assert s == 3


def test_results_never_alias_inputs_or_constants():
    x = np.arange(3.0)
    y = kiln.compile(lambda v: v)(x)
    y[0] = 42
    assert x[0] == 0


def test_compiled_function_called_inside_another_is_inlined():
    inner = kiln.compile(lambda v: v * 2)

    @kiln.compile
    def outer(v):
        return inner(v) + 1

    np.testing.assert_array_equal(outer(np.ones(2)), [3, 3])


def test_non_contiguous_inputs_are_read_correctly():
    x = np.arange(24.0).reshape(4, 6)[:, ::2].T
    np.testing.assert_array_equal(kiln.compile(lambda v: v * 1.0)(x), x)


def test_dump_dir_gets_every_new_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_DUMP_DIR", str(tmp_path))
    f = kiln.compile(lambda v: v + 1)
    f(np.ones(2))
    f(np.ones(2))
    f(np.ones(3))
    files = sorted(os.listdir(tmp_path))
    stages = ["affine.mlir", "llvm.ll", "optimized.mlir", "scheduled.mlir", "tensor.mlir"]
    assert len(files) == 10 and sorted({name.split(".", 2)[2] for name in files}) == stages
    digest = files[0].split(".")[1]
    assert "kiln.add" in (tmp_path / f"<lambda>.{digest}.tensor.mlir").read_text()
    assert "affine.for" in (tmp_path / f"<lambda>.{digest}.affine.mlir").read_text()
    assert "fadd" in (tmp_path / f"<lambda>.{digest}.llvm.ll").read_text()


@pytest.mark.parametrize("shape", [(1,), (7, 13), (2, 1, 3)])
def test_softmax_layernorm_losses_match_numpy(shape):
    x = rng.standard_normal(shape)
    labels = np.eye(shape[-1])[rng.integers(0, shape[-1], shape[:-1])]

    def loss(logits, onehot):
        return -np.mean(np.sum(onehot * (logits - kiln.logsumexp(logits, axis=-1, keepdims=True)), axis=-1))

    def layernorm(v):
        m = v.mean(axis=-1, keepdims=True)
        return (v - m) / np.sqrt(v.var(axis=-1, keepdims=True) + 1e-5)

    for fn, args in [(loss, (x, labels)), (layernorm, (x,)), (kiln.softmax, (x,)), (kiln.sigmoid, (x,))]:
        np.testing.assert_allclose(kiln.compile(fn)(*args), fn(*args), rtol=1e-12, atol=1e-12)


# Arguments for the ndarray methods that need some; the rest are called with none.
_METHOD_ARGS = {
    "astype": (np.float64,),
    "choose": ([0, 1],),
    "compress": ([True, False, True],),
    "dot": (np.ones(4, np.float32),),
    "fill": (0,),
    "getfield": (np.float32,),
    "item": (0,),
    "put": ([0], [1.0]),
    "repeat": (2,),
    "reshape": (4, 3),
    "resize": ((4, 3),),
    "searchsorted": (0.0,),
    "setfield": (1.0, np.float32),
    "setflags": (False,),
    "swapaxes": (0, 1),
    "take": ([0, 2],),
    "tofile": (os.devnull,),
    "dump": (os.devnull,),
    "to_device": ("cpu",),
    "view": (np.int32,),
    "argpartition": (1,),
    "partition": (1,),
    "transpose": (1, 0),
    "clip": (-1, 1),
}


@pytest.mark.parametrize("name", [n for n in dir(np.ndarray) if not n.startswith("_")])
def test_every_public_ndarray_attribute_works_or_names_itself(name):
    """Each method or attribute numpy arrays have either gives numpy's answer on a traced array
    or raises a KilnError that names it at the user's line; never an AttributeError or a
    TypeError from inside kiln."""
    from kiln.frontend.tracing import Tracer

    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    seen = {}

    def call(v):
        member = getattr(v, name)
        return member(*_METHOD_ARGS.get(name, ())) if callable(member) else member

    def use(v):
        result = call(v)
        if isinstance(result, Tracer):
            return result
        seen["value"] = result  # a shape, a dtype, an int: known while tracing
        return v

    try:
        got = kiln.compile(use, target="interpret")(x)
    except kiln.KilnError as exc:
        first = inspect.getsourcelines(call)[1]
        assert name in str(exc), str(exc)
        assert re.search(rf"test_tracing\.py:({first + 1}|{first + 2}): ", str(exc)), str(exc)
        return
    want = call(x.copy())
    if "value" in seen:
        assert seen["value"] == want
        return
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    "use",
    [
        lambda x: x // 2,
        lambda x: x % 2,
        lambda x: divmod(x, 2),
        lambda x: 2**x,
        lambda x: x**0.5,
        lambda x: round(x),
        lambda x: 1.0 in x,
        lambda x: x.__delitem__(0),
        lambda x: pickle.dumps(x),
        lambda x: f"{x:.2f}",
        lambda x: copy.copy(x) + copy.deepcopy(x),
        lambda x: x.astype(np.int32, casting="safe"),
        lambda x: x.astype(np.int32) << 1,
        lambda x: abs(-x),
        lambda x: x @ x.T,
        lambda x: +x,
    ],
)
def test_python_syntax_on_traced_arrays_works_or_raises_a_kiln_error(use):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 0.5
    try:
        got = kiln.compile(use, target="interpret")(x)
    except kiln.KilnError as exc:
        assert "test_tracing.py:" in str(exc), str(exc)
        return
    want = use(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert np.asarray(got).dtype == np.asarray(want).dtype


def test_unsupported_attributes_are_attribute_errors_too():
    @kiln.compile
    def f(x):
        assert not hasattr(x, "flags") and getattr(x, "strides", None) is None
        assert hasattr(x, "sum") and not hasattr(x, "no_such_attribute")
        return x

    f(np.ones(2))


def test_weak_python_scalars_and_strong_numpy_results():
    """NEP 50: Python scalars are weak; numpy scalars, *_like results and anything numpy
    computes from Python scalars are strong."""
    x = np.ones(3, np.float32)
    cases = [
        (lambda s, x: s * x, (0.5, x)),  # a weak scalar argument
        (lambda s, x: (s + 1) * x, (0.5, x)),  # an operator keeps it weak
        (lambda s, x: np.exp(s) + x, (2.0, x)),  # a ufunc makes it strong
        (lambda s, x: np.add(s, 1) * x, (2, x)),
        (lambda s, x: np.sum(s) * x, (2.0, x)),
        (lambda s, x: np.where(x > 0, s, 0) + x, (2.0, x)),
        (lambda x: np.where(x > 0, np.ones_like(x), np.zeros_like(x)), (x,)),
        (lambda x: np.full_like(x, 2) * 2.5, (x,)),
        (lambda x: x * np.float64(2), (x,)),
        (lambda n, x: np.where(n > 0, x, -x), (3, x)),
        (lambda x: np.mean(x.astype(np.int32) * 3 + 1, dtype=np.int64), (x,)),
        (lambda x: np.mean(x * 7, dtype=np.int32), (np.array([1.0, 2.0, 2.0]),)),
    ]
    for fn, args in cases:
        got, want = kiln.compile(fn, target="interpret")(*args), fn(*args)
        assert np.asarray(got).dtype == np.asarray(want).dtype, inspect.getsource(fn)
        np.testing.assert_array_equal(got, want)


def test_every_numpy_function_and_ufunc_works_or_raises_a_kiln_error():
    """Each public numpy function that dispatches on its arguments, and each ufunc, called on
    traced arrays alone: numpy's answer, a KilnError, or numpy's own refusal before kiln is
    reached (a missing argument); never an exception from inside kiln."""
    kiln_dirs = tuple(
        os.path.join(os.path.dirname(m.__file__), "") for m in (kiln, kiln.dialects, kiln.passes, kiln.runtime)
    )
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    for name in sorted(n for n in dir(np) if not n.startswith("_")):
        fn = getattr(np, name)
        if not isinstance(fn, np.ufunc) and not hasattr(fn, "_implementation"):
            continue  # neither a ufunc nor dispatched through __array_function__

        def use(v, fn=fn):
            return fn(*(v,) * (fn.nin if isinstance(fn, np.ufunc) else 1))

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = kiln.compile(use, target="interpret")(x)
        except kiln.KilnError:
            continue
        except Exception as exc:  # noqa: BLE001 (where it was raised is what is checked)
            innermost = traceback.extract_tb(exc.__traceback__)[-1].filename
            assert not innermost.startswith(kiln_dirs), f"np.{name}: {exc!r} from {innermost}"
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = use(x)
        if fn is np.empty_like:  # numpy leaves its values unspecified; kiln's are zeros
            want = np.zeros_like(want)
        for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:  # histogram: (hist, edges)
            assert np.asarray(g).dtype == np.asarray(w).dtype, name
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=name)


def test_every_ufunc_method_works_or_raises_a_kiln_error():
    """reduce, accumulate, outer, reduceat and at of every binary ufunc on a traced array:
    numpy's answer, a KilnError naming the ufunc, or numpy's own refusal (divmod.reduce)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    methods = {
        "reduce": lambda u, v: u.reduce(v, axis=1),
        "accumulate": lambda u, v: u.accumulate(v),
        "outer": lambda u, v: u.outer(v[0], v[1]),
        "reduceat": lambda u, v: u.reduceat(v, [0, 2]),
        "at": lambda u, v: (u.at(v, [0, 0, 2], 1.0), v)[1],  # at writes v in place
    }
    for name in sorted(n for n in dir(np) if isinstance(getattr(np, n), np.ufunc) and getattr(np, n).nin == 2):
        ufunc = getattr(np, name)
        for method, call in methods.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = kiln.compile(lambda v: call(ufunc, v), target="interpret")(x)
            except kiln.KilnError as exc:
                assert ufunc.__name__ in str(exc) and "test_tracing.py:" in str(exc), str(exc)
                continue
            except Exception as exc:  # noqa: BLE001 (where it was raised is what is checked)
                innermost = traceback.extract_tb(exc.__traceback__)[-1].filename
                assert innermost == __file__, f"np.{name}.{method}: {exc!r} from {innermost}"
                continue
            with np.errstate(all="ignore"):
                want = call(ufunc, x.copy())
            assert np.asarray(got).dtype == np.asarray(want).dtype, f"np.{name}.{method}"
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"np.{name}.{method}")
