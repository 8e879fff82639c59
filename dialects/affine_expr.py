"""Affine expressions and maps, as MLIR writes them.

An expression combines dimensions ``d0, d1, ...`` and integer constants with
``+``, ``*`` by a constant, ``floordiv``, ``ceildiv`` and ``mod`` by a positive
constant. The constructors simplify as they build (``d0 * 1`` is ``d0``,
``2 + 3`` is ``5``), so index arithmetic composed during lowering stays
readable: reading a ``4x6`` buffer as ``6x4`` gives
``(d0 * 4 + d1) floordiv 6`` and ``(d0 * 4 + d1) mod 6``.
"""

from __future__ import annotations

from dataclasses import dataclass


class AffineExpr:
    def __add__(self, other):
        return add(self, as_expr(other))

    def __radd__(self, other):
        return add(as_expr(other), self)

    def __mul__(self, other):
        return mul(self, as_expr(other))

    def __rmul__(self, other):
        return mul(as_expr(other), self)

    def __sub__(self, other):
        return add(self, mul(as_expr(other), Const(-1)))

    def __floordiv__(self, other):
        return floordiv(self, int(other))

    def __mod__(self, other):
        return mod(self, int(other))

    def render(self, names) -> str:
        """Text with dimension i written as names[i]."""
        return _render(self, names, 0)

    def __str__(self) -> str:
        return self.render([f"d{i}" for i in range(self.max_dim() + 1)])

    def max_dim(self) -> int:
        return max((child.max_dim() for child in self.children()), default=-1)

    def children(self):
        return ()

    def evaluate(self, dims) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class Const(AffineExpr):
    value: int

    def evaluate(self, dims):
        return self.value

    __str__ = AffineExpr.__str__


@dataclass(frozen=True)
class Dim(AffineExpr):
    index: int

    def max_dim(self):
        return self.index

    def evaluate(self, dims):
        return dims[self.index]

    __str__ = AffineExpr.__str__


@dataclass(frozen=True)
class Binary(AffineExpr):
    kind: str  # "+", "*", "floordiv", "ceildiv", "mod"
    lhs: AffineExpr
    rhs: AffineExpr

    def children(self):
        return (self.lhs, self.rhs)

    def evaluate(self, dims):
        a, b = self.lhs.evaluate(dims), self.rhs.evaluate(dims)
        return _FOLD[self.kind](a, b)

    __str__ = AffineExpr.__str__


_FOLD = {
    "+": lambda a, b: a + b,
    "*": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "ceildiv": lambda a, b: -(-a // b),
    "mod": lambda a, b: a % b,
}


def as_expr(value) -> AffineExpr:
    return value if isinstance(value, AffineExpr) else Const(int(value))


def add(a: AffineExpr, b: AffineExpr) -> AffineExpr:
    fa, fb = linear_form(a), linear_form(b)
    if fa is not None and fb is not None:  # keep sums canonical: d0 * 3 + d1 + 10
        terms = dict(fa[0])
        for d, c in fb[0].items():
            terms[d] = terms.get(d, 0) + c
        return from_linear_form(terms, fa[1] + fb[1])
    if isinstance(a, Const) and a.value == 0:
        return b
    if isinstance(b, Const) and b.value == 0:
        return a
    if isinstance(a, Const):  # constants go last, as MLIR prints them
        a, b = b, a
    return Binary("+", a, b)


def mul(a: AffineExpr, b: AffineExpr) -> AffineExpr:
    if isinstance(a, Const):
        a, b = b, a
    if not isinstance(b, Const):
        raise ValueError(f"affine expressions multiply only by constants: ({a}) * ({b})")
    if isinstance(a, Const):
        return Const(a.value * b.value)
    if b.value == 0:
        return Const(0)
    if b.value == 1:
        return a
    form = linear_form(a)
    if form is not None:
        return from_linear_form({d: c * b.value for d, c in form[0].items()}, form[1] * b.value)
    return Binary("*", a, b)


def _divide(kind, a: AffineExpr, divisor: int) -> AffineExpr:
    if divisor <= 0:
        raise ValueError(f"affine {kind} needs a positive constant, got {divisor}")
    if isinstance(a, Const):
        return Const(_FOLD[kind](a.value, divisor))
    if divisor == 1:
        return Const(0) if kind == "mod" else a
    return Binary(kind, a, Const(divisor))


def floordiv(a, divisor: int) -> AffineExpr:
    return _divide("floordiv", as_expr(a), divisor)


def ceildiv(a, divisor: int) -> AffineExpr:
    return _divide("ceildiv", as_expr(a), divisor)


def mod(a, divisor: int) -> AffineExpr:
    return _divide("mod", as_expr(a), divisor)


_PRECEDENCE = {"+": 1, "*": 2, "floordiv": 2, "ceildiv": 2, "mod": 2}


def _render(expr, names, parent: int) -> str:
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Dim):
        return names[expr.index]
    mine = _PRECEDENCE[expr.kind]
    left = _render(expr.lhs, names, mine - 1 if expr.kind == "+" else mine)
    if expr.kind == "+" and isinstance(expr.rhs, Const) and expr.rhs.value < 0:
        text = f"{left} - {-expr.rhs.value}"
    elif (
        expr.kind == "+"
        and isinstance(expr.rhs, Binary)
        and expr.rhs.kind == "*"
        and isinstance(expr.rhs.rhs, Const)
        and expr.rhs.rhs.value < 0
    ):
        text = f"{left} - {_render(mul(expr.rhs.lhs, Const(-expr.rhs.rhs.value)), names, mine)}"
    else:
        text = f"{left} {expr.kind} {_render(expr.rhs, names, mine)}"
    return f"({text})" if mine <= parent else text


