"""Least squares (paper §5.5, §7.6): `least_squares`, a **Public** operator.

    x̂ = argmin_x ‖D (Q x − y)‖₂

Q stacks every measurement's `query_on_root`, y its answers and D the
weights of `_system` (1/bᵢ, public facts near-exact). The general solver is
LSMR (Fong & Saunders, SIAM J. Sci. Comput. 2011) on the implicit stacked
matrix: only Q·v and Qᵀ·u are computed, and from x = 0 it returns the
minimum-norm solution when Q does not determine x. The structure of the
measurements chooses an exact solver where one applies (`structured`):

* one tree of range queries (H2, HB, QuadTree): two passes, O(N)
  (`tree.lstsq`, Hay, Rastogi, Miklau & Suciu, PVLDB 2010);
* rows with disjoint supports (Identity, Total, UniformGrid's grid, group
  totals; a group measured several times): per group, the weighted mean of
  its measurements spread over its cells, O(N);
* one Kronecker product with small factors (HDMM, striped strategies):
  the factors' pseudo-inverses;
* measurements of disjoint split pieces (striped plans): piece by piece;
* ``groups=P``: on the groups' totals, spread uniformly within each group
  (``groups="measured"``: the groups the measurements were reduced by);
* range queries along one axis of a ≥ 2-D root, each within one line of
  cells (DAWA-Striped): line by line.

All give the estimate LSMR converges to (the minimum-norm one when the
system is under-determined).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _validate as check
from ..matrix import Hierarchy, Identity, Partition
from ..measurement import Measurement
from . import structured
from ._system import (
    FAIL_FACTOR,
    LSMR_MESSAGES,
    ConvergenceError,
    Counter,
    Estimate,
    SolveInfo,
    System,
    as_list,
    build_system,
    check_maxiter,
    check_root,
    ls_measure,
    public_rows,
    run_lsmr,
    start_vector,
)
from .tree import lstsq as tree_lstsq

__all__ = ["least_squares"]

_METHODS = ("auto", "lsmr", "tree")


def least_squares(
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    start: Any = None,
    tol: float = 1e-10,
    maxiter: int | None = None,
    groups: Partition | list[Partition] | str | None = None,
    prior: Any = None,
    exact_scale: float = 1e-3,
    method: str = "auto",
) -> Estimate:
    """Weighted least-squares estimate of the root vector (§5.5, §7.6; Public).

    Args:
        measurements: a list of `Measurement`s of one root vector.
        total: a known public total, honoured as a near-exact extra row.
        start: LSMR's initial estimate (an array on the root, or an
            `Estimate`); default zeros, which gives the minimum-norm
            solution of an under-determined system (from another start,
            start plus the minimum-norm correction). The exact solvers
            need none.
        tol: LSMR's atol = btol; stops when ‖Aᵀr‖ ≤ tol·‖A‖·‖r‖ (or
            ‖r‖ ≤ tol·(‖b‖ + ‖A‖‖x‖) for consistent systems). The default is
            tight: on small problems the result matches a direct solver
            (numpy.linalg.lstsq) to ~1e-6 relative or better.
        maxiter: LSMR iteration limit (default: generous, 10·min(m, n) + 100
            capped at 100 000; well-conditioned strategies need tens).
        groups: a public `Partition` of the root (or a chain of them, as
            the root was reduced): the estimate uniform within each group,
            from the measurements' queries on the groups' totals (see
            `structured`) — for measurements taken on
            ``x.reduce_by_partition(groups)``, the fit on those totals.
            ``"measured"``: the partitions the measurements were taken
            through, read from their records (`structured.measured_groups`),
            or the cells when they show none.
        prior: public facts: a pair (M, answers) or a list of such pairs, M
            an `EMatrix` on the root domain; honoured like `total`.
        exact_scale: noise scale of public facts relative to the smallest
            measurement scale (see `_system`).
        method: "auto" (default): the exact solver the measurements'
            structure allows (the module lists them), else LSMR; "lsmr";
            or "tree", the two-pass solve of one `Hierarchy` measurement
            (an error where it does not apply).

    Returns:
        An `Estimate`: ``x`` on the root's domain, ``info`` with the method
        ("lsmr", "tree", "disjoint", "kronecker", "blocks", "lines"), iterations and products.

    Raises:
        ConvergenceError: the iteration limit was reached with the optimality
            measure still above 1000·tol.
        ValueError: method="tree" on measurements that are not one tree.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be 'auto', 'lsmr' or 'tree', got {method!r}")
    items = as_list(measurements)
    root_shape, size = check_root(items)
    tol = check.probability(tol, "tol")
    exact_scale = check.unit_interval(exact_scale, "exact_scale", include_one=True)
    check_maxiter(maxiter, 1)  # refused whichever solver the structure picks
    facts = public_rows(prior, total, size)
    x0 = None if start is None else start_vector(start, size)
    groups = structured.chosen_groups(groups, items)
    if groups is None:
        queries = [(m.query_on_root, m.answers, m.noise_scale) for m in items]
        system = build_system(queries, facts, size, exact_scale)
        expand: Callable[[np.ndarray], np.ndarray] = lambda v: v  # noqa: E731
    else:
        on = structured.groups_of(groups, size, orthonormal=False)
        queries = [(on.query(m), m.answers, m.noise_scale) for m in items]
        system = build_system(queries, [(on.fact(M), y) for M, y in facts], on.size, exact_scale)
        x0 = None if x0 is None else on.reduce(x0)
        expand = on.expand
    try:
        x, info = _solve(system, x0, tol, maxiter, method, root_shape if groups is None else None)
    except ConvergenceError as err:  # the best estimate, on the root
        raise err.on_root(expand, root_shape) from err
    return Estimate(expand(x).reshape(root_shape), info)


