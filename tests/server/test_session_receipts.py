"""A server session makes one kernel round trip per request and copies
nothing per request (#35): the kernel's `Receipt` says which nodes a request
created and what it charged, and the session keeps its own records.

In process (no server): a `ServerSession` over a `Dataset` as the server
builds it, with the kernel's port and the kernel's whole-state reads counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ektelo.kernel import Kernel
from ektelo.matrix import Identity, Partition, Prefix, Total
from ektelo.port import requests as port
from ektelo.server.config import DatasetConfig
from ektelo.server.sessions import Dataset, HandleError, ServerSession


class CountingPort:
    """The session's kernel port, counting round trips."""

    def __init__(self, inner: Any):
        self.inner, self.calls = inner, 0

    def submit(self, request: Any) -> Any:
        self.calls += 1
        return self.inner.submit(request)

    def submit_with_receipt(self, request: Any) -> Any:
        self.calls += 1
        return self.inner.submit_with_receipt(request)


@pytest.fixture
def whole_state_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts every read of the kernel's whole history or ledger."""
    reads = {"history": 0, "ledger": 0}
    history, ledger = Kernel.history, Kernel.ledger

    def counted_history(self: Kernel) -> Any:
        reads["history"] += 1
        return history.fget(self)  # type: ignore[attr-defined]

    def counted_ledger(self: Kernel) -> Any:
        reads["ledger"] += 1
        return ledger(self)

    monkeypatch.setattr(Kernel, "history", property(counted_history))
    monkeypatch.setattr(Kernel, "ledger", counted_ledger)
    return reads


def _dataset(n: int = 16) -> Dataset:
    cfg = DatasetConfig("v", Path("v.npy"), None, epsilon=1e6, seed=7)
    return Dataset(cfg, np.arange(n, dtype=float), None)


def _session(ds: Dataset, analyst: str = "alice") -> tuple[ServerSession, CountingPort]:
    session = ServerSession.open(analyst, ds)
    counting = CountingPort(session.kernel)
    session.kernel = counting  # type: ignore[assignment]
    return session, counting


def test_each_request_is_one_kernel_call_and_reads_no_whole_state(whole_state_reads):
    session, counting = _session(_dataset())
    requests = [
        port.Transform(0, Prefix(16)),  # -> 1
        port.VectorLaplace(1, Identity(16), 0.5, "a"),
        port.SplitVector(0, Partition(np.repeat([0, 1], 8), (16,))),  # -> partition var, 3, 4
        port.VectorLaplace(3, Total(8), 0.25),
        port.VectorLaplace(1, Identity(16), 0.5, "a"),  # a retry: replayed, no charge
        port.Describe(4),
    ]
    for request in requests:
        before = counting.calls
        session.submit(request, getattr(request, "request_id", None))
        assert counting.calls == before + 1, type(request).__name__
    assert whole_state_reads == {"history": 0, "ledger": 0}
    assert session.replayed and session.last_charge == 0.0


def test_ids_and_history_are_the_sessions_own_on_a_shared_kernel():
    ds = _dataset()
    alice, _ = _session(ds, "alice")
    bob, _ = _session(ds, "bob")
    assert bob.submit(port.Transform(0, Prefix(16)), None) == port.NewSource(1)
    assert alice.submit(port.Transform(0, Identity(16)), None) == port.NewSource(1)
    split = alice.submit(port.SplitVector(1, Partition(np.repeat([0, 1], 8), (16,))), None)
    # the split's partition variable joins the session before its children
    assert split == port.NewSources((3, 4))
    m = alice.submit(port.VectorLaplace(4, Total(8), 0.5), None)
    assert alice.last_charge == pytest.approx(0.5) and not alice.replayed
    bob.submit(port.VectorLaplace(1, Total(16), 0.25), None)
    assert bob.last_charge == pytest.approx(0.25 * 16)  # Prefix(16) is 16-stable

    history = alice.submit(port.GetHistory(), None)
    assert len(history) == 1 and history[0].index == 0 and history[0].node == 4
    assert [n for n, _ in history[0].increments] == [4, 2, 1, 0]  # child, partition var, ...
    assert history[0].noise_scale == m.noise.scale  # the record after the draw
    assert [r.node for r in bob.submit(port.GetHistory(), None)] == [1]

    ledger = alice.submit(port.GetLedger(), None)
    assert [s.node for s in ledger] == [0, 1, 2, 3, 4]
    assert [s.parent for s in ledger] == [None, 0, 1, 2, 2]
    with pytest.raises(HandleError):
        bob.submit(port.Transform(4, Identity(8)), None)  # alice's id 4 is not bob's
