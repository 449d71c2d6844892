"""AIM's model-size guard memo (issue #25): a junction tree's size depends
only on which attribute pairs the cliques join, so AIM triangulates each
such graph once across its rounds — and decides exactly as before."""

from __future__ import annotations

import importlib
import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, plans
from ektelo.inference.graphical_model import model_size

aim_module = importlib.import_module("ektelo.plans.aim")  # the module (plans.aim is the plan)

DOMAIN = Domain.from_json({"a": 3, "b": 4, "c": 2, "d": 5, "e": 3, "f": 2})


def test_model_size_is_a_function_of_the_graph() -> None:
    """What the memo rests on: cliques that join the same pairs give the
    same junction tree size (a triangle as three pairs or one triple,
    repeated or nested cliques)."""
    same = [
        ([("a", "b", "c"), ("d",)], [("a", "b"), ("b", "c"), ("a", "c"), ("b",)]),
        ([("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")], [("d", "a"), ("c", "d"), ("a", "b"),
                                                            ("b", "c"), ("a", "b")]),
        ([("a", "b", "c", "d"), ("d", "e")], [("a", "b", "c"), ("b", "c", "d"), ("a", "d"),
                                              ("e", "d"), ("e",)]),
    ]  # fmt: skip
    for x, y in same:
        assert model_size(DOMAIN, x) == model_size(DOMAIN, y)
    rng = np.random.default_rng(0)
    names = list(DOMAIN.names)
    for _ in range(50):  # random clique lists against their pairs
        cliques = [tuple(str(n) for n in rng.choice(names, size=int(rng.integers(1, 4)),
                                                    replace=False))
                   for _ in range(int(rng.integers(1, 6)))]  # fmt: skip
        pairs = [p for c in cliques for p in itertools.combinations(c, 2)] or [("a",)]
        assert model_size(DOMAIN, cliques) == model_size(DOMAIN, pairs)


def data() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    a = rng.integers(0, 3, 600)
    return pd.DataFrame({"a": a, "b": (a + rng.integers(0, 2, 600)) % 4,
                         "c": rng.integers(0, 2, 600), "d": rng.integers(0, 5, 600),
                         "e": (a + rng.integers(0, 2, 600)) % 3, "f": rng.integers(0, 2, 600)})


@pytest.mark.parametrize("limit", [80.0, 2e-3])
def test_each_graph_is_triangulated_once_and_the_guard_decides_as_model_size(
    limit: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every round's candidates passed to select_marginal are those the
    direct guard keeps: the free ones, and those whose exact size (here
    recomputed from scratch) is below every excluded one's."""
    workload = list(itertools.combinations(DOMAIN.names, 3))
    closure = aim_module.downward_closure(workload)
    graphs: list[frozenset] = []
    latest: dict[str, Any] = {}
    rounds: list[tuple[Any, list[tuple[str, ...]]]] = []

    def counted(domain: Any, cliques: Any) -> int:
        graphs.append(frozenset(frozenset(p) for c in cliques
                                for p in itertools.combinations(c, 2)))  # fmt: skip
        return model_size(domain, cliques)

    fit, select = aim_module.fit_graphical_model, ektelo.ProtectedTable.select_marginal

    def fitted(*args: Any, **kw: Any) -> Any:
        latest["model"] = fit(*args, **kw)
        return latest["model"]

    def selected(self: Any, candidates: Any, *args: Any, **kw: Any) -> Any:
        rounds.append((latest["model"], list(candidates)))
        return select(self, candidates, *args, **kw)

    monkeypatch.setattr(aim_module, "model_size", counted)
    monkeypatch.setattr(aim_module, "fit_graphical_model", fitted)
    monkeypatch.setattr(ektelo.ProtectedTable, "select_marginal", selected)
    table = ektelo.protect(data(), DOMAIN, rho=4.0, seed=9)
    plans.aim(table, workload, 4.0, rounds=14, maxiter=30, max_model_size=limit)
    assert len(graphs) == len(set(graphs)) > 0  # no graph triangulated twice
    asked = excluded_any = 0
    for model, kept in rounds:
        free = [r for r in closure if any(set(r) <= set(c) for c in model.cliques)]
        size = {r: model_size(DOMAIN, [*model.cliques, r]) for r in closure if r not in free}
        asked += len(size)
        out = [r for r in closure if r not in kept]
        assert not set(out) & set(free)
        inside = [size[r] for r in kept if r in size]
        assert max(inside, default=0) < min((size[r] for r in out), default=math.inf)
        excluded_any += len(out)
    assert len(graphs) < asked  # the memo saved triangulations
    assert (excluded_any > 0) == (limit < 1)  # the small limit binds
