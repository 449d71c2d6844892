"""HDMM: strategies optimised for the workload (McKenna, Miklau, Hay &
Machanavajjhala, "Optimizing Error of High-Dimensional Statistical Queries
Under Differential Privacy", PVLDB 11(10), 2018).

Public operator (paper §5.3, query selection): the strategy depends only on
the workload. Under the Laplace matrix mechanism the expected total squared
error of strategy A on workload W at privacy ε is

    Err(W, A) = (2/ε²) · ‖A‖₁² · tr((AᵀA)⁺ WᵀW),

and every parametrisation below has ‖A‖₁ = 1, so only the trace is minimised.
The workload enters only through its Gram WᵀW, which the matrix classes give
(`EMatrix.gram`, closed forms included).

* OPT_0 (HDMM §5.1), p-Identity strategies on a workload without product
  structure: `ektelo.operators.hdmm_opt0`.
* OPT_⊗ (HDMM §5.2), Kronecker workloads W = W₁ ⊗ … ⊗ W_d: for a Kronecker
  strategy A = A₁ ⊗ … ⊗ A_d, ‖A‖₁ = Π‖A_i‖₁ and
  tr((AᵀA)⁻¹ WᵀW) = Π_i tr((A_iᵀA_i)⁻¹ W_iᵀW_i) (`Kronecker.gram` is the
  Kronecker product of the factors' Grams), so each factor is an independent
  OPT_0 problem. For a union of products W = [W⁽¹⁾; …; W⁽ᵏ⁾] the error is
  Σ_j Π_i tr((A_iᵀA_i)⁻¹ G_i⁽ʲ⁾); cyclic block coordinate descent optimises
  A_i by OPT_0 on the weighted Gram Σ_j c_j G_i⁽ʲ⁾ — the Gram of the stack
  [√c_j·W_i⁽ʲ⁾]_j — with c_j = Π_{i'≠i} tr((A_i'ᵀA_i')⁻¹ G_i'⁽ʲ⁾) held fixed,
  which is exact for the one-attribute subproblem; a d-dimensional
  `RangeQueries` is treated as the union of its m queries, each a product of
  1-D intervals. (HDMM's OPT_+, several Kronecker strategies side by side,
  is not implemented.)
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
computation: the seed only makes the selection reproducible). Being a
deterministic function of public inputs that can take minutes, the strategy
is memoised by `hdmm` (the library's one memo of strategies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import _validate as check
from ..matrix import (
    EMatrix,
    Identity,
    Kronecker,
    Ones,
    RangeQueries,
    Total,
    VStack,
    Weighted,
    rebuild,
    to_spec,
)
from ._forms import ranges_matrix
from .hdmm_opt0 import (
    GramTarget,
    gram_target,
    opt_p_identity,
    p_identity_strategy,
    p_identity_value,
)

__all__ = [
    "HDMMResult",
    "MarginalSpectrum",
    "hdmm",
    "marginal_coefficients",
    "marginal_objective",
    "marginals_strategy",
    "optimise",
]

# Default p: n/16 extra rows (the paper's choice), at most _P_CAP (see `hdmm`).
_P_CAP = 64
# Strategies kept by the memo of `hdmm` (least recently used dropped first).
_CACHE_SIZE = 32


def hdmm(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 1,
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
            Default min(max(1, n_i // 16), 64) for an attribute of n_i cells: the
            paper's n/16, capped because an iteration costs O(p²·n) and more
            iterations are needed as p grows. On Prefix(4096), p = 64 errs 8 %
            more than p = 128 in under a third of the time, and p = 32 another
            15 % more (`benchmarks/bench_strategies_opt.py --tradeoff`).
        restarts: starting points per OPT_0 problem (the best is kept): the
            first a perturbed hierarchy of intervals, the others random. One
            by default: a random start as well never did better on
            Prefix(1024), Prefix(4096), AllRange(1024) or RandomRange(1000)
            over 4096 cells, for 2.5–4× the time.
        seed: seed of the starting points; the result is a deterministic
            function of (workload, p, restarts, seed, maxiter, rounds).
        maxiter: iteration limit per OPT_0/OPT_M problem. OPT_0 usually stops
            earlier, once the objective fell by less than 0.03 % over the last
            10 iterations (within 0.9 % of running to 1500 iterations on the
            four workloads above, at an eighth to a sixth of the time).
        rounds: block coordinate descent sweeps for unions of products.

    Returns:
        An implicit strategy with L1 sensitivity 1 (up to rounding) whose row
        space contains the workload's: a p-Identity matrix, a `Kronecker` of
        them, or a `VStack` of weighted marginals.

    Memoised: the strategy is a public, deterministic function of the
    workload's value (matrices compare by their spec) and the arguments, so
    the results of the last 32 distinct calls are kept and a repeated call
    returns at once — plans run on one workload trial after trial, and
    `plans.strategy_for` asks again. Every call returns a fresh copy
    (`ektelo.matrix.rebuild`), so a caller cannot alter the memo. Workloads
    with classes foreign to `ektelo.matrix` are not memoised.
    `hdmm.cache_clear()` empties the memo, `hdmm.cache_info()` counts it.
    """
    args = (p if p is None or isinstance(p, (int, np.integer)) else tuple(p), restarts, seed)
    try:
        to_spec(workload)  # a class foreign to ektelo.matrix has no spec (no value semantics)
        hash(args)
    except TypeError:
        return optimise(
            workload, p=p, restarts=restarts, seed=seed, maxiter=maxiter, rounds=rounds
        ).strategy
    return rebuild(_memo(workload, *args, maxiter, rounds).strategy)


