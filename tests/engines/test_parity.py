"""Same answers everywhere (issue #28): the memory, DuckDB and Spark engines.

Property tests: random domains (integer-coded, string- and number-labelled,
binned attributes), random tables with NULLs, NaN, out-of-domain values and
non-integers, random predicate trees (Compare/IsIn/Between/And/Or/Not, with
operands that select nothing too), under each `on_invalid` policy. The
in-memory engine (pandas → `Domain.clean`/`encode` → NumPy) is the reference;
DuckDB reads the same rows from a Parquet file (and from the DataFrame), Spark
from the same Parquet file. Compared: whether opening refuses the table (and
the exception type and column), then the cell counts of `where` → `vectorize`,
`select` → `vectorize`, `group_by` (with a capped count) → codes, `split` →
counts, and `count`.

Spark is slow (each action a job): its property runs few examples, on the one
shared session of conftest.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ektelo import Domain, col
from ektelo.domain import Attribute, DomainValueError

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

POLICIES = ("error", "drop", "clamp")


# -- strategies ------------------------------------------------------------------------


@st.composite
def attributes(draw: Any, name: str) -> Attribute:
    kind = draw(st.sampled_from(["integer", "str", "number", "bins"]))
    size = draw(st.integers(1, 5))
    if kind == "integer":
        return Attribute(name, size)
    if kind == "str":
        return Attribute(name, size, values=tuple(["a", "b'q", 'c"d', "", "é"][:size]))
    if kind == "number":
        return Attribute(name, size, values=tuple([10, 20, 35, 40, 55][:size]))
    start = draw(st.sampled_from([-5.0, 0.0, 2.5]))
    widths = draw(st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=size, max_size=size))
    return Attribute(name, size, bins=tuple(np.cumsum([start, *widths]).tolist()))


def _values(a: Attribute) -> list[Any]:
    """Valid values of `a`, then invalid ones (outside the domain, missing)."""
    if a.values is not None:
        valid = list(a.values)
        bad = ["zz"] if isinstance(valid[0], str) else [15.0, -1.0]
        return valid + bad + [None]
    if a.bins is not None:
        lo, hi = a.bins[0], a.bins[-1]
        inside = [lo, (lo + hi) / 2, *a.bins[1:-1], hi - 0.25]
        return [*inside, lo - 1.0, hi, hi + 7.5, None, float("nan")]
    return [*range(a.size), -1.0, float(a.size), a.size + 4.0, 0.5, 2.5, None]


@st.composite
def tables(draw: Any) -> tuple[Domain, pd.DataFrame]:
    k = draw(st.integers(1, 3))
    names = ["x", 'y "q"', "z'"][:k]  # identifiers with quotes: quoted, never built into SQL
    attrs = [draw(attributes(n)) for n in names]
    domain = Domain(attrs)
    n = draw(st.integers(0, 25))
    valid_only = draw(st.booleans())  # half the tables have no invalid value at all
    columns = {}
    for a in attrs:
        pool = _values(a)
        if valid_only:
            pool = pool[: a.size] if a.bins is None else pool[:2]
        picked = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
        numeric = a.values is None or not isinstance(a.values[0], str)
        dtype = "float64" if numeric else object
        if valid_only and a.values is None and a.bins is None and draw(st.booleans()):
            dtype = "int64"  # an integer column: the SQL engines' own path
        columns[a.name] = pd.Series(picked, dtype=dtype)
    return domain, pd.DataFrame(columns)


def _operand(draw: Any, a: Attribute, op: str) -> Any:
    if a.values is not None:
        return draw(st.sampled_from(a.values))
    if a.bins is not None:
        return draw(st.sampled_from(a.bins))
    return draw(st.sampled_from([-1, 0, 1, 1.5, a.size - 1, a.size, 100]))


@st.composite
def predicates(draw: Any, domain: Domain, depth: int = 0) -> Any:
    leaf = depth >= 2 or draw(st.booleans())
    if not leaf:
        kind = draw(st.sampled_from(["and", "or", "not"]))
        if kind == "not":
            return ~draw(predicates(domain, depth + 1))
        left, right = draw(predicates(domain, depth + 1)), draw(predicates(domain, depth + 1))
        return (left & right) if kind == "and" else (left | right)
    a = draw(st.sampled_from(domain.attributes))
    c = col(a.name)
    ops = ["==", "!=", "<", ">="] if a.bins is not None else ["==", "!=", "<", "<=", ">", ">="]
    form = draw(st.sampled_from(["cmp", "isin"] + ([] if a.bins is not None else ["between"])))
    if form == "isin":
        return c.isin([_operand(draw, a, "==") for _ in range(draw(st.integers(0, 3)))])
    if form == "between":
        return c.between(_operand(draw, a, "<="), _operand(draw, a, "<="))
    op = draw(st.sampled_from(ops))
    value = _operand(draw, a, op)
    return {
        "==": c == value, "!=": c != value, "<": c < value, "<=": c <= value,
        ">": c > value, ">=": c >= value,
    }[op]  # fmt: skip


# -- the engines as the kernel uses them -----------------------------------------------


def _open(kind: str, frame: pd.DataFrame, domain: Domain, policy: str, path: Path) -> Any:
    from ektelo.engines import open_table

    if kind == "memory":
        return open_table(frame, domain, engine="memory", on_invalid=policy)
    if kind == "duckdb-frame":
        return open_table(frame, domain, engine="duckdb", on_invalid=policy)
    return open_table(str(path), domain, engine=kind, on_invalid=policy)


def observe(
    kind: str, frame: pd.DataFrame, domain: Domain, policy: str, pred: Any, light: bool = False
) -> Any:
    """What the kernel would read from `kind`: the refusal, or every count
    (`light`: only `where` → vectorize and the capped group_by, for Spark,
    whose every action is a job)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.parquet"
        frame.to_parquet(path)
        try:
            engine, table = _open(kind, frame, domain, policy, path)
        except DomainValueError as e:
            return ("refused", e.column)
        cols = list(range(len(domain)))
        kept = engine.where(table, pred, domain)
        first = engine.select(kept, [cols[-1]])
        grouped = engine.group_by(table, cols[:1], "n", 2)
        if light:
            return (
                engine.vectorize(kept, cols, domain.shape).tolist(),
                sorted(map(tuple, engine.codes(grouped).tolist())),
            )
        return (
            engine.count(table),
            engine.vectorize(kept, cols, domain.shape).tolist(),
            engine.vectorize(first, [0], (domain.shape[-1],)).tolist(),
            sorted(map(tuple, engine.codes(grouped).tolist())),
            [engine.count(t) for t in engine.split(kept, 0, domain.shape[0])],
        )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_duckdb_gives_the_memory_engines_answers(data: Any, duckdb_available: None) -> None:
    domain, frame = data.draw(tables())
    policy = data.draw(st.sampled_from(POLICIES))
    pred = data.draw(predicates(domain))
    expected = observe("memory", frame, domain, policy, pred)
    assert observe("duckdb", frame, domain, policy, pred) == expected
    assert observe("duckdb-frame", frame, domain, policy, pred) == expected


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_spark_gives_the_memory_engines_answers(data: Any, spark_session: Any) -> None:
    domain, frame = data.draw(tables())
    policy = data.draw(st.sampled_from(POLICIES))
    pred = data.draw(predicates(domain))
    expected = observe("memory", frame, domain, policy, pred, light=True)
    assert observe("spark", frame, domain, policy, pred, light=True) == expected


