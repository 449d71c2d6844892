"""HDMM: strategies optimised for the workload (McKenna, Miklau, Hay &
Machanavajjhala, "Optimizing Error of High-Dimensional Statistical Queries
Under Differential Privacy", PVLDB 11(10), 2018).

Public operator (paper §5.3, query selection): the strategy depends only on
the workload. Under the Laplace matrix mechanism the expected total squared
error of strategy A on workload W at privacy ε is

    Err(W, A) = (2/ε²) · ‖A‖₁² · ‖W A⁺‖_F² = (2/ε²) · ‖A‖₁² · tr((AᵀA)⁺ WᵀW),

and every parametrisation below has ‖A‖₁ = 1, so only the trace is minimised.

* OPT_0 (HDMM §5.1), p-Identity strategies: A(Θ) = [I; Θ]·D⁻¹ with Θ ≥ 0 of
  shape p×n and D = diag(1 + 1ᵀΘ) (every column has L1 norm 1). With
  M = I + ΘᵀΘ, R = I_p + ΘΘᵀ and Ĝ = D G D (G = WᵀW),

      C(Θ) = tr(M⁻¹ Ĝ) = tr(Ĝ) − ⟨R⁻¹Θ, ΘĜ⟩            (Woodbury),
      ∇C   = −2·R⁻¹ (ΘĜ) M⁻¹ + 2·1_p yᵀ,  y_i = (M⁻¹Ĝ)_ii / d_i,
      (ΘĜ)M⁻¹ = ΘĜ − (ΘĜΘᵀ) R⁻¹ Θ,

  minimised with L-BFGS-B over Θ ≥ 0 from seeded random starts. One
  evaluation costs p products G·x (the workload's own implicit Gram, so
  O(n·p) for Prefix) plus O(p²n) — never an n×n inverse.
* OPT_⊗ (HDMM §5.2), Kronecker workloads W = W₁ ⊗ … ⊗ W_d: for a Kronecker
  strategy A = A₁ ⊗ … ⊗ A_d, ‖A‖₁ = Π‖A_i‖₁ and
  tr((AᵀA)⁻¹ WᵀW) = Π_i tr((A_iᵀA_i)⁻¹ W_iᵀW_i), so each factor is an
  independent OPT_0 problem. For a union of products W = [W⁽¹⁾; …; W⁽ᵏ⁾] the
  error is Σ_j Π_i tr((A_iᵀA_i)⁻¹ G_i⁽ʲ⁾); cyclic block coordinate descent
  optimises A_i by OPT_0 on the weighted Gram Σ_j c_j G_i⁽ʲ⁾ with
  c_j = Π_{i'≠i} tr((A_i'ᵀA_i')⁻¹ G_i'⁽ʲ⁾) held fixed, which is exact for
  the one-attribute subproblem; a d-dimensional `RangeQueries` is treated as
  the union of its m queries, each a product of 1-D intervals. (HDMM's OPT_+,
  several Kronecker strategies side by side, is not implemented.)
* OPT_M (HDMM §5.3), marginal workloads (unions of Kronecker products of
  Identity and Total): the strategy is a weighted set of all 2^d marginals,
  M(θ) = [θ_a·M_a]_{a ⊆ [d]}, with ‖M(θ)‖₁ = Σθ_a. Every Gram in play is a
  combination of Q_a = ⊗_{i∈a} I ⊗_{i∉a} 11ᵀ, and these share one
  eigenbasis: on the eigenspace indexed by s ⊆ [d] (multiplicity
  Π_{i∈s}(n_i − 1)) the eigenvalue of Σ_a u_a Q_a is
  λ_s(u) = Σ_{a ⊇ s} u_a Π_{i∉a} n_i. Hence, with u = θ² and w the
  workload's Gram coefficients, the error has the closed form

      (Σ_a θ_a)² · Σ_s mult_s · λ_s(w) / λ_s(θ²),

  which is minimised over θ ≥ 0 by L-BFGS-B in O(d·2^d) per evaluation.

`hdmm` runs OPT_0 on a workload without Kronecker structure, OPT_⊗ on one
with it, and also OPT_M on marginal workloads, returning the candidate of
least error. Randomness is a NumPy generator seeded by `seed` (public
computation: the seed only makes the selection reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, minimize

from ..matrix import (
    Dense,
    EMatrix,
    Identity,
    Kronecker,
    Ones,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ..matrix import Diagonal as _Diagonal
from ._greedy_h import _dense_gram, _range_form

__all__ = ["hdmm"]

# OPT_0 refuses problems whose Θ would hold more entries than this.
_MAX_THETA_ENTRIES = 2**24
# A workload Gram is materialised (dense) when the workload has more than this
# many rows per column: applying it implicitly would cost more than G·x.
_DENSE_ROWS_PER_COLUMN = 8
# Up to this size a weighted sum of 1-D range Grams is formed densely (O(n² + m)).
_DENSE_RANGE_GRAM_N = 2048


def hdmm(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 2,
    seed: int = 0,
    maxiter: int = 1000,
    rounds: int = 4,
) -> EMatrix:
    """HDMM's strategy optimisation (McKenna et al., PVLDB 2018) for `workload`.

    Args:
        workload: the query matrix (public). Kronecker products, unions of them
            (`VStack` of `Kronecker`, possibly `Weighted`), marginal workloads and
            d-dimensional `RangeQueries` are optimised per attribute; anything
            else is optimised as a whole over its n columns.
        p: extra rows of each p-Identity strategy: an int, or one per attribute.
            Default max(1, n_i // 16) for an attribute of n_i cells.
        restarts: random starting points per OPT_0 problem (the best is kept).
        seed: seed of the starting points; the result is a deterministic
            function of (workload, p, restarts, seed, maxiter, rounds).
        maxiter: L-BFGS-B iteration limit per OPT_0/OPT_M problem.
        rounds: block coordinate descent sweeps for unions of products.

    Returns:
        An implicit strategy with L1 sensitivity 1 (up to rounding) whose row
        space contains the workload's: a p-Identity matrix, a `Kronecker` of
        them, or a `VStack` of weighted marginals.
    """
    return _optimise(
        workload, p=p, restarts=restarts, seed=seed, maxiter=maxiter, rounds=rounds
    ).strategy


@dataclass(frozen=True)
class _Result:
    strategy: EMatrix
    error: float  # tr((AᵀA)⁺ WᵀW) with ‖A‖₁ = 1
    method: str  # "OPT_0", "OPT_kron" or "OPT_M"


def _optimise(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 2,
    seed: int = 0,
    maxiter: int = 1000,
    rounds: int = 4,
) -> _Result:
    if not isinstance(workload, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(workload).__name__}")
    restarts = _int_at_least(restarts, "restarts", 1)
    maxiter = _int_at_least(maxiter, "maxiter", 1)
    rounds = _int_at_least(rounds, "rounds", 1)
    rng = np.random.default_rng(_int_at_least(seed, "seed", 0))
    terms = _product_terms(workload)
    if terms is None:
        dims: tuple[int, ...] = (workload.shape[1],)
        families: list[_Family] = [_FactorFamily([workload])]
        coefs = np.ones(1)
    else:
        dims, families, coefs = terms
    ps = _p_per_attribute(p, dims)
    kron = _opt_kron(families, coefs, ps, rng, restarts=restarts, maxiter=maxiter, rounds=rounds)
    best = kron
    if len(dims) > 1:
        marg = _marginal_coefficients(workload, dims)
        if marg is not None:
            opt_m = _opt_marginals(marg, dims, rng, restarts=restarts, maxiter=maxiter)
            if opt_m.error < best.error:
                best = opt_m
    return best


def _int_at_least(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}")
    return int(value)


def _p_per_attribute(p: int | Sequence[int] | None, dims: tuple[int, ...]) -> tuple[int, ...]:
    if p is None:
        return tuple(max(1, n // 16) for n in dims)
    if isinstance(p, (int, np.integer)) and not isinstance(p, bool):
        return (_int_at_least(p, "p", 1),) * len(dims)
    values = tuple(p)
    if len(values) != len(dims):
        raise ValueError(f"p has {len(values)} entries; the workload has {len(dims)} attributes")
    return tuple(_int_at_least(v, "p", 1) for v in values)


# -- Gram matrices ---------------------------------------------------------------


@dataclass(frozen=True)
class _Gram:
    """G = WᵀW through G·X and its diagonal; `dense` when it is materialised."""

    n: int
    apply: Callable[[np.ndarray], np.ndarray]
    diag: np.ndarray
    dense: np.ndarray | None = None

    @staticmethod
    def from_dense(G: np.ndarray) -> _Gram:
        G = (G + G.T) / 2
        return _Gram(G.shape[0], lambda X: G @ X, np.diag(G).copy(), G)

    @staticmethod
    def of(W: EMatrix) -> _Gram:
        n = W.shape[1]
        if isinstance(W, Identity):
            return _Gram(n, lambda X: X, np.ones(n))
        if W.shape[0] > _DENSE_ROWS_PER_COLUMN * n:
            form = _range_form(W, n)
            if form is not None:
                return _Gram.from_dense(_range_gram(n, *form))
            return _Gram.from_dense(_dense_gram(W, n))
        op = W.gram()
        return _Gram(n, op.matmat, np.asarray(W.column_norms(2), dtype=np.float64))

    @staticmethod
    def combine(grams: Sequence[_Gram], coefs: np.ndarray) -> _Gram:
        """Σ_j c_j G_j (terms with c_j = 0 dropped)."""
        pairs = [(g, float(c)) for g, c in zip(grams, coefs, strict=True) if c != 0]
        if not pairs:
            pairs = [(grams[0], 0.0)]
        n = pairs[0][0].n
        diag = np.zeros(n)
        for g, c in pairs:
            diag += c * g.diag
        dense = [(g.dense, c) for g, c in pairs if g.dense is not None]
        if len(dense) == len(pairs):
            total = np.zeros((n, n))
            for G, c in dense:
                total += c * G
            return _Gram.from_dense(total)

        def apply(X: np.ndarray) -> np.ndarray:
            out = np.zeros((n, X.shape[1]))
            for g, c in pairs:
                out += c * g.apply(X)
            return out

        return _Gram(n, apply, diag)


def _range_gram(n: int, a: np.ndarray, b: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """Σ_q ω_q 1_q 1_qᵀ for intervals [a_q, b_q], in O(n² + m): for i ≤ j the
    entry counts the queries with a ≤ i and b ≥ j (a 2-D dominance sum)."""
    C = np.zeros((n, n))
    np.add.at(C, (a, b), w2)
    S = np.cumsum(C, axis=0)[:, ::-1].cumsum(axis=1)[:, ::-1]
    upper = np.triu(S)
    return upper + np.triu(S, 1).T


# -- OPT_0: p-Identity strategies ---------------------------------------------


def _p_identity_objective(theta: np.ndarray, gram: _Gram) -> tuple[float, np.ndarray]:
    """C(Θ) = tr((A(Θ)ᵀA(Θ))⁻¹ G) and its gradient (module docstring)."""
    p = theta.shape[0]
    d = 1.0 + theta.sum(axis=0)
    B = gram.apply((theta * d).T).T * d  # Θ Ĝ  (p×n), Ĝ = D G D
    # R = I + ΘΘᵀ has every eigenvalue ≥ 1, so its explicit (small, p×p)
    # inverse is accurate; it is also far cheaper than repeated triangular solves.
    R_inv = np.linalg.inv(np.eye(p) + theta @ theta.T)
    S = R_inv @ theta  # R⁻¹Θ
    V = R_inv @ B  # R⁻¹ΘĜ
    diag_hat = gram.diag * d**2
    value = float(diag_hat.sum() - np.sum(S * B))
    grad = -2.0 * (V - (R_inv @ (B @ theta.T)) @ S)
    y = (diag_hat - np.sum(theta * V, axis=0)) / d
    grad += 2.0 * y[None, :]
    return value, grad


def _p_identity_value(theta: np.ndarray, gram: _Gram) -> float:
    if theta.shape[0] == 0 or not theta.any():
        return float(gram.diag.sum())
    return _p_identity_objective(theta, gram)[0]


def _opt_p_identity(
    gram: _Gram,
    p: int,
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Θ minimising C(Θ) (L-BFGS-B, Θ ≥ 0): the best of `restarts` random
    starts, `start` (if given) and Θ = 0 (the Identity strategy)."""
    n = gram.n
    if p * n > _MAX_THETA_ENTRIES:
        raise ValueError(
            f"OPT_0 with p = {p} on {n} cells needs {p * n} parameters (limit "
            f"{_MAX_THETA_ENTRIES}); give the workload Kronecker structure or a smaller p"
        )
    best = np.zeros((p, n))
    best_value = float(gram.diag.sum())
    if best_value <= 0:
        return best, 0.0
    scale = 1.0 / best_value  # the Identity strategy scores 1

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = _p_identity_objective(x.reshape(p, n), gram)
        return value * scale, grad.reshape(-1) * scale

    starts = [] if start is None else [start]
    starts += [rng.uniform(0.0, 1.0, size=(p, n)) for _ in range(restarts)]
    for x0 in starts:
        res = minimize(
            fun,
            x0.reshape(-1),
            jac=True,
            method="L-BFGS-B",
            bounds=Bounds(0.0, np.inf),
            options={"maxiter": maxiter},
        )
        theta = np.maximum(res.x.reshape(p, n), 0.0)
        value = _p_identity_value(theta, gram)
        if value < best_value:
            best, best_value = theta, value
    return best, best_value


def _p_identity_matrix(theta: np.ndarray) -> EMatrix:
    """A(Θ) = [I; Θ]·D⁻¹ without its all-zero rows (Identity when Θ = 0)."""
    n = theta.shape[1]
    rows = theta[theta.any(axis=1)]
    if rows.shape[0] == 0:
        return Identity(n)
    d = 1.0 + rows.sum(axis=0)
    extra: EMatrix = Sparse(rows) if np.count_nonzero(rows) < 0.25 * rows.size else Dense(rows)
    return Product(VStack([Identity(n), extra]), _Diagonal(1.0 / d))


# -- OPT_⊗: one p-Identity strategy per attribute --------------------------------


class _Family:
    """The k terms' factors on one attribute of n cells."""

    n: int

    def weighted_gram(self, coefs: np.ndarray) -> _Gram:  # pragma: no cover - interface
        raise NotImplementedError

    def values(self, theta: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        """tr((A(Θ)ᵀA(Θ))⁻¹ G_j) for every term j."""
        raise NotImplementedError


class _FactorFamily(_Family):
    """Explicit factor matrices, one per term."""

    def __init__(self, factors: Sequence[EMatrix]):
        cache: dict[EMatrix, _Gram] = {}  # equal factors (value semantics) share a Gram
        for f in factors:
            if f not in cache:
                cache[f] = _Gram.of(f)
        self.grams = [cache[f] for f in factors]
        self.n = self.grams[0].n

    def weighted_gram(self, coefs: np.ndarray) -> _Gram:
        if len(self.grams) == 1:
            g = self.grams[0]
            c = float(coefs[0])
            if g.dense is not None:
                return _Gram.from_dense(c * g.dense)
            return _Gram(g.n, lambda X: c * g.apply(X), c * g.diag)
        return _Gram.combine(self.grams, coefs)

    def values(self, theta: np.ndarray) -> np.ndarray:
        memo: dict[int, float] = {}
        for g in self.grams:
            if id(g) not in memo:
                memo[id(g)] = _p_identity_value(theta, g)
        return np.array([memo[id(g)] for g in self.grams])


class _RangeFamily(_Family):
    """Term j is the single interval [a_j, b_j] (a d-D range's j-th side)."""

    def __init__(self, n: int, a: np.ndarray, b: np.ndarray):
        self.n, self.a, self.b = n, a, b

    def weighted_gram(self, coefs: np.ndarray) -> _Gram:
        if self.n <= _DENSE_RANGE_GRAM_N or self.a.size > _DENSE_ROWS_PER_COLUMN * self.n:
            return _Gram.from_dense(_range_gram(self.n, self.a, self.b, coefs))
        a, b, n = self.a, self.b, self.n

        def apply(X: np.ndarray) -> np.ndarray:
            csum = np.vstack([np.zeros((1, X.shape[1])), np.cumsum(X, axis=0)])
            sums = (csum[b + 1] - csum[a]) * coefs[:, None]
            diff = np.zeros((n + 1, X.shape[1]))
            np.add.at(diff, a, sums)
            np.add.at(diff, b + 1, -sums)
            return np.cumsum(diff[:n], axis=0)

        diag = np.zeros(n + 1)
        np.add.at(diag, a, coefs)
        np.add.at(diag, b + 1, -coefs)
        return _Gram(n, apply, np.cumsum(diag[:n]))

    def values(self, theta: np.ndarray) -> np.ndarray:
        # 1_qᵀ D M⁻¹ D 1_q = ‖D 1_q‖² − (ΘD1_q)ᵀ R⁻¹ (ΘD1_q).
        d = 1.0 + theta.sum(axis=0)
        sq = np.concatenate(([0.0], np.cumsum(d**2)))
        out = sq[self.b + 1] - sq[self.a]
        if theta.shape[0] and theta.any():
            Y = np.hstack([np.zeros((theta.shape[0], 1)), np.cumsum(theta * d, axis=1)])
            Z = Y[:, self.b + 1] - Y[:, self.a]
            R_inv = np.linalg.inv(np.eye(theta.shape[0]) + theta @ theta.T)
            out = out - np.sum(Z * (R_inv @ Z), axis=0)
        return out


def _flatten_kron(M: EMatrix) -> list[EMatrix]:
    if isinstance(M, Kronecker):
        return [g for f in M.factors for g in _flatten_kron(f)]
    return [M]


def _kron_terms(W: EMatrix) -> list[tuple[float, list[EMatrix]]] | None:
    """W = [c₁·K₁; c₂·K₂; …] with Kronecker products K_j (nested ones flattened)
    as [(c_j², factors of K_j)], or None when W is not such a stack."""
    terms: list[tuple[float, list[EMatrix]]] = []

    def collect(M: EMatrix, coef: float) -> bool:
        if isinstance(M, Weighted):
            return collect(M.base, coef * M.weight**2)
        if isinstance(M, VStack):
            return all(collect(b, coef) for b in M.blocks)
        if isinstance(M, Kronecker):
            terms.append((coef, _flatten_kron(M)))
            return True
        return False

    return terms if collect(W, 1.0) else None


def _product_terms(
    W: EMatrix,
) -> tuple[tuple[int, ...], list[_Family], np.ndarray] | None:
    """W as a union of products: (attribute sizes, one family per attribute,
    squared weight per term), or None when W has no usable product structure."""
    if isinstance(W, RangeQueries) and not W.transposed and len(W.domain_shape) > 1:
        fams: list[_Family] = [
            _RangeFamily(n, W.lower[:, i], W.upper[:, i]) for i, n in enumerate(W.domain_shape)
        ]
        return W.domain_shape, fams, np.ones(W.num_queries)
    terms = _kron_terms(W)
    if terms is None:
        return None
    dims = tuple(f.shape[1] for f in terms[0][1])
    if len(dims) < 2 or any(tuple(f.shape[1] for f in t[1]) != dims for t in terms):
        return None
    families: list[_Family] = [_FactorFamily([t[1][i] for t in terms]) for i in range(len(dims))]
    return dims, families, np.array([t[0] for t in terms])


def _opt_kron(
    families: Sequence[_Family],
    coefs: np.ndarray,
    ps: tuple[int, ...],
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
    rounds: int,
) -> _Result:
    d = len(families)
    thetas = [np.zeros((0, f.n)) for f in families]  # Θ with no rows: the Identity
    # values[i, j] = tr((A_iᵀA_i)⁻¹ G_i⁽ʲ⁾) for the current strategies.
    values = np.array([f.values(t) for f, t in zip(families, thetas, strict=True)])
    total = float(np.sum(coefs * values.prod(axis=0)))
    single = coefs.size == 1
    for sweep in range(1 if single else rounds):
        for i, fam in enumerate(families):
            others = np.prod(np.delete(values, i, axis=0), axis=0)
            weights = coefs * others
            start = thetas[i] if sweep > 0 else None
            theta, _ = _opt_p_identity(
                fam.weighted_gram(weights),
                ps[i],
                rng,
                restarts=restarts if sweep == 0 else 0,
                maxiter=maxiter,
                start=start,
            )
            thetas[i] = theta
            values[i] = fam.values(theta)
        new_total = float(np.sum(coefs * values.prod(axis=0)))
        converged = new_total > total * (1 - 1e-6)
        total = new_total
        if converged:
            break
    factors = [_p_identity_matrix(t) for t in thetas]
    strategy = factors[0] if d == 1 else Kronecker(factors)
    return _Result(strategy, total, "OPT_0" if d == 1 else "OPT_kron")


# -- OPT_M: weighted marginals ----------------------------------------------------


def _marginal_factor(M: EMatrix) -> tuple[float, float] | None:
    """(α, β) with MᵀM = α·I + β·11ᵀ, for Identity, Ones/Total and their multiples."""
    if isinstance(M, Identity):
        return 1.0, 0.0
    if isinstance(M, Ones):
        return 0.0, float(M.shape[0])
    if isinstance(M, Weighted):
        inner = _marginal_factor(M.base)
        return None if inner is None else (inner[0] * M.weight**2, inner[1] * M.weight**2)
    return None


def _marginal_coefficients(W: EMatrix, dims: tuple[int, ...]) -> np.ndarray | None:
    """w with WᵀW = Σ_a w_a Q_a (bit i of a set ⇔ Identity on attribute i)."""
    terms = _kron_terms(W)
    if terms is None:
        return None
    d = len(dims)
    w = np.zeros(2**d)
    for coef, factors in terms:
        parts = [pt for pt in map(_marginal_factor, factors) if pt is not None]
        if len(parts) != d or len(factors) != d:
            return None
        for a in range(2**d):
            term = coef
            for i, (alpha, beta) in enumerate(parts):
                term *= alpha if a >> i & 1 else beta
            w[a] += term
    return w


def _superset_sum(v: np.ndarray, d: int) -> np.ndarray:
    """out[s] = Σ_{a ⊇ s} v[a] over bitmasks."""
    out = v.astype(np.float64).copy()
    for i in range(d):
        bit = 1 << i
        idx = np.arange(2**d)
        low = idx[(idx & bit) == 0]
        out[low] += out[low | bit]
    return out


def _subset_sum(v: np.ndarray, d: int) -> np.ndarray:
    """out[a] = Σ_{s ⊆ a} v[s] over bitmasks."""
    out = v.astype(np.float64).copy()
    for i in range(d):
        bit = 1 << i
        idx = np.arange(2**d)
        high = idx[(idx & bit) != 0]
        out[high] += out[high ^ bit]
    return out


@dataclass(frozen=True)
class _MarginalAlgebra:
    d: int
    complement_size: np.ndarray  # Π_{i∉a} n_i per mask a
    multiplicity: np.ndarray  # Π_{i∈s} (n_i − 1) per mask s

    @staticmethod
    def of(dims: tuple[int, ...]) -> _MarginalAlgebra:
        d = len(dims)
        masks = np.arange(2**d)
        comp = np.ones(2**d)
        mult = np.ones(2**d)
        for i, n in enumerate(dims):
            inside = (masks >> i & 1).astype(bool)
            comp = np.where(inside, comp, comp * n)
            mult = np.where(inside, mult * (n - 1), mult)
        return _MarginalAlgebra(d, comp, mult)

    def eigenvalues(self, coef: np.ndarray) -> np.ndarray:
        """λ_s of Σ_a coef_a Q_a."""
        return _superset_sum(coef * self.complement_size, self.d)


def _marginal_objective(
    theta: np.ndarray, weight: np.ndarray, alg: _MarginalAlgebra
) -> tuple[float, np.ndarray]:
    """(Σθ)²·Σ_s c_s / λ_s(θ²) with c_s = mult_s λ_s(w), and its gradient."""
    lam = alg.eigenvalues(theta**2)
    need = weight > 0
    if np.any(lam[need] <= 0):
        return math.inf, np.zeros_like(theta)
    inv = np.zeros_like(lam)
    inv[need] = weight[need] / lam[need]
    trace = float(inv.sum())
    total = float(theta.sum())
    sq = np.zeros_like(lam)
    sq[need] = weight[need] / lam[need] ** 2
    d_trace_du = -alg.complement_size * _subset_sum(sq, alg.d)
    grad = 2.0 * total * trace + total**2 * 2.0 * theta * d_trace_du
    return total**2 * trace, grad


def _opt_marginals(
    w: np.ndarray,
    dims: tuple[int, ...],
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
) -> _Result:
    alg = _MarginalAlgebra.of(dims)
    weight = alg.multiplicity * alg.eigenvalues(w)
    best = np.zeros(2**alg.d)
    best[-1] = 1.0  # the full-dimensional marginal: the Identity strategy
    best_value = _marginal_objective(best, weight, alg)[0]
    scale = 1.0 / best_value if best_value > 0 else 1.0

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = _marginal_objective(x, weight, alg)
        return value * scale, grad * scale

    for _ in range(restarts):
        res = minimize(
            fun,
            rng.uniform(0.0, 1.0, size=2**alg.d),
            jac=True,
            method="L-BFGS-B",
            bounds=Bounds(0.0, np.inf),
            options={"maxiter": maxiter},
        )
        theta = np.maximum(res.x, 0.0)
        if theta.sum() <= 0:
            continue
        theta = theta / theta.sum()
        value = _marginal_objective(theta, weight, alg)[0]
        if value < best_value:
            best, best_value = theta, value
    return _Result(_marginals_matrix(best, dims), best_value, "OPT_M")


def _marginals_matrix(theta: np.ndarray, dims: tuple[int, ...]) -> EMatrix:
    blocks: list[EMatrix] = []
    for a in np.nonzero(theta > 0)[0]:
        factors: list[EMatrix] = [
            Identity(n) if a >> i & 1 else Total(n) for i, n in enumerate(dims)
        ]
        blocks.append(Weighted(Kronecker(factors), float(theta[a])))
    return blocks[0] if len(blocks) == 1 else VStack(blocks)
