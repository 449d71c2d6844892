"""PrivBayes's and MST/AIM's selections on every engine (issue #28).

The kernel scores candidates from the marginals the engine counts (one
GROUP BY per batch) instead of pulling every row's codes. The scores must be
bit-identical to the row-based reference (`tests.privbayes_rows.r_score`, and
`tables.vectorize_rows` for marginal selection), on every engine, with a
`where` (a masked table) and with invalid rows the engine carries but never
counts; so the same research seed selects the same cliques everywhere.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, col
from ektelo.engines import DuckDBEngine, MemoryEngine, each_marginal, open_table
from ektelo.engines import rows as tables
from ektelo.kernel import marginal_select, privbayes
from tests.privbayes_rows import r_score

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

DOMAIN = Domain.from_dict(
    {
        "a": {"values": ["x", "y", "z"]},
        "b": {"bins": [0, 10, 20, 40, 80]},
        "c": 5,
        "d": {"values": [1.5, 2.5]},
        "e": 3,
    }
)


def frame(rows: int, seed: int, *, invalid: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, rows)
    c = np.where(rng.random(rows) < 0.7, a, rng.integers(0, 5, rows))  # c depends on a
    out = pd.DataFrame(
        {
            "a": np.array(["x", "y", "z"])[a],
            "b": rng.uniform(0, 80, rows).round(1),
            "c": c.astype(float),
            "d": np.array([1.5, 2.5])[rng.integers(0, 2, rows)],
            "e": rng.integers(0, 3, rows).astype(float),
        }
    )
    if invalid:  # rows the engine carries with ok = false (dropped under "drop")
        out.loc[:: 7, "b"] = 500.0
        out.loc[3 :: 11, "a"] = "not a label"
    return out


def reference_scores(codes: np.ndarray, sizes: tuple[int, ...], degree: int) -> dict[Any, float]:
    """Every (X, Π) score GreedyBayes may meet, from the rows (the old path)."""
    d = len(sizes)
    out = {}
    for k in range(1, min(degree, d - 1) + 1):
        for parents in itertools.combinations(range(d), k):
            for child in range(d):
                if child not in parents:
                    out[(child, parents)] = r_score(codes, sizes, child, parents)
    return out


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_privbayes_scores_from_marginals_are_the_row_scores_bit_for_bit(degree: int) -> None:
    rng = np.random.default_rng(degree)
    sizes = (3, 4, 5, 2, 3)
    for rows in (0, 1, 37, 2000):
        codes = np.column_stack([rng.integers(0, s, rows) for s in sizes])
        codes[:, 2] = np.where(rng.random(rows) < 0.6, codes[:, 0], codes[:, 2])
        table = tables.Rows.all(codes)
        got = privbayes.engine_scores(MemoryEngine(), table, sizes, degree)
        want = reference_scores(codes, sizes, degree)
        assert got.rows == rows
        assert got.values.keys() == want.keys()
        for key, value in want.items():
            assert got.values[key] == value, key  # exact, not approx


def _engines(kind: str, tmp: Path, data: pd.DataFrame, spark: Any = None) -> tuple[Any, Any]:
    path = tmp / "t.parquet"
    data.to_parquet(path)
    if kind == "memory":
        return open_table(data, DOMAIN, engine="memory", on_invalid="drop")
    if kind == "duckdb":
        return open_table(str(path), DOMAIN, engine=DuckDBEngine(), on_invalid="drop")
    from ektelo.engines import SparkEngine

    return open_table(str(path), DOMAIN, engine=SparkEngine(session=spark), on_invalid="drop")


def _selection_observables(
    kind: str, tmp: Path, spark: Any = None, *, both: bool = True
) -> list[Any]:
    data = frame(3000, 11, invalid=True)
    engine, root = _engines(kind, tmp, data, spark)
    filtered = engine.where(root, col("e") != 1, DOMAIN)  # a masked table on memory
    seen: list[Any] = []
    for table in (root, filtered) if both else (filtered,):
        scored = privbayes.engine_scores(engine, table, DOMAIN.shape, 2)
        seen.append((scored.rows, sorted(scored.values.items())))
        request = marginal_select.check_request(
            DOMAIN,
            [("a", "c"), ("b", "e"), ("c",), ("a", "b", "d"), ("d", "a")],
            [np.full(15, 10.0), np.zeros(12), np.full(5, 600.0), np.ones(24), np.zeros(6)],
            weights=[1, 2, 3, 1, 4],
            penalties=[0.0, 5.5, -2.0, 1.25, 0.0],
        )
        found = each_marginal(engine, table, request.columns, request.shapes)
        q = marginal_select.scores(found, request)
        seen.append(q.tolist())
    return seen


def test_memory_scores_match_the_vectorize_reference(tmp_path: Path) -> None:
    """marginal_select.scores from sparse marginals = the old dense formula."""
    engine, root = _engines("memory", tmp_path, frame(500, 3))
    cands = [("a", "b"), ("c", "e"), ("d",)]
    ests = [np.arange(12) * 0.37, np.full(15, 3.0), np.array([240.0, 0.5])]
    request = marginal_select.check_request(DOMAIN, cands, ests, weights=[3, 1, 2])
    found = each_marginal(engine, root, request.columns, request.shapes)
    q = marginal_select.scores(found, request)
    for i, (cols, shape, est) in enumerate(zip(request.columns, request.shapes,
                                                request.estimates, strict=True)):  # fmt: skip
        counts = np.clip(tables.vectorize_rows(root, cols, shape), 0.0, marginal_select.CLAMP)
        l1 = np.fmin(np.sum(np.abs(counts - est)), marginal_select.CLAMP)
        assert q[i] == float(request.weights[i]) * (l1 - request.penalties[i])


def test_duckdb_scores_are_memory_scores(tmp_path: Path, duckdb_available: None) -> None:
    assert _selection_observables("duckdb", tmp_path) == _selection_observables(
        "memory", tmp_path
    )


def test_spark_scores_are_memory_scores(tmp_path: Path, spark_session: Any) -> None:
    """(the filtered table only: every Spark action is a job)"""
    spark = _selection_observables("spark", tmp_path, spark_session, both=False)
    assert spark == _selection_observables("memory", tmp_path, both=False)


def test_duckdb_batches_many_sets_in_one_scan(
    tmp_path: Path, duckdb_available: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More sets than one batch, duplicate and reordered sets, the empty set."""
    from ektelo.kernel import contracts

    monkeypatch.setattr(contracts, "BATCH_SETS", 8)
    engine, root = _engines("duckdb", tmp_path, frame(400, 5, invalid=True))
    memory, mroot = _engines("memory", tmp_path, frame(400, 5, invalid=True))
    sets = [c for k in (1, 2, 3, 4) for c in itertools.combinations(range(5), k)]
    sets += [(2, 0), (0, 2), (), (4, 4)]
    shapes = [tuple(DOMAIN.shape[j] for j in c) for c in sets]
    got = list(each_marginal(engine, root, sets, shapes))
    want = list(each_marginal(memory, mroot, sets, shapes))
    assert len(got) == len(sets) == len(want) and len(sets) > 32
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g[0], w[0])
        np.testing.assert_array_equal(g[1], w[1])


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_same_seed_selects_the_same_cliques(engine: str, tmp_path: Path, request: Any) -> None:
    """Through protect and the handles: PrivBayes's network and MST-style
    selections under one research seed, memory vs the engine."""
    if engine == "duckdb":
        request.getfixturevalue("duckdb_available")
    else:
        request.getfixturevalue("spark_session")
    data = frame(2000, 21)
    path = tmp_path / "t.parquet"
    data.to_parquet(path)
    pairs = list(itertools.combinations(DOMAIN.names, 2))
    runs = []
    for source, chosen in ((data, "memory"), (str(path), engine)):
        t = ektelo.protect(source, DOMAIN, epsilon=10.0, seed=5, engine=chosen)
        picks: list[Any] = [t.privbayes_select(eps=1.0, degree=2)]
        picks.append(t.privbayes_select(eps=1.0, degree=2, max_cells=12))  # θ-usefulness cap
        for _ in range(3):
            ests = [np.zeros(int(np.prod(DOMAIN.project(list(p)).shape))) for p in pairs]
            picks.append(t.where(col("e") != 2).select_marginal(pairs, ests, eps=0.5))
        runs.append((picks, t.budget, len(t.history())))
    assert runs[0] == runs[1]
