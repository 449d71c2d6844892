"""Wide tables in the session (issue #25's front door): all K-way marginals
through the graphical-model path under zCDP without the full vector, the
rule choosing it over direct measurement, `Session.model` and
`Session.synthetic` spending exactly their budget (and refusing before
spending), and clear errors for bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from ektelo import BudgetExceeded
from ektelo.inference import GraphicalModel
from ektelo.session import LARGE_VECTOR, Session
from ektelo.workload import spec

NAMES = [f"a{i}" for i in range(8)]
WIDE = dict.fromkeys(NAMES, 10)  # 10^8 cells: far above the session's vector limit


def wide_table(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A chain a0 → a1 → … (aᵢ is its parent shifted by i 70% of the time),
    so the pair marginals are far from the product of the 1-way ones and
    differ from pair to pair (a mixed-up or transposed marginal shows)."""
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, 10, rows)]
    for i in range(1, len(NAMES)):
        keep = rng.random(rows) < 0.7
        cols.append(np.where(keep, (cols[-1] + i) % 10, rng.integers(0, 10, rows)))
    return pd.DataFrame(dict(zip(NAMES, cols, strict=True)))


def true_marginal(df: pd.DataFrame, attrs: list[str]) -> np.ndarray:
    counts = np.zeros([10] * len(attrs))
    np.add.at(counts, tuple(df[a].to_numpy() for a in attrs), 1)
    return counts


def test_all_pairs_of_a_wide_table_come_from_the_model_without_the_full_vector(vectorized):
    assert math.prod(WIDE.values()) > LARGE_VECTOR
    df = wide_table()
    s = Session(df, WIDE, epsilon=20.0, delta=1e-9, seed=3, progress=False)
    frame = s.marginals(2, epsilon=20.0)
    assert frame.attrs["plan"] == "mst"
    assert "no full vector" in frame.attrs["why"]
    pairs = ["×".join(p) for p in itertools.combinations(NAMES, 2)]
    assert list(frame["marginal"].unique()) == pairs
    assert len(frame) == len(pairs) * 100
    # no closed-form interval off a model: said, not blank
    assert frame["ci_method"].str.startswith("none: graphical-model estimate").all()
    assert frame["std_error"].isna().all() and frame["ci_low"].isna().all()
    # nothing bigger than a pair was ever vectorized
    assert vectorized and max(len(a) for a in vectorized) <= 2
    # the rows line up with their cells: each pair's answers are close to the
    # truth in total variation (a shuffled order or a product model fails)
    tv = []
    for a, b in itertools.combinations(NAMES, 2):
        rows = frame[frame["marginal"] == f"{a}×{b}"]
        est = np.zeros((10, 10))
        est[rows[a].astype(int), rows[b].astype(int)] = rows["answer"]
        truth = true_marginal(df, [a, b])
        tv.append(0.5 * np.abs(est / est.sum() - truth / truth.sum()).sum())
    independent = true_marginal(df, ["a0"])[:, None] * true_marginal(df, ["a1"])[None, :]
    product_tv = 0.5 * np.abs(independent / len(df) ** 2
                              - true_marginal(df, ["a0", "a1"]) / len(df)).sum()
    assert tv[0] < 0.1 < product_tv  # the tree edge a0–a1 is recovered
    edges = [tv[i] for i, p in enumerate(itertools.combinations(range(8), 2)) if p[1] == p[0] + 1]
    assert max(edges) < 0.1  # every edge of the chain
    assert float(np.mean(tv)) < 0.3
    assert s.spent == pytest.approx(s.budget.total, rel=1e-9)


def test_few_marginals_are_measured_directly_with_exact_gaussian_intervals():
    domain = {"x": 200, "y": 200, "z": 200}  # 8·10^6 cells, only 3 pairs
    rng = np.random.default_rng(1)
    df = pd.DataFrame({n: rng.integers(0, 200, 500) for n in domain})
    s = Session(df, domain, epsilon=1.0, delta=1e-9, seed=1, progress=False)
    frame = s.marginals(2, epsilon=1.0)
    assert frame.attrs["plan"] == "marginals_direct"
    assert (frame["ci_method"] == "exact Gaussian").all()
    assert frame["std_error"].gt(0).all()


