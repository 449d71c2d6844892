"""The Spark table engine (issue #28): tables on a cluster, through PySpark.

A protected table is a Spark DataFrame of int64 codes c0, c1, … derived from
the data holder's DataFrame, table name or file (`open_source`); the
transformations compose DataFrames lazily (Spark's own plans) and only
`vectorize` (cell counts), `count` and `codes` bring anything back. The
encoding, the policies for invalid values (`on_invalid`) and the meaning of
every operation are the DuckDB engine's (duckdb.py), written as Column
expressions: identifiers are checked against the public Domain and the
source's columns and back-quoted; values are literals built with `lit` (Spark
has no string to parse: nothing is built from user input); comparisons are
made in double precision as in the in-memory engine; text is read with
`try_cast` (NULL, never an error, under Spark's ANSI mode).

Why no engine failure becomes a data-dependent exception after a charge: see
base.py (composition reads no row; the actions run before the charge that
uses them; any failure left raises the fixed `EngineError`).

Timing (issue #36): as in DuckDB, a table carries a BOOLEAN `ok` column —
`where` and `split` set it (masks, not filters), `group_by` groups every row
(a group is a member when one of its rows is), and `vectorize`, `count` and
the marginals count members among every row — so no job's input is cut down
to the rows a predicate selected. Spark cannot promise more: its shuffle and
aggregation work follow the distinct keys among all the rows, and its
optimiser may still skip work; the memory engine is the one tested for equal
work on neighbouring tables (tests/engines/test_timing_channels.py).

Integer codes from an integer column are read as they are (no cast to
double). Once the check has passed ("error", "clamp") no filter tests every
code, so a job reads only the columns it uses (issue #42).

Sources: a `pyspark.sql.DataFrame` (its own session), a table name of the
active session's catalog, or a ``.parquet``/``.csv`` path read with the
active session (or `SparkEngine(session=...)`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..domain import Attribute, Domain, DomainValueError
from ..kernel.contracts import PrivacyUnit
from . import codes as cd
from .base import (
    GROUP_MARKER,
    UNIT_SEPARATOR,
    Sparse,
    check_on_invalid,
    check_unit_column,
    group_axes,
    guarded,
    sparse_cells,
)

if TYPE_CHECKING:  # pandas is imported where used: a vector needs none (#41)
    pass

__all__ = ["SparkEngine", "is_spark_dataframe"]

_NUMERIC = (
    "ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType",
)  # fmt: skip
_INTEGRAL = ("ByteType", "ShortType", "IntegerType", "LongType")
_DBL_MAX = sys.float_info.max
_SHOWN = 10


def is_spark_dataframe(data: Any) -> bool:
    """Whether `data` is a Spark DataFrame (without importing PySpark: a
    DataFrame exists only once PySpark's dataframe module is loaded)."""
    module = sys.modules.get("pyspark.sql.dataframe")
    return module is not None and isinstance(data, module.DataFrame)


def _backquote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


class SparkEngine:
    """Tables as Spark DataFrames of codes."""

    name = "spark"

    def __init__(self, *, session: Any = None):
        self.session = session

    def __repr__(self) -> str:
        return "SparkEngine()"

    def _session(self) -> Any:
        if self.session is not None:
            return self.session
        from pyspark.sql import SparkSession  # the optional extra: ektelo[spark]

        active = SparkSession.getActiveSession()
        if active is None:
            raise RuntimeError("no active SparkSession: start one or pass SparkEngine(session=)")
        return active

    # -- opening: the data holder's step ----------------------------------------------
    def open_source(
        self, source: Any, domain: Domain, *, on_invalid: str = "error",
        show_bad_values: bool = False, units: PrivacyUnit | None = None, key: str = "",
    ) -> Any:  # fmt: skip
        """The root table of a DataFrame, table name or file, encoded against `domain`
        (with `units`: at most `units.max_rows` rows per unit, contracts C4)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        if not isinstance(domain, Domain):
            raise TypeError("protecting a table needs domain=Domain(...)")
        policy = check_on_invalid(on_invalid)
        frame, text = self._frame(source)
        fields = {f.name: f.dataType for f in frame.schema.fields}
        missing = [n for n in domain.columns if n not in fields]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the domain needs "
                             f"{list(domain.columns)}")
        raws, unit_col = [], []
        # open columns (issue #39): their keys as text ('' for a missing one)
        opened = [sf.coalesce(sf.col(_backquote(o)).cast("string"), sf.lit("")).alias(_open(o))
                  for o in domain.open]  # fmt: skip
        axes: list[int] = []
        if units is not None:
            check_unit_column(units.column, domain, fields)
            axes = group_axes(units, domain)
            kind = type(fields[units.column]).__name__
            if kind in ("FloatType", "DoubleType", "DecimalType"):
                raise TypeError(f"privacy_unit={units.column!r} must hold integers or strings")
            ident = sf.col(_backquote(units.column))
            nulls = guarded(self.name, "the privacy-unit check",
                            lambda: frame.where(ident.isNull()).limit(1).count())  # fmt: skip
            if nulls:
                raise ValueError(f"privacy_unit={units.column!r} has missing values: every row "
                                 "needs its unit's identifier")  # fmt: skip
            unit_col = [ident.cast("string").alias("ektelo_unit")]
        integral = []
        for j, a in enumerate(domain.attributes):
            type_name = _type_name(fields[a.name])
            # integer codes from an integer column: read as they are (no cast to double)
            integral.append(a.values is None and a.bins is None and not text
                            and type_name in _INTEGRAL)  # fmt: skip
            raw = sf.col(_backquote(a.name)) if integral[j] else _raw(
                a, sf.col(_backquote(a.name)), type_name, text)  # fmt: skip
            raws.append(raw.alias(f"r{j}"))
        raw_frame = frame.select(*raws, *opened, *unit_col)
        keys = [sf.col(_backquote(_open(o))) for o in domain.open]

        def coded(trusted: bool) -> Any:
            code_cols = [_code(a, sf.col(f"r{j}"), policy, integral[j], trusted).alias(f"c{j}")
                         for j, a in enumerate(domain.attributes)]  # fmt: skip
            return raw_frame.select(
                *code_cols, *(sf.col(f"r{j}") for j in range(len(domain))), *keys,
                *(sf.col("ektelo_unit") for _ in unit_col),
            )  # fmt: skip

        both = coded(False)
        valid = sf.lit(True)
        for j in range(len(domain)):
            valid = valid & sf.col(f"c{j}").isNotNull()
        codes = [sf.col(f"c{j}") for j in range(len(domain))]
        if policy != "drop":
            self._check(domain, both, policy, show_bad_values, integral)
            # The check proved every row valid: no filter on every code, so a job
            # reads only the columns it uses; integer codes from an integer column
            # take the clamp's form (the same code on every valid value). A source
            # that changed after the check (outside the contract) raises nothing:
            # a NULL stays a NULL code (vectorize leaves it out), an integer out of
            # range is clamped (a 1-stable map).
            both = coded(policy == "error")
            kept = both
        else:  # "drop": a row with an invalid value in any column is left out
            kept = both.where(valid)
        if units is not None:  # C4: the first max_rows valid rows of each unit, keyed order
            kept = kept.where(valid)
            order = sf.md5(sf.concat_ws(
                UNIT_SEPARATOR, sf.lit(key), sf.col("ektelo_unit"),
                *(c.cast("string") for c in codes),
            ))  # fmt: skip
            within = [sf.col("ektelo_unit")]
            if axes:  # and of its first max_groups groups (base.py)
                gcodes = [codes[j] for j in axes]
                gorder = sf.md5(sf.concat_ws(
                    UNIT_SEPARATOR, sf.lit(key), sf.col("ektelo_unit"), sf.lit(GROUP_MARKER),
                    *(c.cast("string") for c in gcodes),
                ))  # fmt: skip
                groups = Window.partitionBy("ektelo_unit").orderBy(gorder, *gcodes)
                kept = kept.withColumn("ektelo_group", sf.dense_rank().over(groups))
                kept = kept.where(sf.col("ektelo_group") <= sf.lit(units.max_groups))
                within += gcodes
            window = Window.partitionBy(*within).orderBy(order)
            kept = kept.withColumn("ektelo_rank", sf.row_number().over(window))
            kept = kept.where(sf.col("ektelo_rank") <= sf.lit(units.max_rows))
        return kept.select(*codes, *keys, sf.lit(True).alias("ok"))

    def open_frame(
        self, frame: Any, domain: Domain, *, on_invalid: str = "error",
        show_bad_values: bool = False, units: PrivacyUnit | None = None, key: str = "",
    ) -> Any:  # fmt: skip
        """The root table of a pandas DataFrame, made a Spark DataFrame."""
        spark_frame = self._session().createDataFrame(frame)
        return self.open_source(
            spark_frame, domain, on_invalid=on_invalid, show_bad_values=show_bad_values,
            units=units, key=key,
        )  # fmt: skip

    def rows_per_unit(self, data: Any, column: str) -> np.ndarray:
        """Rows per value of the identifier `column`, for `engines.rows_per_unit`."""
        import pandas as pd
        from pyspark.sql import functions as sf

        frame, _ = self._frame(data) if not isinstance(data, pd.DataFrame) else (
            self._session().createDataFrame(data), False)
        if column not in frame.columns:
            raise ValueError(f"privacy_unit={column!r}: the data has no such column")
        sizes = frame.groupBy(sf.col(_backquote(column)).alias("u")).count()
        rows = guarded(self.name, "the privacy-unit sizes", sizes.collect)
        if any(r["u"] is None for r in rows):
            raise ValueError(f"privacy_unit={column!r} has missing values: every row "
                             "needs its unit's identifier")  # fmt: skip
        return np.asarray([r["count"] for r in rows], dtype=np.int64)

    def _frame(self, source: Any) -> tuple[Any, bool]:
        """(DataFrame, whether its columns are text)."""
        if is_spark_dataframe(source):
            return source, False
        if isinstance(source, Path) or (isinstance(source, str) and Path(source).exists()):
            path = Path(source)
            suffixes = [s.lower() for s in path.suffixes]
            reader = self._session().read
            if (suffixes and suffixes[-1] in (".parquet", ".pq")) or path.is_dir():
                return reader.parquet(str(path)), False
            if ".csv" in suffixes:
                return reader.option("header", True).csv(str(path)), True
            raise ValueError(f"{path}: the Spark engine reads .parquet and .csv files")
        if isinstance(source, str) and source:
            return self._session().table(source), False
        kind = type(source).__name__
        raise TypeError(f"a Spark source is a DataFrame, a table name or a file path, got {kind}")

    def _check(
        self, domain: Domain, both: Any, policy: str, show: bool, integral: Sequence[bool]
    ) -> None:
        from pyspark.sql import functions as sf

        # each attribute's validity test over its raw column (not its code), one
        # count per column first; the kinds of problem only when there is one
        tests = [_valid(a, sf.col(f"r{j}"), policy, integral[j]).alias(f"v{j}")
                 for j, a in enumerate(domain.attributes)]  # fmt: skip
        tested = both.select(*tests, *(sf.col(f"r{j}") for j in range(len(domain))))
        first = [sf.count(sf.when(~sf.col(f"v{j}"), 1)) for j in range(len(domain))]
        bad = guarded(self.name, "the domain check", lambda: tested.agg(*first).collect()[0])
        if not any(bad):
            return
        aggs = []
        for j, a in enumerate(domain.attributes):
            r, invalid = sf.col(f"r{j}"), ~sf.col(f"v{j}")
            double = cd.is_double(a) and not integral[j]  # an integer column holds no NaN
            gone = r.isNull() | sf.isnan(r) if double else r.isNull()
            aggs.append(sf.count(sf.when(invalid & gone, 1)))
            aggs.append(sf.count(sf.when(invalid & ~gone, 1)))
        counts = guarded(self.name, "the domain check", lambda: tested.agg(*aggs).collect()[0])
        for j, a in enumerate(domain.attributes):
            missing, other = int(counts[2 * j]), int(counts[2 * j + 1])
            if missing or other:
                listing = None
                if show:
                    rows = both.where(sf.col(f"c{j}").isNull()).select(f"r{j}").limit(_SHOWN)
                    found = guarded(self.name, "the domain check", rows.collect)
                    listing = "bad values: " + ", ".join(repr(r[0]) for r in found)
                raise DomainValueError(a.name, cd.refusal(a, missing, other, policy, show), listing)

    # -- the interface ---------------------------------------------------------------
    def where(self, table: Any, predicate: Any, domain: Domain) -> Any:
        from pyspark.sql import functions as sf

        # a mask, not a filter (issue #36): every row stays, `ok` says which belong
        cond = sf.coalesce(sf.col("ok") & _condition(cd.lower(predicate, domain)), sf.lit(False))
        return table.withColumn("ok", cond)

    def select(self, table: Any, columns: Sequence[int]) -> Any:
        from pyspark.sql import functions as sf

        return table.select(*(sf.col(f"c{j}").alias(f"c{i}") for i, j in enumerate(columns)),
                            "ok")

    def group_by(self, table: Any, columns: Sequence[int], count: str | None, cap: int) -> Any:
        from pyspark.sql import functions as sf

        # every row grouped, members or not; a group is a member when one of its rows is
        keys = [sf.col(f"c{j}").alias(f"c{i}") for i, j in enumerate(columns)]
        grouped = table.groupBy(*keys)
        member = (sf.max(sf.col("ok").cast("int")) == sf.lit(1)).alias("ok")
        if count is None:
            return grouped.agg(member)
        members = sf.count(sf.when(sf.col("ok"), 1))
        size = sf.least(members, sf.lit(int(cap)).cast("long"))
        return grouped.agg(size.alias(f"c{len(columns)}"), member)

    def split(self, table: Any, column: int, size: int) -> list[Any]:
        from pyspark.sql import functions as sf

        return [
            table.withColumn("ok", sf.col("ok") & (sf.col(f"c{column}") == sf.lit(v).cast("long")))
            for v in range(size)
        ]

    def key_counts(self, table: Any, column: str) -> tuple[list[str], np.ndarray]:
        from pyspark.sql import functions as sf

        key = _open_column(table, column)
        # every row grouped, members counted (as `vectorize`)
        rows = guarded(self.name, "key_counts", lambda: table.groupBy(key.alias("k")).agg(
            sf.count(sf.when(sf.col("ok"), 1)).alias("n")).collect())
        counts = np.array([int(r["n"]) for r in rows], dtype=np.int64)
        present = np.flatnonzero(counts > 0)
        return [str(rows[i]["k"]) for i in present], counts[present]

    def recode(self, table: Any, column: str, keys: Sequence[str]) -> Any:
        from pyspark.sql import functions as sf

        key = _open_column(table, column)
        width = len(_code_columns(table))
        lookup = self._session().createDataFrame(
            [(k, i) for i, k in enumerate(keys)], "ektelo_key string, ektelo_code long")
        joined = table.join(sf.broadcast(lookup), key == sf.col("ektelo_key"), "left")
        code = sf.coalesce(sf.col("ektelo_code"), sf.lit(len(keys)).cast("long"))
        return joined.withColumn(f"c{width}", code).drop("ektelo_key", "ektelo_code",
                                                         _open(column))

    def vectorize(self, table: Any, columns: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
        from pyspark.sql import functions as sf

        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not columns:
            return np.array([float(self.count(table))])
        strides = np.cumprod((1, *shape[::-1]))[:-1][::-1]
        cell = sf.lit(0).cast("long")
        for j, s in zip(columns, strides, strict=True):
            cell = cell + sf.col(f"c{j}") * sf.lit(int(s)).cast("long")
        member = sf.when(sf.col("ok"), cell)  # non-members grouped apart (NULL)
        counts = table.select(member.alias("cell")).groupBy("cell").count()
        found = [r for r in guarded(self.name, "vectorize", counts.collect) if r[0] is not None]
        x = np.zeros(n)
        if found:
            cells = np.array([r[0] for r in found], dtype=np.int64)
            x[cells] = np.array([r[1] for r in found], dtype=np.float64)
        return x

    def marginals(
        self, table: Any, column_sets: Sequence[tuple[int, ...]],
        shapes: Sequence[tuple[int, ...]],
    ) -> list[Sparse]:  # fmt: skip
        """One job for all the sets: each row becomes one (set, cell) pair per
        set (`explode`), counted by one groupBy."""
        from pyspark.sql import functions as sf

        if not column_sets:
            return []
        pairs = []
        for i, (columns, shape) in enumerate(zip(column_sets, shapes, strict=True)):
            cell = sf.lit(0).cast("long")
            for j, size in zip(columns, shape, strict=True):
                cell = cell * sf.lit(int(size)).cast("long") + sf.col(f"c{j}")
            pairs.append(sf.struct(sf.lit(i).alias("s"), cell.alias("cell")))
        exploded = table.select(sf.explode(sf.array(*pairs)).alias("p"), "ok")
        counts = exploded.groupBy("p.s", "p.cell").agg(sf.count(sf.when(sf.col("ok"), 1)))
        found = guarded(self.name, "marginals", counts.collect)
        s = np.array([r[0] for r in found], dtype=np.int64)
        cells = np.array([r[1] for r in found], dtype=np.int64)
        n = np.array([r[2] for r in found], dtype=np.int64)
        return [sparse_cells(cells[s == i], n[s == i]) for i in range(len(column_sets))]

    def count(self, table: Any) -> int:
        from pyspark.sql import functions as sf

        members = table.agg(sf.count(sf.when(sf.col("ok"), 1)))
        return int(guarded(self.name, "count", members.collect)[0][0])

    def codes(self, table: Any) -> np.ndarray:
        from pyspark.sql import functions as sf

        names = _code_columns(table)
        width = len(names)
        kept = table.where(sf.col("ok")).select(*names)
        ordered = kept.orderBy(*names) if width else kept
        rows = guarded(self.name, "codes", ordered.collect)
        return np.array([tuple(r) for r in rows], dtype=np.int64).reshape(len(rows), width)


# -- Column expressions (values are literals) ---------------------------------------


def _try_double(column: Any) -> Any:
    try_cast = getattr(column, "try_cast", None)  # PySpark ≥ 4: NULL, not an ANSI error
    return try_cast("double") if try_cast is not None else column.cast("double")


def _type_name(data_type: Any) -> str:
    """A column's Spark type as the class name `_raw` dispatches on, found by
    isinstance against PySpark's type classes (a type it does not read is
    named by its SQL spelling, for the refusal's message)."""
    from pyspark.sql import types

    for name in ("StringType", "BooleanType", "NullType", *_NUMERIC):
        if isinstance(data_type, getattr(types, name)):
            return name
    return str(data_type.simpleString())


def _raw(a: Attribute, column: Any, spark_type: str, text: bool) -> Any:
    from pyspark.sql import functions as sf

    if spark_type == "NullType":  # only NULLs (no type): every value missing
        kind = cd.label_kind(a) if a.values is not None else "number"
        spark_type = {"str": "StringType", "bool": "BooleanType"}.get(kind, "DoubleType")
        column = sf.lit(None).cast({"str": "string", "bool": "boolean"}.get(kind, "double"))
    numeric = spark_type in _NUMERIC
    if a.values is not None:
        kind = cd.label_kind(a)
        if kind == "str":
            if spark_type != "StringType":
                raise TypeError(cd.mismatch(a, spark_type, "text"))
            return column
        if kind == "number":
            if text or spark_type == "StringType":
                return _try_double(column)
            if numeric:
                return column.cast("double")
            raise TypeError(cd.mismatch(a, spark_type, "numeric"))
        if spark_type == "BooleanType":
            return column
        if text:
            try_cast = getattr(column, "try_cast", None)
            return try_cast("boolean") if try_cast is not None else column.cast("boolean")
        raise TypeError(cd.mismatch(a, spark_type, "boolean"))
    if text or spark_type == "StringType":
        return _try_double(column)
    if numeric:
        return column.cast("double")
    if spark_type == "BooleanType":  # True/False are never read as 1/0 (Domain.encode)
        return sf.lit(None).cast("double")
    raise TypeError(cd.mismatch(a, spark_type, "numeric"))


def _code(
    a: Attribute, r: Any, policy: str, integral: bool = False, trusted: bool = False
) -> Any:
    """The code of raw column `r` (NULL: invalid). `integral`: integer codes from
    an integer column, read as it is; `trusted`: every value is known valid, so
    such codes take the clamp's form (the same code on valid values)."""
    return _coded(a, r, policy, integral, trusted)[0]


def _valid(a: Attribute, r: Any, policy: str, integral: bool = False) -> Any:
    """TRUE exactly where `_code` is not NULL, never NULL: what the domain check
    counts (the code itself, a bin's tree say, need not be computed)."""
    from pyspark.sql import functions as sf

    return sf.coalesce(_coded(a, r, policy, integral, False)[1], sf.lit(False))


def _coded(a: Attribute, r: Any, policy: str, integral: bool, trusted: bool) -> tuple[Any, Any]:
    """(the code, the condition under which it is not NULL)."""
    from pyspark.sql import functions as sf

    if integral:
        top_code = sf.lit(a.size - 1).cast("long")
        if policy == "clamp" or trusted:  # least/greatest skip a NULL: keep it NULL
            clamped = sf.least(sf.greatest(r.cast("long"), sf.lit(0).cast("long")), top_code)
            return sf.when(r.isNotNull(), clamped), r.isNotNull()
        inside = (r >= sf.lit(0)) & (r <= top_code)
        return sf.when(inside, r.cast("long")), inside

    finite = (r >= sf.lit(-_DBL_MAX)) & (r <= sf.lit(_DBL_MAX))  # false for NaN and ±∞
    if a.values is not None:
        kind = cd.label_kind(a)
        values = [float(cast(float, v)) for v in a.values] if kind == "number" else list(a.values)
        found = sf.array_position(sf.array(*(sf.lit(v) for v in values)), r)
        return sf.when(found > 0, found - 1).cast("long"), found > 0
    if a.bins is not None:
        tree = _tree(cd.bin_tree(a.bins, 0, a.size - 1), r)
        if policy == "clamp":
            return sf.when(finite, tree).cast("long"), finite
        inside = (r >= sf.lit(a.bins[0])) & (r < sf.lit(a.bins[-1]))
        return sf.when(inside, tree).cast("long"), inside
    top = sf.lit(float(a.size - 1))
    if policy == "clamp":
        clamped = sf.least(sf.greatest(sf.bround(r, 0), sf.lit(0.0)), top)
        return sf.when(finite, clamped).cast("long"), finite
    inside = (r >= sf.lit(0.0)) & (r <= top) & (r == sf.floor(r))
    return sf.when(inside, r).cast("long"), inside


def _tree(node: cd.BinNode, r: Any) -> Any:
    from pyspark.sql import functions as sf

    if isinstance(node, int):
        return sf.lit(node).cast("long")
    return sf.when(r < sf.lit(node.edge), _tree(node.low, r)).otherwise(_tree(node.high, r))


def _condition(cond: cd.Cond) -> Any:
    from pyspark.sql import functions as sf

    if isinstance(cond, cd.Cmp):
        c, v = sf.col(f"c{cond.column}").cast("double"), sf.lit(float(cond.value))
        return {
            "==": c == v, "!=": c != v, "<": c < v, "<=": c <= v, ">": c > v, ">=": c >= v,
        }[cond.op]  # fmt: skip
    if isinstance(cond, cd.In):
        if not cond.values:
            return sf.lit(False)
        return sf.col(f"c{cond.column}").cast("double").isin([float(v) for v in cond.values])
    if isinstance(cond, cd.Neg):
        return ~_condition(cond.part)
    parts = [_condition(p) for p in cond.parts]
    out = parts[0]
    for p in parts[1:]:
        out = (out & p) if isinstance(cond, cd.All) else (out | p)
    return out


def _code_columns(table: Any) -> list[str]:
    """The table's code columns c0, c1, … in order (not `ok`, nor an open
    column's keys)."""
    return sorted((c for c in table.columns if c[:1] == "c" and c[1:].isdigit()),
                  key=lambda c: int(c[1:]))


def _open(column: str) -> str:
    """The Spark column that holds open column `column`'s keys."""
    return f"ektelo_open:{column}"


def _open_column(table: Any, column: str) -> Any:
    from pyspark.sql import functions as sf

    if _open(column) not in table.columns:
        raise ValueError(f"the table holds no open column {column!r}")
    return sf.col(_backquote(_open(column)))