@lru_cache(maxsize=_CACHE_SIZE)
def _memo(
    workload: EMatrix,
    p: int | tuple[int, ...] | None,
    restarts: int,
    seed: int,
    maxiter: int,
    rounds: int,
) -> HDMMResult:
    return optimise(workload, p=p, restarts=restarts, seed=seed, maxiter=maxiter, rounds=rounds)


# Like functools.lru_cache's own (experiments empty every `cache_clear` they find).
hdmm.cache_clear = _memo.cache_clear  # type: ignore[attr-defined]
hdmm.cache_info = _memo.cache_info  # type: ignore[attr-defined]


@dataclass(frozen=True)
class HDMMResult:
    """What `optimise` found: the strategy A (‖A‖₁ = 1), its exact error
    tr((AᵀA)⁺ WᵀW) on the workload (the 2/ε² factor left out), and the
    optimiser that won: "OPT_0" (§5.1), "OPT_kron" (§5.2) or "OPT_M" (§5.3)."""

    strategy: EMatrix
    error: float
    method: str


def optimise(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 1,
    seed: int = 0,
    maxiter: int = 1000,
    rounds: int = 4,
) -> HDMMResult:
    """HDMM's search for `workload`, not memoised: `hdmm`'s strategy with
    its exact error and the optimiser it came from (McKenna et al., PVLDB
    2018, §5: OPT_0 or OPT_⊗ by the workload's structure, OPT_M as well on
    marginal workloads, the candidate of least error kept). The arguments
    are `hdmm`'s."""
    if not isinstance(workload, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(workload).__name__}")
    restarts = check.positive_int(restarts, "restarts")
    maxiter = check.positive_int(maxiter, "maxiter")
    rounds = check.positive_int(rounds, "rounds")
    rng = np.random.default_rng(check.integer(seed, "seed", minimum=0))
    terms = _product_terms(workload)
    if terms is None:
        dims: tuple[int, ...] = (workload.shape[1],)
        families: list[_Family] = [_FactorFamily([workload])]
        coefs = np.ones(1)
    else:
        dims, families, coefs = terms
    ps = _p_per_attribute(p, dims)
    # BLAS threading is the caller's: the optimisation makes thousands of small
    # and mid-sized BLAS calls, and on a busy machine a threaded BLAS can spend
    # more time synchronising than computing (measured 10–40× slower on two
    # shared cores) — callers who see that pin BLAS to one thread themselves
    # (e.g. threadpoolctl's `threadpool_limits(1, "blas")` around the call).
    kron = _opt_kron(families, coefs, ps, rng, restarts=restarts, maxiter=maxiter, rounds=rounds)
    best = kron
    if len(dims) > 1:
        marg = marginal_coefficients(workload, dims)
        if marg is not None:
            opt_m = _opt_marginals(marg, dims, rng, restarts=restarts, maxiter=maxiter)
            if opt_m.error < best.error:
                best = opt_m
    return best


