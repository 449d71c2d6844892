"""The kernel's work in workers the server can lose (issue #36).

With a durable ledger (and `[server] worker_memory_mb = M`, on by default),
every session's kernel lives in one of a small pool of worker processes
(`worker_processes`; by default one on a SQLite ledger, whose writes one
process commits best, and as many as cores on PostgreSQL), never in the
server's own process. Each worker is started once from a
clean fork server, loads every dataset as it starts (on its own connection
to the ledger store, in the background of the server's start), and hosts the
kernels of many sessions: opening a session costs what protecting the
dataset costs in process, not a new interpreter.

A worker answers its sessions' requests on a few threads of its own and
keeps two limits: an address space of its size when the request arrives
plus M MiB (`RLIMIT_AS`, set again at each request), and `worker_cpu_seconds`
of CPU per request (a watchdog reads each request's thread CPU clock; the
process' `RLIMIT_CPU`, pushed forward by the watchdog, stops a computation
that holds the interpreter so long the watchdog cannot run).

A kernel refusal (BudgetExceeded, a ValueError or TypeError raised before
any charge, EngineError) travels back as itself. Anything else — a
MemoryError past the limit, a request past its CPU, SIGXCPU, a crash —
loses the worker, not the server: every request the worker had in flight is
answered "charged, not answered" (the durable ledger keeps any charge it
made: the charge is committed before noise is drawn, and a retry under the
same request id is refused as charged-without-answer), the worker's sessions
are dropped (a later request of one is told its session is unknown, which
`ektelo.client` answers by reopening it and replaying its handles), and new
sessions go to a fresh worker.

Without a durable ledger the dataset has one kernel for all sessions, and
its budget lives in that kernel's memory: it stays in the server's process
(serving without a durable ledger is refused unless
``insecure_in_memory_ledger = true``).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..errors import StoreError
from ..kernel import BudgetExceeded, EngineError, RequestConflict

__all__ = ["PooledKernel", "SessionGone", "WorkerLimits", "WorkerLost", "WorkerPool"]

# kernel refusals (raised before anything is charged) that travel back as themselves,
# and the ledger store's outages (the server answers 503 LedgerUnavailable, as in process)
_REFUSALS = (BudgetExceeded, RequestConflict, EngineError, ValueError, TypeError, StoreError)
_START_SECONDS = 120.0  # starting a worker (and loading a large table) may take a while
# requests a worker runs at once: as many as the server's own thread pool sends
# (anyio's 40), so that a burst shares one group commit of the ledger instead of
# queueing here in rounds (which doubled p99 at 32 clients with 8)
_THREADS = 40
_TICK = 0.1  # seconds between the watchdog's looks at the requests in flight


class WorkerLost(Exception):  # noqa: N818 - names what happened, like BudgetExceeded
    """The session's kernel worker died or failed while answering: any charge
    it made stands (the durable ledger), and no answer was released."""


class SessionGone(Exception):  # noqa: N818
    """The session's worker was lost before this request was sent: nothing
    was charged; the session must be opened again."""


@dataclass(frozen=True)
class WorkerLimits:
    """A worker's resource limits: address space beyond its size when a
    request arrives (MiB), CPU time per request (seconds), and how many
    workers a server runs."""

    memory_mb: int
    cpu_seconds: int
    processes: int = 2


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["ektelo.server.sessions"])
    return ctx


class _Worker:
    """The server's end of one worker process: one pipe, one reader thread
    that hands each reply to the request waiting for it."""

    def __init__(self, limits: WorkerLimits):
        ctx = _context()
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        self.process = ctx.Process(target=_serve, args=(child, limits), daemon=True)
        self.process.start()
        child.close()
        self.sessions = 0  # sessions it hosts (placement: the fewest)
        self.dead = False
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards _waiting and dead
        self._waiting: dict[int, list[Any]] = {}  # tag -> [event, reply]
        self._tags = itertools.count()
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name="ektelo-worker-reader")
        self._reader.start()

    def release(self) -> None:
        """One session fewer on this worker."""
        with self._lock:
            self.sessions -= 1

    def _read(self) -> None:
        while True:
            try:
                tag, status, value = self.conn.recv()
            except (EOFError, OSError):
                break
            except Exception:  # a reply that does not unpickle: treat the worker as lost
                break
            with self._lock:
                slot = self._waiting.pop(tag, None)
            if slot is not None:
                slot[1] = (status, value)
                slot[0].set()
        with self._lock:
            self.dead = True
            waiting, self._waiting = self._waiting, {}
        for slot in waiting.values():
            slot[0].set()  # reply None: lost
        self.stop()

    def call(self, message: tuple[Any, ...], timeout: float | None = None) -> tuple[str, Any]:
        """Send `message` (kind, ...) and wait for its reply; `SessionGone`
        if the worker was already lost, `WorkerLost` if lost meanwhile."""
        slot: list[Any] = [threading.Event(), None]
        with self._lock:
            if self.dead:
                raise SessionGone("the session's worker was lost; open a new session")
            tag = next(self._tags)
            self._waiting[tag] = slot
        try:
            with self._send_lock:
                self.conn.send((tag, *message))
        except (OSError, ValueError) as err:
            with self._lock:
                self._waiting.pop(tag, None)
            raise WorkerLost("the kernel's worker was lost") from err
        if not slot[0].wait(timeout):
            self.stop()
            raise WorkerLost("the kernel's worker did not answer in time")
        if slot[1] is None:
            raise WorkerLost("the kernel's worker was lost")
        status, value = slot[1]
        return str(status), value

    def post(self, message: tuple[Any, ...]) -> None:
        """Send `message` without waiting (nothing is answered)."""
        with self._lock:
            if self.dead:
                return
        try:
            with self._send_lock:
                self.conn.send((-1, *message))
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        """Kill the process (its kernels go with it); the reader then fails
        every request in flight."""
        with self._lock:
            self.dead = True
        if self.process.is_alive():
            self.process.kill()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)
        self.process.join(timeout=5)
        self.conn.close()


class WorkerPool:
    """A server's kernel workers: at most `limits.processes` live ones,
    started when first needed; a dead one is replaced at the next open."""

    def __init__(self, limits: WorkerLimits):
        self.limits = limits
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._datasets: dict[str, tuple[Callable[[Any], Any], Any]] = {}

    def register(self, dataset: str, loader: Callable[[Any], Any], payload: Any) -> None:
        """A dataset every worker loads as soon as it starts: `loader(payload)`
        runs once per worker and returns the dataset's state there (a
        module-level function: it travels by name)."""
        with self._lock:
            self._datasets[dataset] = (loader, payload)

    def _start(self) -> _Worker:
        """A new worker, sent every registered dataset to load (under the lock)."""
        worker = _Worker(self.limits)
        for name, (loader, payload) in self._datasets.items():
            worker.post(("load", name, loader, payload))
        self._workers.append(worker)
        return worker

    def _place(self) -> _Worker:
        """A live worker for a new session: a new one while there are fewer
        than `processes`, else the one hosting the fewest sessions."""
        with self._lock:
            self._workers = [w for w in self._workers if not w.dead]
            if len(self._workers) < self.limits.processes:
                worker = self._start()
            else:
                worker = min(self._workers, key=lambda w: w.sessions)
            with worker._lock:
                worker.sessions += 1
            return worker

    def warm(self) -> None:
        """Start the workers now (a server's first sessions then open fast)."""
        with self._lock:
            self._workers = [w for w in self._workers if not w.dead]
            while len(self._workers) < self.limits.processes:
                self._start()

    def open(
        self, dataset: str, opener: Callable[[Any, dict[str, Any]], Any], spec: dict[str, Any],
    ) -> PooledKernel:  # fmt: skip
        """A session's kernel on a worker: `opener(state, spec)` (a
        module-level function) returns the session's protected root handle
        from the registered `dataset`'s state in the worker."""
        worker = self._place()
        key = spec["session"]
        try:
            status, value = worker.call(("open", key, dataset, opener, spec), _START_SECONDS)
        except SessionGone as err:
            worker.release()
            raise WorkerLost("the kernel's worker was lost while opening the session") from err
        except BaseException:
            worker.release()
            raise
        if status == "ready":
            return PooledKernel(worker, key, int(value))
        worker.release()
        if status == "raise":
            raise value
        raise WorkerLost("the kernel's worker could not open the dataset")

    def close(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()

    @property
    def processes(self) -> list[int]:
        """The live workers' process ids (the status page, the benchmarks)."""
        with self._lock:
            return [w.process.pid for w in self._workers if not w.dead and w.process.pid]


class PooledKernel:
    """A session's `Port`: its kernel lives in a pool worker (see the module)."""

    def __init__(self, worker: _Worker, key: str, root: int):
        self._worker, self._key, self.root = worker, key, root
        self._closed = False

    def submit(self, request: Any) -> Any:
        """Send one port request to the worker; its response, its refusal
        re-raised, `SessionGone` or `WorkerLost`."""
        return self.submit_with_receipt(request)[0]

    def submit_with_receipt(self, request: Any) -> tuple[Any, Any]:
        """One request, its response and its `Receipt` (one round trip, as
        `LocalPort.submit_with_receipt`)."""
        status, value = self._worker.call(("request", self._key, request))
        if status == "ok":
            response, receipt = value
            return response, receipt
        if status == "raise":
            raise value
        if status == "gone":
            raise SessionGone("the session's kernel is gone; open a new session")
        raise WorkerLost("the kernel's worker failed while answering")

    @property
    def alive(self) -> bool:
        return not self._worker.dead

    def close(self) -> None:
        """Drop the session's kernel from its worker."""
        if not self._closed:
            self._closed = True
            self._worker.release()
            self._worker.post(("close", self._key))


# -- the worker process ----------------------------------------------------------------


def _address_space() -> int:
    """This process's virtual memory size in bytes (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


class _Host:
    """A worker's state: its datasets, its sessions' kernels, the requests
    in flight (thread id -> the thread's CPU clock and its CPU at the start)."""

    def __init__(self, conn: Connection, limits: WorkerLimits):
        self.conn, self.limits = conn, limits
        self.send_lock = threading.Lock()
        self.lock = threading.Lock()
        self.reload_lock = threading.Lock()
        self.datasets: dict[str, Any] = {}  # name -> loaded state (or why it is not)
        self.sources: dict[str, tuple[Callable[[Any], Any], Any]] = {}  # name -> its load
        self.kernels: dict[str, Any] = {}  # session -> root handle
        self.flight: dict[int, tuple[int, float]] = {}
        self.jobs: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()

    # the watchdog ------------------------------------------------------------------
    def watch(self) -> None:
        """Lose the worker when a request has run past its CPU; keep the
        process' CPU limit a little ahead (SIGXCPU if this thread starves)."""
        cpu_limit = self.limits.cpu_seconds
        while True:
            hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
            soft = int(_cpu()) + cpu_limit + 2
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
            with self.lock:
                flight = list(self.flight.values())
            for clock, start in flight:
                try:
                    used = time.clock_gettime(clock) - start
                except OSError:  # the request's thread has just finished
                    continue
                if used > cpu_limit:
                    os._exit(1)  # the server answers "charged, not answered"
            time.sleep(_TICK)

    # requests ------------------------------------------------------------------------
    def send(self, tag: int, status: str, value: Any) -> None:
        """Send a reply; a refusal that cannot be pickled travels as its type
        and text (a ValueError naming it)."""
        with self.send_lock:
            try:
                self.conn.send((tag, status, value))
            except Exception:
                if status != "raise":
                    os._exit(1)
                self.conn.send((tag, "raise", ValueError(f"{type(value).__name__}: {value}")))

    def work(self) -> None:
        """One of the worker's threads: run jobs until the process ends."""
        ident = threading.get_ident()
        clock = time.pthread_getcpuclockid(ident)
        while True:
            tag, kind, *args = self.jobs.get()
            memory = _address_space() + self.limits.memory_mb * (1 << 20)
            resource.setrlimit(resource.RLIMIT_AS, (memory, resource.RLIM_INFINITY))
            with self.lock:
                self.flight[ident] = (clock, time.clock_gettime(clock))
            try:
                self.run(tag, kind, *args)
            except BaseException:  # a MemoryError, a bug: lose the worker, not the server
                os._exit(1)
            finally:
                with self.lock:
                    self.flight.pop(ident, None)

    def load(self, name: str, loader: Callable[[Any], Any], payload: Any) -> None:
        """Load a dataset (the main thread, before any of its sessions opens;
        without a memory limit, as the server loaded it)."""
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        self.sources[name] = (loader, payload)
        try:
            self.datasets[name] = loader(payload)
        except Exception as err:  # the next open tries again (the ledger may be back)
            self.datasets[name] = err

    def run(self, tag: int, kind: str, *args: Any) -> None:
        if kind == "open":
            key, name, opener, spec = args
            state = self.datasets.get(name, KeyError(name))
            if isinstance(state, BaseException) and name in self.sources:
                loader, payload = self.sources[name]
                with self.reload_lock:  # one try at a time
                    try:
                        state = self.datasets[name] = loader(payload)
                    except Exception as err:
                        state = err
            if isinstance(state, BaseException):
                self.send(tag, "raise", state if isinstance(state, _REFUSALS) else
                          ValueError(f"the worker could not load the dataset: {state}"))
                return
            try:
                handle = opener(state, spec)
            except _REFUSALS as err:
                self.send(tag, "raise", err)
                return
            with self.lock:
                self.kernels[key] = handle
            self.send(tag, "ready", handle.node)
        elif kind == "request":
            key, request = args
            with self.lock:
                handle = self.kernels.get(key)
            if handle is None:
                self.send(tag, "gone", None)
                return
            try:
                response = handle.port.submit_with_receipt(request)  # (response, Receipt)
            except _REFUSALS as err:
                self.send(tag, "raise", err)
                return
            self.send(tag, "ok", response)
        elif kind == "close":
            with self.lock:
                self.kernels.pop(args[0], None)


def _serve(conn: Connection, limits: WorkerLimits) -> None:
    """The worker's main thread: start its threads (before any limit: a
    thread's stack is address space), then hand each message to them."""
    host = _Host(conn, limits)
    for target in [host.watch] + [host.work] * _THREADS:
        threading.Thread(target=target, daemon=True).start()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if message[1] == "load":
            host.load(*message[2:])
        else:
            host.jobs.put(message)
