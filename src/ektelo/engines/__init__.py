"""Table engines (issue #28): where a protected table's rows live and run.

* `memory.MemoryEngine` — codes in this process (the default for a pandas
  DataFrame);
* `duckdb.DuckDBEngine` — DuckDB over a CSV/Parquet file or a DuckDB table,
  the work pushed down as SQL (the default for a path or ``duckdb://`` URL;
  a core dependency, imported on first use);
* `spark.SparkEngine` — PySpark DataFrames (the default for a Spark
  DataFrame; extra ``ektelo[spark]``).

All three implement `base.TableEngine`; `open_table` is `protect`'s choice of
engine and its opening of the data (the data holder's step, before any kernel
exists: the only place a table's values may be refused). The engine modules
import DuckDB and PySpark lazily, so neither is needed unless used.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..domain import Domain, csv_delimiter
from ..kernel.contracts import PrivacyUnit
from .base import (
    ON_INVALID,
    EngineError,
    TableEngine,
    check_on_invalid,
    check_unit_column,
    each_marginal,
)
from .duckdb import DuckDBEngine, is_duckdb_url
from .memory import MemoryEngine, open_frame
from .spark import SparkEngine, is_spark_dataframe

__all__ = [
    "ON_INVALID",
    "DuckDBEngine",
    "EngineError",
    "EngineFallback",
    "MemoryEngine",
    "SparkEngine",
    "TableEngine",
    "default_engine",
    "duckdb_installed",
    "each_marginal",
    "fallback_note",
    "is_frame",
    "is_table_source",
    "open_table",
    "rows_per_unit",
]

if TYPE_CHECKING:  # pandas is imported where used: a vector needs none (#41)
    import pandas as pd

ENGINES = {"memory": MemoryEngine, "duckdb": DuckDBEngine, "spark": SparkEngine}


def is_frame(data: Any) -> bool:
    """Whether `data` is a pandas DataFrame, without importing pandas: no
    DataFrame exists before pandas is imported (#41: protecting a NumPy
    vector loads no pandas)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(data, pandas.DataFrame)


def is_table_source(data: Any) -> bool:
    """Whether `protect` reads `data` as a table (not a vector)."""
    return is_frame(data) or isinstance(data, (str, Path)) or is_spark_dataframe(data)


def duckdb_installed() -> bool:
    """Whether DuckDB can be imported (without importing it)."""
    return importlib.util.find_spec("duckdb") is not None


def default_engine(data: Any) -> str:
    """The engine `protect` picks for `data` when none is given (issue #28):
    a pandas DataFrame → "memory"; a Spark DataFrame → "spark"; a file path
    or a ``duckdb://`` URL → "duckdb", or "memory" for a file when DuckDB is
    not installed (`fallback_note` says so in one line)."""
    if is_frame(data):
        return "memory"
    if is_spark_dataframe(data):
        return "spark"
    if is_duckdb_url(data) or (duckdb_installed() and _duckdb_reads(data)):
        return "duckdb"
    return "memory"


def _duckdb_reads(data: Any) -> bool:
    """A path DuckDB's engine opens: .csv (.csv.gz), .parquet/.pq, a directory."""
    if not isinstance(data, (str, Path)):
        return False
    path = Path(data)
    suffixes = [s.lower() for s in path.suffixes]
    return ".csv" in suffixes or (bool(suffixes) and suffixes[-1] in (".parquet", ".pq")) or (
        path.is_dir()
    )


def fallback_note(data: Any) -> str:
    """The one line said when a file is read into memory for want of DuckDB."""
    return (
        f"note: {data} is read into memory: DuckDB, the engine for files, is not installed "
        "(pip install duckdb; --engine memory silences this)"
    )


class EngineFallback(UserWarning):
    """A file read into memory because DuckDB is not installed."""


def _engine(data: Any, engine: Any) -> TableEngine:
    if engine is None:
        chosen = default_engine(data)
        if chosen == "memory" and not is_frame(data) and not duckdb_installed():
            warnings.warn(fallback_note(data), EngineFallback, stacklevel=4)
        if chosen == "duckdb" and is_duckdb_url(data) and not duckdb_installed():
            raise ImportError("a duckdb:// table needs DuckDB: pip install duckdb")
        engine = chosen
    if isinstance(engine, str):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {sorted(ENGINES)}, got {engine!r}")
        made: TableEngine = ENGINES[engine]()
        return made
    if isinstance(engine, (MemoryEngine, DuckDBEngine, SparkEngine)):
        return engine
    raise TypeError(
        f"engine must be None, 'memory', 'duckdb', 'spark' or an engine object, got {engine!r}"
    )


