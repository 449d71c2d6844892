"""Remote handles: `ektelo.connect(url, token).dataset(name)` (issue #26).

The client side of the kernel as a service. `connect` returns a `Connection`
to an `ektelo-serve` server; `Connection.dataset(name)` opens a session on a
dataset and returns the library's own `ProtectedTable`/`ProtectedVector`
whose port is a `RemotePort`, so every plan runs unchanged against a server.
This process holds no data and no kernel: a handle is a session-local id,
and every method sends one request of `ektelo.port.requests` in the wire
format of `ektelo.wire` (stdlib HTTP only; no server dependency).

Retries: every Private→Public request carries a `request_id` (its own
field's, or a fresh one: a random prefix per port and a counter); on a
connection error the same request is sent again with the same id, so a
retry returns the stored answer and spends nothing twice. When the server
no longer knows the session (it restarted), the port opens a new one and
replays the session's Private transformations — they spend nothing and,
run in the same order, give the same ids — before retrying.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
import uuid
from typing import Any
from urllib.parse import quote, urlsplit

from . import wire
from .errors import ServerError
from .kernel import BudgetReport
from .port import ProtectedTable, ProtectedVector
from .port import requests as port

__all__ = ["Connection", "RemotePort", "ServerError", "connect"]


_RETRYABLE = (ConnectionError, http.client.HTTPException, TimeoutError, OSError)


class Connection:
    """An authenticated connection to one server (see `connect`)."""

    def __init__(self, url: str, token: str, *, timeout: float = 120.0, retry_for: float = 30.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        if not isinstance(token, str) or not token:
            raise TypeError("token must be a non-empty str")
        self.url = url.rstrip("/")
        self._scheme, self._host = parts.scheme, parts.hostname
        self._port_number = parts.port
        self._token = token
        self.timeout, self.retry_for = timeout, retry_for
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    # -- HTTP ------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (
                http.client.HTTPSConnection if self._scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = cls(self._host, self._port_number, timeout=self.timeout)
        return self._conn

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request, retried on connection errors and on HTTP 429 (too many
        of the analyst's requests in flight; nothing charged) for `retry_for`
        seconds (the caller makes retries safe: request ids, idempotent reads)."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"}
        deadline, pause = time.monotonic() + self.retry_for, 0.05
        while True:
            try:
                with self._lock:
                    conn = self._connection()
                    conn.request(method, path, body=data, headers=headers)
                    response = conn.getresponse()
                    status, payload = response.status, response.read()
                    wait = response.getheader("Retry-After", "1")
                if status == 429 and time.monotonic() < deadline:
                    # the analyst's other requests fill their slots (#40): nothing was
                    # charged, so the same request is sent again once one is answered
                    time.sleep(min(float(wait) if wait.isdigit() else 1.0, 5.0))
                    continue
                break
            except _RETRYABLE:
                with self._lock:
                    if self._conn is not None:
                        self._conn.close()
                    self._conn = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        try:
            doc = json.loads(payload)
        except ValueError:
            text = payload[:200].decode(errors="replace")
            raise ServerError(status, "BadResponse", text) from None
        if status >= 400:
            err = doc.get("error", {}) if isinstance(doc, dict) else {}
            kernel_error = wire.decode_error(err)
            if kernel_error is not None:
                raise kernel_error
            raise ServerError(status, str(err.get("type")), str(err.get("message")))
        return doc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    # -- API ---------------------------------------------------------------------
    def datasets(self) -> list[str]:
        """The datasets this token may open."""
        names: list[str] = self.call("GET", "/v1/datasets")["datasets"]
        return names

    def budget(self, name: str) -> BudgetReport:
        """The dataset's total, spent and remaining budget."""
        doc = self.call("GET", f"/v1/datasets/{quote(name, safe='')}/budget")
        value: BudgetReport = wire.decode(doc["response"])
        return value

    def dataset(self, name: str) -> ProtectedTable | ProtectedVector:
        """A handle to the root of `name` in a new session."""
        remote = RemotePort(self, name)
        if remote.kind == "table":
            return ProtectedTable(remote, remote.root)
        return ProtectedVector(remote, remote.root)

    def session(self, name: str) -> Any:
        """An analyst session (`ektelo.session.Session.over`) on `name` in a
        new server session: named questions and ``.sql(...)`` run here,
        every measurement on the server through the same typed requests a
        local session sends."""
        from .session import AnalystSession

        table = self.dataset(name)
        if not isinstance(table, ProtectedTable):
            raise TypeError(f"dataset {name!r} is a vector: a session needs a table")
        return AnalystSession.over(table)

    def __del__(self) -> None:  # a dropped connection closes its socket
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Connection({self.url!r})"


REOPENS = 8  # sessions a request may reopen after server restarts before it gives up


class RemotePort:
    """A `Port` whose kernel is a server's: `submit` is one HTTP request."""

    def __init__(self, connection: Connection, dataset: str):
        self.connection, self.dataset = connection, dataset
        self._derivations: list[tuple[bytes, Any]] = []  # (request doc, response)
        # request ids: a random prefix per port and a counter, unique per analyst
        self._ids = itertools.count()
        self._prefix = uuid.uuid4().hex
        self._open()

    def _open(self) -> None:
        doc = self.connection.call(
            "POST", f"/v1/datasets/{quote(self.dataset, safe='')}/sessions", {}
        )
        self.session: str = doc["session"]
        self.root: int = int(doc["root"])
        self.kind: str = doc["kind"]

    def _reopen(self) -> None:
        """A new session with the old one's handles: replay its derivations."""
        self._open()
        for request_doc, expected in self._derivations:
            got = self._send(json.loads(request_doc), None)
            if got != expected:
                raise ConnectionError("the server restarted and the session's handles could "
                                      "not be restored; open the dataset again")

    def _send(self, request_doc: Any, request_id: str | None) -> Any:
        body = {"request": request_doc, "request_id": request_id}
        doc = self.connection.call("POST", f"/v1/sessions/{self.session}", body)
        return wire.decode(doc["response"], _CLIENT_LIMITS)

    def submit(self, request: Any) -> Any:
        """Send one port request; return its decoded response."""
        request_doc = wire.encode(request)
        spends = type(request) in wire.PRIVATE_TO_PUBLIC
        request_id = None
        if spends:  # the caller's own id if the request carries one
            request_id = getattr(request, "request_id", None) or (
                f"{self._prefix}-{next(self._ids)}"
            )
        # A restarted server knows no session: open a new one (replaying the
        # handles) and resend under the same request id — idempotent, so a
        # request the old server charged returns its stored answer. Restarts
        # may come in a row (a crash loop), hence several rounds.
        for attempt in range(REOPENS + 1):
            try:
                if attempt:
                    self._reopen()
                response = self._send(request_doc, request_id)
                break
            except ServerError as err:
                if err.kind != "UnknownSession" or attempt == REOPENS:
                    raise
        if isinstance(response, (port.NewSource, port.NewSources)):
            self._derivations.append((json.dumps(request_doc).encode(), response))
        return response

    def __repr__(self) -> str:
        return f"RemotePort({self.connection.url!r}, dataset={self.dataset!r})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a kernel's port cannot be pickled or copied")


# A client trusts its own server's answers (large estimates, full ledgers).
_CLIENT_LIMITS = wire.Limits(max_array_elements=1 << 34, max_matrix_dim=1 << 40, max_depth=256,
                             max_matrix_nodes=1 << 40)


def connect(url: str, token: str, **options: Any) -> Connection:
    """Connect to an `ektelo-serve` server with an analyst's bearer token."""
    return Connection(url, token, **options)
