"""The custodian's configuration file for `ektelo-serve` (TOML).

One file names everything the server may touch; clients never name a path.
Relative paths are read relative to the file::

    [server]
    host = "127.0.0.1"
    port = 8750
    state = "state"              # directory: token database and HMAC key
    ledger = "ledger.sqlite"     # the durable ledger (path or postgresql:// URL);
                                 # required unless insecure_in_memory_ledger = true
    insecure_in_memory_ledger = false  # test/demo only: an in-memory ledger, every
                                 # budget lost on restart (shown on the status page)
    max_request_bytes = 8388608
    max_array_elements = 4194304
    max_matrix_dim = 16777216
    max_matrix_nodes = 32768     # matrices (blocks, factors, terms) in one request's spec
    max_query_rows = 67108864    # the largest query the kernel evaluates: answers and
    max_query_work = 8589934592  # operations of Q·x, estimated from its structure;
                                 # larger ones are refused before anything is charged
    min_response_ms = 0          # pad every response to at least this long
    response_floor_ms = {free = 50, charged = 100}  # release times per request class,
                                 # then on a doubling grid (server/timing.py); 0: off
    worker_memory_mb = 4096      # with a durable ledger, every session's kernel runs in
    worker_cpu_seconds = 600     # a pool of worker processes with this much memory
    worker_processes = 0         # headroom and CPU per request; 0 processes: one on
                                 # SQLite, as many as cores (2 to 8) on PostgreSQL;
                                 # worker_memory_mb = 0: kernels in the server's own
                                 # process (server/worker.py)
    header_timeout_s = 10        # a request's headers must arrive within this, its
    body_timeout_s = 30          # body within this after them: else 408, closed
    max_concurrent_per_analyst = 4  # an analyst's requests in flight; more: 429
    session_history = 256        # query records a session keeps in memory (the
                                 # durable ledger keeps every one)
    ssl_certfile = "cert.pem"    # optional: TLS in uvicorn itself
    ssl_keyfile = "key.pem"

    [datasets.adult]
    data = "adult.csv"           # a table: .csv or .parquet (with `domain`), or a
                                 # DuckDB database file with `table`; a .npy: a vector
    domain = "adult-domain.json"
    epsilon = 1.0                # the dataset's total budget: epsilon (with delta),
                                 # or rho
    seed = 7                     # research mode only (reproducible, NOT secure):
    insecure_research_seed = true  # refused without this; every response and the
                                 # status page then say so, and each session draws
                                 # from its own stream (seed derived per session)
    engine = "duckdb"            # where the rows live (docs/engines.md): "duckdb"
                                 # (default for files when DuckDB is installed),
                                 # "memory" (pandas; the default otherwise), "spark"
    memory_limit = "1GB"         # DuckDB only: its memory limit, worker threads and
    threads = 2                  # spill directory
    temp_directory = "spill"

    [datasets.visits]
    data = "visits.csv"
    domain = "visits-domain.json"
    epsilon = 1.0                # per person, not per row (docs/units.md):
    privacy_unit = "person_id"   # the identifier column (never a query attribute)
    max_rows_per_unit = 5        # each person's rows kept at most (a keyed choice)

    [datasets.warehouse]
    data = "warehouse.duckdb"    # a table of a DuckDB database, opened read-only
    table = "people"             # (or data = "duckdb:///abs/path.db?table=people")
    domain = "people-domain.json"
    rho = 0.5

Every key is checked when the file is read: an unknown key, a missing file, a
bad budget or an engine that cannot serve the data (not installed, options
of another engine) is an error naming the key.
"""

from __future__ import annotations

import importlib.util
import math
import re
import tomllib
import urllib.parse
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..budget import ZCDP, PureDP
from .timing import FLOOR_DEFAULTS

__all__ = ["DatasetConfig", "ServerConfig", "ensure_in_store", "load_config"]

