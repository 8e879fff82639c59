"""The public API as a user meets it: every name in ``kiln.__all__`` is documented with an
example, every example in a public docstring runs and prints what it shows, and the eager
numpy helpers check their inputs as their traced forms do."""

import doctest
import inspect

import numpy as np
import pytest

import kiln

PUBLIC = sorted(kiln.__all__)
# Exceptions and the dtype spec builders document themselves in one line; everything a user
# calls or constructs shows an example.
NEEDS_EXAMPLE = [
    name
    for name in PUBLIC
    if not (inspect.isclass(getattr(kiln, name)) and issubclass(getattr(kiln, name), BaseException))
    and not isinstance(getattr(kiln, name), type(kiln.f32))
    and name != "__version__"
]


@pytest.mark.parametrize("name", [n for n in PUBLIC if n != "__version__"])
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(kiln, name)), f"kiln.{name} has no docstring"


@pytest.mark.parametrize("name", NEEDS_EXAMPLE)
def test_every_public_function_and_class_shows_an_example(name):
    assert ">>>" in (inspect.getdoc(getattr(kiln, name)) or ""), f"kiln.{name}'s docstring shows no example"


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = set()
    for name in NEEDS_EXAMPLE:
        for test in finder.find(getattr(kiln, name), f"kiln.{name}", globs={"np": np, "kiln": kiln}):
            if test.examples and test.name not in seen:
                seen.add(test.name)
                yield test


@pytest.mark.parametrize("test", list(_doctests()), ids=lambda t: t.name)
def test_public_docstring_examples_print_what_they_show(test):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{test.name}: {runner.failures} example(s) print something else (see output)"


@pytest.mark.parametrize(
    "x_shape, w_shape, options, message",
    [
        ((1, 2, 4, 4), (1, 3, 2, 2), {}, "input has 2 channels, weight expects 3"),
        ((1, 2, 4), (1, 2, 2, 2), {}, "NCHW input and an FCHW weight"),
        ((1, 2, 2, 2), (1, 2, 3, 3), {}, "does not fit"),
        ((1, 2, 4, 4), (1, 2, 2, 2), {"stride": 0}, "stride >= 1"),
    ],
)
def test_eager_conv2d_refuses_what_the_traced_one_refuses(x_shape, w_shape, options, message):
    x, w = np.ones(x_shape, np.float32), np.ones(w_shape, np.float32)
    with pytest.raises(kiln.ShapeError, match=message):
        kiln.conv2d(x, w, **options)
    with pytest.raises(kiln.ShapeError, match=message):
        kiln.compile(lambda a, b: kiln.conv2d(a, b, **options))(x, w)
