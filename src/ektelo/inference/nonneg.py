"""Non-negative least squares (paper §5.5): `nnls`, a **Public** operator.

    x̂ = argmin_{x ≥ 0} f(x) = ½‖D (Q x − y)‖₂²,   g = Qᵀ D² (Q x − y),

on the weighted system of `_system`, using only products with Q and Qᵀ.
The methods (`nnls` documents when each runs):

* "tree_newton" — one measurement of a tree of range queries: semismooth
  Newton on the cells' parents, their cells eliminated exactly (`tree_nnls`);
* "tree_active_set" — the same trees where that declines: primal–dual
  active-set steps (Hintermüller, Ito & Kunisch, SIAM J. Optim. 2002), each
  an exact tree solve with the active cells held at 0 (`tree.lstsq`);
* "projected_newton" — any matrix: the primal–dual active-set steps by LSMR
  (or exactly, on few free columns: `_FreeBlock`), then Bertsekas' (SIAM J.
  Control Optim. 1982) projected Newton to convergence;
* "lbfgsb" — scipy's L-BFGS-B with bounds x ≥ 0 (the original εktelo choice).

``groups="columns"`` (`columns`): on the groups of cells the measurements
cannot tell apart, solved to the optimum (MWEM's NNLS variants, §9.1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsmr

from .. import _validate as check
from ..matrix import EMatrix, Hierarchy, Partition
from ..measurement import Measurement
from . import columns, structured, tree_nnls
from ._system import (
    FAIL_FACTOR,
    ConvergenceError,
    Counter,
    Estimate,
    SolveInfo,
    System,
    as_list,
    build_system,
    check_maxiter,
    check_root,
    norm,
    public_rows,
    run_lsmr,
    start_vector,
)
from .tree import lstsq as tree_lstsq

__all__ = ["TREE_NEWTON_ROUNDS", "nnls"]

_METHODS = ("auto", "projected_newton", "lbfgsb")


def nnls(
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    start: Any = None,
    tol: float = 1e-6,
    maxiter: int | None = None,
    groups: Partition | list[Partition] | str | None = None,
    prior: Any = None,
    exact_scale: float = 1e-3,
    method: str = "auto",
) -> Estimate:
    """Non-negative weighted least squares on the root vector (§5.5; Public).

    Stopping rule (every method): the projected gradient — g_i where
    x_i > 0, min(g_i, 0) where x_i = 0 — has ∞-norm ≤ tol·‖Qᵀ D² y‖∞ (the
    gradient's size at x = 0, the problem's scale). With the default tol the
    objective matches `scipy.optimize.nnls` to ~1e-6 relative or better on
    small problems. Known limitation: a known total or prior enters as rows
    weighted 1/exact_scale (10³), which dominate that scale (~10⁶×), so the
    rule then stops early — on 60 random ranges over 256×256 with a known
    total, at 1.29× the optimal objective. Measured against the
    measurements' own scale instead, the penalised problem is too ill
    conditioned for the projected steps to converge; pass a tighter tol
    (and a larger exact_scale) when the optimum matters, as
    ``groups="columns"`` does on its reduced problems. The limitation does not apply where the
    active-set steps are exact (few free variables, see below): they run
    to the optimum's KKT conditions whatever the tolerance.

    Methods:
        "auto" (default): for one measurement of a tree of range queries
            (H2, HB, QuadTree) without public facts, "tree_newton" —
            semismooth Newton on the cells' parents with their cells
            eliminated exactly, each round one tree solve on the parents
            (`tree_nnls`); it stops at the exact KKT point, and its computed
            bound on the projected gradient must pass the stopping rule —
            in 1-D, and in d-D where the tree's parents of cells are all
            alike (b^h × b^h, …), with ≤ 64 cells per parent; else
            "tree_active_set": the primal–dual active-set steps below, each
            solved exactly in O(N) by `tree.lstsq` with the active cells held
            at 0, finished by projected Newton if they stall. Other
            matrices: "projected_newton".
        "projected_newton": an active-set Newton method whose steps are
            LSMR solves restricted to the free variables, so it keeps LSMR's
            fast convergence on implicit strategies. Phase 1: primal–dual
            active-set steps (Hintermüller, Ito & Kunisch 2002) from the
            start — fix A = {x − 0.1·g/diag(AᵀA) ≤ 0} at 0, solve for the
            rest — while the projected objective keeps improving (they move
            many bounds per step). Phase 2, to convergence: Bertsekas'
            (1982) projected Newton — fix the ε-binding variables (near 0,
            gradient pushing down), Newton step on the others by LSMR,
            Armijo backtracking along the projected path max(x + t·d, 0),
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
        start: None or "ls" (the LS estimate: one extra LS solve; phase 1
            uses its signs, L-BFGS-B and phase 2 its clipped values),
            "zeros", or an initial estimate (an array on the root, or an
            `Estimate`; never modified). "tree_newton" needs none.
        maxiter: outer iteration limit (active-set + Newton steps: 200;
            L-BFGS-B: 15000; "tree_newton"'s parent solves: 50).
        total, tol, groups, prior, exact_scale: as in `least_squares`
            (``groups``: NNLS on the groups, in the orthonormal basis of
            group-uniform vectors; x ≥ 0 there iff on the groups).
            ``groups="columns"``: the coarsest partition the measured
            queries determine (cells whose columns are equal in every
            query), found exactly when each measurement's rows are disjoint
            (MWEM's), solved to the optimum — see `columns`: the tolerance
            tightened on up to 512 groups, a warm `start` (or a previous
            call's `Estimate`, which also keeps the queries and groups it
            found) tried first beyond. ``"measured"``: as in `least_squares`.

    Returns:
        An `Estimate` (x ≥ 0 on the root's domain).

    Raises:
        ConvergenceError: the solver stopped with the projected gradient
            still above 1000·tol of the scale.
    """
    if method not in _METHODS:
        raise ValueError(
            f"method must be 'auto', 'projected_newton' or 'lbfgsb', got {method!r}"
        )
    items = as_list(measurements)
    root_shape, size = check_root(items)
    tol = check.probability(tol, "tol")
    exact_scale = check.unit_interval(exact_scale, "exact_scale", include_one=True)
    if isinstance(groups, str) and groups == "columns":
        options = {"total": total, "tol": tol, "maxiter": maxiter, "prior": prior,
                   "exact_scale": exact_scale, "method": method}  # fmt: skip
        return columns.nnls_on_columns(items, size, start, nnls, **options)
    facts = public_rows(prior, total, size)
    groups = structured.chosen_groups(groups, items)
    on = None
    if groups is not None:
        on = structured.groups_of(groups, size, orthonormal=True)
        queries = [(on.query(m), m.answers, m.noise_scale) for m in items]
        system = build_system(queries, [(on.fact(M), y) for M, y in facts], on.size, exact_scale)
    else:
        queries = [(m.query_on_root, m.answers, m.noise_scale) for m in items]
        system = build_system(queries, facts, size, exact_scale)
    if not isinstance(start, str) and start is not None:
        x0 = start_vector(start, size)
        start = x0 if on is None else on.reduce(x0)
    expand = (lambda v: v) if on is None else on.expand
    try:
        x, info = _solve(system, start, tol, maxiter, method)
    except ConvergenceError as err:  # the best estimate, on the root
        raise err.on_root(expand, root_shape) from err
    return Estimate(expand(x).reshape(root_shape), info)


def _solve(
    system: System, start: Any, tol: float, maxiter: Any, method: str
) -> tuple[np.ndarray, SolveInfo]:
    counter = Counter(system.A)
    tree = structured.tree_of(system.A) if method == "auto" and not system.facts else None
    if tree is not None:
        rounds = check_maxiter(maxiter, TREE_NEWTON_ROUNDS)
        exact = tree_nnls.solve(tree, system.b, max_rounds=rounds)
        if exact is not None and exact.gradient_bound <= tol * exact.gradient_scale:
            return exact.x, _tree_newton_info(exact, system)
    x0 = _nnls_start(start, system, counter, tree)
    scale = float(np.abs(counter.rmatvec(system.b)).max())
    if scale == 0.0:  # the gradient vanishes at x = 0: it is optimal (convex f)
        x = np.zeros(system.size)
        r = counter.matvec(x) - system.b
        return x, SolveInfo(method, True, 0, counter.count, "x = 0 is optimal", norm(r), 0.0)
    if method == "lbfgsb":
        x, info = _lbfgsb(system, counter, x0, tol, scale, check_maxiter(maxiter, 15_000))
    elif tree is not None:
        x, info = _tree_active_set(tree, system, counter, x0, tol, scale, maxiter)
    else:
        x, info = _projected_newton(system, counter, x0, tol, scale, check_maxiter(maxiter, 200))
    if not np.all(np.isfinite(x)):
        raise ConvergenceError("NNLS produced non-finite values", Estimate(x, info))
    if not info.converged and info.optimality > FAIL_FACTOR * tol:
        raise ConvergenceError(
            f"NNLS ({method}) stopped after {info.iterations} iterations: {info.message} "
            f"(projected gradient {info.optimality:.2e} of scale > tolerance {tol:.0e})",
            Estimate(x, info),
        )
    return x, info


def _tree_newton_info(exact: tree_nnls.TreeNNLS, system: System) -> SolveInfo:
    """The tree NNLS's rounds; the measured residual and projected gradient
    (two products) when asked for."""

    def measure() -> tuple[float, float]:
        r = system.A.matvec(exact.x) - system.b
        g = system.A.T.matvec(r)
        scale = exact.gradient_scale
        return norm(r), (_projected_gradient_norm(exact.x, g) / scale if scale > 0 else 0.0)

    message = "every parent's segment settled: the exact KKT point"
    return SolveInfo("tree_newton", True, exact.rounds, 0, message, measure=measure)


def _nnls_start(
    start: Any, system: System, counter: Counter, tree: Hierarchy | None = None
) -> np.ndarray:
    if start is None:
        start = "ls"
    if isinstance(start, str):
        if start == "zeros":
            return np.zeros(system.size)
        if start == "ls" and tree is not None:
            return tree_lstsq(tree, system.b)
        if start == "ls":
            m, n = system.A.shape
            x, *_ = run_lsmr(counter, system.b, 1e-8, min(10 * min(m, n) + 100, 100_000))
            return x  # unclipped: its sign pattern seeds the active set
        raise ValueError(f"start must be 'ls', 'zeros', an array or an Estimate, got {start!r}")
    return np.asarray(start, dtype=np.float64)  # a fresh vector (start_vector)


# The default cap on the tree solver's semismooth Newton rounds (`tree_nnls`;
# HB measurements settle in 1–4; `maxiter` overrides it): past it the active-set
# steps finish the fit.
TREE_NEWTON_ROUNDS = 50


# The ufuncs' own reductions (NumPy's Python-level wrappers cost about a
# microsecond per call on top).
_min, _max = np.minimum.reduce, np.maximum.reduce


def _projected_gradient_norm(x: np.ndarray, g: np.ndarray) -> float:
    """max |P(g)|: the projected gradient is g where x > 0, min(g, 0) where
    x ≤ 0. One N-sized temporary (NNLS evaluates this every step; masked
    reductions are slower). NaN in g gives NaN."""
    projected = np.minimum(g, 0.0)
    np.copyto(projected, g, where=np.greater(x, 0.0))
    return max(float(_max(projected)), -float(_min(projected))) if projected.size else 0.0


def _objective(counter: Counter, b: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float]:
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
            from scipy.linalg import lstsq as dense_lstsq  # lazy: scipy.linalg costs start-up (#41)

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
    system: System, counter: Counter, x0: np.ndarray, tol: float, scale: float, maxiter: int
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
            d, *_ = run_lsmr(counter, r, inner_tol, _INNER_MAXITER, mask=free)
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
    info = SolveInfo("projected_newton", converged, it, counter.count, message, norm(r), opt)
    return x, info


# Inner LSMR solves are truncated Newton steps: this many iterations at most.
_INNER_MAXITER = 50


def _active_set_phase(
    counter: Counter,
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
            d, *_ = run_lsmr(counter, rf, 1e-10, steps, mask=free)
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
    system: System,
    counter: Counter,
    x0: np.ndarray,
    tol: float,
    scale: float,
    maxiter: int | None,
) -> tuple[np.ndarray, SolveInfo]:
    """NNLS on one tree measurement: the primal–dual active-set steps of
    `_active_set_phase`, each solved exactly by `tree.lstsq` with the
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
    limit = check_maxiter(maxiter, 200)
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
                    "projected gradient below tolerance", norm(r), opt,
                )  # fmt: skip
                return x, info
        # x − c·g/h ≤ 0, with h > 0 (g scaled in place: its last use)
        active = np.less_equal(x, np.multiply(g, step, out=g), out=np.empty(x.size, dtype=bool))
        del r, g
        if previous is not None and np.array_equal(active, previous):
            break  # the iteration has stalled short of the tolerance
        previous = active
        x = tree_lstsq(tree, b, zero=active)
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
    system: System, counter: Counter, x0: np.ndarray, tol: float, scale: float, maxiter: int
) -> tuple[np.ndarray, SolveInfo]:
    b = system.b

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        r = counter.matvec(x) - b
        return 0.5 * float(np.dot(r, r)), counter.rmatvec(r)

    from scipy.optimize import Bounds, minimize  # lazy: only where used

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
        "lbfgsb", opt <= tol, int(res.nit), counter.count, str(res.message), norm(r), opt
    )
    return x, info

