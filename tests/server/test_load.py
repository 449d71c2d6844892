"""The server under load and under crashes, on the durable ledger (#26).

* No overspend: 8 analyst processes × 40 requests each over HTTP (16 × 200 under
  EKTELO_STRESS=full) against one dataset cap, on SQLite and on PostgreSQL:
  spent never exceeds the cap, every granted request is in the ledger and the
  audit log, refusals change nothing.
* Crash safety: 12 rounds (50 under EKTELO_STRESS=full) of `kill -9` of the
  server at random points during a load run, each followed by a restart: every
  answer a client received has a durable charge, no charge is lost (spent is the
  sum of the reservations), retries return the stored answers, the audit chain
  verifies and the database passes its integrity check.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ektelo
from ektelo import ledger_store as store
from ektelo.matrix import Total
from ektelo.port import requests as port
from tests.conftest import STRESS_FULL
from tests.server.harness import ServerProcess, http, run_admin, vector, write_config

ROUNDS = int(os.environ.get("EKTELO_CRASH_ROUNDS", "50" if STRESS_FULL else "12"))
ANALYSTS, REQUESTS = (16, 200) if STRESS_FULL else (8, 40)
LOAD_CLIENT = Path(__file__).with_name("load_client.py")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Durable:
    server: ServerProcess
    ledger: str  # a SQLite path or a postgresql:// URL
    tokens: dict[str, str]
    directory: Path
    admin: str


def durable_server(directory: Path, cap: float, analysts: int, ledger: str) -> Durable:
    np.save(directory / "x.npy", vector(16, seed=4))
    config = write_config(directory, {"shared": {"data": "x.npy", "epsilon": cap}},
                          ledger=ledger)
    admin = run_admin(config, "init")
    tokens = {
        f"analyst{i}": run_admin(config, "add-analyst", f"analyst{i}", "--dataset", "shared")
        for i in range(analysts)
    }
    return Durable(ServerProcess(config), ledger, tokens, directory, admin)


def start_clients(d: Durable, n: int, eps: float, stop: Path | None = None) -> list[Any]:
    procs = []
    for name, token in d.tokens.items():
        args = [sys.executable, str(LOAD_CLIENT), d.server.url, token, "shared", str(n),
                str(eps), str(d.directory / f"{name}.jsonl")]
        if stop is not None:
            args.append(str(stop))
        procs.append(subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE))
    return procs


def wait_clients(procs: list[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    errors = []
    for p in procs:  # every client waited for (none left behind), then judged
        try:
            _, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        errors.append((p.returncode, err))
    for code, err in errors:
        assert code == 0, err.decode()[:3000]


def results(d: Durable) -> dict[str, list[dict[str, Any]]]:
    return {
        name: [json.loads(line) for line in (d.directory / f"{name}.jsonl").read_text().split("\n")
               if line]
        for name in d.tokens
    }


def check_ledger(d: Durable, cap: float) -> tuple[Any, list[Any]]:
    """The durable ledger's invariants; returns the dataset record and history."""
    s = store.open_store(d.ledger)
    try:
        record = s.dataset("shared")
        history = s.history("shared")
        report = s.verify_audit()
        log = s.audit_log("shared")
    finally:
        s.close()
    assert report.ok, report.problems
    assert record.spent <= Fraction(cap) * (1 + Fraction(1, 10**9))
    # no charge lost or invented: spent is exactly the sum of the reservations
    assert sum((h.charge for h in history), Fraction(0)) == record.spent
    granted_in_log = [e for e in log if e.outcome == "granted"]
    assert len(granted_in_log) == len(history)
    if not d.ledger.startswith("postgres"):  # SQLite's own integrity check
        con = sqlite3.connect(d.ledger)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            con.close()
    return record, history


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest) -> str:
    """A durable ledger on each backend: a SQLite file (on tmpfs when there is
    one, as the store's own load tests do: commits cost no disk flush there,
    the durability settings are the production ones), a PostgreSQL database."""
    if request.param == "sqlite":
        path: str = request.getfixturevalue("fast_sqlite")
        return path
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def loaded(tmp_path: Path, ledger: str) -> Iterator[Durable]:
    d = durable_server(tmp_path, cap=ANALYSTS * REQUESTS * 0.01 / 2, analysts=ANALYSTS,
                       ledger=ledger)
    d.server.start()
    try:
        yield d
    finally:
        d.server.stop()


