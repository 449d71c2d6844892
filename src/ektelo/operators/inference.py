"""Inference operators (paper §5.5, §7.6): estimate the data vector from noisy
measurements. All are **Public** operators: they read only `Measurement`
records (noisy answers plus their public description) and spend no budget.

Every function takes ONE list of measurements — possibly taken on different
reduced, split or transformed vectors of the same root vector — maps each to
the root through its `query_on_root` (§5.5 "inference under vector
transformations"), and returns a plain ``numpy.ndarray``: the estimate of the
flattened root vector (size ``prod(root_shape)``, C order). There is no
estimate object; an optional ``return_info=True`` adds a `SolveInfo` record
with the solver's iterations and convergence. Inputs are never modified.

Unequal noise (§5.5 (i)): measurement i's rows are weighted by 1/bᵢ (its
Laplace scale), i.e. rows are scaled to equal noise before fitting; only the
ratios matter, so weights are normalised to ``min(b)/bᵢ`` and equal scales
cost nothing.

Public facts (§5.5 (iii)): a known total or other public linear facts
(``prior``) enter as extra rows whose noise scale is ``exact_scale`` times the
smallest measurement scale (default 10⁻³, weight 10³ relative): the fit
honours them to a relative ~10⁻⁶ of the measurements' own discrepancy, while
the system stays well enough conditioned for the iterative solvers. The same
treatment applies to measurements with noise scale 0.

* `least_squares` — min ‖D(Qx − y)‖₂ by LSMR (Fong & Saunders 2011) on the
  implicit stacked matrix; minimum-norm solution when under-determined. One
  measurement of a tree of range queries (H2, HB, QuadTree) is solved
  exactly in O(N) by `Hierarchy.lstsq` instead (Hay et al. 2010).
* `nnls` — the same with x ≥ 0: an active-set / projected-Newton method
  whose Newton steps are LSMR solves on the free variables (default), or
  L-BFGS-B. One measurement of a tree (1-D, or d-D with parents of cells
  all alike) is solved to its exact KKT point by `Hierarchy.nnls` (a few
  tree solves on the cells' parents).
* `multiplicative_weights` — MWEM's update (Hardt, Ligett & McSherry 2012).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lstsq as dense_lstsq
from scipy.optimize import Bounds, minimize
from scipy.sparse.linalg import LinearOperator, lsmr

from ..matrix import (
    Diagonal,
    EMatrix,
    Hierarchy,
    Identity,
    Kronecker,
    Ones,
    Product,
    RangeQueries,
    Total,
    VStack,
    Weighted,
    as_vector,
)
from ..measurement import Measurement

__all__ = [
    "ConvergenceError",
    "SolveInfo",
    "least_squares",
    "multiplicative_weights",
    "nnls",
]

# ---------------------------------------------------------------------------
# Result reporting
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SolveInfo:
    """How an iterative inference ran (returned with ``return_info=True``).

    Attributes:
        method: the algorithm ("lsmr", "tree", "kronecker",
            "projected_newton", "tree_newton", "tree_active_set", "lbfgsb",
            "mw").
        converged: True when the stopping rule was met.
        iterations: outer iterations (LSMR steps, Newton steps, L-BFGS-B
            iterations or MW passes).
        products: matrix–vector products with the stacked query matrix or
            its transpose (the cost measure of implicit inference; 0 for
            multiplicative weights, which works row by row; NNLS's
            products with its materialised free columns are not counted).
        message: the solver's reason for stopping.
        residual: the weighted residual norm ‖D(Qx̂ − y)‖₂ at the estimate.
        optimality: the scale-free optimality measure the stopping rule used
            (LS: ‖Aᵀr‖/(‖A‖‖r‖); NNLS: ‖projected gradient‖∞ / ‖Aᵀb‖∞).
    """

    method: str
    converged: bool
    iterations: int
    products: int
    message: str
    residual: float
    optimality: float


class ConvergenceError(RuntimeError):
    """An inference solver stopped far from its optimum.

    Raised instead of warning; the best estimate found so far and the
    `SolveInfo` are attached as ``estimate`` and ``info``.
    """

    def __init__(self, message: str, estimate: np.ndarray, info: SolveInfo):
        super().__init__(message)
        self.estimate = estimate
        self.info = info


# Mild non-convergence (within this factor of the tolerance) is reported in
# SolveInfo only; beyond it the solvers raise ConvergenceError.
_FAIL_FACTOR = 1e3


# ---------------------------------------------------------------------------
# Assembling the weighted system from measurements
# ---------------------------------------------------------------------------


@dataclass
class _System:
    """The weighted stacked system A x ≈ b (A = D·Q, b = D·y) on the root."""

    A: EMatrix
    b: np.ndarray
    size: int
    parts: list[tuple[EMatrix, np.ndarray, float]]  # (Q on root, y, weight)


def _as_list(measurements: Any) -> list[Measurement]:
    if isinstance(measurements, Measurement):
        raise TypeError("pass a list of measurements, e.g. [m], not a single Measurement")
    if not isinstance(measurements, Sequence) or isinstance(measurements, (str, bytes)):
        raise TypeError(
            f"measurements must be a list of Measurement, got {type(measurements).__name__}"
        )
    items = list(measurements)
    if not items:
        raise ValueError("inference needs at least one measurement")
    for i, m in enumerate(items):
        if not isinstance(m, Measurement):
            raise TypeError(f"measurements[{i}] is a {type(m).__name__}, not a Measurement")
    return items


def _root(items: list[Measurement]) -> tuple[str, tuple[int, ...], int]:
    root_id, root_shape = items[0].root_id, tuple(items[0].root_shape)
    for i, m in enumerate(items):
        if m.root_id != root_id:
            raise ValueError(
                "cannot combine measurements of different root vectors: "
                f"measurements[0] has root {root_id!r}, measurements[{i}] has {m.root_id!r}"
            )
        if tuple(m.root_shape) != root_shape:
            raise ValueError(
                f"measurements[{i}] has root_shape {tuple(m.root_shape)}; expected {root_shape}"
            )
    size = math.prod(root_shape)
    for i, m in enumerate(items):
        if m.query_on_root.shape[1] != size:
            raise ValueError(
                f"measurements[{i}].query_on_root has {m.query_on_root.shape[1]} columns; "
                f"the root domain {root_shape} has {size} cells"
            )
        if not np.all(np.isfinite(m.answers)):
            raise ValueError(f"measurements[{i}] has non-finite answers")
    return root_id, root_shape, size


def _public_rows(prior: Any, known_total: Any, size: int) -> list[tuple[EMatrix, np.ndarray]]:
    rows: list[tuple[EMatrix, np.ndarray]] = []
    if known_total is not None:
        total = float(known_total)
        if not math.isfinite(total):
            raise ValueError(f"known_total must be a finite number, got {known_total!r}")
        rows.append((Total(size), np.array([total])))
    if prior is None:
        return rows
    pairs = (
        [prior]
        if (isinstance(prior, tuple) and len(prior) == 2 and isinstance(prior[0], EMatrix))
        else list(prior)
    )
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], EMatrix)):
            raise TypeError(
                f"prior[{i}] must be a (matrix, answers) pair with an EMatrix on the root domain"
            )
        M, answers = pair
        if M.shape[1] != size:
            raise ValueError(f"prior[{i}] has {M.shape[1]} columns; the root domain has {size}")
        y = as_vector(answers, M.shape[0], f"prior[{i}] answers")
        if not np.all(np.isfinite(y)):
            raise ValueError(f"prior[{i}] answers must be finite")
        rows.append((M, np.array(y, copy=True)))
    return rows


def _system(
    measurements: Any, known_total: Any, prior: Any, exact_scale: float
) -> tuple[_System, tuple[int, ...]]:
    items = _as_list(measurements)
    _, root_shape, size = _root(items)
    if not (isinstance(exact_scale, (int, float)) and 0 < exact_scale <= 1):
        raise ValueError(f"exact_scale must be a number in (0, 1], got {exact_scale!r}")
    scales = np.array([m.noise_scale for m in items], dtype=np.float64)
    positive = scales[scales > 0]
    unit = float(positive.min()) if positive.size else 1.0
    exact = unit * float(exact_scale)  # the scale given to noiseless facts
    parts: list[tuple[EMatrix, np.ndarray, float]] = []
    for m, b in zip(items, scales, strict=True):
        # The answers are read-only arrays owned by the measurement: used
        # as they are, never written to (the solvers only read b).
        parts.append((m.query_on_root, m.answers, unit / max(b, exact)))
    for M, y in _public_rows(prior, known_total, size):
        parts.append((M, y, unit / exact))
    A, b = _stack(parts)
    return _System(A, b, size, parts), root_shape


def _stack(parts: list[tuple[EMatrix, np.ndarray, float]]) -> tuple[EMatrix, np.ndarray]:
    """The weighted matrix and answers of `parts`, rows grouped so products are
    cheap: range queries on one domain (a measurement per MWEM round, say)
    become one `RangeQueries` block, whose product is one pass over the data
    instead of one per measurement. Row order does not matter to the fits."""
    ranges: dict[tuple[int, ...], list[int]] = {}
    for i, (Q, _, _) in enumerate(parts):
        if type(Q) is RangeQueries and not Q.transposed:
            ranges.setdefault(Q.domain_shape, []).append(i)
    groups = [idx for idx in ranges.values() if len(idx) > 1]
    merged = {i for idx in groups for i in idx}
    blocks: list[EMatrix] = []
    answers: list[np.ndarray] = []
    for i, (Q, y, w) in enumerate(parts):
        if i not in merged:
            blocks.append(Q if w == 1.0 else Weighted(Q, w))
            answers.append(y if w == 1.0 else w * y)
    for idx in groups:
        Q0 = parts[idx[0]][0]
        one = RangeQueries(
            Q0.domain_shape,
            np.concatenate([parts[i][0].lower for i in idx]),
            np.concatenate([parts[i][0].upper for i in idx]),
        )
        weights = np.concatenate([np.full(parts[i][0].shape[0], parts[i][2]) for i in idx])
        if np.all(weights == weights[0]):
            blocks.append(one if weights[0] == 1.0 else Weighted(one, float(weights[0])))
        else:
            blocks.append(Product(Diagonal(weights), one))
        answers.append(weights * np.concatenate([parts[i][1] for i in idx]))
    A = blocks[0] if len(blocks) == 1 else VStack(blocks)
    # one unweighted part: its answers as they are (no copy of a huge vector)
    b = answers[0] if len(answers) == 1 else np.concatenate(answers)
    return A, b


class _Counter:
    """A SciPy LinearOperator over A that counts products."""

    def __init__(self, A: EMatrix):
        self.A, self.AT, self.count = A, A.T, 0

    def matvec(self, v: np.ndarray) -> np.ndarray:
        self.count += 1
        return self.A.matvec(v)

    def rmatvec(self, u: np.ndarray) -> np.ndarray:
        self.count += 1
        return self.AT.matvec(u)

    def operator(self, mask: np.ndarray | None = None) -> LinearOperator:
        if mask is None:
            return LinearOperator(self.A.shape, self.matvec, self.rmatvec, dtype=np.float64)
        return LinearOperator(
            self.A.shape,
            lambda v: self.matvec(np.where(mask, v.reshape(-1), 0.0)),
            lambda u: np.where(mask, self.rmatvec(u), 0.0),
            dtype=np.float64,
        )


def _check_tol(tol: Any, name: str = "tol") -> float:
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
        raise ValueError(f"{name} must be a number in (0, 1), got {tol!r}")
    return float(tol)


def _check_maxiter(maxiter: Any, default: int) -> int:
    if maxiter is None:
        return default
    if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or maxiter < 1:
        raise ValueError(f"maxiter must be a positive integer or None, got {maxiter!r}")
    return int(maxiter)


# ---------------------------------------------------------------------------
# Least squares (LSMR)
# ---------------------------------------------------------------------------

_LSMR_MESSAGES = {
    0: "x = 0 is the exact solution",
    1: "Ax = b solved to the tolerance",
    2: "least-squares optimality reached to the tolerance",
    3: "condition-number limit reached",
    4: "Ax = b solved to machine precision",
    5: "least-squares optimality reached to machine precision",
    6: "condition number too large for this machine",
    7: "iteration limit reached",
}


def _lsmr(
    counter: _Counter,
    b: np.ndarray,
    tol: float,
    maxiter: int,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, int, int, float, float]:
    """LSMR on A (optionally restricted to the columns in mask).

    Returns x, istop, iterations, ‖r‖, relative optimality ‖Aᵀr‖/(‖A‖‖r‖).
    """
    out = lsmr(counter.operator(mask), b, atol=tol, btol=tol, conlim=0.0, maxiter=maxiter)
    x, istop, itn, normr, normar, normA = out[:6]
    rel = float(normar / (normA * normr)) if normA > 0 and normr > 0 else 0.0
    return np.asarray(x, dtype=np.float64), int(istop), int(itn), float(normr), rel


def least_squares(
    measurements: Sequence[Measurement],
    *,
    known_total: float | None = None,
    prior: Any = None,
    tol: float = 1e-10,
    maxiter: int | None = None,
    exact_scale: float = 1e-3,
    method: str = "auto",
    return_info: bool = False,
) -> Any:
    """Weighted least-squares estimate of the root vector (§5.5, §7.6; Public).

    Solves  x̂ = argmin_x ‖D (Q x − y)‖₂  where Q stacks every measurement's
    `query_on_root`, y its answers and D = diag(min b / bᵢ) its weights, by
    LSMR on the implicit matrix (only Q·v and Qᵀ·u are computed). Started
    from x = 0, LSMR returns the minimum-norm solution when Q does not
    determine x.

    Args:
        measurements: a list of `Measurement`s of one root vector.
        known_total: a public total, honoured as a near-exact extra row.
        prior: public facts: a pair (M, answers) or a list of such pairs, M
            an `EMatrix` on the root domain; honoured like `known_total`.
        tol: LSMR's atol = btol; stops when ‖Aᵀr‖ ≤ tol·‖A‖·‖r‖ (or
            ‖r‖ ≤ tol·(‖b‖ + ‖A‖‖x‖) for consistent systems). The default is
            tight: on small problems the result matches a direct solver
            (numpy.linalg.lstsq) to ~1e-6 relative or better.
        maxiter: LSMR iteration limit (default: generous, 10·min(m, n) + 100
            capped at 100 000; well-conditioned strategies need tens).
        exact_scale: noise scale of public facts relative to the smallest
            measurement scale (see the module docstring).
        method: "lsmr"; "tree", the exact two-pass solve of a tree of range
            queries (`Hierarchy.lstsq`, Hay et al. 2010), for one measurement
            whose query on the root is a `Hierarchy` (H2, HB, QuadTree) and
            no public facts; or "auto" (default): "tree" where it applies,
            the factors' pseudo-inverses for one Kronecker measurement with
            small factors (≤ 512 columns, ≤ 2²¹ entries: HDMM, striped
            strategies; (A ⊗ B)⁺ =
            A⁺ ⊗ B⁺), else "lsmr". All give the same estimate (up to LSMR's
            tol; the minimum-norm one when the system is under-determined).
        return_info: also return a `SolveInfo`.

    Returns:
        The estimate (flattened root vector), or (estimate, info).

    Raises:
        ConvergenceError: the iteration limit was reached with the optimality
            measure still above 1000·tol.
        ValueError: method="tree" on measurements that are not one tree.
    """
    if method not in ("auto", "lsmr", "tree"):
        raise ValueError(f"method must be 'auto', 'lsmr' or 'tree', got {method!r}")
    system, _ = _system(measurements, known_total, prior, exact_scale)
    tol = _check_tol(tol)
    if method != "lsmr":
        tree = _tree_of(system)
        if tree is not None:
            return _direct_solve(tree, tree.lstsq, system, "tree", return_info)
        if method == "tree":
            raise ValueError(
                "method='tree' needs one measurement whose query on the root is a "
                "Hierarchy, and no known_total or prior"
            )
        if _small_kronecker(system.A):
            solve = _kronecker_pinv(system.A)
            return _direct_solve(system.A, solve, system, "kronecker", return_info)
    m, n = system.A.shape
    limit = _check_maxiter(maxiter, min(10 * min(m, n) + 100, 100_000))
    counter = _Counter(system.A)
    x, istop, itn, normr, rel = _lsmr(counter, system.b, tol, limit)
    converged = istop in (0, 1, 2, 4, 5, 6)
    info = SolveInfo("lsmr", converged, itn, counter.count, _LSMR_MESSAGES[istop], normr, rel)
    if not np.all(np.isfinite(x)):
        raise ConvergenceError("least squares produced non-finite values", x, info)
    if not converged and rel > _FAIL_FACTOR * tol:
        raise ConvergenceError(
            f"least squares did not converge in {itn} iterations "
            f"(optimality {rel:.2e} > tolerance {tol:.0e}); raise maxiter",
            x,
            info,
        )
    return (x, info) if return_info else x


def _tree_of(system: _System) -> Hierarchy | None:
    """The system's matrix when it is one untransposed tree with usable leaves."""
    A = system.A
    if not isinstance(A, Hierarchy) or A.transposed:
        return None
    # rank deficient without every leaf: LSMR's minimum-norm answer instead
    return A if A.leaves_measured else None


