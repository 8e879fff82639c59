"""The README and docs/ are tests: their examples run, and the output they show is compared.

Sybil collects the Markdown files. In a ```python block that starts with `>>>` every shown
output is compared as in doctest; other Python blocks must run without error. A ```console
block is a shell session: each `$ kiln ...` line runs kiln's command line from the repository
root and what follows it, up to the next `$`, is the output it must print. A block that cannot
run here (it needs a GPU, or a file the reader has) is preceded by `<!-- skip: next "reason" -->`.
"""

import difflib
import doctest
import os
import shlex
import subprocess
import sys
import tempfile

from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = os.path.dirname(os.path.abspath(__file__))
# Documented examples compile into a cache of their own, as the tests do.
CACHE_DIR = tempfile.mkdtemp(prefix="kiln-docs-cache-")
os.environ["KILN_CACHE_DIR"] = CACHE_DIR
os.environ["KILN_TUNING_DB"] = os.path.join(CACHE_DIR, "tuning.yaml")  # not the user's records
CHECKER = doctest.OutputChecker()


def console_commands(source):
    """The `$ command` lines of a console block, each with the output shown after it."""
    commands = []
    for line in source.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif not commands:
            raise ValueError(f"a console block must start with a `$ command` line, not {line!r}")
        else:
            commands[-1][1].append(line)
    return [(command, "\n".join(output) + "\n" if output else "") for command, output in commands]


def run_console(example):
    """Run each `$ kiln ...` line of a console block and compare its output with the one shown."""
    for command, want in console_commands(example.parsed):
        argv = shlex.split(command)
        if argv[0] != "kiln":
            raise ValueError(f"console blocks run `kiln` commands only, not {command!r}")
        # Unbuffered, stdout and stderr interleave as they do on a terminal.
        result = subprocess.run(
            [sys.executable, "-m", "kiln.tools.cli", *argv[1:]],
            cwd=ROOT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        got = result.stdout
        if result.returncode != 0 or not CHECKER.check_output(want, got, doctest.ELLIPSIS):
            diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "shown", "printed"))
            return f"`{command}` exited with {result.returncode}; its output differs from the one shown:\n{diff}"
    return None


def chdir_to_root(namespace):
    """Examples name files relative to the repository root, as a reader in a checkout types them."""
    namespace["_cwd"] = os.getcwd()
    os.chdir(ROOT)


def restore_cwd(namespace):
    os.chdir(namespace["_cwd"])


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=doctest.ELLIPSIS),
        CodeBlockParser("console", run_console),
        SkipParser(),
    ],
    patterns=["README.md", "docs/*.md"],
    setup=chdir_to_root,
    teardown=restore_cwd,
).pytest()
