"""Flatten nested tuples, lists and dicts into leaves and a structure, and back.

Dict keys are visited in sorted order, so ``{"w": ..., "b": ...}`` flattens to
``[b, w]`` whatever the insertion order (the leaf order of compiled signatures).
None is an empty node; a namedtuple keeps its type.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TreeDef:
    kind: str  # "leaf", "none", "tuple", "list", "dict" or "namedtuple"
    aux: object = None  # dict keys, or the namedtuple class
    children: tuple = ()

    def __hash__(self) -> int:
        # Structures are hashed on every call of a compiled function: remember the hash.
        try:
            return self._hash
        except AttributeError:
            object.__setattr__(self, "_hash", hash((self.kind, self.aux, self.children)))
            return self._hash

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


LEAF = TreeDef("leaf")
_END = object()


def _children(node):
    """(kind, aux, [(path suffix, child)]) for a container; None for a leaf."""
    if node is None:
        return "none", None, []
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return "namedtuple", type(node), [(f".{f}", v) for f, v in zip(node._fields, node)]
    if isinstance(node, (tuple, list)):
        kind = "tuple" if isinstance(node, tuple) else "list"
        return kind, None, [(f"[{i}]", v) for i, v in enumerate(node)]
    if isinstance(node, dict):
        try:
            keys = tuple(sorted(node))
        except TypeError:
            raise TypeError("dict keys of arguments and results must be sortable (use strings)") from None
        return "dict", keys, [(f"[{k!r}]", node[k]) for k in keys]
    return None


def flatten_with_paths(tree, prefix: str = ""):
    """([(path, leaf)], treedef), e.g. path "params['w1']" for a dict entry."""
    leaves = []

    def visit(node, path):
        info = _children(node)
        if info is None:
            leaves.append((path, node))
            return LEAF
        kind, aux, items = info
        return TreeDef(kind, aux, tuple(visit(child, path + suffix) for suffix, child in items))

    treedef = visit(tree, prefix)
    return leaves, treedef


def flatten(tree):
    leaves, treedef = flatten_with_paths(tree)
    return [leaf for _, leaf in leaves], treedef


def unflatten(treedef: TreeDef, leaves):
    leaves = iter(leaves)

    def build(node: TreeDef):
        if node.kind == "leaf":
            return next(leaves)
        if node.kind == "none":
            return None
        children = [build(c) for c in node.children]
        if node.kind == "tuple":
            return tuple(children)
        if node.kind == "list":
            return children
        if node.kind == "namedtuple":
            return node.aux(*children)
        return dict(zip(node.aux, children))

    result = build(treedef)
    if next(leaves, _END) is not _END:
        raise ValueError("too many leaves for the tree structure")
    return result


def reader(treedef: TreeDef):
    """A function of a tree that returns its leaves when the tree has exactly `treedef`'s
    structure with exactly its container types (a dict is a dict with those keys, a tuple is
    a tuple, not a subclass), else None: flatten for one known structure, without building
    its TreeDef again (a compiled function's fast path of calls)."""

    def build(node: TreeDef):
        if node.kind == "leaf":
            return lambda value, out: out.append(value) or True
        if node.kind == "none":
            return lambda value, out: value is None
        children = [build(child) for child in node.children]
        if node.kind == "dict":
            keys = node.aux

            def read_dict(value, out):
                if type(value) is not dict or len(value) != len(keys):
                    return False
                try:
                    return all(child(value[key], out) for key, child in zip(keys, children))
                except KeyError:
                    return False

            return read_dict
        kind = {"tuple": tuple, "list": list}.get(node.kind, node.aux)  # a namedtuple: its class

        def read_sequence(value, out):
            return (
                type(value) is kind
                and len(value) == len(children)
                and all(child(item, out) for item, child in zip(value, children))
            )

        return read_sequence

    read = build(treedef)

    def leaves(tree):
        out = []
        return out if read(tree, out) else None

    return leaves
