"""The domain check from statistics (issue #42): the DuckDB engine proves a
numeric column valid from its min, max and NULL count (a Parquet file answers
them from its row-group statistics) and scans only the rest. These tests hold
it to the scan: the same bad inputs refused with the same message, the same
good ones accepted with the same counts — on a Parquet file of several row
groups (statistics exist), a CSV and an in-memory table (they do not) — and
check that the statistics are used, and that a query reads only its columns."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ektelo import Domain
from ektelo.domain import DomainValueError
from ektelo.engines import DuckDBEngine, MemoryEngine, SparkEngine
from ektelo.engines.memory import open_frame

ROWS = 200
DOMAIN = Domain.from_dict(
    {
        "a": 16,  # integer codes from an INTEGER column
        "b": {"bins": [0, 50, 100]},  # bins over an INTEGER column
        "s": {"values": ["p", "q", "r"]},  # labels: always scanned
        "x": {"bins": [0.0, 10.0, 20.0]},  # bins over a DOUBLE column
        "f": 5,  # integer codes from a DOUBLE column: integrality needs the scan
    }
)
INTEGERS = Domain.from_dict({"a": 16, "b": {"bins": [0, 50, 100]}})
BAD_ROW = 180  # in the 8th of 8 row groups of 25 rows


def columns(change: dict[str, Any] | None = None) -> dict[str, list[Any]]:
    i = np.arange(ROWS)
    data: dict[str, list[Any]] = {
        "a": (i % 16).tolist(),
        "b": (i % 100).tolist(),
        "s": [["p", "q", "r"][k % 3] for k in i],
        "x": ((i % 200) / 10).tolist(),  # 0.0 … 19.9
        "f": (i % 5).astype(float).tolist(),
    }
    for name, value in (change or {}).items():
        data[name][BAD_ROW] = value
    return data


def arrow(data: dict[str, list[Any]]) -> pa.Table:
    """NaN stays NaN and None is NULL (no pandas conversion in between)."""
    types = {"a": pa.int64(), "b": pa.int32(), "s": pa.string(), "x": pa.float64(),
             "f": pa.float64()}  # fmt: skip
    return pa.table({k: pa.array(v, type=types[k]) for k, v in data.items()})


BAD = {
    "int above the codes": {"a": 16},
    "negative int": {"a": -1},
    "NULL int": {"a": None},
    "int at the last bin edge": {"b": 100},
    "int below the first bin": {"b": -5},
    "unknown label": {"s": "zz"},
    "NULL label": {"s": None},
    "NaN in a binned float": {"x": math.nan},
    "infinity in a binned float": {"x": math.inf},
    "float at the last bin edge": {"x": 20.0},
    "NULL float": {"x": None},
    "fraction in an integer attribute": {"f": 2.5},
    "NaN in an integer attribute": {"f": math.nan},
    "huge int": {"a": 2**62},
}
GOOD = {
    "valid": {},
    "the extremes": {"a": 15, "b": 99, "x": 19.999},
    "a negative zero": {"x": -0.0},
}


def source(kind: str, data: dict[str, list[Any]], tmp_path: Path) -> Any:
    table = arrow(data)
    if kind == "parquet":
        path = tmp_path / "t.parquet"
        pq.write_table(table, path, row_group_size=25)
        assert pq.ParquetFile(path).metadata.num_row_groups == 8
        return path
    if kind == "csv":
        path = tmp_path / "t.csv"
        table.to_pandas().to_csv(path, index=False)
        return path
    return table.to_pandas()


def outcome(
    engine: Any, data: Any, domain: Domain, policy: str, show: bool = False
) -> tuple[str, Any]:
    """("refused", message) or ("counts", the full histogram)."""
    try:
        if isinstance(engine, MemoryEngine):
            table = open_frame(data, domain, on_invalid=policy, show_bad_values=show)
        elif isinstance(data, Path):
            table = engine.open_source(data, domain, on_invalid=policy, show_bad_values=show)
        else:
            table = engine.open_frame(data, domain, on_invalid=policy, show_bad_values=show)
    except DomainValueError as error:
        return "refused", str(error)
    n = len(domain)
    return "counts", engine.vectorize(table, list(range(n)), domain.shape).tolist()


@pytest.mark.parametrize("policy", ["error", "clamp"])
@pytest.mark.parametrize("case", [*BAD, *GOOD])
def test_statistics_and_scan_agree(
    case: str, policy: str, tmp_path: Path, duckdb_available: None
) -> None:
    data = columns({**BAD, **GOOD}[case])
    frame = arrow(data).to_pandas()
    expected = outcome(MemoryEngine(), frame, DOMAIN, policy)
    seen = {}
    for kind in ("parquet", "csv", "frame"):
        src = source(kind, data, tmp_path)
        engine = DuckDBEngine()  # one connection per source, as a data holder's
        fast = outcome(engine, src, DOMAIN, policy)
        shown = outcome(engine, src, DOMAIN, policy, show=True) if kind == "parquet" else None
        scan = DuckDBEngine(trust_statistics=False)  # the check as it was: every column scanned
        assert outcome(scan, src, DOMAIN, policy) == fast, kind
        if shown is not None:  # the listed values too (the data holder's opt-in)
            assert outcome(scan, src, DOMAIN, policy, show=True) == shown
        seen[kind] = fast
        # the memory engine decides alike (its own wording) and counts alike
        assert fast[0] == expected[0], (kind, fast, expected)
        if fast[0] == "counts":
            assert fast == expected, kind
        else:
            column = expected[1].split("'")[1]
            assert fast[1].startswith(f"column '{column}'"), (fast, expected)
    if case in GOOD:
        assert all(v[0] == "counts" for v in seen.values())
    elif policy == "error" or case in CLAMP_REFUSES:
        assert all(v[0] == "refused" for v in seen.values()), seen


# clamp refuses what has no nearest value: NULL, NaN, ±∞ and unknown labels
CLAMP_REFUSES = {
    "NULL int", "unknown label", "NULL label", "NaN in a binned float",
    "infinity in a binned float", "NULL float", "NaN in an integer attribute",
}  # fmt: skip


def test_a_null_integer_cannot_be_clamped(tmp_path: Path, duckdb_available: None) -> None:
    """DuckDB's least/greatest skip a NULL: the clamp must still refuse it (as
    Domain.clean does), not count it as code 0."""
    path = source("parquet", columns({"a": None}), tmp_path)
    with pytest.raises(DomainValueError, match=r"column 'a': missing values .*cannot be clamped"):
        DuckDBEngine().open_source(path, DOMAIN, on_invalid="clamp")


class Recording(DuckDBEngine):
    """A DuckDB engine that keeps the SQL of its queries."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.queries: list[str] = []

    def _run(self, operation: str, sql: str, params: Any) -> Any:
        self.queries.append(sql)
        return super()._run(operation, sql, params)

    def _exact_rows(self, operation: str, sql: str, params: Any) -> Any:
        self.queries.append(sql)
        return super()._exact_rows(operation, sql, params)


