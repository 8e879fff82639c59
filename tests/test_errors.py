"""Every error a user can cause: a Python exception that names the problem and,
at trace time, points at the user's line (marked below with `# error:`)."""

import os
import re
import traceback

import numpy as np
import pytest

import kiln

x32 = np.ones((3, 4), np.float32)


def line_of(tag: str) -> int:
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# error: {tag}"):
                return number
    raise AssertionError(f"no line tagged {tag}")


def raises_at(exc_type, tag, match, fn, *args):
    with pytest.raises(exc_type, match=match) as info:
        fn(*args)
    message = str(info.value)
    assert re.search(rf"test_errors\.py:{line_of(tag)}: ", message), message
    assert f"# error: {tag}" in message, "the message quotes the user's source line"
    return info.value


def test_shapes_that_do_not_broadcast():
    def f(x, b):
        return x + b  # error: broadcast

    raises_at(
        kiln.ShapeError,
        "broadcast",
        r"shapes \(3, 4\) and \(5,\) do not broadcast",
        kiln.compile(f),
        x32,
        np.ones(5, np.float32),
    )


def test_matmul_dimension_mismatch():
    def f(a, b):
        return a @ b  # error: matmul

    raises_at(
        kiln.ShapeError,
        "matmul",
        r"matmul: contracted dimensions differ: \(3, 4\) @ \(3, 4\) \(4 != 3\)",
        kiln.compile(f),
        x32,
        x32,
    )


def test_reshape_to_a_different_size():
    def f(x):
        return x.reshape(5, 3)  # error: reshape

    raises_at(
        kiln.ShapeError,
        "reshape",
        r"cannot reshape an array of size 12 \(shape \(3, 4\)\) into shape \(5, 3\)",
        kiln.compile(f),
        x32,
    )


@pytest.mark.parametrize("tag", ["axis-sum", "axis-transpose", "axis-concat"])
def test_axis_out_of_range(tag):
    def f(x):
        if tag == "axis-sum":
            return x.sum(axis=2)  # error: axis-sum
        if tag == "axis-transpose":
            return np.transpose(x, (0, 3))  # error: axis-transpose
        return np.concatenate([x, x], axis=-3)  # error: axis-concat

    raises_at(kiln.ShapeError, tag, r"axis -?\d is out of range for an array of rank 2", kiln.compile(f), x32)


def test_unsupported_numpy_function_is_named():
    def f(x):
        return np.fft.fft(x)  # error: fft

    raises_at(kiln.UnsupportedError, "fft", r"np\.fft\.fft is not supported", kiln.compile(f), x32)


def test_unsupported_ufunc_is_named():
    def f(x):
        return np.vecdot(x, x)  # error: vecdot

    raises_at(kiln.UnsupportedError, "vecdot", r"np\.vecdot is not supported", kiln.compile(f), x32)


def test_python_if_on_a_traced_value_says_to_use_where():
    def f(x):
        if x.sum() > 0:  # error: if
            return x
        return -x

    raises_at(kiln.TracerBoolError, "if", r"choose between values with np\.where", kiln.compile(f), x32)


def test_python_while_and_bool_are_refused_too():
    def g(x):
        while x.max() > 1:  # error: while
            x = x / 2
        return x

    raises_at(kiln.TracerBoolError, "while", "truth value", kiln.compile(g), x32)

    def h(x):
        return bool(x[0, 0])  # error: bool

    raises_at(kiln.TracerBoolError, "bool", "truth value", kiln.compile(h), x32)


def test_converting_a_traced_value_to_a_concrete_one():
    def f(x):
        return float(x.sum())  # error: float

    raises_at(kiln.TracerConversionError, "float", "Python float", kiln.compile(f), x32)


def test_a_traced_mask_with_a_data_dependent_size_suggests_where():
    def f(x):
        return x[x > 0]  # error: mask

    raises_at(kiln.UnsupportedError, "mask", r"np\.where\(mask, x, 0\)", kiln.compile(f), x32)


def test_a_slice_with_traced_bounds_is_refused():
    def f(x, i):
        return x[:i]  # error: traced-slice

    raises_at(kiln.UnsupportedError, "traced-slice", "traced bounds", kiln.compile(f), x32, 1)


