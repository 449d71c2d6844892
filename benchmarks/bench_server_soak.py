"""Memory of a long-lived server session: RSS over time (issue #40).

Starts `ektelo-serve` as a process (durable SQLite ledger, a 64-cell
vector), opens ONE session and sends N charged requests in it
(`VectorLaplace(0, Total(64), eps=1e-6)`, each with its own request id) over
one keep-alive connection, reading the server's resident set size
(/proc/<pid>/status, VmRSS) every `--every` requests. Printed: RSS against
requests, and the growth per request after the warm-up (the first
`--warmup` requests: imports, caches, allocator arenas). The history lives in
the ledger, not in RAM: a session keeps only its last `session_history`
records, so the growth per request should be ≈ 0 once the warm-up is over.

    PYTHONPATH=src:. .venv/bin/python benchmarks/bench_server_soak.py [--requests N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ektelo import wire
from ektelo.matrix import Total
from ektelo.port import requests as port
from tests.server.harness import ServerProcess, run_admin, write_config


def rss_kb(pid: int) -> int:
    """The process's resident set size in KiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")  # pragma: no cover - Linux only


def soak(server: ServerProcess, token: str, requests: int, every: int,
         dataset: str = "soak") -> list[tuple[int, int]]:
    """[(requests sent, RSS KiB)] for one session of `requests` charged requests."""
    assert server.process is not None
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(path: str, body: bytes) -> Any:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")
        return json.loads(payload)

    sid = post(f"/v1/datasets/{dataset}/sessions", b"{}")["session"]
    request = wire.encode(port.VectorLaplace(0, Total(64), 1e-6))
    points = [(0, rss_kb(server.process.pid))]
    for i in range(1, requests + 1):
        post(f"/v1/sessions/{sid}",
             json.dumps({"request": request, "request_id": f"soak-{i}"}).encode())
        if i % every == 0:
            points.append((i, rss_kb(server.process.pid)))
    conn.close()
    return points


def serve(directory: Path, **server: Any) -> tuple[ServerProcess, str]:
    """A server on a durable SQLite ledger with one vector dataset (ε = 10⁶)."""
    np.save(directory / "vec.npy", np.arange(64))
    config = write_config(directory, {"soak": {"data": "vec.npy", "epsilon": 1e6}},
                          ledger="ledger.sqlite", **server)
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "ann", "--dataset", "soak")
    return ServerProcess(config).start(), token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, token = serve(Path(tmp))
        try:
            points = soak(server, token, args.requests, args.every)
        finally:
            server.stop()
    print(f"one session, {args.requests} charged requests, SQLite ledger")
    print(f"{'requests':>9} {'RSS MiB':>9}")
    for n, kb in points:
        print(f"{n:>9} {kb / 1024:>9.1f}")
    base = min(points, key=lambda p: abs(p[0] - args.warmup))
    end = points[-1]
    per = (end[1] - base[1]) * 1024 / max(end[0] - base[0], 1)
    print(f"growth after request {base[0]}: {per:.0f} bytes/request")


if __name__ == "__main__":
    main()
