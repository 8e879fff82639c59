"""kiln's environment variables: declared once, read through kiln.runtime.config, listed alike."""

import ast
import pathlib
import re

import pytest

from kiln.runtime import config
from kiln.tools.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = [p for folder in ("compiler", "dialects", "passes", "runtime") for p in (ROOT / folder).rglob("*.py")]


def test_docs_runtime_md_carries_the_table_of_variables():
    assert config.markdown_table() in (ROOT / "docs" / "runtime.md").read_text()


def test_kiln_help_lists_every_variable(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for variable in config.VARIABLES.values():
        assert re.search(rf"^  {variable.name} +{re.escape(variable.help)}$", out, re.M), variable.name


def _environment_reads(tree):
    """The KILN_* names `tree` reads as os.environ[...], os.environ.get(...) or os.getenv(...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and node.args:
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and str(key.value).startswith("KILN_"):
            yield key.value


def test_no_module_reads_a_kiln_variable_but_the_config():
    readers = [
        f"{path.relative_to(ROOT)} reads {name}"
        for path in SOURCES
        if path != ROOT / "runtime" / "config.py"
        for name in _environment_reads(ast.parse(path.read_text()))
    ]
    assert not readers, "\n".join(readers)
    assert set(_environment_reads(ast.parse("os.environ.get('KILN_LOG'); os.environ['KILN_X']"))) == {
        "KILN_LOG",
        "KILN_X",
    }  # the scan sees both spellings


def test_every_variable_named_in_the_source_is_declared():
    named = set()
    for path in SOURCES:
        named |= set(re.findall(r"\bKILN_[A-Z_]+\b", path.read_text()))
    # The rest are the CUDA C's macros (KILN_LAUNCH, KILN_EMULATE, ...), written in upper case as C's are.
    macros = {n for n in named if n not in config.VARIABLES}
    assert set(config.VARIABLES) <= named
    assert not {n for n in macros if n.endswith(("_DIR", "_DB", "_THREADS", "_ARCH", "_ORDER", "_LOG"))}


def test_an_unset_or_empty_variable_takes_its_default(monkeypatch):
    for name, variable in config.VARIABLES.items():
        monkeypatch.delenv(name, raising=False)
        assert config.get(name) == variable.default
        monkeypatch.setenv(name, "")
        assert config.get(name) == variable.default


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("KILN_NUM_THREADS", "0", "KILN_NUM_THREADS must be a positive integer, got '0'"),
        ("KILN_NUM_THREADS", "four", "KILN_NUM_THREADS must be a positive integer, got 'four'"),
        ("KILN_EMULATE_THREADS", "65", "KILN_EMULATE_THREADS must be a number of host threads from 1 to 64"),
        ("KILN_EMULATE_ORDER", "backwards", "KILN_EMULATE_ORDER must be 'forward' or 'reverse'"),
    ],
)
def test_a_bad_value_raises_naming_the_variable(monkeypatch, name, text, message):
    monkeypatch.setenv(name, text)
    with pytest.raises(ValueError, match=re.escape(message)):
        config.get(name)


def test_flags_read_as_before(monkeypatch):
    for text, on in [("1", True), ("0", False), ("yes", True)]:
        monkeypatch.setenv("KILN_DEBUG", text)
        assert config.get("KILN_DEBUG") is on
    for text, on in [("1", True), ("OFF", False), ("no", False), ("false", False)]:
        monkeypatch.setenv("KILN_LOG", text)
        assert config.get("KILN_LOG") is on
    monkeypatch.setenv("KILN_TRACEBACK_FILTERING", "Off")
    assert config.get("KILN_TRACEBACK_FILTERING") is False
    monkeypatch.setenv("KILN_CUDA_ARCH", "  sm_90 ")
    assert config.get("KILN_CUDA_ARCH") == "sm_90"


def test_update_sets_a_value_over_the_environment_without_writing_it(monkeypatch):
    monkeypatch.setenv("KILN_NUM_THREADS", "3")
    try:
        config.update("KILN_NUM_THREADS", 2)
        assert config.get("KILN_NUM_THREADS") == 2
        assert config.os.environ["KILN_NUM_THREADS"] == "3"
    finally:
        config.update("KILN_NUM_THREADS", None)
    assert config.get("KILN_NUM_THREADS") == 3
    with pytest.raises(ValueError, match="KILN_EMULATE_ORDER is read from the environment"):
        config.update("KILN_EMULATE_ORDER", "reverse")
