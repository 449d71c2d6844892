"""ektelo: differentially private answering of linear counting queries.

Layers (see DESIGN.md): `ektelo.matrix` (implicit matrices), `ektelo.workload`
(workload builders and error metrics), `ektelo.kernel` (the protected kernel:
the only code that touches private data or samples noise), `ektelo.operators`
(public operators), `ektelo.plans` (algorithms as short plans).

Entry point: `ektelo.protect(data, domain, epsilon=...)` returns an opaque
handle to the protected data; `ektelo.Domain` describes a table's schema;
`ektelo.col` builds `where` predicates; `ektelo.connect(url, token)` reaches a
kernel served by `ektelo-serve` (docs/server.md).
"""

from .budget import ZCDP, PureDP
from .client import connect
from .domain import Attribute, Domain
from .kernel import (
    Budget,
    BudgetExceeded,
    ProtectedTable,
    ProtectedVector,
    col,
    protect,
)
from .measurement import Gaussian, Laplace, Measurement

__version__ = "0.1.0"

__all__ = [
    "ZCDP",
    "Attribute",
    "Budget",
    "BudgetExceeded",
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
