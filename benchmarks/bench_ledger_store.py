"""The durable ledger's cost (issue #26): latency, throughput and overhead per backend.

Run: PYTHONPATH=. python benchmarks/bench_ledger_store.py [--requests 300]
     [--workers 16] [--per-worker 100] [--folder DIR]

For each store — the in-memory ledger (today's default, the baseline), SQLite
(a file in --folder, WAL, synchronous=FULL) and PostgreSQL (EKTELO_PG_URL, or
a throwaway cluster with its data in --folder, started and stopped here) —
it prints:
  * p50/p99 wall latency of one small measurement (Laplace on 16 cells,
    `protect(..., ledger=)` once, then `--requests` requests in one process):
    validate → reserve (one write transaction) → noise → release (another);
  * the p50/p99 of a bare write transaction on the same backend and
    connection settings (one INSERT and COMMIT), and the ledger's overhead:
    request p50 minus the kernel's in-memory p50, over the bare p50 (a request
    commits twice, so ≈ 2 is the floor);
  * throughput: `--workers` processes × `--per-worker` requests against one
    dataset (granted requests per second of wall time, from the first start
    to the last finish).
Figures depend on the disk's flush latency (--folder on tmpfs removes it) and
on the machine's load. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ektelo.ledger_store import open_store
from ektelo.matrix import Identity
from ektelo.port import protect
from ektelo.port import requests as port

EPS = 2.0**-20
CELLS = 16


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def request_latencies(ledger: str | None, n: int) -> list[float]:
    kw = {} if ledger is None else {"ledger": ledger, "dataset": "bench"}
    x = protect(np.arange(CELLS), epsilon=1.0, **kw)
    M = Identity(CELLS)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        x.port.submit(port.VectorLaplace(x.node, M, EPS))
        out.append(time.perf_counter() - t)
    return out


def bare_sqlite(path: str, n: int) -> list[float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, v TEXT)")
    out = []
    for i in range(n):
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO bare (v) VALUES (?)", (str(i),))
        conn.execute("COMMIT")
        out.append(time.perf_counter() - t)
    conn.close()
    return out


def bare_postgres(url: str, n: int) -> list[float]:
    import psycopg

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TABLE IF NOT EXISTS bare (id BIGSERIAL PRIMARY KEY, v TEXT)")
        for i in range(n):
            t = time.perf_counter()
            with conn.transaction():
                conn.execute("INSERT INTO bare (v) VALUES (%s)", (str(i),))
            out.append(time.perf_counter() - t)
    return out


def _worker(url: str, n: int, start: object, out: object) -> None:
    x = protect(np.arange(CELLS), epsilon=1.0, ledger=url, dataset="load")
    M = Identity(CELLS)
    start.wait()  # type: ignore[attr-defined]
    t0 = time.time()
    for _ in range(n):
        x.port.submit(port.VectorLaplace(x.node, M, EPS))
    out.put((t0, time.time()))  # type: ignore[attr-defined]


def throughput(url: str, workers: int, per: int) -> float:
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, per, start, out)) for _ in range(workers)]
    for p in procs:
        p.start()
    time.sleep(0.5)  # let every worker attach
    start.set()
    spans = [out.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return workers * per / wall


def row(name: str, lat: list[float], bare: list[float] | None, base: float, thr: float | None):
    p50, p99 = pct(lat, 0.5) * 1e3, pct(lat, 0.99) * 1e3
    text = f"{name:<11} request p50 {p50:7.2f} ms  p99 {p99:7.2f} ms"
    if bare is not None:
        b50, b99 = pct(bare, 0.5) * 1e3, pct(bare, 0.99) * 1e3
        over = (p50 - base * 1e3) / b50
        text += f" | bare tx p50 {b50:6.2f} ms p99 {b99:6.2f} ms | overhead {over:4.1f} bare tx"
    if thr is not None:
        text += f" | {thr:7.1f} granted/s"
    print(text, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--per-worker", type=int, default=100)
    ap.add_argument("--folder", default=None, help="where the SQLite file and PG data go")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ektelo-bench-", dir=args.folder))
    folder.chmod(0o755)  # the PostgreSQL cluster inside runs as the postgres user
    try:
        measure(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def measure(args: argparse.Namespace, folder: Path) -> None:
    print(f"# {args.requests} sequential requests; {args.workers} processes × "
          f"{args.per_worker} for throughput; files in {folder}; cpus {os.cpu_count()}")
    memory = request_latencies(None, args.requests)
    base = statistics.median(memory)
    row("memory", memory, None, base, None)

    sqlite_path = str(folder / "ledger.db")
    lat = request_latencies(sqlite_path, args.requests)
    bare = bare_sqlite(str(folder / "bare.db"), args.requests)
    row("sqlite", lat, bare, base, throughput(str(folder / "load.db"), args.workers,
                                              args.per_worker))  # fmt: skip
    open_store(sqlite_path).close()

    url, cluster = os.environ.get("EKTELO_PG_URL"), None
    if url is None:
        from tests.store import pgcluster

        try:
            url, cluster = pgcluster.start(str(folder / "pg"))
        except pgcluster.PgUnavailable as err:
            print(f"postgres    NOT MEASURED: {err}")
            return
    try:
        lat = request_latencies(url, args.requests)
        bare = bare_postgres(url, args.requests)
        store = open_store(url)
        store.close()
        row("postgres", lat, bare, base, throughput(url, args.workers, args.per_worker))
    finally:
        if cluster is not None:
            from tests.store import pgcluster

            pgcluster.stop(cluster)


if __name__ == "__main__":
    main()