def test_index_out_of_bounds():
    def f(x):
        return x[3]  # error: index

    raises_at(IndexError, "index", "index 3 is out of bounds for axis 0 with size 3", kiln.compile(f), x32)


def test_function_that_computes_in_an_unsupported_dtype():
    def f(m):
        return np.exp(m.astype(np.longdouble))  # error: float128

    raises_at(kiln.DTypeError, "float128", "float128", kiln.compile(f), np.ones(3, bool))


def test_python_int_that_does_not_fit_the_array_dtype():
    def f(x):
        return x + 2**40  # error: overflow

    raises_at(
        kiln.IntegerOverflowError,
        "overflow",
        "Python integer 1099511627776 out of bounds for int32",
        kiln.compile(f),
        np.ones(3, np.int32),
    )


def test_ufunc_out_argument_into_a_numpy_array_is_refused():
    def f(x):
        return np.add(x, 1, out=np.empty(x.shape, x.dtype))  # error: out

    raises_at(kiln.UnsupportedError, "out", "out=", kiln.compile(f), x32)


def test_a_traced_value_stored_into_a_numpy_array_is_explained():
    def f(x):
        y = np.zeros(3, x.dtype)
        y[0] = x[0, 0]  # error: store
        return y

    raises_at(kiln.TracerConversionError, "store", r"np.zeros_like\(x, shape=", kiln.compile(f), x32)


def test_a_traced_value_that_escapes_its_trace():
    leaked = []

    def keep(x):
        leaked.append(x)
        return x

    def use(x):
        return x + leaked[0]  # error: leak

    kiln.compile(keep)(x32)
    raises_at(kiln.KilnError, "leak", "escaped the function that made it", kiln.compile(use), x32)


@pytest.mark.parametrize(
    "argument, match",
    [
        ("a string", r"argument 'x' is a str; compiled functions take numpy arrays"),
        ({1, 2}, r"argument 'x' is a set"),
        (object(), r"argument 'x' is a object"),
        ({"w": [np.ones(2), "oops"]}, r"argument 'x\['w'\]\[1\]' is a str"),
    ],
)
def test_arguments_that_are_not_arrays_scalars_or_containers(argument, match):
    with pytest.raises(kiln.ArgumentError, match=match):
        kiln.compile(lambda x: x)(argument)


@pytest.mark.parametrize(
    "array, name",
    [
        (np.ones(3, np.longdouble), "float128"),
        (np.ones(2, np.complex64), "complex64"),
        (np.array(["2026-01-01"], "datetime64[D]"), "datetime64[D]"),
    ],
)
def test_unsupported_argument_dtypes(array, name):
    with pytest.raises(kiln.DTypeError, match=re.escape(f"argument 'x' has dtype {name}, which kiln does not support")):
        kiln.compile(lambda x: x)(array)


def test_wrong_number_of_arguments():
    with pytest.raises(kiln.ArgumentError, match="missing a required argument: 'y'"):
        kiln.compile(lambda x, y: x)(x32)


def test_specs_are_for_lower_not_for_calls():
    with pytest.raises(kiln.ArgumentError, match="specs are for .lower"):
        kiln.compile(lambda x: x)(kiln.f32[3])


def test_out_must_match_the_results():
    f = kiln.compile(lambda x: x * 2)
    with pytest.raises(kiln.ArgumentError, match=r"out= leaf #0 is float64\[3, 4\], the result is float32\[3, 4\]"):
        f(x32, out=np.empty((3, 4)))
    with pytest.raises(kiln.ArgumentError, match="same structure"):
        f(x32, out=(np.empty((3, 4), np.float32),))


def test_out_arrays_of_two_results_must_not_overlap():
    f = kiln.compile(lambda x: (x * 2, x + 1))
    buffer = np.empty((2, 3, 4), np.float32)
    with pytest.raises(kiln.ArgumentError, match="out= leaves #0 and #1 overlap"):
        f(x32, out=(buffer[0], buffer[0]))
    interleaved = np.empty((3, 8), np.float32)  # disjoint views of one array are fine
    f(x32, out=(interleaved[:, ::2], interleaved[:, 1::2]))
    np.testing.assert_array_equal(interleaved[:, ::2], x32 * 2)
    np.testing.assert_array_equal(interleaved[:, 1::2], x32 + 1)


