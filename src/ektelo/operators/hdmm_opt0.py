"""HDMM's OPT_0 (McKenna, Miklau, Hay & Machanavajjhala, PVLDB 11(10), 2018,
§5.1): the p-Identity strategy optimised for a workload on n cells.

Public computation on the workload only. With Θ ≥ 0 of shape p×n and
D = diag(1 + 1ᵀΘ), the strategy A(Θ) = [I; Θ]·D⁻¹ has every column of L1
norm 1, and its error on W (up to the factor 2/ε²) is

    C(Θ) = tr((A(Θ)ᵀA(Θ))⁻¹ G),   G = WᵀW.

With M = I + ΘᵀΘ, R = I_p + ΘΘᵀ and Ĝ = D G D (Woodbury):

    C(Θ) = tr(Ĝ) − ⟨R⁻¹, ΘĜΘᵀ⟩,
    ∇C   = 2·(R⁻¹ ΘĜΘᵀ R⁻¹ Θ − R⁻¹ ΘĜ) + 2·1_p yᵀ,  y_i = (M⁻¹Ĝ)_ii / d_i,

so an evaluation costs one product of G with the n×p block Θ̃ᵀ = DΘᵀ and a
few p×p×n matrix products — never an n×n inverse. G is the library's own
Gram of the workload (`EMatrix.gram`: closed forms for Prefix, all ranges,
any weighted 1-D ranges, Kronecker factors, ...), applied as a matrix to
that block; a workload with fewer rows than cells is applied as Wᵀ(W·Θ̃ᵀ)
instead, which also gives Θ̃GΘ̃ᵀ = (WΘ̃ᵀ)ᵀ(WΘ̃ᵀ) for O(p²m). The optimiser
works on Θᵀ (n×p) so that those products take the library's column layout.

Cells of a run that no range of the workload splits share their column of Θ
(`merged_runs`): m ranges leave at most 2m + 1 runs, and Θ is optimised on them.
The minimiser is a projected L-BFGS (`minimise_nonnegative`) that stops
once the objective stalls, started from a slightly perturbed hierarchy of
intervals (`interval_levels`; further restarts: seeded random starts).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..matrix import Dense, Diagonal, EMatrix, Identity, Product, Sparse, VStack
from ._forms import MAX_GRAM_N, RangeForm, dense_gram, range_form, ranges_matrix

__all__ = [
    "GramTarget",
    "PIdentityObjective",
    "gram_target",
    "interval_levels",
    "merged_runs",
    "minimise_nonnegative",
    "opt_p_identity",
    "p_identity_objective",
    "p_identity_strategy",
    "p_identity_value",
]

# OPT_0 refuses problems whose Θ would hold more entries than this.
_MAX_THETA_ENTRIES = 2**24
# A workload's Gram is materialised (dense) when the workload has more than this
# many rows per column and no range structure: applying WᵀW through W would
# then cost more than a dense product.
_DENSE_ROWS_PER_COLUMN = 8
# Projected L-BFGS (`minimise_nonnegative`): stored curvature pairs, the stall
# test (relative decrease of the objective over a window of iterations),
# Armijo constant and backtracking limit.
_LBFGS_MEMORY = 10
_STALL_WINDOW = 10
_STALL_RTOL = 3e-4
_ARMIJO = 1e-4
_MAX_BACKTRACKS = 40
# The first start (`opt_p_identity`): _START_WEIGHT × a hierarchy of intervals
# (`interval_levels`) plus _START_NOISE × uniform [0, 1] entries. From it the
# optimiser stopped in 50–70 % of the iterations it needed from a uniform
# [0, 1] start, as low or lower, on Prefix(1024), Prefix(4096) and
# RandomRange(1000) over 4096 cells; weights 0.2–0.5 and noise 0–0.1 did alike.
_START_WEIGHT = 0.3
_START_NOISE = 0.01


@dataclass(frozen=True)
class GramTarget:
    """The workload side of C(Θ) for a matrix W on n cells: the diagonal of
    G = WᵀW, and G as the library gives it (`gram`) or, when W has fewer rows
    than columns, W itself (`factor`, G applied as Wᵀ·(W·X)). `form` is W's
    range form when it has one: (a, b, ω), W's rows as one weighted set of
    distinct 1-D ranges [a_q, b_q] with weights ω_q² summed (None otherwise)."""

    n: int
    diag: np.ndarray
    gram: EMatrix | None
    factor: EMatrix | None
    form: RangeForm | None


def gram_target(W: EMatrix) -> GramTarget:
    """OPT_0's view of the workload W (see `GramTarget`): its Gram's diagonal,
    the Gram from the library's closed forms (`EMatrix.gram`) or W itself
    when it has fewer rows than columns, and its range form."""
    n = W.shape[1]
    form = range_form(W, n)
    if form is None:
        diag = np.asarray(W.column_norms(2), dtype=np.float64)
    else:  # one weighted set of distinct ranges: a closed-form Gram
        W = ranges_matrix(n, form)
        a, b, w = form  # G_ii = Σ ω_q over the ranges q containing i: a difference array
        diag = np.cumsum(np.bincount(a, w, n + 1) - np.bincount(b + 1, w, n + 1))[:n]
    if W.shape[0] < n:
        return GramTarget(n, diag, None, W, form)
    G = W.gram()
    if form is None and W.shape[0] > _DENSE_ROWS_PER_COLUMN * n and n <= MAX_GRAM_N:
        G = Dense(dense_gram(W, n))
    return GramTarget(n, diag, G, None, form)


def merged_runs(target: GramTarget) -> tuple[GramTarget, np.ndarray] | None:
    """(the target on runs, the runs' first cells) when the target's ranges
    leave r < n runs of consecutive cells that no range splits: G = E G_r Eᵀ
    for the n×r run indicator E, G_r the Gram of the ranges over the runs.
    None without a range form or when every cell is a run."""
    if target.form is None:
        return None
    a, b, w = target.form
    keep = np.asarray(w) != 0
    a, b, w = a[keep], b[keep], w[keep]
    n = target.n
    starts = np.unique(np.concatenate([[0], a, b + 1]))
    starts = starts[starts < n]
    if starts.size == n:
        return None
    first = np.searchsorted(starts, a)  # the run that begins at a_q
    last = np.searchsorted(starts, b + 1) - 1  # the run that ends at b_q
    return gram_target(ranges_matrix(starts.size, (first, last, w))), starts


class PIdentityObjective:
    """C(Θ) and its gradient (module docstring) for Θᵀ = x.reshape(n, p), with
    the n×p work array allocated once. Per evaluation: one application of the
    Gram to an n×p block, three p×p×n products (a fourth, Θ̃GΘ̃ᵀ, unless the
    workload's rows give it) and never an n×n solve."""

    def __init__(self, target: GramTarget, p: int, sizes: np.ndarray | None = None):
        self.target, self.p, self.n = target, p, target.n
        # √s per merged cell (a run of s cells, `opt_p_identity`); None for single cells.
        self.root = None if sizes is None else np.sqrt(sizes)
        self._scaled = np.empty((self.n, p))

    def __call__(self, x: np.ndarray, grad: np.ndarray, scale: float = 1.0) -> float:
        """scale·C at Θᵀ = x.reshape(n, p); scale·∇C is written into `grad`
        (same layout). The scale is folded into p×p factors.

        With `sizes` s (runs merged), the target is that of the runs, G_r with
        G = E G_r Eᵀ, and x holds Zᵀ, Z = Θ_r·diag(√s) for the Θ equal to
        Θ_r[:, c] on every cell of run c. Then ΘΘᵀ = ZZᵀ, ΘĜΘᵀ = X G_r Xᵀ
        with X = Z·diag(e), and tr Ĝ = Σ_c (G_r)_cc e_c², e = √s + 1ᵀZ: the
        same expressions with Z for Θ and e for d. So is the gradient in Z (∇C
        summed over each run, over √s), and the Euclidean metric on Z is the
        one on Θ: the optimiser takes the full problem's steps, restricted to
        run-constant Θ."""
        p, n, t = self.p, self.n, self.target
        T = x.reshape(n, p)  # Θᵀ
        d = T.sum(axis=1)
        d += 1.0 if self.root is None else self.root
        X = np.multiply(T, d[:, None], out=self._scaled)  # Θ̃ᵀ = DΘᵀ
        K: np.ndarray | None = None
        if t.factor is not None:
            U = t.factor.matmat(X)  # W·Θ̃ᵀ
            B = t.factor.T.matmat(U)
            K = U.T @ U  # Θ̃GΘ̃ᵀ = ΘĜΘᵀ
        else:
            assert t.gram is not None
            B = t.gram.matmat(X)  # (Θ̃G)ᵀ, a fresh array
        B *= d[:, None]  # (ΘĜ)ᵀ
        if K is None:
            K = T.T @ B
        R = T.T @ T
        R.flat[:: p + 1] += 1.0
        # R = I + ΘΘᵀ has every eigenvalue ≥ 1: its small explicit inverse is accurate.
        R_inv = np.linalg.inv(R)
        diag_hat = t.diag * d**2
        value = float(diag_hat.sum() - np.vdot(R_inv, K))  # tr Ĝ − ⟨R⁻¹, ΘĜΘᵀ⟩
        c = 2.0 * scale
        V = B @ (R_inv * -c)  # (−c·R⁻¹ΘĜ)ᵀ
        y = (c * diag_hat + np.einsum("ij,ij->i", T, V)) / d
        out = grad.reshape(n, p)
        np.matmul(T, (R_inv @ K @ R_inv) * c, out=out)
        out += V
        out += y[:, None]
        return value * scale


def p_identity_objective(theta: np.ndarray, target: GramTarget) -> tuple[float, np.ndarray]:
    """C(Θ) and its gradient for Θ of shape p×n (allocating; the optimiser
    reuses one `PIdentityObjective`)."""
    p = theta.shape[0]
    grad = np.empty(theta.size)
    value = PIdentityObjective(target, p)(np.ascontiguousarray(theta.T).reshape(-1), grad)
    return value, np.ascontiguousarray(grad.reshape(-1, p).T)


def p_identity_value(theta: np.ndarray, target: GramTarget) -> float:
    """C(Θ) alone; the Identity's tr(G) when Θ has no rows or is zero."""
    if theta.shape[0] == 0 or not theta.any():
        return float(target.diag.sum())
    return p_identity_objective(theta, target)[0]


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """aᵀb for vectors, by BLAS (a threaded BLAS dot on a busy machine was
    measured at milliseconds: callers may pin BLAS to one thread)."""
    return float(np.dot(a, b))


def minimise_nonnegative(
    fun: Callable[[np.ndarray, np.ndarray], float],
    x0: np.ndarray,
    *,
    maxiter: int,
    memory: int = _LBFGS_MEMORY,
    window: int = _STALL_WINDOW,
    rtol: float = _STALL_RTOL,
) -> tuple[np.ndarray, float]:
    """Projected L-BFGS for min f(x) subject to x ≥ 0; returns (x, f(x)).

    `fun(x, g)` returns f(x) and writes ∇f(x) into g. The direction is the
    L-BFGS product with the projected gradient, zeroed on the variables held
    at their bound (x = 0 with ∂f > 0); the step is an Armijo backtracking
    search along the projection arc max(x + t·d, 0). It stops after `maxiter`
    iterations, when f fell by no more than rtol·|f| over the last `window`
    iterations, or when no descent step is found.

    Written for this problem instead of SciPy's L-BFGS-B, whose per-iteration
    overhead (≈100–200 ns per variable, Cauchy-point breakpoint search) was
    3–10× the cost of the objective itself here. With 10⁵–10⁶ variables the
    stored pairs outgrow the caches and the iteration is bound by memory
    traffic, so they are kept as the rows of one float32 matrix and the
    product uses the compact form of the inverse Hessian (Byrd, Nocedal &
    Schnabel, Math. Prog. 63, 1994, eq. 3.1): three passes over it per
    iteration instead of the two-loop recursion's 4·memory vector passes at
    twice the width (measured 11 → 5.5 ms per iteration at 64×4096 variables).
    float32 only shapes the direction, which is still checked for descent
    against the float64 gradient, and every step is taken in float64.
    """
    from scipy.linalg.lapack import dtrtrs  # lazy: scipy.linalg costs start-up (#41)

    N = x0.size
    m = memory
    x = np.maximum(x0, 0.0)
    g = np.empty(N)
    f = fun(x, g)
    x_new, g_new = np.empty(N), np.empty(N)
    q, u = np.empty(N), np.empty(N)  # projected gradient, then the step s; H·q, then y
    q32, u32 = np.empty(N, dtype=np.float32), np.empty(N, dtype=np.float32)
    positive, free = np.empty(N, dtype=bool), np.empty(N, dtype=bool)
    pairs = np.zeros((2 * m, N), dtype=np.float32)  # s_i in row i, y_i in row m + i
    sy = np.zeros((m, m))  # s_iᵀy_j (used for i ≤ j in storage order)
    yy = np.zeros((m, m))  # y_iᵀy_j
    order: list[int] = []  # rows of the stored pairs, oldest first
    pending = -1  # the newest pair, its products with the others not yet taken
    sy_new = yy_new = 1.0  # that pair's sᵀy and yᵀy, in float64
    history = [f]
    for _ in range(maxiter):
        if not math.isfinite(f):
            break
        np.greater(x, 0.0, out=positive)
        np.less_equal(g, 0.0, out=free)
        np.logical_or(free, positive, out=free)  # may move: x > 0 or ∂f ≤ 0
        np.multiply(g, free, out=q)  # the projected gradient
        if order:
            idx = np.array(order)
            if pending >= 0:  # the newest pair's products with the stored ones
                col = (pairs @ pairs[m + pending]).astype(np.float64)
                sy[idx, pending] = col[idx]
                yy[idx, pending] = yy[pending, idx] = col[m + idx]
                sy[pending, pending], yy[pending, pending] = sy_new, yy_new  # exact
                pending = -1
            np.copyto(q32, q, casting="same_kind")
            prods = (pairs @ q32).astype(np.float64)  # Sᵀq and Yᵀq
            # In storage order: R = the upper triangle of SᵀY (all LAPACK's trtrs
            # reads), D = diag(R), and
            # H = γI + [S γY]·[[R⁻ᵀ(D + γYᵀY)R⁻¹, −R⁻ᵀ], [−R⁻¹, 0]]·[Sᵀ; γYᵀ].
            R = sy[idx][:, idx]
            newest = order[-1]
            gamma = sy[newest, newest] / yy[newest, newest]
            c1 = dtrtrs(R, prods[idx])[0]
            rhs = np.diag(R) * c1 + gamma * (yy[idx][:, idx] @ c1 - prods[m + idx])
            coef = np.zeros(2 * m, dtype=np.float32)
            coef[idx] = dtrtrs(R, rhs, trans=1)[0]
            coef[m + idx] = -gamma * c1
            np.matmul(coef, pairs, out=u32)
            np.multiply(q, gamma, out=u)
            u += u32  # H·q
            u *= free
            slope = _dot(g, u)
        else:
            slope = 0.0
        if not slope > 0.0:  # no pairs, or not a descent direction: −∇, scaled
            order.clear()
            pending = -1
            largest = max(float(q.max()), -float(q.min()))
            if largest == 0.0:
                break
            np.multiply(q, 1.0 / largest, out=u)
        # Step x − t·u on the projection arc; s = x_new − x goes into q.
        t, accepted = 1.0, False
        for _ in range(_MAX_BACKTRACKS):
            if t == 1.0:
                np.subtract(x, u, out=x_new)
            else:
                np.multiply(u, -t, out=x_new)
                x_new += x
            np.maximum(x_new, 0.0, out=x_new)
            f_new = fun(x_new, g_new)
            np.subtract(x_new, x, out=q)
            if f_new <= f + _ARMIJO * _dot(g, q):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            if not order:
                break
            order.clear()  # retry along the projected steepest descent
            pending = -1
            continue
        np.subtract(g_new, g, out=u)  # y
        sy_step, yy_step = _dot(q, u), _dot(u, u)
        if sy_step > 1e-12 * yy_step:  # keep pairs with positive curvature only
            slot = order.pop(0) if len(order) == m else min(set(range(m)) - set(order))
            pairs[slot] = q
            pairs[m + slot] = u
            order.append(slot)
            pending, sy_new, yy_new = slot, sy_step, yy_step
        x, x_new = x_new, x
        g, g_new = g_new, g
        f = f_new
        history.append(f)
        if len(history) > window and history[-1 - window] - f <= rtol * abs(f):
            break
    return x, f


def opt_p_identity(
    target: GramTarget,
    p: int,
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Θ (p×n) minimising C(Θ) over Θ ≥ 0, and C there: the best of `restarts`
    starts (the first a perturbed hierarchy of intervals, `interval_levels`;
    the others with entries uniform in [0, 1]), `start` (if given) and Θ = 0
    (the Identity).

    When no range tells apart the cells of a run of consecutive cells
    (`merged_runs`: the r ≤ 2m + 1 runs between the ends of m ranges), Θ is
    optimised constant on each run, in p×r variables (`PIdentityObjective`
    with `sizes`). The runs refine the εktelo paper's workload-based partition
    (§"Workload-based partition selection"), but the strategy stays a
    p-Identity strategy on all n cells. On RandomRange(1000) over 4096 cells
    (r = 1544) the run-constant optimum erred 0.1 % more than the unrestricted
    one after as many iterations, each 2.6× cheaper."""
    n = target.n
    if p * n > _MAX_THETA_ENTRIES:
        raise ValueError(
            f"OPT_0 with p = {p} on {n} cells needs {p * n} parameters (limit "
            f"{_MAX_THETA_ENTRIES}); give the workload Kronecker structure or a smaller p"
        )
    best = np.zeros((p, n))
    best_value = float(target.diag.sum())
    if best_value <= 0:
        return best, 0.0
    scale = 1.0 / best_value  # the Identity strategy scores 1
    runs = merged_runs(target)
    if runs is None:
        objective = PIdentityObjective(target, p)
    else:
        merged, first = runs
        length = np.diff(np.append(first, n))
        objective = PIdentityObjective(merged, p, length.astype(np.float64))
        root = np.sqrt(length)[:, None]

    def variables(theta: np.ndarray) -> np.ndarray:
        """The optimiser's variables for Θ: Θᵀ, or Zᵀ (run sums of Θᵀ over √s,
        `PIdentityObjective`) on runs."""
        if runs is None:
            return np.ascontiguousarray(theta.T)
        return np.add.reduceat(theta.T, first, axis=0) / root

    def fun(x: np.ndarray, grad: np.ndarray) -> float:
        return objective(x, grad, scale)

    starts = [] if start is None else [variables(start)]
    for k in range(restarts):
        noise = rng.uniform(0.0, 1.0, size=(p, n))
        if k == 0:  # the first start: a hierarchy of intervals, slightly perturbed
            noise *= _START_NOISE
            noise += _START_WEIGHT * interval_levels(p, n)
        starts.append(variables(noise))
    for x0 in starts:
        x, f = minimise_nonnegative(fun, x0.reshape(-1), maxiter=maxiter)
        if f / scale < best_value:
            best_value = f / scale
            z = x.reshape(-1, p)
            cells = z if runs is None else np.repeat(z / root, length, axis=0)
            best = np.ascontiguousarray(cells.T)
    return best, best_value


def interval_levels(p: int, n: int) -> np.ndarray:
    """p rows of interval indicators in levels, coarsest first, each level
    cutting [0, n) into equal intervals; from the finest, each level takes
    three quarters of the rows left (p = 64: levels of 1, 3, 12 and 48
    intervals, like a hierarchy of branching 3–4). OPT_0's first start,
    weighted (`_START_WEIGHT`)."""
    counts: list[int] = []
    left = p
    while left > 0:
        k = max(1, left - left // 4)
        counts.append(k)
        left -= k
    rows = np.zeros((p, n))
    r = 0
    for k in reversed(counts):
        edges = np.linspace(0, n, k + 1).round().astype(np.int64)
        for i in range(k):
            rows[r, edges[i] : edges[i + 1]] = 1.0
            r += 1
    return rows


def p_identity_strategy(theta: np.ndarray) -> EMatrix:
    """A(Θ) = [I; Θ]·D⁻¹ without its all-zero rows (Identity when Θ = 0)."""
    n = theta.shape[1]
    rows = theta[theta.any(axis=1)]
    if rows.shape[0] == 0:
        return Identity(n)
    d = 1.0 + rows.sum(axis=0)
    extra: EMatrix = Sparse(rows) if np.count_nonzero(rows) < 0.25 * rows.size else Dense(rows)
    return Product(VStack([Identity(n), extra]), Diagonal(1.0 / d))
