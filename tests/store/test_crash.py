"""Crash safety at the store level (issue #26): `kill -9` of worker processes at
random points — while attaching, inside a reserving transaction, between the
charge and the release, while releasing — in at least 20 rounds (10 per
backend, 50 under EKTELO_STRESS=full, more until a kill fell inside a charge),
each followed by the checks: every answer a worker received has a durable
charge and is the answer stored with it, no charge of an earlier round is lost
or changed, the audit chain verifies and agrees with the ledger, and the
database passes its integrity check. A reservation the kill left without
an answer stays charged.

One worker of each round is killed at a random point from its start (it may
be attaching); the others at a random point after their first answer, in the
steady state, so kills between a charge and its release happen however loaded
the machine is. A worker reports an answer (one line, written with a single `os.write`) only
after `laplace` returned, i.e. after the release committed; a half-written last
line is a kill during the report and is ignored.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ektelo.ledger_store import open_store
from ektelo.matrix import Identity
from ektelo.port import protect
from ektelo.port import requests as port
from tests.conftest import STRESS_FULL

ROUNDS = 25 if STRESS_FULL else 10  # per backend
WORKERS = 3
EPS = 2.0**-12
CAP = 1e6  # never reached: the test is about crashes, not refusals


def _worker(url: str, tag: str, report: str) -> None:
    fd = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    x = protect(np.arange(8), epsilon=CAP, ledger=url, dataset="crash")
    for i in range(10**6):
        rid = f"{tag}-{i}"
        m = x.port.submit(port.VectorLaplace(x.node, Identity(8), EPS, request_id=rid))
        line = json.dumps([rid, [float(v) for v in m.answers]]) + "\n"
        os.write(fd, line.encode())


def _reported(folder: Path, pattern: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for path in folder.glob(pattern):
        for line in path.read_text().split("\n")[:-1]:  # the last piece is unterminated
            rid, answers = json.loads(line)
            out[rid] = answers
    return out


def _first_answer(log: Path, timeout: float = 60.0) -> None:
    """Wait until a worker has reported its first answer (it is past attaching)."""
    deadline = time.monotonic() + timeout
    while not (log.exists() and b"\n" in log.read_bytes()):
        assert time.monotonic() < deadline, f"{log.name}: no answer within {timeout:g} s"
        time.sleep(0.005)


def _crash_rounds(url: str, folder: Path) -> None:
    rng = random.Random(20261127)
    store = open_store(url)
    protect(np.arange(8), epsilon=CAP, ledger=store, dataset="crash")
    store.close()
    ctx = multiprocessing.get_context("fork")
    before: dict[str, tuple[str, Fraction]] = {}
    received = 0
    for r in range(4 * ROUNDS):  # ROUNDS, and more until a kill fell inside a charge
        procs = [
            ctx.Process(target=_worker, args=(url, f"r{r}w{k}", str(folder / f"r{r}w{k}.log")))
            for k in range(WORKERS)
        ]
        for p in procs:
            p.start()
        for k, p in enumerate(procs):  # each at its own random point:
            if k:  # ...in the steady state of charges and releases (whatever the load)
                _first_answer(folder / f"r{r}w{k}.log")
                time.sleep(rng.uniform(0.0, 0.05))
            else:  # ...from its start (attaching, or its first requests)
                time.sleep(rng.uniform(0.0, 0.3))
            os.kill(p.pid, signal.SIGKILL)  # type: ignore[arg-type]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == -signal.SIGKILL

        store = open_store(url)
        report = store.verify_audit()
        assert report.ok, (r, report.problems)
        assert store.integrity_check() == "ok"
        history = {h.request_id: (h.status, h.charge) for h in store.history("crash")}
        # nothing an earlier round charged is lost or changed (a reservation may
        # only gain its answer... never after a kill: its worker is gone)
        for rid, (status, charge) in before.items():
            assert history[rid] == (status, charge), rid
        answers = _reported(folder, f"r{r}w*.log")  # this round's (earlier ones: above)
        for rid, got in answers.items():
            assert history[rid] == ("released", Fraction(EPS)), rid
            stored = store.released("crash", rid)
            assert stored is not None and [float(v) for v in stored["answers"]] == got
        record = store.dataset("crash")
        assert record.spent == Fraction(EPS) * len(history)
        store.close()
        received += len(answers)
        before = history
        if r + 1 >= ROUNDS and any(status == "reserved" for status, _ in history.values()):
            break
    assert received > ROUNDS  # the workers got answers out before being killed
    # some kills landed between a charge and its release (on SQLite about a
    # third do; on PostgreSQL fewer — the server commits a release whose
    # COMMIT was sent — hence the extra rounds): those reservations have no
    # answer and stay charged (spent counted them)
    assert any(status == "reserved" for status, _ in before.values())


@pytest.mark.slow
def test_kill_9_sqlite(fast_sqlite: str, tmp_path: Path) -> None:
    _crash_rounds(fast_sqlite, tmp_path)


@pytest.mark.slow
def test_kill_9_postgres(pg_url: str, tmp_path: Path) -> None:
    _crash_rounds(pg_url, tmp_path)
