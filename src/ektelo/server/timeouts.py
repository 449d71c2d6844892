"""Read timeouts on a request's headers and body (issue #40).

uvicorn closes an idle keep-alive connection (`timeout_keep_alive`) but
waits forever for a request that arrives a byte at a time: a handful of
slow-drip clients ("slowloris") hold connections, memory and — for a body —
a handler for as long as they like. `guarded_protocol(header_s, body_s)` is
uvicorn's h11 protocol with two deadlines:

* **headers**: from the connection's first moment (or a keep-alive
  connection's next byte) until the request's headers are complete;
* **body**: from the headers until the body's last byte (a total, not a
  per-chunk limit: a byte a second never resets it).

A request that misses its deadline is answered HTTP 408 with the documented
JSON error (``{"error": {"type": "HeaderTimeout" | "BodyTimeout", ...}}``)
if no response has started, and its connection is closed. The ASGI app
bounds its own body reads too (app.py `_body`), for servers other than this
one.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["guarded_protocol", "timeout_response"]


def timeout_response(kind: str, seconds: float) -> bytes:
    """The raw HTTP/1.1 408 a timed-out request gets (the connection closes)."""
    what = "headers" if kind == "HeaderTimeout" else "body"
    body = json.dumps({"error": {
        "type": kind,
        "message": f"the request's {what} did not arrive within {seconds:g} s",
    }}).encode()  # fmt: skip
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _Guarded(H11Protocol):
    """H11Protocol with header and body deadlines (class attributes set by
    `guarded_protocol`)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase = ""  # "HeaderTimeout" or "BodyTimeout" while a deadline runs

    def _arm(self, phase: str) -> None:
        self._disarm()
        seconds = self.header_timeout if phase == "HeaderTimeout" else self.body_timeout
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expired, phase, seconds)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._phase = None, ""

    def _follow(self) -> None:
        """Keep the deadline that matches what the client owes us now."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "BodyTimeout":
                self._arm("BodyTimeout")
        elif state is not h11.IDLE:  # the request is all here (or the connection is over)
            self._disarm()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm("HeaderTimeout")  # a connection that never sends a byte is cut too

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm("HeaderTimeout")  # a keep-alive connection's next request begins
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE:
            self._disarm()  # idle between requests: uvicorn's keep-alive timeout rules
        else:
            self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _expired(self, phase: str, seconds: float) -> None:
        self._deadline, self._phase = None, ""
        if self.transport.is_closing():
            return
        cycle = self.cycle  # for headers: the previous request's (or None)
        if phase == "HeaderTimeout":
            quiet = cycle is None or cycle.response_complete
        else:
            quiet = cycle is not None and not cycle.response_started
        if quiet:  # nothing else is being written on this connection: say why it closes
            self.transport.write(timeout_response(phase, seconds))
        if cycle is not None and phase == "BodyTimeout":
            cycle.disconnected = True  # a handler waiting for the body sees a disconnect
            cycle.message_event.set()
        self.transport.close()


def guarded_protocol(header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with these deadlines (seconds), for
    ``uvicorn.run(..., http=...)``."""
    return type("GuardedH11Protocol", (_Guarded,), {
        "header_timeout": float(header_timeout), "body_timeout": float(body_timeout),
    })  # fmt: skip
