"""The fast path of calls with plain arrays (kiln.plain_call): it serves the calls it can
prove safe, gives numpy's answers, and leaves every other call to the checked path, whose
results and errors are the same as before the fast path existed."""

import numpy as np
import pytest

import kiln
from kiln.runtime import cpython_entry


@pytest.fixture(autouse=True, params=["entry", "python"])
def call_path(request, monkeypatch):
    """Every test twice: with the generated entry, and with the Python path it replaces."""
    if request.param == "python":
        monkeypatch.setattr(cpython_entry, "_numpy_layout", lambda: None)
    return request.param


def spy_on_checked_path(f):
    """Count the calls that take the checked path."""
    calls = []
    checked = f._checked_call

    def counting(*args):
        calls.append(args)
        return checked(*args)

    f._checked_call = counting
    return calls


def test_repeated_plain_calls_skip_the_checked_path_and_match_numpy():
    f = kiln.compile(lambda x, y: x * y + 1)
    x, y = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)
    f(x, y)
    checked = spy_on_checked_path(f)
    for _ in range(3):
        result = f(x, y)
        np.testing.assert_array_equal(result, x * y + 1)
        assert result.dtype == np.float32 and result is not x
    assert checked == []


def test_results_keep_their_structure_and_0d_results_are_scalars():
    f = kiln.compile(lambda x: {"total": x.sum(), "pair": (x + 1, x * 2)})
    x = np.arange(3, dtype=np.float64)
    f(x)
    checked = spy_on_checked_path(f)
    result = f(x)
    assert checked == []
    assert isinstance(result["total"], np.float64) and result["total"] == 3.0
    np.testing.assert_array_equal(result["pair"][0], x + 1)
    np.testing.assert_array_equal(result["pair"][1], x * 2)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: x[::2].repeat(2), id="made-contiguous-copy"),
        pytest.param(lambda x: np.stack([x, x], axis=1)[:, 0], id="non-contiguous"),
        pytest.param(lambda x: np.frombuffer(b"\0" + x.tobytes(), np.float32, count=x.size, offset=1), id="misaligned"),
    ],
)
def test_arrays_the_code_cannot_take_as_they_are_go_the_checked_way(make):
    f = kiln.compile(lambda x: x + 1)
    x = np.arange(4, dtype=np.float32)
    f(x)
    odd = make(x)
    checked = spy_on_checked_path(f)
    np.testing.assert_array_equal(f(odd), odd + 1)
    assert len(checked) == (0 if odd.flags.c_contiguous and odd.flags.aligned else 1)


def test_read_only_arrays_take_the_fast_path():
    f = kiln.compile(lambda x: x + 1)
    x = np.arange(4, dtype=np.float32)
    f(x)
    x.flags.writeable = False
    checked = spy_on_checked_path(f)
    np.testing.assert_array_equal(f(x), x + 1)
    assert checked == []


def test_another_dtype_or_shape_is_a_new_signature():
    f = kiln.compile(lambda x: x + 1)
    f(np.arange(4, dtype=np.float32))
    assert f(np.arange(4, dtype=np.int64)).dtype == np.int64
    assert f(np.arange(8, dtype=np.float32)).shape == (8,)
    assert f(np.arange(4, dtype=np.float32)).dtype == np.float32
    assert len(f.compilations) == 3
    assert len(f._plain_calls.table) == 3


def test_python_floats_stay_weak_on_the_fast_path_and_ints_take_the_checked_one():
    f = kiln.compile(lambda x, s: x + s)
    x = np.array([1.0, -0.0, np.inf, 3e38], np.float32)
    assert f(x, 2.0).dtype == np.float32  # a Python float is weak (NEP 50)
    assert f(x, np.array(2.0)).dtype == np.float64  # a 0-d float64 array is not
    assert f(x, np.array(2.0)).dtype == np.float64
    checked = spy_on_checked_path(f)
    for value in (2.0, 0.1, -0.0, 1e-46, float("nan"), float("inf"), 3.4028235e38):
        got = f(x, value)
        assert got.dtype == np.float32
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, x + np.float32(value))  # numpy's rounding of the float
    with np.errstate(over="ignore"):
        assert np.isinf(f(x, 1e300)).all()  # beyond float32: infinity, as the checked path converts it
    assert checked == []
    assert f(x, 2).dtype == np.float32 and len(checked) == 1  # ints: numpy checks their values


