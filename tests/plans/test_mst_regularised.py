"""MST's two accuracy changes of issue #43 (`ektelo.plans.mst`): the tree's
pairs are scored on the compressed domain (the kernel's grouped marginals,
`select_marginal(groups=...)`, with the sensitivity unchanged), and the
final fit is regularised (uniform start, stopped by the discrepancy
principle: `fit_graphical_model(init="uniform", discrepancy=τ)`)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, plans
from ektelo.inference import fit_graphical_model
from ektelo.kernel import marginal_select as ms
from ektelo.matrix import Identity
from ektelo.plans.mst import DISCREPANCY

DOMAIN = Domain.from_json({"a": 4, "b": 4, "c": 3, "d": 5, "e": 2})


def chain_table(rows: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, rows)
    b = np.where(rng.random(rows) < 0.9, a, rng.integers(0, 4, rows))
    c = rng.integers(0, 3, rows)
    d = np.where(rng.random(rows) < 0.9, c, rng.integers(0, 5, rows))
    e = np.where(rng.random(rows) < 0.8, b % 2, rng.integers(0, 2, rows))
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "e": e})


# -- the kernel's grouped scores -----------------------------------------------------------


def _sparse(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = counts.reshape(-1)
    cells = np.flatnonzero(flat)
    return cells, flat[cells].astype(np.float64)


def test_grouped_score_is_the_l1_of_the_summed_marginal() -> None:
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, size=(4, 3)).astype(np.float64)
    groups = np.array([0, 0, 1, 2, 2, 3, 4, 4, 5, 4, 4, 5])  # 12 cells → 6 groups
    est = rng.integers(0, 100, size=6) + 0.25  # on the kernel's grid 2⁻¹⁰ already
    req = ms.check_request(DOMAIN, [("a", "c")], [est], groups=[groups])
    q = ms.scores([_sparse(counts)], req)
    summed = np.bincount(groups, weights=counts.reshape(-1))
    assert q[0] == np.abs(summed - est).sum()
    assert req.sensitivity == 1.0


def test_grouped_scores_of_neighbours_differ_by_at_most_one() -> None:
    """Adding one row moves one cell, hence one group, by 1 (the proof note)."""
    rng = np.random.default_rng(1)
    groups = np.array([0, 1, 1, 2, 3, 3, 3, 4, 5, 5, 0, 6])
    for _ in range(200):
        counts = rng.integers(0, 5, size=12).astype(np.float64)
        est = rng.uniform(0, 6, size=7)
        req = ms.check_request(DOMAIN, [("a", "c")], [est], groups=[groups])
        neighbour = counts.copy()
        neighbour[rng.integers(12)] += 1
        q0 = ms.scores([_sparse(counts)], req)[0]
        q1 = ms.scores([_sparse(neighbour)], req)[0]
        assert abs(q1 - q0) <= 1.0


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([np.arange(11)], "must be 12 integers"),
        ([np.array([0] * 11 + [2])], "every group"),
        ([np.arange(12) * 1.0], "must be 12 integers"),
        ([np.arange(12), np.arange(12)], "2 group maps for 1 candidates"),
    ],
)
def test_bad_group_maps_are_refused_before_the_charge(groups, message) -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=0)
    with pytest.raises(ValueError, match=message):
        table.select_marginal([("a", "c")], [np.zeros(12)], rho=0.1, groups=groups)
    assert table.budget.spent == 0


def test_estimates_must_have_one_entry_per_group() -> None:
    table = ektelo.protect(chain_table(), DOMAIN, rho=1.0, seed=0)
    groups = [np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])]
    with pytest.raises(ValueError, match="6 finite numbers"):
        table.select_marginal([("a", "c")], [np.zeros(12)], rho=0.1, groups=groups)
    assert table.budget.spent == 0
    assert table.select_marginal([("a", "c")], [np.zeros(6)], rho=0.1, groups=groups) == ("a", "c")


def test_mst_scores_on_the_compressed_domain(monkeypatch) -> None:
    """With values merged, every selection request carries the compression's
    cell maps and estimates over the compressed cells."""
    from tests.plans.test_mst_compression import DOMAIN as RARE_DOMAIN
    from tests.plans.test_mst_compression import RHO, rare_table

    seen = []
    real = ektelo.ProtectedTable.select_marginal

    def spy(self, candidates, estimates, **kw):
        seen.append((list(candidates), [np.size(e) for e in estimates], kw.get("groups")))
        return real(self, candidates, estimates, **kw)

    monkeypatch.setattr(ektelo.ProtectedTable, "select_marginal", spy)
    table = ektelo.protect(rare_table(), RARE_DOMAIN, rho=RHO, seed=5)
    model = plans.mst(table, None, RHO)
    assert seen and all(groups is not None for _, _, groups in seen)
    comp = model.compression  # type: ignore[attr-defined]
    for candidates, sizes, groups in seen:
        for pair, size, g in zip(candidates, sizes, groups, strict=True):
            assert size == math.prod(comp.counts[a].size for a in pair)
            np.testing.assert_array_equal(g, comp.cell_map(pair))
    assert any(size < RARE_DOMAIN.project(list(p)).size
               for c, s, _ in seen for p, size in zip(c, s, strict=True))


# -- the regularised fit ------------------------------------------------------------------


def _oneway_and_pairs(df: pd.DataFrame, rho: float, seed: int):
    table = ektelo.protect(df, DOMAIN, rho=rho, seed=seed)
    ms_ = [table.vectorize([a]).gaussian(Identity(DOMAIN[a].size), rho=rho / 10)
           for a in DOMAIN.names]
    for p in (("a", "b"), ("b", "e"), ("c", "d")):
        ms_.append(table.vectorize(list(p)).gaussian(Identity(DOMAIN.project(list(p)).size),
                                                     rho=rho / 10))
    return ms_


def test_discrepancy_stops_at_the_first_iterate_below_the_level() -> None:
    measurements = _oneway_and_pairs(chain_table(), 0.05, 0)
    answers = sum(len(m) for m in measurements)
    losses: list[float] = []
    model = fit_graphical_model(measurements, DOMAIN, init="uniform", discrepancy=0.8,
                                callback=lambda it, loss: losses.append(loss))
    assert model.info.message == "loss reached the discrepancy level"
    assert losses[-1] <= 0.8 * answers < min(losses[:-1])
    converged = fit_graphical_model(measurements, DOMAIN)
    assert converged.info.loss < model.info.loss


def test_uniform_start_and_discrepancy_are_checked() -> None:
    measurements = _oneway_and_pairs(chain_table(), 0.05, 0)
    with pytest.raises(ValueError, match="init"):
        fit_graphical_model(measurements, DOMAIN, init="zeros")
    with pytest.raises(ValueError, match="discrepancy"):
        fit_graphical_model(measurements, DOMAIN, discrepancy=-1.0)


WIDE = {f"x{i}": s for i, s in enumerate([20, 12, 30, 8, 25, 16, 10, 40])}


def wide_table(rows: int = 5000, seed: int = 0) -> pd.DataFrame:
    """A generated chain of skewed attributes (each 70 % a function of the
    previous one, else Zipf noise): wide and sparse, like adult's pairs."""
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {}
    prev = None
    for n, s in WIDE.items():
        noise = rng.zipf(1.6, rows) % s
        base = noise if prev is None else (prev * 7 + rng.integers(0, 3, rows)) % s
        cols[n] = prev = np.where(rng.random(rows) < 0.7, base, rng.zipf(1.6, rows) % s)
    return pd.DataFrame(cols)


