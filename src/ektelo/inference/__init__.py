"""Inference (paper §5.5, §7.6): estimate the data vector from noisy
measurements. **Public** operators: they read only `Measurement` records
(noisy answers plus their public description) and spend no budget.

One calling convention for every estimator (`Estimator`):

    estimator(measurements, *, total=None, start=None, tol=…, maxiter=…,
              groups=None) -> Estimate

* ``measurements`` — ONE list of measurements of one root vector, possibly
  taken on different reduced, split or transformed vectors of it; each is
  mapped to the root through its ``query_on_root`` (§5.5 "inference under
  vector transformations");
* ``total`` — a known public total; ``start`` — an initial estimate (an
  array on the root, or a previous `Estimate`); ``tol``, ``maxiter`` — the
  stopping rule; ``groups`` — a public `Partition` of the root: estimate on
  its groups (uniform within each), for measurements of
  ``x.reduce_by_partition(groups)`` the fit on the groups' totals;
* the result, always an `Estimate`: ``x`` on the root's domain (read-only)
  and ``info`` (`SolveInfo`: method, iterations, residual, …).

The estimators, each in its own module:

* `least_squares` (`lsq`) — weighted least squares by LSMR, or exactly where
  the measurements' structure allows (`structured`: one tree, one Kronecker
  product, disjoint pieces, groups; `tree`);
* `nnls` (`nonneg`) — the same with x ≥ 0 (`tree_nnls` for one tree);
* `multiplicative_weights` (`mw`) — MWEM's update, stateless;
* `network_distribution` (`bayes_net`) — PrivBayes's inference: a
  Bayesian network's joint distribution from its noisy marginals;
* `fit_graphical_model` (`graphical_model`) — Private-PGM's estimator for
  measurements of a table's marginals, never the full vector: a
  `GraphicalModel` answering marginals and sampling synthetic rows (its own
  signature: measurements of projections, the table's Domain).

Each name loads its module on first use (PEP 562; issue #41): least squares
on one histogram needs neither the graphical models nor SciPy's solvers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use
    from ._system import ConvergenceError, Estimate, Estimator, SolveInfo
    from .bayes_net import network_distribution
    from .graphical_model import GraphicalModel, ModelTooLarge, fit_graphical_model
    from .lsq import least_squares
    from .mw import multiplicative_weights
    from .nonneg import nnls

_LAZY = {
    **dict.fromkeys(("ConvergenceError", "Estimate", "Estimator", "SolveInfo"), "_system"),
    "network_distribution": "bayes_net",
    **dict.fromkeys(("GraphicalModel", "ModelTooLarge", "fit_graphical_model"),
                    "graphical_model"),
    "least_squares": "lsq",
    "multiplicative_weights": "mw",
    "nnls": "nonneg",
}

__getattr__ = _lazy(__name__, {n: f"inference.{m}" for n, m in _LAZY.items()}, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "ConvergenceError",
    "Estimate",
    "Estimator",
    "GraphicalModel",
    "ModelTooLarge",
    "SolveInfo",
    "fit_graphical_model",
    "least_squares",
    "multiplicative_weights",
    "network_distribution",
    "nnls",
]