def open_table(
    data: Any,
    domain: Domain,
    *,
    engine: Any = None,
    on_invalid: str = "error",
    show_bad_values: bool = False,
    units: PrivacyUnit | None = None,
    key: str = "",
) -> tuple[TableEngine, Any]:
    """(engine, root table) for `data` under `domain` — protect's table step.

    Defaults (`default_engine`): a pandas DataFrame → memory; a str/Path (a
    .csv or .parquet file) or ``"duckdb:///file.db?table=name"`` → DuckDB (a
    file falls back to memory with an `EngineFallback` warning when DuckDB is
    not installed); a Spark DataFrame → Spark. `engine=` ("memory" |
    "duckdb" | "spark" or a configured engine object such as
    `DuckDBEngine(memory_limit="1GB")`) overrides it: memory reads a file
    with pandas, DuckDB and Spark take a pandas DataFrame too.
    Values outside the domain follow `on_invalid` (base.ON_INVALID). With
    `units`, each engine keeps at most `units.max_rows` rows of each privacy
    unit in the order keyed by `key` (contracts C4; `units.column` is read
    here and dropped).
    """
    if not isinstance(domain, Domain):
        raise TypeError("protecting a table needs domain=Domain(...)")
    check_on_invalid(on_invalid)
    chosen = _engine(data, engine)
    if isinstance(chosen, MemoryEngine):
        if is_spark_dataframe(data):
            raise TypeError("a Spark DataFrame needs engine='spark'")
        frame = data if is_frame(data) else _read(data, domain, units)
        return chosen, open_frame(
            frame, domain, on_invalid=on_invalid, show_bad_values=show_bad_values,
            units=units, key=key,
        )  # fmt: skip
    if isinstance(chosen, DuckDBEngine):
        if is_frame(data):
            return chosen, chosen.open_frame(
                data, domain, on_invalid=on_invalid, show_bad_values=show_bad_values,
                units=units, key=key,
            )  # fmt: skip
        if is_spark_dataframe(data):
            raise TypeError("a Spark DataFrame needs engine='spark'")
        return chosen, chosen.open_source(
            data, domain, on_invalid=on_invalid, show_bad_values=show_bad_values,
            units=units, key=key,
        )  # fmt: skip
    if not isinstance(chosen, SparkEngine):
        raise TypeError(f"unknown table engine {chosen!r}")
    if is_frame(data):
        return chosen, chosen.open_frame(
            data, domain, on_invalid=on_invalid, show_bad_values=show_bad_values,
            units=units, key=key,
        )  # fmt: skip
    return chosen, chosen.open_source(
        data, domain, on_invalid=on_invalid, show_bad_values=show_bad_values,
        units=units, key=key,
    )  # fmt: skip


ROWS_PER_UNIT_CAP = 1024  # the histogram's last entry counts every unit with ≥ this many rows


def rows_per_unit(
    data: Any, domain: Domain, column: str, *, engine: Any = None, cap: int = ROWS_PER_UNIT_CAP
) -> np.ndarray:
    """The histogram of rows per privacy unit: entry c (0 < c ≤ cap) counts the
    units with min(rows, cap) = c — the data holder's step before a private
    choice of max_rows_per_unit (`ektelo.units`); it goes into the kernel as a
    1-stable vector of the sealed table of units, never out of it."""
    chosen = _engine(data, engine)
    check_unit_column(column, domain, _columns(chosen, data, domain, column))
    if isinstance(chosen, MemoryEngine):
        frame = data if is_frame(data) else _read(
            data, domain, PrivacyUnit(column, 1))
        if frame[column].isna().any():
            raise ValueError(f"privacy_unit={column!r} has missing values: every row "
                             "needs its unit's identifier")  # fmt: skip
        sizes = frame[column].astype(str).value_counts().to_numpy()
    elif isinstance(chosen, (DuckDBEngine, SparkEngine)):
        sizes = chosen.rows_per_unit(data, column)
    else:  # pragma: no cover - _engine returns one of the three
        raise TypeError(f"no privacy-unit sizes for {chosen!r}")
    return np.bincount(np.minimum(sizes, cap), minlength=cap + 1).astype(np.float64)


def _columns(engine: Any, data: Any, domain: Domain, column: str) -> Any:
    """The columns `data` has (for the identifier check)."""
    if is_frame(data):
        return data.columns
    if isinstance(engine, MemoryEngine) and isinstance(data, (str, Path)):
        path = Path(data)
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_schema(path).names
        import pandas as pd

        return pd.read_csv(path, nrows=0).columns
    return [column, *domain.names]  # the engine itself refuses a missing column


def _read(source: Any, domain: Domain, units: PrivacyUnit | None = None) -> pd.DataFrame:
    """A file's domain columns (and the privacy unit's, as text), for the in-memory engine."""
    if is_duckdb_url(source):
        raise ValueError("a duckdb:// table needs engine='duckdb'")
    if not isinstance(source, (str, Path)):
        raise TypeError(f"expected a DataFrame or a file path, got {type(source).__name__}")
    import pandas as pd

    path = Path(source)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".parquet", ".pq"):
        extra = [] if units is None else [units.column]
        return pd.read_parquet(path, columns=[*domain.names, *extra])
    if ".csv" in suffixes or ".tsv" in suffixes:  # as Domain.read_csv: labels text, blanks kept
        text = {
            a.name: str
            for a in domain.attributes
            if a.values is not None and all(isinstance(v, str) for v in a.values)
        }
        names = list(domain.names) + ([] if units is None else [units.column])
        if units is not None:
            text[units.column] = str
        sep = csv_delimiter(path, names)  # as DuckDB sniffs it
        return pd.read_csv(path, usecols=names, dtype=text, keep_default_na=False,
                           sep=sep)[names]
    raise ValueError(f"{path}: the memory engine reads .parquet, .csv and .tsv files")
