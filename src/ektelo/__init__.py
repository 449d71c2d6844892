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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ektelo' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once loaded, an ordinary module attribute
    return value


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
