"""Durable budget ledgers (issue #26): Algorithm 2 (paper §4.4) in a database.

`open_store(target)` opens a ledger store: a path to a SQLite file (created
if absent; the embedded default, `sqlite.py`), a `postgresql://` URL
(`postgres.py`, for several processes or servers), or an open store (as is).
A store persists the datasets (name, budget kind ε | ρ, total, δ), their
analysts (quotas beneath the dataset's cap), Algorithm 2's graph (nodes,
parents, stabilities, kinds, B(sv) as exact rationals), the reservations of
granted requests with their released answers, and the hash-chained audit
log (`audit.py`). `protect(..., ledger=, dataset=, analyst=)` attaches a
kernel to it (`attach`); the custodian's views are

    store = open_store("budget.db")
    store.datasets()                  # [DatasetRecord(name, unit, total, spent, …)]
    store.history("survey")           # [HistoryEntry(time, analyst, operation, …)]
    store.add_analyst("survey", "ann", quota=0.5)
    store.verify_audit()              # AuditReport(ok, entries, first_broken, problems)

The protocol, the crash semantics and the schema: docs/ledger.md.
"""

from __future__ import annotations

import os
import uuid
from fractions import Fraction
from pathlib import Path

from ..budget import ZCDP, PureDP
from .records import AnalystRecord, AuditReport, DatasetRecord, HistoryEntry, StoreError
from .session import DurableLedger
from .sql import SQLStore
from .sqlite import SQLiteStore

__all__ = [
    "AnalystRecord",
    "AuditReport",
    "DatasetRecord",
    "DurableLedger",
    "HistoryEntry",
    "LedgerStore",
    "SQLiteStore",
    "StoreError",
    "attach",
    "open_store",
]

LedgerStore = SQLStore  # the type every store is (SQLite, PostgreSQL)


def open_store(target: str | os.PathLike[str] | SQLStore) -> SQLStore:
    """A ledger store: `target` is a SQLite file path (created if absent), a
    `postgresql://` (or `postgres://`) URL, or an open store (returned as is)."""
    if isinstance(target, SQLStore):
        return target
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str) or not target:
        raise TypeError(
            "ledger= must be a SQLite file path, a postgresql:// URL or an open store, got "
            f"{type(target).__name__}"
        )
    if target.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(target)
    if "://" in target:
        raise ValueError(f"unknown ledger URL scheme in {target.split('://')[0]!r}: use a "
                         "SQLite file path or postgresql://")  # fmt: skip
    parent = Path(target).parent
    if target != ":memory:" and not parent.is_dir():
        raise ValueError(f"the ledger file's folder {str(parent)!r} does not exist")
    return SQLiteStore(target)


def attach(
    target: str | os.PathLike[str] | SQLStore, dataset: str, budget: PureDP | ZCDP, *,
    analyst: str | None = None, research: bool = False, neighbours: str = "row",
) -> DurableLedger:  # fmt: skip
    """A kernel session's ledger on `dataset` in the store `target`: the dataset
    is created with `budget` on first use; later its stored budget must match
    (ValueError naming it otherwise). `analyst` must have been added
    (`add_analyst`); None is the data holder (the dataset cap only).
    `neighbours`: "row", or "unit:<column>" for a dataset protected per
    privacy unit (a dataset keeps the relation it was created with)."""
    if not isinstance(dataset, str):
        raise TypeError(f"dataset= must be a str naming the budget, got {type(dataset).__name__}")
    if analyst is not None and not isinstance(analyst, str):
        raise TypeError(f"analyst= must be a str or None, got {type(analyst).__name__}")
    store = open_store(target)
    delta = budget.delta if isinstance(budget, ZCDP) else None
    ref = store.ensure_dataset(dataset, budget.unit, Fraction(budget.total), delta, neighbours)
    session = uuid.uuid4().hex
    store.open_session(ref, analyst, session, "research" if research else "secure")
    return DurableLedger(store, ref, analyst=analyst, session=session)
