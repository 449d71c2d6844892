"""The embedded ledger store: one SQLite file (stdlib `sqlite3`).

Durability and isolation are set explicitly, because Python's defaults are a
trap for a check-then-write: the connection runs with `isolation_level=None`
(no implicit transactions; the sqlite3 module would otherwise open a
deferred transaction lazily and commit behind our back), every write is an
explicit `BEGIN IMMEDIATE … COMMIT` (the database's write lock is taken
before the first read, so two processes can never both read the same spent
and both charge it), the journal is WAL (readers do not block the writer),
and `synchronous=FULL` (a commit is on disk, WAL included, before `reserve`
returns — so a charge survives a crash or power loss from the moment the
kernel may draw noise). Writers wait for the lock up to `timeout` seconds.

Group commit (#40): the threads of one process that want to write while
another's transaction commits queue up, and the next of them commits them
all in ONE transaction — each in its own SAVEPOINT, in order, each seeing
the writes of those before it (so Algorithm 2's check-then-write stays
exact), and each one's failure rolled back alone. No write returns before
the COMMIT that holds it is on disk, so the guarantee above is unchanged;
under load one fsync carries many requests instead of one each.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .records import StoreError
from .sql import DDL, SQLStore

__all__ = ["SQLiteStore"]

T = TypeVar("T")


@dataclass
class _Job:
    """One queued write transaction's function, and what became of it."""

    fn: Callable[[Any], Any]
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class SQLiteStore(SQLStore):
    """A ledger store in the SQLite file `path` (created if absent)."""

    backend = "sqlite"

    def __init__(self, path: str | Path, *, timeout: float = 120.0):
        super().__init__()
        self.location = str(path)
        self._pending: list[_Job] = []  # writes waiting for the next group commit
        self._pending_lock = threading.Lock()
        self.commits = 0  # group commits of writes so far (each one fsync)
        try:
            self._conn = sqlite3.connect(
                self.location, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._wal(timeout)
        except sqlite3.Error as err:
            raise StoreError(f"cannot open the ledger store {self.location}: {err}") from err

        def schema(conn: Any) -> None:
            for statement in DDL:
                conn.execute(statement.format(id="INTEGER PRIMARY KEY"))
            self._check_version(conn)

        self._write(None, schema)

    def _wal(self, timeout: float) -> None:
        # switching to WAL needs a moment alone with the file; other processes
        # opening it at the same time make it "locked" briefly: wait it out
        deadline = time.monotonic() + timeout
        while True:
            try:
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal" and self.location != ":memory:":
                    raise StoreError(f"{self.location}: the journal cannot be WAL ({mode})")
                return
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = conn.execute(sql, tuple(params)).fetchall()
        return rows

    def _run(self, begin: str, fn: Callable[[Any], T]) -> T:
        with self._lock:
            try:
                self._conn.execute(begin)
            except sqlite3.Error as err:
                raise StoreError(f"ledger store {self.location}: {err}") from err
            try:
                result = fn(self._conn)
                self._conn.execute("COMMIT")
            except BaseException as failure:
                # the transaction may be gone already (the database rolled it back)
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                if isinstance(failure, sqlite3.Error):
                    raise StoreError(f"ledger store {self.location}: {failure}") from failure
                raise
            return result

    @property
    def queued(self) -> int:
        """Writes waiting for the next group commit (this process's threads)."""
        with self._pending_lock:
            return len(self._pending)

    def _write(self, dataset: int | None, fn: Callable[[Any], T], *, lock: bool = True) -> T:
        # one writer at a time for the whole file: BEGIN IMMEDIATE takes the
        # write lock before the transaction reads anything; the writes queued
        # meanwhile by this process's other threads share the next commit
        job = _Job(fn)
        with self._pending_lock:
            self._pending.append(job)
        with self._lock:
            if not job.done:  # nobody committed it while we waited: commit the queue
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                self._commit(batch)
        if job.error is not None:
            if isinstance(job.error, sqlite3.Error):
                raise StoreError(f"ledger store {self.location}: {job.error}") from job.error
            raise job.error
        result: T = job.result
        return result

    def _commit(self, batch: list[_Job]) -> None:
        """Run `batch` in one write transaction, a savepoint each (the
        module docstring); every job is done when this returns."""
        conn = self._conn
        current: _Job | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:  # not begun (busy, or inside a transaction): no rollback
            for job in batch:
                job.error, job.done = StoreError(f"ledger store {self.location}: {err}"), True
            return
        try:
            for current in batch:
                conn.execute("SAVEPOINT job")
                try:
                    current.result = current.fn(conn)
                except BaseException as failure:
                    if not conn.in_transaction:  # the database ended it: nothing stands
                        raise
                    conn.execute("ROLLBACK TO job")  # this job's writes only
                    current.error = failure
                conn.execute("RELEASE job")
            conn.execute("COMMIT")
            self.commits += 1
        except BaseException as failure:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            for job in batch:  # none of their writes is committed
                job.result = None
                job.error = failure if job is current and not isinstance(
                    failure, sqlite3.Error) else StoreError(
                    f"ledger store {self.location}: the transaction failed: {failure}")
        finally:
            for job in batch:
                job.done = True

    def _read(self, fn: Callable[[Any], T]) -> T:
        return self._run("BEGIN", fn)  # a WAL read snapshot

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` ("ok" when the file is sound)."""
        return self._read(
            lambda c: "\n".join(str(r[0]) for r in c.execute("PRAGMA integrity_check"))
        )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
