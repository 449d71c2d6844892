"""Row filters written as text (public): ``"sex == 'M' and 30 <= age <= 39"``
(names that are not identifiers in backquotes, as in pandas: ```income>50K` == 1``)
→ a kernel predicate (`ektelo.col`), for `ektelo run --where` and
`Session(...).histogram(..., where="...")`.

Nothing is evaluated: the text is parsed with Python's `ast` and only
comparisons (chained too), ``in``/``not in`` a list of literals, ``and``,
``or``, ``not`` and parentheses are accepted; names are attributes, operands
literals. Given the public domain, every comparison is checked here, before
anything is spent, and errors are written in this syntax (not the Python
API's): on a binned attribute a threshold must be a bin edge and the
comparison one the bin counts decide (``<``, ``>=``, ``==`` the bin starting
at that edge), else the message names the nearest edges and what to write
(paper §3: a condition formula over the public domain).
"""

from __future__ import annotations

import ast
from typing import Any

from .domain import Attribute, Domain
from .errors import WhereError

__all__ = ["WhereError", "attributes_of", "parse_where"]

_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def parse_where(text: str, domain: Domain | None = None) -> Any:
    """Turn `sex == 'M' and 30 <= age <= 39` into a kernel predicate; with
    `domain`, check every attribute and threshold against it first."""
    import re

    from .predicates import col

    quoted: dict[str, str] = {}  # `income>50K`: names that are not identifiers

    def hide(match: re.Match[str]) -> str:
        quoted[f"__ektelo_q{len(quoted)}__"] = match.group(1)
        return f"__ektelo_q{len(quoted) - 1}__"

    source = re.sub(r"`([^`]+)`", hide, text)
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError as exc:
        raise WhereError(f"--where: cannot parse {text!r}: {exc.msg}") from None

    def literal(node: ast.AST) -> Any:
        try:
            return ast.literal_eval(node)
        except ValueError:
            shown = ast.unparse(node)
            raise WhereError(f"--where: expected a literal value, got {shown!r}") from None

    def convert(node: ast.AST) -> Any:
        if isinstance(node, ast.BoolOp):
            parts = [convert(v) for v in node.values]
            out = parts[0]
            for p in parts[1:]:
                out = (out & p) if isinstance(node.op, ast.And) else (out | p)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ~convert(node.operand)
        if isinstance(node, ast.Compare):
            terms = [node.left, *node.comparators]
            result = None
            for left, op, right in zip(terms, node.ops, terms[1:], strict=False):
                part = compare(left, op, right)
                result = part if result is None else (result & part)
            return result
        raise WhereError(f"--where: unsupported expression {ast.unparse(node)!r}")

    def compare(left: ast.AST, op: ast.cmpop, right: ast.AST) -> Any:
        if isinstance(op, ast.In | ast.NotIn):
            if not isinstance(left, ast.Name):
                raise WhereError("--where: 'in' needs an attribute name on its left")
            values = literal(right)
            if not isinstance(values, tuple | list | set):
                raise WhereError("--where: 'in' needs a tuple or list of values")
            name = quoted.get(left.id, left.id)
            for v in values:
                _check(domain, name, "==", v)
            pred = col(name).isin(list(values))
            return ~pred if isinstance(op, ast.NotIn) else pred
        symbol = _COMPARE.get(type(op))
        if symbol is None:
            raise WhereError(f"--where: unsupported comparison {type(op).__name__}")
        if isinstance(left, ast.Name) and not isinstance(right, ast.Name):
            name, value = left.id, literal(right)
        elif isinstance(right, ast.Name) and not isinstance(left, ast.Name):
            name, value, symbol = right.id, literal(left), _FLIP[symbol]
        else:
            raise WhereError("--where: each comparison needs one attribute and one value")
        name = quoted.get(name, name)
        _check(domain, name, symbol, value)
        column = col(name)
        return {
            "==": lambda: column == value,
            "!=": lambda: column != value,
            "<": lambda: column < value,
            "<=": lambda: column <= value,
            ">": lambda: column > value,
            ">=": lambda: column >= value,
        }[symbol]()

    return convert(tree)


def attributes_of(text: str) -> list[str]:
    """The attribute names a filter's text mentions (backquoted ones too), in
    order of appearance; the text must parse."""
    import re

    quoted = re.findall(r"`([^`]+)`", text)
    source = re.sub(r"`([^`]+)`", lambda m: f"__ektelo_q{quoted.index(m.group(1))}__", text)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise WhereError(f"--where: cannot parse {text!r}: {exc.msg}") from None
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            name = node.id
            if name.startswith("__ektelo_q"):
                name = quoted[int(name[len("__ektelo_q"):-2])]
            if name not in names:
                names.append(name)
    return names


def _check(domain: Domain | None, name: str, op: str, value: Any) -> None:
    """The comparison `name op value` against the public domain, or a
    WhereError in the filter's own syntax."""
    if domain is None:
        return
    if name not in domain:
        raise WhereError(f"--where: unknown attribute {name!r}; the table has {list(domain.names)}")
    attr = domain[name]
    shown = f"{name} {op} {value!r}"
    if attr.bins is not None:
        _check_binned(attr, op, value, shown)
    elif attr.values is not None:
        try:
            attr.code_of(value)
        except ValueError:
            raise WhereError(f"--where: `{shown}`: {value!r} is not {attr.describe()}") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise WhereError(
            f"--where: `{shown}`: {name} holds integer codes 0..{attr.size - 1}; compare it "
            f"with a number"
        )


def _check_binned(attr: Attribute, op: str, value: Any, shown: str) -> None:
    assert attr.bins is not None
    name, edges = attr.name, attr.bins
    listed = ", ".join(f"{e:g}" for e in edges[:8]) + (", …" if len(edges) > 8 else "")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WhereError(f"--where: `{shown}`: {name} is binned (edges {listed}); compare it "
                         f"with a number")
    v = float(value)
    if v not in edges:
        below, above = attr.nearest_edges(v)
        near = " and ".join(f"{e:g}" for e in (below, above) if e is not None)
        raise WhereError(
            f"--where: `{shown}`: {name} is binned and {v:g} is not a bin edge (nearest: "
            f"{near}); a threshold inside a bin cannot be answered from its counts"
        )
    if op in ("<=", ">"):
        i = edges.index(v)
        hint = (f"write `{name} {'<' if op == '<=' else '>='} {edges[i + 1]:g}` to "
                f"{'include' if op == '<=' else 'exclude'} the bin [{v:g}, {edges[i + 1]:g})"
                if i + 1 < len(edges) else f"write `{name} {'<' if op == '<=' else '>='} {v:g}`")
        raise WhereError(
            f"--where: `{shown}`: {name} is binned (edges {listed}): values equal to {v:g} "
            f"share a bin with larger ones, so use < or >= at a bin edge; {hint}"
        )