def _p_per_attribute(p: int | Sequence[int] | None, dims: tuple[int, ...]) -> tuple[int, ...]:
    if p is None:
        return tuple(max(1, min(n // 16, _P_CAP)) for n in dims)
    if isinstance(p, (int, np.integer)):  # (bool too: refused by positive_int)
        return (check.positive_int(p, "p"),) * len(dims)
    values = tuple(p)
    if len(values) != len(dims):
        raise ValueError(f"p has {len(values)} entries; the workload has {len(dims)} attributes")
    return tuple(check.positive_int(v, "p") for v in values)


# -- Memo of strategies ------------------------------------------------------------


# -- OPT_⊗: one p-Identity strategy per attribute --------------------------------


class _FactorFamily:
    """The k terms' factor matrices on one attribute of n cells."""

    def __init__(self, factors: Sequence[EMatrix]):
        distinct: dict[EMatrix, int] = {}  # equal factors (value semantics) are one
        self.index = np.array([distinct.setdefault(f, len(distinct)) for f in factors])
        self.factors = list(distinct)
        self.targets = [gram_target(f) for f in self.factors]
        self.n = self.targets[0].n

    def weighted_target(self, coefs: np.ndarray) -> GramTarget:
        """OPT_0's target for Σ_j c_j G_j, the Gram of the stack [√c_j·W_j]_j
        (a single weighted set of ranges when every factor is ranges)."""
        c = np.bincount(self.index, coefs, len(self.factors))
        live = [k for k in range(len(self.factors)) if c[k] != 0] or [0]
        if len(live) == 1:  # c·G_k: the same minimiser as G_k (OPT_0 normalises the scale)
            return self.targets[live[0]]
        forms = [self.targets[k].form for k in live]
        if all(form is not None for form in forms):
            parts = [(f[0], f[1], f[2] * c[k]) for f, k in zip(forms, live, strict=True)]  # type: ignore[index]
            form = tuple(np.concatenate([part[i] for part in parts]) for i in range(3))
            return gram_target(ranges_matrix(self.n, form))  # type: ignore[arg-type]
        blocks = [
            self.factors[k] if c[k] == 1.0 else Weighted(self.factors[k], math.sqrt(c[k]))
            for k in live
        ]
        return gram_target(blocks[0] if len(blocks) == 1 else VStack(blocks))

    def values(self, theta: np.ndarray) -> np.ndarray:
        """tr((A(Θ)ᵀA(Θ))⁻¹ G_j) for every term j."""
        per_factor = np.array([p_identity_value(theta, t) for t in self.targets])
        return per_factor[self.index]


class _RangeFamily:
    """Term j is the single interval [a_j, b_j] (a d-D range's j-th side)."""

    def __init__(self, n: int, a: np.ndarray, b: np.ndarray):
        self.n, self.a, self.b = n, a, b

    def weighted_target(self, coefs: np.ndarray) -> GramTarget:
        return gram_target(ranges_matrix(self.n, (self.a, self.b, coefs)))

    def values(self, theta: np.ndarray) -> np.ndarray:
        """tr((A(Θ)ᵀA(Θ))⁻¹ 1_j1_jᵀ) = 1_jᵀ D M⁻¹ D 1_j = ‖D 1_j‖² − (ΘD1_j)ᵀ R⁻¹ (ΘD1_j)."""
        d = 1.0 + theta.sum(axis=0)
        sq = np.concatenate(([0.0], np.cumsum(d**2)))
        out = sq[self.b + 1] - sq[self.a]
        if theta.shape[0] and theta.any():
            Y = np.hstack([np.zeros((theta.shape[0], 1)), np.cumsum(theta * d, axis=1)])
            Z = Y[:, self.b + 1] - Y[:, self.a]
            R_inv = np.linalg.inv(np.eye(theta.shape[0]) + theta @ theta.T)
            out = out - np.sum(Z * (R_inv @ Z), axis=0)
        return out


_Family = _FactorFamily | _RangeFamily


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
) -> HDMMResult:
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
            theta, _ = opt_p_identity(
                fam.weighted_target(weights),
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
    factors = [p_identity_strategy(t) for t in thetas]
    strategy = factors[0] if d == 1 else Kronecker(factors)
    return HDMMResult(strategy, total, "OPT_0" if d == 1 else "OPT_kron")


# -- OPT_M: weighted marginals ----------------------------------------------------


def _identity_plus_ones(G: EMatrix) -> tuple[float, float] | None:
    """(α, β) with G = α·I + β·11ᵀ, read from a factor's Gram as the library
    gives it (Identity's is Identity, Ones(m, n)'s is m·Ones(n, n),
    Weighted's the weighted base Gram); None for any other form."""
    if isinstance(G, Identity):
        return 1.0, 0.0
    if isinstance(G, Ones) and G.shape[0] == G.shape[1]:
        return 0.0, 1.0
    if isinstance(G, Weighted):
        inner = _identity_plus_ones(G.base)
        return None if inner is None else (inner[0] * G.weight, inner[1] * G.weight)
    return None


def marginal_coefficients(W: EMatrix, dims: tuple[int, ...]) -> np.ndarray | None:
    """OPT_M's view of a marginal workload (HDMM §5.3): the coefficients w
    with WᵀW = Σ_a w_a Q_a over the 2^d attribute sets a (bit i of a set ⇔
    Identity on attribute i, else Total), or None when W is not a union of
    Kronecker products of factors whose Grams are α·I + β·11ᵀ."""
    terms = _kron_terms(W)
    if terms is None:
        return None
    d = len(dims)
    w = np.zeros(2**d)
    for coef, factors in terms:
        parts = [pt for pt in (_identity_plus_ones(f.gram()) for f in factors) if pt is not None]
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
class MarginalSpectrum:
    """The common eigenbasis of the Q_a on a domain of shape `dims` (see the
    module): per attribute set, Π_{i∉a} n_i (`complement_size`) and the
    multiplicity Π_{i∈s}(n_i − 1) of eigenspace s; `eigenvalues(u)` gives
    λ_s(u) = Σ_{a ⊇ s} u_a Π_{i∉a} n_i for all s in O(d·2^d)."""

    d: int
    complement_size: np.ndarray  # Π_{i∉a} n_i per mask a
    multiplicity: np.ndarray  # Π_{i∈s} (n_i − 1) per mask s

    @staticmethod
    def of(dims: tuple[int, ...]) -> MarginalSpectrum:
        """The spectrum for the domain shape `dims`."""
        d = len(dims)
        masks = np.arange(2**d)
        comp = np.ones(2**d)
        mult = np.ones(2**d)
        for i, n in enumerate(dims):
            inside = (masks >> i & 1).astype(bool)
            comp = np.where(inside, comp, comp * n)
            mult = np.where(inside, mult * (n - 1), mult)
        return MarginalSpectrum(d, comp, mult)

    def eigenvalues(self, coef: np.ndarray) -> np.ndarray:
        """λ_s of Σ_a coef_a Q_a."""
        return _superset_sum(coef * self.complement_size, self.d)


def marginal_objective(
    theta: np.ndarray, weight: np.ndarray, alg: MarginalSpectrum
) -> tuple[float, np.ndarray]:
    """OPT_M's objective (HDMM §5.3) and its gradient in θ: the error
    (Σθ)²·Σ_s c_s / λ_s(θ²) of the weighted marginals M(θ), with
    c_s = mult_s·λ_s(w) passed as `weight` (w from `marginal_coefficients`);
    +∞ (gradient 0) where some needed λ_s(θ²) is 0."""
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
) -> HDMMResult:
    alg = MarginalSpectrum.of(dims)
    weight = alg.multiplicity * alg.eigenvalues(w)
    best = np.zeros(2**alg.d)
    best[-1] = 1.0  # the full-dimensional marginal: the Identity strategy
    best_value = marginal_objective(best, weight, alg)[0]
    scale = 1.0 / best_value if best_value > 0 else 1.0

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = marginal_objective(x, weight, alg)
        return value * scale, grad * scale

    from scipy.optimize import Bounds, minimize  # lazy: only where used

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
        value = marginal_objective(theta, weight, alg)[0]
        if value < best_value:
            best, best_value = theta, value
    return HDMMResult(marginals_strategy(best, dims), best_value, "OPT_M")


def marginals_strategy(theta: np.ndarray, dims: tuple[int, ...]) -> EMatrix:
    """M(θ) = [θ_a·M_a]_a: the marginals of the attribute sets a with θ_a > 0,
    each a Kronecker of Identity (attributes in a) and Total factors, weighted."""
    blocks: list[EMatrix] = []
    for a in np.nonzero(theta > 0)[0]:
        factors: list[EMatrix] = [
            Identity(n) if a >> i & 1 else Total(n) for i, n in enumerate(dims)
        ]
        blocks.append(Weighted(Kronecker(factors), float(theta[a])))
    return blocks[0] if len(blocks) == 1 else VStack(blocks)
