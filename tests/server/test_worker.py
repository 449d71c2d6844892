"""The kernel's work in a worker the server can lose (issue #36, server/worker.py).

With a durable ledger (by default), each session's kernel runs in a worker
process of a small pool, with an address-space limit and a CPU limit per
request. A query that passes every check before the charge
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
from ektelo.server.sessions import session_seed
from tests.server.harness import ServerProcess, http, run_admin, write_config


def test_a_worker_without_a_durable_ledger_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(8))
    config = write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 1.0}},
                          worker_memory_mb=64)
    with pytest.raises(ValueError, match="worker_memory_mb needs a durable ledger"):
        load_config(config)


def test_a_lost_worker_is_charged_not_answered_and_the_next_request_gets_a_fresh_one(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(8))
    config = write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 10.0, "seed": 5}},
                          ledger="ledger.sqlite", worker_memory_mb=64,
                          max_query_rows=1 << 30, max_query_work=1 << 40)
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "ann", "--dataset", "x")
    server = ServerProcess(config).start()
    try:
        x = ektelo.connect(server.url, token).dataset("x")
        remote = x.laplace(Total(8), eps=0.5).answers
        # the worker's kernel is the one a local `protect` makes with the
        # session's seed: its answers bit for bit
        local = ektelo.protect(np.arange(8), epsilon=10.0,
                               seed=session_seed(5, "x", x.port.session))
        assert remote.tobytes() == local.laplace(Total(8), eps=0.5).answers.tobytes()
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


# -- the pool itself (no HTTP): fake kernels that travel to the workers by name ---------


class _Port:
    """A stand-in kernel port: "echo" answers, "burn" spins on the CPU, "die"
    kills the process, "refuse" raises a kernel refusal."""

    def submit_with_receipt(self, request: str) -> tuple[object, object]:
        import os

        if request == "burn":
            while True:
                pass
        if request == "die":
            os._exit(3)
        if request == "refuse":
            raise ValueError("refused before any charge")
        return (request, os.getpid()), None


class _Handle:
    node = 0
    port = _Port()


def _load(payload: object) -> object:
    return payload


def _open(state: object, spec: dict[str, object]) -> _Handle:
    return _Handle()


def _pool(processes: int, cpu_seconds: int = 600) -> object:
    from ektelo.server.worker import WorkerLimits, WorkerPool

    return WorkerPool(WorkerLimits(memory_mb=256, cpu_seconds=cpu_seconds, processes=processes))


def _session(pool: object, sid: str) -> object:
    pool.register("d", _load, None)  # type: ignore[attr-defined]
    return pool.open("d", _open, {"session": sid})  # type: ignore[attr-defined]


def test_a_lost_worker_loses_only_its_own_sessions_and_new_ones_get_a_fresh_worker():
    from ektelo.server.worker import SessionGone, WorkerLost

    pool = _pool(processes=2)
    try:
        a, b = _session(pool, "a"), _session(pool, "b")  # one on each worker
        (_, pid_a), (_, pid_b) = a.submit("hello"), b.submit("hello")
        assert pid_a != pid_b
        with pytest.raises(ValueError, match="refused before any charge"):
            a.submit("refuse")  # a refusal travels back; the worker stays
        assert a.submit("again") == ("again", pid_a)
        with pytest.raises(WorkerLost):
            a.submit("die")  # in flight when the worker died: charged, not answered
        with pytest.raises(SessionGone):
            a.submit("later")  # sent after: nothing charged, the session is gone
        assert b.submit("still") == ("still", pid_b)  # the other worker's session lives on
        c = _session(pool, "c")
        (_, pid_c) = c.submit("fresh")
        assert pid_c not in (pid_a, pid_b) and sorted(pool.processes) == sorted([pid_b, pid_c])
    finally:
        pool.close()


def test_a_request_past_its_cpu_loses_the_worker():
    from ektelo.server.worker import WorkerLost

    pool = _pool(processes=1, cpu_seconds=1)
    try:
        a, b = _session(pool, "a"), _session(pool, "b")
        assert a.submit("x")[0] == "x"
        with pytest.raises(WorkerLost):
            a.submit("burn")  # a pure-Python loop: the watchdog ends it after 1 s of CPU
        assert not b.alive  # its worker's other sessions go with it
        assert _session(pool, "c").submit("y")[0] == "y"  # the next gets a fresh worker
    finally:
        pool.close()
