"""The import rules of the house, checked on the source so they stay true.

Layers depend downward only: ``kiln.dialects`` <- ``kiln.passes`` <- ``kiln`` (the
compiler) -> ``kiln.runtime``; the runtime knows no IR; code generators do not import the
front end. No module imports another module's ``_private`` names, there are no import
cycles, and imports inside functions are kept for what needs them (the command line
loading a subcommand's heavy modules only when it runs), never to dodge a cycle. Outside
``kiln.dialects`` nothing edits a block's op list or an op's parent by hand: passes go
through ``kiln.dialects.rewriter``.
"""

import ast
import pathlib

import networkx as nx
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"compiler": "kiln", "dialects": "kiln.dialects", "passes": "kiln.passes", "runtime": "kiln.runtime"}

# What each layer may import from kiln (by module prefix). A module matches its longest prefix.
ALLOWED = {
    "kiln.dialects": ("kiln.dialects",),
    "kiln.passes": ("kiln.dialects", "kiln.passes"),
    "kiln.runtime": ("kiln.runtime",),
    "kiln.interpreters": ("kiln.dialects", "kiln.interpreters", "kiln.errors"),
    "kiln.frontend": ("kiln.dialects", "kiln.passes", "kiln.frontend", "kiln.errors", "kiln.version"),
    "kiln.codegen": ("kiln.dialects", "kiln.passes", "kiln.codegen", "kiln.errors", "kiln.runtime"),
}

# The tools the driver may use: the pipeline reads tuned schedules, and CompiledFunction.profile.
DRIVER_USES_TOOLS = {"kiln.tools.tuning_db", "kiln.tools.profiler"}
# Private attributes of other libraries' objects that their own APIs name with an underscore.
# numpy's _ARRAY_API is its C-API table, the capsule every extension's import_array() reads.
FOREIGN_PRIVATE_API = {"_fields", "_getframe", "_asdict", "_replace", "_ARRAY_API"}

# Imports inside functions, each with the reason it is late. Nothing here may break a cycle.
LATE_IMPORTS = {
    # The command line starts fast: a subcommand's modules load when that subcommand runs.
    ("kiln.tools.cli", "kiln.tools.tuner"),
    ("kiln.tools.cli", "kiln.tools.gpu_tuner"),
    ("kiln.tools.cli", "kiln.tools.tuning_db"),
    ("kiln.tools.cli", "kiln.tools.bisect"),
    ("kiln.tools.cli", "kiln.tools.build"),
    ("kiln.tools.cli", "kiln.tools.build_cuda"),
    # The ONNX front end needs the optional onnx package: loaded only for a model.onnx target.
    ("kiln.tools.targets", "kiln.onnx"),
    ("kiln.tools.targets", "kiln.onnx.graph"),  # the message to give when that import finds no onnx
    # kiln.onnx.Backend subclasses onnx's own Backend: it loads (with onnx) on first use.
    ("kiln.onnx", "kiln.onnx.backend"),
}


def _modules():
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


MODULES = dict(_modules())