@pytest.mark.slow
def test_no_overspend_with_many_analysts_and_requests(loaded):
    eps, cap = 0.01, ANALYSTS * REQUESTS * 0.01 / 2  # about half must be refused
    procs = start_clients(loaded, REQUESTS, eps)
    wait_clients(procs, timeout=900)
    out = results(loaded)
    rows = [r for rs in out.values() for r in rs]
    assert len(rows) == ANALYSTS * REQUESTS
    outcomes = {r["outcome"] for r in rows}
    assert outcomes <= {"granted", "refused"}, outcomes
    granted = [r for r in rows if r["outcome"] == "granted"]
    assert 0 < len(granted) < len(rows)  # the cap was reached during the run
    record, history = check_ledger(loaded, cap)
    # every granted request is in the ledger, released with its answer; refusals
    # left nothing: the ledger holds exactly the granted requests
    ids = {h.request_id for h in history}
    assert {f"{name}/{r['id']}" for name, rs in out.items() for r in rs
            if r["outcome"] == "granted"} == ids
    assert all(h.status == "released" for h in history)
    assert record.spent == sum(Fraction(eps) for _ in granted)
    # the cap binds: one more request than fits is refused
    assert cap - float(record.spent) < eps * (1 + 1e-9)
    # the status page reads the durable ledger: each analyst's spending
    status, page = http("GET", f"{loaded.server.url}/status", token=loaded.admin)
    assert status == 200
    for name, rs in out.items():
        mine = sum(Fraction(eps) for r in rs if r["outcome"] == "granted")
        assert f'<td>{name}</td><td>shared</td><td class="num">—</td>' in page  # no quota
        assert f'<td class="num">{float(mine):.6g}</td>' in page


@pytest.mark.slow
def test_kill_9_during_load_loses_no_charge_and_no_answer(tmp_path, fast_sqlite):
    d = durable_server(tmp_path, cap=1e6, analysts=4, ledger=fast_sqlite)
    d.server.start()
    stop = tmp_path / "stop"
    rng = random.Random(2026)
    procs = start_clients(d, 100_000, 0.001, stop)
    try:
        # every client under way (its first answer written) before the first kill
        deadline = time.monotonic() + 300
        while not all((d.directory / f"{n}.jsonl").exists()
                      and (d.directory / f"{n}.jsonl").stat().st_size for n in d.tokens):
            assert time.monotonic() < deadline, "the load clients did not start"
            time.sleep(0.1)
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.05, 0.6))  # a random point of the load run
            d.server.kill()
            d.server.start()
        time.sleep(0.5)
    finally:
        stop.touch()
        wait_clients(procs, timeout=300)
    out = results(d)
    rows = [r for rs in out.values() for r in rs]
    assert {r["outcome"] for r in rows} <= {"granted", "lost"}
    received = {f"{name}/{r['id']}": r for name, rs in out.items() for r in rs
                if r["outcome"] == "granted"}
    assert len(received) >= ROUNDS  # answers kept arriving between the kills
    _, history = check_ledger(d, 1e6)
    charged = {h.request_id: h for h in history}
    # every answer a client received has a durable charge (with its answer stored)
    missing = set(received) - set(charged)
    assert not missing, f"{len(missing)} answers without a durable charge"
    assert all(charged[i].status == "released" for i in received)
    # a request the client saw as lost stays charged (it was reserved)
    lost = [f"{name}/{r['id']}" for name, rs in out.items() for r in rs
            if r["outcome"] == "lost"]
    assert all(i in charged for i in lost)
    # retries after the crashes return the stored answers, charging nothing
    name = next(iter(d.tokens))
    x = ektelo.connect(d.server.url, d.tokens[name]).dataset("shared")
    spent = x.budget.spent
    for r in [r for r in out[name] if r["outcome"] == "granted"][:20]:
        m = x.port.submit(port.VectorLaplace(x.node, Total(16), 0.001, request_id=r["id"]))
        assert m.answers.tolist() == r["answers"]
    assert x.budget.spent == spent
    d.server.stop()
