"""The kernel's work in a worker the server can lose (issue #36).

With `[server] worker_memory_mb = M` (and a durable ledger), each session's
kernel lives in a child process of its own, started from a clean fork
server: the child protects the dataset (its own connection to the ledger
store), then sets its resource limits — an address-space limit of its size
after loading plus M MiB (`RLIMIT_AS`), and before each request a CPU-time
limit of `worker_cpu_seconds` more (`RLIMIT_CPU`) — and answers the
session's port requests over a pipe. A kernel refusal (BudgetExceeded, a
ValueError or TypeError raised before any charge, EngineError) travels
back as itself. Anything else — a MemoryError past the limit, the CPU
limit's SIGXCPU, a crash — loses the worker, not the server: the request is
answered "charged, not answered" (the durable ledger keeps any charge it
made: the charge is committed before noise is drawn, and a retry under the
same request id is refused as charged-without-answer), the session is
dropped, and the client's next request opens a new session on a fresh
worker (`ektelo.client` reopens it and replays its handles).

Without a durable ledger the dataset has one kernel for all sessions, and
its budget lives in that kernel's memory: it stays in the server's process
(serving without a durable ledger is refused unless
``insecure_in_memory_ledger = true``).
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..kernel import BudgetExceeded, EngineError, RequestConflict

__all__ = ["KernelWorker", "WorkerLimits", "WorkerLost"]

# kernel refusals (raised before anything is charged) that travel back as themselves
_REFUSALS = (BudgetExceeded, RequestConflict, EngineError, ValueError, TypeError)
_START_SECONDS = 120.0  # protecting a large table may take a while


class WorkerLost(Exception):  # noqa: N818 - names what happened, like BudgetExceeded
    """The session's kernel worker died or failed while answering: any charge
    it made stands (the durable ledger), and no answer was released."""


@dataclass(frozen=True)
class WorkerLimits:
    """A worker's resource limits: address space beyond its size after
    loading (MiB) and CPU time per request (seconds)."""

    memory_mb: int
    cpu_seconds: int


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["ektelo.server.sessions"])
    return ctx


class KernelWorker:
    """A `Port` whose kernel lives in a child process (see the module)."""

    def __init__(
        self, opener: Callable[[dict[str, Any]], Any], spec: dict[str, Any],
        limits: WorkerLimits,
    ):  # fmt: skip
        """`opener(spec)` runs in the child and returns the protected root
        handle (a module-level function: it travels by name); `spec` is what
        it needs — the dataset's config, data and domain, the ledger store's
        location, the query limits, the analyst and the session id."""
        parent, child = _context().Pipe()
        self._conn: Connection = parent
        self._lock = threading.Lock()
        self._process = _context().Process(
            target=_serve, args=(child, opener, spec, limits), daemon=True
        )
        self._process.start()
        child.close()
        if not self._conn.poll(_START_SECONDS):
            self.close()
            raise WorkerLost("the kernel's worker did not start")
        status, value = self._receive()
        if status != "ready":
            self.close()
            if status == "raise":
                raise value
            raise WorkerLost("the kernel's worker could not open the dataset")
        self.root: int = int(value)

    def _receive(self) -> tuple[str, Any]:
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError) as err:
            raise WorkerLost("the kernel's worker was lost") from err
        return str(status), value

    def submit(self, request: Any) -> Any:
        """Send one port request to the worker; its response, its refusal
        re-raised, or `WorkerLost`."""
        return self.submit_with_receipt(request)[0]

    def submit_with_receipt(self, request: Any) -> tuple[Any, Any]:
        """One request, its response and its `Receipt` (one round trip, as
        `LocalPort.submit_with_receipt`)."""
        with self._lock:
            try:
                self._conn.send(request)
            except (OSError, ValueError) as err:
                raise WorkerLost("the kernel's worker was lost") from err
            status, value = self._receive()
        if status == "ok":
            response, receipt = value
            return response, receipt
        if status == "raise":
            raise value
        self.close()
        raise WorkerLost("the kernel's worker failed while answering")

    @property
    def alive(self) -> bool:
        return bool(self._process.is_alive())

    def close(self) -> None:
        """Stop the worker (its kernel and its handles go with it)."""
        self._conn.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join(timeout=5)


def _address_space() -> int:
    """This process's virtual memory size in bytes (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _serve(
    conn: Connection, opener: Callable[[dict[str, Any]], Any], spec: dict[str, Any],
    limits: WorkerLimits,
) -> None:  # fmt: skip
    """The worker's loop: protect, limit, answer until the pipe closes."""
    try:
        handle = opener(spec)
    except _REFUSALS as err:
        conn.send(("raise", err))
        return
    memory = _address_space() + limits.memory_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    conn.send(("ready", handle.node))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = spent + limits.cpu_seconds
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))  # SIGXCPU past it
        try:
            response = handle.port.submit_with_receipt(request)  # (response, Receipt)
        except _REFUSALS as err:
            _send(conn, ("raise", err))
            continue
        except BaseException:
            _send(conn, ("lost", None))
            os._exit(1)
        _send(conn, ("ok", response))


def _send(conn: Connection, message: tuple[str, Any]) -> None:
    """Send a message; a refusal that cannot be pickled travels as its type
    and text (a ValueError naming it)."""
    try:
        conn.send(message)
    except Exception:
        status, value = message
        if status != "raise":
            os._exit(1)
        conn.send(("raise", ValueError(f"{type(value).__name__}: {value}")))
