"""The trusted kernel (paper §4): the only code that holds private data,
spends privacy budget or draws noise. An auditor reads this package and the
contract beneath it (`contracts.py`); docs/audit.md lists the reading order.

* `kernel` — the `Kernel`: sources by id, transformations (Private), and
  every Private→Public request through one release step;
* `ledger` — Algorithm 2 for ε and ρ (`algorithm2`, a pure function), the
  in-memory ledger, `BudgetExceeded`;
* `sensitivity` — the kernel's own structural rules (L1, L2, integrality);
* `noise`, `gaussian` — the samplers (exact Laplace, exact discrete Gaussian,
  the exponential mechanism);
* `dawa`, `mwem`, `privbayes`, `marginal_select` — each private operator's
  private step;
* `contracts` — what a table engine must compute (engines live in
  `ektelo.engines`, ledger stores in `ektelo.ledger_store`);
* `records` — the public records the kernel returns about itself.

Everything above the kernel talks to it through `ektelo.port`.
"""

from .contracts import EngineError, TableEngine
from .kernel import Kernel, QueryLimits
from .ledger import (
    Budget,
    BudgetExceeded,
    BudgetReport,
    NodeState,
    RequestConflict,
    check_epsilon,
    check_rho,
)
from .records import PrivacyUnit, QueryRecord, Receipt, SourceInfo
from .sensitivity import group_separable

__all__ = [
    "Budget",
    "BudgetExceeded",
    "BudgetReport",
    "EngineError",
    "Kernel",
    "NodeState",
    "PrivacyUnit",
    "QueryLimits",
    "QueryRecord",
    "Receipt",
    "RequestConflict",
    "SourceInfo",
    "TableEngine",
    "check_epsilon",
    "check_rho",
    "group_separable",
]
