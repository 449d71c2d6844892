"""The server under load: requests/s, latency, session opens, memory (#36, #40).

Starts `ektelo-serve` processes (each on a fresh configuration: a 64-cell
vector, a durable ledger) in
several *variants* and, for 1, 8, 32 and 64 concurrent clients, runs each
variant in turn (the order rotates from round to round, so the machine's
other load falls on all of them alike):

* each client is a process of its own with a token of its own (an analyst);
  it opens a session (timed: the session-open latency), then for
  `--seconds` sends Vector Laplace requests (`Total(64)`, ε = 10⁻⁶, each
  under its own request id) over one keep-alive connection, in raw HTTP
  (the stdlib only: the clients' own CPU stays small beside the server's);
* printed per variant and client count: requests/s (all clients' requests
  over the window), p50/p99 latency, the session opens' p50/p99, the
  server's CPU per request (its whole process tree: server, fork server,
  workers — /proc), and the tree's memory with that many sessions open
  (the sum of RSS, and of PSS: shared pages counted once);
* beside them, in the same run, the *ceiling*: the bare cost of the one
  write transaction a charge needs at least (SQLite: ``BEGIN IMMEDIATE``,
  read, update, ``COMMIT``, WAL, ``synchronous=FULL``, on the ledger's disk;
  PostgreSQL: ``SELECT … FOR UPDATE``, ``UPDATE``, commit), one client at a
  time, as transactions per second.

Variants: ``workers`` (the default configuration: kernels in the worker
pool), ``in-process`` (``worker_memory_mb = 0``), and with ``--baseline
SRC`` the same two settings served from another source tree (e.g. the
parent commit: ``git archive HEAD~N src | tar -x -C /tmp/base``). The
response-time floors (server/timing.py) are a setting of their own:
``--floors default`` (on, as deployed: 50 ms free, 100 ms charged) or
``--floors off``; the header says which.

    PYTHONPATH=src:. python benchmarks/bench_server_load.py [--clients 1 8 32 64]
        [--seconds 8] [--ledgers sqlite postgres] [--floors default|off]
        [--variants workers in-process] [--baseline /tmp/base/src] [--base-drop KEY ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ektelo import wire
from ektelo.matrix import Total
from ektelo.port import requests as port
from ektelo.server.timing import FLOOR_DEFAULTS
from tests.server.harness import ServerProcess, run_admin, write_config

CLIENT = r"""
import http.client, json, sys, time, urllib.parse
url, token, request, start_at, seconds, tag = sys.argv[1:7]
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
while time.time() < float(start_at):
    time.sleep(0.005)
t0 = time.perf_counter()
conn.request("POST", "/v1/datasets/bench/sessions", b"{}", headers)
r = conn.getresponse()
session = json.loads(r.read())["session"]
opened = time.perf_counter() - t0
opened_at = time.time()
lat, at, i = [], [], 0
stop = time.perf_counter() + float(seconds)
while True:
    body = ('{"request":' + request + ',"request_id":"' + tag + '-' + str(i) + '"}').encode()
    t0 = time.perf_counter()
    if t0 >= stop:
        break
    conn.request("POST", "/v1/sessions/" + session, body, headers)
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        raise SystemExit("status %d" % r.status)
    lat.append(time.perf_counter() - t0)
    at.append(time.time())
    i += 1
print(json.dumps({"open": opened, "opened_at": opened_at, "lat": lat, "at": at}))
"""


# the same load through `ektelo.client` (remote handles: the wire encoding and
# decoding in the client too; the method of the earlier measurements of #40)
EKTELO_CLIENT = r"""
import json, sys, time
url, token, request, start_at, seconds, tag = sys.argv[1:7]
import ektelo
from ektelo.matrix import Total
while time.time() < float(start_at):
    time.sleep(0.005)
t0 = time.perf_counter()
x = ektelo.connect(url, token).dataset("bench")
opened = time.perf_counter() - t0
opened_at = time.time()
lat, at = [], []
stop = time.perf_counter() + float(seconds)
while True:
    t0 = time.perf_counter()
    if t0 >= stop:
        break
    x.laplace(Total(64), eps=1e-6)
    lat.append(time.perf_counter() - t0)
    at.append(time.time())
print(json.dumps({"open": opened, "opened_at": opened_at, "lat": lat, "at": at}))
"""


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants (/proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes (their threads' included)."""
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def memory_mb(pids: list[int]) -> tuple[float, float]:
    """(sum of RSS, sum of PSS) in MiB."""
    rss = pss = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss / 1024, pss / 1024


