"""The custodian's configuration file for `ektelo-serve` (TOML).

One file names everything the server may touch; clients never name a path.
Relative paths are read relative to the file::

    [server]
    host = "127.0.0.1"
    port = 8750
    state = "state"              # directory: token database and HMAC key
    ledger = "ledger.sqlite"     # the durable ledger (path or postgresql:// URL);
                                 # omit for an in-memory ledger (lost on restart)
    max_request_bytes = 8388608
    max_array_elements = 4194304
    max_matrix_dim = 16777216
    min_response_ms = 0          # pad every response to at least this long
    ssl_certfile = "cert.pem"    # optional: TLS in uvicorn itself
    ssl_keyfile = "key.pem"

    [datasets.adult]
    data = "adult.csv"           # a CSV (a table, with `domain`) or a .npy (a vector)
    domain = "adult-domain.json"
    epsilon = 1.0                # the dataset's total budget: epsilon (with delta),
                                 # or rho
    seed = 7                     # research mode only (reproducible, NOT secure)

Every key is checked when the file is read: an unknown key, a missing file or
a bad budget is an error naming the key.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..budget import ZCDP, PureDP

__all__ = ["DatasetConfig", "ServerConfig", "ensure_in_store", "load_config"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class DatasetConfig:
    """One protected dataset: its files and its total budget."""

    name: str
    data: Path
    domain: Path | None
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    seed: int | None = None

    @property
    def kind(self) -> str:
        return "vector" if self.data.suffix == ".npy" else "table"

    def budget(self) -> PureDP | ZCDP:
        """The typed total budget (as `protect` reads its keywords)."""
        if self.rho is not None:
            return ZCDP(self.rho, delta=self.delta)
        assert self.epsilon is not None  # load_config checked one is given
        if self.delta is not None:
            return ZCDP.from_approx(self.epsilon, self.delta)
        return PureDP(self.epsilon)


@dataclass(frozen=True)
class ServerConfig:
    """The server section and the datasets of a configuration file."""

    path: Path
    host: str = "127.0.0.1"
    port: int = 8750
    state: Path = Path("state")
    ledger: str | None = None
    max_request_bytes: int = 8 << 20
    max_array_elements: int = 1 << 22
    max_matrix_dim: int = 1 << 24
    min_response_ms: float = 0.0
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    datasets: dict[str, DatasetConfig] = field(default_factory=dict)


_SERVER_KEYS = {
    "host", "port", "state", "ledger", "max_request_bytes", "max_array_elements",
    "max_matrix_dim", "min_response_ms", "ssl_certfile", "ssl_keyfile",
}
_DATASET_KEYS = {"data", "domain", "epsilon", "delta", "rho", "seed"}


def check_name(name: Any, what: str = "dataset") -> str:
    """A dataset or analyst name: letters, digits, '_', '.', '-' (≤ 64)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{what} name {name!r} must be 1-64 letters, digits, '_', '.' or '-' "
            "(starting with a letter or digit)"
        )
    return name


def _positive_int(section: dict[str, Any], key: str, default: int) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"[server] {key} must be a positive integer, got {value!r}")
    return value


def _budget(name: str, spec: dict[str, Any], key: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise ValueError(f"[datasets.{name}] {key} must be a positive number, got {value!r}")
    return float(value)


def _dataset(base: Path, name: str, spec: Any) -> DatasetConfig:
    check_name(name)
    if not isinstance(spec, dict):
        raise ValueError(f"[datasets.{name}] must be a table of keys")
    unknown = set(spec) - _DATASET_KEYS
    if unknown:
        raise ValueError(f"[datasets.{name}] has unknown keys {sorted(unknown)}")
    if "data" not in spec:
        raise ValueError(f"[datasets.{name}] needs data = <file>")
    data = base / str(spec["data"])
    if not data.is_file():
        raise ValueError(f"[datasets.{name}] data file {data} does not exist")
    domain = base / str(spec["domain"]) if "domain" in spec else None
    if data.suffix != ".npy":
        if domain is None:
            raise ValueError(f"[datasets.{name}] a table ({data.name}) needs domain = <json>")
        if not domain.is_file():
            raise ValueError(f"[datasets.{name}] domain file {domain} does not exist")
    eps, delta, rho = (_budget(name, spec, k) for k in ("epsilon", "delta", "rho"))
    if (eps is None) == (rho is None):
        raise ValueError(f"[datasets.{name}] give the budget as epsilon= (with delta=) or rho=")
    seed = spec.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"[datasets.{name}] seed must be an integer, got {seed!r}")
    return DatasetConfig(name, data, domain, eps, delta, rho, seed)


def load_config(path: str | Path) -> ServerConfig:
    """Read and check a configuration file."""
    path = Path(path).resolve()
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError as err:
        raise ValueError(f"configuration file {path} does not exist") from err
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"configuration file {path} is not valid TOML: {err}") from err
    unknown = set(doc) - {"server", "datasets"}
    if unknown:
        raise ValueError(f"unknown sections {sorted(unknown)} (expected [server], [datasets.*])")
    base = path.parent
    server = doc.get("server", {})
    bad = set(server) - _SERVER_KEYS
    if bad:
        raise ValueError(f"[server] has unknown keys {sorted(bad)}")
    ledger = server.get("ledger")
    if ledger is not None and not str(ledger).startswith(("postgresql://", "postgres://")):
        ledger = str(base / str(ledger))
    pad = server.get("min_response_ms", 0.0)
    if isinstance(pad, bool) or not isinstance(pad, (int, float)) or not 0 <= pad <= 60_000:
        raise ValueError(f"[server] min_response_ms must be in [0, 60000], got {pad!r}")

    def opt_path(key: str) -> Path | None:
        return None if key not in server else base / str(server[key])

    datasets = {n: _dataset(base, n, s) for n, s in doc.get("datasets", {}).items()}
    return ServerConfig(
        path=path,
        host=str(server.get("host", "127.0.0.1")),
        port=_positive_int(server, "port", 8750),
        state=base / str(server.get("state", "state")),
        ledger=ledger,
        max_request_bytes=_positive_int(server, "max_request_bytes", 8 << 20),
        max_array_elements=_positive_int(server, "max_array_elements", 1 << 22),
        max_matrix_dim=_positive_int(server, "max_matrix_dim", 1 << 24),
        min_response_ms=float(pad),
        ssl_certfile=opt_path("ssl_certfile"),
        ssl_keyfile=opt_path("ssl_keyfile"),
        datasets=datasets,
    )


def dataset_section(name: str, data: str, domain: str | None, budget: dict[str, Any]) -> str:
    """The TOML text of a [datasets.NAME] section (for `ektelo-admin add-dataset`)."""
    check_name(name)
    lines = [f"\n[datasets.{name}]", f"data = {_toml_str(data)}"]
    if domain is not None:
        lines.append(f"domain = {_toml_str(domain)}")
    for key, value in budget.items():
        if value is not None:
            lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ensure_in_store(store: Any, ds: DatasetConfig) -> None:
    """Create the dataset in a durable ledger with its configured cap, or check
    that the stored cap is the configured one (a cap never changes)."""
    budget = ds.budget()
    delta = budget.delta if isinstance(budget, ZCDP) else None
    store.ensure_dataset(ds.name, budget.unit, Fraction(budget.total), delta)
