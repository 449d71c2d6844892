"""The protected kernel (paper §4): the only code that touches private data,
spends privacy budget or samples noise. Audit this package and nothing else.

Modules: `ledger` (Algorithm 2 for ε and ρ, `BudgetExceeded`), `kernel` (the
`Kernel`: sources by id, transformations, Private→Public operators), `port`
(the typed requests and responses handles submit), `local` (the in-process
port and `protect`), `handles` (opaque `ProtectedTable`/`ProtectedVector`
over a port), `sensitivity` (the kernel's own structural rules), `tables`
(table transformations on rows and masks), `predicates` (row predicates for
`where`), `noise` (secure/research `RandomSource`), and the private
operators `ahp`, `dawa`, `mwem`, `privbayes`. `port` is public (its request
and response types are what a server's wire format carries, `ektelo.wire`).
`engines` holds the table engines (memory, DuckDB, Spark; docs/engines.md).
`store` holds the durable budget ledgers (SQLite, PostgreSQL) and the audit
trail: `open_store(path_or_url)` (docs/ledger.md).
"""

from . import port, store
from .engines import (
    DuckDBEngine,
    EngineError,
    MemoryEngine,
    SparkEngine,
    default_engine,
    duckdb_installed,
    fallback_note,
)
from .handles import ProtectedTable, ProtectedVector
from .kernel import Kernel
from .ledger import Budget, BudgetExceeded, NodeState, RequestConflict
from .local import LocalPort, protect
from .port import Port, QueryRecord
from .predicates import Predicate, col
from .store import open_store

__all__ = [
    "Budget",
    "BudgetExceeded",
    "DuckDBEngine",
    "EngineError",
    "Kernel",
    "LocalPort",
    "MemoryEngine",
    "NodeState",
    "Port",
    "Predicate",
    "ProtectedTable",
    "ProtectedVector",
    "QueryRecord",
    "RequestConflict",
    "SparkEngine",
    "col",
    "default_engine",
    "duckdb_installed",
    "fallback_note",
    "open_store",
    "port",
    "protect",
    "store",
]