def bare_sqlite(path: Path, seconds: float = 2.0) -> float:
    """Bare write transactions per second (BEGIN IMMEDIATE, read, update, COMMIT)."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, spent TEXT)")
    con.execute("INSERT OR REPLACE INTO t VALUES (1, '0')")
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        con.execute("BEGIN IMMEDIATE")
        con.execute("SELECT spent FROM t WHERE id = 1").fetchone()
        con.execute("UPDATE t SET spent = ? WHERE id = 1", (str(n),))
        con.execute("COMMIT")
        n += 1
    con.close()
    return n / (time.perf_counter() - start)


def bare_postgres(url: str, seconds: float = 2.0) -> float:
    """Bare write transactions per second on PostgreSQL (row lock, update, commit)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE IF NOT EXISTS bare_t (id INTEGER PRIMARY KEY, spent TEXT)")
        con.execute("INSERT INTO bare_t VALUES (1, '0') ON CONFLICT DO NOTHING")
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            with con.transaction():
                con.execute("SELECT spent FROM bare_t WHERE id = 1 FOR UPDATE").fetchone()
                con.execute("UPDATE bare_t SET spent = %s WHERE id = 1", (str(n),))
            n += 1
        return n / (time.perf_counter() - start)


def fresh_postgres(base_url: str, name: str) -> str:
    """A new database on the cluster at `base_url` (one per server run)."""
    import psycopg

    with psycopg.connect(base_url, autocommit=True) as con:
        con.execute(f'DROP DATABASE IF EXISTS "{name}"')
        con.execute(f'CREATE DATABASE "{name}"')
    return base_url.rsplit("/", 1)[0] + "/" + name


