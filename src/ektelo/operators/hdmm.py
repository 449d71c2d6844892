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
* Row-space factors (issue #38; our addition, not in HDMM): a factor
  workload of small rank r — the value factor [vᵀ; 1ᵀ] of sums and counts —
  is served badly by p-Identity, whose identity block spends sensitivity on
  every cell. A strategy in the factor's row space, A_i = M·R with
  R (r×n) a basis of it (W_iᵀW_i = RᵀR), has error
  ‖M R‖₁²·tr((MᵀM)⁻¹) (since W_i A_i⁺ has the Gram of M⁻¹); M (r×r) is
  found by Nelder–Mead from M = W_i R⁺ (measuring W_i itself) and from I.
  For [vᵀ; 1ᵀ] this finds the centred sum Σ(v − c)x beside a weighted
  count — the peers' clamped-mean trick, with the split optimised. On a
  single product (or a workload without product structure) the factors'
  errors multiply, so each factor keeps whichever of p-Identity and its
  row-space strategy errs less; unions of products keep p-Identity.
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
least error. The workload's own structure is a candidate too, so a strategy
is never worse on paper than measuring the workload directly: OPT_M starts
from the workload's marginals (θ_a ∝ √w_a, and each marginal once) and
keeps them if nothing beats them, and the workload itself (scaled to
sensitivity 1) is a candidate where its error ‖W‖²·rank(W) is cheap. Under
the Gaussian mechanism (`mechanism="gaussian"`) the error's ‖A‖₁² becomes
‖A‖₂² (for M(θ), Σθ_a²), OPT_M optimises that, and every candidate is
ranked by it. Randomness is a NumPy generator seeded by `seed` (public
computation: the seed only makes the selection reproducible). Being a
deterministic function of public inputs that can take minutes, the strategy
is memoised by `hdmm` (the library's one memo of strategies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from .. import _validate as check
from ..matrix import (
    Dense,
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
    "row_space_strategy",
]

# Default p: n/16 extra rows (the paper's choice), at most _P_CAP (see `hdmm`).
_P_CAP = 64
# Strategies kept by the memo of `hdmm` (least recently used dropped first).
_CACHE_SIZE = 32
# The workload itself is a candidate strategy when its factors have at most
# this many cells (its error needs the rank of each factor's dense Gram).
_OWN_MAX_CELLS = 1024

Mechanism = Literal["laplace", "gaussian"]


def hdmm(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 1,
    seed: int = 0,
    maxiter: int = 1000,
    rounds: int = 4,
    mechanism: Mechanism = "laplace",
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
        mechanism: the noise the strategy will be measured with: "laplace"
            (error ∝ ‖A‖₁², HDMM's objective) or "gaussian" (∝ ‖A‖₂²). OPT_M
            optimises the chosen norm; every candidate is ranked by it.

    Returns:
        An implicit strategy with L1 (Laplace) or L2 (Gaussian) sensitivity 1
        (up to rounding) whose row space contains the workload's: a
        p-Identity matrix, a `Kronecker` of them, a `VStack` of weighted
        marginals, or the workload itself (scaled), whichever errs least —
        never worse on paper than measuring the workload directly when the
        workload is a candidate (marginal workloads always; others whose
        factors have at most 1024 cells).

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
            workload, p=p, restarts=restarts, seed=seed, maxiter=maxiter, rounds=rounds,
            mechanism=mechanism,
        ).strategy
    return rebuild(_memo(workload, *args, maxiter, rounds, mechanism).strategy)


@lru_cache(maxsize=_CACHE_SIZE)
def _memo(
    workload: EMatrix,
    p: int | tuple[int, ...] | None,
    restarts: int,
    seed: int,
    maxiter: int,
    rounds: int,
    mechanism: Mechanism,
) -> HDMMResult:
    return optimise(
        workload, p=p, restarts=restarts, seed=seed, maxiter=maxiter, rounds=rounds,
        mechanism=mechanism,
    )


# Like functools.lru_cache's own (experiments empty every `cache_clear` they find).
hdmm.cache_clear = _memo.cache_clear  # type: ignore[attr-defined]
hdmm.cache_info = _memo.cache_info  # type: ignore[attr-defined]


@dataclass(frozen=True)
class HDMMResult:
    """What `optimise` found: the strategy A, its exact error
    ‖A‖_p²·tr((AᵀA)⁺ WᵀW) on the workload (p = 1 for Laplace, 2 for
    Gaussian; the 2/ε² or 1/(2ρ) factor left out), and the candidate that
    won: "OPT_0" (§5.1), "OPT_kron" (§5.2), "OPT_M" (§5.3), "identity" or
    "workload" (the workload itself as the strategy)."""

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
    mechanism: Mechanism = "laplace",
) -> HDMMResult:
    """HDMM's search for `workload`, not memoised: `hdmm`'s strategy with
    its exact error and the candidate it came from (McKenna et al., PVLDB
    2018, §5: OPT_0 or OPT_⊗ by the workload's structure, OPT_M as well on
    marginal workloads — started from the workload's own marginals — and
    the workload itself where its error is cheap to compute; the candidate
    of least error under `mechanism` kept). The arguments are `hdmm`'s."""
    if not isinstance(workload, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(workload).__name__}")
    restarts = check.positive_int(restarts, "restarts")
    maxiter = check.positive_int(maxiter, "maxiter")
    rounds = check.positive_int(rounds, "rounds")
    if mechanism not in ("laplace", "gaussian"):
        raise ValueError(f"mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")
    norm = 1 if mechanism == "laplace" else 2
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
    kron, thetas = _opt_kron(families, coefs, ps, rng, restarts=restarts, maxiter=maxiter,
                             rounds=rounds)
    if coefs.size == 1:
        kron = _with_row_space_factors(kron, families, thetas)
    if norm == 2:  # OPT_0/OPT_⊗ normalise ‖A‖₁ = 1; rank them by ‖A‖₂²·trace
        kron = _in_l2(kron)
    candidates = [kron]
    if len(dims) > 1:
        marg = marginal_coefficients(workload, dims)
        if marg is not None:
            candidates.append(
                _opt_marginals(marg, dims, rng, restarts=restarts, maxiter=maxiter, norm=norm)
            )
    best = min(candidates, key=lambda r: r.error)  # the first of equals: HDMM's own
    own = _workload_candidate(workload, terms, norm)
    # the optimisers' errors are their objectives' values, which a near-singular
    # strategy can put slightly below its true error (OPT_0 on Total(16): 0.99995 for a
    # strategy that errs 1.00002); the workload's is exact, so it wins within _TIE
    if own is not None and own.error <= best.error * (1 + _TIE):
        return own
    return best


#: relative margin within which the workload itself (exact error) beats an
#: optimised candidate (error from the optimiser's objective)
_TIE = 1e-3


def _in_l2(result: HDMMResult) -> HDMMResult:
    """A strategy with ‖A‖₁ = 1 rescaled to ‖A‖₂ = 1, its error ‖A‖₂²·trace."""
    sens = result.strategy.sensitivity(2)
    return HDMMResult(Weighted(result.strategy, 1.0 / sens), result.error * sens**2, result.method)


def _workload_candidate(
    W: EMatrix,
    terms: tuple[tuple[int, ...], list[_Family], np.ndarray] | None,
    norm: int,
) -> HDMMResult | None:
    """The workload itself as the strategy (it always supports itself), with
    its exact error ‖W‖_p²·tr((WᵀW)⁺WᵀW) = ‖W‖_p²·rank(W): for a workload
    without product structure, or a single Kronecker product (rank and norm
    factorise), when every factor has at most `_OWN_MAX_CELLS` cells; else
    None (a union of products' rank does not factorise; marginal workloads
    are OPT_M's own candidates)."""
    if terms is None:
        factors, weight = [W], 1.0
    else:
        kron = _kron_terms(W)
        if kron is None or len(kron) != 1 or isinstance(terms[1][0], _RangeFamily):
            return None
        weight, factors = math.sqrt(kron[0][0]), kron[0][1]
    if any(f.shape[1] > _OWN_MAX_CELLS for f in factors):
        return None
    rank, sens = 1.0, weight
    for f in factors:
        eig = np.linalg.eigvalsh(f.gram().dense())
        rank *= int(np.sum(eig > eig.max() * f.shape[1] * np.finfo(np.float64).eps))
        sens *= f.sensitivity(norm)
    return HDMMResult(Weighted(W, 1.0 / sens), sens**2 * rank, "workload")


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
) -> tuple[HDMMResult, list[np.ndarray]]:
    """OPT_⊗ (module docstring): the strategy and each attribute's Θ."""
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
    return HDMMResult(strategy, total, "OPT_0" if d == 1 else "OPT_kron"), thetas


# -- Row-space factors (issue #38) -------------------------------------------------
# A factor workload is given a row-space strategy when its rank is at most this
# (sums and counts: 2) and it has at most _ROW_SPACE_ROWS rows.
_ROW_SPACE_RANK = 4
_ROW_SPACE_ROWS = 16
_ROW_SPACE_CELLS = 1 << 14


def row_space_strategy(W: EMatrix) -> tuple[EMatrix, float] | None:
    """A strategy in the row space of a small-rank workload W and its error
    tr((AᵀA)⁺WᵀW) at ‖A‖₁ = 1, or None when W has more than
    `_ROW_SPACE_RANK` independent rows (see the module docstring)."""
    m, n = W.shape
    if m > _ROW_SPACE_ROWS or n > _ROW_SPACE_CELLS:
        return None
    Wd = np.asarray(W.dense(), dtype=np.float64)
    _, sv, Vt = np.linalg.svd(Wd, full_matrices=False)
    r = int(np.sum(sv > sv.max(initial=0.0) * max(m, n) * np.finfo(np.float64).eps * 10))
    if r == 0 or r > _ROW_SPACE_RANK:
        return None
    R = sv[:r, None] * Vt[:r]  # WᵀW = RᵀR

    def error(flat: np.ndarray) -> float:
        M = flat.reshape(r, r)
        try:
            inv = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            return math.inf
        sens = float(np.abs(M @ R).sum(axis=0).max())
        value = sens**2 * float(np.sum(inv**2))
        return value if math.isfinite(value) else math.inf

    from scipy.optimize import minimize as _minimize

    starts = [np.eye(r)]
    own = Wd @ np.linalg.pinv(R)  # W = own · R: measuring W itself (its independent rows)
    if r == m:
        starts.append(own)
    best_flat, best = starts[0].ravel(), error(starts[0].ravel())
    for start in starts:
        found = _minimize(error, start.ravel(), method="Nelder-Mead",
                          options={"maxiter": 400 * r * r, "xatol": 1e-9, "fatol": 1e-12})
        for flat in (start.ravel(), found.x):
            value = error(flat)
            if value < best:
                best_flat, best = flat, value
    A = best_flat.reshape(r, r) @ R
    A /= np.abs(A).sum(axis=0).max()
    if r == 1 and np.allclose(np.abs(A), 1.0):  # the total (up to sign): keep its structure
        return Total(n), error(best_flat)
    return Dense(A), error(best_flat)


def _with_row_space_factors(kron: HDMMResult, families: Sequence[_Family],
                            thetas: Sequence[np.ndarray]) -> HDMMResult:
    """A single product's strategy with each small-rank factor replaced by
    its row-space strategy where that errs less (factors' errors multiply;
    p-Identity's error is OPT_0's closed form at the factor's Θ)."""
    factors = (list(kron.strategy.factors) if isinstance(kron.strategy, Kronecker)
               and len(families) > 1 else [kron.strategy])
    if len(factors) != len(families):
        return kron
    total = kron.error
    changed = False
    for i, fam in enumerate(families):
        if not isinstance(fam, _FactorFamily) or len(fam.factors) != 1:
            continue
        found = row_space_strategy(fam.factors[0])
        if found is None:
            continue
        A_r, err_r = found
        err_p = float(fam.values(thetas[i])[0])
        if err_r < err_p * (1 - 1e-9) and err_p > 0:
            factors[i] = A_r
            total *= err_r / err_p
            changed = True
    if not changed:
        return kron
    strategy = factors[0] if len(factors) == 1 else Kronecker(factors)
    return HDMMResult(strategy, total, kron.method + "+row-space")


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
    theta: np.ndarray, weight: np.ndarray, alg: MarginalSpectrum, *, norm: int = 1
) -> tuple[float, np.ndarray]:
    """OPT_M's objective (HDMM §5.3) and its gradient in θ: the error
    ‖M(θ)‖_p²·Σ_s c_s / λ_s(θ²) of the weighted marginals M(θ), with
    c_s = mult_s·λ_s(w) passed as `weight` (w from `marginal_coefficients`);
    +∞ (gradient 0) where some needed λ_s(θ²) is 0. Every cell lies in one
    row of each marginal, so a column of M(θ) holds each θ_a once:
    ‖M(θ)‖₁ = Σθ (`norm=1`, the Laplace mechanism) and ‖M(θ)‖₂² = Σθ²
    (`norm=2`, the Gaussian mechanism)."""
    lam = alg.eigenvalues(theta**2)
    need = weight > 0
    if np.any(lam[need] <= 0):
        return math.inf, np.zeros_like(theta)
    inv = np.zeros_like(lam)
    inv[need] = weight[need] / lam[need]
    trace = float(inv.sum())
    sq = np.zeros_like(lam)
    sq[need] = weight[need] / lam[need] ** 2
    d_trace_du = -alg.complement_size * _subset_sum(sq, alg.d)
    if norm == 1:
        total = float(theta.sum())
        sens, d_sens = total**2, 2.0 * total * np.ones_like(theta)
    else:
        sens, d_sens = float(np.dot(theta, theta)), 2.0 * theta
    grad = d_sens * trace + sens * 2.0 * theta * d_trace_du
    return sens * trace, grad