# A Kronecker strategy is solved through its factors' pseudo-inverses when
# every factor is this small (a dense pinv costs O(m n²): ≤ 10⁹ flops here).
_KRON_FACTOR_COLUMNS = 512
_KRON_FACTOR_ENTRIES = 2**21


def _small_kronecker(A: EMatrix) -> bool:
    return (
        type(A) is Kronecker
        and len(A.factors) > 1
        and all(
            f.shape[1] <= _KRON_FACTOR_COLUMNS and f.shape[0] * f.shape[1] <= _KRON_FACTOR_ENTRIES
            for f in A.factors
        )
    )


def _kronecker_pinv(A: Kronecker) -> Any:
    """y ↦ (A₁ ⊗ … ⊗ A_d)⁺ y = (A₁⁺ ⊗ … ⊗ A_d⁺) y, one factor (axis) at a time:
    the minimum-norm least-squares solution, as LSMR's from x = 0."""
    pinvs = [np.linalg.pinv(f.dense()) for f in A.factors]

    def solve(y: np.ndarray) -> np.ndarray:
        Y = y.reshape([f.shape[0] for f in A.factors])
        for axis, P in enumerate(pinvs):
            Y = np.moveaxis(np.tensordot(P, Y, axes=([1], [axis])), 0, axis)
        return Y.reshape(-1)

    return solve


