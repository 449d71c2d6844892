"""The durable ledger's logic in SQL, shared by the SQLite and PostgreSQL stores.

Schema (every table prefixed `ektelo_`; rationals are `Fraction` strings):

* `datasets` — name, unit (epsilon | rho), total, δ, the root node's id;
* `analysts` — per dataset: name, quota (NULL: only the dataset cap), spent
  (Σ of their root charges), a keyed token hash for the server (unused here);
* `sessions` — one per `protect(..., ledger=)`: dataset, analyst, mode;
* `nodes` — Algorithm 2's graph (§4.4): parent, kind, stability, B(sv),
  operation, structural digest, session; a dataset's root has no parent;
* `reservations` — one per granted request: analyst, request id, request
  digest, node, amount asked, charge at the root, the increments of B along
  the chain, status (reserved | released) and the released answer;
* `audit` — the hash-chained log (`audit.py`).

The protocol (issue #26) is reserve → compute → release. `reserve` is ONE
write transaction that holds the dataset's lock (SQLite: `BEGIN IMMEDIATE`,
the database's write lock; PostgreSQL: `SELECT … FOR UPDATE` on the
dataset's row): it looks the request id up (a repeat with the same digest
returns the stored answer, with another digest is refused), reads B along
the chain from the durable state, runs `ledger.algorithm2` against the
dataset's cap, checks the analyst's quota, then writes the new nodes, the
increments, the analyst's spent, the reservation and the audit entry, and
commits. Only then does the kernel draw noise; `release` stores the answer.
A refusal writes its audit entry and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, TypeVar

from ..kernel.ledger import SLACK, BudgetExceeded, Kind, algorithm2, node_digest
from .audit import AuditEntry, entry_hash, last_of, verify_chain
from .records import (
    AnalystRecord,
    AuditReport,
    DatasetRecord,
    HistoryEntry,
    StoreError,
    decode_answer,
    frac,
    now,
)

__all__ = ["SCHEMA_VERSION", "DatasetRef", "Outcome", "PathItem", "SQLStore"]

SCHEMA_VERSION = "1"

T = TypeVar("T")

# `{id}` is the backend's auto-increment primary key
DDL = (
    "CREATE TABLE IF NOT EXISTS ektelo_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS ektelo_datasets (
        id {id}, name TEXT NOT NULL UNIQUE,
        unit TEXT NOT NULL CHECK (unit IN ('epsilon', 'rho')),
        total TEXT NOT NULL, delta TEXT, created TEXT NOT NULL, root BIGINT)""",
    """CREATE TABLE IF NOT EXISTS ektelo_analysts (
        id {id}, dataset BIGINT NOT NULL REFERENCES ektelo_datasets(id),
        name TEXT NOT NULL, quota TEXT, spent TEXT NOT NULL, token_hash TEXT,
        created TEXT NOT NULL, UNIQUE (dataset, name))""",
    """CREATE TABLE IF NOT EXISTS ektelo_sessions (
        id TEXT PRIMARY KEY, dataset BIGINT NOT NULL REFERENCES ektelo_datasets(id),
        analyst TEXT NOT NULL, mode TEXT NOT NULL, started TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ektelo_nodes (
        id {id}, dataset BIGINT NOT NULL REFERENCES ektelo_datasets(id),
        parent BIGINT REFERENCES ektelo_nodes(id), kind TEXT NOT NULL,
        stability TEXT NOT NULL, spent TEXT NOT NULL, operation TEXT NOT NULL,
        digest TEXT NOT NULL, session TEXT, created TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ektelo_reservations (
        id {id}, dataset BIGINT NOT NULL REFERENCES ektelo_datasets(id),
        analyst TEXT NOT NULL, request_id TEXT NOT NULL, digest TEXT NOT NULL,
        session TEXT, node BIGINT NOT NULL REFERENCES ektelo_nodes(id),
        operation TEXT NOT NULL, amount TEXT NOT NULL, charged TEXT NOT NULL,
        increments TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('reserved', 'released')),
        created TEXT NOT NULL, released TEXT, answer TEXT,
        UNIQUE (dataset, analyst, request_id))""",
    """CREATE TABLE IF NOT EXISTS ektelo_audit (
        id {id}, dataset BIGINT NOT NULL REFERENCES ektelo_datasets(id),
        seq BIGINT NOT NULL, time TEXT NOT NULL, analyst TEXT NOT NULL, session TEXT,
        operation TEXT NOT NULL, request_id TEXT, spec_hash TEXT, amount TEXT,
        charge TEXT, outcome TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL,
        UNIQUE (dataset, seq))""",
)

