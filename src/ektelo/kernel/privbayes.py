"""PrivBayes's private network selection (Zhang, Cormode, Procopiuc,
Srivastava & Xiao, "PrivBayes: private data release via Bayesian networks",
TODS 42(4) 2017, §4 GreedyBayes) — Private→Public.

`privbayes_select(codes, sizes, eps, source, degree=k)` learns a degree-k
Bayesian network over the table's attributes and returns its cliques
(child, *parents), whose marginals the plan then measures (εktelo's PBSelect,
§9.2 Algorithm 7).

The algorithm (GreedyBayes): pick a first attribute uniformly at random
(data-independent); then d − 1 times, among all pairs (X, Π) with X not yet in
the network and Π a set of min(k, |V|) attributes already in it, choose one by
the exponential mechanism with budget eps/(d − 1) (the paper's even split) and
the score
    R(X, Π) = ½ Σ_{x,π} | c(x, π) − c(x)·c(π)/N |,
the paper's general-domain score R (TODS §4.3: ½‖Pr[X,Π] − Pr[X]Pr[Π]‖₁)
written on counts (N rows): large when X depends on Π.  Contingency counts
come from np.bincount / np.unique on combined integer codes.

Sensitivity of R on counts (neighbours: one row added or removed, εktelo §3).
Adding row (x₀, π₀): the joint count moves by 1 in one cell (≤ 1 in the sum);
the product term c(x)c(π)/N becomes (c(x) + [x=x₀])(c(π) + [π=π₀])/(N + 1), and
Σ_{x,π} |new − old| ≤ Σ c(x)c(π)/(N(N+1)) + (c(x₀)-row + c(π₀)-column + 1)/(N+1)
= N/(N+1) + (2N + 1)/(N+1) < 3.  So |ΔR| ≤ ½(1 + 3) = 2 (the paper's 3/n for
the normalised score under row replacement is the bounded-DP counterpart).
Each choice is then eps/(d−1)-DP (`source.exponential_mechanism(scores,
sensitivity=2, epsilon=eps/(d−1))`, floating-point safe), the first choice
spends nothing, and by sequential composition the network is eps-DP.  The
output — attribute indices only — is public.
Floating-point: R is a sum of ≤ N + 1 terms |integer − rational| of total
size ≤ 2N computed in float64 (products c(x)c(π) exact below 2⁵³), so it is off
by ≤ 2(N + 2)²·2⁻⁵³; twice that (one error per neighbour) is added to the
sensitivity (≈ 10⁻⁶ for the 48,842-row adult table).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

__all__ = ["check_options", "privbayes_select", "r_score"]

_SENSITIVITY = 2.0  # of R on counts under add/remove-one-row (docstring)


def check_options(*, degree: int = 2) -> dict[str, int]:
    """The options, validated from public values only (before the charge)."""
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise ValueError(f"degree must be a positive integer, got {degree!r}")
    return {"degree": int(degree)}


def privbayes_select(
    codes: np.ndarray,
    sizes: tuple[int, ...],
    eps: float,
    source: Any,
    *,
    degree: int = 2,
) -> list[tuple[int, ...]]:
    """PrivBayes's greedy degree-k network, chosen with eps (even split over d−1 choices).

    codes: (rows, attrs) integer codes with 0 ≤ codes[:, j] < sizes[j].
    Returns one clique per attribute, in network order: (child, *parents) with
    the parents in ascending index order; the first is (X₁,), and for the first
    k+1 attributes each clique is contained in the next (a plan may measure
    only the cliques not contained in another).  Every clique has ≤ degree+1
    attributes.
    """
    table, dims = _check(codes, sizes)
    eps = _positive(eps, "eps")
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise ValueError(f"degree must be a positive integer, got {degree!r}")
    d = len(dims)
    first = _uniform_index(source, d)
    network: list[tuple[int, ...]] = [(first,)]
    if d == 1:
        return network
    chosen = [first]
    eps_step = eps / (d - 1)
    sensitivity = _SENSITIVITY + 4.0 * (table.shape[0] + 2) ** 2 * 2.0**-53
    cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    while len(chosen) < d:
        k = min(int(degree), len(chosen))
        candidates = [
            (child, parents)
            for child in range(d)
            if child not in chosen
            for parents in itertools.combinations(sorted(chosen), k)
        ]
        scores = np.array([r_score(table, dims, c, p, cache) for c, p in candidates])
        pick = source.exponential_mechanism(scores, sensitivity=sensitivity, epsilon=eps_step)
        child, parents = candidates[int(pick)]
        network.append((child, *parents))
        chosen.append(child)
    return network


def r_score(
    table: np.ndarray,
    dims: tuple[int, ...],
    child: int,
    parents: tuple[int, ...],
    cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] | None = None,
) -> float:
    """R(X, Π) = ½ Σ |c(x, π) − c(x)c(π)/N| on counts (see the module docstring)."""
    n_rows = table.shape[0]
    if n_rows == 0:
        return 0.0
    cache = {} if cache is None else cache
    pi_code, pi_counts = _codes(table, dims, parents, cache)
    x_code, x_counts = _codes(table, dims, (child,), cache)
    joint = x_code * pi_counts.size + pi_code
    cells, counts = np.unique(joint, return_counts=True)
    expected = x_counts[cells // pi_counts.size] * pi_counts[cells % pi_counts.size] / n_rows
    # cells with c(x, π) = 0 contribute their expected count; those sum to N − Σ expected
    gap = np.abs(counts - expected).sum() + max(0.0, n_rows - expected.sum())
    return 0.5 * float(gap)


def _codes(
    table: np.ndarray,
    dims: tuple[int, ...],
    attrs: tuple[int, ...],
    cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """Row codes of the combined attributes `attrs` and the count of every code."""
    if attrs not in cache:
        code = np.zeros(table.shape[0], dtype=np.int64)
        for a in attrs:
            code = code * dims[a] + table[:, a]
        cache[attrs] = (code, np.bincount(code, minlength=math.prod(dims[a] for a in attrs)))
    return cache[attrs]


def _uniform_index(source: Any, d: int) -> int:
    """A uniform index in [0, d) from the source's secure words (exact, by rejection)."""
    if d == 1:
        return 0
    bits = (d - 1).bit_length()
    while True:
        r = int(source.uint64(1)[0]) >> (64 - bits)
        if r < d:
            return r


def _check(codes: Any, sizes: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    table = np.asarray(codes)
    if table.ndim != 2 or table.shape[1] == 0:
        raise ValueError(f"codes must be a (rows, attributes) array, got shape {table.shape}")
    if not np.issubdtype(table.dtype, np.integer):
        raise TypeError(f"codes must be integers, got dtype {table.dtype}")
    try:
        dims = tuple(int(s) for s in sizes)
    except TypeError as exc:
        raise TypeError("sizes must be a sequence of attribute domain sizes") from exc
    if len(dims) != table.shape[1] or any(s < 1 for s in dims):
        raise ValueError(
            f"sizes must give one positive size per column ({table.shape[1]}), got {sizes!r}"
        )
    if table.shape[0] and ((table.min(axis=0) < 0).any() or (table.max(axis=0) >= dims).any()):
        raise ValueError("every code must satisfy 0 ≤ codes[:, j] < sizes[j]")
    if math.prod(dims) >= 2**62:
        raise ValueError("the attribute domain is too large for int64 cell codes")
    return table.astype(np.int64), dims


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v
