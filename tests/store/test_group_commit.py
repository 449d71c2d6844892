"""Group commit in the SQLite ledger store (#40).

Writes queued by a process's threads while another commits share the next
transaction, each in its own savepoint: one commit (one fsync) carries them
all, a failing one is rolled back alone, and the audit chain and Algorithm 2
stay exact — threads racing for a cap never overspend it together.
"""

from __future__ import annotations

import threading
import time
from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo.ledger_store import open_store
from ektelo.matrix import Total


def test_queued_writes_share_one_commit_and_fail_alone(fast_sqlite: str) -> None:
    store = open_store(fast_sqlite)
    ds = store.ensure_dataset("d", "epsilon", Fraction(1), None).id
    store._dataset_id = lambda name: ds  # type: ignore[method-assign]  # no read first
    names = [f"a{i}" for i in range(8)] + ["dup", "dup"]
    errors: list[BaseException] = []

    def add(name: str) -> None:
        try:
            store.add_analyst("d", name, 0.5)
        except ValueError as err:
            errors.append(err)

    before = store.commits
    threads = [threading.Thread(target=add, args=(n,)) for n in names]
    with store._lock:  # a commit in progress: the writes queue behind it
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(store._pending) < len(names) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(store._pending) == len(names)
    for t in threads:
        t.join()
    assert store.commits == before + 1  # ten writes, one transaction
    assert len(errors) == 1 and "already has an analyst 'dup'" in str(errors[0])
    analysts = sorted(a.name for a in store.dataset("d").analysts)
    assert analysts == sorted(set(names))
    log = store.audit_log("d")
    assert [e.outcome for e in log].count("analyst_added") == 9  # the failed one left none
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