def test_a_csv_gives_the_same_answers(tmp_path: Path, duckdb_available: None, spark: Any) -> None:
    """CSV is read as text by DuckDB and Spark, with string labels as text by pandas."""
    from ektelo.engines import open_table

    domain = Domain.from_dict(
        {"sex": {"values": ["F", "M"]}, "n": 4, "w": {"bins": [0, 1.5, 3, 10]},
         "g": {"values": [1, 2, 3]}}
    )  # fmt: skip
    frame = pd.DataFrame(
        {"sex": ["F", "M", "x", "", "M"], "n": [0, 3, 4, 1, 2.5], "w": [0, 1.5, 9.99, 12, -1],
         "g": [1, 2, 3, 4, 2]}
    )  # fmt: skip
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    results = {}
    for kind in ("memory", "duckdb", "spark"):
        engine, table = open_table(str(path), domain, engine=kind, on_invalid="drop")
        results[kind] = engine.vectorize(table, [0, 1, 2, 3], domain.shape).tolist()
    assert results["duckdb"] == results["memory"] == results["spark"]
    assert sum(results["memory"]) == 2  # rows 0 and 1 are valid; the others are not


def test_nulls_and_policies_on_a_fixed_table(tmp_path: Path, duckdb_available: None) -> None:
    """Known answers: drop removes rows with an invalid value, clamp moves numbers."""
    from ektelo.engines import open_table

    domain = Domain.from_dict({"a": 3, "b": {"bins": [0, 10, 20]}})
    frame = pd.DataFrame({"a": [0, 1, 2, 5, -3, 1.5], "b": [5, 15, 25, -4, 19.5, 10]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    for kind in ("memory", "duckdb"):
        engine, table = open_table(str(path), domain, engine=kind, on_invalid="drop")
        assert engine.vectorize(table, [0, 1], (3, 2)).tolist() == [1, 0, 0, 1, 0, 0]
        engine, table = open_table(str(path), domain, engine=kind, on_invalid="clamp")
        # (0,0) (1,1) (2,1) (2,0) (0,1) (2,1): 1.5 rounds half to even → 2
        assert engine.vectorize(table, [0, 1], (3, 2)).tolist() == [1, 1, 0, 1, 1, 2]
        with pytest.raises(DomainValueError, match="column 'a'"):
            open_table(str(path), domain, engine=kind, on_invalid="error")


def test_spark_reads_a_catalog_table_and_a_dataframe(spark_session: Any) -> None:
    """protect(table name, engine="spark") and protect(Spark DataFrame): the
    memory engine's counts."""
    import ektelo
    from ektelo.engines import open_table

    domain = Domain.from_dict({"sex": {"values": ["F", "M"]}, "n": 3})
    rows = [("F", 0), ("M", 2), ("M", 2), ("F", 9), (None, 1)]
    frame = spark_session.createDataFrame(rows, "sex string, n long")
    frame.createOrReplaceTempView("ektelo_people")
    expected = [1.0, 0.0, 0.0, 0.0, 0.0, 2.0]  # drop: ('F', 9) and (None, 1) go
    for source in ("ektelo_people", frame):
        engine, table = open_table(source, domain, engine="spark", on_invalid="drop")
        assert engine.vectorize(table, [0, 1], (2, 3)).tolist() == expected
    table_handle = ektelo.protect(frame, domain, epsilon=1.0, on_invalid="drop")
    assert table_handle.vectorize().shape == (2, 3)
