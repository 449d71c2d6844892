"""The differential harness covers time (issue #36): free operations do work
that depends only on public sizes.

A free operation (a transformation: no budget) that runs longer when more
rows match leaks counts for nothing: with the memory engine's `group_by`, a
secret count was estimated from ~35 timed zero-budget requests, and whether
one person is in the table was guessed right 97 times in 100 from 15 calls
(its early return when no row matched). Here neighbouring tables — the same
rows with no matching row vs many (a `where` selecting nothing or nearly
everything), and one person in or out — run the same free operations, and
two measurements of their work are compared:

* **allocations** (deterministic): the peak bytes the operation allocates
  (tracemalloc; NumPy reports its buffers to it) — a work measure with no
  noise at all: equal up to 1% on neighbours, while the leaky `group_by`
  allocated in proportion to the rows it selected;
* **run time** (statistical, with power): the operation timed on both
  neighbours in alternation (many repetitions, so drifting machine load hits
  both alike) and compared by a two-sided Mann–Whitney rank test; a leak is
  a significant difference (p < 10⁻⁶) of large effect (|Cliff's δ| > 0.5).
  Equal work passes with room to spare; today's `group_by` fails with
  p ≈ 10⁻³⁰ and δ = ±1. No wall-clock time is asserted as a number.

On the parent commit `group_by` fails both checks (the early return for an
empty result and the grouping of the selected rows only); `where` and
`vectorize` already used masks and pass. The DuckDB and Spark engines' SQL
planners may skip work (docs/engines.md), so there the free operations run
no query at all: `where`, `select`, `group_by` and splits compose lazy
relations, and `vectorize` records how to count and counts at the first
charged request that reads it (proofs/kernel.md K9) — timed here too (on the
parent commit DuckDB's `vectorize` ran its GROUP BY, 344 → 884 ms between
neighbours in the issue's measurement).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu

import ektelo
from ektelo import Domain, col
from ektelo.matrix import Identity

DOMAIN = Domain.from_dict({"a": 50, "b": 40, "c": 25})
ROWS = 60_000
TIMED = 120  # repetitions per neighbour (alternating)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(36)
    # `a` never takes its last value (49): "a > 48" selects no row, "a < 49" every row
    return pd.DataFrame({"a": rng.integers(0, 49, ROWS), "b": rng.integers(0, 40, ROWS),
                         "c": rng.integers(0, 25, ROWS)})


def table(frame: pd.DataFrame) -> Any:
    return ektelo.protect(frame, DOMAIN, epsilon=1.0, seed=0, engine="memory")


# the neighbours: (name, the table, the predicate) pairs over one set of rows
def count_pair(frame: pd.DataFrame) -> tuple[Any, Any]:
    t = table(frame)
    return t.where(col("a") > 48), t.where(col("a") < 49)  # no row vs every row


def member_pair(frame: pd.DataFrame) -> tuple[Any, Any]:
    """One person in or out: their unique attributes (a = 49) select them or no one."""
    person = pd.DataFrame({"a": [49], "b": [7], "c": [3]})
    inside = table(pd.concat([frame, person], ignore_index=True))
    outside = table(pd.concat([frame, frame.iloc[:1]], ignore_index=True))  # same height
    who = (col("a") == 49) & (col("b") == 7)
    return outside.where(who), inside.where(who)


OPERATIONS: dict[str, Callable[[Any], Any]] = {
    "group_by": lambda t: t.group_by(["b", "c"]),
    "group_by_count": lambda t: t.group_by(["b"], count="n", count_cap=5),
    "vectorize": lambda t: t.vectorize(["b", "c"]),
    "group_by_then_vectorize": lambda t: t.group_by(["a", "b"]).vectorize(["a"]),
}
WHERE: dict[str, Callable[[Any], Any]] = {  # the where itself, on the root table
    "where": lambda t: t.where(col("b") < 40),
}
PAIRS = {"count": count_pair, "member": member_pair}


def peak_bytes(op: Callable[[Any], Any], t: Any) -> int:
    op(t)  # warm caches (compiled predicates, tables) outside the measurement
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        op(t)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def timings(op: Callable[[Any], Any], a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    for _ in range(5):  # warm up both
        op(a)
        op(b)
    ta, tb = [], []
    for i in range(TIMED):
        for t, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            start = time.perf_counter_ns()
            op(t)
            out.append(time.perf_counter_ns() - start)
    return np.array(ta), np.array(tb)


def leaks(ta: np.ndarray, tb: np.ndarray) -> tuple[bool, float, float]:
    """(a leak?, p, Cliff's δ): a significant rank difference of large effect."""
    u, p = mannwhitneyu(ta, tb, alternative="two-sided")
    delta = 2.0 * u / (ta.size * tb.size) - 1.0
    return bool(p < 1e-6 and abs(delta) > 0.5), float(p), float(delta)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", OPERATIONS)
def test_free_operations_allocate_the_same_on_neighbours(frame, pair, name):
    a, b = PAIRS[pair](frame)
    pa, pb = peak_bytes(OPERATIONS[name], a), peak_bytes(OPERATIONS[name], b)
    assert abs(pa - pb) <= 0.01 * max(pa, pb), (pa, pb)


def test_where_allocates_the_same_whatever_it_selects(frame):
    t = table(frame)
    none, every = (lambda t: t.where(col("a") > 48)), (lambda t: t.where(col("a") < 49))
    pa, pb = peak_bytes(none, t), peak_bytes(every, t)
    assert abs(pa - pb) <= 0.01 * max(pa, pb), (pa, pb)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", OPERATIONS)
def test_free_operations_take_the_same_time_on_neighbours(frame, pair, name):
    a, b = PAIRS[pair](frame)
    leak, p, delta = leaks(*timings(OPERATIONS[name], a, b))
    assert not leak, f"{name} on {pair} neighbours: p = {p:.2g}, Cliff's δ = {delta:.2f}"


def test_the_rank_test_has_power():
    """The same test detects a leak of the size the issue measured: one
    neighbour's operation does a little more work (a sort of 2,000 extra
    rows), as the early-return `group_by` did for one person."""
    rng = np.random.default_rng(0)
    extra = rng.integers(0, 100, 2_000)
    t = table(pd.DataFrame({"a": [1], "b": [2], "c": [3]}))

    def op(more: bool) -> Any:
        return t.where(col("a") == 1), np.sort(extra) if more else None

    leak, p, delta = leaks(*timings(op, False, True))
    assert leak, (p, delta)


@pytest.mark.parametrize("name", ["vectorize", "group_by_then_vectorize"])
def test_free_operations_take_the_same_time_on_duckdb(frame, name, duckdb_available):
    big = pd.concat([frame] * 10, ignore_index=True)  # 600k rows: a GROUP BY shows in time
    t = ektelo.protect(big, DOMAIN, epsilon=1.0, seed=0, engine="duckdb")
    a, b = t.where(col("a") > 48), t.where(col("a") < 49)  # no row vs every row
    leak, p, delta = leaks(*timings(OPERATIONS[name], a, b))
    assert not leak, f"{name} on DuckDB: p = {p:.2g}, Cliff's δ = {delta:.2f}"
    # the counts are there when a charged request reads them
    assert a.vectorize(["b"]).laplace(Identity(40), eps=0.1).answers.shape == (40,)


def test_free_operations_take_the_same_time_on_spark(frame, spark_session):
    rows = [tuple(int(v) for v in r) for r in frame.head(2_000).itertuples(index=False)]
    data = spark_session.createDataFrame(rows, "a long, b long, c long")
    t = ektelo.protect(data, DOMAIN, epsilon=1.0, seed=0, engine="spark")
    a, b = t.where(col("a") > 48), t.where(col("a") < 49)
    leak, p, delta = leaks(*timings(OPERATIONS["vectorize"], a, b))
    assert not leak, f"vectorize on Spark: p = {p:.2g}, Cliff's δ = {delta:.2f}"
