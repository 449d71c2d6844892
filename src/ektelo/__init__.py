"""ektelo: differentially private answering of linear counting queries.

Layers (see DESIGN.md): `ektelo.matrix` (implicit matrices), `ektelo.workload`
(workload builders and error metrics), `ektelo.kernel` (the trusted kernel:
the only code that touches private data or samples noise; `ektelo.port` is
how everything else talks to it), `ektelo.operators`
(public operators), `ektelo.plans` (algorithms as short plans).

Entry point: `ektelo.protect(data, domain, epsilon=...)` returns an opaque
handle to the protected data; `ektelo.Domain` describes a table's schema;
`ektelo.col` builds `where` predicates; `ektelo.connect(url, token)` reaches a
kernel served by `ektelo-serve` (docs/server.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use
    from .budget import ZCDP, PureDP
    from .client import connect
    from .domain import Attribute, Domain
    from .kernel import Budget, BudgetExceeded, BudgetReport
    from .measurement import Gaussian, Laplace, Measurement
    from .port import ProtectedTable, ProtectedVector, protect
    from .predicates import col

# Lazy (PEP 562): `import ektelo` — and so `ektelo --help` — loads no NumPy,
# SciPy or pandas; each name imports its module the first time it is read.
_LAZY = {
    "ZCDP": "budget",
    "PureDP": "budget",
    "connect": "client",
    "Attribute": "domain",
    "Domain": "domain",
    "Budget": "kernel",
    "BudgetExceeded": "kernel",
    "BudgetReport": "kernel",
    "ProtectedTable": "port",
    "ProtectedVector": "port",
    "col": "predicates",
    "protect": "port",
    "Gaussian": "measurement",
    "Laplace": "measurement",
    "Measurement": "measurement",
}


def _lazy(module: str, table: Mapping[str, str], namespace: dict[str, Any]) -> Any:
    """A module's `__getattr__` (PEP 562) reading `table` (name -> the ektelo
    module that defines it, e.g. "budget" or "kernel.ledger"): the module is
    imported the first time the name is read, and the name then becomes an
    ordinary attribute of `namespace` (also `ektelo.errors`' re-exports)."""

    def get(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
        namespace[name] = value
        return value

    return get


__getattr__ = _lazy(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "ZCDP",
    "Attribute",
    "Budget",
    "BudgetExceeded",
    "BudgetReport",
    "Domain",
    "Gaussian",
    "Laplace",
    "Measurement",
    "ProtectedTable",
    "ProtectedVector",
    "PureDP",
    "__version__",
    "col",
    "connect",
    "protect",
]
