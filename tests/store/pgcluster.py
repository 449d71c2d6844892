"""A throwaway PostgreSQL cluster for the ledger-store tests and developers.

Uses Debian's PostgreSQL server binaries (`/usr/lib/postgresql/<v>/bin`, or
`pg_ctl` on PATH). Run as root, the cluster runs as the `postgres` user
(`runuser`), in a temporary folder that user owns; the server listens on
127.0.0.1 at a free port, with its socket in that folder, `trust`
authentication for local connections only.

    python tests/store/pgcluster.py start [DIR]   # prints the URL
    python tests/store/pgcluster.py stop DIR

(`make pg` runs the first.) Tests use `start`/`stop` through the
`pg_url` fixture of tests/store/conftest.py.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["PgUnavailable", "start", "stop"]


class PgUnavailable(RuntimeError):  # noqa: N818 - says what the test needs
    """No PostgreSQL server could be started here (the reason is the message)."""


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise PgUnavailable("no PostgreSQL server binaries (pg_ctl) on this machine")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args  # a developer's own cluster, as themselves
    if shutil.which("runuser") is None:
        raise PgUnavailable("running as root without runuser: cannot start PostgreSQL")
    return ["runuser", "-u", "postgres", "--", *args]


def start(folder: str | None = None) -> tuple[str, str]:
    """Start a cluster in `folder` (a new temporary one by default) and return
    (url, folder). Raises PgUnavailable with the reason when it cannot."""
    bin_dir = _bin_dir()
    base = Path(folder or tempfile.mkdtemp(prefix="ektelo-pg-"))
    base.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        try:
            shutil.chown(base, "postgres", "postgres")
        except (LookupError, OSError) as err:
            raise PgUnavailable(f"cannot hand {base} to the postgres user: {err}") from err
    data, port = base / "data", _free_port()
    steps = [
        [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
         "-E", "UTF8", "--no-locale"],
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60",
         "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c max_connections=200",
         "start"],
    ]  # fmt: skip
    for args in steps:
        if args[-1] != "start" and data.exists():
            continue  # an existing cluster (make pg twice): just start it
        run = subprocess.run(
            _as_postgres(args), capture_output=True, text=True, timeout=120, check=False
        )
        if run.returncode != 0:
            raise PgUnavailable(f"{Path(args[0]).name} failed: {(run.stderr or run.stdout)[-800:]}")
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", str(base)


def stop(folder: str, *, remove: bool = True) -> None:
    """Stop the cluster in `folder` (immediately) and delete the folder."""
    bin_dir = _bin_dir()
    data = Path(folder) / "data"
    if data.exists():
        subprocess.run(
            _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                          "stop"]),
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    if remove:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "start":
        url, where = start(sys.argv[2] if len(sys.argv) > 2 else None)
        print(url)
        print(f"# cluster in {where}; stop it with: python {sys.argv[0]} stop {where}",
              file=sys.stderr)  # fmt: skip
    elif len(sys.argv) == 3 and sys.argv[1] == "stop":
        stop(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} start [DIR] | stop DIR")