def test_pytrees_of_arrays_and_floats_take_the_fast_path():
    step = kiln.compile(lambda p, x, lr: (np.sum(x @ p["w"] + p["b"]), {k: v * (1 - lr) for k, v in p.items()}))
    params = {"w": np.ones((3, 2), np.float32), "b": np.arange(2, dtype=np.float32)}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    step(params, x, 0.5)
    checked = spy_on_checked_path(step)
    loss, new = step(params, x, 0.25)
    assert checked == []
    assert type(loss) is np.float32 and loss == np.sum(x @ params["w"] + params["b"])
    assert sorted(new) == ["b", "w"]
    np.testing.assert_array_equal(new["w"], params["w"] * np.float32(0.75))
    np.testing.assert_array_equal(new["b"], params["b"] * np.float32(0.75))
    # Another container type, another key, an int: the checked path, with the same results.
    from collections import OrderedDict

    for other, lr in ((OrderedDict(params), 0.25), ({**params, "c": params["b"]}, 0.25), (params, 1)):
        loss, new = step(other, x, lr)
        assert loss == np.sum(x @ params["w"] + params["b"])
        np.testing.assert_array_equal(new["w"], params["w"] * np.float32(1 - lr))
    assert len(checked) == 3
    step({"w": params["w"], "b": params["b"][::-1]}, x, 0.25)  # a view: the checked path copies it
    assert len(checked) == 4


def test_container_subclasses_take_the_checked_path_and_register_nothing():
    """pytree.flatten takes an OrderedDict or a tuple subclass as a dict or a tuple, but the fast
    path's reader takes only the exact types: registering such a call would add a PlainCall
    that no later call finds, one per call."""
    from collections import OrderedDict, defaultdict

    f = kiln.compile(lambda d: d["a"] * 2 + d["b"])
    x = np.ones(4, np.float32)
    f({"a": x, "b": x})
    f({"a": x, "b": x})
    Pair = type("Pair", (tuple,), {})
    for _ in range(5):
        np.testing.assert_array_equal(f(OrderedDict(a=x, b=x)), x * 3)
        np.testing.assert_array_equal(f(defaultdict(None, a=x, b=x)), x * 3)
    g = kiln.compile(lambda p: p[0] - p[1])
    for _ in range(5):
        np.testing.assert_array_equal(g(Pair((x, x))), x - x)
    assert len(f._plain_calls.structured) == 1 and not g._plain_calls.structured and not g._plain_calls.table


def test_numpy_scalars_lists_and_0d_arrays():
    f = kiln.compile(lambda x: x * 2)
    zero_d = np.array(3, np.float32)
    assert f(zero_d) == 6 and isinstance(f(zero_d), np.float32)
    checked = spy_on_checked_path(f)
    assert f(np.float32(4)) == 8  # a numpy scalar has a 0-d array's shape and dtype, but is no array
    assert f(2.5) == 5.0
    assert len(checked) == 2
    total = kiln.compile(lambda xs: xs[0] + xs[1])
    assert total([1.0, np.float32(2)]) == 3.0 and total._plain_calls.table == {}


def test_size_0_arrays():
    f = kiln.compile(lambda x: x + 1)
    empty = np.empty((0, 3), np.float32)
    for _ in range(2):
        result = f(empty)
        assert result.shape == (0, 3) and result.dtype == np.float32


def test_keywords_and_out_take_the_checked_path():
    f = kiln.compile(lambda x, y: x - y)
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    f(x, y)
    checked = spy_on_checked_path(f)
    np.testing.assert_array_equal(f(x, y=y), x - y)
    target = np.empty(4, np.float32)
    assert f(x, y, out=target) is target
    np.testing.assert_array_equal(target, x - y)
    assert len(checked) == 2
    g = kiln.compile(lambda p: p["a"] + p["b"])
    g({"a": x, "b": y})
    np.testing.assert_array_equal(g({"a": x, "b": y}), x + y)
    assert g._plain_calls.table == {} and len(g._plain_calls.structured) == 1  # found by its structure


def test_out_overlapping_an_input_after_plain_calls():
    f = kiln.compile(lambda x: x[::-1] + 1)
    x = np.arange(4, dtype=np.float32)
    f(x)
    expected = x[::-1] + 1
    assert f(x, out=x) is x
    np.testing.assert_array_equal(x, expected)


def test_varargs_and_static_arguments_are_not_plain():
    f = kiln.compile(lambda *xs: xs[0] + xs[1])
    a = np.ones(2, np.float32)
    np.testing.assert_array_equal(f(a, a), a + a)
    assert f._plain_calls.table == {}

    def power(x, n):
        return x**n

    p = kiln.compile(power, static_argnames="n")
    assert p(a * 2, 2).tolist() == [4.0, 4.0]
    assert p(a * 2, 3).tolist() == [8.0, 8.0]
    assert p._plain_calls.table == {}