def _scans(engine: Recording) -> list[str]:
    # the first pass (one count per column), not the kinds of problem after it
    return [q for q in engine.queries if "FILTER (WHERE NOT v" in q and "AND (r" not in q]


def test_parquet_statistics_spare_the_scan(tmp_path: Path, duckdb_available: None) -> None:
    path = source("parquet", columns(), tmp_path)
    engine = Recording()
    engine.open_source(path, INTEGERS)
    assert _scans(engine) == []  # a and b proven from min, max and NULL counts
    engine = Recording()
    engine.open_source(path, DOMAIN)
    (scan,) = _scans(engine)  # the labels s (2) and the floats x (3) and f (4) only
    tested = sorted({int(j) for j in re.findall(r"WHERE NOT v(\d+)\)", scan)})
    assert tested == [2, 3, 4]


def test_a_bad_value_late_in_the_file_is_still_scanned(
    tmp_path: Path, duckdb_available: None
) -> None:
    path = source("parquet", columns({"a": 99}), tmp_path)
    engine = Recording()
    with pytest.raises(DomainValueError, match="column 'a'"):
        engine.open_source(path, INTEGERS)
    assert len(_scans(engine)) == 1  # the statistics could not clear it: the scan refused


def test_statistics_can_be_distrusted(tmp_path: Path, duckdb_available: None) -> None:
    engine = Recording(trust_statistics=False)
    engine.open_source(source("parquet", columns(), tmp_path), INTEGERS)
    assert len(_scans(engine)) == 1
    with pytest.raises(TypeError, match="trust_statistics"):
        DuckDBEngine(trust_statistics="no")  # type: ignore[arg-type]


