"""The server's datasets and per-client sessions over the kernel port.

A `Dataset` is one configured file protected once by `ektelo.protect` (the
in-memory ledger) or, with a durable ledger, per session by the store's
`protect(..., ledger=, dataset=, analyst=)`. A table lives where its
configured engine keeps it (issue #28, docs/engines.md): read into memory by
pandas, or left in its CSV/Parquet file or DuckDB database for DuckDB (each
kernel with its own connection and the configured memory limit) or Spark.
A `ServerSession` is one client's view of it: the client names source variables
by session-local ids (0 is the root), which the session maps to the kernel's
ids, so a client can neither use another session's handles nor learn how
many sources others derived; a foreign or unknown id is refused before the
kernel sees the request.

Every Private→Public request may carry a client `request_id`: a retry with
the same id and the same content returns the stored answer and spends
nothing; the same id with other content is refused (the kernel ledger's
`RequestConflict`, HTTP 409). The kernel's ledger keeps that promise (with a
durable ledger, across restarts); the session prefixes ids with the
analyst's name so that analysts never share one.

Each request leaves one audit entry (who, dataset, operation, the request's
digest, the charge, the outcome, the time) — never a data value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import wire
from ..domain import Domain
from ..errors import HandleError
from ..kernel import NodeState, QueryLimits
from ..port import ProtectedTable, ProtectedVector, protect
from ..port import requests as port
from ..port.local import LocalPort
from .config import DatasetConfig
from .worker import PooledKernel, WorkerPool

__all__ = [
    "AuditEntry", "Dataset", "HandleError", "ServerAuditEntry", "ServerSession", "Session",
    "session_seed",
]


@dataclass(frozen=True)
class ServerAuditEntry:
    """One request as the custodian sees it (no data values)."""

    time: float
    analyst: str
    dataset: str
    operation: str
    digest: str
    charge: float | None
    outcome: str  # "granted", "replayed", "refused: <type>"
    request_id: str | None = None  # the analyst's own id for the request
    amount: float | None = None  # the ε (or ρ) asked
    reason: str | None = None  # a refusal's: "cap", "quota", "limit" or "invalid"


def _local(kernel_port: port.Port) -> LocalPort:
    """The in-process port `protect` returned (a server runs its kernels here)."""
    if not isinstance(kernel_port, LocalPort):  # pragma: no cover - protect's own port
        raise TypeError(f"a server's kernel port is a LocalPort, got {type(kernel_port).__name__}")
    return kernel_port


def load_data(cfg: DatasetConfig) -> tuple[Any, Domain | None]:
    """The dataset's values and domain, read once at start-up.

    A vector (.npy) and a table on the memory engine are read here (a CSV
    with `pd.read_csv`, a Parquet file with `pd.read_parquet`); a table on
    DuckDB or Spark stays where it lies — its value is the source `protect`
    opens (the file's path or a ``duckdb://`` URL), and opening it once now
    checks it against the domain (one scan), so that a server never starts
    with a dataset it cannot serve."""
    if cfg.kind == "vector":
        return np.load(cfg.data, allow_pickle=False), None
    assert cfg.domain is not None  # config checked it
    domain = Domain.from_json(cfg.domain)
    if cfg.engine not in ("duckdb", "spark"):
        if cfg.data.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(cfg.data), domain
        return pd.read_csv(cfg.data), domain
    engine_for(cfg).open_source(cfg.source, domain)  # refuses bad data now, not per session
    return cfg.source, domain


def engine_for(cfg: DatasetConfig) -> Any:
    """A new engine object for one kernel of the dataset (a DuckDB engine
    holds one connection, which one kernel's requests use; a server's
    sessions may run on several threads)."""
    from ..engines import DuckDBEngine, MemoryEngine, SparkEngine

    if cfg.engine == "duckdb":
        return DuckDBEngine(**cfg.duckdb)
    if cfg.engine == "spark":
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession() or (
            SparkSession.builder.master("local[*]").appName("ektelo-serve")
            .config("spark.ui.showConsoleProgress", "false").getOrCreate()
        )
        return SparkEngine(session=session)
    return MemoryEngine()


def session_seed(seed: int | None, dataset: str, session: str) -> int | None:
    """A research dataset's seed for one session's kernel: SHA-256 of the
    configured seed, the dataset and the session id (issue #36: sessions of
    one seeded dataset used to repeat the same noise, which differencing
    removes). None stays None (secure noise)."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}/{dataset}/{session}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


_WORKER_STORES: dict[str, Any] = {}  # a worker's ledger connections, by location


def load_in_worker(payload: tuple[Any, ...]) -> Dataset:
    """A dataset in a worker (worker.py runs this once per worker and
    dataset): its config, data and domain, on the worker's own connection to
    the durable ledger (opened here, after the worker started: never shared
    with the server's process)."""
    from .. import ledger_store as store

    cfg, data, domain, ledger, query_limits, history = payload
    if ledger not in _WORKER_STORES:
        _WORKER_STORES[ledger] = store.open_store(ledger)
    return Dataset(cfg, data, domain, store=_WORKER_STORES[ledger],
                   limits=QueryLimits(*query_limits), history=history)


def open_in_worker(ds: Dataset, spec: dict[str, Any]) -> ProtectedTable | ProtectedVector:
    """A session's root handle in a worker: the dataset protected for the
    session's analyst (a kernel of its own, as in the server's process)."""
    return ds._protect(spec["analyst"], spec["session"])


@dataclass
class Dataset:
    """A configured dataset and its kernel (in-memory ledger) or store."""

    cfg: DatasetConfig
    data: Any
    domain: Domain | None
    store: Any = None
    limits: QueryLimits | None = None  # the largest query a kernel evaluates (config)
    ledger: str | None = None  # the durable ledger's location (for a worker's connection)
    workers: WorkerPool | None = None  # run each session's kernel in a worker (worker.py)
    history: int | None = None  # query records a kernel and a session keep in memory
    lock: threading.Lock = field(default_factory=threading.Lock)
    audit: deque[ServerAuditEntry] = field(default_factory=lambda: deque(maxlen=10_000))
    _root: ProtectedTable | ProtectedVector | None = None

    @property
    def name(self) -> str:
        return self.cfg.name

    def _protect(
        self, analyst: str | None, session: str | None = None
    ) -> ProtectedTable | ProtectedVector:
        extra: dict[str, Any] = {}
        if self.store is not None:
            extra = {"ledger": self.store, "dataset": self.name, "analyst": analyst}
        c = self.cfg
        if c.kind == "table":
            extra["engine"] = engine_for(c)
            if c.privacy_unit is not None:  # budgets per person (#37, docs/units.md)
                extra.update(privacy_unit=c.privacy_unit, max_rows_per_unit=c.max_rows_per_unit,
                             max_groups_per_unit=c.max_groups_per_unit,
                             max_rows_per_group=c.max_rows_per_group, group_by=c.group_by)
            if c.engine in ("duckdb", "spark"):
                # load_data refused any invalid value at start-up (one scan); "drop"
                # then removes nothing and opens the file without scanning it again
                # for every session (and keeps the codes valid should it change)
                extra["on_invalid"] = "drop"
        seed = c.seed if session is None else session_seed(c.seed, c.name, session)
        return protect(
            self.data, self.domain, epsilon=c.epsilon, delta=c.delta, rho=c.rho, seed=seed,
            query_limits=self.limits, history=self.history, **extra,
        )

    def root_for(
        self, analyst: str, session: str | None = None
    ) -> tuple[LocalPort | PooledKernel, int, bool]:
        """(port, root id, shared): one shared kernel without a store; with
        one, a kernel for `session` (its research seed derived from the
        session's id: no two sessions draw the same noise), in a worker of
        the pool if the server has one."""
        if self.store is not None and self.workers is not None and session is not None:
            kernel = self.workers.open(self.name, open_in_worker,
                                       {"analyst": analyst, "session": session})
            return kernel, kernel.root, False
        if self.store is not None:
            handle = self._protect(analyst, session)
            return _local(handle.port), handle.node, False
        with self.lock:  # one kernel per dataset: two would split its cap
            if self._root is None:
                self._root = self._protect(None)
            root = self._root
        return _local(root.port), root.node, True

    def register_in_workers(self) -> None:
        """Have every worker of the pool load this dataset as it starts."""
        if self.workers is not None:
            limits = self.limits or QueryLimits()
            payload = (self.cfg, self.data, self.domain, self.ledger,
                       (limits.max_rows, limits.max_work), self.history)
            self.workers.register(self.name, load_in_worker, payload)

    @property
    def kind(self) -> str:
        return self.cfg.kind

    @property
    def engine(self) -> str:
        """Where the rows live: "memory", "duckdb" or "spark" ("memory" for a vector)."""
        return self.cfg.engine or "memory"


@dataclass
class ServerSession:
    """One client's session on one dataset (its handle ids are its own).

    Each request is one kernel round trip (`LocalPort.submit_with_receipt`):
    its `Receipt` names the nodes it created, which join the session, and the
    record of its charge, which the session keeps — the last
    `dataset.history` of them (the durable ledger keeps every one: #40), so a
    session's memory does not grow with its measurements. Nothing per request
    copies the kernel's history or ledger, so a long session's requests cost
    the same at the ten-thousandth as at the first."""

    id: str
    analyst: str
    dataset: Dataset
    kernel: LocalPort | PooledKernel  # both answer submit_with_receipt in one round trip
    shared: bool
    nodes: list[int]  # session id -> kernel id
    records: deque[port.QueryRecord] = field(default_factory=deque)  # the latest, kernel ids
    recorded: int = 0  # records this session ever made (the first kept is recorded - len)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one request at a time
    last_used: float = field(default_factory=time.monotonic)
    last_charge: float | None = None  # the root charge of the last granted request
    replayed: bool = False  # the last request was a retry answered from storage
    ids: dict[int, int] = field(default_factory=dict)  # kernel id -> session id

    def __post_init__(self) -> None:
        self.ids.update((node, i) for i, node in enumerate(self.nodes))

    @classmethod
    def open(cls, analyst: str, dataset: Dataset) -> ServerSession:
        sid = secrets.token_urlsafe(18)
        kernel_port, root, shared = dataset.root_for(analyst, sid)
        return cls(sid, analyst, dataset, kernel_port, shared, [root],
                   deque(maxlen=dataset.history))

    def close(self) -> None:
        """Release the session's kernel if it is its own worker's."""
        close = getattr(self.kernel, "close", None)
        if close is not None:
            close()

    # -- ids -------------------------------------------------------------------
    def _kernel_id(self, source: Any) -> int:
        if isinstance(source, bool) or not isinstance(source, int):
            raise TypeError(f"a source variable is named by an int, got {type(source).__name__}")
        if not 0 <= source < len(self.nodes):
            raise HandleError(f"unknown source variable {source!r} in this session")
        return self.nodes[source]

    def _session_id(self, node: int) -> int:
        try:
            return self.ids[node]
        except KeyError:  # pragma: no cover - the kernel returns only our nodes
            raise HandleError("the kernel returned a source outside this session") from None

    # -- requests -------------------------------------------------------------------
    def submit(self, request: Any, request_id: str | None) -> Any:
        """Run one decoded request; returns the public response, session-relative."""
        kind = type(request)
        if kind is port.GetBudget:
            return self.kernel.submit(request)
        if kind is port.GetHistory:
            return self._history()
        if kind is port.GetLedger:
            return self._own_ledger()
        if not hasattr(request, "source"):
            raise TypeError(f"not a kernel request: {kind.__name__}")
        translated = dataclasses.replace(request, source=self._kernel_id(request.source))
        if kind in wire.PRIVATE_TO_PUBLIC:
            # the kernel's ledger keeps retries under one request id idempotent;
            # ids are the analyst's own (prefixed with the name): no two share one
            rid = None if request_id is None else f"{self.analyst}/{request_id}"
            translated = dataclasses.replace(translated, request_id=rid)
        response, receipt = self.kernel.submit_with_receipt(translated)
        # every node the request created (a split's partition variable too) joins
        # the session in creation order, so ids follow the kernel's own numbering
        for node in receipt.created:
            self.ids[node] = len(self.nodes)
            self.nodes.append(node)
        if receipt.record is not None:  # a Private→Public request: its charge
            self.records.extend(receipt.records)  # (an envelope's record first)
            self.recorded += len(receipt.records)
            self.replayed = receipt.record.replayed
            self.last_charge = receipt.charged_at_root
        if isinstance(response, port.NewSource):
            return port.NewSource(self._session_id(response.source))
        if isinstance(response, port.NewSources):
            return port.NewSources(tuple(self._session_id(s) for s in response.sources))
        if isinstance(response, port.SourceInfo):
            return dataclasses.replace(response, source=request.source)
        return response

    def _history(self) -> tuple[port.QueryRecord, ...]:
        """The session's latest records (all of them, up to `dataset.history`),
        indexed by their place among all the session's records."""
        first = self.recorded - len(self.records)
        return tuple(
            dataclasses.replace(
                r,
                index=first + i,
                node=self._session_id(r.node),
                increments=tuple(
                    (self._session_id(n), inc) for n, inc in r.increments if n in self.ids
                ),
            )
            for i, r in enumerate(self.records)
        )

    def _own_ledger(self) -> tuple[NodeState, ...]:
        snapshot: tuple[NodeState, ...] = self.kernel.submit(port.GetLedger())
        return tuple(
            dataclasses.replace(
                snapshot[node],
                node=i,
                parent=None if snapshot[node].parent is None
                else self._session_id(snapshot[node].parent),  # type: ignore[arg-type]
            )
            for i, node in enumerate(self.nodes)
        )


# the names these had before #35 (a "Session" is the analyst's; an "AuditEntry" the ledger's)
Session = ServerSession
AuditEntry = ServerAuditEntry
