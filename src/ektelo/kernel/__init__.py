"""The protected kernel (paper §4): the only code that touches private data,
spends privacy budget or samples noise. Audit this package and nothing else.

Modules: `budget` (Algorithm 2 ledger, `BudgetExceeded`), `kernel` (the
`Kernel`: sources, transformations, Private→Public operators), `handles`
(opaque `ProtectedTable`/`ProtectedVector` and `protect`), `tables` (table
transformations on codes), `predicates` (row predicates for `where`),
`noise` (secure/research `RandomSource`), `measurement` (`Measurement`).
"""

from .budget import Budget, BudgetExceeded
from .handles import ProtectedTable, ProtectedVector, protect
from .kernel import Kernel, Request
from .measurement import Measurement
from .predicates import Predicate, col

__all__ = [
    "Budget",
    "BudgetExceeded",
    "Kernel",
    "Measurement",
    "Predicate",
    "ProtectedTable",
    "ProtectedVector",
    "Request",
    "col",
    "protect",
]