#: a worker's address space beyond its size when a request arrives (MiB): on by default
WORKER_MEMORY_MB = 4096
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|KIB|MB|MIB|GB|GIB|TB|TIB)\s*$", re.IGNORECASE)


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
    engine: str | None = None  # a table's engine: "memory", "duckdb" or "spark"
    duckdb: dict[str, Any] = field(default_factory=dict)  # DuckDBEngine's options
    table: str | None = None  # a DuckDB database's table
    insecure_research_seed: bool = False  # the custodian's opt-in to serving `seed`
    privacy_unit: str | None = None  # budgets per person: the identifier column (#37)
    max_rows_per_unit: int | None = None  # ... and each person's contribution bound
    # or: at most this many groups of `group_by` per person, max_rows_per_group each
    max_groups_per_unit: int | None = None
    max_rows_per_group: int | None = None
    group_by: tuple[str, ...] | None = None

    @property
    def kind(self) -> str:
        return "vector" if self.data.suffix == ".npy" else "table"

    @property
    def source(self) -> str:
        """What `protect` opens: the file's path, or a ``duckdb://`` URL."""
        if self.table is None:
            return str(self.data)
        return f"duckdb://{urllib.parse.quote(str(self.data))}?table={self.table}"

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
    max_matrix_nodes: int = 1 << 15
    max_query_rows: int = 1 << 26
    max_query_work: int = 1 << 33
    min_response_ms: float = 0.0
    insecure_in_memory_ledger: bool = False  # the test/demo opt-in to ledger = None
    worker_memory_mb: int = WORKER_MEMORY_MB  # 0: kernels in the server's process; worker.py
    worker_cpu_seconds: int = 600
    worker_processes: int = 0  # 0: app.default_workers (1 on SQLite, cores on PostgreSQL)
    header_timeout_s: float = 10.0  # a request's headers arrive within this (timeouts.py)
    body_timeout_s: float = 30.0  # and its body within this after them
    max_concurrent_per_analyst: int = 4  # requests in flight per analyst; more: HTTP 429
    session_history: int = 256  # query records a session keeps in memory (the ledger: all)
    response_floor_ms: dict[str, float] = field(
        default_factory=lambda: dict(FLOOR_DEFAULTS)
    )  # per request class ("free", "charged"): timing.py
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    datasets: dict[str, DatasetConfig] = field(default_factory=dict)


_SERVER_KEYS = {
    "host", "port", "state", "ledger", "max_request_bytes", "max_array_elements",
    "max_matrix_dim", "max_matrix_nodes", "max_query_rows", "max_query_work", "min_response_ms",
    "ssl_certfile", "ssl_keyfile", "insecure_in_memory_ledger", "response_floor_ms",
    "worker_memory_mb", "worker_cpu_seconds", "worker_processes", "header_timeout_s",
    "body_timeout_s", "max_concurrent_per_analyst", "session_history",
}
_DATASET_KEYS = {
    "data", "domain", "epsilon", "delta", "rho", "seed", "engine", "memory_limit", "threads",
    "temp_directory", "table", "insecure_research_seed", "privacy_unit", "max_rows_per_unit",
    "max_groups_per_unit", "max_rows_per_group", "group_by",
}
_ENGINES = ("memory", "duckdb", "spark")

_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
_DATABASE_SUFFIXES = (".db", ".duckdb")


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


def _seconds(section: dict[str, Any], key: str, default: float) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        0 < value <= 3600
    ):
        raise ValueError(f"[server] {key} must be a number of seconds in (0, 3600], got {value!r}")
    return float(value)


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
    data, table = _data(base, name, spec)
    domain = base / str(spec["domain"]) if "domain" in spec else None
    if data.suffix != ".npy":
        if domain is None:
            raise ValueError(f"[datasets.{name}] a table ({data.name}) needs domain = <json>")
        if not domain.is_file():
            raise ValueError(f"[datasets.{name}] domain file {domain} does not exist")
    engine, duckdb = _engine(base, name, spec, data, table)
    eps, delta, rho = (_budget(name, spec, k) for k in ("epsilon", "delta", "rho"))
    if (eps is None) == (rho is None):
        raise ValueError(f"[datasets.{name}] give the budget as epsilon= (with delta=) or rho=")
    seed = spec.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"[datasets.{name}] seed must be an integer, got {seed!r}")
    insecure = _flag(spec, "insecure_research_seed", f"[datasets.{name}]")
    if seed is not None and not insecure:
        raise ValueError(
            f"[datasets.{name}] seed = {seed} is research mode (reproducible, predictable "
            "noise: NOT secure); refused unless insecure_research_seed = true"
        )
    if insecure and seed is None:
        raise ValueError(f"[datasets.{name}] insecure_research_seed applies to a dataset "
                         "with seed = <int>")
    unit, rows = spec.get("privacy_unit"), spec.get("max_rows_per_unit")
    groups, per_group = spec.get("max_groups_per_unit"), spec.get("max_rows_per_group")
    group_by = spec.get("group_by")
    if isinstance(group_by, list):
        group_by = tuple(group_by)
    grouped = (groups, per_group, group_by)
    if (unit is None) != (rows is None and all(v is None for v in grouped)):
        raise ValueError(f"[datasets.{name}] privacy_unit and max_rows_per_unit (or "
                         "max_groups_per_unit, max_rows_per_group and group_by) go together "
                         "(the identifier column and each person's bound on rows)")
    if unit is not None:
        if data.suffix == ".npy":
            raise ValueError(f"[datasets.{name}] privacy_unit applies to a table, not a vector")
        from ..port.local import unit_relation

        try:
            unit_relation(unit, rows, groups, per_group, group_by)
        except (TypeError, ValueError) as err:
            raise ValueError(f"[datasets.{name}] {err}") from None
    return DatasetConfig(name, data, domain, eps, delta, rho, seed, engine, duckdb, table,
                         insecure, unit, rows, groups, per_group, group_by)