def test_unknown_stage_and_target():
    lowered = kiln.compile(lambda x: x).lower(kiln.f32[2])
    with pytest.raises(
        kiln.StageError, match="no stage 'cuda'; this function has stages: tensor, optimized, affine, scheduled, llvm"
    ):
        lowered.text("cuda")
    interpreted = kiln.compile(lambda x: x, target="interpret").lower(kiln.f32[2])
    with pytest.raises(kiln.StageError, match="no stage 'affine'; this function has stages: tensor"):
        interpreted.text("affine")
    with pytest.raises(kiln.KilnError, match="unknown target 'tpu'"):
        kiln.compile(lambda x: x, target="tpu")


@pytest.mark.parametrize(
    "tag",
    [
        "accumulate",
        "at",
        "reduceat",
        "where",
        "order",
        "initial",
        "ones_like",
        "where-1",
        "stack",
        "matmul-out",
        "flags",
        "resize",
        "nonzero-method",
    ],
)
def test_unsupported_ufunc_methods_keywords_and_attributes_are_named(tag):
    def f(x):
        if tag == "accumulate":
            return np.subtract.accumulate(x)  # error: accumulate
        if tag == "at":
            return np.true_divide.at(x, [0], 1)  # error: at
        if tag == "reduceat":
            return np.subtract.reduceat(x, [0, 1])  # error: reduceat
        if tag == "where":
            return np.exp(x, where=x > 0)  # error: where
        if tag == "order":
            return np.add(x, 1, order="F")  # error: order
        if tag == "initial":
            return np.subtract.reduce(x, initial=1.0)  # error: initial
        if tag == "ones_like":
            return np.ones_like(x, device="gpu")  # error: ones_like
        if tag == "where-1":
            return np.where(x > 0)  # error: where-1
        if tag == "stack":
            return np.stack([x, x], dtype=np.float64)  # error: stack
        if tag == "matmul-out":
            return np.matmul(x, x.T, out=np.empty((3, 3), np.float32))  # error: matmul-out
        if tag == "flags":
            return x.flags  # error: flags
        if tag == "resize":
            return x.resize((2, 2))  # error: resize
        return x.nonzero()  # error: nonzero-method

    name = {
        "where-1": "where",
        "matmul-out": "matmul",
        "nonzero-method": "nonzero",
        "order": "add",
        "reduceat": "subtract",
        "initial": "subtract",
    }.get(tag, tag)
    raises_at(kiln.UnsupportedError, tag, name, kiln.compile(f), x32)


def test_tracebacks_show_the_users_frames_not_kilns(monkeypatch):
    """A trace-time error reads like one in plain numpy code: the call, then the user's line,
    with no more than the one frame of kiln that re-raises it (JAX filters the same way)."""

    def model(x, b):
        return np.tanh(x) + b  # error: traceback

    def frames(exc):
        return [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]

    def loss(x, b):
        return np.sum(model(x, b))

    kiln_dir = os.path.dirname(kiln.__file__)
    b5 = np.ones(5, np.float32)
    for call in (
        lambda: kiln.compile(model)(x32, b5),
        lambda: kiln.compile(model).lower(x32, b5),
        lambda: kiln.grad(loss)(x32, b5),
        lambda: kiln.gradcheck(loss, x32, b5),
    ):
        with pytest.raises(kiln.ShapeError) as info:
            call()
        shown = frames(info.value)
        assert traceback.format_exception_only(info.value)[0].startswith("kiln.errors.ShapeError: ")
        assert (__file__, line_of("traceback")) in shown, shown
        assert len([f for f, _ in shown if f.startswith(kiln_dir)]) <= 1, shown

    monkeypatch.setenv("KILN_TRACEBACK_FILTERING", "off")
    with pytest.raises(kiln.ShapeError) as info:
        kiln.compile(model)(x32, np.ones(5, np.float32))
    assert len([f for f, _ in frames(info.value) if f.startswith(kiln_dir)]) > 3


