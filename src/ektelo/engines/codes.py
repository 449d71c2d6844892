"""Predicates and attribute encodings on the code scale, for the SQL and
DataFrame engines (issue #28).

`lower(predicate, domain)` walks a `where` predicate (predicates.py) with the
same checks as `compile_predicate` — only the library's exact classes, every
attribute looked up in the public domain, every operand translated to a code
by the same rule — and returns a small tree over column *positions* and
float code values. Nothing of the client's objects survives: an engine turns
the tree into SQL with quoted internal column names and bound parameters
(DuckDB) or into Column expressions with literals (Spark), never into text
built from user input. Its meaning is the in-memory engine's: a row's codes
compared as float64 with the code values (`compile_predicate`).

`label_kind` says which column type an engine needs for a labelled
attribute: SQL columns are typed, so the labels must be all strings, all
numbers or all booleans (pandas' object columns can mix them; the SQL engines
refuse a mix at protect time, a public fact of the domain).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from .. import predicates as p
from ..domain import Attribute, Domain

# Kernel-internal helpers of predicates.py: one operand rule for every engine.
from ..predicates import _code as operand_code
from ..predicates import _lookup as lookup_attribute
from ..predicates import _parts as predicate_parts

__all__ = [
    "All",
    "AnyOf",
    "Cmp",
    "Cond",
    "In",
    "Neg",
    "bin_tree",
    "code_intervals",
    "is_double",
    "label_kind",
    "lower",
    "mismatch",
    "refusal",
]

OPS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Cmp:
    """codes[column] <op> value (float64 comparison)."""

    column: int
    op: str
    value: float


@dataclass(frozen=True)
class In:
    """codes[column] ∈ values (no values: false)."""

    column: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class All:
    parts: tuple[Cond, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Cond, ...]


@dataclass(frozen=True)
class Neg:
    part: Cond


Cond = Cmp | In | All | AnyOf | Neg


def lower(predicate: Any, domain: Domain) -> Cond:
    """The code-level tree of `predicate` (errors as `compile_predicate`'s)."""
    kind = type(predicate)
    if kind is p.Compare:
        if predicate.op not in OPS:
            raise ValueError(f"unknown comparison {predicate.op!r}")
        j, attribute = lookup_attribute(domain, predicate.attr)
        return Cmp(j, predicate.op, operand_code(attribute, predicate.value, predicate.op))
    if kind is p.IsIn:
        j, attribute = lookup_attribute(domain, predicate.attr)
        return In(j, tuple(operand_code(attribute, v, "==") for v in predicate.values))
    if kind is p.Between:
        j, attribute = lookup_attribute(domain, predicate.attr)
        lo = operand_code(attribute, predicate.low, "<=")
        hi = operand_code(attribute, predicate.high, "<=")
        return All((Cmp(j, ">=", lo), Cmp(j, "<=", hi)))
    if kind is p.And:
        return All(tuple(lower(q, domain) for q in predicate_parts(predicate.parts)))
    if kind is p.Or:
        return AnyOf(tuple(lower(q, domain) for q in predicate_parts(predicate.parts)))
    if kind is p.Not:
        return Neg(lower(predicate.part, domain))
    raise TypeError(
        f"where() needs a predicate built with ektelo.col(...), got {type(predicate).__name__}"
    )


def code_intervals(cond: Cmp | In, size: int) -> list[tuple[int, int]]:
    """The codes 0..size-1 satisfying a comparison or membership, as sorted
    disjoint intervals [lo, hi] (public arithmetic on the domain's size)."""
    if isinstance(cond, In):
        points = sorted({int(v) for v in cond.values if 0 <= v < size and v == math.floor(v)})
        return [(k, k) for k in points]
    v = min(max(cond.value, -1.0), float(size))  # exact for these tests on 0..size-1
    if cond.op in ("==", "!="):
        hit = v == math.floor(v) and 0 <= v < size
        if cond.op == "==":
            return [(int(v), int(v))] if hit else []
        if not hit:
            return [(0, size - 1)]
        k = int(v)
        return [(lo, hi) for lo, hi in ((0, k - 1), (k + 1, size - 1)) if lo <= hi]
    if cond.op in ("<", "<="):
        count = math.ceil(v) if cond.op == "<" else math.floor(v) + 1  # codes below
        count = min(max(count, 0), size)
        return [(0, count - 1)] if count > 0 else []
    first = math.floor(v) + 1 if cond.op == ">" else math.ceil(v)
    first = min(max(first, 0), size)
    return [(first, size - 1)] if first < size else []


def label_kind(attribute: Attribute) -> str:
    """ "str", "number" or "bool": the one kind of an attribute's labels."""
    if attribute.values is None:
        raise TypeError(f"attribute {attribute.name!r} has no labels")
    kinds = set()
    for v in attribute.values:
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, str):
            kinds.add("str")
        elif isinstance(v, numbers.Real) and math.isfinite(float(v)):
            kinds.add("number")
        else:
            kinds.add("other")
    if len(kinds) != 1 or "other" in kinds:
        raise ValueError(
            f"attribute {attribute.name!r}: a table engine needs labels that are all strings, "
            f"all finite numbers or all booleans"
        )
    return kinds.pop()


@dataclass(frozen=True)
class Split:
    """A node of a balanced comparison tree: x < edge ? low : high."""

    edge: float
    low: BinNode
    high: BinNode


BinNode = int | Split


def bin_tree(edges: tuple[float, ...], first: int, last: int) -> BinNode:
    """The code of x among bins first..last, where bin i starts at edges[i],
    as a balanced tree of `x < edge` tests (depth ⌈log₂ bins⌉): the same
    answer as `searchsorted(edges, x, side="right") - 1` for x ≥ edges[first]
    (below it the tree gives `first`, above the last edge `last`)."""
    if first == last:
        return first
    mid = (first + last + 1) // 2
    return Split(edges[mid], bin_tree(edges, first, mid - 1), bin_tree(edges, mid, last))


def is_double(a: Attribute) -> bool:
    """Whether the attribute's raw column is read as DOUBLE (NaN possible)."""
    return a.values is None or label_kind(a) == "number"


def mismatch(a: Attribute, column_type: str, wanted: str) -> str:
    return (
        f"column {a.name!r} is {column_type} in the source; the domain's attribute needs a "
        f"{wanted} column"
    )


def refusal(a: Attribute, missing: int, other: int, policy: str, show: bool) -> str:
    """The refusal's text, as Domain's: the column and the kinds of problem
    (counts only when the data holder asked for them)."""

    def some(k: int, noun: str) -> str:
        return f"{k} {noun}{'' if k == 1 else 's'}" if show else f"{noun}s"

    parts = []
    if missing:
        parts.append(f"{some(missing, 'missing value')} (NaN/blank)")
    if other:
        if a.values is not None:
            parts.append(f"{some(other, 'value')} not among the labels {list(a.values[:10])}")
        else:
            parts.append(f"{some(other, 'value')} outside the domain ({a.describe()})")
    summary = f"column {a.name!r}: " + ", ".join(parts)
    if policy == "clamp":
        return summary + " cannot be clamped (no nearest value); on_invalid='drop' drops such rows"
    return summary + " (on_invalid='drop' or 'clamp' cleans them before protect)"
