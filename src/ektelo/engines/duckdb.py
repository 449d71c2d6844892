"""The DuckDB table engine (issue #28): tables that stay in their files.

A protected table is a lazily composed SQL relation (`Relation`) over a CSV
or Parquet file or a table of a DuckDB database; the rows are never loaded
into Python. `where`, `select`, `group_by` and `split` compose the relation
(they read no row); `vectorize` runs one `GROUP BY` over the cell index and
scatters the counts into the dense cell vector; `count` and `codes` run one
query each. Stabilities are the kernel's (tables.py): the engine computes the
same function of the rows as the in-memory engine, checked by
tests/engines/.

SQL is built from the engine's own fragments only. Column identifiers come
from the public `Domain` (checked against the source's columns when the table
is opened) and are double-quoted with quotes doubled; past the first level
the columns are the engine's positional names c0, c1, … Every value — a
path, a label, a bin edge, a predicate's code, a size — is a bound parameter
with an explicit CAST, never text in the query.

Encoding in SQL (the first level). Each attribute's raw column becomes a code:
labels through `list_position` over the bound list of labels (the column
must be text for string labels, numeric for numeric labels, boolean for
boolean labels; a CSV is read as text and cast with TRY_CAST); bins through
a balanced tree of `x < edge` comparisons (binary search, the same answer as
NumPy's searchsorted); integer codes by range and integrality. A value
outside the domain, NULL, NaN or a text that is not a number gets a NULL
code, and the policy `on_invalid` decides what happens to it:
  * "error": a check when the table is opened (before any kernel exists)
    refuses the table with `DomainValueError` naming the column and the kind
    of problem (counts and a few values only with `show_bad_values=True`).
    Integer columns are cleared from their min, max and NULL count where
    those prove every value valid (a Parquet file answers them from its
    row-group statistics, reading no row); every other column is scanned
    (issue #42, `DuckDBEngine._check`);
  * "drop": rows with a NULL code are filtered out (a 1-stable filter);
  * "clamp": numbers outside an attribute are moved to its nearest value
    (integer codes rounded half to even, as `Domain.clean`), a 1-stable map;
    what has no nearest value (NULL, NaN, ±∞, an unknown label) is refused
    when the table is opened.
Once the check has passed ("error", "clamp") every row is valid, so the
membership flag `ok` of the root is TRUE and a query reads only the columns it
uses; under "drop" `ok` says that every code exists. The file must not change
while the kernel lives (the kernel does not copy it); if it does, nothing
raises: each row still has at most one code per column (see `_open`).

Why no engine failure becomes a data-dependent exception after a charge:
see base.py. In short: composition reads no row; the queries run before the
charge of the measurement that uses them; the SQL is total on valid codes;
any failure left (memory, disk) raises the fixed `EngineError`.

Timing (issue #36): `where` and `split` are masks, not filters — every row
stays in the relation and `ok` says which belong — and `group_by` groups
every row (a group is a member when one of its rows is), so no query's work
is cut down to the rows a predicate selected: `vectorize` groups every row
by its cell and counts its members, `count` and the marginals count every row.
What DuckDB cannot promise: its hash aggregation's work follows the number
of distinct keys among all the rows (a function of the table, not of the
selection), and its planner and vectorised execution may still take
data-dependent shortcuts (e.g. on constant vectors); the memory engine is
the one whose free operations are tested for equal work on neighbouring
tables (tests/engines/test_timing_channels.py).

Configuration: `DuckDBEngine(memory_limit="1GB", threads=2,
temp_directory="/tmp/spill")`; DuckDB spills to the temp directory beyond the
memory limit. Sources (`open_source`): a ``str``/``Path`` ending in
``.parquet``/``.pq`` or ``.csv`` (gzip too), or ``"duckdb:///path/file.db?table=name"``
(``table=schema.name`` also; opened read-only).
"""

from __future__ import annotations

import csv
import gzip
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

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

__all__ = ["DuckDBEngine", "Relation", "is_duckdb_url", "quote"]

_NUMERIC = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL",
}  # fmt: skip
_INTEGER = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT",
}  # fmt: skip
_FLOATS = {"FLOAT", "DOUBLE", "REAL"}
_SHOWN = 10  # values listed with show_bad_values=True


def quote(identifier: str) -> str:
    """A SQL identifier, double-quoted (quotes doubled): never interpreted."""
    if type(identifier) is not str or not identifier or "\x00" in identifier:
        raise ValueError(f"not a valid identifier: {identifier!r}")
    return '"' + identifier.replace('"', '""') + '"'


@dataclass(frozen=True)
class Relation:
    """A table: `sql` selects BIGINT codes c0..c{width-1}, a BOOLEAN `ok`, and
    for each column in `raws` its raw value r{j}; positional parameters
    `params` in the order of their `?`.

    Rows with `ok` false are not members (a `where` or `split` mask, or under
    on_invalid="drop" an invalid value, a NULL code): they are never counted
    — every sink (`vectorize`, `count`, `codes`, `group_by`) counts only rows
    with `ok` — but they are not filtered out, so that DuckDB computes each
    code once (a filter on a code would be pushed down and the code computed
    twice) and a query's work does not follow a predicate (issue #36). For
    the same reason `where` tests raw values where it can (`raws[j]` is the
    attribute whose raw column r{j} holds, or None): the predicate's codes
    become intervals of raw values that mean the same on every valid row.
    """

    sql: str
    params: tuple[Any, ...]
    width: int
    raws: tuple[Attribute | None, ...] = ()
    # open columns (issue #39): (name, the SQL column holding its key as text),
    # carried by `where` and `split` (`SELECT *`), dropped by `select`
    open: tuple[tuple[str, str], ...] = ()
    # run without statistics propagation (see `DuckDBEngine.connection`): under
    # on_invalid="drop" a NaN in a float column is found by the queries, not
    # by the check, and DuckDB's statistics would hide it
    exact: bool = False

    def raw(self, j: int) -> Attribute | None:
        return self.raws[j] if j < len(self.raws) else None

    def __repr__(self) -> str:  # the plan is public; the rows are not in it
        return f"Relation(width={self.width})"


