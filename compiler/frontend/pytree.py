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