ODD_ARGUMENTS = {
    "transpose-int": lambda x: np.transpose(x, 0),
    "expand_dims-str": lambda x: np.expand_dims(x, "a"),
    "broadcast_to-int": lambda x: np.broadcast_to(x, 5),
    "size-axis": lambda x: np.size(x, 5),
    "full_like-str": lambda x: np.full_like(x, "a"),
    "full_like-None": lambda x: np.full_like(x, None),
    "reshape-float": lambda x: x.reshape(2.0, 6),
    "sum-axis-str": lambda x: x.sum(axis="a"),
    "astype-nonsense": lambda x: x.astype("nonsense"),
    "astype-str": lambda x: x.astype("U3"),
    "index-str": lambda x: x["a"],
    "index-float": lambda x: x[1.5],
    "concatenate-axis-str": lambda x: np.concatenate([x, x], axis="a"),
    "sum-dtype-str": lambda x: x.sum(dtype="U3"),
    "mean-dtype-float128": lambda x: x.mean(dtype=np.longdouble),
    "any-axis": lambda x: x.any(axis=5),
    "matmul-str": lambda x: x @ "a",
    "add-list": lambda x: x + [1, 2, 3, 4],
    "eq-None": lambda x: x == None,  # noqa: E711
    "outer-dtype": lambda x: np.add.outer(x, x, dtype="U3"),
    "mT-1d": lambda x: x[0].mT,
    "flatten-K": lambda x: x.flatten("K"),
    "index-by-traced": lambda x: [1, 2][x[0, 0]],
}


@pytest.mark.parametrize("name", ODD_ARGUMENTS)
def test_odd_arguments_raise_kiln_errors(name):
    """Arguments numpy accepts but kiln does not, and ones numpy refuses too: a KilnError
    at the user's line, never a TypeError or IndexError from inside kiln."""
    with pytest.raises(kiln.KilnError, match=r"test_errors\.py:\d+: "):
        kiln.compile(ODD_ARGUMENTS[name])(x32)


def test_a_traced_value_as_a_size_a_dtype_or_a_pow_modulus_is_named():
    def size(x, n):
        return np.zeros(n) + x  # error: size

    def dtype(x, n):
        return x.astype(n)  # error: dtype-traced

    def modulus(x):
        return pow(x, 2, 5)  # error: modulus

    raises_at(kiln.TracerConversionError, "size", "static_argnames", kiln.compile(size), 1.0, 3)
    raises_at(kiln.DTypeError, "dtype-traced", "a traced value is not a dtype", kiln.compile(dtype), x32, 2)
    raises_at(kiln.UnsupportedError, "modulus", r"\(x \*\* y\) % modulo", kiln.compile(modulus), x32)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.matrix([[0.0, 1.0], [2.0, 3.0]]),
        lambda: np.ma.array([1.0, 1e9], mask=[0, 1]),
    ],
    ids=["matrix", "masked"],
)
def test_ndarray_subclasses_that_change_what_operations_mean_are_refused(make):
    # np.matrix's * is a matrix product and a masked sum skips masked elements: computing
    # them as plain ndarrays would be a silent wrong answer.
    f = kiln.compile(lambda a: a * a)
    with pytest.raises(kiln.ArgumentError, match="ndarray subclass whose operations mean something else"):
        f(make())


def test_ndarray_subclasses_that_only_add_attributes_compute_as_ndarrays():
    class Tagged(np.ndarray):
        pass

    x = np.arange(4.0).view(Tagged)
    np.testing.assert_array_equal(kiln.compile(lambda a: a * a)(x), np.arange(4.0) ** 2)


def test_an_unknown_keyword_is_named_before_the_argument_it_leaves_missing():
    f = kiln.compile(lambda a, b: a + b)
    with pytest.raises(kiln.ArgumentError, match="unexpected keyword argument 'c'"):
        f(np.ones(3), c=np.ones(3))
    with pytest.raises(kiln.ArgumentError, match="missing a required argument: 'b'"):
        f(np.ones(3))
