"""Bounding the groups of each privacy unit (issue #37): L0 and L∞ bounds.

With `max_groups_per_unit=g`, `max_rows_per_group=r` and `group_by`, every
engine keeps at most g groups of each unit and r rows of each (unit, group),
chosen by keyed orders no analyst sees, the same in every engine:
* one unit then moves a count by at most g·r rows (L1: Laplace is charged
  g·r·ε) and a histogram over attributes that include `group_by` by at most
  √g·r in L2, so a Gaussian query that counts within groups is charged
  g·r²·ρ, not (g·r)²·ρ — with a statistical test of the noise per unit;
* any query that mixes groups (a total, a vector without `group_by`) is
  charged the L1 way;
* bad input is refused before anything is spent.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

import ektelo
from ektelo.budget import rho_of_epsilon_delta
from ektelo.domain import Domain
from ektelo.engines import DuckDBEngine, MemoryEngine, SparkEngine, open_table
from ektelo.kernel import PrivacyUnit
from ektelo.kernel.sensitivity import group_separable
from ektelo.matrix import Dense, Identity, Kronecker, Ones, Prefix, Sparse, Total, VStack
from ektelo.port import ProtectedTable
from ektelo.predicates import col

DOMAIN = Domain.from_json({"age": 10, "site": 6})
G, R = 2, 3  # groups per unit, rows per group
UNITS = PrivacyUnit("person", R, G, ("site",))


def visits(units: int = 80, seed: int = 0, heavy: bool = False) -> pd.DataFrame:
    """Each person visits 1–5 sites, 1–6 times each (and a heavy person who
    visits every site 40 times when asked)."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(units):
        for site in rng.choice(6, size=int(rng.integers(1, 6)), replace=False):
            for _ in range(int(rng.integers(1, 7))):
                rows.append((p, int(rng.integers(0, 10)), int(site)))
    if heavy:
        rows += [(10_000, a % 10, s) for s in range(6) for a in range(40)]
    return pd.DataFrame(rows, columns=["person", "age", "site"])


def _engine(name: str) -> Any:
    return {"memory": MemoryEngine, "duckdb": DuckDBEngine}[name]()


def _counts(engine: Any, table: Any) -> np.ndarray:
    return np.asarray(engine.vectorize(table, [0, 1], DOMAIN.shape)).reshape(DOMAIN.shape)


@pytest.mark.parametrize("name", ["memory", "duckdb"])
def test_a_heavy_unit_adds_g_groups_of_r_rows(name: str) -> None:
    e1, without = open_table(visits(), DOMAIN, engine=_engine(name), units=UNITS, key="s")
    e2, with_heavy = open_table(visits(heavy=True), DOMAIN, engine=_engine(name),
                                units=UNITS, key="s")  # fmt: skip
    diff = _counts(e2, with_heavy) - _counts(e1, without)
    per_site = diff.sum(axis=0)
    assert diff.min() >= 0 and diff.sum() == G * R  # L1 = g·r exactly
    assert np.count_nonzero(per_site) == G and per_site.max() == R  # L0 = g, L∞ = r
    assert np.linalg.norm(per_site) == pytest.approx(math.sqrt(G) * R)


@pytest.mark.parametrize("name", ["memory", "duckdb"])
def test_every_unit_keeps_at_most_g_groups_of_r_rows(name: str) -> None:
    frame = visits(units=120, seed=3)
    # each person tagged by a unique age so the kept rows can be traced back
    frame["age"] = frame["person"] % 10
    frame = frame[frame["person"] < 10]
    engine, table = open_table(frame, DOMAIN, engine=_engine(name), units=UNITS, key="t")
    kept = _counts(engine, table)  # row a: person a's kept rows by site
    true = pd.crosstab(frame["age"], frame["site"]).reindex(
        index=range(10), columns=range(6), fill_value=0
    ).to_numpy()  # fmt: skip
    assert np.all((kept > 0).sum(axis=1) == np.minimum((true > 0).sum(axis=1), G))
    assert np.all(kept <= np.minimum(true, R))


def test_memory_and_duckdb_keep_the_same_rows() -> None:
    frame = visits(units=200, seed=4)
    m, m_table = open_table(frame, DOMAIN, engine="memory", units=UNITS, key="k1")
    d, d_table = open_table(frame, DOMAIN, engine="duckdb", units=UNITS, key="k1")
    assert np.array_equal(_counts(m, m_table), _counts(d, d_table))
    _, again = open_table(frame, DOMAIN, engine="memory", units=UNITS, key="k2")
    assert not np.array_equal(_counts(m, m_table), _counts(m, again))  # the order is keyed


