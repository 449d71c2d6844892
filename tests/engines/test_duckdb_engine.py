"""The DuckDB engine's own contract (issue #28): sources, configuration,
refusals before any kernel, SQL built only from the engine's fragments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, col
from ektelo.domain import DomainValueError
from ektelo.engines import DuckDBEngine, EngineError, MemoryEngine
from ektelo.matrix import Identity

DOMAIN = Domain.from_dict({"sex": {"values": ["F", "M"]}, "age": {"bins": [0, 18, 65, 120]}})
FRAME = pd.DataFrame({"sex": ["F", "M", "M", "F"], "age": [3.0, 30.0, 70.0, 64.9]})


@pytest.fixture
def parquet(tmp_path: Path, duckdb_available: None) -> Path:
    path = tmp_path / "people.parquet"
    FRAME.to_parquet(path)
    return path


def test_a_path_defaults_to_duckdb_and_a_frame_to_memory(parquet: Path) -> None:
    from ektelo.engines import open_table

    assert isinstance(open_table(str(parquet), DOMAIN)[0], DuckDBEngine)
    assert isinstance(open_table(parquet, DOMAIN)[0], DuckDBEngine)
    assert isinstance(open_table(FRAME, DOMAIN)[0], MemoryEngine)
    assert isinstance(open_table(parquet, DOMAIN, engine="memory")[0], MemoryEngine)
    with pytest.raises(ValueError, match="engine must be one of"):
        open_table(parquet, DOMAIN, engine="postgres")
    with pytest.raises(ValueError, match="on_invalid must be"):
        open_table(parquet, DOMAIN, on_invalid="ignore")


def test_configuration_reaches_duckdb(parquet: Path, tmp_path: Path) -> None:
    engine = DuckDBEngine(memory_limit="300MB", threads=1, temp_directory=tmp_path / "spill")
    engine.open_source(parquet, DOMAIN)
    con = engine.connection()
    assert con.execute("SELECT current_setting('threads')").fetchone()[0] == 1
    limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert limit.replace(" ", "").upper() in {"300.0MB", "286.1MIB", "300MB"}
    temp = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert temp == str(tmp_path / "spill")
    with pytest.raises(ValueError, match="threads"):
        DuckDBEngine(threads=0)


def test_a_duckdb_database_table(tmp_path: Path, duckdb_available: None) -> None:
    import duckdb

    db = tmp_path / "w.db"
    with duckdb.connect(str(db)) as con:
        con.register("frame", FRAME)
        con.execute('CREATE SCHEMA s; CREATE TABLE s."my ""people""" AS SELECT * FROM frame')
    url = f"duckdb://{db}?table=s.my%20%22people%22"
    t = ektelo.protect(url, DOMAIN, epsilon=1.0, seed=1)
    m = t.vectorize().laplace(Identity(6), eps=1.0)
    u = ektelo.protect(FRAME, DOMAIN, epsilon=1.0, seed=1).vectorize().laplace(
        Identity(6), eps=1.0
    )
    np.testing.assert_array_equal(m.answers, u.answers)  # same counts, same research noise
    for bad in (f"duckdb://{db}", f"duckdb://{db}?table=a.b.c", f"duckdb://host{db}?table=t"):
        with pytest.raises(ValueError):
            ektelo.protect(bad, DOMAIN, epsilon=1.0)
    with pytest.raises(FileNotFoundError):
        ektelo.protect(f"duckdb://{tmp_path}/none.db?table=t", DOMAIN, epsilon=1.0)


def test_refusals_happen_at_protect(parquet: Path, tmp_path: Path) -> None:
    bad = FRAME.assign(age=[3.0, 130.0, None, 20.0])
    path = tmp_path / "bad.parquet"
    bad.to_parquet(path)
    with pytest.raises(DomainValueError) as raised:
        ektelo.protect(path, DOMAIN, epsilon=1.0)
    message = str(raised.value)
    assert "column 'age'" in message and "130" not in message and "missing" in message
    with pytest.raises(DomainValueError, match="130"):  # the data holder's opt-in
        ektelo.protect(path, DOMAIN, epsilon=1.0, show_bad_values=True)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['kids'\]"):
        ektelo.protect(parquet, Domain.from_dict({"kids": 3}), epsilon=1.0)
    with pytest.raises(TypeError, match="needs a text column"):  # labels vs a numeric column
        ektelo.protect(parquet, Domain.from_dict({"age": {"values": ["a", "b"]}}), epsilon=1.0)
    with pytest.raises(ValueError, match="all strings, all finite numbers or all booleans"):
        ektelo.protect(parquet, Domain.from_dict({"sex": {"values": ["F", 1]}}), epsilon=1.0)
    with pytest.raises(TypeError, match="domain="):
        ektelo.protect(parquet, epsilon=1.0)
    other = tmp_path / "people.json"
    other.write_text("{}")
    with pytest.raises(ValueError, match=r"reads \.parquet, \.csv and \.tsv"):
        ektelo.protect(other, DOMAIN, epsilon=1.0)


def test_identifiers_and_values_never_become_sql(tmp_path: Path, duckdb_available: None) -> None:
    """A column named like an injection and labels full of quotes: quoted and bound."""
    name = 'x"; DROP TABLE t; --'
    labels = ["'", "a'); DELETE FROM t; --", '"']
    domain = Domain.from_dict({name: {"values": labels}, "n": 3})
    frame = pd.DataFrame({name: labels * 2, "n": [0, 1, 2, 2, 1, 0]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    engine = DuckDBEngine()
    table = engine.open_source(path, domain)
    kept = engine.where(table, col(name).isin(labels[1:]) & (col("n") >= 1), domain)
    assert engine.vectorize(kept, [0, 1], (3, 3)).tolist() == [0, 0, 0, 0, 2, 0, 0, 0, 1]
    assert "DROP" not in kept.sql.replace(name.replace('"', '""'), "")
    assert "'" not in kept.sql  # no string literal at all: labels and the path are parameters


def test_engine_errors_carry_no_value(tmp_path: Path, duckdb_available: None) -> None:
    engine = DuckDBEngine()
    frame = pd.DataFrame({"sex": ["F", "secret-value"], "age": [1.0, 2.0]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    table = engine.open_source(path, DOMAIN, on_invalid="drop")
    path.unlink()
    with pytest.raises(EngineError, match=r"^the duckdb engine could not run count$"):
        engine.count(table)


def _counts(t: Any) -> Any:
    return t.vectorize().laplace(Identity(t.vectorize().size), eps=0.1).answers.shape


def test_split_and_group_by_through_protect(parquet: Path) -> None:
    t = ektelo.protect(parquet, DOMAIN, epsilon=1.0, seed=2)
    parts = t.split_by_partition("sex")
    assert [p.domain for p in parts] == [DOMAIN, DOMAIN]
    g = t.group_by(["age"], count="n", count_cap=2)
    assert g.domain.shape == (3, 3)
    assert _counts(parts[0]) == (6,) and _counts(g) == (9,)
