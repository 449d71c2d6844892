"""The ledger store for several server processes: PostgreSQL via psycopg 3.

Transactions run at READ COMMITTED with a row lock: `reserve` begins with
`SELECT … FROM ektelo_datasets WHERE id = … FOR UPDATE`, so the check and the
write of one dataset's charges are serialised across every process and
connection (another dataset's requests run in parallel), and each later
statement in the transaction reads the latest committed state. Creating a
dataset or the schema takes a transaction-scoped advisory lock instead (the
row does not exist yet). The connection is in autocommit mode with explicit
`transaction()` blocks, so nothing is left open between calls; a commit is
durable when it returns (`synchronous_commit` on, PostgreSQL's default — it
is set explicitly for the session). A serialisation failure or deadlock
(not expected with one lock per transaction) is retried a few times.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .records import StoreError
from .sql import DDL, SQLStore

__all__ = ["PostgresStore"]

T = TypeVar("T")

_ADVISORY = 0x656B74656C6F  # "ektelo": the store-wide advisory lock's key
_RETRIES = 5


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as err:  # pragma: no cover - the extra is in dev
        raise StoreError(
            "a postgresql:// ledger needs psycopg 3: pip install 'ektelo[postgres]'"
        ) from err
    return psycopg


class PostgresStore(SQLStore):
    """A ledger store in the PostgreSQL database at `url` (postgresql://…)."""

    backend = "postgres"

    def __init__(self, url: str, *, connect_timeout: int = 30):
        super().__init__()
        self._pg = _psycopg()
        self.location = _redacted(url)
        self._url, self._timeout = url, connect_timeout
        self._conn = self._connect()

        def schema(conn: Any) -> None:
            for statement in DDL:
                conn.execute(statement.format(id="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"))
            self._check_version(conn)

        self._write(None, schema)

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = conn.execute(sql.replace("?", "%s"), tuple(params))
        # decided by the statement, not by the cursor: in a pipeline the
        # cursor has no description until its results are read
        if sql.lstrip().upper().startswith("SELECT") or " RETURNING " in sql.upper():
            rows: list[tuple[Any, ...]] = cur.fetchall()
            return rows
        return []

    def _send(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> None:
        conn.execute(sql.replace("?", "%s"), tuple(params))

    def _batch(self, conn: Any) -> contextlib.AbstractContextManager[Any]:
        # psycopg's pipeline mode: statements go out without waiting for each
        # result; reading a result (a RETURNING id) flushes what is queued
        batch: contextlib.AbstractContextManager[Any] = conn.pipeline()
        return batch

    def _connect(self) -> Any:
        """A new connection (the store's one), or StoreError."""
        try:
            conn = self._pg.connect(self._url, autocommit=True, connect_timeout=self._timeout)
            conn.execute("SET synchronous_commit = on")
        except self._pg.Error as err:
            raise StoreError(f"cannot open the ledger store {self.location}: {err}") from err
        return conn

    def _live(self) -> Any:
        """The connection, reopened if the database dropped it (a restart):
        a request during an outage fails with StoreError before anything is
        charged, and the first one after it reconnects (issue #40)."""
        if self._conn.closed or self._conn.broken:
            with contextlib.suppress(self._pg.Error):
                self._conn.close()
            self._conn = self._connect()
        return self._conn

    def _run(self, fn: Callable[[Any], T], first: Callable[[Any], None]) -> T:
        errors = self._pg.errors
        retry = (errors.SerializationFailure, errors.DeadlockDetected)
        with self._lock:
            self._live()
            for attempt in range(_RETRIES):
                try:
                    with self._conn.transaction():
                        first(self._conn)
                        return fn(self._conn)
                except retry:
                    if attempt == _RETRIES - 1:
                        raise
                    time.sleep(0.01 * (attempt + 1))
                except self._pg.Error as err:
                    raise StoreError(f"ledger store {self.location}: {err}") from err
        raise StoreError("unreachable")  # pragma: no cover

    def _write(self, dataset: int | None, fn: Callable[[Any], T], *, lock: bool = True) -> T:
        if not lock:  # one statement (a release): atomic on its own, in autocommit
            with self._lock:
                try:
                    return fn(self._live())
                except self._pg.Error as err:
                    raise StoreError(f"ledger store {self.location}: {err}") from err

        def take(conn: Any) -> None:
            if dataset is None:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY,))
            else:
                conn.execute("SELECT id FROM ektelo_datasets WHERE id = %s FOR UPDATE", (dataset,))

        return self._run(fn, take)

    def _read(self, fn: Callable[[Any], T]) -> T:
        def snapshot(conn: Any) -> None:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")

        return self._run(fn, snapshot)

    def integrity_check(self) -> str:
        """PostgreSQL's consistency checks on the ledger's tables: every
        constraint holds (foreign keys: no node, reservation or audit entry
        without its dataset; no node without its parent), and amcheck's B-tree
        verification of their indexes when the extension can be loaded."""
        problems: list[str] = []

        def fn(conn: Any) -> None:
            orphans = conn.execute(
                "SELECT count(*) FROM ektelo_nodes n LEFT JOIN ektelo_nodes p "
                "ON p.id = n.parent WHERE n.parent IS NOT NULL AND p.id IS NULL"
            ).fetchone()[0]
            if orphans:
                problems.append(f"{orphans} nodes without their parent")
            unknown = conn.execute(
                "SELECT count(*) FROM ektelo_reservations r LEFT JOIN ektelo_nodes n "
                "ON n.id = r.node WHERE n.id IS NULL"
            ).fetchone()[0]
            if unknown:
                problems.append(f"{unknown} reservations without their node")

        self._read(fn)
        try:
            def amcheck(conn: Any) -> None:
                conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
                for (index,) in conn.execute(
                    "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c "
                    "ON c.oid = i.indrelid WHERE c.relname LIKE 'ektelo_%'"
                ).fetchall():
                    conn.execute("SELECT bt_index_check(%s::regclass, true)", (index,))

            self._write(None, amcheck)
        except StoreError as err:
            if "permission denied" not in str(err) and "amcheck" not in str(err):
                problems.append(str(err))
        return "ok" if not problems else "; ".join(problems)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _redacted(url: str) -> str:
    """The URL without its password (for messages)."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, user = head.partition("//")
    return f"{scheme}//{user.split(':', 1)[0]}:***@{tail}"