def test_spark_keeps_the_same_rows(spark: Any) -> None:
    frame = visits(units=120, seed=5)
    m, m_table = open_table(frame, DOMAIN, engine="memory", units=UNITS, key="k1")
    engine = SparkEngine(session=spark)
    rows = [tuple(int(v) for v in r) for r in frame.itertuples(index=False, name=None)]
    spark_frame = spark.createDataFrame(rows, "person long, age long, site long")
    s_table = engine.open_source(spark_frame, DOMAIN, units=UNITS, key="k1")
    assert np.array_equal(_counts(m, m_table), _counts(engine, s_table))


def _protect(**budget: Any) -> ProtectedTable:
    t = ektelo.protect(visits(), DOMAIN, seed=1, privacy_unit="person", max_groups_per_unit=G,
                       max_rows_per_group=R, group_by=["site"], **budget)  # fmt: skip
    assert isinstance(t, ProtectedTable)
    return t


def test_laplace_is_charged_g_times_r() -> None:
    t = _protect(epsilon=1.0)
    assert t.ledger()[1].stability == G * R
    t.vectorize().laplace(Identity(60), eps=0.01)
    assert t.ledger()[0].spent == G * R * Fraction(0.01)
    assert "at most 2 groups of ['site'] each, 3 rows per group" in str(t.budget)


@pytest.mark.parametrize(
    ("attrs", "query", "separable"),
    [
        (None, Identity(60), True),  # the full histogram
        (None, Kronecker([Total(10), Identity(6)]), True),  # counts by site
        (["site"], Identity(6), True),
        (["site", "age"], Kronecker([Prefix(6), Total(10)]), False),  # a CDF over sites
        (None, Total(60), False),  # all groups together
        (["age"], Identity(10), False),  # a vector that does not see the groups
    ],
)
def test_gaussian_is_charged_g_r_squared_where_queries_count_within_groups(
    attrs: Any, query: Any, separable: bool
) -> None:
    t = _protect(rho=1.0)
    x = t.vectorize(attrs) if attrs else t.vectorize()
    x.gaussian(query, rho=0.001)
    per_unit = G * R * R if separable else (G * R) ** 2
    assert t.ledger()[0].spent == per_unit * Fraction(0.001)


def test_a_filtered_table_keeps_the_bound_a_split_does_not() -> None:
    t = _protect(rho=1.0)
    t.where(col("age") <= 4).vectorize().gaussian(Identity(60), rho=0.001)
    assert t.ledger()[0].spent == G * R * R * Fraction(0.001)
    part = t.split_by_partition("site")[2]  # rows of one site in each part: no claim kept
    part.vectorize().gaussian(Identity(60), rho=0.001)
    assert t.ledger()[0].spent == (G * R * R + (G * R) ** 2) * Fraction(0.001)


@pytest.mark.parametrize("right", [True, False])
def test_the_noise_per_unit_is_root_g_times_r(right: bool) -> None:
    """ρ per unit spent on a histogram by site: the noise is N(0, σ²) with
    σ = √g·r/√(2ρ) per unit of budget — and the test rejects σ = g·r/√(2ρ),
    what accounting by L1 alone gives (power)."""
    rho_unit = 0.5
    t = _protect(rho=400 * rho_unit)
    x = t.vectorize(["site"])
    local = rho_unit / (G * R * R)  # what a request asks of the bounded table
    draws = np.array([x.gaussian(Identity(6), rho=local).answers for _ in range(300)])
    assert t.budget.spent == pytest.approx(300 * rho_unit)
    noise = (draws - np.median(draws, axis=0)).reshape(-1)
    sigma = (math.sqrt(G) * R if right else G * R) / math.sqrt(2 * rho_unit)
    p = stats.kstest(noise, stats.norm(scale=sigma).cdf).pvalue
    assert p > 1e-3 if right else p < 1e-6


