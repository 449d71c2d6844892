"""`ektelo-serve`: the HTTP application (Starlette, served by uvicorn).

Endpoints (JSON in the wire format of `ektelo.wire`; every /v1 call needs
`Authorization: Bearer <analyst token>`):

* ``GET  /v1/datasets`` — the datasets this analyst may open;
* ``POST /v1/datasets/{name}/sessions`` — a new session: ``{"session", "root", "kind"}``;
* ``POST /v1/sessions/{id}`` — one port request ``{"request": doc, "request_id": str}``
  → ``{"response": doc}``;
* ``GET  /v1/datasets/{name}/budget`` — the dataset's `BudgetReport`;
* ``GET  /status`` — the custodian's read-only HTML page (admin token: a header,
  or the HttpOnly cookie ``POST /status/sign-in`` sets for a form's token);
* ``GET  /v1/admin/datasets/{name}/audit`` — the dataset's audit entries (admin token);
* ``GET  /healthz``.

Errors are ``{"error": {"type", "message"}}`` with a 4xx status: 400 a
malformed document (bad JSON, an unknown class in a spec, a matrix over the
limits), 401 a missing, wrong or revoked token, 403 `BudgetExceeded`, 404 an
unknown dataset, session or handle, 408 a request whose headers or body
did not arrive in time (timeouts.py), 409 a request id reused for other
content, 413 a body over `max_request_bytes`, 422 a request the kernel
refuses (`ValueError`/`TypeError`), 429 more than `max_concurrent_per_analyst`
of an analyst's requests in flight. Nothing is charged for any of them:
every check but the kernel's own runs before the kernel sees the request,
and the kernel's refusals change nothing (its rule). 503 is the server's
own trouble, with Retry-After where a retry helps: `LedgerUnavailable` (the
ledger's database does not answer), `WorkerUnavailable` (a session could
not be opened on a kernel worker; nothing charged) and `ChargedNotAnswered`
(the kernel's worker was lost while answering: any charge stands, no answer
was released, the session is closed — worker.py).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import secrets
import sys
import threading
import time
import urllib.parse
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import ledger_store as store
from .. import wire
from ..errors import BudgetExceeded, HandleError, RequestConflict
from ..kernel import BudgetReport, QueryLimits
from ..port import requests as port
from .auth import Principal, TokenStore
from .config import ServerConfig, ensure_in_store, load_config
from .sessions import Dataset, ServerAuditEntry, ServerSession, load_data
from .status import render_sign_in, render_status
from .timing import ResponseFloors, release_after
from .worker import SessionGone, WorkerLimits, WorkerLost, WorkerPool

__all__ = ["Service", "create_app", "main"]

# Sessions hold a kernel each with a durable ledger (a copy of the data's
# codes): bound how many an analyst keeps, and drop idle ones.
MAX_SESSIONS_PER_ANALYST = 32
SESSION_IDLE_SECONDS = 3600.0
# the status page's sign-in: an HttpOnly cookie for 8 hours, at most 64 at once
STATUS_COOKIE = "ektelo_status"
SIGN_IN_SECONDS = 8 * 3600.0
MAX_SIGN_INS = 64


class ApiError(Exception):
    """An HTTP error with a JSON body."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message
        self.retry_after: int | None = None  # seconds, sent as Retry-After