def is_duckdb_url(source: Any) -> bool:
    return isinstance(source, str) and source.startswith("duckdb://")


def _cols(k: int) -> str:
    return ", ".join(f"c{j}" for j in range(k))


class DuckDBEngine:
    """Tables as DuckDB relations over files or database tables.

    One engine holds one DuckDB connection (opened on first use) configured
    with `memory_limit` (DuckDB's syntax, e.g. "512MB"), `threads` and
    `temp_directory` (where it spills). `trust_statistics=False` makes the
    domain check scan every column instead of clearing integer columns from
    their min, max and NULL count — a Parquet file's own statistics, which a
    writer could get wrong: a bad value would then pass unrefused, clamped to
    the nearest code or left out of the counts (still one row, at most one
    cell: the stabilities hold), where the scan would have refused it."""

    name = "duckdb"

    def __init__(
        self,
        *,
        memory_limit: str | None = None,
        threads: int | None = None,
        temp_directory: str | Path | None = None,
        trust_statistics: bool = True,
    ):
        if memory_limit is not None and (type(memory_limit) is not str or not memory_limit):
            raise TypeError(f"memory_limit must be a size like '1GB', got {memory_limit!r}")
        if threads is not None and (type(threads) is not int or threads < 1):
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        if type(trust_statistics) is not bool:
            raise TypeError(f"trust_statistics must be True or False, got {trust_statistics!r}")
        self.trust_statistics = trust_statistics
        self.config: dict[str, Any] = {"preserve_insertion_order": False}
        if memory_limit is not None:
            self.config["memory_limit"] = memory_limit
        if threads is not None:
            self.config["threads"] = threads
        if temp_directory is not None:
            self.config["temp_directory"] = str(temp_directory)
        self._con: Any = None
        self._disabled = ""  # DuckDB optimizers turned off (set with the connection)
        self._exact = ""  # … and for the domain check's scan
        self._lock = threading.Lock()
        self._attached = 0

    def __repr__(self) -> str:
        return f"DuckDBEngine({self.config})"

    def connection(self) -> Any:
        with self._lock:
            if self._con is None:
                import duckdb  # a core dependency, imported on first use

                con = duckdb.connect(":memory:", config=dict(self.config))
                # DuckDB ≥ 1.4 turns a TRY_CAST over a CSV column into the reader's own
                # typed read, which raises on a text that is not a number instead of
                # giving NULL: a data-dependent exception. Keep the TRY_CAST a TRY_CAST.
                optimizers = {row[0] for row in con.execute(
                    "SELECT name FROM duckdb_optimizers()").fetchall()}  # fmt: skip
                self._disabled = ",".join(o for o in ("type_pushdown",) if o in optimizers)
                # The domain check's scan also runs without statistics propagation:
                # a Parquet writer (pyarrow) leaves NaN out of a float column's
                # min/max, and DuckDB, trusting them, then folds `isnan(x)` to FALSE
                # and `lo <= x < hi` to TRUE — a NaN would pass the check.
                exact = ("type_pushdown", "statistics_propagation")
                self._exact = ",".join(o for o in exact if o in optimizers)
                con.execute("SET disabled_optimizers = ?", [self._disabled])
                self._con = con
            return self._con

    def _run(self, operation: str, sql: str, params: Sequence[Any]) -> Any:
        con = self.connection()
        return guarded(self.name, operation, lambda: con.execute(sql, list(params)))

    def _exact_rows(self, operation: str, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of `sql` run without statistics propagation, so that every
        row's value is tested (the domain check; see `connection`)."""
        return cast(list[Any], self._exactly(operation, sql, params, numpy=False))

    def _exactly(self, operation: str, sql: str, params: Sequence[Any], numpy: bool) -> Any:
        con = self.connection()
        with self._lock:  # the setting is the connection's: restored before anyone else's
            con.execute("SET disabled_optimizers = ?", [self._exact])
            try:
                return guarded(self.name, operation, lambda: _fetched(
                    con.execute(sql, list(params)), numpy))  # fmt: skip
            finally:
                con.execute("SET disabled_optimizers = ?", [self._disabled])

    def _fetch(self, table: Relation, operation: str, sql: str, params: Sequence[Any]) -> Any:
        """A sink's query over `table`, fetched as NumPy columns."""
        if table.exact:
            return self._exactly(operation, sql, params, numpy=True)
        return self._run(operation, sql, params).fetchnumpy()

    # -- opening: the data holder's step (may read and refuse the data) --------------
    def open_source(
        self,
        source: str | Path,
        domain: Domain,
        *,
        on_invalid: str = "error",
        show_bad_values: bool = False,
        units: PrivacyUnit | None = None,
        key: str = "",
    ) -> Relation:
        """The root table of a file or database table, encoded against `domain`
        (with `units`: at most `units.max_rows` rows per unit, contracts C4)."""
        if not isinstance(domain, Domain):
            raise TypeError("protecting a table needs domain=Domain(...)")
        from_sql, from_params, text = self._source(source)
        return self._open(
            from_sql, from_params, text, str(source), domain, on_invalid, show_bad_values,
            units, key,
        )  # fmt: skip

    def _open(
        self, from_sql: str, from_params: tuple[Any, ...], text: bool, source: str,
        domain: Domain, on_invalid: str, show_bad_values: bool,
        units: PrivacyUnit | None = None, key: str = "",
    ) -> Relation:  # fmt: skip
        if not isinstance(domain, Domain):
            raise TypeError("protecting a table needs domain=Domain(...)")
        policy = check_on_invalid(on_invalid)
        con = self.connection()
        try:  # the data holder's step: DuckDB's own message names the problem
            described = con.execute(f"DESCRIBE SELECT * FROM {from_sql}", list(from_params))
            columns = described.fetchall()
        except Exception as error:  # duckdb.Error: not a readable CSV/Parquet file
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ValueError(f"{source}: DuckDB cannot read it ({first})") from None
        types = {str(row[0]): str(row[1]).upper() for row in columns}
        missing = [n for n in domain.columns if n not in types]
        if missing:
            raise ValueError(
                f"{source}: missing column(s) {missing}; the domain needs {list(domain.columns)}"
            )
        raws = [f"{_encoding(a, types[a.name], text, policy)[0]} AS r{j}"
                for j, a in enumerate(domain.attributes)]  # fmt: skip
        # open columns: their keys as text ('' for a missing one, as pandas reads it)
        opened = tuple((o, f"o{i}") for i, o in enumerate(domain.open))
        raws += [f"coalesce(CAST({quote(o)} AS VARCHAR), '') AS {c}" for o, c in opened]
        codes, params = _codes(domain, types, text, policy)
        axes: list[int] = []
        if units is not None:
            check_unit_column(units.column, domain, types)
            axes = group_axes(units, domain)
            if any(k in types[units.column] for k in ("FLOAT", "DOUBLE", "DECIMAL", "REAL")):
                raise TypeError(f"privacy_unit={units.column!r} must hold integers or strings")
            nulls = self._run(
                "the privacy-unit check",
                f"SELECT count(*) FROM {from_sql} WHERE {quote(units.column)} IS NULL",
                from_params,
            ).fetchone()[0]
            if nulls:
                raise ValueError(f"privacy_unit={units.column!r} has missing values: every row "
                                 "needs its unit's identifier")  # fmt: skip
            raws.append(f"CAST({quote(units.column)} AS VARCHAR) AS ektelo_unit")
        raw_sql = f"SELECT {', '.join(raws)} FROM {from_sql}"
        # codes next to their raw values; parameters in the order of their `?`
        both = f"SELECT {', '.join(codes)}, * FROM ({raw_sql}) AS raw"
        both_params = (*params, *from_params)
        valid = " AND ".join(f"c{j} IS NOT NULL" for j in range(len(domain)))
        if policy != "drop":
            source_info = (from_sql, from_params, types, text)
            self._check(domain, raw_sql, source_info, policy, show_bad_values,
                        self.trust_statistics)  # fmt: skip
            # The check proved every row valid, so `ok` need not test every code
            # and a query reads only the columns it uses. Integer codes from an
            # integer column become least(greatest(x, 0), top): the same code on
            # every valid value, and an expression whose range DuckDB derives from
            # the column's statistics (a CASE hides it), so that a GROUP BY over
            # the codes is its perfect-hash aggregate, as over the raw columns.
            # A file that changed after the check (outside the contract) gets no
            # exception from this: each row still has at most one code per column
            # (a NULL label or bin is a NULL code, which the sinks leave out; an
            # integer out of range is clamped and a NULL integer becomes 0).
            codes, params = _codes(domain, types, text, policy, trusted=True)
            both = f"SELECT {', '.join(codes)}, * FROM ({raw_sql}) AS raw"
            both_params = (*params, *from_params)
            member = "TRUE"
        else:  # "drop": a row with an invalid value in any column is not a member
            member = f"({valid})"
        raw_names = ", ".join([f"r{j}" for j in range(len(domain))] + [c for _, c in opened])
        # clamped codes are not intervals of raw values: predicates test the codes
        raw_attrs = tuple(None if policy == "clamp" else a for a in domain.attributes)
        coded = f"SELECT {_cols(len(domain))}, {raw_names}, {member} AS ok FROM ({both}) AS coded"
        if units is not None:  # C4: the first max_rows valid rows of each unit, keyed order
            keyed = ", ".join(
                ["CAST(? AS VARCHAR)", "ektelo_unit"]
                + [f"CAST(c{j} AS VARCHAR)" for j in range(len(domain))]
            )
            within, group_rank, group_params = "ektelo_unit", "", tuple[str, ...]()
            if axes:  # and of its first max_groups groups (base.py)
                gcodes = [f"c{j}" for j in axes]
                gkeyed = ", ".join(["CAST(? AS VARCHAR)", "ektelo_unit", f"'{GROUP_MARKER}'"]
                                   + [f"CAST({c} AS VARCHAR)" for c in gcodes])  # fmt: skip
                within = ", ".join(["ektelo_unit", *gcodes])
                group_rank = (
                    "dense_rank() OVER (PARTITION BY ektelo_unit ORDER BY "
                    f"md5(concat_ws('{UNIT_SEPARATOR}', {gkeyed})), {', '.join(gcodes)}) "
                    "AS ektelo_group, "
                )
                group_params = (key,)
            ranked = (
                f"SELECT {_cols(len(domain))}, {raw_names}, ok, {group_rank}row_number() OVER "
                f"(PARTITION BY {within} ORDER BY md5(concat_ws('{UNIT_SEPARATOR}', {keyed}))) "
                f"AS ektelo_rank FROM (SELECT {_cols(len(domain))}, {raw_names}, ektelo_unit, "
                f"({valid}) AS ok FROM ({both}) AS coded) AS units WHERE ok"
            )
            coded = (
                f"SELECT {_cols(len(domain))}, {raw_names}, ok FROM ({ranked}) AS bounded "
                "WHERE ektelo_rank <= CAST(? AS BIGINT)"
                + (" AND ektelo_group <= CAST(? AS BIGINT)" if axes else "")
            )
            both_params = (
                *group_params, key, *both_params, units.max_rows,
                *(() if units.max_groups is None else (units.max_groups,)),
            )  # fmt: skip
        exact = policy == "drop" and any(types[a.name] in _FLOATS for a in domain.attributes)
        return Relation(coded, both_params, len(domain), raw_attrs, opened, exact)

    def open_frame(
        self,
        frame: Any,
        domain: Domain,
        *,
        on_invalid: str = "error",
        show_bad_values: bool = False,
        units: PrivacyUnit | None = None,
        key: str = "",
    ) -> Relation:
        """The root table of a pandas DataFrame, scanned by DuckDB in place."""
        with self._lock:
            self._attached += 1
            view = f"ektelo_frame{self._attached}"
        self.connection().register(view, frame)
        return self._open(
            view, (), False, str(view), domain, on_invalid, show_bad_values, units, key
        )

    def rows_per_unit(self, data: Any, column: str) -> np.ndarray:
        """Rows per value of the identifier `column` (a privacy unit's size), for
        `engines.rows_per_unit`; refuses a missing column or missing values."""
        if isinstance(data, (str, Path)):
            from_sql, params, _ = self._source(data)
        else:
            with self._lock:
                self._attached += 1
                from_sql, params = f"ektelo_frame{self._attached}", ()
            self.connection().register(from_sql, data)
        ident = quote(column)
        sql = (f"SELECT count(*) FILTER (WHERE {ident} IS NULL), list(n) FROM "
               f"(SELECT {ident}, count(*) AS n FROM {from_sql} GROUP BY {ident})")  # fmt: skip
        try:
            nulls, sizes = self.connection().execute(sql, list(params)).fetchone()
        except Exception:  # a missing column (the data holder's step: public schema)
            raise ValueError(f"privacy_unit={column!r}: the data has no such column") from None
        if nulls:
            raise ValueError(f"privacy_unit={column!r} has missing values: every row "
                             "needs its unit's identifier")  # fmt: skip
        return np.asarray(sizes or [], dtype=np.int64)

    def _source(self, source: str | Path) -> tuple[str, tuple[Any, ...], bool]:
        """(FROM clause, its parameters, whether its columns are text)."""
        if is_duckdb_url(source):
            if not isinstance(source, str):
                raise TypeError("a DuckDB URL is a string")
            url = urllib.parse.urlparse(source)
            query = urllib.parse.parse_qs(url.query)
            names = query.get("table", [])
            path = urllib.parse.unquote(url.path)
            if url.netloc or len(names) != 1 or not path or set(query) != {"table"}:
                raise ValueError(
                    f"a DuckDB table is named duckdb:///path/to/file.db?table=name, got {source!r}"
                )
            if not Path(path).is_file():
                raise FileNotFoundError(f"no DuckDB database at {path}")
            with self._lock:
                self._attached += 1
                alias = f"ektelo_db{self._attached}"
            con = self.connection()
            con.execute(f"ATTACH ? AS {alias} (READ_ONLY)", [path])
            parts = names[0].split(".")
            if len(parts) > 2 or not all(parts):
                raise ValueError(f"table= must be name or schema.name, got {names[0]!r}")
            qualified = ".".join([alias, *(quote(p) for p in parts)])
            return qualified, (), False
        if not isinstance(source, (str, Path)):
            raise TypeError(f"a DuckDB source is a file path or a duckdb:// URL, got {source!r}")
        file = Path(source)
        if not file.exists():
            raise FileNotFoundError(f"no such file: {file}")
        suffixes = [s.lower() for s in file.suffixes]
        if (suffixes and suffixes[-1] in (".parquet", ".pq")) or file.is_dir():
            return "read_parquet(?)", (str(file),), False
        if ".csv" in suffixes or ".tsv" in suffixes:
            _check_header(file)
            # all text, like Domain.read_csv's string labels; numbers via TRY_CAST
            return "read_csv(?, all_varchar = true, header = true)", (str(file),), True
        raise ValueError(f"{file}: the DuckDB engine reads .parquet, .csv and .tsv files")

    def _check(
        self, domain: Domain, raw_sql: str,
        source: tuple[str, tuple[Any, ...], dict[str, str], bool], policy: str, show: bool,
        statistics: bool = True,
    ) -> None:  # fmt: skip
        """Refuse NULL codes (error: any invalid value; clamp: values with no
        nearest value), as `Domain.encode`/`Domain.clean` do.

        First, for the integer columns (integer codes or bins), whose minimum,
        maximum and number of NULLs can prove every value valid (`_proven`),
        one aggregate over the source (`source`: its FROM clause, parameters,
        column types, whether text), which DuckDB answers from a Parquet
        file's row-group statistics without reading the rows (`statistics`:
        False skips it). The columns it proves valid are not scanned; every
        other column — labels, text, floats, and any column the aggregate
        cannot clear — is checked by one scan of the raw values `raw_sql`
        counting the rows where the code would be NULL (each attribute's test
        from `_encoding`; without statistics propagation: see `connection`).
        Only the scan refuses, so a refusal and its message are the same
        whichever columns the aggregate cleared."""
        _, from_params, types, text = source
        proven = self._proven(domain, policy, source) if statistics else set()
        scanned = [j for j in range(len(domain)) if j not in proven]
        if not scanned:
            return
        tests: list[str] = []
        params: list[Any] = []
        checks: list[str] = []
        for j in scanned:
            a = domain.attributes[j]
            _, _, _, valid, valid_params = _encoding(a, types[a.name], text, policy)
            tests.append(valid.replace("{raw}", f"r{j}") + f" AS v{j}")
            params.extend(valid_params)
            gone = f"(r{j} IS NULL OR isnan(r{j}))" if cd.is_double(a) else f"(r{j} IS NULL)"
            checks.append(f"count(*) FILTER (WHERE NOT v{j} AND {gone})")
            checks.append(f"count(*) FILTER (WHERE NOT v{j} AND NOT {gone})")
        tested = f"SELECT {', '.join(tests)}, * FROM ({raw_sql}) AS raw"
        tested_params = (*params, *from_params)
        # one count per column first; the kinds of problem (for the message) only
        # when there is one
        bad = ", ".join(f"count(*) FILTER (WHERE NOT v{j})" for j in scanned)
        sql = f"SELECT {bad} FROM ({tested}) AS checked"
        if not any(self._exact_rows("the domain check", sql, tested_params)[0]):
            return
        sql = f"SELECT {', '.join(checks)} FROM ({tested}) AS checked"
        counts = self._exact_rows("the domain check", sql, tested_params)[0]
        for i, j in enumerate(scanned):
            a = domain.attributes[j]
            missing, other = int(counts[2 * i]), int(counts[2 * i + 1])
            if missing or other:
                listing = None
                if show:
                    rows = self._exact_rows(
                        "the domain check",
                        f"SELECT r{j} FROM ({tested}) AS b WHERE NOT v{j} LIMIT {_SHOWN}",
                        tested_params,
                    )
                    listing = "bad values: " + ", ".join(repr(r[0]) for r in rows)
                raise DomainValueError(a.name, cd.refusal(a, missing, other, policy, show), listing)

    def _proven(
        self, domain: Domain, policy: str, stats: tuple[str, tuple[Any, ...], dict[str, str], bool]
    ) -> set[int]:
        """The attributes whose every value the source's min, max and NULL count
        prove valid (one aggregate; a Parquet file answers it from statistics)."""
        from_sql, from_params, types, text = stats
        eligible = [j for j, a in enumerate(domain.attributes)
                    if _bounds_decide(a, types[a.name], text)]  # fmt: skip
        if not eligible:
            return set()
        parts = ["count(*)"]
        for j in eligible:
            a = domain.attributes[j]
            column = quote(a.name)
            if a.bins is None:  # integer codes: exact integers
                parts += [f"min({column})", f"max({column})"]
            else:  # bins: compared as DOUBLE, as the code's expression does (a monotone cast)
                parts += [f"CAST(min({column}) AS DOUBLE)", f"CAST(max({column}) AS DOUBLE)"]
            parts.append(f"count(*) - count({column})")
        sql = f"SELECT {', '.join(parts)} FROM {from_sql}"
        found = self._run("the domain check", sql, from_params).fetchone()
        if int(found[0]) == 0:
            return set(eligible)  # no rows: nothing to refuse
        return {
            j for i, j in enumerate(eligible)
            if _bounds_prove(domain.attributes[j], policy, *found[1 + 3 * i : 4 + 3 * i])
        }  # fmt: skip

    # -- the interface ---------------------------------------------------------------
    def where(self, table: Relation, predicate: Any, domain: Domain) -> Relation:
        cond, params = _condition(cd.lower(predicate, domain), table, domain)
        # a mask, not a filter (issue #36): every row stays, `ok` says which belong
        return Relation(
            f"SELECT * REPLACE (coalesce(ok AND ({cond}), FALSE) AS ok) FROM ({table.sql}) AS t",
            (*params, *table.params),
            table.width,
            table.raws,
            table.open,
            table.exact,
        )

    def select(self, table: Relation, columns: Sequence[int]) -> Relation:
        picked = [f"c{j} AS c{i}" for i, j in enumerate(columns)]
        picked += [f"r{j} AS r{i}" for i, j in enumerate(columns) if table.raw(j) is not None]
        return Relation(
            f"SELECT {', '.join(picked)}, ok FROM ({table.sql}) AS t",
            table.params,
            len(columns),
            tuple(table.raw(j) for j in columns),
            exact=table.exact,
        )

    def group_by(
        self, table: Relation, columns: Sequence[int], count: str | None, cap: int
    ) -> Relation:
        keys = ", ".join(f"c{j}" for j in columns)
        picked = ", ".join(f"c{j} AS c{i}" for i, j in enumerate(columns))
        params: tuple[Any, ...] = ()
        if count is not None:
            picked += f", least(count(*) FILTER (WHERE ok), CAST(? AS BIGINT)) AS c{len(columns)}"
            params = (int(cap),)
        width = len(columns) + (count is not None)
        # every row is grouped, members or not (issue #36: no filter before the
        # grouping, whose work would follow the rows a `where` selected); a group
        # is a member when one of its rows is
        present = "".join(f" AND c{j} IS NOT NULL" for j in columns)  # as in `codes`
        return Relation(
            f"SELECT {picked}, coalesce(bool_or(ok){present}, FALSE) AS ok "
            f"FROM ({table.sql}) AS t GROUP BY {keys}",
            (*params, *table.params),
            width,
            (),
            exact=table.exact,
        )

    def split(self, table: Relation, column: int, size: int) -> list[Relation]:
        return [
            Relation(
                f"SELECT * REPLACE (coalesce(ok AND c{column} = CAST(? AS BIGINT), FALSE) AS ok) "
                f"FROM ({table.sql}) AS t",
                (v, *table.params),
                table.width,
                table.raws,
                table.open,
                table.exact,
            )
            for v in range(size)
        ]

    def key_counts(self, table: Relation, column: str) -> tuple[list[str], np.ndarray]:
        key = _open_column(table, column)
        sql = (f"SELECT {key} AS k, count(*) FILTER (WHERE ok) AS n FROM ({table.sql}) AS t "
               f"GROUP BY {key}")  # every row grouped, members counted (as `vectorize`)
        found = self._fetch(table, "key_counts", sql, table.params)
        n = np.asarray(found["n"], dtype=np.int64)
        keys = [str(k) for k in found["k"]]
        present = np.flatnonzero(n > 0)
        return [keys[i] for i in present], n[present]

    def recode(self, table: Relation, column: str, keys: Sequence[str]) -> Relation:
        key = _open_column(table, column)
        if keys:  # list_position is 1-based, NULL when the key is not in the list
            code = (f"coalesce(list_position(CAST(? AS VARCHAR[]), {key}) - 1, "
                    "CAST(? AS BIGINT))")
            params: tuple[Any, ...] = (list(keys), len(keys))
        else:
            code, params = "CAST(0 AS BIGINT)", ()
        return Relation(
            f"SELECT * EXCLUDE ({key}), {code} AS c{table.width} FROM ({table.sql}) AS t",
            (*params, *table.params),
            table.width + 1,
            (*table.raws, *((None,) * (table.width - len(table.raws))), None),
            tuple(o for o in table.open if o[0] != column),
            table.exact,
        )

    def vectorize(
        self, table: Relation, columns: Sequence[int], shape: tuple[int, ...]
    ) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not columns:
            return np.array([float(self.count(table))])
        strides = np.cumprod((1, *shape[::-1]))[:-1][::-1]  # C order
        cell = " + ".join(f"c{j} * CAST(? AS BIGINT)" for j in columns)
        # every row grouped by its cell, members counted (issue #36: the same work
        # whichever rows a `where` selected); the key is arithmetic on the codes
        # only (no CASE), so DuckDB can use a perfect-hash aggregate
        sql = (
            f"SELECT {cell} AS cell, count(*) FILTER (WHERE ok) AS n "
            f"FROM ({table.sql}) AS t GROUP BY cell"
        )
        params = (*(int(s) for s in strides), *table.params)
        found = self._fetch(table, "vectorize", sql, params)
        cells = np.ma.getdata(found["cell"])
        kept = ~np.ma.getmaskarray(found["cell"])  # the NULL cell: rows with a NULL code
        x = np.zeros(n)
        x[np.asarray(cells[kept], dtype=np.int64)] = np.asarray(found["n"], np.float64)[kept]
        return x

    def marginals(
        self,
        table: Relation,
        column_sets: Sequence[tuple[int, ...]],
        shapes: Sequence[tuple[int, ...]],
    ) -> list[Sparse]:
        """One scan for all the sets: GROUP BY GROUPING SETS, each set with
        `ok` (rows with an invalid value are grouped apart and left out, as
        in `vectorize`); `GROUPING(...)` tells the sets' rows apart."""
        if not column_sets:
            return []
        keys = sorted({frozenset(c) for c in column_sets}, key=sorted)
        used = sorted(set().union(*keys))
        if len(used) > 60:  # GROUPING()'s bitmask: one set per query instead
            return [m for c, s in zip(column_sets, shapes, strict=True)
                    for m in self.marginals(table, [c], [s])]  # fmt: skip
        names = [f"c{j}" for j in used]
        sets = ", ".join("(" + ", ".join(["ok", *(f"c{j}" for j in sorted(k))]) + ")" for k in keys)
        grouping = f"GROUPING({', '.join(names)})" if names else "0"
        sql = (
            f"SELECT {grouping} AS g, {', '.join([*names, 'ok'])}, count(*) AS n "
            f"FROM ({table.sql}) AS t GROUP BY GROUPING SETS ({sets})"
        )
        found = self._fetch(table, "marginals", sql, table.params)
        g = np.asarray(found["g"], dtype=np.int64)
        ok = np.ma.getdata(found["ok"]).astype(bool) & ~np.ma.getmaskarray(found["ok"])
        n = np.asarray(found["n"], dtype=np.int64)
        out = []
        for columns, shape in zip(column_sets, shapes, strict=True):
            # GROUPING's bit for a key is 1 when the set does not group by it (first key highest)
            bits = sum(1 << (len(used) - 1 - i) for i, j in enumerate(used) if j not in columns)
            rows = (g == bits) & ok
            for j in columns:  # a NULL code (a file changed after the check) is never counted
                rows &= ~np.ma.getmaskarray(found[f"c{j}"])
            cell = np.zeros(int(rows.sum()), dtype=np.int64)
            for j, size in zip(columns, shape, strict=True):
                cell = cell * size + np.ma.getdata(found[f"c{j}"])[rows].astype(np.int64)
            out.append(sparse_cells(cell, n[rows]))
        return out

    def count(self, table: Relation) -> int:
        sql = f"SELECT count(*) FILTER (WHERE ok) AS n FROM ({table.sql}) AS t"
        return int(self._fetch(table, "count", sql, table.params)["n"][0])

    def codes(self, table: Relation) -> np.ndarray:
        if table.width == 0:
            return np.empty((self.count(table), 0), dtype=np.int64)
        present = " AND ".join(f"c{j} IS NOT NULL" for j in range(table.width))
        sql = (f"SELECT {_cols(table.width)} FROM ({table.sql}) AS t WHERE ok AND {present} "
               "ORDER BY ALL")  # fmt: skip
        found = self._fetch(table, "codes", sql, table.params)
        return np.column_stack(
            [np.asarray(found[f"c{j}"], dtype=np.int64) for j in range(table.width)]
        ).reshape(-1, table.width)



def _open_column(table: Relation, column: str) -> str:
    for name, sql_column in table.open:
        if name == column:
            return sql_column
    raise ValueError(f"the table holds no open column {column!r}")


def _bounds_decide(a: Attribute, sql_type: str, text: bool) -> bool:
    """Whether a column's min, max and NULL count can prove all its codes valid:
    an integer column (never text) for integer codes or bins. Labels need
    membership and a float column's statistics may leave NaN out (see
    `DuckDBEngine.connection`): the scan decides those."""
    return a.values is None and not text and sql_type in _INTEGER


def _bounds_prove(a: Attribute, policy: str, low: Any, high: Any, nulls: Any) -> bool:
    """Whether every integer in [low, high] gets a code (`_encoding`), given no
    NULL (`nulls`: their count). Integer codes compare the integers exactly;
    bins compare them cast to DOUBLE (`low`, `high` cast by DuckDB, a monotone
    cast, as the code's own expression does)."""
    if int(nulls) != 0 or low is None or high is None:
        return False
    if policy == "clamp":  # every integer has a nearest code
        return True
    if a.bins is None:  # integer codes: exact integers
        return bool(low >= 0 and high <= a.size - 1)
    return float(low) >= float(a.bins[0]) and float(high) < float(a.bins[-1])


def _fetched(result: Any, numpy: bool) -> Any:
    return result.fetchnumpy() if numpy else list(result.fetchall())


def _check_header(file: Path) -> None:
    """Refuse a CSV whose header names a column twice (as `Domain.read_csv`):
    DuckDB would rename the copy and it would be silently ignored."""
    opener: Any = gzip.open if file.suffix.lower() == ".gz" else open
    with opener(file, "rt", newline="", encoding="utf-8", errors="replace") as fh:
        header = next(csv.reader(fh), [])
    if not any(c.strip() for c in header):
        raise ValueError(f"{file}: the file is empty (no header line naming the columns)")
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise ValueError(
            f"{file}: the header repeats column name(s) {repeated}; DuckDB would rename the "
            "copy and ignore it, so rename or drop the duplicate column"
        )


# -- SQL fragments (engine-made text; values are parameters) ------------------------


def _codes(
    domain: Domain, types: dict[str, str], text: bool, policy: str, trusted: bool = False
) -> tuple[list[str], list[Any]]:
    """The first level's code expressions `... AS c{j}` over the raw columns
    r{j}, and their parameters. `trusted`: every value is known valid (the
    check passed), so integer codes from an integer column take the clamp's
    form, equal to the strict one on valid values."""
    codes: list[str] = []
    params: list[Any] = []
    for j, a in enumerate(domain.attributes):
        plain = a.values is None and a.bins is None and not text and types[a.name] in _INTEGER
        if trusted and plain:
            # DuckDB's least/greatest skip a NULL (it would become code 0): only
            # after a check that refused every NULL
            code, code_params = _CLAMPED, (a.size - 1,)
        else:
            _, code, code_params, _, _ = _encoding(a, types[a.name], text, policy)
        codes.append(code.replace("{raw}", f"r{j}") + f" AS c{j}")
        params.extend(code_params)
    return codes, params


_CLAMPED = "least(greatest({raw}, 0), CAST(? AS BIGINT))"


def _encoding(
    a: Attribute, sql_type: str, text: bool, policy: str
) -> tuple[str, str, tuple[Any, ...], str, tuple[Any, ...]]:
    """(raw expression, code expression over r{j}, the code's parameters, the
    test over r{j} that is TRUE exactly where the code is not NULL, its
    parameters). The test is what the domain check scans for: the code itself
    (a bin's comparison tree, say) need not be computed to know it exists."""
    column = quote(a.name)
    if sql_type.strip('"') == "NULL":  # a column of NULLs only (no type): every value missing
        kind = cd.label_kind(a) if a.values is not None else "number"
        sql_type = {"str": "VARCHAR", "bool": "BOOLEAN"}.get(kind, "DOUBLE")
        column = f"CAST(NULL AS {sql_type})"
    numeric = sql_type in _NUMERIC or sql_type.startswith("DECIMAL")
    j_raw = "{raw}"  # the raw column r{j}, filled in by the caller (an engine-made name)
    if a.values is not None:
        kind = cd.label_kind(a)
        if kind == "str":
            if sql_type != "VARCHAR":
                raise TypeError(cd.mismatch(a, sql_type, "text"))
            raw, list_type = column, "VARCHAR[]"
        elif kind == "number":
            if text:
                raw = f"TRY_CAST({column} AS DOUBLE)"
            elif numeric:
                raw = f"CAST({column} AS DOUBLE)"
            else:
                raise TypeError(cd.mismatch(a, sql_type, "numeric"))
            list_type = "DOUBLE[]"
        else:
            if text:
                raw = f"TRY_CAST({column} AS BOOLEAN)"
            elif sql_type == "BOOLEAN":
                raw = column
            else:
                raise TypeError(cd.mismatch(a, sql_type, "boolean"))
            list_type = "BOOLEAN[]"
        values = [float(cast(float, v)) for v in a.values] if kind == "number" else list(a.values)
        position = f"list_position(CAST(? AS {list_type}), {j_raw})"
        return raw, f"{position} - 1", (values,), f"{position} IS NOT NULL", (values,)
    if a.bins is None and not text and sql_type in _INTEGER:
        # integer codes from an integer column: no cast, no integrality test
        if policy == "clamp":  # a NULL has no nearest value (least/greatest would skip it)
            clamped = _CLAMPED.replace("{raw}", j_raw)
            present = f"{j_raw} IS NOT NULL"
            return column, f"CASE WHEN {present} THEN {clamped} END", (a.size - 1,), present, ()
        inside = f"{j_raw} >= 0 AND {j_raw} <= CAST(? AS BIGINT)"
        code = f"CASE WHEN {inside} THEN CAST({j_raw} AS BIGINT) END"
        return column, code, (a.size - 1,), _true(inside), (a.size - 1,)
    if text or sql_type == "VARCHAR":
        raw = f"TRY_CAST({column} AS DOUBLE)"
    elif numeric:
        raw = f"CAST({column} AS DOUBLE)"
    elif sql_type == "BOOLEAN":  # True/False are never read as 1/0 (Domain.encode)
        raw = "CAST(NULL AS DOUBLE)"
    else:
        raise TypeError(cd.mismatch(a, sql_type, "numeric"))
    if a.bins is not None:
        edges = a.bins
        tree, params = _tree(cd.bin_tree(edges, 0, a.size - 1))  # x < e1 → 0, x ≥ e_{k-1} → last
        if policy == "clamp":
            finite = f"isfinite({j_raw})"
            return raw, f"CASE WHEN {finite} THEN {tree} END", params, _true(finite), ()
        inside = f"{j_raw} >= CAST(? AS DOUBLE) AND {j_raw} < CAST(? AS DOUBLE)"
        code = f"CASE WHEN {inside} THEN {tree} END"
        return raw, code, (edges[0], edges[-1], *params), _true(inside), (edges[0], edges[-1])
    top = float(a.size - 1)
    if policy == "clamp":
        code = (
            f"CASE WHEN isfinite({j_raw}) THEN CAST(least(greatest(round_even({j_raw}, 0), 0), "
            f"CAST(? AS DOUBLE)) AS BIGINT) END"
        )
        return raw, code, (top,), _true(f"isfinite({j_raw})"), ()
    inside = f"{j_raw} >= 0 AND {j_raw} <= CAST(? AS DOUBLE) AND {j_raw} = floor({j_raw})"
    code = f"CASE WHEN {inside} THEN CAST({j_raw} AS BIGINT) END"
    return raw, code, (top,), _true(inside), (top,)


def _true(condition: str) -> str:
    """A condition as a test that is never NULL (a CASE takes NULL as false)."""
    return f"coalesce({condition}, FALSE)"


def _tree(node: cd.BinNode) -> tuple[str, tuple[Any, ...]]:
    """The SQL of a bin tree over {raw} (x < edge tests), with its edges."""
    if isinstance(node, int):
        return str(node), ()  # a code the engine computed, not a user value
    low, lp = _tree(node.low)
    high, hp = _tree(node.high)
    return f"CASE WHEN {{raw}} < CAST(? AS DOUBLE) THEN {low} ELSE {high} END", (
        node.edge, *lp, *hp,
    )  # fmt: skip


_SQL_OPS = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _condition(cond: cd.Cond, table: Relation, domain: Domain) -> tuple[str, tuple[Any, ...]]:
    """SQL for a code-level predicate that means the same on every valid row:
    on a raw column, the codes it accepts become intervals of raw values;
    else codes compared as DOUBLE with the values (as the memory engine)."""
    if isinstance(cond, (cd.Cmp, cd.In)):
        attribute = table.raw(cond.column)
        if attribute is not None:
            return _raw_condition(cond.column, attribute, cd.code_intervals(cond, attribute.size))
        if isinstance(cond, cd.Cmp):
            op = _SQL_OPS[cond.op]
            return f"(CAST(c{cond.column} AS DOUBLE) {op} CAST(? AS DOUBLE))", (cond.value,)
        if not cond.values:
            return "FALSE", ()
        marks = ", ".join("CAST(? AS DOUBLE)" for _ in cond.values)
        return f"(CAST(c{cond.column} AS DOUBLE) IN ({marks}))", cond.values
    if isinstance(cond, cd.Neg):
        inner, params = _condition(cond.part, table, domain)
        return f"(NOT {inner})", params
    glue = " AND " if isinstance(cond, cd.All) else " OR "
    texts: list[str] = []
    params_all: list[Any] = []
    for part in cond.parts:
        text, params = _condition(part, table, domain)
        texts.append(text)
        params_all.extend(params)
    return "(" + glue.join(texts) + ")", tuple(params_all)


_MAX_LISTED = 64  # labels listed in an IN; more: the code is tested


def _raw_condition(
    j: int, a: Attribute, intervals: list[tuple[int, int]]
) -> tuple[str, tuple[Any, ...]]:
    """Code intervals [lo, hi] of attribute `a` as a test of the raw value
    r{j}, exact on valid rows (an invalid row's answer does not matter: it is
    never counted)."""
    if not intervals:
        return "FALSE", ()
    if intervals == [(0, a.size - 1)]:
        return "TRUE", ()
    texts: list[str] = []
    params: list[Any] = []
    for lo, hi in intervals:
        if a.bins is not None:  # bin k is [edges[k], edges[k+1])
            texts.append(f"(r{j} >= CAST(? AS DOUBLE) AND r{j} < CAST(? AS DOUBLE))")
            params += [a.bins[lo], a.bins[hi + 1]]
        elif a.values is None:  # integer codes: the raw value is the code
            texts.append(f"(r{j} >= CAST(? AS BIGINT) AND r{j} <= CAST(? AS BIGINT))")
            params += [lo, hi]
        elif hi - lo < _MAX_LISTED:
            kind = cd.label_kind(a)
            sql_type = {"str": "VARCHAR", "bool": "BOOLEAN"}.get(kind, "DOUBLE")
            labels = a.values[lo : hi + 1]
            marks = ", ".join(f"CAST(? AS {sql_type})" for _ in labels)
            texts.append(f"(r{j} IN ({marks}))")
            params += [float(cast(float, v)) for v in labels] if kind == "number" else labels
        else:
            texts.append(f"(c{j} BETWEEN CAST(? AS BIGINT) AND CAST(? AS BIGINT))")
            params += [lo, hi]
    return "(" + " OR ".join(texts) + ")", tuple(params)