def _flag(section: dict[str, Any], key: str, where: str) -> bool:
    value = section.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{where} {key} must be true or false, got {value!r}")
    return value


def _data(base: Path, name: str, spec: dict[str, Any]) -> tuple[Path, str | None]:
    """(the data file, the DuckDB table or None): a .csv/.parquet/.npy file,
    a DuckDB database file with `table`, or a ``duckdb:///path?table=`` URL."""
    raw, table = spec["data"], spec.get("table")
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"[datasets.{name}] data must be a file name, got {raw!r}")
    if raw.startswith("duckdb://"):
        url = urllib.parse.urlparse(raw)
        names = urllib.parse.parse_qs(url.query).get("table", [])
        if url.netloc or not url.path or len(names) != 1 or table is not None:
            raise ValueError(
                f"[datasets.{name}] a DuckDB URL is duckdb:///path/to/file.db?table=name "
                f"(and no table key), got {raw!r}"
            )
        raw, table = urllib.parse.unquote(url.path), names[0]
    data = base / raw
    if not data.is_file():
        raise ValueError(f"[datasets.{name}] data file {data} does not exist")
    suffix = data.suffix.lower()
    if table is not None:
        if suffix not in _DATABASE_SUFFIXES:
            raise ValueError(
                f"[datasets.{name}] table = applies to a DuckDB database (.db, .duckdb), "
                f"not {data.name}"
            )
        if not isinstance(table, str) or not re.fullmatch(r"[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)?",
                                                           table):
            raise ValueError(
                f"[datasets.{name}] table must name a table (name or schema.name), got {table!r}"
            )
        return data, table
    if suffix in _DATABASE_SUFFIXES:
        raise ValueError(f"[datasets.{name}] a DuckDB database ({data.name}) needs table = <name>")
    if suffix != ".npy" and suffix not in _TABLE_SUFFIXES and ".csv" not in data.suffixes:
        raise ValueError(
            f"[datasets.{name}] data must be a .csv, .parquet or .npy file or a DuckDB "
            f"database with table=, got {data.name}"
        )
    return data, None


