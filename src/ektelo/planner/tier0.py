"""Tier 0 of the planner (issue #29): every data-independent candidate
ranked by its expected error, before anything is spent.

A data-independent plan measures a fixed strategy A and answers W by least
squares, so its error W A⁺η does not depend on the data (the matrix
mechanism, Li et al., VLDB J. 2015; `operators.error`). Three ways to price
a candidate, in order:

1. the closed form of `operators.error.expected_error` where its structure
   factorises or the domain is small (dense up to `MAX_DENSE` cells);
2. range queries against a Kronecker strategy (HDMM's, per attribute):
   query i = r_i1 ⊗ … ⊗ r_id, so ‖wᵢA⁺‖² = ∏ₖ r_ikᵀ(AₖᵀAₖ)⁺r_ik — each
   factor read off 2-D prefix sums of a small per-attribute Gram inverse;
   exact, no n×n matrix;
3. otherwise a Monte-Carlo estimate: the plan itself run on an all-zero
   vector of the same shape in a throwaway research-mode kernel (public: no
   private data), with fixed seeds; x̂ = A⁺η there, so the mean of
   ‖W x̂‖² over the seeds estimates the expected squared error. It is marked
   "monte-carlo" with its number of seeds and relative standard error.

A histogram (W = I, every cell asked once) is the exception: HDMM's
optimiser is not run to price it (issue #41: it was the dearest step of a
small question), because its error is known — the identity's. For a
strategy A of full column rank with columns aⱼ, the expected total squared
error of answering I by least squares is c·Δ(A)²·tr((AᵀA)⁻¹), with Δ the L1
(Laplace) or L2 (Gaussian) sensitivity, max ‖aⱼ‖. As (M⁻¹)ⱼⱼ ≥ 1/Mⱼⱼ for a
positive definite M (Cauchy–Schwarz), tr((AᵀA)⁻¹) ≥ Σⱼ 1/‖aⱼ‖₂² ≥ n/Δ², and
‖aⱼ‖₂ ≤ ‖aⱼ‖₁ ≤ Δ, so no strategy errs less than c·n, the identity's. HDMM
keeps the least-error of its candidates, among them the workload itself
(`operators.hdmm`: every factor of at most 1,024 cells; Tier 0 offers HDMM
only up to 256 per attribute), here the identity: its error is exactly the
identity's. The identity comes first in `SIMPLEST_FIRST`, so the tie goes
to it — the choice, and the ranking shown, are those HDMM's optimiser
would have given.

The squared error scales exactly as 1/ε² (Laplace) or 1/ρ (Gaussian), so
each candidate is priced once at ε = 1 (ρ = 1) and rescaled; prices are
cached per (plan, shape, workload — by value —, mechanism) in the process.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .rules import Candidate, candidates

__all__ = ["MAX_DENSE", "MC_SEEDS", "Price", "clear_cache",
           "is_histogram", "monte_carlo", "price", "range_kron_error", "rank"]

# Dense closed forms above this many cells cost O(n³): priced otherwise. At
# 1024 cells the exact form costs what 32 Monte-Carlo runs cost (≈2.5 CPU s
# for HB/H2/Privelet/GreedyH on a 1-D prefix or range workload) and is exact
# where Monte-Carlo was 13% off on HB; at 2048 it is 5× dearer (20 s).
MAX_DENSE = 1024
# Monte-Carlo: seeds 0..MC_SEEDS-1, always all of them (on HB/H2/Privelet
# over 256 cells, 32 seeds put the RMSE within about ±10% of the closed
# form). A fixed count, not a time budget: the ranking, and so auto's choice,
# must not depend on how busy the machine is (the regret experiment priced
# with the same 32 seeds). mc_seeds= trades accuracy for speed.
MC_SEEDS = 32
# A per-attribute Gram inverse above this size is not worth it (O(n³)).
_MAX_FACTOR = 2048
_CACHE_SIZE = 128


@dataclass(frozen=True)
class Price:
    """A candidate's mean squared error per query at unit budget (ε = 1 or
    ρ = 1), how it was found ("exact" or "monte-carlo"; None: not priced),
    a note, and for Monte-Carlo the seeds used and the relative standard
    error of the mean squared error."""

    mse: float | None
    method: str | None
    note: str
    seeds: int = 0
    rel_se: float | None = None
    strategy: Any = field(default=None, repr=False, compare=False)  # the matrix priced


_cache: OrderedDict[tuple[Any, ...], tuple[Any, Price]] = OrderedDict()


def clear_cache() -> None:
    """Forget every price (benchmarks time the pricing itself)."""
    _cache.clear()


def range_kron_error(W: Any, A: Any, *, gaussian: bool = False) -> float | None:
    """Exact total squared error at unit budget of range queries W against a
    Kronecker strategy A with one factor per attribute, or None when that
    structure is absent (see the module docstring, way 2)."""
    from ..matrix import Kronecker, RangeQueries
    from ..operators import error

    if not isinstance(W, RangeQueries) or W.transposed or not isinstance(A, Kronecker):
        return None
    if len(A.factors) != len(W.domain_shape):
        return None
    if any(f.shape[1] != n or n > _MAX_FACTOR
           for f, n in zip(A.factors, W.domain_shape, strict=True)):
        return None
    per_query = np.ones(W.shape[0])
    for k, factor in enumerate(A.factors):
        G = np.asarray(factor.gram().dense(), dtype=np.float64)
        lam = np.linalg.eigvalsh(0.5 * (G + G.T))
        if lam.min() <= lam.max() * G.shape[0] * np.finfo(np.float64).eps * 10:
            return None  # not full rank: support would need checking, price otherwise
        S = np.linalg.inv(G).cumsum(0).cumsum(1)
        S = np.pad(S, ((1, 0), (1, 0)))  # S[i, j] = sum of Ginv[:i, :j]
        lo, hi = W.lower[:, k], W.upper[:, k] + 1
        per_query *= S[hi, hi] - S[lo, hi] - S[hi, lo] + S[lo, lo]
    variance = error.noise_variance(A, rho=1.0) if gaussian else error.noise_variance(A, 1.0)
    return float(variance * per_query.sum())


def monte_carlo(name: str, shape: Sequence[int], W: Any, *, gaussian: bool = False,
                seeds: int | None = None) -> Price:
    """Way 3: plan `name` run on an all-zero vector of `shape` in throwaway
    research-mode kernels at ε = 1 (ρ = 1), seeds 0, 1, …, `seeds` of them
    (default `MC_SEEDS`): deterministic. Public: no private data is involved."""
    shape = tuple(int(s) for s in shape)
    from ..plans.registry import run
    from ..port import protect

    zeros = np.zeros(shape)
    wanted = MC_SEEDS if seeds is None else seeds
    errors: list[float] = []
    for seed in range(wanted):
        if gaussian:
            x = protect(zeros, rho=1.0, seed=seed, integral=True)
            x_hat = run(name, x, W, 1.0, mechanism="gaussian")
        else:
            x = protect(zeros, epsilon=1.0, seed=seed, integral=True)
            x_hat = run(name, x, W, 1.0)
        answers = W.matvec(np.asarray(x_hat, dtype=np.float64).reshape(-1))
        errors.append(float(np.mean(answers**2)))
    mse = float(np.mean(errors))
    spread = float(np.std(errors, ddof=1)) / math.sqrt(len(errors)) if len(errors) > 1 else mse
    rel = spread / mse if mse > 0 else 0.0
    return Price(mse, "monte-carlo", f"Monte-Carlo: the plan on zeros, {len(errors)} seeds "
                 f"(±{100 * rel / 2:.0f}% on the RMSE)", len(errors), rel)


def price(name: str, shape: Sequence[int], W: Any, *, gaussian: bool = False,
          mc_seeds: int | None = None) -> Price:
    """The price of data-independent plan `name` for workload W over `shape`
    at unit budget (see the module docstring). A candidate that fails or
    warns (a strategy optimiser's numerics) is unpriced with the reason."""
    from ..operators import error
    from ..plans import data_independent

    shape = tuple(int(s) for s in shape)
    # matrices compare by value (`EMatrix.__eq__`): the same workload built
    # again (a session's next question) hits the cache
    key = (name, shape, W, gaussian, mc_seeds)
    hit = _cache.get(key)
    if hit is not None:
        _cache.move_to_end(key)
        return hit[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            found = _price(name, shape, W, gaussian, mc_seeds, error, data_independent)
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            found = Price(None, None, f"left out: {reason}")
    if found.mse is None:
        return found  # not cached: a failure may be passing (a warning, memory)
    _cache[key] = (W, found)
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return found


def _price(name: str, shape: tuple[int, ...], W: Any, gaussian: bool, mc_seeds: int | None,
           error: Any, data_independent: Any) -> Price:
    A = data_independent.strategy_for(name, shape, W,
                                      mechanism="gaussian" if gaussian else "laplace")
    if A is None:
        return Price(None, None, "no fixed strategy")
    return replace(_price_of(A, name, shape, W, gaussian, mc_seeds, error), strategy=A)


def _price_of(A: Any, name: str, shape: tuple[int, ...], W: Any, gaussian: bool,
              mc_seeds: int | None, error: Any) -> Price:
    m = W.shape[0]
    budget = {"rho": 1.0} if gaussian else {"eps": 1.0}
    try:
        total = float(error.expected_error(W, A, max_dense=MAX_DENSE, **budget))
        return Price(total / m, "exact", "exact expected error (LS)")
    except ValueError as exc:
        if "max_dense" not in str(exc):
            raise  # the strategy does not support W: no price is honest
    total_kron = range_kron_error(W, A, gaussian=gaussian)
    if total_kron is not None:
        return Price(total_kron / m, "exact", "exact expected error (LS; ranges ⊗ per attribute)")
    if name == "greedy_h" and len(shape) == 1:
        # GreedyH's recursion carries tr(W (AᵀA)⁺ Wᵀ) to its root exactly
        # (`selection.greedy_h_error`, O((n + q) log n)): no n×n matrix, and
        # 30× faster than 32 runs of the plan, each rebuilding its strategy
        from ..operators.selection import greedy_h_error

        trace = greedy_h_error(shape[0], W)
        total = error.noise_variance(A, **budget) * trace
        return Price(total / m, "exact", "exact expected error (LS; GreedyH's recursion)")
    return monte_carlo(name, shape, W, gaussian=gaussian, seeds=mc_seeds)


# candidates whose optimiser is not run on a histogram: their error there is
# the identity's (module docstring)
_OPTIMISERS = frozenset({"hdmm"})


def is_histogram(W: Any, shape: Sequence[int]) -> bool:
    """Whether W asks every cell of `shape` once: the identity over the whole
    domain, or a Kronecker product of identities (public structure)."""
    from ..matrix import Identity, Kronecker

    n = math.prod(int(s) for s in shape)
    if isinstance(W, Kronecker):
        return W.shape == (n, n) and all(isinstance(f, Identity) for f in W.factors)
    return isinstance(W, Identity) and W.shape == (n, n)


def rank(W: Any, kind: str, shape: Sequence[int], *, eps: float | None = None,
         rho: float | None = None, mc_seeds: int | None = None) -> tuple[Candidate, ...]:
    """Every data-independent candidate for workload W of `kind` over `shape`
    at `eps` (Laplace) or `rho` (Gaussian, zCDP: only the plans that take a
    mechanism), best first by expected RMSE per query; unpriced ones last
    with the reason. `mc_seeds` sets the Monte-Carlo seed count (default
    `MC_SEEDS`)."""
    from ..plans.registry import get

    if (eps is None) == (rho is None):
        raise TypeError("give exactly one of eps= (Laplace) and rho= (Gaussian)")
    gaussian = rho is not None
    unit = float(rho) if rho is not None else float(eps or 0.0) ** 2  # mse ∝ 1/ρ or 1/ε²
    out: list[Candidate] = []
    histogram = is_histogram(W, shape)
    for name in candidates(kind, shape):
        if gaussian and "mechanism" not in get(name).parameters:
            continue
        if histogram and name in _OPTIMISERS:  # the identity's error (module docstring);
            # its strategy is left for `planner.choose` to build if it is chosen
            p = replace(price("identity", shape, W, gaussian=gaussian, mc_seeds=mc_seeds),
                        strategy=None)
        else:
            p = price(name, shape, W, gaussian=gaussian, mc_seeds=mc_seeds)
        rmse = None if p.mse is None else math.sqrt(p.mse / unit)
        out.append(Candidate(name, False, rmse, p.note, p.method, p.strategy))
    order = sorted(range(len(out)), key=lambda i: (out[i].rmse is None, out[i].rmse or 0.0, i))
    return tuple(out[i] for i in order)
