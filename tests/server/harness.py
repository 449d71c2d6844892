"""Test harness for the server: a configuration directory, admin commands, and
`ektelo-serve` started as a real process on 127.0.0.1 at a free port."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the server tests need the ektelo[server] extra")
pytest.importorskip("uvicorn", reason="the server tests need the ektelo[server] extra")

from ektelo.server import admin

DOMAIN = {"a": 4, "b": {"values": ["x", "y", "z"]}, "c": 5}


def table_rows(n: int = 300, seed: int = 0) -> str:
    """A small CSV over DOMAIN (public test data made here)."""
    rng = np.random.default_rng(seed)
    lines = ["a,b,c"]
    for _ in range(n):
        lines.append(f"{rng.integers(4)},{'xyz'[rng.integers(3)]},{rng.integers(5)}")
    return "\n".join(lines) + "\n"


def vector(n: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50, size=n)


def write_config(
    directory: Path, datasets: dict[str, dict[str, Any]], **server: Any
) -> Path:
    """A TOML configuration with `datasets` ({name: {data, domain, epsilon, ...}}).

    The tests' servers opt in to the insecure modes they use (issue #36): no
    `ledger` → ``insecure_in_memory_ledger = true``, a dataset with `seed` →
    ``insecure_research_seed = true``, unless the caller sets the key itself
    (the refusal tests set it to false). The response floors are 0 (off)
    unless given: only the timing tests pay for them."""
    if "ledger" not in server:
        server = {"insecure_in_memory_ledger": True, **server}
    # the release-time floors (server/timing.py) are off unless a test sets them:
    # the tests of the floors do, the others need no padding
    server = {"response_floor_ms": {"free": 0, "charged": 0}, **server}
    lines = ["[server]"] + [f"{k} = {_toml(v)}" for k, v in server.items()]
    for name, spec in datasets.items():
        if "seed" in spec:
            spec = {"insecure_research_seed": True, **spec}
        lines.append(f"[datasets.{name}]")
        lines += [f"{k} = {_toml(v)}" for k, v in spec.items()]
    path = directory / "server.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    """A TOML value: JSON's scalars, a dict as an inline table."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def run_admin(config: Path, *args: str) -> str:
    """`ektelo-admin --config CONFIG ARGS`, its stdout (raises on failure)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin.main(["--config", str(config), *args])
    if code != 0:
        raise RuntimeError(f"ektelo-admin {' '.join(args)} failed: {err.getvalue()}")
    return out.getvalue().strip()


def read_http_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """One whole HTTP/1.1 response read off a raw socket: (head, body), the
    body as many bytes as its content-length says."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(4096)
    return head, body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve_command() -> list[str]:
    script = Path(sys.executable).parent / "ektelo-serve"
    if script.exists() or shutil.which("ektelo-serve"):
        return [str(script) if script.exists() else "ektelo-serve"]
    return [sys.executable, "-m", "ektelo.server.app"]


class ServerProcess:
    """`ektelo-serve` as a child process; `start`, `kill` (SIGKILL), `stop`."""

    def __init__(self, config: Path, port: int | None = None):
        self.config = config
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = config.parent / "server.log"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [*serve_command(), "--config", str(self.config), "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ektelo-serve exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.05)
        raise RuntimeError(f"ektelo-serve did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (the crash tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def http(
    method: str, url: str, body: bytes | None = None, token: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """A raw HTTP request (status, parsed JSON or text) for abuse tests."""
    h = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, payload = r.status, r.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode(errors="replace")
