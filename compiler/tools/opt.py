"""``kiln opt``: IR text in, passes run, IR text out, as ``mlir-opt`` and ``xdsl-opt`` do.

    kiln opt tests/ir/fuse_dense.mlir -p 'canonicalize,fuse{max-places=4}'
    kiln dump examples/mlp.py:predict --stage optimized | kiln opt - -p lower-tensor-to-affine
    kiln opt --list-passes

The file (``-`` for standard input) is parsed with ``kiln.dialects.parse_ir`` and verified,
the pipeline (``registry.parse_pipeline``'s syntax) runs with a verification after each
pass, and the module is printed to standard output or ``-o``; without a pipeline the IR
round-trips. Like mlir-opt, the output leaves out ``loc(...)`` unless asked
(``--print-debuginfo``), and ``--print-ir-after-all`` writes each pass's result to standard
error under ``// -----// IR Dump After <pass> //----- //``. Every error (unreadable file,
parse error at file:line:col, unknown pass or option, IR that does not verify) is a
KilnError, which the command line prints as one line.
"""

from __future__ import annotations

import sys

from kiln.dialects import parse_ir, print_ir, verify
from kiln.errors import KilnError
from kiln.passes.registry import SPECS, parse_pipeline, run_passes

STDIN = "-"


def add_opt(commands) -> None:
    """The ``opt`` subcommand's parser, under `commands` (argparse subparsers)."""
    opt = commands.add_parser(
        "opt", help="run passes on an IR file and print the result (as mlir-opt does); --list-passes lists them"
    )
    opt.add_argument("file", nargs="?", metavar="FILE.mlir", help="the IR to read, or - for standard input")
    opt.add_argument(
        "-p",
        "--pass-pipeline",
        default="",
        metavar="PIPELINE",
        help="passes separated by commas, options in braces: 'canonicalize,fuse{max-places=4},dce' "
        "(default: none; the IR is parsed, verified and printed)",
    )
    opt.add_argument(
        "-o", "--output", default=STDIN, metavar="FILE", help="where to write the result (default: stdout)"
    )
    opt.add_argument("--list-passes", action="store_true", help="list every pass with its summary and options")
    opt.add_argument(
        "--print-ir-after-all", action="store_true", help="print the IR after each pass to stderr, under a header"
    )
    opt.add_argument("--print-debuginfo", action="store_true", help="print each op's loc(...) (left out by default)")
    opt.add_argument("--generic", action="store_true", help="print every op in MLIR's generic form")
    opt.set_defaults(run=cmd_opt)


def cmd_opt(args) -> int:
    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    if args.file is None:
        raise KilnError("kiln opt needs an IR file (or - for standard input), or --list-passes")
    entries = parse_pipeline(args.pass_pipeline)  # a mistyped pipeline fails before the file is read
    text, filename = _read(args.file)
    module = parse_ir(text, filename)
    verify(module)

    def dump(name, result):
        sys.stderr.write(f"// -----// IR Dump After {name} //----- //\n{_text(result, args)}\n")

    module = run_passes(module, entries, after_each=dump if args.print_ir_after_all else None)
    _write(args.output, _text(module, args))
    return 0


def _text(module, args) -> str:
    return print_ir(module, locations=args.print_debuginfo, generic=args.generic)


def _read(path: str) -> tuple:
    """(the text, the name parse errors give it)."""
    if path == STDIN:
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except (OSError, UnicodeDecodeError) as exc:
        raise KilnError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _write(path: str, text: str) -> None:
    if path == STDIN:
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise KilnError(f"cannot write {path}: {exc.strerror or exc}") from None


def list_passes() -> str:
    """Every pass of the pass table: its name and summary, then its options indented."""
    width = max(len(name) for name in SPECS)
    lines = []
    for name, spec in SPECS.items():
        lines.append(f"{name:<{width}}  {spec.summary}")
        for option in spec.options:
            lines.append(
                f"  {option.name}=<{option.type_name}>  {option.help} (default {option.spell(option.default)})"
            )
    return "\n".join(lines) + "\n"
