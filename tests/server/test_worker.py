"""The kernel's work in a worker the server can lose (issue #36, server/worker.py).

With `worker_memory_mb`, each session's kernel runs in a child process with
an address-space limit. A query that passes every check before the charge
but needs more memory than the worker has (here the server's query limits
are raised on purpose) loses the worker, not the server: the client is
told "charged, not answered" (HTTP 503), the charge stands in the durable
ledger, and the client's next request gets a fresh worker."""

from __future__ import annotations

import numpy as np
import pytest

import ektelo
from ektelo.client import ServerError
from ektelo.matrix import Identity, Kronecker, Ones, Total, VStack, Weighted
from ektelo.server.config import load_config
from tests.server.harness import ServerProcess, http, run_admin, write_config


def test_a_worker_without_a_durable_ledger_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(8))
    config = write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 1.0}},
                          worker_memory_mb=64)
    with pytest.raises(ValueError, match="worker_memory_mb needs a durable ledger"):
        load_config(config)


def test_a_lost_worker_is_charged_not_answered_and_the_next_request_gets_a_fresh_one(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(8))
    config = write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 10.0}},
                          ledger="ledger.sqlite", worker_memory_mb=64,
                          max_query_rows=1 << 30, max_query_work=1 << 40)
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "ann", "--dataset", "x")
    server = ServerProcess(config).start()
    try:
        x = ektelo.connect(server.url, token).dataset("x")
        assert x.laplace(Total(8), eps=0.5).answers.shape == (1,)
        # 512³ = 1.3·10⁸ rows (1 GiB of answers): within the raised query limits,
        # beyond the worker's 64 MiB of headroom
        factor = VStack([Identity(2), Weighted(Ones(510, 2), 0.0)])
        with pytest.raises(ServerError) as err:
            x.laplace(Kronecker([factor] * 3), eps=0.5)
        assert err.value.status == 503 and err.value.kind == "ChargedNotAnswered"
        assert "any charge made stands" in err.value.message
        assert x.budget.spent == pytest.approx(1.0)  # the lost request's charge stands
        assert http("GET", f"{server.url}/healthz")[0] == 200  # the server lives on
        # the same handle: the session is gone, the client reopens it on a new worker
        assert x.laplace(Total(8), eps=0.25).answers.shape == (1,)
        assert x.budget.spent == pytest.approx(1.25)
        y = ektelo.connect(server.url, token).dataset("x")
        assert y.laplace(Identity(8), eps=0.25).answers.shape == (8,)
    finally:
        server.stop()