class Service:
    """The server's state: config, tokens, datasets, sessions."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.tokens = TokenStore(config.state)
        self.limits = wire.Limits(
            max_array_elements=config.max_array_elements, max_matrix_dim=config.max_matrix_dim,
            max_matrix_nodes=config.max_matrix_nodes,
        )
        self.store = open_ledger(config.ledger)
        self.datasets: dict[str, Dataset] = {}
        # with a durable ledger, every session's kernel in a pool of workers (worker.py)
        self.workers: WorkerPool | None = None
        if self.store is not None and config.worker_memory_mb:
            self.workers = WorkerPool(WorkerLimits(
                config.worker_memory_mb, config.worker_cpu_seconds,
                config.worker_processes or default_workers(config.ledger)))
        for name, cfg in config.datasets.items():
            if self.store is not None:
                ensure_in_store(self.store, cfg)
            data, domain = load_data(cfg)
            limits = QueryLimits(config.max_query_rows, config.max_query_work)
            ds = self.datasets[name] = Dataset(cfg, data, domain, store=self.store, limits=limits,
                                               ledger=config.ledger, workers=self.workers,
                                               history=config.session_history)
            if self.store is not None:  # the ledger's audit log has every request (#40)
                ds.audit = deque(maxlen=config.session_history)
            if self.store is None:
                ds.root_for("custodian")  # the dataset's one kernel, made now
            ds.register_in_workers()
        if self.workers is not None:  # started and loaded while the server starts serving
            threading.Thread(target=self.workers.warm, daemon=True).start()
        self.sessions: OrderedDict[str, ServerSession] = OrderedDict()
        self.sessions_lock = threading.Lock()
        # the status page's sign-ins: cookie -> (admin token, expiry); the token is
        # checked again at every use, so revoking it signs its cookies out too
        self.sign_ins: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def sign_in(self, token: str) -> str | None:
        """A new status-page cookie for an admin `token` (None if it is not one)."""
        who = self.tokens.check(token)
        if who is None or who.role != "admin":
            return None
        cookie = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self.sessions_lock:
            for old in [c for c, (_, until) in self.sign_ins.items() if until < now]:
                del self.sign_ins[old]
            while len(self.sign_ins) >= MAX_SIGN_INS:
                self.sign_ins.popitem(last=False)
            self.sign_ins[cookie] = (token, now + SIGN_IN_SECONDS)
        return cookie

    def sign_out(self, cookie: str) -> None:
        with self.sessions_lock:
            self.sign_ins.pop(cookie, None)

    def cookie_token(self, cookie: str) -> str:
        with self.sessions_lock:
            token, until = self.sign_ins.get(cookie, ("", 0.0))
        return token if until > time.monotonic() else ""

    # -- authentication ------------------------------------------------------------
    def principal(self, request: Request, role: str = "analyst") -> Principal:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not token and role == "admin":  # the status page's sign-in cookie (never a URL)
            token = self.cookie_token(request.cookies.get(STATUS_COOKIE, ""))
        if not token:
            raise ApiError(401, "Unauthorized", "missing bearer token (Authorization: Bearer ...)")
        who = self.tokens.check(token)
        if who is None:
            raise ApiError(401, "Unauthorized", "invalid, expired or revoked token")
        if who.role != role:
            raise ApiError(401, "Unauthorized", f"this endpoint needs an {role} token")
        return who

    def dataset(self, who: Principal, name: str) -> Dataset:
        ds = self.datasets.get(name)
        if ds is None or not self.tokens.may_open(who.name, name):
            raise ApiError(404, "UnknownDataset", f"no dataset {name!r} for analyst {who.name!r}")
        return ds

    def budget(self, ds: Dataset) -> BudgetReport:
        """The dataset's budget: the durable ledger's record, or the shared kernel's."""
        if self.store is not None:
            r = self.store.dataset(ds.name)
            return BudgetReport(float(r.total), float(r.spent), float(r.remaining), r.unit, r.delta)
        kernel_port, _, _ = ds.root_for("budget")
        value: BudgetReport = kernel_port.submit(port.GetBudget())
        return value

    # -- sessions ------------------------------------------------------------------
    def open_session(self, who: Principal, ds: Dataset) -> ServerSession:
        try:
            session = ServerSession.open(who.name, ds)
        except WorkerLost as err:  # nothing is charged by opening a session
            error = ApiError(503, "WorkerUnavailable", f"{err}; retry (nothing was charged)")
            error.retry_after = 1
            raise error from err
        with self.sessions_lock:
            now = time.monotonic()
            for sid in [k for k, s in self.sessions.items()
                        if now - s.last_used > SESSION_IDLE_SECONDS]:
                self.sessions.pop(sid).close()
            mine = [s for s in self.sessions.values() if s.analyst == who.name]
            if len(mine) >= MAX_SESSIONS_PER_ANALYST:
                oldest = min(mine, key=lambda s: s.last_used)
                self.sessions.pop(oldest.id).close()
            self.sessions[session.id] = session
        return session

    def session(self, who: Principal, sid: str) -> ServerSession:
        with self.sessions_lock:
            s = self.sessions.get(sid)
        if s is None or s.analyst != who.name:
            raise ApiError(404, "UnknownSession", "unknown or expired session; open a new one")
        s.last_used = time.monotonic()
        return s

    def run(self, session: ServerSession, body: bytes, charged: list[bool] | None = None) -> bytes:
        """Decode, check and run one request; audit it; encode the response.
        `charged` receives the request's public class (whether it is
        Private→Public) as soon as it is decoded (for the release time)."""
        try:
            doc = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
        except (ValueError, RecursionError) as err:
            raise ApiError(400, "MalformedRequest", f"malformed JSON: {err}") from err
        if not isinstance(doc, dict) or set(doc) - {"request", "request_id"} or (
            "request" not in doc
        ):
            raise ApiError(
                400, "MalformedRequest", "the body is {'request': <wire doc>, 'request_id': str}"
            )
        request_id = doc.get("request_id")
        if request_id is not None and (
            not isinstance(request_id, str) or not 0 < len(request_id) <= 200
            or not request_id.isprintable()
        ):
            raise ApiError(400, "MalformedRequest", "request_id must be 1-200 printable chars")
        try:
            request = wire.decode(doc["request"], self.limits)
        except wire.WireError as err:
            raise ApiError(400, "MalformedRequest", str(err)) from err
        except RecursionError as err:
            raise ApiError(400, "MalformedRequest", "the document nests too deeply") from err
        if type(request) not in wire.REQUESTS:
            kind = type(request).__name__
            raise ApiError(400, "MalformedRequest", f"not a kernel request: {kind}")
        digest = wire.request_digest(doc["request"])
        operation = type(request).__name__
        spends = type(request) in wire.PRIVATE_TO_PUBLIC
        if charged is not None:
            charged.append(spends)
        asked = _asked(request)

        def audit(charge: float | None, outcome: str, reason: str | None = None) -> None:
            session.dataset.audit.append(ServerAuditEntry(
                time.time(), session.analyst, session.dataset.name, operation, digest, charge,
                outcome, request_id, asked, reason,
            ))  # fmt: skip

        try:
            with session.lock:  # a session's ids and last charge are its requests' own
                response = session.submit(request, request_id)
                charge, replayed = session.last_charge, session.replayed
        except BudgetExceeded as err:
            reason = "quota" if "quota" in str(err) else "cap"  # the store's and kernel's words
            audit(None, "refused: BudgetExceeded", reason)
            raise ApiError(403, "BudgetExceeded", str(err)) from err
        except SessionGone as err:  # its worker was lost earlier: nothing was sent
            with self.sessions_lock:
                self.sessions.pop(session.id, None)
            raise ApiError(404, "UnknownSession", f"{err} (nothing was charged)") from err
        except WorkerLost as err:  # the worker is gone: so is the session (worker.py)
            with self.sessions_lock:
                self.sessions.pop(session.id, None)
            audit(None, "lost: charged, not answered")
            raise ApiError(
                503, "ChargedNotAnswered",
                "the kernel's worker was lost while answering: any charge made stands and no "
                "answer was released; the session is closed (open a new one)",
            ) from err
        except HandleError as err:
            raise ApiError(404, "ValueError", str(err)) from err
        except RequestConflict as err:  # the kernel ledger's (a ValueError)
            audit(None, "refused: RequestConflict", "conflict")
            raise ApiError(409, "ValueError", str(err)) from err
        except (ValueError, TypeError) as err:
            if spends:
                reason = "limit" if "nothing was spent" in str(err) and (
                    "at most" in str(err) or "limit" in str(err)) else "invalid"
                audit(None, f"refused: {type(err).__name__}",
                            reason)
            raise ApiError(422, wire.encode_error(err)["type"], str(err)) from err
        if spends:
            audit(charge, "replayed" if replayed else "granted")
        out: dict[str, Any] = {"response": wire.encode(response)}
        if session.dataset.cfg.insecure_research_seed:
            out["insecure"] = RESEARCH_SEED_WARNING
        return json.dumps(out, separators=(",", ":")).encode()