def _direct_solve(A: EMatrix, solve: Any, system: _System, how: str, return_info: bool) -> Any:
    """An exact solve `solve(b)` of the system, with LSMR's measures in the info."""
    x = solve(system.b)
    if not return_info:
        return x
    r = A.matvec(x) - system.b
    normr = _norm(r)
    norm_a = math.sqrt(float(A.column_norms(2).sum()))  # Frobenius, as LSMR's estimate
    normar = _norm(A.T.matvec(r))
    rel = normar / (norm_a * normr) if norm_a > 0 and normr > 0 else 0.0
    info = SolveInfo(how, True, 0, 0, f"exact {how} solve", normr, rel)
    return x, info


# ---------------------------------------------------------------------------
# Non-negative least squares
# ---------------------------------------------------------------------------


def nnls(
    measurements: Sequence[Measurement],
    *,
    known_total: float | None = None,
    prior: Any = None,
    tol: float = 1e-6,
    maxiter: int | None = None,
    method: str = "auto",
    start: str | Any = "ls",
    exact_scale: float = 1e-3,
    return_info: bool = False,
) -> Any:
    """Non-negative weighted least squares on the root vector (§5.5; Public).

    Solves  x̂ = argmin_{x ≥ 0} f(x) = ½‖D (Q x − y)‖₂²  (gradient
    g = Qᵀ D² (Q x − y)) using only products with Q and Qᵀ.

    Stopping rule (both methods): the projected gradient — g_i where
    x_i > 0, min(g_i, 0) where x_i = 0 — has ∞-norm ≤ tol·‖Qᵀ D² y‖∞ (the
    gradient's size at x = 0, the problem's scale). With the default tol the
    objective matches `scipy.optimize.nnls` to ~1e-6 relative or better on
    small problems. Known limitation: a known total or prior enters as rows
    weighted 1/exact_scale (10³), which dominate that scale (~10⁶×), so the
    rule then stops early — on 60 random ranges over 256×256 with a known
    total, at 1.29× the optimal objective. Measured against the
    measurements' own scale instead, the penalised problem is too ill
    conditioned for the projected steps to converge; pass a tighter tol
    (and a larger exact_scale) when the optimum matters, as `plans.mwem`
    does on its reduced problems. The limitation does not apply where the
    active-set steps are exact (few free variables, see below): they run
    to the optimum's KKT conditions whatever the tolerance.

    Methods:
        "auto" (default): for one measurement of a tree of range queries
            (H2, HB, QuadTree) without public facts, "tree_newton" —
            `Hierarchy.nnls`: semismooth Newton on the cells' parents with
            their cells eliminated exactly, each round one tree solve on the
            parents; it stops at the exact KKT point, and its computed bound
            on the projected gradient must pass the stopping rule below —
            in 1-D, and in d-D where the tree's parents of cells are all
            alike (b^h × b^h, …), with ≤ 64 cells per parent; else
            "tree_active_set": the primal–dual
            active-set steps below, each solved exactly in O(N) by
            `Hierarchy.lstsq` with the active cells held at 0, finished
            by projected Newton if they stall. Other matrices:
            "projected_newton".
        "projected_newton": an active-set Newton method whose
            steps are LSMR solves restricted to the free variables, so it
            keeps LSMR's fast convergence on implicit strategies. Phase 1:
            primal–dual active-set steps (Hintermüller, Ito & Kunisch 2002)
            from the start — fix A = {x − 0.1·g/diag(AᵀA) ≤ 0} at 0, solve
            for the rest — while the projected objective keeps improving
            (they move many bounds per step). Phase 2, to convergence:
            Bertsekas' (1982) projected Newton — fix the ε-binding variables
            (near 0, gradient pushing down), Newton step on the others by
            LSMR, Armijo backtracking along the projected path max(x + t·d, 0),
            with a scaled projected-gradient step as fallback. Where the
            matrix is built of explicit or simple blocks (Sparse, Dense,
            Identity, Diagonal, Ones/Total, Weighted, row-weighted and
            stacked), both phases solve on its free columns themselves —
            the rows they touch only — instead of masked products with all
            of it: exactly (dense QR) when those are few (sparse optima),
            then phase 1 stops only at a repeated active set, which is the
            optimum. From a warm start near the optimum (the last estimate
            of an iterative plan), that takes a few steps of a few products.
        "lbfgsb": scipy.optimize L-BFGS-B on f with bounds x ≥ 0 (the
            original εktelo choice); gtol as above, ftol = 1e-15. Much slower
            here when many bounds are active at the optimum (hundreds of
            iterations, each costly inside scipy's L-BFGS-B at large n).
    Args:
        start: "ls" (the LS estimate: one extra LS solve; phase 1 uses its
            signs, L-BFGS-B and phase 2 its clipped values), "zeros", or an
            initial vector (never modified). "tree_newton" needs none.
        maxiter: outer iteration limit (active-set + Newton steps: 200;
            L-BFGS-B: 15000; "tree_newton"'s parent solves: 50).
        known_total, prior, exact_scale, return_info: as in `least_squares`.

    Raises:
        ConvergenceError: the solver stopped with the projected gradient
            still above 1000·tol of the scale.
    """
    system, _ = _system(measurements, known_total, prior, exact_scale)
    tol = _check_tol(tol)
    if method not in ("auto", "projected_newton", "lbfgsb"):
        raise ValueError(
            f"method must be 'auto', 'projected_newton' or 'lbfgsb', got {method!r}"
        )
    counter = _Counter(system.A)
    tree = _tree_of(system) if method == "auto" else None
    if tree is not None:
        exact = tree.nnls(system.b, max_rounds=_check_maxiter(maxiter, _TREE_NEWTON_ROUNDS))
        if exact is not None and exact.gradient_bound <= tol * exact.gradient_scale:
            return _tree_newton_result(exact, system, counter, return_info)
    x0 = _nnls_start(start, system, counter, tree)
    scale = float(np.abs(counter.rmatvec(system.b)).max())
    if scale == 0.0:  # the gradient vanishes at x = 0: it is optimal (convex f)
        x = np.zeros(system.size)
        r = counter.matvec(x) - system.b
        info = SolveInfo(method, True, 0, counter.count, "x = 0 is optimal", _norm(r), 0.0)
        return (x, info) if return_info else x
    if method == "lbfgsb":
        x, info = _lbfgsb(system, counter, x0, tol, scale, _check_maxiter(maxiter, 15_000))
    elif tree is not None:
        x, info = _tree_active_set(tree, system, counter, x0, tol, scale, maxiter)
    else:
        x, info = _projected_newton(system, counter, x0, tol, scale, _check_maxiter(maxiter, 200))
    if not np.all(np.isfinite(x)):
        raise ConvergenceError("NNLS produced non-finite values", x, info)
    if not info.converged and info.optimality > _FAIL_FACTOR * tol:
        raise ConvergenceError(
            f"NNLS ({method}) stopped after {info.iterations} iterations: {info.message} "
            f"(projected gradient {info.optimality:.2e} of scale > tolerance {tol:.0e})",
            x,
            info,
        )
    return (x, info) if return_info else x


# Parent solves allowed to the exact tree method before the active-set steps
# take over (HB measurements settle in 2–5).
_TREE_NEWTON_ROUNDS = 50


def _tree_newton_result(exact: Any, system: _System, counter: _Counter, return_info: bool) -> Any:
    """`Hierarchy.nnls`'s estimate, with the measured residual and projected
    gradient in the info (two products, only when asked for)."""
    x = exact.x
    if not return_info:
        return x
    r = counter.matvec(x)
    r -= system.b
    scale = exact.gradient_scale
    opt = _projected_gradient_norm(x, counter.rmatvec(r)) / scale if scale > 0 else 0.0
    message = "every parent's segment settled: the exact KKT point"
    info = SolveInfo("tree_newton", True, exact.rounds, counter.count, message, _norm(r), opt)
    return x, info


def _norm(v: np.ndarray) -> float:
    return float(np.sqrt(np.dot(v, v)))


def _nnls_start(
    start: Any, system: _System, counter: _Counter, tree: Hierarchy | None = None
) -> np.ndarray:
    if isinstance(start, str):
        if start == "zeros":
            return np.zeros(system.size)
        if start == "ls" and tree is not None:
            return tree.lstsq(system.b)
        if start == "ls":
            m, n = system.A.shape
            x, *_ = _lsmr(counter, system.b, 1e-8, min(10 * min(m, n) + 100, 100_000))
            return x  # unclipped: its sign pattern seeds the active set
        raise ValueError(f"start must be 'ls', 'zeros' or a vector, got {start!r}")
    x0 = as_vector(start, system.size, "start")
    if not np.all(np.isfinite(x0)):
        raise ValueError("start must be finite")
    return np.array(x0, dtype=np.float64, copy=True)  # never the caller's array


# The ufuncs' own reductions: the hot MW loops call them ~10⁵ times per plan
# run, and NumPy's Python-level wrappers (ndarray.sum, .min, np.cumsum) cost
# about a microsecond per call on top; NNLS uses their masked form.
_add, _min, _max = np.add.reduce, np.minimum.reduce, np.maximum.reduce