def test_pure_epsilon_wide_tables_keep_direct_laplace_and_say_so():
    s = Session(wide_table(500), WIDE, epsilon=1.0, seed=1, progress=False)
    frame = s.marginals(2, epsilon=1.0)
    assert frame.attrs["plan"] == "marginals_direct"
    assert "pure ε: Laplace" in frame.attrs["why"]
    assert (frame["ci_method"] == "exact Laplace").all()


def test_three_way_marginals_of_many_attributes_use_aim():
    q = spec.parse("marginals:3:all", _domain(WIDE))
    from ektelo.planner import choose

    def plan(question):
        return choose(question, {"rho": 0.1}).plan

    # 56 triples over 8 attributes: direct would give each ρ/56, AIM ρ/142 —
    # direct is better here; with 14 attributes (364 triples) AIM wins
    assert plan(q) == "marginals_direct"
    many = dict.fromkeys([f"b{i}" for i in range(14)], 3)
    assert plan(spec.parse("marginals:3:all", _domain(many))) == "aim"
    assert plan(spec.parse("marginals:1:all", _domain(many))) == "marginals_direct"


def _domain(d):
    from ektelo.session import load_domain

    return load_domain(d)


def test_marginals_all_parses_to_every_attribute():
    domain = _domain(WIDE)
    q = spec.parse("marginals:2:all", domain)
    assert list(q.attributes) == NAMES
    assert q.rows["marginal"].nunique() == 28
    with pytest.raises(ValueError, match="unknown attribute 'zz'"):
        spec.parse("marginals:2:a0,zz", domain)


def test_model_and_synthetic_spend_exactly_and_refuse_before_spending():
    df = wide_table(2000)
    s = Session(df, WIDE, epsilon=2.0, delta=1e-9, seed=2, progress=False)
    model = s.model(epsilon=1.0)
    assert isinstance(model, GraphicalModel)
    spent = s.spent
    from ektelo.budget import rho_of_epsilon_delta

    assert spent == pytest.approx(rho_of_epsilon_delta(1.0, 1e-9), rel=1e-12)
    assert model.marginal(["a0", "a1"]).shape == (10, 10)
    syn = s.synthetic(rows=123, epsilon=0.5, seed=0)
    assert list(syn.columns) == NAMES and len(syn) == 123
    assert s.spent == pytest.approx(spent + rho_of_epsilon_delta(0.5, 1e-9), rel=1e-12)
    assert list(s.history["question"]) == ["model", "synthetic"]
    before = s.spent
    with pytest.raises(BudgetExceeded, match="nothing was spent"):
        s.synthetic(epsilon=1.9)
    assert s.spent == before
    # the default row count is the model's (noisy) total
    assert abs(len(s.synthetic(epsilon=0.1, plan="mst", attrs=["a0", "a1"])) - 2000) < 300


def test_model_plans_need_zcdp_and_say_how():
    s = Session(wide_table(200), WIDE, epsilon=1.0, seed=1, progress=False)
    with pytest.raises(ValueError, match="delta="):
        s.synthetic(epsilon=0.5)
    with pytest.raises(ValueError, match="mst, aim"):
        s.model("privbayes", epsilon=0.5)
    assert s.spent == 0
    z = Session(wide_table(200), WIDE, epsilon=1.0, delta=1e-9, seed=1, progress=False)
    with pytest.raises(ValueError, match="unknown attribute 'nope'"):
        z.model(epsilon=0.5, attrs=["a0", "nope"])
    with pytest.raises(ValueError, match="mst models all low-order marginals"):
        z.model(epsilon=0.5, workload=[("a0", "a1")])
    assert z.spent == 0
