"""Large constants print elided, as MLIR's --mlir-elide-elementsattrs-if-larger does: the text
stays readable and still parses, and IR read from it refuses to run instead of making up data."""

import numpy as np
import pytest

import kiln
from kiln.dialects import ParseError, parse_ir, print_ir, verify
from kiln.dialects.elided import ElidedElements
from kiln.errors import ElidedConstantError
from kiln.interpreters.affine_interpreter import run_affine
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes.registry import run_passes
from kiln.tools.cli import main

ELIDED = "dense_resource<__elided__>"
W = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)  # 1 MiB


def predict(x):
    return np.tanh(x @ W) * 2.0


def lowered():
    return kiln.compile(predict).lower(kiln.f32[3, 512])


def constants(module):
    return [
        op.attributes.get("value", op.attributes.get("initial_value"))
        for op in module.walk()
        if op.name in ("kiln.constant", "memref.global")
    ]


@pytest.mark.parametrize("stage", ["tensor", "optimized", "affine", "scheduled"])
def test_a_megabyte_constant_dumps_in_a_few_kilobytes_and_the_text_parses(stage):
    text = lowered().text(stage)
    assert len(text) < 20_000 and text.count(ELIDED) == 1, text  # the full text is over 2 MB
    module = parse_ir(text)
    verify(module)
    body = text.split("module {", 1)[1]  # optimized and scheduled open with a summary comment
    assert print_ir(module) == "module {" + body  # the elided form prints back as it was
    (elided,) = [c for c in constants(module) if c.size == W.size]
    assert isinstance(elided, ElidedElements) and elided.shape == (512, 512) and elided.dtype == np.float32
    generic = lowered().text(stage, generic=True)  # MLIR's generic form elides the same way
    body = generic[generic.index('"builtin.module"') :]  # after the summary comment of some stages
    assert generic.count(ELIDED) == 1 and print_ir(parse_ir(body), generic=True) == body


@pytest.mark.parametrize("stage", ["tensor", "affine"])
def test_the_full_text_round_trips_every_bit(stage):
    text = lowered().text(stage, elide_constants=None)
    assert len(text) > 2 * W.nbytes and ELIDED not in text  # hex: two characters a byte
    module = parse_ir(text)
    assert print_ir(module) == text
    (full,) = [c for c in constants(module) if c.size == W.size]
    assert full.dtype == W.dtype and full.tobytes() == W.tobytes()


def test_kiln_dump_elides_by_default_and_prints_in_full_on_request(tmp_path, capsys):
    path = tmp_path / "model.py"
    path.write_text(
        "import numpy as np\nimport kiln\n"
        "W = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)\n"
        "def f(x: kiln.f32[3, 512]):\n    return np.tanh(x @ W)\n"
    )
    sizes = {}
    for flags in ([], ["--print-large-constants"], ["--elide-constants-over", str(W.size)]):
        assert main(["dump", f"{path}:f", "--stage", "affine", *flags]) == 0
        sizes[" ".join(flags)] = len(capsys.readouterr().out)
    assert sizes[""] < 8_000 < 2 * W.nbytes < sizes["--print-large-constants"]
    assert sizes[f"--elide-constants-over {W.size}"] == sizes["--print-large-constants"]  # N elements still print
    with pytest.raises(SystemExit):
        main(["dump", f"{path}:f", "--elide-constants-over", "-1"])
    assert "a number of elements" in capsys.readouterr().err


@pytest.mark.parametrize(
    "array",
    [
        np.arange(7, dtype=np.int32),  # a prime size
        np.array([np.nan, -0.0, np.inf, 1.0, -np.inf, 0.0, 2.5], np.float32),
        np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 1, 2, 3], np.int64),
        np.arange(7) % 2 == 0,
        np.arange(21, dtype=np.float64).reshape(3, 7)[:, ::-1],  # a reversed, non-contiguous view
    ],
    ids=["int32", "nan-inf-zeros", "int64-limits", "bool", "reversed-view"],
)
def test_elision_is_by_element_count(array):
    module = parse_ir(
        print_ir(
            kiln.compile(lambda x: x + array).lower(kiln.TensorSpec(array.shape, array.dtype)).pipeline.module("tensor")
        )
    )
    at_limit = print_ir(module, elide_constants=array.size)
    assert ELIDED not in at_limit
    (value,) = constants(parse_ir(at_limit))
    assert value.tobytes() == np.ascontiguousarray(array).tobytes()  # bits, so NaN and -0.0 count
    over = print_ir(module, elide_constants=array.size - 1)
    assert over.count(ELIDED) == 1
    (value,) = constants(parse_ir(over))
    assert isinstance(value, ElidedElements) and value.shape == array.shape and value.dtype == array.dtype


