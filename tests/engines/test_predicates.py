"""Every comparison on every kind of attribute, exhaustively (issue #28).

The DuckDB engine tests a predicate on raw values where it can (the codes it
accepts as intervals of raw values, `codes.code_intervals`); these tests
check that translation on a grid of operands — integers, halves, ±∞, values
outside the domain, every label and bin edge — for each comparison, `isin`
and `between`, against the in-memory engine's compiled predicate, under each
`on_invalid` policy (clamp tests the codes, the others the raw values).
"""

from __future__ import annotations

import itertools
import math
import operator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ektelo import Domain, col
from ektelo.engines import open_table
from ektelo.engines.codes import Cmp, In, code_intervals

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}  # fmt: skip
GRID = [-math.inf, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 9.0, 1e300,
        math.inf]  # fmt: skip


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_code_intervals_are_the_codes_a_comparison_accepts(size: int) -> None:
    for op, fn in OPS.items():
        for v in GRID:
            accepted = [k for k in range(size) if fn(k, v)]
            intervals = code_intervals(Cmp(0, op, v), size)
            covered = [k for lo, hi in intervals for k in range(lo, hi + 1)]
            assert covered == accepted, (op, v, size)
    for values in itertools.combinations([-math.inf, -1.0, 0.0, 0.5, 1.0, 2.0, 4.0, math.inf], 2):
        covered = [k for lo, hi in code_intervals(In(0, values), size) for k in range(lo, hi + 1)]
        assert covered == [k for k in range(size) if k in values]


DOMAIN = Domain.from_dict(
    {
        "n": 4,
        "s": {"values": ["a", "b", "c"]},
        "g": {"values": [10, 20, 30]},
        "w": {"bins": [0, 1.5, 3, 10, 20]},
    }
)
# every valid value of each attribute in some row, and rows holding invalid values
FRAME = pd.DataFrame(
    {
        "n": [0, 1, 2, 3, 3, 1, -1, 7, 2.5, None],
        "s": ["a", "b", "c", "a", "c", "b", "a", "zz", "b", None],
        "g": [10, 20, 30, 30, 10, 20, 20, 10, 15, 10],
        "w": [0, 1.5, 2.9, 3, 19.9, 10, -4, 25, 5, 5],
    }
)


def _operands(name: str) -> list[Any]:
    a = DOMAIN[name]
    if a.values is not None:
        return list(a.values)
    if a.bins is not None:
        return list(a.bins)
    return GRID


def _predicates(name: str) -> list[Any]:
    a, c = DOMAIN[name], col(name)
    ops = ["==", "!=", "<", ">="] if a.bins is not None else list(OPS)
    out: list[Any] = []
    for op in ops:
        for v in _operands(name):
            out.append({"==": c == v, "!=": c != v, "<": c < v, "<=": c <= v, ">": c > v,
                        ">=": c >= v}[op])  # fmt: skip
    values = _operands(name)
    out += [c.isin(pair) for pair in itertools.combinations(values[:5], 2)]
    out += [c.isin([])]
    if a.bins is None:
        out += [c.between(lo, hi) for lo, hi in itertools.combinations(values[:6], 2)]
    out += [~p for p in out[:6]]
    return out


@pytest.mark.parametrize("policy", ["drop", "clamp-valid", "error-valid"])
def test_every_comparison_counts_the_same(
    policy: str, tmp_path: Path, duckdb_available: None
) -> None:
    frame = FRAME if policy == "drop" else FRAME.iloc[:6]  # clamp/error: no missing value
    if policy == "clamp-valid":
        frame = frame.assign(n=[0, 1, 2, 3, 9, -2], w=[0, 1.5, 2.9, 30, -1, 10])
    if policy != "drop":  # an integer column (its own SQL path) besides the float one of drop
        frame = frame.astype({"n": "int64"})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    on_invalid = policy.split("-")[0]
    memory, m_table = open_table(frame, DOMAIN, engine="memory", on_invalid=on_invalid)
    duck, d_table = open_table(path, DOMAIN, engine="duckdb", on_invalid=on_invalid)
    checked = 0
    for name in DOMAIN.names:
        for pred in _predicates(name):
            expected = memory.count(memory.where(m_table, pred, DOMAIN))
            assert duck.count(duck.where(d_table, pred, DOMAIN)) == expected, repr(pred)
            checked += 1
    assert checked > 200
