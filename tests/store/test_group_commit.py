"""Group commit in the SQLite ledger store (#40).

Writes queued by a process's threads while another commits share the next
transaction, each in its own savepoint: one commit (one fsync) carries
several, and the audit chain and Algorithm 2 stay exact — threads racing for
a cap never overspend it together.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo.ledger_store import open_store
from ektelo.matrix import Total


def test_writes_queued_behind_a_commit_share_the_next_one(fast_sqlite: str) -> None:
    """Another connection holds the database's write lock (a long commit):
    the store's first writer waits in BEGIN, the others queue behind it,
    and the next commit carries all of the queue — fewer commits than writes.
    (The writes are releases of answers already stored: each runs, and
    changes nothing, as a release never overwrites an answer.)"""
    store = open_store(fast_sqlite)
    x = ektelo.protect(np.arange(8), epsilon=1.0, ledger=store, dataset="d")
    for _ in range(10):  # ten reservations, whose answers the test releases again
        x.laplace(Total(8), eps=0.0625)
    stored = sqlite3.connect(fast_sqlite).execute(
        "SELECT id, answer FROM ektelo_reservations ORDER BY id").fetchall()
    rows = [(token,) for token, _ in stored]
    blocker = sqlite3.connect(fast_sqlite, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the database's write lock, elsewhere
    before = store.commits
    threads = [threading.Thread(target=store.release, args=(int(token), f'{{"n": {i}}}'))
               for i, (token,) in enumerate(rows)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while store.queued < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.queued >= 2  # at least two wait behind the first writer
    blocker.execute("ROLLBACK")
    for t in threads:
        t.join()
    assert store.commits - before < len(rows)  # some writes shared a commit
    after = sqlite3.connect(fast_sqlite).execute(
        "SELECT id, answer FROM ektelo_reservations ORDER BY id").fetchall()
    assert after == stored  # each ran (and a stored answer is never overwritten)
    assert store.verify_audit().ok
    store.close()


@pytest.mark.parametrize("threads", [8])
def test_threads_racing_for_a_cap_never_overspend(fast_sqlite: str, threads: int) -> None:
    store = open_store(fast_sqlite)
    cap, eps = 1.0, 0.0625  # 16 requests fit, exactly (binary fractions)
    granted: list[int] = []
    refused: list[int] = []

    def analyst() -> None:
        x = ektelo.protect(np.arange(8), epsilon=cap, ledger=store, dataset="d")
        for _ in range(6):
            try:
                x.laplace(Total(8), eps=eps)
                granted.append(1)
            except ektelo.BudgetExceeded:
                refused.append(1)

    workers = [threading.Thread(target=analyst) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(granted) == 16 and len(refused) == threads * 6 - 16
    record = store.dataset("d")
    assert record.spent == Fraction(1)
    assert store.verify_audit().ok
    assert len(store.history("d")) == 16
    store.close()
