"""/livez and /readyz, and the ledger's database going away (issue #40).

A connection the database drops (a restart: here its backends terminated)
is reopened by the next request; while the database does not answer at all
(here dropped), /readyz and every request get 503 with Retry-After in the
documented JSON shape — never a bare 500 — and nothing is charged; /livez
still says the process serves."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.server.harness import ServerProcess, http, run_admin, write_config
from tests.store.conftest import _admin


def test_the_server_follows_its_ledger(tmp_path: Path, pg_url: str) -> None:
    np.save(tmp_path / "vec.npy", np.arange(8))
    config = write_config(tmp_path, {"vec": {"data": "vec.npy", "epsilon": 1.0}}, ledger=pg_url)
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "ann", "--dataset", "vec")
    head, _, name = pg_url.rpartition("/")
    server = ServerProcess(config).start()
    try:
        assert http("GET", f"{server.url}/livez")[0] == 200
        status, doc = http("GET", f"{server.url}/readyz")
        assert status == 200 and doc == {"ready": True, "ledger": "answers"}
        with _admin(f"{head}/postgres") as conn:  # type: ignore[attr-defined]
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))  # fmt: skip
        seen = [http("POST", f"{server.url}/v1/datasets/vec/sessions", b"{}", token)
                for _ in range(2)]  # the first may meet the dropped connection
        assert seen[-1][0] == 200, seen  # reconnected
        for status, doc in seen[:-1]:
            assert status in (200, 503) and isinstance(doc, dict), (status, doc)
        with _admin(f"{head}/postgres") as conn:  # type: ignore[attr-defined]
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')  # the ledger is gone
        status, doc = http("GET", f"{server.url}/readyz")
        assert status == 503 and doc["error"]["type"] == "LedgerUnavailable", doc
        assert http("GET", f"{server.url}/livez")[0] == 200
        status, doc = http("POST", f"{server.url}/v1/datasets/vec/sessions", b"{}", token)
        assert status == 503 and doc["error"]["type"] == "LedgerUnavailable", (status, doc)
    finally:
        server.stop()
