"""Docs that cannot drift: the README's dependency list is pyproject.toml's, and the before/after IR
in the pass modules' docstrings is what running the pass on the "before" prints.

The README's and docs/'s examples themselves are run by the Sybil set-up in conftest.py."""

import ast
import os
import re

import pytest

import kiln.passes
from kiln.dialects import parse_ir, print_ir
from kiln.passes import (
    autodiff,
    cache_read,
    default_schedule,
    gpu_default_schedule,
    loop_transforms,
    lower_scan,
    lower_tensor_to_affine,
    outline_kernels,
    vectorize,
)
from kiln.passes.registry import PASSES, run_passes
from kiln.passes.schedule import apply_step

tomllib = pytest.importorskip("tomllib")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def requirement_names(requirements):
    """`["numpy>=2.0", "sybil[pytest]>=9"]` -> `["numpy", "sybil"]`."""
    return [re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements]


def test_the_readme_lists_what_pyproject_installs():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    readme = " ".join(open(os.path.join(ROOT, "README.md")).read().split())
    listed = re.search(r"\(dependencies: ([^)]*)\); the `test` extra adds ([^(]*) \(", readme)
    assert listed, "README.md's Set-up no longer says what pyproject.toml installs"
    dependencies, test_extra = (re.split(r", | and ", group) for group in listed.groups())
    assert dependencies == requirement_names(project["dependencies"])
    assert test_extra == requirement_names(project["optional-dependencies"]["test"])


def step(*steps):
    def apply(module):
        for s in steps:
            apply_step(module.body.ops[0], s)
        return module

    return apply


# What turns each module's "Before" into its "After", as its docstring says.
DOCSTRING_EXAMPLES = {
    lower_tensor_to_affine: lambda module: run_passes(module, ["lower-tensor-to-affine"]),
    lower_scan: lambda module: run_passes(module, ["lower-tensor-to-affine"]),
    autodiff: lambda module: run_passes(module, ["value-and-grad"]),
    loop_transforms: step(("split", "k0.j", 8)),
    vectorize: step(("vectorize", "k0.j", 8)),
    cache_read: step(("cache_read", "k0.j.o", "b")),
    default_schedule: lambda module: run_passes(module, ["default-schedule{vector-bits=256 threads=false}"]),
    gpu_default_schedule: lambda module: run_passes(module, ["gpu-default-schedule"]),
    outline_kernels: lambda module: run_passes(module, ["outline-kernels"]),
}


def literal_blocks(docstring):
    """The `Before...::` and `After...::` literal blocks of a docstring that hold a whole function."""
    blocks = {}
    for match in re.finditer(r"([Bb]efore|[Aa]fter)[^:]*?::\n\n((?:    .*\n|\n)+)", docstring + "\n"):
        text = "\n".join(line[4:] for line in match.group(2).rstrip().splitlines())
        if text.startswith("func.func"):
            blocks[match.group(1).capitalize()] = text
    return blocks


@pytest.mark.parametrize("module", DOCSTRING_EXAMPLES, ids=[m.__name__.rsplit(".", 1)[1] for m in DOCSTRING_EXAMPLES])
def test_a_pass_docstrings_before_becomes_its_after(module):
    blocks = literal_blocks(module.__doc__)
    assert set(blocks) == {"Before", "After"}, f"{module.__name__}'s docstring has no whole-function before/after"
    result = DOCSTRING_EXAMPLES[module](parse_ir(blocks["Before"]))
    printed = print_ir(result, locations=False).splitlines()
    function = "\n".join(line[2:] for line in printed[1:-1])  # inside `module { ... }`
    assert function == blocks["After"]


def test_every_pass_module_shows_its_ir_before_and_after():
    modules = {fn.__module__ for fn in PASSES.values()}
    for name in modules:
        source = open(os.path.join(os.path.dirname(kiln.passes.__file__), name.rsplit(".", 1)[1] + ".py")).read()
        docstring = ast.get_docstring(ast.parse(source))
        assert "Before" in docstring and "After" in docstring, f"{name}'s docstring shows no before/after IR"


def project_text_files():
    """The files a user reads or meets in messages: README, docs, examples, bench and kiln's code."""
    for top in ("README.md", "docs", "examples", "bench", "compiler", "dialects", "passes", "runtime"):
        path = os.path.join(ROOT, top)
        walked = [(path, [], [""])] if os.path.isfile(path) else os.walk(path)
        for folder, _, names in walked:
            for name in names:
                full = os.path.join(folder, name) if name else folder
                if full.endswith((".md", ".py")):
                    yield full


def test_no_text_installs_kiln_from_the_package_index():
    # "kiln" on the package index is another project: `pip install kiln[onnx]` would install
    # that. kiln installs from its checkout (`pip install -e '.[onnx]'`).
    wrong = re.compile(r"pip install\s+['\"]?kiln\b")
    found = [
        f"{os.path.relpath(path, ROOT)}:{n}"
        for path in project_text_files()
        for n, line in enumerate(open(path, encoding="utf-8"), 1)
        if wrong.search(line)
    ]
    assert list(project_text_files()) and not found, found


# What each fence language means to the test suite (conftest.py): run, or an illustration.
RUN_BLOCKS = {"python", "console"}
ILLUSTRATIONS = {"text", "sh", "c"}


def fenced_blocks(path):
    """(line, language, the line before it) of every fenced block of the Markdown file `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, inside = [], False
    for n, line in enumerate(lines):
        if line.startswith("```"):
            if not inside:
                blocks.append((n + 1, line[3:].strip(), lines[n - 1] if n else ""))
            inside = not inside
    assert not inside, f"{path}: a fenced block is never closed"
    return blocks


def test_every_doc_block_is_run_or_marked_as_an_illustration():
    # README.md promises exactly this: python and console blocks run (or say why not), and the
    # blocks that are not run say so by their language. An unmarked ``` block would be neither.
    docs = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", name) for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md")
    )
    unmarked, run = [], 0
    for path in docs:
        for line, language, before in fenced_blocks(path):
            where = f"{os.path.relpath(path, ROOT)}:{line}"
            if language in RUN_BLOCKS:
                skip = re.match(r'<!-- skip: next "(.+)" -->$', before.strip())
                assert skip or "skip" not in before, f"{where}: a skip without its reason in quotes"
                run += not skip
            elif language not in ILLUSTRATIONS:
                unmarked.append(f"{where}: ```{language}")
    assert not unmarked, f"blocks neither run nor marked as illustrations ({', '.join(ILLUSTRATIONS)}): {unmarked}"
    assert run > 40  # the suite runs most of them


def test_onnx_md_quotes_the_resnet_figures_benchmarks_md_records():
    # Two documents giving one measurement must give the same numbers.
    onnx_md = " ".join(open(os.path.join(ROOT, "docs", "onnx.md"), encoding="utf-8").read().split())
    benchmarks = open(os.path.join(ROOT, "docs", "benchmarks.md"), encoding="utf-8").read()
    row = re.search(
        r"\| ResNet-50 from ONNX, batch 1 / 8 \| (\d+) ms / (\d+) ms .*?ONNX Runtime ([\d.]+) / (\d+) ms", benchmarks
    )
    assert row, "benchmarks.md has no ResNet-50 from ONNX row"
    kiln1, kiln8, ort1, ort8 = row.groups()
    assert f"{kiln1} ms a call at batch 1 against onnxruntime's {ort1} ms, {kiln8} ms against {ort8} ms" in onnx_md
