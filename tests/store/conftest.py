"""Fixtures for the ledger-store tests: a real PostgreSQL, or a loud skip.

`pg_server` is `EKTELO_PG_URL` when set, else a throwaway cluster started for
the test session (tests/store/pgcluster.py: Debian's PostgreSQL binaries, as
the `postgres` user, in a folder on /dev/shm when there is one) and stopped
at the end. When neither works the PostgreSQL tests are skipped with the
reason in capitals — and with `EKTELO_REQUIRE_COMPONENTS=1` (CI) they fail
instead. Each test gets its own database (`pg_url`); `store_url` runs a test
on both backends.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store import pgcluster

REQUIRED = os.environ.get("EKTELO_REQUIRE_COMPONENTS") == "1"
SHM = Path("/dev/shm")


def unavailable(reason: str) -> None:
    message = f"POSTGRESQL LEDGER TESTS NOT RUN: {reason}"
    if REQUIRED:
        pytest.fail(message + " (EKTELO_REQUIRE_COMPONENTS=1: a missing component fails)",
                    pytrace=False)  # fmt: skip
    pytest.skip(message)


def fast_folder() -> str | None:
    """A folder on tmpfs when there is one: commits there cost no disk flush,
    so the load and crash tests stay fast (the durability settings are the
    production ones; tests/store/test_units.py checks them)."""
    return str(SHM) if SHM.is_dir() and os.access(SHM, os.W_OK) else None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    try:
        import psycopg  # noqa: F401 - the driver the store needs
    except ImportError:
        unavailable("psycopg is not installed (pip install 'ektelo[postgres]')")
    url = os.environ.get("EKTELO_PG_URL")
    if url:
        yield url
        return
    try:
        url, folder = pgcluster.start(tempfile.mkdtemp(prefix="ektelo-pg-", dir=fast_folder()))
    except (pgcluster.PgUnavailable, OSError) as err:
        unavailable(str(err))
    try:
        yield url
    finally:
        pgcluster.stop(folder)


def _admin(url: str) -> object:
    import psycopg

    return psycopg.connect(url, autocommit=True)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    name = f"ektelo_test_{uuid.uuid4().hex[:12]}"
    head, _, _ = pg_server.rpartition("/")
    with _admin(pg_server) as conn:  # type: ignore[attr-defined]
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{head}/{name}"
    finally:
        with _admin(pg_server) as conn:  # type: ignore[attr-defined]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ledger location on each backend: a SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def fast_sqlite() -> Iterator[str]:
    """A SQLite ledger path on tmpfs if available (load and crash tests)."""
    folder = tempfile.mkdtemp(prefix="ektelo-ledger-", dir=fast_folder())
    try:
        yield str(Path(folder) / "ledger.db")
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