def _opt_marginals(
    w: np.ndarray,
    dims: tuple[int, ...],
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
    norm: int = 1,
) -> HDMMResult:
    """OPT_M by L-BFGS-B. Candidates: the Identity (the full marginal), the
    workload's own marginals — θ_a ∝ √w_a, which is the workload itself when
    its terms are marginals, and θ_a ∝ [w_a > 0], each of its marginals
    measured once — then L-BFGS-B started from the better of those and from
    `restarts` random points; the least error is kept, so the result is never
    worse on paper than measuring the workload's marginals directly."""
    alg = MarginalSpectrum.of(dims)
    weight = alg.multiplicity * alg.eigenvalues(w)

    def objective(theta: np.ndarray) -> float:
        return marginal_objective(theta, weight, alg, norm=norm)[0]

    def normalised(theta: np.ndarray) -> np.ndarray:
        return theta / (theta.sum() if norm == 1 else math.sqrt(float(np.dot(theta, theta))))

    identity = np.zeros(2**alg.d)
    identity[-1] = 1.0  # the full-dimensional marginal: the Identity strategy
    own = [normalised(np.sqrt(np.maximum(w, 0.0))), normalised((w > 0).astype(np.float64))]
    candidates = [identity, *own]
    values = [objective(t) for t in candidates]
    best_value = min(values)
    best = candidates[values.index(best_value)]
    finite = [v for v in values if math.isfinite(v)]
    scale = 1.0 / min(finite) if finite and min(finite) > 0 else 1.0

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = marginal_objective(x, weight, alg, norm=norm)
        return value * scale, grad * scale

    from scipy.optimize import Bounds, minimize  # lazy: only where used

    own_best = min(own, key=objective)
    starts = [own_best] + [rng.uniform(0.0, 1.0, size=2**alg.d) for _ in range(restarts)]
    for start in starts:
        res = minimize(
            fun,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=Bounds(0.0, np.inf),
            options={"maxiter": maxiter},
        )
        theta = np.maximum(res.x, 0.0)
        if theta.sum() <= 0:
            continue
        theta = normalised(theta)
        value = objective(theta)
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
