"""Fixtures: one real `ektelo-serve` process shared by the server tests, with
small datasets made here and tokens issued by `ektelo-admin`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.server.harness import (
    DOMAIN,
    ServerProcess,
    run_admin,
    table_rows,
    vector,
    write_config,
)

# the ledger store's fixtures: a throwaway PostgreSQL cluster (or a loud skip),
# a fresh database per test, and SQLite ledgers on tmpfs
from tests.store.conftest import fast_sqlite, pg_server, pg_url  # noqa: F401


@dataclass
class Served:
    server: ServerProcess
    config: Path
    admin: str
    alice: str  # vec, tab, capped
    bob: str  # vec only

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    d = tmp_path_factory.mktemp("server")
    np.save(d / "vec.npy", vector(64))
    (d / "tab.csv").write_text(table_rows(300))
    import json

    (d / "tab-domain.json").write_text(json.dumps(DOMAIN))
    config = write_config(
        d,
        {
            "vec": {"data": "vec.npy", "epsilon": 1000.0, "seed": 11},
            "tab": {"data": "tab.csv", "domain": "tab-domain.json", "epsilon": 1000.0,
                    "seed": 11},
            "capped": {"data": "vec.npy", "epsilon": 1.0, "seed": 11},
            "zcdp": {"data": "vec.npy", "rho": 10.0, "seed": 11},
        },
        max_request_bytes=1 << 20,
        max_array_elements=1 << 16,
        max_matrix_dim=1 << 16,
    )
    admin = run_admin(config, "init")
    first = run_admin(config, "add-analyst", "alice", "--dataset", "vec", "--quota", "500")
    run_admin(config, "add-analyst", "alice", "--dataset", "tab")
    run_admin(config, "add-analyst", "alice", "--dataset", "capped")
    # one token per analyst (#40): each grant replaces alice's earlier token
    alice = run_admin(config, "add-analyst", "alice", "--dataset", "zcdp")
    assert first != alice
    bob = run_admin(config, "add-analyst", "bob", "--dataset", "vec")
    server = ServerProcess(config).start()
    try:
        yield Served(server, config, admin, alice, bob)
    finally:
        server.stop()
