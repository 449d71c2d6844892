"""Throughput and latency of a small measurement over HTTP (issue #26).

Starts `ektelo-serve` on 127.0.0.1 (as a process, like a deployment) with a
64-cell vector, and sends Vector Laplace requests of one total query
(`x.laplace(Total(64), eps=1e-6)`) through remote handles:

* sequential: one client, p50/p99 latency and requests/s;
* concurrent: C client processes at once, aggregate requests/s and the
  p50/p99 latency over all their requests;

for the in-memory ledger, the durable SQLite ledger and (`--postgres`) a
PostgreSQL ledger, and next to them the bare cost of the database write the
ledger needs at least — one write transaction reading and updating a row
(SQLite: `BEGIN IMMEDIATE … COMMIT`, WAL, `synchronous=FULL`; PostgreSQL:
`SELECT … FOR UPDATE`, `UPDATE`, commit) on the same backend and disk — so
the ledger's overhead can be read off.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_server.py [--requests N] [--clients C]
        [--postgres]

The SQLite ledger file lives in a temporary folder on disk (fsync as in
production); the bare transaction runs on the same disk.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ektelo
from ektelo.matrix import Total
from tests.server.harness import ServerProcess, run_admin, write_config

CLIENT = """
import sys, time, json, ektelo
from ektelo.matrix import Total
x = ektelo.connect(sys.argv[1], sys.argv[2]).dataset("bench")
x.budget
n = int(sys.argv[3])
lat = []
start = time.perf_counter()
for _ in range(n):
    t0 = time.perf_counter()
    x.laplace(Total(64), eps=1e-6)
    lat.append(time.perf_counter() - t0)
print(json.dumps({"seconds": time.perf_counter() - start, "n": n, "lat": lat}))
"""


def bare_sqlite(path: Path, n: int) -> float:
    """Seconds per bare write transaction (BEGIN IMMEDIATE, update, COMMIT)."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, spent TEXT)")
    con.execute("INSERT INTO t VALUES (1, '0')")
    start = time.perf_counter()
    for i in range(n):
        con.execute("BEGIN IMMEDIATE")
        con.execute("SELECT spent FROM t WHERE id = 1").fetchone()
        con.execute("UPDATE t SET spent = ? WHERE id = 1", (str(i),))
        con.execute("COMMIT")
    seconds = (time.perf_counter() - start) / n
    con.close()
    return seconds


def bare_postgres(url: str, n: int) -> float:
    """Seconds per bare write transaction on PostgreSQL (row lock, update, commit)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE bare_t (id INTEGER PRIMARY KEY, spent TEXT)")
        con.execute("INSERT INTO bare_t VALUES (1, '0')")
        start = time.perf_counter()
        for i in range(n):
            with con.transaction():
                con.execute("SELECT spent FROM bare_t WHERE id = 1 FOR UPDATE").fetchone()
                con.execute("UPDATE bare_t SET spent = %s WHERE id = 1", (str(i),))
        return (time.perf_counter() - start) / n


def run(ledger: str | None, requests: int, clients: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        np.save(d / "x.npy", np.arange(64))
        extra = {} if ledger is None else {"ledger": ledger}
        config = write_config(d, {"bench": {"data": "x.npy", "epsilon": 1e6}}, **extra)
        run_admin(config, "init")
        tokens = [run_admin(config, "add-analyst", f"a{i}", "--dataset", "bench")
                  for i in range(clients)]
        server = ServerProcess(config).start()
        try:
            x = ektelo.connect(server.url, tokens[0]).dataset("bench")
            for _ in range(20):  # warm up
                x.laplace(Total(64), eps=1e-6)
            lat = []
            start = time.perf_counter()
            for _ in range(requests):
                t0 = time.perf_counter()
                x.laplace(Total(64), eps=1e-6)
                lat.append(time.perf_counter() - t0)
            seq = requests / (time.perf_counter() - start)
            procs = [subprocess.Popen([sys.executable, "-c", CLIENT, server.url, t,
                                       str(requests // clients)], stdout=subprocess.PIPE)
                     for t in tokens]
            outs = [json.loads(p.communicate()[0]) for p in procs]
            # aggregate: all requests over the slowest client's wall time
            agg = sum(o["n"] for o in outs) / max(o["seconds"] for o in outs)
            conc = np.array([t for o in outs for t in o["lat"]]) * 1000
        finally:
            server.stop()
        if ledger is None:
            bare = float("nan")
        elif ledger.startswith("postgresql://"):
            bare = bare_postgres(ledger, 500)
        else:
            bare = bare_sqlite(d / "bare.sqlite", 500)
    a = np.array(lat) * 1000
    return {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
            "seq_rps": seq, "conc_rps": agg, "bare_txn_ms": bare * 1000,
            "conc_p50_ms": float(np.percentile(conc, 50)),
            "conc_p99_ms": float(np.percentile(conc, 99))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ledgers", default="memory,sqlite",
                        help="comma-separated: memory, sqlite")
    parser.add_argument("--postgres", action="store_true",
                        help="also a throwaway PostgreSQL cluster (tests/store/pgcluster.py)")
    args = parser.parse_args()
    print(f"small measurement over HTTP (Total(64) on a 64-cell vector), {args.requests} "
          f"sequential requests, then {args.clients} concurrent client processes")
    print(f"{'ledger':<10} {'p50 ms':>8} {'p99 ms':>8} {'seq req/s':>10} "
          f"{'conc req/s':>11} {'conc p50':>9} {'conc p99':>9} {'bare txn ms':>12}")
    wanted = args.ledgers.split(",")
    for name, ledger in (("memory", None), ("sqlite", "ledger.sqlite")):
        if name in wanted:
            report(name, run(ledger, args.requests, args.clients))
    if args.postgres:  # a throwaway cluster, started for its row only
        from tests.store import pgcluster

        url, folder = pgcluster.start(tempfile.mkdtemp(prefix="ektelo-bench-pg-"))
        try:
            report("postgres", run(url, args.requests, args.clients))
        finally:
            pgcluster.stop(folder)


def report(name: str, r: dict[str, float]) -> None:
    print(f"{name:<10} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['seq_rps']:10.1f} "
          f"{r['conc_rps']:11.1f} {r['conc_p50_ms']:9.1f} {r['conc_p99_ms']:9.1f} "
          f"{r['bare_txn_ms']:12.2f}", flush=True)


if __name__ == "__main__":
    main()