@dataclass(frozen=True)
class AffineMap:
    """``affine_map<(d0, d1) -> (d0 + 1, d1)>``: results as expressions of `num_dims` dims."""

    num_dims: int
    results: tuple

    def __str__(self) -> str:
        dims = [f"d{i}" for i in range(self.num_dims)]
        return f"affine_map<({', '.join(dims)}) -> ({', '.join(r.render(dims) for r in self.results)})>"

    def evaluate(self, dims) -> tuple:
        return tuple(r.evaluate(dims) for r in self.results)


def dims_of(*exprs) -> set:
    """The indices of the dimensions the expressions use."""
    found, stack = set(), list(exprs)
    while stack:
        expr = stack.pop()
        if isinstance(expr, Dim):
            found.add(expr.index)
        stack.extend(expr.children())
    return found


def substitute(expr: AffineExpr, replacements) -> AffineExpr:
    """`expr` with dimension i replaced by replacements[i], simplified as it is rebuilt."""
    if isinstance(expr, Dim):
        return replacements[expr.index]
    if isinstance(expr, Const):
        return expr
    lhs, rhs = substitute(expr.lhs, replacements), substitute(expr.rhs, replacements)
    if expr.kind == "+":
        return add(lhs, rhs)
    if expr.kind == "*":
        return mul(lhs, rhs)
    return _divide(expr.kind, lhs, rhs.value)


def linear_form(expr: AffineExpr):
    """({dim: coefficient}, constant) if `expr` is a sum of scaled dims and a constant, else None."""
    if isinstance(expr, Const):
        return {}, expr.value
    if isinstance(expr, Dim):
        return {expr.index: 1}, 0
    if expr.kind == "+":
        a, b = linear_form(expr.lhs), linear_form(expr.rhs)
        if a is None or b is None:
            return None
        terms = dict(a[0])
        for d, c in b[0].items():
            terms[d] = terms.get(d, 0) + c
        return {d: c for d, c in terms.items() if c}, a[1] + b[1]
    if expr.kind == "*":
        a = linear_form(expr.lhs)
        return None if a is None else ({d: c * expr.rhs.value for d, c in a[0].items()}, a[1] * expr.rhs.value)
    return None


def from_linear_form(terms: dict, constant: int) -> AffineExpr:
    """The canonical expression: dims in order, each scaled once, the constant last."""
    expr = None
    for d in sorted(d for d, c in terms.items() if c):
        term = Dim(d) if terms[d] == 1 else Binary("*", Dim(d), Const(terms[d]))
        expr = term if expr is None else Binary("+", expr, term)
    if expr is None:
        return Const(constant)
    return expr if constant == 0 else Binary("+", expr, Const(constant))


def divide_in_range(expr: AffineExpr, divisor: int, extents) -> tuple:
    """(expr floordiv divisor, expr mod divisor), simplified knowing 0 <= d_i < extents[i].

    Terms whose coefficients the divisor divides (and the constant's multiple of it) move
    to the quotient whole, since (m * divisor + s) floordiv divisor = m + s floordiv
    divisor for any integers; a floordiv or mod already in `expr` counts as one term. If
    the rest stays within [0, divisor) it is the remainder; otherwise only the rest is
    divided. A reshape's index keeps each output dimension's own variables so: row q of
    a (256, 3136) view of a (256, 56, 56) array reads [r, q floordiv 56, q mod 56], not
    [r, ((r * 3136 + q) floordiv 56) mod 56, (r * 3136 + q) mod 56], and q still moves
    along contiguous memory where 56 holds whole vectors (see kiln.passes.vectorize)."""
    low, high = bounds(expr, extents)
    if 0 <= low and high < divisor:
        return Const(0), expr
    terms, constant = _term_form(expr)
    whole, rest = Const(constant // divisor), Const(constant % divisor)
    for term, c in terms.items():
        if c % divisor == 0:
            whole = whole + term * (c // divisor)
        else:
            rest = rest + term * c
    low, high = bounds(rest, extents)
    if 0 <= low and high < divisor:
        return whole, rest
    if whole == Const(0):
        return floordiv(expr, divisor), mod(expr, divisor)
    return whole + floordiv(rest, divisor), mod(rest, divisor)


def _term_form(expr: AffineExpr):
    """({term: coefficient}, constant): `expr` as a sum of scaled terms, each a dimension or
    a floordiv, ceildiv or mod expression taken whole."""
    if isinstance(expr, Const):
        return {}, expr.value
    if isinstance(expr, Dim) or expr.kind not in ("+", "*"):
        return {expr: 1}, 0
    if expr.kind == "*":
        terms, constant = _term_form(expr.lhs)
        return {t: c * expr.rhs.value for t, c in terms.items()}, constant * expr.rhs.value
    (a, ca), (b, cb) = _term_form(expr.lhs), _term_form(expr.rhs)
    terms = dict(a)
    for t, c in b.items():
        terms[t] = terms.get(t, 0) + c
    return {t: c for t, c in terms.items() if c}, ca + cb


def bounds(expr: AffineExpr, extents) -> tuple:
    """(smallest, largest) value of `expr` when each d_i ranges over [0, extents[i])."""
    if isinstance(expr, Const):
        return expr.value, expr.value
    if isinstance(expr, Dim):
        return 0, extents[expr.index] - 1
    (a, b), (c, d) = bounds(expr.lhs, extents), bounds(expr.rhs, extents)
    if expr.kind == "+":
        return a + c, b + d
    if expr.kind == "*":
        products = (a * c, a * d, b * c, b * d)
        return min(products), max(products)
    if expr.kind == "mod":
        return (a, b) if 0 <= a and b < c else (0, c - 1)
    fold = _FOLD[expr.kind]
    return fold(a, c), fold(b, c)
