"""Every exception and warning ektelo raises, in one tree.

Each sits under the built-in exception a caller would catch anyway — bad
input is a `ValueError` or `TypeError`, a failed resource a `RuntimeError` —
so ``except ValueError`` keeps working, and each names its own case::

    Exception
    ├── BudgetExceeded         a Private→Public request would overspend (kernel.ledger)
    ├── CLIError               a command-line mistake: one line, exit code 2
    ├── ServerError            a server's refusal that is not a kernel refusal (client)
    ├── ValueError
    │   ├── RequestConflict    a request id reused for another request (kernel.ledger)
    │   ├── DomainValueError   a column holds values the domain cannot encode (domain)
    │   ├── WhereError         a filter that does not parse or fit the domain (where)
    │   ├── SqlError           SQL ektelo does not answer, named by its clause (sql)
    │   ├── WireError          a malformed document of the port's wire format (wire)
    │   ├── HandleError        a request names a source its server session lacks (server)
    │   └── ModelTooLarge      a junction tree over the public size limit (inference)
    └── RuntimeError
        ├── EngineError        a table engine's resources failed (kernel.contracts)
        ├── StoreError         the ledger store failed or holds an unknown schema
        └── ConvergenceError   an estimator stopped far from its optimum (inference)

    UserWarning
    ├── EngineFallback         a file read into memory: DuckDB is not installed (engines)
    └── LargeVectorWarning     a question builds a data vector above the threshold (session)

The leaves without state are defined here; the kernel's (`BudgetExceeded`,
`RequestConflict`, `EngineError` — the trusted kernel imports nothing outside
itself) and those that carry their module's types (`DomainValueError`,
`ConvergenceError`) or sit beside their only raiser (the two warnings) are
defined in their modules and re-exported here. This module imports nothing at
load time but the package's lazy loader (PEP 562 names, as `ektelo` itself
has), so `ektelo --help` stays NumPy-free and every module may import its
exception from here without an import cycle. Code tells exceptions apart
with ``isinstance``, never by class-name strings. (`ektelo.server.app.ApiError`
is not in the tree: it carries an HTTP error response inside the server and
never reaches a caller.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _lazy

if TYPE_CHECKING:
    from .domain import DomainValueError
    from .engines import EngineFallback
    from .inference._system import ConvergenceError
    from .kernel.contracts import EngineError
    from .kernel.ledger import BudgetExceeded, RequestConflict
    from .session import LargeVectorWarning

__all__ = [
    "BudgetExceeded",
    "CLIError",
    "ConvergenceError",
    "DomainValueError",
    "EngineError",
    "EngineFallback",
    "HandleError",
    "LargeVectorWarning",
    "ModelTooLarge",
    "RequestConflict",
    "ServerError",
    "SqlError",
    "StoreError",
    "WhereError",
    "WireError",
]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class ServerError(Exception):
    """A server's refusal that is not a kernel refusal (authentication, an
    unknown dataset or session, a malformed or too large request)."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(f"HTTP {status} {kind}: {message}")
        self.status, self.kind, self.message = status, kind, message


class WhereError(ValueError):
    """A filter that cannot be parsed or does not fit the domain."""


class SqlError(ValueError):
    """SQL that ektelo does not answer (refused before anything is spent)."""


class WireError(ValueError):
    """A document that is not a well-formed message of the wire format."""


class HandleError(ValueError):
    """A request names a source id this server session does not hold."""


class ModelTooLarge(ValueError):  # noqa: N818 (the name the plans and AIM use)
    """The junction tree (or a table a query needs) exceeds the public size limit."""


class StoreError(RuntimeError):
    """The ledger store failed (a database error) or holds something it should
    not (a schema it does not know). A failure after a charge leaves the
    charge in place."""


# name -> the module that defines it (read on first use)
_ELSEWHERE = {
    "BudgetExceeded": "kernel.ledger",
    "RequestConflict": "kernel.ledger",
    "EngineError": "kernel.contracts",
    "DomainValueError": "domain",
    "ConvergenceError": "inference._system",
    "EngineFallback": "engines",
    "LargeVectorWarning": "session",
}
__getattr__ = _lazy(__name__, _ELSEWHERE, globals())
