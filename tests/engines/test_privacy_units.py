"""Privacy per unit, not per row (issue #37): contribution bounds in every engine.

* the kernel: the table of units is sealed; the bounded table is its k-stable
  child, so an ε request there is charged k·ε per unit, and the noise of a
  count is k/ε per unit of budget (a statistical test with power);
* the engines: adding a unit with 200 rows moves any count by at most k;
  memory, DuckDB and Spark keep the same rows under the same key;
* bad input is refused before any kernel exists (nothing can be spent).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import ektelo
from ektelo.domain import Domain
from ektelo.engines import DuckDBEngine, MemoryEngine, SparkEngine, open_table
from ektelo.kernel import PrivacyUnit
from ektelo.matrix import Identity, Total
from ektelo.port import ProtectedTable
from ektelo.session import Session

DOMAIN = Domain.from_json({"age": 10, "site": 4})


def events(units: int = 60, seed: int = 0, heavy: int = 0) -> pd.DataFrame:
    """An event table: a skewed number of rows per person (and one person
    with `heavy` rows when asked)."""
    rng = np.random.default_rng(seed)
    per = rng.geometric(0.3, size=units)
    person = np.repeat(np.arange(units), per)
    frame = pd.DataFrame({
        "person": person,
        "age": rng.integers(0, 10, person.size),
        "site": rng.integers(0, 4, person.size),
    })  # fmt: skip
    if heavy:
        extra = pd.DataFrame({"person": np.full(heavy, 10_000), "age": 3, "site": 1})
        frame = pd.concat([frame, extra], ignore_index=True)
    return frame


def _counts(engine: Any, table: Any) -> np.ndarray:
    return engine.vectorize(table, [0, 1], DOMAIN.shape)


ENGINES = ["memory", "duckdb"]


def _engine(name: str, spark: Any = None) -> Any:
    return {"memory": MemoryEngine, "duckdb": DuckDBEngine}[name]() if spark is None else spark


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize("k", [1, 3])
def test_a_unit_with_200_rows_moves_any_count_by_at_most_k(name: str, k: int) -> None:
    units = PrivacyUnit("person", k)
    e1, without = open_table(events(), DOMAIN, engine=_engine(name), units=units, key="s")
    e2, with_heavy = open_table(
        events(heavy=200), DOMAIN, engine=_engine(name), units=units, key="s"
    )
    diff = _counts(e2, with_heavy) - _counts(e1, without)
    assert diff.min() >= 0 and diff.sum() == k  # the heavy person adds exactly k rows
    per_person = pd.Series(e1.codes(without)[:, 0]).size
    assert per_person <= k * 60


@pytest.mark.parametrize("name", ENGINES)
def test_the_engines_keep_the_same_rows(name: str) -> None:
    frame = events(units=200, seed=4)
    units = PrivacyUnit("person", 2)
    memory, m_table = open_table(frame, DOMAIN, engine="memory", units=units, key="k1")
    other, o_table = open_table(frame, DOMAIN, engine=_engine(name), units=units, key="k1")
    assert np.array_equal(_counts(memory, m_table), _counts(other, o_table))
    # another key chooses other rows (the order is keyed), with the same per-unit bound
    _, again = open_table(frame, DOMAIN, engine="memory", units=units, key="k2")
    assert not np.array_equal(_counts(memory, m_table), _counts(memory, again))
    assert memory.count(again) == memory.count(m_table)


def test_spark_keeps_the_same_rows(spark: Any) -> None:
    frame = events(units=120, seed=5)
    units = PrivacyUnit("person", 2)
    memory, m_table = open_table(frame, DOMAIN, engine="memory", units=units, key="k1")
    engine = SparkEngine(session=spark)
    rows = [tuple(int(v) for v in r) for r in frame.itertuples(index=False, name=None)]
    spark_frame = spark.createDataFrame(rows, "person long, age long, site long")
    s_table = engine.open_source(spark_frame, DOMAIN, units=units, key="k1")
    assert np.array_equal(_counts(memory, m_table), _counts(engine, s_table))


def test_files_keep_the_same_rows_in_memory_and_duckdb(tmp_path: Any) -> None:
    path = tmp_path / "events.csv"
    events(units=150, seed=6).to_csv(path, index=False)
    units = PrivacyUnit("person", 3)
    memory, m_table = open_table(path, DOMAIN, engine="memory", units=units, key="f")
    duck, d_table = open_table(path, DOMAIN, engine="duckdb", units=units, key="f")
    assert np.array_equal(_counts(memory, m_table), _counts(duck, d_table))


def test_the_units_table_is_sealed_and_requests_are_charged_k_times() -> None:
    k = 4
    t = ektelo.protect(events(), DOMAIN, epsilon=1.0, seed=1, privacy_unit="person",
                       max_rows_per_unit=k)  # fmt: skip
    assert isinstance(t, ProtectedTable)
    ledger = t.ledger()
    assert ledger[1].stability == k and ledger[1].operation == "bound_contributions"
    root = ProtectedTable(t._port, 0)  # a client naming the sealed root by its id
    with pytest.raises(ValueError, match="sealed"):
        root.vectorize()
    with pytest.raises(ValueError, match="sealed"):
        root.noisy_count(eps=0.1)
    t.vectorize().laplace(Identity(40), eps=0.05)
    assert t.ledger()[0].spent == k * Fraction(0.05)
    assert "per privacy unit 'person', at most 4 rows each" in str(t.budget)


@pytest.mark.parametrize("true_k", [1, 5])
def test_the_noise_of_a_count_is_k_over_eps_per_unit(true_k: int) -> None:
    """With a per-unit budget ε spent on one count, the noise has scale k/ε.
    Power: the same test rejects the scale 1/ε (what per-row accounting gives)."""
    k, eps = 5, 1.0
    t = ektelo.protect(events(), DOMAIN, epsilon=400 * eps, seed=3, privacy_unit="person",
                       max_rows_per_unit=k)  # fmt: skip
    x = t.vectorize()
    local = eps / k  # what the analyst's session asks of the bounded table for ε per unit
    draws = np.array([x.laplace(Total(40), eps=local).answers[0] for _ in range(300)])
    assert t.budget.spent == pytest.approx(300 * eps)
    noise = draws - np.median(draws)
    scale = true_k / eps
    p = stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue
    if true_k == k:
        assert p > 1e-3
    else:
        assert p < 1e-6


def test_session_questions_spend_their_epsilon_per_unit() -> None:
    s = Session(events(), DOMAIN, epsilon=1.0, seed=2, privacy_unit="person",
                max_rows_per_unit=3, progress=False)  # fmt: skip
    answer = s.histogram("site", epsilon=0.3, plan="identity")
    assert s.budget.spent == pytest.approx(0.3)
    assert answer["std_error"].iloc[0] == pytest.approx(np.sqrt(2) * 3 / 0.3, rel=1e-3)
    with pytest.raises(ektelo.BudgetExceeded):
        s.histogram("site", epsilon=0.8, plan="identity")
    assert s.budget.spent == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"privacy_unit": "nobody", "max_rows_per_unit": 2}, "no such column"),
        ({"privacy_unit": "age", "max_rows_per_unit": 2}, "never a query attribute"),
        ({"privacy_unit": "person", "max_rows_per_unit": 0}, "positive int"),
        ({"privacy_unit": "person", "max_rows_per_unit": -3}, "positive int"),
        ({"privacy_unit": "person", "max_rows_per_unit": 2.5}, "positive int"),
        ({"privacy_unit": "person"}, "needs max_rows_per_unit"),
        ({"max_rows_per_unit": 2}, "name it with privacy_unit"),
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
def test_bad_units_are_refused_before_anything(
    options: dict[str, Any], match: str, engine: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        ektelo.protect(events(), DOMAIN, epsilon=1.0, engine=engine, **options)


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_identifiers_are_refused(engine: str) -> None:
    frame = events().astype({"person": "float64"})
    frame.loc[3, "person"] = np.nan
    with pytest.raises((ValueError, TypeError), match="person"):
        ektelo.protect(frame, DOMAIN, epsilon=1.0, engine=engine, privacy_unit="person",
                       max_rows_per_unit=2)  # fmt: skip
    text = events().astype({"person": str})
    text.loc[3, "person"] = None
    with pytest.raises(ValueError, match="missing values"):
        ektelo.protect(text, DOMAIN, epsilon=1.0, engine=engine, privacy_unit="person",
                       max_rows_per_unit=2)  # fmt: skip


def test_a_vector_has_no_units() -> None:
    with pytest.raises(ValueError, match="applies to tables"):
        ektelo.protect(np.arange(4), epsilon=1.0, privacy_unit="person", max_rows_per_unit=2)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_command_line_protects_per_person(tmp_path: Any, engine: str) -> None:
    from ektelo.cli import main

    data, domain = tmp_path / "visits.csv", tmp_path / "visits.domain.json"
    events(units=80, seed=7).to_csv(data, index=False)
    domain.write_text('{"age": 10, "site": 4}')
    out = tmp_path / "answers.csv"
    args = ["run", "--no-ledger", "--data", str(data), "--domain", str(domain), "--engine",
            engine, "--workload", "histogram:site", "--plan", "identity", "--epsilon", "0.5",
            "--seed", "1", "--out", str(out)]  # fmt: skip
    assert main([*args, "--privacy-unit", "person", "--max-rows-per-unit", "2"]) == 0
    per_person = pd.read_csv(out)
    # noise k/ε per cell: the std error is √2·2/0.5
    assert per_person["std_error"].iloc[0] == pytest.approx(math.sqrt(2) * 2 / 0.5, rel=1e-3)
    assert main(args) == 0
    per_row = pd.read_csv(out)
    assert per_row["std_error"].iloc[0] == pytest.approx(math.sqrt(2) / 0.5, rel=1e-3)


@pytest.mark.parametrize("engine", ENGINES)
def test_max_rows_chosen_privately_is_the_noisy_quantile(engine: str) -> None:
    from ektelo.units import SuggestMaxRows

    frame = events(units=400, seed=8)
    sizes = frame.groupby("person").size()
    t = ektelo.protect(frame, DOMAIN, epsilon=5.0, seed=9, engine=engine,
                       privacy_unit="person",
                       max_rows_per_unit=SuggestMaxRows(epsilon=2.0, quantile=0.9))  # fmt: skip
    ledger = t.ledger()
    k = int(ledger[t.node].stability)
    truth = int(np.ceil(sizes.quantile(0.9)))
    assert abs(k - truth) <= 2  # the noisy 90% quantile at ε = 2 on 400 persons
    assert ledger[0].spent == Fraction(2)  # the choice spent its ε of the per-person budget
    histogram = [n for n in ledger if n.operation == "rows_per_unit"]
    assert len(histogram) == 1 and histogram[0].stability == 1 and histogram[0].parent == 0
    assert str(t.budget).endswith(f"per privacy unit 'person', at most {k} rows each")


def test_the_command_line_chooses_max_rows_privately(tmp_path: Any, capsys: Any) -> None:
    from ektelo.cli import main

    data, domain = tmp_path / "visits.csv", tmp_path / "visits.domain.json"
    events(units=200, seed=7).to_csv(data, index=False)
    domain.write_text('{"age": 10, "site": 4}')
    code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "histogram:site", "--plan", "identity", "--epsilon", "0.5",
                 "--seed", "1", "--privacy-unit", "person", "--max-rows-per-unit", "auto:0.1"])
    assert code == 0
    with pytest.raises(SystemExit) as refused:  # a usage error, before anything runs
        main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
              "--workload", "histogram:site", "--epsilon", "0.5", "--privacy-unit",
              "person", "--max-rows-per-unit", "auto:x"])  # fmt: skip
    assert refused.value.code == 2
    assert "auto:x" in capsys.readouterr().err


def test_sums_and_means_respect_the_unit() -> None:
    """Sums are linear queries on the bounded table: Algorithm 2 charges them
    per unit like counts, so their noise scales with k (issue #38 with #37)."""
    frame = events(units=300, seed=10)

    def sum_error(k: int | None) -> float:
        units = {} if k is None else {"privacy_unit": "person", "max_rows_per_unit": k}
        data = frame if k is not None else frame.drop(columns="person")
        s = Session(data, DOMAIN, epsilon=1.0, seed=1, progress=False, **units)
        answer = s.sum("age", by="site", epsilon=0.5, plan="identity")
        assert s.budget.spent == pytest.approx(0.5)
        return float(answer["std_error"].iloc[0])

    assert sum_error(4) == pytest.approx(4 * sum_error(None), rel=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_durable_ledger_keeps_the_budget_per_unit(tmp_path: Any, engine: str) -> None:
    """The store records the relation a dataset was created with: every session
    charges k·ε per person at the dataset's root, and a session per row (or
    per another column) is refused before anything is recorded."""
    ledger = str(tmp_path / "budget.db")
    units = {"privacy_unit": "person", "max_rows_per_unit": 3}
    for _ in range(2):  # two sessions, one persistent root
        t = ektelo.protect(events(), DOMAIN, epsilon=1.0, engine=engine, ledger=ledger,
                           dataset="visits", **units)  # fmt: skip
        t.vectorize().laplace(Identity(40), eps=0.1)
    assert t.budget.spent == pytest.approx(2 * 3 * 0.1)
    with pytest.raises(ValueError, match="per privacy unit 'person'"):
        ektelo.protect(events().drop(columns="person"), DOMAIN, epsilon=1.0, engine=engine,
                       ledger=ledger, dataset="visits")  # fmt: skip
    with pytest.raises(ValueError, match="neighbouring relation"):
        ektelo.protect(events().assign(other=1), DOMAIN, epsilon=1.0, engine=engine,
                       ledger=ledger, dataset="visits", privacy_unit="other",
                       max_rows_per_unit=3)  # fmt: skip
    ektelo.protect(events().drop(columns="person"), DOMAIN, epsilon=1.0, engine=engine,
                   ledger=ledger, dataset="per-row")  # a new dataset: per row  # fmt: skip
    with pytest.raises(ValueError, match="per row"):
        ektelo.protect(events(), DOMAIN, epsilon=1.0, engine=engine, ledger=ledger,
                       dataset="per-row", **units)  # fmt: skip
