"""The kernel's marginal cache for select_marginal (issue #25; marginal_select.py
"The kernel's marginal cache"): AIM's rounds ask the same candidates on the
same table node, and the engine counts each (node, column set) once.

Checked here: a repeated request asks the engine for nothing; a derived node
is counted afresh; the engine is asked for the same column sets whatever the
rows (hits depend on the public request sequence only — two tables with
different data give the same sequence); the picks, the ledger and the history
with the cache are those without it (CACHE_CELLS = 0), same seed; the bound
keeps the first entries of a candidate set larger than it (no thrashing) and
evicts other requests' entries first; an engine failure leaves it unchanged."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, col
from ektelo.engines import MemoryEngine
from ektelo.kernel import marginal_select

DOMAIN = Domain.from_json({"a": 4, "b": 3, "c": {"values": ["x", "y"]}, "d": 5})
CANDIDATES = [("a",), ("b",), ("c",), ("d",), *itertools.combinations("abcd", 2)]


def cells(c: tuple[str, ...]) -> int:
    return int(np.prod([DOMAIN[n].size for n in c]))


class CountingEngine(MemoryEngine):
    """The memory engine, recording every column set it is asked to count."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.asked: list[tuple[int, ...]] = []
        self.fail_after = fail_after

    def marginals(self, table: Any, column_sets: Any, shapes: Any) -> Any:
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            raise RuntimeError("the engine's resources ran out")
        self.asked += [tuple(c) for c in column_sets]
        return super().marginals(table, column_sets, shapes)


def data(seed: int, rows: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 4, rows), "b": rng.integers(0, 3, rows),
                         "c": rng.choice(["x", "y"], rows), "d": rng.integers(0, 5, rows)})


def rounds(table: Any, n: int = 6, cands: list[tuple[str, ...]] = CANDIDATES) -> list[Any]:
    """AIM-like: the same candidates each round, estimates that change."""
    return [table.select_marginal(cands, [np.full(cells(c), 3.0 * t) for c in cands],
                                  rho=0.01, weights=[len(c) for c in cands])
            for t in range(n)]  # fmt: skip


def protect(frame: pd.DataFrame, engine: Any = None, seed: int = 3) -> Any:
    return ektelo.protect(frame, DOMAIN, rho=1.0, seed=seed, engine=engine or MemoryEngine())


def test_a_repeated_request_asks_the_engine_once() -> None:
    engine = CountingEngine()
    table = protect(data(0), engine)
    rounds(table)
    assert engine.asked.count((0,)) == 1 and len(engine.asked) == len(CANDIDATES)
    sub = table.where(col("a") >= 1)  # a new node: its own counts
    rounds(sub, 2)
    assert len(engine.asked) == 2 * len(CANDIDATES)
    rounds(table, 1, [("a", "d"), ("b", "a")])  # ("b", "a") is a new column order
    assert engine.asked[-1] == (1, 0) and len(engine.asked) == 2 * len(CANDIDATES) + 1


def test_the_engine_is_asked_the_same_whatever_the_rows() -> None:
    asked = []
    for frame in (data(0), data(1, 50), data(2).iloc[:1], data(3).iloc[:0]):
        engine = CountingEngine()
        table = protect(frame, engine)
        rounds(table, 3)
        rounds(table.where(col("c") == "x"), 2, CANDIDATES[:5])
        rounds(table, 2, CANDIDATES[3:])
        asked.append(engine.asked)
    assert all(a == asked[0] for a in asked[1:])


@pytest.mark.parametrize("bound", [0, 30, 10**6])
def test_same_seed_same_picks_ledger_and_history(bound: int, monkeypatch) -> None:
    def run() -> tuple[Any, ...]:
        table = protect(data(5), seed=11)
        picks = rounds(table, 8) + rounds(table.where(col("d") < 3), 3)
        return picks, table.ledger(), table.history(), table.budget

    reference = run()  # the default bound holds everything here
    monkeypatch.setattr(marginal_select, "CACHE_CELLS", bound)
    assert run() == reference
    assert len(set(reference[0])) > 1  # the picks are not one constant


def test_the_bound_keeps_the_first_entries_and_evicts_other_requests_first(monkeypatch) -> None:
    monkeypatch.setattr(marginal_select, "CACHE_CELLS", 30)  # public sizes: 4+3+2+5=14, then pairs
    engine = CountingEngine()
    table = protect(data(0), engine)
    rounds(table, 1)
    kept = [c for c in CANDIDATES if c in [("a",), ("b",), ("c",), ("d",), ("a", "b")]]
    assert sum(cells(c) for c in kept) == 26  # what fitted, in request order
    engine.asked.clear()
    rounds(table, 1)
    names = {(0,): "a", (1,): "b", (2,): "c", (3,): "d"}
    assert [tuple(names[(i,)] for i in s) for s in engine.asked] == [
        c for c in CANDIDATES if c not in kept]  # the rest is recounted, not thrashed
    engine.asked.clear()
    rounds(table, 1, [("b", "d")])  # 15 cells: evicts the oldest entries of earlier requests
    rounds(table, 1, [("a",), ("b",)])
    assert engine.asked == [(1, 3), (0,), (1,)]


def test_an_engine_failure_leaves_the_cache_as_it_was(monkeypatch) -> None:
    from ektelo.kernel import contracts

    monkeypatch.setattr(contracts, "BATCH_SETS", 2)  # several engine calls per request
    engine = CountingEngine(fail_after=4)
    table = protect(data(0), engine)
    before = table.budget
    with pytest.raises(Exception, match=r"could not run|resources"):
        rounds(table, 1)
    assert table.budget == before  # refused before the charge
    engine.fail_after = None
    engine.asked.clear()
    rounds(table, 1)
    assert len(engine.asked) == len(CANDIDATES)  # nothing was kept from the failed request