def _engine(
    base: Path, name: str, spec: dict[str, Any], data: Path, table: str | None
) -> tuple[str | None, dict[str, Any]]:
    """The table's engine (the default: DuckDB for a file when installed,
    memory otherwise — `protect`'s rule) and DuckDB's options, checked now:
    a server must not start with a dataset it cannot open."""
    section = f"[datasets.{name}]"
    options: dict[str, Any] = {
        k: spec[k] for k in ("memory_limit", "threads", "temp_directory") if k in spec
    }
    engine: Any = spec.get("engine")
    if data.suffix == ".npy":
        if engine is not None or options:
            raise ValueError(f"{section} a vector (.npy) is held in memory: no engine keys")
        return None, {}
    if engine is None:
        engine = "duckdb" if table is not None or importlib.util.find_spec("duckdb") else "memory"
    if engine not in _ENGINES:
        raise ValueError(f"{section} engine must be one of {list(_ENGINES)}, got {engine!r}")
    if options and engine != "duckdb":
        raise ValueError(
            f"{section} {sorted(options)} are DuckDB's options: they do not apply to "
            f"engine = {engine!r}"
        )
    if table is not None and engine != "duckdb":
        raise ValueError(f"{section} a DuckDB database table needs engine = \"duckdb\"")
    needs = {"duckdb": "duckdb", "spark": "pyspark"}.get(engine)
    if needs is not None and importlib.util.find_spec(needs) is None:
        raise ValueError(f"{section} engine = {engine!r} needs the {needs} package installed")
    parquet = data.suffix.lower() in (".parquet", ".pq")
    if engine == "memory" and parquet and importlib.util.find_spec("pyarrow") is None:
        raise ValueError(f"{section} reading Parquet into memory needs pyarrow installed")
    limit = options.get("memory_limit")
    if limit is not None and not (isinstance(limit, str) and _SIZE.match(limit)):
        raise ValueError(f"{section} memory_limit must be a size like \"1GB\", got {limit!r}")
    threads = options.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):  # fmt: skip
        raise ValueError(f"{section} threads must be a positive integer, got {threads!r}")
    if "temp_directory" in options:
        options["temp_directory"] = str(base / str(options["temp_directory"]))
    return engine, options


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
    in_memory = _flag(server, "insecure_in_memory_ledger", "[server]")
    if ledger is None and not in_memory:
        raise ValueError(
            "[server] ledger is not set: without a durable ledger a restart or a crash "
            "resets every budget; set ledger = <file or postgresql:// URL> (or "
            "insecure_in_memory_ledger = true for a test or demo)"
        )
    pad = server.get("min_response_ms", 0.0)
    if isinstance(pad, bool) or not isinstance(pad, (int, float)) or not 0 <= pad <= 60_000:
        raise ValueError(f"[server] min_response_ms must be in [0, 60000], got {pad!r}")

    floors = server.get("response_floor_ms", {})
    if not isinstance(floors, dict) or set(floors) - set(FLOOR_DEFAULTS) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 60_000
        for v in floors.values()
    ):
        raise ValueError(
            "[server] response_floor_ms must be a table {free = ms, charged = ms} of numbers "
            f"in [0, 60000], got {floors!r}"
        )

    worker_mb = server.get("worker_memory_mb", WORKER_MEMORY_MB)
    if isinstance(worker_mb, bool) or not isinstance(worker_mb, int) or worker_mb < 0:
        raise ValueError(f"[server] worker_memory_mb must be a non-negative integer, got "
                         f"{worker_mb!r}")
    if server.get("worker_memory_mb") and ledger is None:
        raise ValueError("[server] worker_memory_mb needs a durable ledger (ledger = ...): a "
                         "lost worker must not take the budget with it")
    if ledger is None:  # the in-memory ledger's one kernel stays in the server's process
        worker_mb = 0
    processes = server.get("worker_processes", 0)
    if isinstance(processes, bool) or not isinstance(processes, int) or not 0 <= processes <= 64:
        raise ValueError(f"[server] worker_processes must be an integer in [0, 64], got "
                         f"{processes!r}")

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
        max_matrix_nodes=_positive_int(server, "max_matrix_nodes", 1 << 15),
        max_query_rows=_positive_int(server, "max_query_rows", 1 << 26),
        max_query_work=_positive_int(server, "max_query_work", 1 << 33),
        min_response_ms=float(pad),
        insecure_in_memory_ledger=in_memory,
        worker_memory_mb=worker_mb,
        worker_cpu_seconds=_positive_int(server, "worker_cpu_seconds", 600),
        worker_processes=processes,
        header_timeout_s=_seconds(server, "header_timeout_s", 10.0),
        body_timeout_s=_seconds(server, "body_timeout_s", 30.0),
        max_concurrent_per_analyst=_positive_int(server, "max_concurrent_per_analyst", 4),
        session_history=_positive_int(server, "session_history", 256),
        response_floor_ms={**FLOOR_DEFAULTS, **{k: float(v) for k, v in floors.items()}},
        ssl_certfile=opt_path("ssl_certfile"),
        ssl_keyfile=opt_path("ssl_keyfile"),
        datasets=datasets,
    )


def dataset_section(name: str, data: str, domain: str | None, options: dict[str, Any]) -> str:
    """The TOML text of a [datasets.NAME] section (for `ektelo-admin add-dataset`):
    the budget keys and the engine's, strings quoted; None values left out."""
    check_name(name)
    lines = [f"\n[datasets.{name}]", f"data = {_toml_str(data)}"]
    if domain is not None:
        lines.append(f"domain = {_toml_str(domain)}")
    for key, value in options.items():
        if isinstance(value, str):
            lines.append(f"{key} = {_toml_str(value)}")
        elif isinstance(value, bool):
            lines.append(f"{key} = {str(value).lower()}")
        elif value is not None:
            lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ensure_in_store(store: Any, ds: DatasetConfig) -> None:
    """Create the dataset in a durable ledger with its configured cap, or check
    that the stored cap is the configured one (a cap never changes)."""
    budget = ds.budget()
    delta = budget.delta if isinstance(budget, ZCDP) else None
    relation = "row" if ds.privacy_unit is None else f"unit:{ds.privacy_unit}"
    store.ensure_dataset(ds.name, budget.unit, Fraction(budget.total), delta, relation)