def test_no_statistics_no_shortcut(tmp_path: Path, duckdb_available: None) -> None:
    """A CSV is text: every column scanned, nothing assumed."""
    engine = Recording()
    engine.open_source(source("csv", columns(), tmp_path), INTEGERS)
    assert len(_scans(engine)) == 1


def test_an_empty_file_is_accepted(tmp_path: Path, duckdb_available: None) -> None:
    empty = {k: v[:0] for k, v in columns().items()}
    path = tmp_path / "empty.parquet"
    pq.write_table(arrow(empty), path)
    engine = DuckDBEngine()
    table = engine.open_source(path, DOMAIN)
    assert engine.vectorize(table, [0, 1], (16, 2)).sum() == 0


def test_a_query_reads_only_its_columns(tmp_path: Path, duckdb_available: None) -> None:
    """After the check, `ok` tests no code: a histogram over (a, b) leaves the
    other columns unread (DuckDB's plan projects a and b only)."""
    data = columns()
    data["unused_label"] = data.pop("s")
    path = tmp_path / "t.parquet"
    table = arrow({k: v for k, v in data.items() if k != "unused_label"})
    table = table.append_column("unused_label", pa.array(data["unused_label"]))
    pq.write_table(table, path, row_group_size=25)
    domain = Domain.from_dict(
        {"a": 16, "b": {"bins": [0, 50, 100]}, "unused_label": {"values": ["p", "q", "r"]}}
    )
    for policy, reads_it in (("error", False), ("clamp", False), ("drop", True)):
        engine = Recording()
        root = engine.open_source(path, domain, on_invalid=policy)
        x = engine.vectorize(engine.select(root, [0, 1]), [0, 1], (16, 2))
        assert x.sum() == ROWS
        plan = engine.connection().execute(
            "EXPLAIN " + engine.queries[-1], [2, 1, *root.params]
        ).fetchall()
        text = " ".join(str(row[1]) for row in plan)
        # "drop" must read every column: a row invalid anywhere is not counted
        assert ("unused_label" in text) is reads_it, policy


def test_spark_reads_integer_columns_as_they_are(tmp_path: Path, spark: Any) -> None:
    """Spark: integer codes from an INTEGER column without a cast to double;
    the same refusals and counts as the memory engine."""
    for case, policy in (("valid", "error"), ("int above the codes", "error"),
                         ("int above the codes", "clamp"), ("NULL int", "clamp")):  # fmt: skip
        data = columns({**BAD, **GOOD}[case])
        path = source("parquet", data, tmp_path)
        expected = outcome(MemoryEngine(), arrow(data).to_pandas(), DOMAIN, policy)
        engine = SparkEngine(session=spark)
        try:
            table = engine.open_source(spark.read.parquet(str(path)), DOMAIN, on_invalid=policy)
        except DomainValueError as error:
            assert expected[0] == "refused", (case, policy, str(error))
            assert str(error).split("'")[1] == expected[1].split("'")[1] == "a"
            continue
        counts = engine.vectorize(table, list(range(len(DOMAIN))), DOMAIN.shape).tolist()
        assert ("counts", counts) == expected, (case, policy)


@pytest.mark.parametrize(
    "case", ["NaN in a binned float", "NaN in an integer attribute", "int above the codes"]
)
def test_drop_finds_a_nan_the_statistics_hide(
    case: str, tmp_path: Path, duckdb_available: None
) -> None:
    """pyarrow leaves NaN out of a float column's min/max; under "drop" the
    queries (not a check) find the row, so they run without DuckDB's
    statistics propagation: the NaN row is dropped, as the memory engine does
    (before: counted in the last bin, or a failed cast)."""
    data = columns(BAD[case])
    expected = outcome(MemoryEngine(), arrow(data).to_pandas(), DOMAIN, "drop")
    got = outcome(DuckDBEngine(), source("parquet", data, tmp_path), DOMAIN, "drop")
    assert got == expected and sum(got[1]) == ROWS - 1
