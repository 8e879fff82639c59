"""The pass table and pass pipelines: every declared pass is in the table, each option's declared
default is the pass function's own, and `name{key=value}` entries parse, run, or fail naming
what is wrong."""

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import kiln
import kiln.passes
from kiln.dialects import parse_ir, print_ir
from kiln.errors import PassPipelineError, VerificationError
from kiln.interpreters.tensor_interpreter import run_function
from kiln.passes import registry
from kiln.passes.pass_table import PASS_TABLE, PASSES, SPECS
from kiln.passes.registry import PassEntry, parse_pipeline, run_passes

SOFTMAX = """
func.func @f(%x: tensor<4x100xf32>) -> tensor<4x100xf32> {
  %0 = kiln.exp %x : tensor<4x100xf32>
  %1 = kiln.reduce_sum %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x100xf32>) -> tensor<4x1xf32>
  %2 = kiln.broadcast_to %1 : (tensor<4x1xf32>) -> tensor<4x100xf32>
  %3 = kiln.div %0, %2 : tensor<4x100xf32>
  func.return %3 : tensor<4x100xf32>
}
"""

TIMES_ONE = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.constant dense<1.0> : tensor<f32>
  %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<4xf32>
  %2 = kiln.mul %x, %1 : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
"""


def declared_passes():
    """(module, function) of every function a module of kiln.passes declares a pass."""
    for info in pkgutil.iter_modules(kiln.passes.__path__):
        module = importlib.import_module(f"kiln.passes.{info.name}")
        for _, fn in inspect.getmembers(module, inspect.isfunction):
            if hasattr(fn, "pass_spec") and fn.__module__ == module.__name__:
                yield module.__name__, fn


def test_every_declared_pass_is_in_the_table():
    declared = list(declared_passes())
    missing = [f"{module}.{fn.__name__}" for module, fn in declared if fn not in PASS_TABLE]
    assert not missing, f"declared with declare_pass but not in passes/pass_table.py: {missing}"
    assert len(declared) == len(PASS_TABLE) == len(PASSES)


def test_the_table_holds_the_passes_the_compiler_runs():
    assert {
        "emulate-unsupported-floats",
        "canonicalize",
        "cse",
        "dce",
        "rematerialize",
        "fuse",
        "plan-memory",
        "value-and-grad",
        "lower-tensor-to-affine",
        "lower-tensor-to-affine-gpu",
        "default-schedule",
        "gpu-default-schedule",
    } <= set(PASSES)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_options_default_is_the_pass_functions_own(name):
    spec = SPECS[name]
    parameters = inspect.signature(spec.function).parameters
    assert list(parameters)[0] in ("module", "function")  # a module pass, or one made by function_pass
    assert [o.keyword for o in spec.options] == list(parameters)[1:], "every keyword an option, every option a keyword"
    for option in spec.options:
        assert parameters[option.keyword].default == option.default, option.name
        assert type(option.default) is option.type, option.name
        assert option.parse(option.spell(option.default)) == option.default  # the default is accepted
        assert option.help and spec.summary


def test_a_plain_name_list_and_a_pipeline_run_the_same_passes():
    seen = []
    by_names = run_passes(parse_ir(TIMES_ONE), ["canonicalize", "dce"], after_each=lambda n, m: seen.append(n))
    by_pipeline = run_passes(parse_ir(TIMES_ONE), "canonicalize, dce")
    assert seen == ["canonicalize", "dce"]
    assert print_ir(by_names) == print_ir(by_pipeline)
    assert "kiln.mul" not in print_ir(by_names)


def test_options_reach_the_pass_and_after_each_sees_the_entry_as_written():
    seen = []
    module = run_passes(parse_ir(SOFTMAX), ["fuse{row-buffer-bytes=0}"], after_each=lambda n, m: seen.append(n))
    assert seen == ["fuse{row-buffer-bytes=0}"]
    function = module.body.ops[0]
    assert [op.name for op in function.body.ops] == ["kiln.exp", "kiln.fused", "func.return"]
    assert "row_buffer" in print_ir(run_passes(parse_ir(SOFTMAX), ["fuse"]))


@pytest.mark.parametrize("pipeline", ["fuse", "fuse{max-places=1}", "fuse{row-buffer-bytes=0}", "fuse{max-places=64}"])
def test_fusion_options_change_kernels_not_results(pipeline):
    x = np.random.default_rng(3).standard_normal((4, 100)).astype(np.float32)
    want = run_function(parse_ir(SOFTMAX).body.ops[0], [x])[0]
    got = run_function(run_passes(parse_ir(SOFTMAX), [pipeline]).body.ops[0], [x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_replaced_table_entry_is_what_runs(monkeypatch):
    # Planted faults (tests/test_bisect.py) replace a pass in PASSES; run_passes must call that one.
    calls = []
    monkeypatch.setitem(registry.PASSES, "cse", lambda module: calls.append(module) or module)
    module = parse_ir(SOFTMAX)
    run_passes(module, ["cse"])
    assert calls == [module]


def test_parse_pipeline():
    entries = parse_pipeline(" canonicalize , fuse{max-places=4 row-buffer-bytes=0},default-schedule{threads}")
    assert [e.text for e in entries] == [
        "canonicalize",
        "fuse{max-places=4 row-buffer-bytes=0}",
        "default-schedule{threads=true}",
    ]
    assert entries[1].keywords() == {"max_places": 4, "row_buffer_bytes": 0}
    assert parse_pipeline("builtin.module(cse,dce)") == [PassEntry("cse"), PassEntry("dce")]
    assert parse_pipeline("") == parse_pipeline("builtin.module()") == []
    assert parse_pipeline('default-schedule{vector-bits="128" threads=0}')[0].keywords() == {
        "vector_bits": 128,
        "threads": False,
    }


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("cse,fusee", "column 5: unknown pass 'fusee' (did you mean 'fuse'?); the passes: canonicalize, cse, dce,"),
        (
            "canonicalize,fuse{max-size=8},dce",
            "column 19: pass fuse has no option 'max-size'; its options: max-places: int (default 8), "
            "row-buffer-bytes: int (default 16384)",
        ),
        ("cse{max-places=8}", "pass cse has no option 'max-places'; it takes no options"),
        ("fuse{max-places=eight}", "option max-places of pass fuse takes an int, not 'eight'"),
        ("fuse{max-places=0}", "option max-places of pass fuse must be positive, not '0'"),
        ("fuse{row-buffer-bytes=2000000}", "row-buffer-bytes of pass fuse must be between 0 and 1048576"),
        ("plan-memory{alignment=48}", "alignment of pass plan-memory must be a power of two, 8 or more, not '48'"),
        ("plan-memory{alignment=4}", "must be a power of two, 8 or more, not '4'"),
        ("default-schedule{threads=yes}", "option threads of pass default-schedule takes true or false, not 'yes'"),
        ("default-schedule{vector-bits=96}", "must be a power of two, 64 or more, not '96'"),
        ("fuse{max-places}", "option max-places of pass fuse needs a value (max-places: int (default 8))"),
        ("fuse{max-places=1 max-places=2}", "column 19: option max-places of pass fuse is given twice"),
        ("fuse{max-places=3", "column 18: expected '}'"),
        ("cse dce", "column 5: expected ',' between passes"),
        ("cse,", "column 5: expected a pass name"),
        ("builtin.module(cse", "expected ')' to end builtin.module(...)"),
        ("func.func(cse)", "func.func(...) nests a pipeline; kiln's passes run on the whole module"),
    ],
)
def test_a_bad_pipeline_says_what_is_wrong(pipeline, message):
    with pytest.raises(PassPipelineError) as info:
        parse_pipeline(pipeline)
    assert message in str(info.value)
    assert str(info.value).startswith(f"pass pipeline {pipeline!r}, column ")
    assert isinstance(info.value, ValueError) and isinstance(info.value, kiln.errors.KilnError)


def test_run_passes_checks_every_entry_before_running_any():
    module = parse_ir(SOFTMAX)
    before = print_ir(module)
    with pytest.raises(PassPipelineError, match="unknown pass 'dcee'"):
        run_passes(module, ["fuse", "dcee"])
    assert print_ir(module) == before


def test_max_iterations_bounds_canonicalize():
    # x * 1 is rewritten in the first round; a second finds nothing left to do.
    assert "kiln.mul" not in print_ir(run_passes(parse_ir(TIMES_ONE), ["canonicalize{max-iterations=2}"]))
    with pytest.raises(VerificationError, match="did not settle after 1 iterations.*still firing: times_or_over_one"):
        run_passes(parse_ir(TIMES_ONE), ["canonicalize{max-iterations=1}"])