#: what every response about a dataset served with a research seed says (issue #36)
RESEARCH_SEED_WARNING = (
    "INSECURE: this dataset is served with a research seed (reproducible, predictable "
    "noise); its answers are not differentially private"
)


def _insecure(response: Response, ds: Dataset | None) -> Response:
    """Mark a response about a research-seeded dataset (header `Ektelo-Insecure`)."""
    if ds is not None and ds.cfg.insecure_research_seed:
        response.headers["Ektelo-Insecure"] = "research-seed"
    return response


def _asked(request: Any) -> float | None:
    """The budget a Private→Public request asks (its ε or ρ), for the audit."""
    for name in ("eps", "rho", "epsilon"):
        value = getattr(request, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


def _finite_float(text: str) -> float:
    """A JSON number as a float, refusing one that overflows to ±∞ (1e400):
    a 400 naming it, never an infinity reaching the digest or the kernel (#40)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range (not a finite double)")
    return value


def default_workers(ledger: str | None) -> int:
    """How many kernel workers a server runs unless configured: one on a
    SQLite ledger — SQLite has one writer at a time, and one process's
    writers share each commit (group commit) while two processes' contend
    for the file lock by polling (p99 at 32 clients ×3, measured:
    benchmarks/bench_server_load.py) — and on PostgreSQL as many as cores
    (2 to 8)."""
    if ledger is not None and ledger.startswith(("postgresql://", "postgres://")):
        return min(max(2, os.cpu_count() or 2), 8)
    return 1


def open_ledger(location: str | None) -> Any:
    """The durable ledger store at `location` (a SQLite path or a postgresql://
    URL, `ektelo.ledger_store`), or None for in-memory ledgers."""
    if location is None:
        return None
    return store.open_store(location)


# -- HTTP ------------------------------------------------------------------------------


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def _api_error(err: ApiError) -> JSONResponse:
    response = _error(err.status, err.kind, err.message)
    if err.retry_after is not None:
        response.headers["Retry-After"] = str(err.retry_after)
    if err.status == 408:  # the rest of a timed-out body is not read: close
        response.headers["Connection"] = "close"
    return response


async def _body(request: Request, limit: int, timeout: float) -> bytes:
    """The request's body, at most `limit` bytes, all of it within `timeout`
    seconds (a total: a slow drip never resets it). uvicorn's protocol
    (timeouts.py) enforces the same deadline; this one holds under any server."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "RequestTooLarge", f"the body exceeds {limit} bytes")
    chunks, size = [], 0
    try:
        with anyio.fail_after(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, "RequestTooLarge", f"the body exceeds {limit} bytes")
                chunks.append(chunk)
    except TimeoutError as err:
        raise ApiError(408, "BodyTimeout",
                       f"the request's body did not arrive within {timeout:g} s") from err
    except ClientDisconnect as err:  # the connection closed (or timed out) mid-body
        raise ApiError(408, "BodyTimeout", "the connection closed before the body arrived") \
            from err
    return b"".join(chunks)


class AnalystSlots:
    """At most `limit` requests in flight per analyst (#40): one analyst's
    burst cannot take every thread of the server. Counted on the event loop
    only (taken and given back there), so no lock is needed."""

    def __init__(self, limit: int):
        self.limit = limit
        self.busy: dict[str, int] = {}

    @contextlib.contextmanager
    def take(self, analyst: str) -> Iterator[None]:
        held = self.busy.get(analyst, 0)
        if held >= self.limit:
            err = ApiError(
                429, "TooManyConcurrentRequests",
                f"analyst {analyst!r} already has {held} requests in flight (the server's "
                f"max_concurrent_per_analyst); retry once one is answered — nothing was charged",
            )
            err.retry_after = 1
            raise err
        self.busy[analyst] = held + 1
        try:
            yield
        finally:
            left = self.busy[analyst] - 1
            if left:
                self.busy[analyst] = left
            else:
                del self.busy[analyst]  # an analyst not in flight costs no memory


class PadResponseTime:
    """ASGI middleware: no response starts before `floor_ms` after its request
    arrived, so response times say less about the work a request caused (the
    issue's timing option; it does not hide work that takes longer)."""

    def __init__(self, app: ASGIApp, floor_ms: float):
        self.app, self.floor = app, floor_ms / 1000.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.floor <= 0:
            await self.app(scope, receive, send)
            return
        start = time.monotonic()

        async def padded(message: Message) -> None:
            if message["type"] == "http.response.start":
                wait = self.floor - (time.monotonic() - start)
                if wait > 0:
                    await anyio.sleep(wait)
            await send(message)

        await self.app(scope, receive, padded)


def create_app(config: ServerConfig) -> ASGIApp:
    """The ASGI application for `config` (datasets loaded, tokens opened)."""
    service = Service(config)

    floors = ResponseFloors(**config.response_floor_ms)
    slots = AnalystSlots(config.max_concurrent_per_analyst)

    async def hold(start: float, charged: bool) -> None:
        """Wait until the release time of a response (timing.py): the class's
        floor after `start`, or the next point of its doubling grid."""
        elapsed = (time.monotonic() - start) * 1000.0
        wait = release_after(elapsed, floors.of(charged)) - elapsed
        if wait > 0:
            await anyio.sleep(wait / 1000.0)

    def handler(fn: Any) -> Any:
        async def run(request: Request) -> Response:
            start = time.monotonic()
            held = False  # a session request holds itself, by its class (submit)...
            try:
                result: Response = await fn(request)
                held = request.url.path.startswith("/v1/sessions/")
            except ApiError as err:  # ...unless refused before its body was read
                result = _api_error(err)
            except store.StoreError:  # an outage of the ledger's database (#40)
                result = _error(503, "LedgerUnavailable", "the ledger store does not answer; "
                                "retry later (a request charged before the failure stays "
                                "charged, its request id answers as such)")
                result.headers["Retry-After"] = "5"
            if request.url.path.startswith("/v1/") and not held:
                await hold(start, charged=False)
            return result

        return run

    @handler
    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def ready(request: Request) -> Response:
        """/readyz: the ledger answers a real round trip (a read of its
        datasets); 503 with Retry-After while it does not (#40). /livez and
        /healthz say only that the process serves."""
        if service.store is None:
            return JSONResponse({"ready": True, "ledger": "in memory"})
        try:
            await run_in_threadpool(service.store.datasets)
        except Exception:  # the store's own message may name its location: not shown
            response = _error(503, "LedgerUnavailable", "the ledger store does not answer")
            response.headers["Retry-After"] = "5"
            return response
        return JSONResponse({"ready": True, "ledger": "answers"})

    @handler
    async def list_datasets(request: Request) -> Response:
        who = await run_in_threadpool(service.principal, request)
        names = [n for n in service.datasets if service.tokens.may_open(who.name, n)]
        return JSONResponse({"datasets": names})

    @handler
    async def new_session(request: Request) -> Response:
        who = await run_in_threadpool(service.principal, request)
        ds = service.dataset(who, request.path_params["name"])
        with slots.take(who.name):
            session = await run_in_threadpool(service.open_session, who, ds)
        doc = {"session": session.id, "root": 0, "kind": ds.kind}
        if ds.cfg.insecure_research_seed:
            doc["insecure"] = RESEARCH_SEED_WARNING
        return _insecure(JSONResponse(doc), ds)

    @handler
    async def submit(request: Request) -> Response:
        # the token first (the body of an unknown client is never read), then a
        # slot among the analyst's requests in flight, then the body
        who = await run_in_threadpool(service.principal, request)
        with slots.take(who.name):
            body = await _body(request, config.max_request_bytes, config.body_timeout_s)
            start = time.monotonic()  # the request is all here: its release clock starts
            found: list[Dataset] = []
            charged: list[bool] = []

            def work() -> bytes:  # one thread hop: find the session, run
                session = service.session(who, request.path_params["sid"])
                found.append(session.dataset)
                return service.run(session, body, charged)

            result: Response
            try:
                out = await run_in_threadpool(work)
                result = Response(out, media_type="application/json")
            except ApiError as err:
                result = _api_error(err)
            await hold(start, charged=bool(charged and charged[0]))
        return _insecure(result, found[0] if found else None)

    @handler
    async def budget(request: Request) -> Response:
        who = await run_in_threadpool(service.principal, request)
        ds = service.dataset(who, request.path_params["name"])
        with slots.take(who.name):
            value = await run_in_threadpool(service.budget, ds)
        return _insecure(JSONResponse({"response": wire.encode(value)}), ds)

    def browser(request: Request) -> bool:
        return "text/html" in request.headers.get("accept", "")

    @handler
    async def status(request: Request) -> Response:
        try:
            await run_in_threadpool(service.principal, request, "admin")
        except ApiError as err:
            if not browser(request):
                raise
            return HTMLResponse(render_sign_in(), status_code=err.status)  # the form
        page = await run_in_threadpool(render_status, service)
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @handler
    async def sign_in(request: Request) -> Response:
        """POST the admin token in a form body; get an HttpOnly cookie and a
        redirect to /status (the token never travels in a URL)."""
        body = await _body(request, 4096, config.body_timeout_s)
        fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
        token = (fields.get("token") or [""])[0].strip()
        cookie = await run_in_threadpool(service.sign_in, token) if token else None
        if cookie is None:
            if browser(request):
                return HTMLResponse(render_sign_in("That is not an admin token."),
                                    status_code=401)
            raise ApiError(401, "Unauthorized", "invalid, expired or revoked admin token")
        response = RedirectResponse("/status", status_code=303)
        response.set_cookie(STATUS_COOKIE, cookie, max_age=int(SIGN_IN_SECONDS),
                            path="/status", httponly=True, samesite="lax",
                            secure=request.url.scheme == "https")
        return response

    @handler
    async def sign_out(request: Request) -> Response:
        service.sign_out(request.cookies.get(STATUS_COOKIE, ""))
        response = RedirectResponse("/status", status_code=303)
        response.delete_cookie(STATUS_COOKIE, path="/status")
        return response

    @handler
    async def audit(request: Request) -> Response:
        await run_in_threadpool(service.principal, request, "admin")
        ds = service.datasets.get(request.path_params["name"])
        if ds is None:
            raise ApiError(404, "UnknownDataset", "no such dataset")
        entries = [dataclasses.asdict(e) for e in list(ds.audit)]
        return JSONResponse({"entries": entries})

    async def http_error(request: Request, exc: Exception) -> Response:
        """Starlette's own refusals (an unknown path, a wrong method) in the
        documented JSON error shape, as every other error (#40)."""
        status = int(getattr(exc, "status_code", 500))
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(status, "HTTPError")
        return _error(status, kind, str(getattr(exc, "detail", "")) or kind)

    app = Starlette(
        exception_handlers={HTTPException: http_error},
        routes=[
            Route("/healthz", health),
            Route("/livez", health),
            Route("/readyz", ready),
            Route("/v1/datasets", list_datasets),
            Route("/v1/datasets/{name}/sessions", new_session, methods=["POST"]),
            Route("/v1/datasets/{name}/budget", budget),
            Route("/v1/sessions/{sid}", submit, methods=["POST"]),
            Route("/status", status),
            Route("/status/sign-in", sign_in, methods=["POST"]),
            Route("/status/sign-out", sign_out, methods=["POST"]),
            Route("/v1/admin/datasets/{name}/audit", audit),
        ]
    )
    app.state.service = service
    return PadResponseTime(app, config.min_response_ms)


def main(argv: list[str] | None = None) -> int:
    """`ektelo-serve --config FILE [--host H] [--port P]`."""
    parser = argparse.ArgumentParser(
        prog="ektelo-serve", description="Serve protected datasets over HTTP (docs/server.md)."
    )
    parser.add_argument("--config", required=True, help="the custodian's TOML configuration")
    parser.add_argument("--host", help="override [server] host")
    parser.add_argument("--port", type=int, help="override [server] port")
    args = parser.parse_args(argv)
    import uvicorn

    from .timeouts import guarded_protocol

    try:
        config = load_config(args.config)
        app = create_app(config)
    except (ValueError, TypeError, OSError, store.StoreError) as err:
        print(f"ektelo-serve: {err}", file=sys.stderr)
        return 2
    uvicorn.run(
        app,
        http=guarded_protocol(config.header_timeout_s, config.body_timeout_s),
        host=args.host or config.host,
        port=args.port or config.port,
        ssl_certfile=str(config.ssl_certfile) if config.ssl_certfile else None,
        ssl_keyfile=str(config.ssl_keyfile) if config.ssl_keyfile else None,
        log_level="warning",
        access_log=False,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
