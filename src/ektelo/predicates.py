"""Row predicates for the Private `where` transformation (§3 condition formulas).

Client side: a tiny AST built with `col`::

    ektelo.col("age").between(30, 39) & (ektelo.col("sex") == "M")

Comparisons (`==`, `!=`, `<`, `<=`, `>`, `>=`), `isin`, `between` (inclusive),
combined with `&`, `|`, `~`. Python's `and`/`or`/`not` are refused (they would
silently evaluate truthiness).

Kernel side: `compile_predicate` walks the tree accepting only these exact
classes, translates every operand to an attribute *code* against the public
domain, and returns a function of the code matrix built from kernel code only;
no client object ever sees a row. Each row is tested on its own values, so
`where` is 1-stable. Operands by attribute kind:
  * integer-coded attributes: numbers compared with the codes 0..size-1;
  * attributes with value labels: labels (an unknown label is an error);
    order comparisons follow the order of the labels in the domain;
  * binned attributes: a bin is named by one of its edges; only the exact
    comparisons `==`/`!=`/`isin` (the bin starting at that edge) and
    `<`/`>=` (values below / at least that edge) are allowed.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .domain import Attribute, Domain

__all__ = ["Predicate", "col", "compile_predicate"]

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

Mask = Callable[[np.ndarray], np.ndarray]


class Predicate:
    """A Boolean condition on one row; combine with `&`, `|`, `~`."""

    __slots__ = ()

    def __and__(self, other: Predicate) -> Predicate:
        return And(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return Or(self, other)

    def __invert__(self) -> Predicate:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError("combine predicates with &, | and ~ (not and/or/not)")


class Compare(Predicate):
    __slots__ = ("attr", "op", "value")

    def __init__(self, attr: str, op: str, value: Any):
        self.attr, self.op, self.value = attr, op, value

    def __repr__(self) -> str:
        return f"col({self.attr!r}) {self.op} {self.value!r}"


class IsIn(Predicate):
    __slots__ = ("attr", "values")

    def __init__(self, attr: str, values: Iterable[Any]):
        self.attr, self.values = attr, tuple(values)

    def __repr__(self) -> str:
        return f"col({self.attr!r}).isin({list(self.values)!r})"


class Between(Predicate):
    __slots__ = ("attr", "high", "low")

    def __init__(self, attr: str, low: Any, high: Any):
        self.attr, self.low, self.high = attr, low, high

    def __repr__(self) -> str:
        return f"col({self.attr!r}).between({self.low!r}, {self.high!r})"


class And(Predicate):
    __slots__ = ("parts",)

    def __init__(self, *parts: Predicate):
        self.parts = parts

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.parts)) + ")"


class Or(Predicate):
    __slots__ = ("parts",)

    def __init__(self, *parts: Predicate):
        self.parts = parts

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.parts)) + ")"


class Not(Predicate):
    __slots__ = ("part",)

    def __init__(self, part: Predicate):
        self.part = part

    def __repr__(self) -> str:
        return f"~{self.part!r}"


class Column:
    """A named attribute in a predicate: `col("age") >= 30`."""

    __slots__ = ("name",)
    __hash__ = None  # type: ignore[assignment]  # == builds a predicate

    def __init__(self, name: str):
        if type(name) is not str or not name:
            raise TypeError(f"an attribute name must be a non-empty str, got {name!r}")
        self.name = name

    def __eq__(self, value: Any) -> Predicate:  # type: ignore[override]
        return Compare(self.name, "==", value)

    def __ne__(self, value: Any) -> Predicate:  # type: ignore[override]
        return Compare(self.name, "!=", value)

    def __lt__(self, value: Any) -> Predicate:
        return Compare(self.name, "<", value)

    def __le__(self, value: Any) -> Predicate:
        return Compare(self.name, "<=", value)

    def __gt__(self, value: Any) -> Predicate:
        return Compare(self.name, ">", value)

    def __ge__(self, value: Any) -> Predicate:
        return Compare(self.name, ">=", value)

    def isin(self, values: Iterable[Any]) -> Predicate:
        """True when the attribute equals one of `values`."""
        return IsIn(self.name, values)

    def between(self, low: Any, high: Any) -> Predicate:
        """low ≤ attribute ≤ high (inclusive)."""
        return Between(self.name, low, high)

    def __bool__(self) -> bool:
        raise TypeError("a column is not a condition; compare it with a value")

    def __repr__(self) -> str:
        return f"col({self.name!r})"


def col(name: str) -> Column:
    """The attribute `name`, for building `where` predicates (Public)."""
    return Column(name)


# -- kernel side -------------------------------------------------------------------


def _code(attribute: Attribute, value: Any, op: str) -> float:
    """Translate one operand to the attribute's code scale (public values only)."""
    if attribute.values is not None:
        return float(attribute.code_of(value))
    if attribute.bins is not None:
        if op not in ("==", "!=", "<", ">="):
            raise ValueError(
                f"binned attribute {attribute.name!r} supports ==, !=, isin, < and >= with "
                f"a bin edge; write (col >= a) & (col < b) for a range"
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"attribute {attribute.name!r}: operand must be a number")
        v = float(value)
        edges = attribute.bins
        if v not in edges:
            raise ValueError(
                f"attribute {attribute.name!r} is binned: {value!r} is not one of its "
                f"edges {list(edges)}"
            )
        return float(edges.index(v))
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
        raise TypeError(
            f"attribute {attribute.name!r} is integer-coded: operand must be a number, "
            f"got {value!r}"
        )
    return float(value)


def compile_predicate(predicate: Any, domain: Domain) -> Mask:
    """A row-mask function for `predicate`, built from kernel code only.

    Only the library's exact predicate classes are accepted; every attribute
    must exist in `domain`; every operand is translated to a code here.
    """
    kind = type(predicate)
    if kind is Compare:
        if predicate.op not in _OPS:
            raise ValueError(f"unknown comparison {predicate.op!r}")
        j, attribute = _lookup(domain, predicate.attr)
        c, fn = _code(attribute, predicate.value, predicate.op), _OPS[predicate.op]
        return lambda codes: fn(codes[:, j], c)
    if kind is IsIn:
        j, attribute = _lookup(domain, predicate.attr)
        wanted = np.array([_code(attribute, v, "==") for v in predicate.values], dtype=np.float64)
        return lambda codes: np.isin(codes[:, j], wanted)
    if kind is Between:
        j, attribute = _lookup(domain, predicate.attr)
        lo, hi = _code(attribute, predicate.low, "<="), _code(attribute, predicate.high, "<=")
        return lambda codes: (codes[:, j] >= lo) & (codes[:, j] <= hi)
    if kind is And or kind is Or:
        parts = [compile_predicate(p, domain) for p in _parts(predicate.parts)]
        combine = np.logical_and if kind is And else np.logical_or
        return lambda codes: combine.reduce([p(codes) for p in parts])
    if kind is Not:
        inner = compile_predicate(predicate.part, domain)
        return lambda codes: ~inner(codes)
    raise TypeError(
        f"where() needs a predicate built with ektelo.col(...), got {type(predicate).__name__}"
    )


def _parts(parts: Any) -> tuple[Any, ...]:
    if type(parts) is not tuple or not parts:
        raise TypeError("malformed predicate")
    return parts


def _lookup(domain: Domain, name: Any) -> tuple[int, Attribute]:
    if type(name) is not str:
        raise TypeError(f"attribute names are str, got {type(name).__name__}")
    if name not in domain:
        raise ValueError(f"unknown attribute {name!r}; the table has {list(domain.names)}")
    return domain.index(name), domain[name]
