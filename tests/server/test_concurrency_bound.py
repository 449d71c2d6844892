"""At most `max_concurrent_per_analyst` requests in flight per analyst (#40).

On a real server with the bound at 2: two requests of ann's whose bodies
have not finished arriving hold her two slots, so her third is refused 429
`TooManyConcurrentRequests` in JSON with Retry-After and charges nothing,
while bob is served; once the two bodies arrive they are answered and ann is
served again. Then eight threads of ann's at once (charged requests held by
a 1 s response floor, so they overlap): the ones refused 429 charged
nothing — the budget spent is exactly the granted ones' — and the client
library retries a 429 until it is served.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np

import ektelo
from ektelo import wire
from ektelo.matrix import Identity
from ektelo.port import requests as port
from tests.server.harness import (
    ServerProcess,
    http,
    read_http_response,
    run_admin,
    write_config,
)

EPS = 0.125  # exact in binary: sums compare exactly


def _body(request_id: str) -> bytes:
    return json.dumps({"request": wire.encode(port.VectorLaplace(0, Identity(8), EPS)),
                       "request_id": request_id}).encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, object]]:
    head, body = read_http_response(sock)
    return int(head.split()[1]), json.loads(body)


def test_an_analyst_s_requests_in_flight_are_bounded(tmp_path: Path) -> None:
    np.save(tmp_path / "vec.npy", np.arange(8))
    config = write_config(tmp_path, {"vec": {"data": "vec.npy", "epsilon": 100.0}},
                          ledger="ledger.sqlite", max_concurrent_per_analyst=2,
                          response_floor_ms={"free": 0, "charged": 1000})
    run_admin(config, "init")
    ann = run_admin(config, "add-analyst", "ann", "--dataset", "vec")
    bob = run_admin(config, "add-analyst", "bob", "--dataset", "vec")
    server = ServerProcess(config).start()
    opened: list[socket.socket] = []
    try:
        url = server.url
        sid = http("POST", f"{url}/v1/datasets/vec/sessions", b"{}", ann)[1]["session"]
        budget = f"{url}/v1/datasets/vec/budget"

        def hold(request_id: str) -> tuple[socket.socket, bytes]:
            """A request of ann's whose body is still on its way (5 bytes sent)."""
            body = _body(request_id)
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            opened.append(sock)
            sock.sendall(
                f"POST /v1/sessions/{sid} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ann}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body[:5]
            )
            return sock, body

        held = [hold(f"held-{i}") for i in range(2)]
        # Both hold a slot once ann's free budget read is refused 429. Under
        # load the server may see a probe before a held request and refuse the
        # held one (it answers before its body arrives): that one is replaced.
        for attempt in range(200):
            if http("GET", budget, token=ann)[0] == 429:
                break
            for i, (sock, _) in enumerate(held):
                if select.select([sock], [], [], 0.05)[0]:  # answered early: refused
                    assert _read_response(sock)[0] == 429
                    held[i] = hold(f"held-{i}-{attempt}")
        status, doc = http("POST", f"{url}/v1/sessions/{sid}", _body("third"), ann)
        assert status == 429 and doc["error"]["type"] == "TooManyConcurrentRequests", doc
        assert "max_concurrent_per_analyst" in doc["error"]["message"]
        bob_x = ektelo.connect(url, bob).dataset("vec")  # another analyst is served
        bob_x.laplace(Identity(8), eps=EPS)
        for sock, body in held:  # the bodies arrive: both answered
            sock.sendall(body[5:])
        for sock, _ in held:
            status, doc = _read_response(sock)
            sock.close()
            assert status == 200 and "response" in doc, doc
        status, doc = http("GET", f"{url}/v1/datasets/vec/budget", token=ann)
        assert status == 200
        assert Fraction(wire.decode(doc["response"]).spent) == 3 * Fraction(EPS)  # bob + 2

        # eight of ann's at once: each refused one charged nothing
        results: list[int] = []
        barrier = threading.Barrier(8)

        def one(i: int) -> None:
            barrier.wait()
            results.append(http("POST", f"{url}/v1/sessions/{sid}", _body(f"burst-{i}"), ann)[0])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(results) <= {200, 429} and results.count(429) >= 1, results
        granted = results.count(200)
        assert granted >= 2, results
        spent = wire.decode(http("GET", f"{url}/v1/datasets/vec/budget", token=bob)[1]
                            ["response"]).spent
        assert Fraction(spent) == (3 + granted) * Fraction(EPS)

        # the client library waits out a 429 and is served
        xs = [ektelo.connect(url, ann).dataset("vec") for _ in range(4)]
        answers: list[int] = []
        workers = [threading.Thread(target=lambda x=x: answers.append(
            len(x.laplace(Identity(8), eps=EPS).answers))) for x in xs]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert answers == [8, 8, 8, 8]
    finally:
        for sock in opened:  # closed on failure too (no unraisable socket warnings later)
            sock.close()
        server.stop()