def _projected_gradient_norm(x: np.ndarray, g: np.ndarray) -> float:
    """max |P(g)|: the projected gradient is g where x > 0, min(g, 0) where
    x ≤ 0. One N-sized temporary (NNLS evaluates this every step; masked
    reductions are slower). NaN in g gives NaN."""
    projected = np.minimum(g, 0.0)
    np.copyto(projected, g, where=np.greater(x, 0.0))
    return max(float(_max(projected)), -float(_min(projected))) if projected.size else 0.0


def _objective(counter: _Counter, b: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float]:
    r = b - counter.matvec(x)
    return r, 0.5 * float(np.dot(r, r))


@dataclass
class _FreeBlock:
    """The columns `cols` of A restricted to the rows they touch, `rows`
    (CSR, len(rows) × len(cols)): for x zero outside `cols`, A·x is this
    block's product on those rows and 0 elsewhere."""

    cols: np.ndarray
    rows: np.ndarray
    matrix: Any

    @classmethod
    def of(cls, A: EMatrix, free: np.ndarray) -> _FreeBlock | None:
        """The block of the free columns, or None where materialising them
        does not pay: A's type gives no cheap access to its columns, or most
        of many columns are free (the block would be about A itself, rebuilt
        per step, for an inexact solve all the same)."""
        cols = np.flatnonzero(free)
        if 2 * cols.size > free.size and cols.size > _FEW_COLUMNS:
            return None
        csc = A.column_block(cols)
        if csc is None:
            return None
        csc = sp.csc_matrix(csc)
        touched = np.zeros(csc.shape[0], dtype=bool)
        touched[csc.indices] = True
        rows = np.flatnonzero(touched)
        local = np.cumsum(touched) - 1  # row i of A is row local[i] of the block
        matrix = sp.csc_matrix(
            (csc.data, local[csc.indices], csc.indptr), shape=(rows.size, cols.size)
        ).tocsr()
        return cls(cols, rows, matrix)

    def residual(self, b: np.ndarray, x: np.ndarray) -> np.ndarray:
        """b − A·x for x zero outside the block's columns (no product with A)."""
        r = np.array(b, dtype=np.float64, copy=True)
        if self.cols.size:
            r[self.rows] -= self.matrix @ x[self.cols]
        return r

    def lstsq(self, r: np.ndarray, tol: float, maxiter: int) -> tuple[np.ndarray, bool]:
        """d on the block's columns minimising ‖A_F d − r‖ (r: a residual on
        all rows; only the block's rows matter), of minimum norm — the limit
        of LSMR on the masked operator, so the same step is taken when A_F
        is rank deficient — and whether exactly: by a dense solve when that
        is cheap, else by LSMR on the block (the masked-operator solve, with
        products on the block only; exact when it converges within
        `maxiter`)."""
        k, m = self.cols.size, self.rows.size
        if k == 0 or m == 0:  # no free variable, or none that any row sees
            return np.zeros(k), True
        rhs = r[self.rows]
        if k * m <= _EXACT_ENTRIES and k * k * m <= _EXACT_FLOPS:
            d = dense_lstsq(self.matrix.toarray(), rhs, lapack_driver="gelsy", check_finite=False)
            return d[0], True
        d, istop = lsmr(self.matrix, rhs, atol=tol, btol=tol, conlim=0.0, maxiter=maxiter)[:2]
        return d, istop != 7  # 7: iteration limit


# Free sets this small always get a block (cheap, and its solve is exact).
_FEW_COLUMNS = 256
# Exact restricted solves when the dense block has at most this many entries
# and its QR costs at most this many flops (~10 ms): the few free variables
# of sparse optima, where MWEM's rounds end, say.
_EXACT_ENTRIES = 1 << 21
_EXACT_FLOPS = float(1 << 24)


def _projected_newton(
    system: _System, counter: _Counter, x0: np.ndarray, tol: float, scale: float, maxiter: int
) -> tuple[np.ndarray, SolveInfo]:
    """Active-set phase (primal–dual, full steps) then safeguarded projected
    Newton (Bertsekas 1982), both with LSMR solves on the free variables."""
    b = system.b
    # Diagonal of AᵀA, to put x and g on one scale in the active-set tests.
    hdiag = np.maximum(system.A.column_norms(2), np.finfo(np.float64).tiny)
    x, r, g, used = _active_set_phase(counter, b, x0, hdiag, tol, scale, maxiter)
    f = 0.5 * float(np.dot(r, r))
    message, converged, it = "iteration limit reached", False, used
    opt = _projected_gradient_norm(x, g) / scale
    while True:
        if opt <= tol:
            message, converged = "projected gradient below tolerance", True
            break
        if it >= maxiter:
            break
        it += 1
        # ε-binding set: near the bound and pushed against it.
        eps_b = min(float(np.abs(x - np.maximum(x - g / hdiag, 0.0)).max()), 1e-3 * _scale_x(x))
        free = ~((x <= eps_b) & (g > 0))
        inner_tol = min(1e-2, max(opt, 1e-2 * tol))
        block = _FreeBlock.of(counter.A, free)
        if block is None:
            d, *_ = _lsmr(counter, r, inner_tol, _INNER_MAXITER, mask=free)
        else:  # the same step on A's free columns themselves (exact when few)
            d = np.zeros(x.size)
            d[block.cols] = block.lstsq(r, inner_tol, _INNER_MAXITER)[0]
        # Newton on the free variables, a scaled gradient step on the binding
        # ones (which the projection then holds at 0).
        d = np.where(free, d, -g / hdiag)
        accepted = False
        for direction in (d, -g / hdiag):
            t = 1.0
            for _ in range(40):
                x_new = np.maximum(x + t * direction, 0.0)
                gs = float(np.dot(g, x_new - x))
                if gs < 0:
                    r_new, f_new = _objective(counter, b, x_new)
                    if f_new <= f + 1e-4 * gs:
                        accepted = True
                        break
                t *= 0.5
            if accepted:
                break
        if not accepted:
            message = "no further decrease possible (line search failed)"
            break
        x, r, f = x_new, r_new, f_new
        g = -counter.rmatvec(r)
        opt = _projected_gradient_norm(x, g) / scale
    info = SolveInfo("projected_newton", converged, it, counter.count, message, _norm(r), opt)
    return x, info


# Inner LSMR solves are truncated Newton steps: this many iterations at most.
_INNER_MAXITER = 50