OWNER = ""  # the analyst column of the data holder's own requests (no quota)


@dataclass(frozen=True)
class DatasetRef:
    """A dataset as a session sees it: ids and its fixed budget."""

    id: int
    name: str
    unit: Literal["epsilon", "rho"]
    total: Fraction
    delta: float | None
    root: int
    root_digest: str


@dataclass(frozen=True)
class PathItem:
    """One variable on a request's chain (requested variable first): its
    durable id if persisted, else what it is (written when first charged)."""

    db_id: int | None
    kind: Kind
    stability: Fraction
    operation: str
    digest: str


@dataclass(frozen=True)
class Outcome:
    """What `reserve` decided (the transaction has committed)."""

    status: Literal["granted", "replayed", "refused", "conflict"]
    message: str = ""
    db_ids: tuple[int, ...] = ()
    increments: tuple[Fraction, ...] = ()
    token: int | None = None
    answer: str | None = None


def _relation(neighbours: str) -> str:
    """"row" or "unit:<column>" in words."""
    if neighbours.startswith("unit:"):
        return f"privacy unit {neighbours[5:]!r}"
    return "row"


def _delta_text(delta: float | None) -> str | None:
    return None if delta is None else repr(float(delta))


class SQLStore:
    """A durable ledger store (the shared logic; see the module docstring).

    Subclasses supply `_exec` (run one statement, return its rows), `_write`
    (run a function in one write transaction holding a dataset's lock, or the
    store-wide lock for dataset None; `lock=False` for a single statement on
    one reservation row, which needs no lock), `_read` (a consistent read snapshot)
    and `close`. One store object holds one connection, guarded by a lock;
    open one store per process."""

    backend = "sql"
    location = ""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    # -- backend hooks -------------------------------------------------------------
    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write(self, dataset: int | None, fn: Callable[[Any], T], *, lock: bool = True) -> T:
        raise NotImplementedError

    def _read(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError

    def _send(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement whose result is not needed (batched where it can be)."""
        self._exec(conn, sql, params)

    def _batch(self, conn: Any) -> contextlib.AbstractContextManager[Any]:
        """Send the statements inside together where the driver can (one round
        trip until a result is read); a no-op for an embedded database."""
        return contextlib.nullcontext()

    def close(self) -> None:
        raise NotImplementedError

    def __del__(self) -> None:
        # a store opened by protect() lives as long as its kernel: close its
        # connection when it goes, quietly (a driver warns about open ones)
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a ledger store holds a database connection: open one per process")

    # -- schema --------------------------------------------------------------------
    def _check_version(self, conn: Any) -> None:
        rows = self._exec(conn, "SELECT value FROM ektelo_meta WHERE key = 'schema'")
        if not rows:
            self._exec(conn, "INSERT INTO ektelo_meta (key, value) VALUES ('schema', ?)",
                       (SCHEMA_VERSION,))  # fmt: skip
        elif rows[0][0] != SCHEMA_VERSION:
            raise StoreError(
                f"the ledger store has schema version {rows[0][0]}; this ektelo reads "
                f"version {SCHEMA_VERSION}"
            )

    # -- audit ---------------------------------------------------------------------
    def _audit(
        self, conn: Any, dataset: int, name: str, *, analyst: str, session: str | None,
        operation: str, outcome: str, request_id: str | None = None,
        spec_hash: str | None = None, amount: Fraction | None = None,
        charge: Fraction | None = None,
    ) -> None:  # fmt: skip
        last = self._exec(
            conn, "SELECT seq, hash FROM ektelo_audit WHERE dataset = ? ORDER BY seq DESC LIMIT 1",
            (dataset,),
        )  # fmt: skip
        seq, prev = last_of([(int(r[0]), str(r[1])) for r in last])
        entry = AuditEntry(
            name, seq + 1, now(), analyst, session, operation, request_id, spec_hash,
            None if amount is None else str(amount), None if charge is None else str(charge),
            outcome,
        )  # fmt: skip
        self._send(
            conn,
            "INSERT INTO ektelo_audit (dataset, seq, time, analyst, session, operation, "
            "request_id, spec_hash, amount, charge, outcome, prev, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (dataset, entry.seq, entry.time, entry.analyst, entry.session, entry.operation,
             entry.request_id, entry.spec_hash, entry.amount, entry.charge, entry.outcome,
             prev, entry_hash(prev, entry)),
        )  # fmt: skip

    # -- datasets, analysts, sessions ------------------------------------------------
    def _find(self, conn: Any, name: str) -> tuple[Any, ...] | None:
        rows = self._exec(
            conn, "SELECT id, unit, total, delta, root FROM ektelo_datasets WHERE name = ?", (name,)
        )
        return rows[0] if rows else None

    def _dataset_id(self, name: str) -> int:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a dataset is named by a non-empty str, got {name!r}")
        row = self._read(lambda c: self._find(c, name))
        if row is None:
            raise ValueError(f"no dataset {name!r} in the ledger store {self.location}")
        return int(row[0])

    def ensure_dataset(
        self, name: str, unit: Literal["epsilon", "rho"], total: Fraction, delta: float | None,
        neighbours: str = "row",
    ) -> DatasetRef:
        """The dataset `name`, created with this budget if absent; a dataset
        that exists must have been created with the same unit, total and δ
        (a stored cap never changes) — else ValueError naming the stored one.
        `neighbours` is the neighbouring relation its budget is about: "row",
        or "unit:<column>" for a privacy unit (issue #37); kept beside the
        dataset (in `ektelo_meta`, so the schema is unchanged) and checked the
        same way — a dataset protected per person is never charged per row."""
        if not isinstance(name, str) or not name or not name.isprintable() or len(name) > 200:
            raise ValueError(f"a dataset name is 1 to 200 printable characters, got {name!r}")

        def fn(conn: Any) -> DatasetRef:
            row = self._find(conn, name)
            if row is None:
                created = self._exec(
                    conn,
                    "INSERT INTO ektelo_datasets (name, unit, total, delta, created) "
                    "VALUES (?, ?, ?, ?, ?) RETURNING id",
                    (name, unit, str(total), _delta_text(delta), now()),
                )
                ds = int(created[0][0])
                root = self._exec(
                    conn,
                    "INSERT INTO ektelo_nodes (dataset, parent, kind, stability, spent, "
                    "operation, digest, session, created) "
                    "VALUES (?, NULL, 'root', '1', '0', 'dataset', ?, NULL, ?) RETURNING id",
                    (ds, node_digest(None, "dataset", name), now()),
                )
                self._exec(conn, "UPDATE ektelo_datasets SET root = ? WHERE id = ?",
                           (int(root[0][0]), ds))  # fmt: skip
                self._audit(conn, ds, name, analyst=OWNER, session=None, operation="dataset",
                            outcome="created", amount=total)  # fmt: skip
                row = (ds, unit, str(total), _delta_text(delta), int(root[0][0]))
                self._exec(conn, "INSERT INTO ektelo_meta (key, value) VALUES (?, ?)",
                           (f"neighbours:{ds}", neighbours))  # fmt: skip
            ds, s_unit, s_total, s_delta, root_id = row
            stored_rel = self._exec(conn, "SELECT value FROM ektelo_meta WHERE key = ?",
                                    (f"neighbours:{ds}",))  # fmt: skip
            relation = str(stored_rel[0][0]) if stored_rel else "row"  # older datasets: rows
            if relation != neighbours:
                raise ValueError(
                    f"dataset {name!r} keeps a budget per {_relation(relation)}; this call "
                    f"protects it per {_relation(neighbours)}. A dataset's neighbouring relation "
                    "never changes: protect it as it was first protected, or use another name"
                )
            if (s_unit, frac(s_total), s_delta) != (unit, total, _delta_text(delta)):
                stored = f"{s_unit}={float(frac(s_total)):.12g}"
                if s_delta is not None:
                    stored += f", delta={s_delta}"
                asked = f"{unit}={float(total):.12g}"
                if delta is not None:
                    asked += f", delta={delta!r}"
                raise ValueError(
                    f"dataset {name!r} has the stored budget {stored}; this call states "
                    f"{asked}. A dataset's cap never changes: protect it with its stored "
                    "budget, or use another dataset name"
                )
            return DatasetRef(
                int(ds), name, s_unit, frac(s_total), None if s_delta is None else float(s_delta),
                int(root_id), node_digest(None, "dataset", name),
            )  # fmt: skip

        return self._write(None, fn)

    def add_analyst(self, dataset: str, name: str, quota: float | Fraction | None = None) -> None:
        """Add an analyst to `dataset` with a quota beneath its cap (in the
        dataset's unit; None: only the cap). ValueError if they exist."""
        if not isinstance(name, str) or not name or not name.isprintable() or len(name) > 200:
            raise ValueError(f"an analyst name is 1 to 200 printable characters, got {name!r}")
        q: Fraction | None = None
        if quota is not None:
            if isinstance(quota, bool) or not isinstance(quota, (int, float, Fraction)):
                raise TypeError(f"quota must be a number or None, got {type(quota).__name__}")
            q = Fraction(quota)
            if not q > 0 or (isinstance(quota, float) and quota == float("inf")):
                raise ValueError(f"quota must be a finite positive number, got {quota!r}")
        ds = self._dataset_id(dataset)

        def fn(conn: Any) -> None:
            if self._exec(conn, "SELECT 1 FROM ektelo_analysts WHERE dataset = ? AND name = ?",
                          (ds, name)):  # fmt: skip
                raise ValueError(f"dataset {dataset!r} already has an analyst {name!r}")
            self._exec(
                conn,
                "INSERT INTO ektelo_analysts (dataset, name, quota, spent, created) "
                "VALUES (?, ?, ?, '0', ?)",
                (ds, name, None if q is None else str(q), now()),
            )
            self._audit(conn, ds, dataset, analyst=name, session=None, operation="analyst",
                        outcome="analyst_added", amount=q)  # fmt: skip

        self._write(ds, fn)

    def open_session(self, ref: DatasetRef, analyst: str | None, session: str, mode: str) -> None:
        """Record a session (one protect) attached to the dataset's root."""
        who = OWNER if analyst is None else analyst

        def fn(conn: Any) -> None:
            if analyst is not None and not self._exec(
                conn, "SELECT 1 FROM ektelo_analysts WHERE dataset = ? AND name = ?",
                (ref.id, analyst),
            ):  # fmt: skip
                raise ValueError(
                    f"dataset {ref.name!r} has no analyst {analyst!r}: add them first with "
                    "open_store(...).add_analyst(dataset, name, quota)"
                )
            self._exec(
                conn,
                "INSERT INTO ektelo_sessions (id, dataset, analyst, mode, started) "
                "VALUES (?, ?, ?, ?, ?)",
                (session, ref.id, who, mode, now()),
            )
            self._audit(conn, ref.id, ref.name, analyst=who, session=session,
                        operation="protect", outcome="attached")  # fmt: skip

        self._write(ref.id, fn)

    # -- reserve → release -------------------------------------------------------------
    def reserve(
        self, ref: DatasetRef, *, session: str, analyst: str | None, path: Sequence[PathItem],
        amount: Fraction, operation: str, request_id: str, digest: str,
    ) -> Outcome:  # fmt: skip
        """Check and reserve one request in one transaction (module docstring)."""
        who = OWNER if analyst is None else analyst

        def fn(conn: Any) -> Outcome:
            def log(outcome: str, charge: Fraction | None = None) -> None:
                self._audit(conn, ref.id, ref.name, analyst=who, session=session,
                            operation=operation, outcome=outcome, request_id=request_id,
                            spec_hash=digest, amount=amount, charge=charge)  # fmt: skip

            seen = self._exec(
                conn,
                "SELECT digest, answer FROM ektelo_reservations "
                "WHERE dataset = ? AND analyst = ? AND request_id = ?",
                (ref.id, who, request_id),
            )
            if seen:
                if seen[0][0] != digest:
                    log("conflict")
                    return Outcome("conflict", f"request_id {request_id!r} was used for a "
                                   "different request; nothing was charged")  # fmt: skip
                if seen[0][1] is None:
                    log("conflict")
                    return Outcome("conflict", f"request {request_id!r} is charged but has no "
                                   "released answer (in flight, or lost in a crash); its charge "
                                   "stands; retry under a new request_id")  # fmt: skip
                log("replayed", Fraction(0))
                return Outcome("replayed", answer=str(seen[0][1]))
            known = [p.db_id for p in path if p.db_id is not None]
            marks = ", ".join("?" for _ in known)
            spent = {
                int(r[0]): frac(r[1])
                for r in self._exec(
                    conn, f"SELECT id, spent FROM ektelo_nodes WHERE id IN ({marks})", known
                )
            }
            if len(spent) != len(known):
                raise StoreError("a node of this session is missing from the ledger store")
            links = [
                (p.kind, p.stability, spent[p.db_id] if p.db_id is not None else Fraction(0))
                for p in path
            ]
            try:
                incs = algorithm2(links, amount, ref.unit, ref.total, ref.total * (1 + SLACK))
            except BudgetExceeded as refused:
                log("refused")
                return Outcome("refused", f"dataset {ref.name!r}: {refused}")
            charged = incs[-1]
            if analyst is not None:
                quota, a_spent = self._exec(
                    conn, "SELECT quota, spent FROM ektelo_analysts WHERE dataset = ? AND name = ?",
                    (ref.id, analyst),
                )[0]  # fmt: skip
                if quota is not None and frac(a_spent) + charged > frac(quota) * (1 + SLACK):
                    log("refused")
                    return Outcome(
                        "refused",
                        f"analyst {analyst!r} of dataset {ref.name!r}: request needs "
                        f"{float(charged):.6g} more; spent {float(frac(a_spent)):.6g} of the "
                        f"quota {float(frac(quota)):.6g}",
                    )
            # granted: the writes, sent together (the audit head and the new
            # ids are the only results read back)
            with self._batch(conn):
                if analyst is not None:
                    self._send(
                        conn, "UPDATE ektelo_analysts SET spent = ? WHERE dataset = ? AND name = ?",
                        (str(frac(a_spent) + charged), ref.id, analyst),
                    )  # fmt: skip
                ids: list[int] = [0] * len(path)
                for i in range(len(path) - 1, -1, -1):  # root first, so parents exist
                    p, inc = path[i], incs[i]
                    if p.db_id is not None:
                        ids[i] = p.db_id
                        if inc:
                            self._send(conn, "UPDATE ektelo_nodes SET spent = ? WHERE id = ?",
                                       (str(spent[p.db_id] + inc), p.db_id))  # fmt: skip
                        continue
                    row = self._exec(
                        conn,
                        "INSERT INTO ektelo_nodes (dataset, parent, kind, stability, spent, "
                        "operation, digest, session, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                        "RETURNING id",
                        (ref.id, ids[i + 1], p.kind, str(p.stability), str(inc), p.operation,
                         p.digest, session, now()),
                    )  # fmt: skip
                    ids[i] = int(row[0][0])
                log("granted", charged)
                steps = json.dumps([[n, str(inc)] for n, inc in zip(ids, incs, strict=True)])
                token = self._exec(
                    conn,
                    "INSERT INTO ektelo_reservations (dataset, analyst, request_id, digest, "
                    "session, node, operation, amount, charged, increments, status, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'reserved', ?) RETURNING id",
                    (ref.id, who, request_id, digest, session, ids[0], operation, str(amount),
                     str(charged), steps, now()),
                )[0][0]  # fmt: skip
            return Outcome("granted", db_ids=tuple(ids), increments=tuple(incs), token=int(token))

        return self._write(ref.id, fn)

    def release(self, token: int, answer: str) -> None:
        """Store the released answer with its reservation (charged already)."""
        self._write(None, lambda conn: self._exec(
            conn,
            "UPDATE ektelo_reservations SET answer = ?, status = 'released', released = ? "
            "WHERE id = ? AND answer IS NULL",
            (answer, now(), token),
        ), lock=False)  # fmt: skip

    # -- public state ------------------------------------------------------------------
    def spent_of(self, ids: Sequence[int]) -> dict[int, Fraction]:
        """B(sv) of persisted nodes, as committed."""
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = self._read(lambda c: self._exec(
            c, f"SELECT id, spent FROM ektelo_nodes WHERE id IN ({marks})", list(ids)
        ))  # fmt: skip
        return {int(r[0]): frac(r[1]) for r in rows}

    def datasets(self) -> list[DatasetRecord]:
        """Every dataset's budget, with its analysts (a consistent snapshot)."""

        def fn(conn: Any) -> list[DatasetRecord]:
            rows = self._exec(
                conn,
                "SELECT d.id, d.name, d.unit, d.total, d.delta, d.created, n.spent "
                "FROM ektelo_datasets d JOIN ektelo_nodes n ON n.id = d.root ORDER BY d.id",
            )
            people: dict[int, list[AnalystRecord]] = {}
            for ds, name, quota, spent in self._exec(
                conn, "SELECT dataset, name, quota, spent FROM ektelo_analysts ORDER BY id"
            ):
                people.setdefault(int(ds), []).append(
                    AnalystRecord(name, None if quota is None else frac(quota), frac(spent))
                )
            return [
                DatasetRecord(
                    name, unit, frac(total), frac(spent), None if delta is None else float(delta),
                    created, tuple(people.get(int(ds), [])),
                )
                for ds, name, unit, total, delta, created, spent in rows
            ]

        return self._read(fn)

    def dataset(self, name: str) -> DatasetRecord:
        """One dataset's record (ValueError if absent)."""
        for record in self.datasets():
            if record.name == name:
                return record
        raise ValueError(f"no dataset {name!r} in the ledger store {self.location}")

    def history(self, dataset: str) -> list[HistoryEntry]:
        """The charged requests of `dataset`, oldest first."""
        ds = self._dataset_id(dataset)
        rows = self._read(lambda c: self._exec(
            c,
            "SELECT created, analyst, operation, amount, charged, request_id, status, session "
            "FROM ektelo_reservations WHERE dataset = ? ORDER BY id",
            (ds,),
        ))  # fmt: skip
        return [
            HistoryEntry(t, None if a == OWNER else a, op, frac(amt), frac(ch), rid, st, ses)
            for t, a, op, amt, ch, rid, st, ses in rows
        ]

    def released(
        self, dataset: str, request_id: str, analyst: str | None = None
    ) -> dict[str, Any] | None:
        """The answer released for `request_id` (a dict of public values, as
        the kernel stored it), or None if the request is unknown or was
        charged without an answer."""
        ds = self._dataset_id(dataset)
        rows = self._read(lambda c: self._exec(
            c, "SELECT answer FROM ektelo_reservations WHERE dataset = ? AND analyst = ? "
            "AND request_id = ?", (ds, OWNER if analyst is None else analyst, request_id),
        ))  # fmt: skip
        return decode_answer(rows[0][0]) if rows and rows[0][0] is not None else None

    def audit_log(self, dataset: str) -> list[AuditEntry]:
        """The audit entries of `dataset`, in order (no data values, no answers)."""
        ds = self._dataset_id(dataset)
        return [e for e, _, _ in self._read(lambda c: self._chain(c, ds, dataset))]

    # -- bounded reads for a status page (#40: O(limit), not O(history)) ------------------
    def recent_audit(
        self, dataset: str, limit: int, outcome: str | None = None
    ) -> list[AuditEntry]:
        """The latest `limit` audit entries of `dataset`, newest first: every
        outcome but sessions' "attached" (see `sessions`), or only `outcome`."""
        ds = self._dataset_id(dataset)
        where = "outcome <> 'attached'" if outcome is None else "outcome = ?"
        params: list[Any] = [ds] + ([] if outcome is None else [outcome]) + [int(limit)]
        rows = self._read(lambda c: self._exec(
            c,
            "SELECT seq, time, analyst, session, operation, request_id, spec_hash, amount, "
            f"charge, outcome FROM ektelo_audit WHERE dataset = ? AND {where} "
            "ORDER BY seq DESC LIMIT ?", params,
        ))  # fmt: skip
        return [AuditEntry(dataset, int(r[0]), *r[1:10]) for r in rows]

    def audit_head(self, dataset: str) -> tuple[int, str] | None:
        """(sequence number, hash) of `dataset`'s latest audit entry: the head
        of its hash chain (None before the first)."""
        ds = self._dataset_id(dataset)
        rows = self._read(lambda c: self._exec(
            c, "SELECT seq, hash FROM ektelo_audit WHERE dataset = ? ORDER BY seq DESC LIMIT 1",
            (ds,),
        ))  # fmt: skip
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def recent_charges(self, dataset: str, limit: int) -> list[tuple[str, Fraction]]:
        """(time, charge at the root) of `dataset`'s latest `limit` charged
        requests, newest first."""
        ds = self._dataset_id(dataset)
        rows = self._read(lambda c: self._exec(
            c, "SELECT created, charged FROM ektelo_reservations WHERE dataset = ? "
            "ORDER BY id DESC LIMIT ?", (ds, int(limit)),
        ))  # fmt: skip
        return [(str(t), frac(c)) for t, c in rows]

    def sessions(self, dataset: str) -> list[tuple[str, int, str, str]]:
        """(analyst, sessions opened, first, latest start) of `dataset`, per analyst."""
        ds = self._dataset_id(dataset)
        rows = self._read(lambda c: self._exec(
            c, "SELECT analyst, COUNT(*), MIN(started), MAX(started) FROM ektelo_sessions "
            "WHERE dataset = ? GROUP BY analyst ORDER BY analyst", (ds,),
        ))  # fmt: skip
        return [(str(a), int(n), str(lo), str(hi)) for a, n, lo, hi in rows]

    def _chain(self, conn: Any, ds: int, name: str) -> list[tuple[AuditEntry, str, str]]:
        rows = self._exec(
            conn,
            "SELECT seq, time, analyst, session, operation, request_id, spec_hash, amount, "
            "charge, outcome, prev, hash FROM ektelo_audit WHERE dataset = ? ORDER BY seq",
            (ds,),
        )
        return [
            (AuditEntry(name, int(r[0]), *r[1:10]), str(r[10]), str(r[11])) for r in rows
        ]

    def verify_audit(self) -> AuditReport:
        """Recompute every dataset's hash chain and check the ledger against it:
        each granted entry has its reservation (and no reservation lacks one),
        the root's B is the sum of the charges, each analyst's spent the sum of
        theirs. One consistent snapshot."""

        def fn(conn: Any) -> AuditReport:
            problems: list[str] = []
            first: tuple[str, int] | None = None
            total = 0
            for ds, name, root in self._exec(
                conn, "SELECT id, name, root FROM ektelo_datasets ORDER BY id"
            ):
                chain = self._chain(conn, int(ds), name)
                count, broken, why = verify_chain(chain)
                total += count
                if broken is not None:
                    problems.append(f"dataset {name!r}, audit entry {broken}: {why}")
                    first = first or (name, broken)
                granted = sorted((e.analyst, e.request_id or "") for e, _, _ in chain
                                 if e.outcome == "granted")  # fmt: skip
                reserved = self._exec(
                    conn, "SELECT analyst, request_id, charged FROM ektelo_reservations "
                    "WHERE dataset = ?", (ds,),
                )  # fmt: skip
                if granted != sorted((str(a), str(r)) for a, r, _ in reserved):
                    problems.append(f"dataset {name!r}: granted audit entries and reservations "
                                    "differ")  # fmt: skip
                    first = first or (name, 0)
                root_row = self._exec(conn, "SELECT spent FROM ektelo_nodes WHERE id = ?", (root,))
                root_spent = frac(root_row[0][0])
                if root_spent != sum((frac(c) for _, _, c in reserved), Fraction(0)):
                    problems.append(f"dataset {name!r}: spent {float(root_spent):.6g} is not the "
                                    "sum of its reservations' charges")  # fmt: skip
                    first = first or (name, 0)
                for who, spent in self._exec(
                    conn, "SELECT name, spent FROM ektelo_analysts WHERE dataset = ?", (ds,)
                ):
                    theirs = sum((frac(c) for a, _, c in reserved if a == who), Fraction(0))
                    if frac(spent) != theirs:
                        problems.append(f"dataset {name!r}: analyst {who!r}'s spent is not the "
                                        "sum of their charges")  # fmt: skip
                        first = first or (name, 0)
            return AuditReport(not problems, total, first, tuple(problems))

        return self._read(fn)

    def budget_of(self, ref: DatasetRef) -> Fraction:
        """The dataset's spent (B at its root), as committed."""
        return self.spent_of([ref.root])[ref.root]