def test_group_separable_rules() -> None:
    shape, site = (10, 6), (1,)
    assert group_separable(Identity(60), shape, site)
    assert group_separable(VStack([Identity(60), Kronecker([Ones(1, 10), Identity(6)])]),
                           shape, site)  # fmt: skip
    assert not group_separable(Kronecker([Identity(10), Ones(2, 6)]), shape, site)
    assert group_separable(Kronecker([Prefix(10), Identity(6)]), shape, site)
    assert not group_separable(Kronecker([Identity(60)]), shape, site)  # not by attribute
    rows = np.zeros((2, 60))
    rows[0, [0 * 6 + 2, 5 * 6 + 2]] = 1  # two ages, one site: within a group
    assert group_separable(Dense(rows), shape, site)
    assert group_separable(Sparse(sp.csr_matrix(rows)), shape, site)
    rows[1, [7, 8]] = 1  # sites 1 and 2 together
    assert not group_separable(Dense(rows), shape, site)
    assert not group_separable(Sparse(sp.csr_matrix(rows)), shape, site)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_groups_per_unit": 2, "max_rows_per_group": 3}, "together"),
        ({"max_groups_per_unit": 2, "group_by": ["site"]}, "together"),
        ({"max_groups_per_unit": 2, "max_rows_per_group": 3, "group_by": ["nowhere"]},
         "unknown attribute"),
        ({"max_groups_per_unit": 0, "max_rows_per_group": 3, "group_by": ["site"]},
         "max_groups_per_unit must be a positive int"),
        ({"max_groups_per_unit": 2, "max_rows_per_group": -1, "group_by": ["site"]},
         "max_rows_per_group must be a positive int"),
        ({"max_groups_per_unit": 2, "max_rows_per_group": 3, "group_by": ["person"]},
         "names the privacy unit"),
        ({"max_groups_per_unit": 2, "max_rows_per_group": 3, "group_by": [],}, "group_by"),
        ({"max_rows_per_unit": 2, "max_groups_per_unit": 2, "max_rows_per_group": 3,
          "group_by": ["site"]}, "not both"),
    ],
)
@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_bad_group_bounds_are_refused_before_anything(
    options: dict[str, Any], match: str, engine: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        ektelo.protect(visits(), DOMAIN, epsilon=1.0, engine=engine, privacy_unit="person",
                       **options)  # fmt: skip


@pytest.mark.parametrize(("attrs", "gain"), [(["site"], True), (["site", "age"], True),
                                             (["age"], False)])  # fmt: skip
def test_a_session_spends_its_rho_per_unit_with_less_noise(attrs: list[str], gain: bool) -> None:
    from ektelo.session import Session

    s = Session(visits(), DOMAIN, rho=1.0, seed=2, privacy_unit="person", progress=False,
                max_groups_per_unit=G, max_rows_per_group=R, group_by=["site"])  # fmt: skip
    answer = s.histogram(attrs, rho=0.2, plan="identity")
    assert s.budget.spent == pytest.approx(0.2)  # the question's ρ per unit, whatever the plan
    per_unit = math.sqrt(G) * R if gain else G * R  # the L2 bound a unit moves the counts by
    assert answer["std_error"].iloc[0] == pytest.approx(per_unit / math.sqrt(0.4), rel=1e-3)
    # one-way marginals of site and age, each on its own vector: K = 2 at ρ/2 each
    m = s.marginals(["site", "age"], k=1, rho=0.2, plan="marginals_direct")
    assert s.budget.spent == pytest.approx(0.4)
    site_sd = math.sqrt(G) * R / math.sqrt(0.2)  # ρ/2 each: σ = bound·√(2/(2·0.1))
    assert m["std_error"].iloc[0] == pytest.approx(site_sd, rel=1e-3)
    assert m["std_error"].iloc[-1] == pytest.approx(G * R / math.sqrt(0.2), rel=1e-3)


def test_the_command_line_bounds_groups_per_person(tmp_path: Any) -> None:
    from ektelo.cli import main

    data, domain = tmp_path / "visits.csv", tmp_path / "visits.domain.json"
    visits().to_csv(data, index=False)
    domain.write_text('{"age": 10, "site": 6}')
    out = tmp_path / "answers.csv"
    args = ["run", "--no-ledger", "--data", str(data), "--domain", str(domain), "--workload",
            "histogram:site", "--plan", "identity", "--epsilon", "1", "--delta", "1e-6",
            "--seed", "1", "--out", str(out), "--privacy-unit", "person",
            "--max-groups-per-unit", str(G), "--max-rows-per-group", str(R),
            "--unit-groups", "site"]  # fmt: skip
    assert main(args) == 0
    # a Gaussian histogram by site: σ = √g·r/√(2ρ) per person
    sd = pd.read_csv(out)["std_error"].iloc[0]
    rho = rho_of_epsilon_delta(1.0, 1e-6)
    assert sd == pytest.approx(math.sqrt(G) * R / math.sqrt(2 * rho), rel=1e-3)