def test_debug_builds_keep_every_check():
    f = kiln.compile(lambda x: x + 1, debug=True)
    f(np.ones(3, np.float32))
    assert f._plain_calls.table == {}


def test_errors_are_the_checked_paths_own():
    f = kiln.compile(lambda x: x + 1)
    f(np.ones(3, np.float32))
    with pytest.raises(kiln.ArgumentError, match="argument 'x' is a str"):
        f("text")
    with pytest.raises(kiln.ArgumentError, match=r"<lambda>\(\): missing a required argument: 'y'"):
        kiln.compile(lambda x, y: x)(np.ones(3))


def test_a_failing_status_raises_the_same_error_on_the_fast_path():
    f = kiln.compile(lambda x, y: x**y)
    base, exponent = np.array([2, 3], np.int64), np.array([1, 2], np.int64)
    f(base, exponent)
    assert f._plain_calls.table
    for _ in range(2):
        with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
            f(base, -exponent)


def test_calls_inside_another_trace_are_inlined():
    inner = kiln.compile(lambda x: x * 3)
    x = np.arange(4, dtype=np.float32)
    inner(x)  # registers (4,) float32, which the tracer's shape and dtype also match
    outer = kiln.compile(lambda x: inner(x) + 1)
    np.testing.assert_array_equal(outer(x), x * 3 + 1)
    assert len(outer.lower(x).module("tensor").body.ops[0].body.ops) > 2  # inlined, not a call


def test_array_subclasses_take_the_checked_path():
    class Tagged(np.ndarray):
        pass

    f = kiln.compile(lambda x: x + 1)
    x = np.arange(4, dtype=np.float32)
    f(x)
    checked = spy_on_checked_path(f)
    np.testing.assert_array_equal(f(x.view(Tagged)), x + 1)
    assert len(checked) == 1


def test_compiled_signatures_take_the_fast_path_and_keep_their_errors():
    f = kiln.compile(lambda x, y: x @ y)
    c = f.lower(kiln.f32[2, 3], kiln.f32[3, 2]).compile()
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    checked = spy_on_checked_path(c)
    np.testing.assert_array_equal(c(a, b), a @ b)
    assert checked == []
    np.testing.assert_array_equal(c(np.asfortranarray(a), b), a @ b)  # copied on the checked path
    with pytest.raises(kiln.ArgumentError, match=r"argument 'x' is kiln.f64\[2, 3\]; .* compiled for kiln.f32\[2, 3\]"):
        c(a.astype(np.float64), b)
    with pytest.raises(kiln.ArgumentError, match=r"argument 'y' is kiln.f32\[3, 3\]"):
        c(a, np.ones((3, 3), np.float32))
    assert len(checked) == 3


def test_compiled_signatures_the_fast_path_cannot_serve():
    scalar = kiln.compile(lambda x, s: x * s).lower(np.ones(2, np.float32), 2.0).compile()
    assert scalar._plain_calls.table == {}
    with pytest.raises(kiln.ArgumentError, match="argument 's' is kiln.f64"):
        scalar(np.ones(2, np.float32), np.array(2.0))  # a strong float64 is not the weak scalar it was lowered for

    def keyword_only(*, x):
        return x + 1

    by_keyword = kiln.compile(keyword_only).lower(x=kiln.f32[2]).compile()
    assert by_keyword._plain_calls.table == {}
    with pytest.raises(kiln.ArgumentError, match=r"keyword_only\(\): too many positional arguments"):
        by_keyword(np.ones(2, np.float32))
    np.testing.assert_array_equal(by_keyword(x=np.ones(2, np.float32)), [2.0, 2.0])


def test_threads_share_the_fast_path():
    from concurrent.futures import ThreadPoolExecutor

    f = kiln.compile(lambda x: x * 2 + 1)
    arrays = [np.full(16, k, np.float32) for k in range(8)]
    f(arrays[0])
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda a: [f(a) for _ in range(200)][-1], arrays))
    for a, result in zip(arrays, results):
        np.testing.assert_array_equal(result, a * 2 + 1)


def test_no_arguments_and_parameters_left_at_their_defaults():
    constant = kiln.compile(lambda: np.arange(3.0) * 2)
    for _ in range(2):
        np.testing.assert_array_equal(constant(), [0.0, 2.0, 4.0])

    def scaled(x, scale=2.0):
        return x * scale

    f = kiln.compile(scaled)
    x = np.arange(3, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(f(x), x * 2)
        np.testing.assert_array_equal(f(x, 3.0), x * 3)
        np.testing.assert_array_equal(f(x, np.float32(4)), x * 4)