def test_splats_and_empty_constants_are_never_elided():
    splat, empty = np.full((64, 64), -0.0, np.float32), np.zeros((0, 5), np.float32)
    module = kiln.compile(lambda x, y: (x + splat, y + empty)).lower(kiln.f32[64, 64], kiln.f32[0, 5])
    text = print_ir(module.pipeline.module("tensor"), elide_constants=0)
    assert ELIDED not in text and "dense<-0.0> : tensor<64x64xf32>" in text and "tensor<0x5xf32>" in text


def test_ir_parsed_from_elided_text_refuses_to_run():
    low = lowered()
    x = np.ones((3, 512), np.float32)
    tensor = parse_ir(low.text("tensor"))
    with pytest.raises(ElidedConstantError, match=r"512x512 and dtype float32 was printed as dense_resource"):
        run_function(tensor.body.ops[-1], [x])
    affine = parse_ir(low.text("affine"))
    with pytest.raises(ElidedConstantError, match="print it in full"):
        run_affine(affine, [x, np.empty((3, 512), np.float32)])
    # The full text runs, and computes what numpy does: the elided case above is no accident.
    (got,) = run_function(parse_ir(low.text("tensor", elide_constants=None)).body.ops[-1], [x])
    np.testing.assert_allclose(got, np.tanh(x @ W) * 2.0, rtol=1e-5, atol=1e-5)


def test_elided_values_refuse_every_read():
    value = ElidedElements((4, 5), np.float32)
    for read in (np.asarray, lambda v: v + 1, lambda v: v.tobytes(), lambda v: v.astype(np.float64), lambda v: v[0]):
        with pytest.raises(ElidedConstantError):
            read(value)
    assert (value.shape, value.ndim, value.size, len(value)) == ((4, 5), 2, 20, 4)


def test_two_elided_constants_are_not_merged_by_cse():
    text = (
        "module {\n  func.func @f() -> (tensor<40xf32>, tensor<40xf32>) {\n"
        f"    %0 = kiln.constant {ELIDED} : tensor<40xf32>\n"
        f"    %1 = kiln.constant {ELIDED} : tensor<40xf32>\n"
        "    func.return %0, %1 : tensor<40xf32>, tensor<40xf32>\n  }\n}\n"
    )
    module = run_passes(parse_ir(text), ["cse"])
    assert print_ir(module).count(ELIDED) == 2


@pytest.mark.parametrize(
    "text, message",
    [
        ("kiln.constant dense_resource<blob1> : tensor<40xf32>", "read only as dense_resource<__elided__>"),
        (f"kiln.constant {ELIDED} : f32", "an elided constant needs a tensor type"),
    ],
)
def test_other_resources_are_a_parse_error(text, message):
    source = f"module {{\n  func.func @f() -> tensor<40xf32> {{\n    %0 = {text}\n    func.return %0 : tensor<40xf32>\n  }}\n}}\n"
    with pytest.raises(ParseError, match=message):
        parse_ir(source)


def test_print_ir_keeps_every_element_unless_asked():
    # The cache key, KILN_DUMP_DIR and the tuner print IR to hash or re-parse it: full by default.
    assert ELIDED not in print_ir(lowered().pipeline.module("tensor"))
    assert ELIDED not in lowered().pipeline.text("affine")
    with pytest.raises(ValueError, match="elide_constants is a number of elements"):
        print_ir(lowered().pipeline.module("tensor"), elide_constants=-1)