def _active_set_phase(
    counter: _Counter,
    b: np.ndarray,
    x0: np.ndarray,
    hdiag: np.ndarray,
    tol: float,
    scale: float,
    maxiter: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Primal–dual active-set iterations (Hintermüller, Ito & Kunisch 2002).

    Active set A = {i : x_i − c·g_i/h_ii ≤ 0}; x_A = 0 and x on the rest by
    a least-squares solve restricted to it (full steps, negative entries
    allowed). These change many bounds per step, so they find the active set
    of the optimum in a few solves; they carry no global convergence
    guarantee, so the phase stops once the projected objective stops
    improving and the safeguarded projected Newton phase finishes from the
    best point. Returns the best projected point, its residual b − Ax and
    gradient, and the iterations used.

    The restricted solve uses A's free columns themselves where its
    structure gives them cheaply (`_FreeBlock`): exactly (dense QR) when
    they are few — then a repeated active set is the exact optimum (KKT:
    g = 0 on the free set, x > 0 there, g ≥ 0 on the active one), so the
    phase runs to it instead of stopping at the tolerance, which is loose
    when public facts dominate its scale (see `nnls`), and a few
    non-improving exact steps are allowed on the way — else by truncated
    LSMR on the block; otherwise by truncated LSMR on the masked operator.
    """
    x = np.array(x0, copy=True)
    r, _ = _objective(counter, b, x)
    g = -counter.rmatvec(r)
    best_x = np.maximum(x, 0.0)
    if np.array_equal(best_x, x):  # already feasible: r and g belong to it
        best_r, best_g = r, g
    else:
        best_r, _ = _objective(counter, b, best_x)
        best_g = -counter.rmatvec(best_r)
    best_f = 0.5 * float(np.dot(best_r, best_r))
    previous: np.ndarray | None = None
    stalls, it = 0, 0
    while it < min(maxiter, _ACTIVE_SET_MAXITER):
        it += 1
        active = x - _PDAS_C * g / hdiag <= 0
        if previous is not None and np.array_equal(active, previous):
            break
        previous = active
        free = ~active
        del r, g  # (memory: only x is needed from here on)
        steps = _INNER_MAXITER_PDAS if it > 1 else _INNER_MAXITER_PDAS // 2
        block = _FreeBlock.of(counter.A, free)
        exact = False
        if block is not None:
            xf = np.zeros(x.size)
            xf[block.cols] = x[block.cols]
            d, exact = block.lstsq(block.residual(b, xf), 1e-10, steps)
            del x
            xf[block.cols] += d
            x = xf
            del xf, d
        else:
            xf = np.where(free, x, 0.0)
            del x
            rf, _ = _objective(counter, b, xf)
            d, *_ = _lsmr(counter, rf, 1e-10, steps, mask=free)
            del rf
            x = xf + np.where(free, d, 0.0)
            del xf, d
        xp = np.maximum(x, 0.0)
        feasible = np.array_equal(xp, x)
        # x and xp are zero outside the block: residuals without products
        if block is not None:
            rp = block.residual(b, xp)
            fp = 0.5 * float(np.dot(rp, rp))
        else:
            rp, fp = _objective(counter, b, xp)
        gp: np.ndarray | None = None
        if fp < best_f * (1 - 1e-12):
            gp = -counter.rmatvec(rp)
            best_x, best_r, best_g, best_f, stalls = xp, rp, gp, fp, 0
            if not exact and _projected_gradient_norm(xp, gp) / scale <= tol:
                break
        else:
            stalls += 1
            if stalls >= (_EXACT_STALLS if exact else 2):
                break
        if feasible:  # the projected point is x itself
            r = rp
            g = -counter.rmatvec(r) if gp is None else gp
        else:
            r = block.residual(b, x) if block is not None else _objective(counter, b, x)[0]
            g = -counter.rmatvec(r)
        del xp, rp, gp
    return best_x, best_r, best_g, it


# Consecutive non-improving exact steps allowed: the primal–dual steps are
# not monotone, and from a warm start the first ones often overshoot (on
# MWEM's rounds, up to 4 before the optimum).
_EXACT_STALLS = 10


_PDAS_C = 0.1


def _tree_active_set(
    tree: Hierarchy,
    system: _System,
    counter: _Counter,
    x0: np.ndarray,
    tol: float,
    scale: float,
    maxiter: int | None,
) -> tuple[np.ndarray, SolveInfo]:
    """NNLS on one tree measurement: the primal–dual active-set steps of
    `_active_set_phase`, each solved exactly by `Hierarchy.lstsq` with the
    active cells held at 0 (O(N) per step instead of an LSMR solve). Stops
    when the active set repeats and the projected gradient is below the
    tolerance; otherwise the safeguarded projected Newton method finishes
    from the best projected point, so convergence does not rest on the
    (unguaranteed) active-set iteration."""
    b = system.b
    hdiag = np.maximum(tree.column_norms(2), np.finfo(np.float64).tiny)
    if hdiag.size and hdiag.min() == hdiag.max():  # one norm for all (complete trees)
        hdiag = float(hdiag[0])
    step = _PDAS_C / hdiag
    limit = _check_maxiter(maxiter, 200)
    x = np.array(x0, copy=True)
    best_x, best_f = None, math.inf
    previous: np.ndarray | None = None
    it = 0
    while it < min(limit, _ACTIVE_SET_MAXITER):
        it += 1
        r = counter.matvec(x)
        r -= b
        g = counter.rmatvec(r)
        if x.min() >= 0:  # feasible: r and g are the projected point's
            f = 0.5 * float(np.dot(r, r))
            opt = _projected_gradient_norm(x, g) / scale
            if f < best_f:
                best_x, best_f = x, f
            if opt <= tol:
                info = SolveInfo(
                    "tree_active_set", True, it, counter.count,
                    "projected gradient below tolerance", _norm(r), opt,
                )  # fmt: skip
                return x, info
        # x − c·g/h ≤ 0, with h > 0 (g scaled in place: its last use)
        active = np.less_equal(x, np.multiply(g, step, out=g), out=np.empty(x.size, dtype=bool))
        del r, g
        if previous is not None and np.array_equal(active, previous):
            break  # the iteration has stalled short of the tolerance
        previous = active
        x = tree.lstsq(b, zero=active)
    start = np.maximum(x, 0.0) if best_x is None else best_x
    return _projected_newton(system, counter, start, tol, scale, limit)
# Truncated inner solves: more iterations per step buy fewer steps; 20
# minimised the total work on HB-style measurements of sparse data. The
# first step, often the last when few bounds are active, gets half.
_INNER_MAXITER_PDAS = 20
_ACTIVE_SET_MAXITER = 50


def _scale_x(x: np.ndarray) -> float:
    top = float(np.abs(x).max()) if x.size else 0.0
    return top if top > 0 else 1.0


def _lbfgsb(
    system: _System, counter: _Counter, x0: np.ndarray, tol: float, scale: float, maxiter: int
) -> tuple[np.ndarray, SolveInfo]:
    b = system.b

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        r = counter.matvec(x) - b
        return 0.5 * float(np.dot(r, r)), counter.rmatvec(r)

    res = minimize(
        fun,
        np.maximum(x0, 0.0),
        jac=True,
        method="L-BFGS-B",
        bounds=Bounds(np.zeros(system.size), np.full(system.size, np.inf)),
        options={
            "maxiter": maxiter,
            "maxfun": 2 * maxiter,
            "gtol": tol * scale,
            "ftol": 1e-15,
            "maxcor": 10,
        },
    )
    x = np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)
    r = counter.matvec(x) - b
    g = counter.rmatvec(r)
    opt = _projected_gradient_norm(x, g) / scale
    info = SolveInfo(
        "lbfgsb", opt <= tol, int(res.nit), counter.count, str(res.message), _norm(r), opt
    )
    return x, info


# ---------------------------------------------------------------------------
# Multiplicative weights (MWEM)
# ---------------------------------------------------------------------------


def multiplicative_weights(
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    x0: Any = None,
    iterations: int = 100,
    mode: str = "cyclic",
    return_info: bool = False,
) -> Any:
    """MWEM's multiplicative-weights inference (Hardt, Ligett & McSherry 2012).

    The estimate is a distribution over the cells scaled to `total` (the
    mass T). For each measured query q with answer a, in turn:

        x ← x ∘ exp(w · q · (a − q·x) / (2T)),  then x ← T · x / Σx

    (w = min b / b_q weights noisier measurements less; w = 1 when all
    measurements have one noise scale, which is the paper's update exactly).
    The list of measurements is cycled `iterations` times (MWEM's "use all
    measurements repeatedly" improvement; 100 passes as in DPBench's MWEM).
    Cells at 0 stay at 0.

    Evaluation ("cyclic"). The result is that of the literal loop above (one
    query at a time, normalised after each), computed faster:

    * queries are kept implicit where their structure allows: a range (or
      any row constant on a contiguous run of cells) is a slice of x, an n-D
      range a box of x reshaped; only other rows are materialised, once per
      call, as sparse rows;
    * consecutive queries with pairwise disjoint supports form a block. Their
      multiplicative factors commute, but the normalisation between them
      does not quite: query r's estimate q_r·x = T·p_r / S_{r−1} depends on
      the running mass S_{r−1} = S_0 + Σ_{j<r} p_j (f_j − 1), where p_r is
      x's mass on the support of q_r (unchanged by the other, disjoint
      updates) and f_r its factor. A block's factors are therefore the
      solution of that scalar recurrence, which is found for all rows at
      once by fixed-point iteration (exact after at most |block| steps, as
      S_r depends only on earlier rows; in practice 1–3 steps, as the
      coupling is Σ_r (p_r / S)²/2), stopped when no exponent moves by more
      than 1e-13, else finished by the literal loop (after the first step,
      the factors move by exp(δ) for tiny δ, applied as its Taylor terms to
      within an ulp). Then one vectorised multiplication applies the block.
      Rows of one length L aligned to multiples of L (MWEM's dyadic ranges)
      are chunks of the span reshaped to (-1, L); the recurrence runs on
      the rows' chunks only, gathered from the chunks' masses, and the
      chunks no row covers keep the factor 1. Updates are thus identical to
      the literal loop's up to floating-point rounding.
    * a call whose measurements extend the previous call's list (in this
      thread; MWEM's rounds) continues that call's blocks, with their work
      arrays and mass histories, instead of building them afresh.

    Args:
        total: the mass T. If None: the (inverse-variance weighted) answer of
            any measured all-ones query (a Total), else the total of the
            least-squares estimate; values below 1 are raised to 1.
        x0: the starting estimate (non-negative, positive sum; rescaled to T);
            default uniform T/n.
        iterations: passes over all measured queries.
        mode: "cyclic" (the update above, one query at a time) or
            "simultaneous" (all queries of a pass at once:
            x ← x ∘ exp(Qᵀ W (y − Qx) / (2T)), εktelo's vectorised variant:
            one Q·x and Qᵀ·u per pass, a different algorithm).
        return_info: also return a `SolveInfo`.
    """
    items = _as_list(measurements)
    _, _, size = _root(items)
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)):
        raise TypeError(f"iterations must be a positive integer, got {iterations!r}")
    if iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations}")
    if mode not in ("cyclic", "simultaneous"):
        raise ValueError(f"mode must be 'cyclic' or 'simultaneous', got {mode!r}")
    T = _mass(items, total)
    if x0 is None:
        x = np.full(size, T / size)
    else:
        x = np.array(as_vector(x0, size, "x0"), dtype=np.float64, copy=True)
        if not np.all(np.isfinite(x)) or np.any(x < 0) or x.sum() <= 0:
            raise ValueError("x0 must be finite, non-negative and have a positive sum")
        x *= T / x.sum()
    scales = np.array([m.noise_scale for m in items])
    positive = scales[scales > 0]
    unit = float(positive.min()) if positive.size else 1.0
    weights = [unit / b if b > 0 else 1.0 for b in scales]
    if mode == "cyclic":
        steps = _continued_steps(items, weights, size, T)
        x = _mw_cyclic(steps, x, T, int(iterations))
    else:
        x = _mw_simultaneous(items, weights, x, T, int(iterations))
    if return_info:
        Q = VStack([m.query_on_root for m in items]) if len(items) > 1 else items[0].query_on_root
        y = np.concatenate([m.answers for m in items])
        res = _norm(Q.matvec(x) - y)
        return x, SolveInfo("mw", True, int(iterations), 0, f"{mode} passes done", res, math.nan)
    return x


# Exponents are clipped here so that absurd noise (far beyond the total)
# cannot overflow; within it the update is exact.
_MAX_EXPONENT = 700.0
# The running mass is brought back to T when it leaves [T·1e-150, T·1e150].
_MASS_RANGE = 1e150
# Disjoint blocks with more rows than this use the vectorised recurrence.
_BLOCK_VECTOR_ROWS = 8
# Fixed-point iteration of a block's running mass: accept when no exponent
# moves by more than this; give up (literal loop) after this many steps.
_BLOCK_EXPONENT_TOL = 1e-13
_BLOCK_MAX_STEPS = 30
# Later steps of that iteration update the factors e ← e·exp(δ) by Taylor
# terms: first order up to |δ| ≤ 2⁻²⁷, second order up to 1e-5, else exp.
_TAYLOR_FIRST = 2.0**-27
_TAYLOR_SECOND = 1e-5


def _empty() -> np.ndarray:
    return np.zeros(0)


@dataclass
class _Scratch:
    """A vectorised block's work arrays: `work` rows 0–6 hold beta·p, [S_0, d],
    the first guess, pull, fresh, z and e; `p` the rows' masses, `ones` a row
    of L ones. Blocks with holes either gather the rows' cells into `rows`
    (when they cover little of the span) or sum every chunk into `masses`
    and multiply the span by `factors`, every chunk's factor (1 in the holes,
    which stay so)."""

    work: np.ndarray
    p: np.ndarray
    ones: np.ndarray
    rows: np.ndarray | None = None
    factors: np.ndarray | None = None
    masses: np.ndarray | None = None


@dataclass
class _SegBlock:
    """Pairwise disjoint rows, each the constant `value` on cells lo..hi of
    the flat vector, in update order (with their answers and weights)."""

    lo: np.ndarray
    hi: np.ndarray
    value: np.ndarray
    answer: np.ndarray
    weight: np.ndarray
    # Vectorised evaluation (blocks of many rows, sorted by position): the
    # span x[start:stop] they cover, its cut points interleaving rows and the
    # gaps between them, the lengths of [row, gap, row, ..., gap, row], and
    # exponent_r = alpha_r − beta_r·p_r/S (p_r: x's mass on row r, S: the
    # running mass before row r).
    vectorised: bool = False
    start: int = 0
    stop: int = 0
    cuts: np.ndarray = field(default_factory=_empty)
    lengths: np.ndarray = field(default_factory=_empty)
    alpha: np.ndarray = field(default_factory=_empty)
    beta: np.ndarray = field(default_factory=_empty)
    alpha_range: tuple[float, float] = (0.0, 0.0)
    beta_top: float = 0.0  # max(beta)
    # The running masses before each row (and after the block) of the last
    # passes, newest at history[slot − 1] (a ring of `_HISTORY` rows, one for
    # huge blocks), with those passes' starting masses; `count` rows hold
    # data. The next pass's first guess extrapolates them (see
    # `_predict_masses`).
    history: np.ndarray | None = None
    history_starts: np.ndarray | None = None
    history_count: int = 0
    history_slot: int = 0
    # work arrays reused by every pass (blocks of up to _SCRATCH_ROWS rows)
    # instead of ~10 fresh arrays of m per pass
    scratch: _Scratch | None = None
    # Regular blocks (every row of one length L, aligned to multiples of L
    # from `start`): the span is x[start:stop].reshape(-1, L), one row of it
    # per chunk; chunks no row covers (holes) are left out of the
    # recurrence and keep the factor 1.
    width: int = 0  # L, or 0 when not regular
    chunks: np.ndarray | None = None  # the rows' chunks when there are holes


@dataclass
class _BoxRow:
    """One row: the constant `value` on an n-D box of x reshaped to `shape`."""

    shape: tuple[int, ...]
    box: tuple[slice, ...]
    value: float
    answer: float
    weight: float


@dataclass
class _GeneralRow:
    """One row with arbitrary entries `q` on the cells `idx`."""

    idx: np.ndarray
    q: np.ndarray
    answer: float
    weight: float


_Step = _SegBlock | _BoxRow | _GeneralRow


def _segments_of(Q: EMatrix, scale: float) -> list[tuple[str, Any]]:
    """Q's rows, in order, as pieces: ("seg", (lo, hi, value)) for rows that
    are a constant on a contiguous run of flat cells, ("box", (shape, lo,
    hi, value)) for n-D ranges, ("rows", csr) for anything else. Queries are
    read from their structure; only unknown kinds are materialised."""
    from ..matrix import RangeQueries

    n = Q.shape[1]
    t = type(Q)
    if t is RangeQueries and not Q.transposed:
        m = Q.shape[0]
        value = np.full(m, scale)
        if len(Q.domain_shape) == 1:
            return [("seg", (Q.lower[:, 0], Q.upper[:, 0], value))]
        return [("box", (Q.domain_shape, Q.lower, Q.upper, value))]
    if t in (Ones, Total):
        m = Q.shape[0]
        return [("seg", (np.zeros(m, np.int64), np.full(m, n - 1, np.int64), np.full(m, scale)))]
    if t is Identity:
        cells = np.arange(n, dtype=np.int64)
        return [("seg", (cells, cells, np.full(n, scale)))]
    if t is Weighted:
        return _segments_of(Q.base, scale * Q.weight)
    if t is VStack:
        return [piece for block in Q.blocks for piece in _segments_of(block, scale)]
    csr = Q.sparse().tocsr(copy=True)
    csr.sum_duplicates()
    csr.sort_indices()
    if scale != 1.0:
        csr.data *= scale
    return [("rows", csr)]


def _csr_pieces(csr: Any) -> list[tuple[str, Any]]:
    """Split materialised rows (canonical CSR) into runs of rows that are a
    constant on a contiguous run of cells ("seg": rows, lo, hi, value) and
    single other rows ("general": row, cells, entries); empty rows are
    dropped (their update changes nothing)."""
    indptr, indices, data = csr.indptr, csr.indices.astype(np.int64), csr.data
    lengths = np.diff(indptr)
    rows = np.flatnonzero(lengths > 0)
    if rows.size == 0:
        return []
    head, tail = indptr[rows], indptr[rows + 1] - 1
    lo, hi, lead = indices[head], indices[tail], data[head]
    constant = np.ones(rows.size, dtype=bool)
    differs = np.flatnonzero(data != np.repeat(lead, lengths[rows]))
    constant[np.searchsorted(head, differs, side="right") - 1] = False
    seg = constant & (hi - lo + 1 == lengths[rows])
    pieces: list[tuple[str, Any]] = []
    cuts = np.flatnonzero(np.diff(seg.astype(np.int8))) + 1
    for part in np.split(np.arange(rows.size), cuts):
        if seg[part[0]]:
            pieces.append(("seg", (rows[part], lo[part], hi[part], lead[part].astype(float))))
        else:
            for i in part:
                cells = slice(indptr[rows[i]], indptr[rows[i] + 1])
                pieces.append(("general", (rows[i], indices[cells], data[cells].copy())))
    return pieces


def _mw_steps(items: list[Measurement], weights: list[float], n: int, T: float) -> list[_Step]:
    """Every measured row in update order, grouped into disjoint blocks."""
    steps: list[_Step] = []
    run: list[tuple[np.ndarray, ...]] = []  # seg pieces of the open block
    covered = np.zeros(n + 1, dtype=np.int64)  # prefix counts of the block's cells

    def close() -> None:
        if run:
            parts = [np.concatenate(c) for c in zip(*run, strict=True)]
            # a block may be cut anywhere (each piece is still exact): cut it
            # where positions decrease, so that every piece is sorted
            cuts = np.flatnonzero(np.diff(parts[0]) < 0) + 1
            for piece in zip(*(np.split(c, cuts) for c in parts), strict=True):
                steps.append(_seg_block(list(piece), n, T))
            run.clear()
            covered[:] = 0

    def add_segs(lo: np.ndarray, hi: np.ndarray, value: np.ndarray, a: np.ndarray, w: float):
        keep = value != 0  # a zero row leaves x unchanged
        lo, hi, value, a = lo[keep], hi[keep], value[keep], a[keep]
        if lo.size == 0:
            return
        order = np.argsort(lo, kind="stable")
        disjoint = bool(np.all(hi[order][:-1] < lo[order][1:]))
        if disjoint:
            if np.any(covered[hi + 1] - covered[lo] > 0):
                close()
            _mark(covered, lo, hi)
            run.append((lo, hi, value, a, np.full(lo.size, w)))
            return
        for i in range(lo.size):  # overlapping rows: grow blocks row by row
            if covered[hi[i] + 1] - covered[lo[i]] > 0:
                close()
            _mark(covered, lo[i : i + 1], hi[i : i + 1])
            run.append(
                (lo[i : i + 1], hi[i : i + 1], value[i : i + 1], a[i : i + 1], np.array([w]))
            )

    for m, w in zip(items, weights, strict=True):
        answers = np.asarray(m.answers, dtype=np.float64)
        row = 0
        for kind, piece in _segments_of(m.query_on_root, 1.0):
            if kind == "seg":
                lo, hi, value = piece
                add_segs(lo, hi, value, answers[row : row + lo.size], w)
                row += lo.size
            elif kind == "box":
                shape, lo, hi, value = piece
                close()
                for i in range(lo.shape[0]):
                    if value[i] != 0:
                        box = tuple(
                            slice(int(a), int(b) + 1) for a, b in zip(lo[i], hi[i], strict=True)
                        )
                        steps.append(
                            _BoxRow(shape, box, float(value[i]), float(answers[row + i]), w)
                        )
                row += lo.shape[0]
            else:
                csr = piece
                for sub_kind, sub in _csr_pieces(csr):
                    if sub_kind == "seg":
                        rows, lo, hi, value = sub
                        add_segs(lo, hi, value, answers[row + rows], w)
                    else:
                        close()
                        r, idx, q = sub
                        steps.append(_GeneralRow(idx, q, float(answers[row + r]), w))
                row += csr.shape[0]
    close()
    return steps


def _continued_steps(
    items: list[Measurement], weights: list[float], n: int, T: float
) -> list[_Step]:
    """`_mw_steps`, reusing the last call's steps (this thread's) when this
    call's measurements extend that call's list with the same weights and
    mass — MWEM's rounds: each call adds one measurement to the last list.

    The reused blocks keep their work arrays and mass histories, so the
    first passes of a round start from good guesses. Results are those of
    fresh steps up to rounding: the blocks' guesses are checked as ever, and
    a block left open by the last call is closed there (blocks may be cut
    anywhere)."""
    last = getattr(_LAST_STEPS, "value", None)
    _LAST_STEPS.value = None  # never shared by two calls at once, even on error
    k, steps = 0, []
    if last is not None:
        old_items, old_weights, old_n, old_T, old_steps = last
        if (
            (old_n, old_T) == (n, T)
            and len(old_items) <= len(items)
            and all(a is b for a, b in zip(old_items, items, strict=False))
            and old_weights == weights[: len(old_items)]
        ):
            k, steps = len(old_items), old_steps
    steps = steps + _mw_steps(items[k:], weights[k:], n, T)
    _LAST_STEPS.value = (list(items), list(weights), n, T, steps)
    return steps


# The last cyclic call's steps, per thread (see `_continued_steps`).
_LAST_STEPS = threading.local()


def _mark(covered: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    """Add the cells lo..hi (disjoint runs) to the prefix counts `covered`."""
    mask = np.diff(covered) > 0
    diff = np.zeros(mask.size + 1, dtype=np.int64)
    np.add.at(diff, lo, 1)
    np.add.at(diff, hi + 1, -1)
    mask |= np.cumsum(diff[:-1]) > 0
    covered[1:] = np.cumsum(mask)


def _seg_block(parts: list[np.ndarray], n: int, T: float) -> _SegBlock:
    """A block of disjoint rows sorted by position."""
    lo, hi, value, answer, weight = parts
    block = _SegBlock(lo, hi, value, answer, weight)
    if lo.size > _BLOCK_VECTOR_ROWS:
        block.vectorised = True
        block.start, block.stop = int(lo[0]), int(hi[-1]) + 1
        # exponent_r = w v (a − T v p / S) / (2T) = alpha_r − beta_r · p_r / S
        alpha = weight * value * answer / (2.0 * T)
        beta = weight * value * value / 2.0
        width = int(hi[0] - lo[0]) + 1
        chunks = (block.stop - block.start) // width
        offset = lo - block.start
        if np.all(hi - lo + 1 == width) and np.all(offset % width == 0):
            block.width = width
            if chunks > lo.size:  # holes: the rows' chunks only, gathered
                block.chunks = offset // width
            block.alpha, block.beta = alpha, beta
        else:
            cuts = np.empty(2 * lo.size, dtype=np.int64)
            cuts[0::2], cuts[1::2] = offset, hi + 1 - block.start
            block.cuts = cuts[:-1]  # on x[start:stop]
            block.lengths = np.diff(cuts)  # row, gap, row, ..., row
            block.alpha, block.beta = alpha, beta
        block.alpha_range = (float(block.alpha.min()), float(block.alpha.max()))
        block.beta_top = float(block.beta.max())
    return block


def _mw_cyclic(steps: list[_Step], x: np.ndarray, T: float, passes: int) -> np.ndarray:
    """`passes` cycles of the sequential MW update over `steps` (see
    `multiplicative_weights`). x is kept unnormalised with running mass S:
    the estimate is T·x/S, and it is renormalised after every pass."""
    S = _renormalise(x, T)
    for _ in range(passes):
        for step in steps:
            if type(step) is _SegBlock:
                if step.vectorised:
                    S = _segs_vectorised(step, x, T, S)
                else:
                    S = _segs_literal(step, x, T, S)
            elif type(step) is _BoxRow:
                view = x.reshape(step.shape)[step.box]
                S = _constant_update(view, step.value, step.answer, step.weight, x, T, S)
            else:
                S = _general_update(step, x, T, S)
        S = _renormalise(x, T)
    return x


def _constant_update(
    view: np.ndarray,
    value: float,
    answer: float,
    weight: float,
    x: np.ndarray,
    T: float,
    S: float,
) -> float:
    """The literal update for one row equal to `value` on the cells of
    `view` (a view into x); returns the new running mass."""
    p = float(_add(view, axis=None))
    z = weight * value * (answer - T * value * p / S) / (2.0 * T)
    z = min(max(z, -_MAX_EXPONENT), _MAX_EXPONENT)
    view *= math.exp(z)
    S += p * math.expm1(z)
    if not (T / _MASS_RANGE < S < T * _MASS_RANGE):
        S = _renormalise(x, T)
    return S


def _segs_literal(block: _SegBlock, x: np.ndarray, T: float, S: float) -> float:
    """The literal loop over the rows of a block."""
    lo, hi, value, answer, weight = block.lo, block.hi, block.value, block.answer, block.weight
    for r in range(lo.size):
        view = x[int(lo[r]) : int(hi[r]) + 1]
        S = _constant_update(view, float(value[r]), float(answer[r]), float(weight[r]), x, T, S)
    return S


def _segs_vectorised(block: _SegBlock, x: np.ndarray, T: float, S0: float) -> float:
    """All rows of a disjoint block at once. The running masses before each
    row solve S_r = S_0 + Σ_{j<r} p_j·expm1(z_j), z_j = alpha_j − beta_j·p_j/S_j;
    they are found by fixed-point iteration started from the previous
    passes' masses (extrapolated, `_predict_masses`), accepted when no
    exponent moves by more than the tolerance; then x is multiplied row by
    row. Falls back to the literal loop if the iteration does not settle or
    the mass leaves the safe range.

    Only the first step evaluates exp: later steps move each exponent by a
    tiny δ (the iteration contracts fast), and e·exp(δ) is e·(1 + δ) when
    |δ| ≤ 2⁻²⁷ (δ²/2 is below half an ulp), e·(1 + δ + δ²/2) when
    |δ| ≤ 10⁻⁵ (δ³/6 below one ulp), else exp(z) afresh. With the
    extrapolated guess, most passes settle at the first check (one exp, one
    cumulative sum)."""
    span = x[block.start : block.stop]
    L = block.width
    chunks = block.chunks
    buf = block.scratch
    if buf is None:
        buf = _scratch(block)
    if chunks is not None and L == 1:
        p = span.take(chunks, out=buf.p, mode="clip")  # (valid: no buffering)
    elif chunks is not None and buf.rows is not None:  # rows cover little of the span
        rows = span.reshape(-1, L).take(chunks, axis=0, out=buf.rows, mode="clip")
        p = np.matmul(rows, buf.ones, out=buf.p)
    elif chunks is not None:  # every chunk's mass (contiguous), then the rows'
        assert buf.masses is not None
        every = np.matmul(span.reshape(-1, L), buf.ones, out=buf.masses)
        p = every.take(chunks, out=buf.p, mode="clip")
    elif L == 1:
        p = span  # read only until the final multiplication
    elif L > 1:
        p = np.matmul(span.reshape(-1, L), buf.ones, out=buf.p)
    else:
        # rows' masses: every other chunk of x's span (a zero-length gap
        # gives a junk entry there, unused)
        p = np.add.reduceat(span, block.cuts)[0::2].copy()
    m = p.size
    alpha = block.alpha
    work = buf.work
    beta = np.multiply(block.beta, p, out=work[0, :m])
    # acc[r] = S_0 + Σ_{j<r} d_j (the mass before row r; acc[m] after the
    # block), summed in the literal loop's order as the cumsum of [S_0, d];
    # the first guess is extrapolated into work[2], and the sums go to the
    # history's free row
    inc = work[1]
    inc[0] = S0
    d = inc[1:]
    acc = _predict_masses(block, S0, work[2])
    history = block.history
    assert history is not None
    target = history[block.history_slot]
    mass = acc[:-1]
    low, high = block.alpha_range
    pull = work[3, :m]  # beta/S of the masses behind the current factors e
    fresh = work[4, :m]
    z, e = work[5, :m], work[6, :m]
    S, settled, last_move, clipped = math.nan, False, math.inf, False
    for step in range(_BLOCK_MAX_STEPS):
        np.divide(beta, mass, out=fresh)
        final, move = False, math.inf
        if step > 0:
            np.subtract(pull, fresh, out=z)  # δ = z_new − z_old
            move = max(float(_max(z)), -float(_min(z)))  # NaN if any is
            if move <= _BLOCK_EXPONENT_TOL:
                settled = True  # e and d (from the previous masses) stand
                break
            # the iteration contracts by q per step: the new masses are within
            # move·q/(1 − q) of the fixed point's, in exponent terms
            q = move / last_move if math.isfinite(last_move) else 1.0
            final = q < 0.5 and move * q / (1.0 - q) <= _BLOCK_EXPONENT_TOL
            last_move = move
        pull, fresh = fresh, pull
        if move <= _TAYLOR_SECOND and not clipped:
            if move > _TAYLOR_FIRST:  # z ← δ(1 + δ/2)
                np.multiply(z, 0.5, out=d)
                d += 1.0
                z *= d
            np.multiply(e, z, out=d)  # e ← e + e·δ(…)
            e += d
        else:
            smallest = float(_min(mass))
            if not smallest > 0:  # (rounding only: the masses are positive)
                break
            np.subtract(alpha, pull, out=z)
            # z ≥ low − max(beta)/smallest, and beta_r = block.beta_r·p_r ≤
            # beta_top·S_0 (a row's mass is at most x's, S_0 up to rounding):
            # that bound spares the pass over beta unless it is near the limit
            clipped = high > _MAX_EXPONENT or (
                low - 2.0 * block.beta_top * S0 / smallest < -_MAX_EXPONENT
                and low - float(beta.max()) / smallest < -_MAX_EXPONENT
            )
            if clipped:
                np.clip(z, -_MAX_EXPONENT, _MAX_EXPONENT, out=z)
            np.exp(z, out=e)  # the factors; exp(z) − 1 is exact enough for the mass:
        np.multiply(p, e, out=d)  # its error p·2⁻⁵² is the literal loop's own
        d -= p
        if final:
            S = S0 + float(_add(d))
            settled = True
            break
        acc = target
        mass = acc[:-1]
        np.add.accumulate(inc, out=acc)
        S = float(acc[-1])
    if not (settled and T / _MASS_RANGE < S < T * _MASS_RANGE) or acc is not target:
        block.history_count = 0  # (a settled block has summed into target)
    if not (settled and T / _MASS_RANGE < S < T * _MASS_RANGE):
        return _segs_literal(block, x, T, S0)
    _remember_masses(block, S0)
    if chunks is not None and L == 1:  # p holds those cells' values
        span[chunks] = np.multiply(p, e, out=p)
        return S
    if chunks is not None and buf.rows is not None:  # the rows' cells only
        np.multiply(buf.rows, e[:, None], out=buf.rows)
        span.reshape(-1, L)[chunks] = buf.rows
        return S
    if chunks is not None:  # every chunk's factor (1 in the holes)
        assert buf.factors is not None
        buf.factors[chunks] = e
        e = buf.factors
    if L == 1:
        span *= e
    elif L > 1 and L <= 4:  # (strided products beat broadcasting here)
        for j in range(L):
            span[j::L] *= e
    elif L > 1:
        view = span.reshape(-1, L)
        view *= e[:, None]
    else:
        factors = np.ones(block.lengths.size)
        factors[0::2] = e
        span *= np.repeat(factors, block.lengths)
    return S


def _scratch(block: _SegBlock) -> _Scratch:
    """The block's work arrays and an empty history; kept on the block up to
    _SCRATCH_ROWS rows (beyond, fresh each pass and one history row, as
    memory matters more there than allocation)."""
    m = block.alpha.size
    L = max(block.width, 1)
    chunks = block.chunks
    buf = _Scratch(work=np.empty((7, m + 1)), p=np.empty(m), ones=np.ones(L))
    if chunks is not None and L > 1 and 8 * m * L < block.stop - block.start:
        buf.rows = np.empty((m, L))  # the rows cover little of the span: gather them
    elif chunks is not None and L > 1:  # every chunk's mass, then the rows'
        buf.masses = np.empty((block.stop - block.start) // L)
        buf.factors = np.ones(buf.masses.size)  # stays 1 in the holes
    if block.history is None:
        depth = _HISTORY if m <= _SCRATCH_ROWS else 1
        block.history = np.zeros((depth, m + 1))  # zeros: weight 0 · row is 0
        block.history_starts = np.zeros(depth)
    if m <= _SCRATCH_ROWS:
        block.scratch = buf
    return buf


def _predict_masses(block: _SegBlock, S0: float, out: np.ndarray) -> np.ndarray:
    """The first guess of this pass's running masses: the last passes' mass
    profiles (masses minus their start) extrapolated by the polynomial
    through them (order count − 1, at most _HISTORY − 1: weights
    (−1)^i·C(k+1, i+1) on the i-th newest), plus S_0. The profiles change
    smoothly from pass to pass once MW settles, so the guess is typically
    within 1e-13 in exponent terms (one step settles) where the last
    profile alone is ~1e-8 off (three steps)."""
    count = block.history_count
    history, starts = block.history, block.history_starts
    assert history is not None and starts is not None
    if count == 0:
        out.fill(S0)
        return out
    depth = history.shape[0]
    weights = _EXTRAPOLATION[depth][count - 1, block.history_slot]
    np.matmul(weights, history, out=out)
    out += S0 - float(weights @ starts)
    return out


def _remember_masses(block: _SegBlock, S0: float) -> None:
    """Record the masses just summed into history[slot] (and their start)."""
    assert block.history is not None and block.history_starts is not None
    depth = block.history.shape[0]
    block.history_starts[block.history_slot] = S0
    block.history_slot = (block.history_slot + 1) % depth
    block.history_count = min(block.history_count + 1, depth)


def _extrapolation_weights(depth: int) -> np.ndarray:
    """weights[k, slot]: the order-k extrapolation's weight on each ring row
    when the next row to write is `slot` (newest at slot − 1)."""
    weights = np.zeros((depth, depth, depth))
    for k in range(depth):
        for slot in range(depth):
            for i in range(k + 1):
                weights[k, slot, (slot - 1 - i) % depth] = (-1) ** i * math.comb(k + 1, i + 1)
    return weights


# Extrapolate the running masses from this many passes (order 5: the guess
# settles ~70% of 2-D mwem_b's blocks at the first check, order 2 ~6%);
# blocks above _SCRATCH_ROWS rows keep one (the last masses, shifted).
_HISTORY = 6
_SCRATCH_ROWS = 1 << 18
_EXTRAPOLATION = {depth: _extrapolation_weights(depth) for depth in (1, _HISTORY)}


def _general_update(row: _GeneralRow, x: np.ndarray, T: float, S: float) -> float:
    old = x[row.idx]
    qx = T * float((row.q * old).sum()) / S
    expo = row.weight * row.q * ((row.answer - qx) / (2.0 * T))
    np.clip(expo, -_MAX_EXPONENT, _MAX_EXPONENT, out=expo)
    new = old * np.exp(expo)
    x[row.idx] = new
    S += float(new.sum() - old.sum())
    if not (T / _MASS_RANGE < S < T * _MASS_RANGE):
        S = _renormalise(x, T)
    return S


def _renormalise(x: np.ndarray, T: float) -> float:
    s = float(x.sum())
    if not (s > 0 and math.isfinite(s)):
        raise ConvergenceError(
            "multiplicative weights lost all mass (noise far larger than the total?)",
            x,
            SolveInfo("mw", False, 0, 0, "mass underflow", math.nan, math.nan),
        )
    x *= T / s
    return T


def _mw_simultaneous(
    items: list[Measurement], weights: list[float], x: np.ndarray, T: float, passes: int
) -> np.ndarray:
    blocks = [
        m.query_on_root if w == 1.0 else Weighted(m.query_on_root, w)
        for m, w in zip(items, weights, strict=True)
    ]
    Qw = blocks[0] if len(blocks) == 1 else VStack(blocks)
    Q = VStack([m.query_on_root for m in items]) if len(items) > 1 else items[0].query_on_root
    QwT = Qw.T
    y = np.concatenate([m.answers for m in items])
    for _ in range(passes):
        err = y - Q.matvec(x)
        expo = np.clip(QwT.matvec(err) / (2.0 * T), -_MAX_EXPONENT, _MAX_EXPONENT)
        x *= np.exp(expo)
        _renormalise(x, T)
    return x


def _mass(items: list[Measurement], total: Any) -> float:
    """MWEM's mass T: given, else a measured total, else the LS total."""
    if total is not None:
        T = float(total)
        if not math.isfinite(T) or T <= 0:
            raise ValueError(f"total must be a positive finite number, got {total!r}")
        return T
    n = items[0].query_on_root.shape[1]
    found: list[tuple[float, float]] = []  # (answer, variance)
    for m in items:
        Q = m.query_on_root
        sums = Q.matvec(np.ones(n))
        for i in np.nonzero(np.isclose(sums, n, rtol=1e-12, atol=0.0))[0][:16]:
            if np.allclose(Q.row(int(i)), 1.0, rtol=0.0, atol=1e-12):
                found.append((float(m.answers[i]), max(m.variance, 1e-300)))
    if found:
        a = np.array(found)
        estimate = float(np.sum(a[:, 0] / a[:, 1]) / np.sum(1.0 / a[:, 1]))
    else:
        estimate = float(least_squares(items).sum())
    return max(estimate, 1.0)