def _imports(name, path):
    """(imported module, imported names, is_late) for every kiln import in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    late = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kiln"):
                    yield alias.name, (), id(node) in late
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith("kiln"):
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in MODULES:  # `from kiln.codegen import llvm_target` imports a module
                    yield target, (), id(node) in late
                else:
                    yield base, (alias.name,), id(node) in late


EDGES = [(name, target, names, late) for name, path in MODULES.items() for target, names, late in _imports(name, path)]


def _layer(module):
    matches = [p for p in ALLOWED if module == p or module.startswith(p + ".")]
    return max(matches, key=len) if matches else None


def test_every_module_is_found():
    assert {"kiln.jit", "kiln.frontend.tracing", "kiln.codegen.llvm_codegen", "kiln.dialects.ir"} <= set(MODULES)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_downward_only(layer):
    wrong = [
        f"{source} imports {target}"
        for source, target, _, _ in EDGES
        if _layer(source) == layer and not any(target == a or target.startswith(a + ".") for a in ALLOWED[layer])
    ]
    assert not wrong, "\n".join(wrong)


def test_no_private_names_cross_modules():
    wrong = [
        f"{source} imports {name} from {target}"
        for source, target, names, _ in EDGES
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not wrong, "\n".join(wrong)


def test_late_imports_have_a_reason():
    wrong = [
        f"{source} imports {target} inside a function"
        for source, target, _, late in EDGES
        if late and (source, target) not in LATE_IMPORTS
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    # A package's own __init__ runs before its modules, so an import of the package itself (`from kiln import
    # __version__`) is an edge to it like any other; modules inside a package do not depend on its __init__.
    graph.add_edges_from((s, t) for s, t, _, _ in EDGES if t in MODULES and s != t)
    cycles = list(nx.simple_cycles(graph, length_bound=6))
    assert not cycles, "\n".join(" -> ".join(c + [c[0]]) for c in cycles[:10])


def test_the_driver_uses_only_the_tools_named():
    wrong = [
        f"{source} imports {target}"
        for source, target, _, _ in EDGES
        if _layer(source) is None
        and source not in ("kiln", "kiln.__main__")  # the front door re-exports the public tools
        and not source.startswith("kiln.tools")
        and target.startswith("kiln.tools.")
        and target not in DRIVER_USES_TOOLS
    ]
    assert not wrong, "\n".join(wrong)


def _private_attributes_defined(tree) -> set:
    """The `_names` a module defines: functions, classes, assignments, and `self._x = ...`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {n for n in names if n.startswith("_")}


def test_no_module_reads_another_modules_private_attributes():
    wrong = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        own = _private_attributes_defined(tree) | FOREIGN_PRIVATE_API
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in own
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not wrong, "\n".join(wrong)


# Hand edits of IR structure allowed outside kiln.dialects, each with its reason. Everything
# else edits IR through kiln.dialects.rewriter, which keeps blocks, parents and use lists in step.
HAND_EDITS_ALLOWED = {
    # The OpenMP emitter's own tree of parallel regions (an LLVM-side object, not an IR op).
    ("kiln.codegen.llvm_parallel", "self.parent"),
}
_LIST_EDITS = {"append", "extend", "insert", "remove", "pop", "clear", "reverse", "sort"}


def _hand_edits(tree):
    """(line, text) of each store to an `.ops` or `.parent` attribute, each store into or
    deletion from `x.ops[...]`, and each call of a list method that edits `x.ops`. (A list
    read into a local first, `body = block.ops`, hides its edits from this scan.)"""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    edits_attribute = isinstance(sub, ast.Attribute) and sub.attr in ("ops", "parent")
                    edits_item = isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Attribute)
                    if (edits_attribute and isinstance(sub.ctx, ast.Store)) or (
                        edits_item and sub.value.attr == "ops" and isinstance(sub.ctx, (ast.Store, ast.Del))
                    ):
                        yield node.lineno, ast.unparse(sub)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _LIST_EDITS:
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "ops":
                yield node.lineno, ast.unparse(node.func)


def test_ir_is_edited_through_the_rewriter():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for name, path in MODULES.items()
        if _layer(name) != "kiln.dialects"
        for line, text in _hand_edits(ast.parse(path.read_text(), str(path)))
        if (name, text) not in HAND_EDITS_ALLOWED
    ]
    assert not wrong, "edit IR with kiln.dialects.rewriter, not by hand:\n" + "\n".join(wrong)


def test_the_hand_edit_scan_finds_hand_edits():
    source = "block.ops.insert(0, op)\nop.parent = block\nblock.ops[1:2] = new\nblock.ops = []\ndel b.ops[0]\n"
    found = sorted(text for _, text in _hand_edits(ast.parse(source)))
    assert found == sorted(["block.ops.insert", "op.parent", "block.ops[1:2]", "block.ops", "b.ops[0]"])
    assert not list(_hand_edits(ast.parse("for op in block.ops[:-1]:\n    n = len(op.parent.ops)\n")))