def _solve(
    system: System,
    x0: np.ndarray | None,
    tol: float,
    maxiter: Any,
    method: str,
    shape: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, SolveInfo]:
    """The estimate on the system's unknowns: an exact structured solve where
    the method allows, else LSMR. `shape`: the unknowns' shape when they are
    the root's cells (for ranges along one of its axes)."""
    if method != "lsmr":
        if not system.facts and type(system.A) is Identity:
            # one measurement of every cell (the identity plan): the LS
            # estimate is the answers themselves — no solver (nor SciPy's
            # sparse.linalg, a start-up cost of a small question, #41);
            # maxiter is still checked, as LSMR would
            check_maxiter(maxiter, 1)
            return _direct(system, lambda b: np.array(b, dtype=np.float64), "identity")
        tree = None if system.facts else structured.tree_of(system.A)
        if tree is not None:
            return _direct(system, _tree_solve(tree), "tree")
        if method == "tree":
            raise ValueError(
                "method='tree' needs one measurement whose query on the root is a "
                "Hierarchy, and no total or prior"
            )
        disjoint = structured.disjoint_of(system.A)
        if disjoint is not None:
            return _direct(system, structured.solve_disjoint(disjoint), "disjoint")
        if structured.small_kronecker(system.A):
            return _direct(system, structured.kronecker_pinv(system.A), "kronecker")
        found = None if system.facts else structured.pieces(system.parts, system.size)
        if found is not None:
            return _blocks(system, found, tol, maxiter)
        lines = None if system.facts or shape is None else structured.lines_of(system.A, shape)
        if lines is not None:
            return _direct(system, structured.solve_lines(lines), "lines")
    return _lsmr_solve(system, x0, tol, maxiter)


def _tree_solve(tree: Hierarchy) -> Callable[[np.ndarray], np.ndarray]:
    return lambda b: tree_lstsq(tree, b)


def _lsmr_solve(
    system: System, x0: np.ndarray | None, tol: float, maxiter: Any
) -> tuple[np.ndarray, SolveInfo]:
    """LSMR on the system; a ConvergenceError far from the optimum."""
    m, n = system.A.shape
    limit = check_maxiter(maxiter, min(10 * min(m, n) + 100, 100_000))
    counter = Counter(system.A)
    x, istop, itn, normr, rel = run_lsmr(counter, system.b, tol, limit, x0=x0)
    converged = istop in (0, 1, 2, 4, 5, 6)
    info = SolveInfo("lsmr", converged, itn, counter.count, LSMR_MESSAGES[istop], normr, rel)
    if not np.all(np.isfinite(x)):
        raise ConvergenceError("least squares produced non-finite values", Estimate(x, info))
    if not converged and rel > FAIL_FACTOR * tol:
        raise ConvergenceError(
            f"least squares did not converge in {itn} iterations "
            f"(optimality {rel:.2e} > tolerance {tol:.0e}); raise maxiter",
            Estimate(x, info),
        )
    return x, info


def _direct(
    system: System, solve: Callable[[np.ndarray], np.ndarray], how: str
) -> tuple[np.ndarray, SolveInfo]:
    """An exact solve `solve(b)` of the system; LSMR's measures in the info,
    computed when asked for."""
    x = solve(system.b)
    info = SolveInfo(
        how, True, 0, 0, f"exact {how} solve", measure=ls_measure(system.A, system.b, x)
    )
    return x, info


def _blocks(
    system: System, found: list[structured.Piece], tol: float, maxiter: Any
) -> tuple[np.ndarray, SolveInfo]:
    """A block-diagonal system, piece by piece (see `structured.solve_pieces`)."""

    def solve(piece: structured.Piece) -> np.ndarray:
        queries = [(Q, y, 1.0 / w) for Q, y, w in piece.parts]  # weights back to scales
        sub = build_system(queries, [], piece.cells.size, 1.0)
        return _solve(sub, None, tol, maxiter, "auto")[0]

    x = structured.solve_pieces(found, system.size, solve)
    message = f"solved piece by piece ({len(found)} disjoint pieces)"
    info = SolveInfo("blocks", True, 0, 0, message, measure=ls_measure(system.A, system.b, x))
    return x, info
