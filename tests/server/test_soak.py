"""A long-lived session's memory does not grow with its requests (issue #40).

The history lives in the ledger, not in RAM: a server session and its
kernel keep only their last `session_history` query records, and with a
durable ledger the process's audit ring is as short. In process, against the
ASGI app on a durable SQLite ledger (tmpfs), one session sends 2,000 charged
requests; after a warm-up of 500, the Python heap (tracemalloc: the
server's own objects, not SQLite's page cache) and the resident set may grow
by at most 256 and 2,400 bytes per request (measured: 21 and ~1,050; the
resident set carries SQLite's page cache filling). Before #40 the session,
its kernel and the audit ring kept them all: 917 and ~4,800 (tracemalloc's
own tables included). The RSS of a real server over 10,000 requests:
benchmarks/bench_server_soak.py.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from ektelo import wire
from ektelo.matrix import Total
from ektelo.port import requests as port
from ektelo.server.app import create_app
from ektelo.server.config import load_config
from tests.server.harness import run_admin, write_config

# `make stress` (EKTELO_STRESS=full) soaks 20,000 requests; `make test` 2,000
WARMUP, REQUESTS = 500, 20_000 if os.environ.get("EKTELO_STRESS") == "full" else 2_000


async def _call(app: Any, path: str, token: str, body: bytes) -> Any:
    """One POST to the ASGI app in this process; its JSON answer."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        "headers": [(b"authorization", f"Bearer {token}".encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    delivered, status, chunks = False, 0, []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await anyio.sleep(3600)  # pragma: no cover - the app reads the body once
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    assert status == 200, b"".join(chunks)[:300]
    return json.loads(b"".join(chunks))


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # pragma: no cover


def test_a_long_session_keeps_o1_memory(tmp_path: Path, fast_sqlite: str) -> None:
    np.save(tmp_path / "vec.npy", np.arange(64))
    config = write_config(tmp_path, {"soak": {"data": "vec.npy", "epsilon": 1e6}},
                          ledger=fast_sqlite, session_history=64)
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "ann", "--dataset", "soak")
    app = create_app(load_config(config))
    request = wire.encode(port.VectorLaplace(0, Total(64), 1e-6))
    marks: dict[int, tuple[int, int]] = {}

    async def soak() -> str:
        sid: str = (await _call(app, "/v1/datasets/soak/sessions", token, b"{}"))["session"]
        for i in range(1, REQUESTS + 1):
            body = json.dumps({"request": request, "request_id": f"r{i}"}).encode()
            await _call(app, f"/v1/sessions/{sid}", token, body)
            if i in (WARMUP, REQUESTS):
                gc.collect()
                marks[i] = (tracemalloc.get_traced_memory()[0], _rss_kb())
        history = await _call(app, f"/v1/sessions/{sid}", token,
                              json.dumps({"request": wire.encode(port.GetHistory())}).encode())
        records = wire.decode(history["response"])
        # the latest 64, indexed by their place among all the session's records
        assert [r.index for r in records] == list(range(REQUESTS - 64, REQUESTS))
        return sid

    tracemalloc.start()  # from the start: blocks freed later count as freed
    try:
        anyio.run(soak)
    finally:
        tracemalloc.stop()
    n = REQUESTS - WARMUP
    heap = (marks[REQUESTS][0] - marks[WARMUP][0]) / n
    rss = (marks[REQUESTS][1] - marks[WARMUP][1]) * 1024 / n
    assert heap < 256, f"the Python heap grew {heap:.0f} bytes per request"
    assert rss < 2400, f"the resident set grew {rss:.0f} bytes per request"
