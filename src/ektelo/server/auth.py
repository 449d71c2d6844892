"""Bearer tokens for analysts and custodians (issue #26): issued, checked, revoked.

A token is `ekt_<id>_<secret>`: the id finds its row, the secret is 32 random
bytes from `secrets`. The server stores only HMAC-SHA256(key, token) with a
key kept in the state directory (`hmac.key`, mode 0600), so a copy of the
token database alone does not let anyone authenticate, and compares digests
with `hmac.compare_digest` (constant time). An unknown id is checked against
a dummy digest, so an unknown and a wrong token take the same work.

Rows live in SQLite (`auth.sqlite` in the state directory), read on every
request, so `ektelo-admin revoke-token` takes effect at once on a running
server. Roles: "analyst" (may use the datasets it is registered for) and
"admin" (the status page). A token may carry an expiry time (`expires_in`
seconds at issue); an expired token is refused like a revoked one. Quotas
are the ledger's (`kernel.store`); the
registration here records which datasets an analyst may open.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Principal", "TokenStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('analyst', 'admin')),
    digest TEXT NOT NULL,
    created REAL NOT NULL,
    revoked REAL,
    expires REAL
);
CREATE TABLE IF NOT EXISTS grants (
    analyst TEXT NOT NULL,
    dataset TEXT NOT NULL,
    quota REAL,
    PRIMARY KEY (analyst, dataset)
);
"""


@dataclass(frozen=True)
class Principal:
    """Who a valid token belongs to."""

    name: str
    role: str
    token_id: str


class TokenStore:
    """The token database and its HMAC key in a state directory."""

    def __init__(self, state: str | Path):
        self.state = Path(state)
        self.state.mkdir(parents=True, exist_ok=True)
        key_path = self.state / "hmac.key"
        if not key_path.exists():
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        self._key = key_path.read_bytes()
        self._db = self.state / "auth.sqlite"
        self._con: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        with self._connect() as con:
            con.executescript(_SCHEMA)
            columns = {row[1] for row in con.execute("PRAGMA table_info(tokens)")}
            if "expires" not in columns:  # a database from before token expiry
                con.execute("ALTER TABLE tokens ADD COLUMN expires REAL")

    def _connect(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """The store's one connection, one user at a time (autocommit: every
        read sees the latest rows, so a revocation by `ektelo-admin` counts
        on the next request)."""
        if self._con is None:
            self._con = sqlite3.connect(
                self._db, timeout=30, isolation_level=None, check_same_thread=False
            )
            self._con.execute("PRAGMA journal_mode=WAL")
        return self._locked(self._con)

    @contextlib.contextmanager
    def _locked(self, con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield con

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
            self._con = None

    def _digest(self, token: str) -> str:
        return hmac.new(self._key, token.encode(), hashlib.sha256).hexdigest()

    # -- issuing -----------------------------------------------------------------
    def issue(self, name: str, role: str = "analyst", expires_in: float | None = None) -> str:
        """A new token for `name` (returned once; only its digest is kept),
        valid for `expires_in` seconds (None: until revoked)."""
        if role not in ("analyst", "admin"):
            raise ValueError(f"role must be 'analyst' or 'admin', got {role!r}")
        if expires_in is not None and not (
            isinstance(expires_in, (int, float)) and math.isfinite(expires_in) and expires_in > 0
        ):
            raise ValueError(f"a token's lifetime must be a positive number, got {expires_in!r}")
        token_id = secrets.token_hex(8)
        token = f"ekt_{token_id}_{secrets.token_urlsafe(32)}"
        now = time.time()
        expires = None if expires_in is None else now + expires_in
        with self._connect() as con:
            con.execute(
                "INSERT INTO tokens (token_id, principal, role, digest, created, revoked, "
                "expires) VALUES (?, ?, ?, ?, ?, NULL, ?)",
                (token_id, name, role, self._digest(token), now, expires),
            )
        return token

    def revoke(self, name: str, role: str = "analyst") -> int:
        """Revoke every live token of `name`; returns how many."""
        with self._connect() as con:
            cur = con.execute(
                "UPDATE tokens SET revoked = ? WHERE principal = ? AND role = ? "
                "AND revoked IS NULL",
                (time.time(), name, role),
            )
            return cur.rowcount

    def rotate(self, name: str, role: str = "analyst", expires_in: float | None = None) -> str:
        """Revoke `name`'s tokens and issue a new one."""
        self.revoke(name, role)
        return self.issue(name, role, expires_in)

    def grant(self, analyst: str, dataset: str, quota: float | None) -> None:
        """Let `analyst` open `dataset` (the quota is recorded for the status page)."""
        with self._connect() as con:
            con.execute(
                "INSERT INTO grants VALUES (?, ?, ?) ON CONFLICT (analyst, dataset) "
                "DO UPDATE SET quota = excluded.quota",
                (analyst, dataset, quota),
            )

    # -- checking ----------------------------------------------------------------
    def check(self, token: str) -> Principal | None:
        """The principal of a live token, or None (wrong, unknown or revoked)."""
        parts = token.split("_") if token.startswith("ekt_") else []
        token_id = parts[1] if len(parts) >= 3 else ""
        with self._connect() as con:
            row = con.execute(
                "SELECT principal, role, digest, revoked, expires FROM tokens "
                "WHERE token_id = ?",
                (token_id,),
            ).fetchone()
        expected = row[2] if row else self._digest("unknown token")
        ok = hmac.compare_digest(expected, self._digest(token))
        if not ok or row is None or row[3] is not None:
            return None
        if row[4] is not None and time.time() >= row[4]:  # expired
            return None
        return Principal(row[0], row[1], token_id)

    def may_open(self, analyst: str, dataset: str) -> bool:
        with self._connect() as con:
            row = con.execute(
                "SELECT 1 FROM grants WHERE analyst = ? AND dataset = ?", (analyst, dataset)
            ).fetchone()
        return row is not None

    def grants(self) -> list[tuple[str, str, float | None]]:
        """(analyst, dataset, quota) for every registration."""
        with self._connect() as con:
            return [
                (str(a), str(d), None if q is None else float(q))
                for a, d, q in con.execute(
                    "SELECT analyst, dataset, quota FROM grants ORDER BY dataset, analyst"
                )
            ]
