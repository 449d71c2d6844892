"""Per-request cost of one long server session: request 1 vs request 10,000 (#35).

A server session used to make 2–3 kernel round trips per request and copy
the kernel's whole history (after each charge) or ledger (twice, around each
Private transformation), so a request's cost grew with the session's length
and a session of n requests cost O(n²). Now each request is one kernel round
trip whose `Receipt` says what it created and charged.

In process, against the ASGI app (`ektelo.server.app.create_app`: routing,
authentication, the wire, the session, the kernel — no sockets): one analyst
opens one session on a 64-cell vector and sends N requests, alternating a
Private transformation (`Transform(0, Identity(64))`, one new source each)
and a charge (`VectorLaplace(0, Total(64), eps=1e-6)`, one history record
each), so both the ledger and the history grow by N/2. Printed: the median
per-request time over the first and the last `--window` requests, and their
ratio (≈ 1 when the cost does not grow with the session's length).

    PYTHONPATH=src:. .venv/bin/python benchmarks/bench_server_session.py [--requests N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from ektelo import wire
from ektelo.matrix import Identity, Total
from ektelo.port import requests as port
from ektelo.server.app import create_app
from ektelo.server.config import load_config
from tests.server.harness import run_admin, write_config


async def _call(app: Any, method: str, path: str, token: str, body: bytes = b"") -> Any:
    """One HTTP request to the ASGI app in this process; its JSON answer."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        "headers": [(b"authorization", f"Bearer {token}".encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    delivered = False
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    if status != 200:
        raise RuntimeError(f"{method} {path}: HTTP {status} {b''.join(chunks)[:200]!r}")
    return json.loads(b"".join(chunks))


async def _session(app: Any, token: str, n: int) -> list[float]:
    """Seconds of each of `n` requests in one session."""
    opened = await _call(app, "POST", "/v1/datasets/bench/sessions", token)
    path = f"/v1/sessions/{opened['session']}"
    derive = json.dumps({"request": wire.encode(port.Transform(0, Identity(64)))}).encode()
    times = []
    for i in range(n):
        if i % 2 == 0:
            body = derive
        else:
            request = port.VectorLaplace(0, Total(64), 1e-6)
            body = json.dumps({"request": wire.encode(request), "request_id": f"r{i}"}).encode()
        start = time.perf_counter()
        await _call(app, "POST", path, token, body)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        np.save(d / "vec.npy", np.arange(64))
        config = write_config(d, {"bench": {"data": "vec.npy", "epsilon": 1000.0, "seed": 1}})
        run_admin(config, "init")
        token = run_admin(config, "add-analyst", "alice", "--dataset", "bench")
        app = create_app(load_config(config))
        times = anyio.run(_session, app, token, args.requests)
    n, w = args.requests, min(args.window, args.requests // 2)
    print(f"one session, {n} requests (half Transform, half VectorLaplace), in-process ASGI")
    print(f"  median per request over {w} requests ending at request:")
    marks = sorted({w, *(m for m in (1_000, 5_000) if w < m < n), n})
    for end in marks:
        print(f"    {end:>6}: {statistics.median(times[end - w:end]) * 1e3:8.3f} ms")
    first, last = statistics.median(times[:w]), statistics.median(times[-w:])
    print(f"  ratio last/first: {last / first:.2f}   (total {sum(times):.1f} s)")


if __name__ == "__main__":
    main()