def _tv(df: pd.DataFrame, domain: Domain, model) -> float:
    out = []
    for x, y in itertools.combinations(domain.names, 2):
        shape = (domain[x].size, domain[y].size)
        p = np.bincount(np.ravel_multi_index((df[x], df[y]), shape), minlength=math.prod(shape))
        q = np.asarray(model.marginal([x, y])).reshape(-1)
        out.append(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())
    return float(np.mean(out))


def test_regularised_mst_beats_the_converged_fit_at_low_rho() -> None:
    """At a small ρ on a wide generated table the regularised fit (the
    default) is closer to the data's pair marginals than the converged
    least-squares fit, seed by seed (measured 0.32–0.34 against 0.33–0.35;
    the level τ was chosen on other data, the credit table)."""
    domain = Domain.from_json(WIDE)
    df = wide_table()
    regular, converged = [], []
    for seed in range(4):
        for store, kw in ((regular, {}), (converged, {"discrepancy": None})):
            table = ektelo.protect(df, domain, rho=0.001, seed=seed)
            store.append(_tv(df, domain, plans.mst(table, None, 0.001, **kw)))
    assert all(r < c for r, c in zip(regular, converged, strict=True))
    assert np.mean(regular) < 0.98 * np.mean(converged)
    assert DISCREPANCY == 0.8