def run(
    folder: Path, ledger: str, clients: int, seconds: float, floors: dict[str, float],
    server_options: dict[str, Any], src: str | None, client: str = "raw",
    drop: tuple[str, ...] = (),
) -> dict[str, float]:  # fmt: skip
    """One server, `clients` clients for `seconds`: the figures of one cell."""
    folder.mkdir(parents=True)
    np.save(folder / "x.npy", np.arange(64))
    config = write_config(folder, {"bench": {"data": "x.npy", "epsilon": 1e9}},
                          ledger=ledger, response_floor_ms=floors,
                          max_concurrent_per_analyst=4, **server_options)
    if src is not None and drop:  # an older tree refuses the settings it predates
        lines = config.read_text().splitlines()
        config.write_text("\n".join(x for x in lines if x.split(" = ")[0] not in drop) + "\n")
    run_admin(config, "init")
    tokens = [run_admin(config, "add-analyst", f"a{i}", "--dataset", "bench")
              for i in range(clients)]
    request = json.dumps(wire.encode(port.VectorLaplace(0, Total(64), 1e-6)))
    server = ServerProcess(config)
    env = dict(os.environ)
    if src is not None:  # serve another tree's code
        os.environ["PYTHONPATH"] = f"{src}:{os.getcwd()}"
    try:
        server.start(timeout=120)
    finally:
        os.environ.clear()
        os.environ.update(env)
    try:
        assert server.process is not None
        time.sleep(3.0)  # the worker pool warms up in the background
        start_at = time.time() + 1.0 + 0.05 * clients
        code = CLIENT if client == "raw" else EKTELO_CLIENT
        env = {"PATH": os.environ["PATH"]}
        if client != "raw":
            env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        procs = [subprocess.Popen([sys.executable, "-c", code, server.url, t, request,
                                   str(start_at), str(seconds), f"c{i}"],
                                  stdout=subprocess.PIPE, env=env)
                 for i, t in enumerate(tokens)]
        while time.time() < start_at:
            time.sleep(0.01)
        pids = tree(server.process.pid)
        cpu0 = cpu_seconds(pids)
        outs = [json.loads(p.communicate()[0]) for p in procs]
        cpu = cpu_seconds(tree(server.process.pid)) - cpu0
        rss, pss = memory_mb(tree(server.process.pid))  # every client's session still open
    finally:
        server.stop()
    lat = np.array([t for o in outs for t in o["lat"]]) * 1000
    # the steady state: requests answered after every session was open
    last_open = max(o["opened_at"] for o in outs)
    steady = np.array([t for o in outs for t, a in zip(o["lat"], o["at"], strict=True)
                       if a - t > last_open]) * 1000
    opens = np.array([o["open"] for o in outs]) * 1000
    n = len(lat)
    return {"rps": n / seconds, "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99)),
            "p99_steady": float(np.percentile(steady, 99)) if len(steady) else float("nan"),
            "open50": float(np.percentile(opens, 50)),
            "open99": float(np.percentile(opens, 99)), "cpu_ms": 1000 * cpu / max(n, 1),
            "rss": rss, "pss": pss}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--ledgers", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--floors", choices=["default", "off"], default="default")
    parser.add_argument("--variants", nargs="+", default=["workers", "in-process"])
    parser.add_argument("--baseline", help="another tree's src/ (e.g. the parent commit's)")
    parser.add_argument("--base-variants", nargs="+", default=["in-process"],
                        help="the variants run on the --baseline tree (its own settings)")
    parser.add_argument("--base-drop", nargs="+", default=[],
                        help="server settings the --baseline tree predates (left out of its "
                             "configuration, e.g. response_floor_ms max_concurrent_per_analyst)")
    parser.add_argument("--client", choices=["raw", "ektelo"], default="raw",
                        help="raw HTTP (stdlib) or ektelo.client remote handles")
    args = parser.parse_args()
    floors = dict(FLOOR_DEFAULTS) if args.floors == "default" else {"free": 0, "charged": 0}
    settings = {"workers": {}, "in-process": {"worker_memory_mb": 0},
                "1 worker": {"worker_processes": 1}, "2 workers": {"worker_processes": 2},
                # an older tree's workers (a process per session), for --base-variants
                "workers 4096": {"worker_memory_mb": 4096}}
    variants: list[tuple[str, dict[str, Any], str | None]] = [
        (v, settings[v], None) for v in args.variants]
    if args.baseline:
        variants += [(f"base {v}", settings[v], args.baseline) for v in args.base_variants]
    print(f"load: {args.seconds:g} s per cell, Total(64) Vector Laplace, {args.client} "
          f"clients, one analyst and session per client; response floors {args.floors} "
          f"{floors} ms; load {os.getloadavg()[0]:.1f} at start; {os.cpu_count()} cores")
    pg = None
    if "postgres" in args.ledgers:
        from tests.store import pgcluster

        pg = pgcluster.start(tempfile.mkdtemp(prefix="ektelo-bench-pg-"))  # (url, folder)
    head = (f"{'ledger':<8} {'clients':>7} {'variant':<16} {'req/s':>7} {'p50 ms':>8} "
            f"{'p99 ms':>8} {'steady p99':>10} {'open p50':>9} {'open p99':>9} {'CPU ms/req':>10} "
            f"{'RSS MiB':>8} {'PSS MiB':>8}")
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            for ledger_kind in args.ledgers:
                print(head)
                for r, clients in enumerate(args.clients):
                    order = variants[r % len(variants):] + variants[:r % len(variants)]
                    for name, options, src in order:
                        cell = Path(tmp) / f"{ledger_kind}-{r}-{clients}-{name.replace(' ', '_')}"
                        if ledger_kind == "sqlite":
                            ledger = "ledger.sqlite"
                        else:
                            assert pg is not None
                            ledger = fresh_postgres(pg[0], f"b{clients}{abs(hash(name))}")
                        f = run(cell, ledger, clients, args.seconds, floors, options, src,
                                args.client, tuple(args.base_drop))
                        print(f"{ledger_kind:<8} {clients:>7} {name:<16} {f['rps']:7.1f} "
                              f"{f['p50']:8.1f} {f['p99']:8.1f} {f['p99_steady']:10.1f} "
                              f"{f['open50']:9.1f} "
                              f"{f['open99']:9.1f} {f['cpu_ms']:10.2f} {f['rss']:8.0f} "
                              f"{f['pss']:8.0f}", flush=True)
                    if ledger_kind == "sqlite":
                        ceiling = bare_sqlite(Path(tmp) / f"bare-{clients}.sqlite")
                    else:
                        assert pg is not None
                        ceiling = bare_postgres(fresh_postgres(pg[0], f"bare{clients}"))
                    print(f"{ledger_kind:<8} {clients:>7} {'ceiling (bare)':<16} "
                          f"{ceiling:7.1f}  one write transaction per request, one at a time",
                          flush=True)
    finally:
        if pg is not None:
            from tests.store import pgcluster

            pgcluster.stop(pg[1])
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
