"""Expected error of data-independent plans, before any budget is spent
(the matrix mechanism: Li, Miklau, Hay, McGregor & Rastogi, VLDB J. 2015).

**Public**: these functions read only matrices and ε. For a strategy A
measured with the Laplace mechanism at ε (noise scale Δ_A/ε per answer,
Δ_A = ‖A‖₁ the maximum column L1 norm, variance 2(Δ_A/ε)²) and the workload
W answered from the least-squares estimate x̂ = A⁺y, the error W x̂ − W x =
W A⁺ η is unbiased when A supports W (W A⁺A = W), and

    E‖W x̂ − W x‖₂² = 2 (Δ_A/ε)² ‖W A⁺‖_F² = 2 (Δ_A/ε)² trace(W (AᵀA)⁺ Wᵀ),

with query i's variance 2 (Δ_A/ε)² ‖wᵢ A⁺‖₂² (the diagonal). For several
measurements with noise scales bⱼ fitted by weighted least squares (what
`inference.least_squares` does), A⁺ becomes the weighted pseudo-inverse:
E‖·‖² = 2 trace(W (Σⱼ QⱼᵀQⱼ / bⱼ²)⁺ Wᵀ)  (`ls_error`).

Structure is used where the algebra allows: A = Identity needs only ‖W‖_F²
(column norms); Kronecker W and A with matching factors factorise,
‖(⊗Wᵢ)(⊗Aᵢ)⁺‖_F² = ∏ ‖Wᵢ Aᵢ⁺‖_F²; a stacked W sums over its blocks;
scalar weights factor out. Anything else is computed densely through an
eigendecomposition of the n×n Gram matrix, refused above `max_dense` cells
(O(n³) time, O(n²) memory).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as check
from .._blas import small_blas
from ..matrix import EMatrix, Identity, Kronecker, Sum, VStack, Weighted
from ..measurement import Measurement

__all__ = [
    "expected_error",
    "ls_error",
    "noise_variance",
    "rootmse",
    "scaled_error",
]

_MAX_DENSE = 4096
# Entries per block when a workload is materialised piecewise.
_CHUNK_ENTRIES = 2**24
# A strategy supports W when ‖W(I − Π)‖_F² ≤ this fraction of ‖W‖_F², Π the
# projector onto A's row space.
_SUPPORT_RTOL = 1e-8


def _check_pair(W: Any, A: Any) -> None:
    if not isinstance(W, EMatrix) or not isinstance(A, EMatrix):
        raise TypeError("W and A must be EMatrix objects")
    if W.shape[1] != A.shape[1]:
        raise ValueError(
            f"W has {W.shape[1]} columns but A has {A.shape[1]}: they must share a domain"
        )


def expected_error(
    W: EMatrix,
    A: EMatrix,
    eps: float | None = None,
    *,
    rho: float | None = None,
    per_query: bool = False,
    max_dense: int = _MAX_DENSE,
) -> Any:
    """Exact expected total squared error of answering W by least squares from
    strategy A measured with Laplace noise at ε, or Gaussian noise at ρ-zCDP:

        Laplace:   2 (‖A‖₁/ε)² ‖W A⁺‖_F²  =  2 (‖A‖₁/ε)² trace(W (AᵀA)⁺ Wᵀ);
        Gaussian:  σ² ‖W A⁺‖_F² with σ² = ‖A‖₂²/(2ρ) (the Gaussian mechanism's
                   variance at ρ-zCDP, Bun & Steinke 2016; the kernel's exact
                   discrete Gaussian has at most this variance up to its grid).

    Pass exactly one of `eps` and `rho`. With ``per_query=True`` returns the
    vector of per-query variances instead (it sums to the total).

    Raises:
        ValueError: A does not support W (the LS answers would be biased, so
            the error depends on the data), or the structure does not
            factorise and the domain exceeds `max_dense` cells.
    """
    _check_pair(W, A)
    factor = noise_variance(A, eps, rho=rho)
    total, vec = _frob(W, A, per_query, int(max_dense))
    return factor * vec if per_query else factor * total


def noise_variance(A: EMatrix, eps: float | None = None, *, rho: float | None = None) -> float:
    """The per-answer noise variance of measuring A at ε (Laplace, 2(‖A‖₁/ε)²)
    or at ρ-zCDP (Gaussian, ‖A‖₂²/(2ρ))."""
    if (eps is None) == (rho is None):
        raise TypeError("give exactly one of eps= (Laplace) and rho= (Gaussian)")
    if eps is not None:
        return 2.0 * (A.sensitivity(1) / check.positive(eps, "eps")) ** 2
    return A.sensitivity(2) ** 2 / (2.0 * check.positive(rho, "rho"))


def ls_error(
    W: EMatrix,
    measured: Sequence[tuple[EMatrix, float] | Measurement],
    *,
    per_query: bool = False,
    max_dense: int = _MAX_DENSE,
) -> Any:
    """Expected total squared error of W from weighted least squares over
    several measurements — (Qⱼ, bⱼ) pairs of Laplace noise scale bⱼ (variance
    vⱼ = 2bⱼ²), or `Measurement`s with any noise (vⱼ their variance) — rows
    weighted by 1/√vⱼ as `inference.least_squares` does:

        trace(W (Σⱼ QⱼᵀQⱼ / vⱼ)⁺ Wᵀ).

    The §5.5 theorem follows: appending a measurement never increases it.
    """
    items = list(measured)
    if not items:
        raise ValueError("ls_error needs at least one (matrix, noise_scale) pair")
    blocks = []
    for i, item in enumerate(items):
        if isinstance(item, Measurement):
            Q, variance = item.query_on_root, item.variance
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], EMatrix):
            Q, b = item
            variance = 2.0 * check.positive(b, f"measured[{i}] noise scale") ** 2
        else:
            raise TypeError(f"measured[{i}] must be a Measurement or a (matrix, scale) pair")
        if not (math.isfinite(variance) and variance > 0):
            raise ValueError(f"measured[{i}] has no positive finite noise variance")
        _check_pair(W, Q)
        blocks.append(Weighted(Q, 1.0 / math.sqrt(variance)))
    A = blocks[0] if len(blocks) == 1 else VStack(blocks)
    total, vec = _frob(W, A, per_query, int(max_dense))
    return vec if per_query else total


def rootmse(W: EMatrix, A: EMatrix, eps: float | None = None, **options: Any) -> float:
    """Root mean squared error per workload query: √(expected_error / m)
    (`rho=` for Gaussian noise, as in `expected_error`)."""
    return math.sqrt(float(expected_error(W, A, eps, **options)) / W.shape[0])


def scaled_error(W: EMatrix, A: EMatrix, eps: float, records: float, **options: Any) -> float:
    """√(expected_error) / (m · records): the expected-error counterpart of
    DPBench's scaled per-query L2 error ‖Wx − Wx̂‖₂ / (m ‖x‖₁)
    (`ektelo.workload.metrics.scaled_l2_error`), for a data set of `records`
    records. By Jensen's inequality it bounds the mean of that metric."""
    n_records = check.positive(records, "records")
    total = float(expected_error(W, A, eps, **options))
    return math.sqrt(total) / (W.shape[0] * n_records)


# ---------------------------------------------------------------------------
# ‖W A⁺‖_F² and the per-row squared norms of W A⁺, by structure
# ---------------------------------------------------------------------------
def _frob(W: EMatrix, A: EMatrix, per_query: bool, max_dense: int) -> tuple[float, Any]:
    if isinstance(W, Weighted):
        total, vec = _frob(W.base, A, per_query, max_dense)
        c2 = W.weight**2
        return c2 * total, (c2 * vec if per_query else None)
    if isinstance(A, Weighted):
        if A.weight == 0:
            raise ValueError("strategy is zero: it supports no workload")
        total, vec = _frob(W, A.base, per_query, max_dense)
        c2 = A.weight**2
        return total / c2, (vec / c2 if per_query else None)
    if isinstance(W, VStack):
        parts = [_frob(B, A, per_query, max_dense) for B in W.blocks]
        total = float(sum(t for t, _ in parts))
        return total, (np.concatenate([v for _, v in parts]) if per_query else None)
    if isinstance(A, Identity):
        total = float(W.column_norms(2).sum())
        return total, (W.sqr().matvec(np.ones(W.shape[1])) if per_query else None)
    if (
        isinstance(W, Kronecker)
        and isinstance(A, Kronecker)
        and len(W.factors) == len(A.factors)
        and all(w.shape[1] == a.shape[1] for w, a in zip(W.factors, A.factors, strict=True))
    ):
        parts = [
            _frob(w, a, per_query, max_dense) for w, a in zip(W.factors, A.factors, strict=True)
        ]
        total = math.prod(t for t, _ in parts)
        vec = None
        if per_query:
            vec = parts[0][1]
            for _, v in parts[1:]:
                vec = np.kron(vec, v)
        return float(total), vec
    if isinstance(W, Sum) and isinstance(A, Kronecker):
        summed = _kron_sum_frob(W, A, max_dense)
        if summed is not None:
            return float(summed.sum()), (summed if per_query else None)
    return _dense_frob(W, A, per_query, max_dense)


def _kron_sum_frob(W: Sum, A: Kronecker, max_dense: int) -> np.ndarray | None:
    """Per-row ‖w (AᵀA)⁺ᐟ²‖² of a sum of Kronecker products W = Σ_t c_t ⊗_i W_ti
    (an OR filter's disjoint terms, `ektelo.sql`) against a Kronecker
    strategy with matching factors, without forming either: with
    Z_i Z_iᵀ = (A_iᵀA_i)⁺ and F_ti = W_ti Z_i, row r's value is
    Σ_{t,t'} c_t c_t' Π_i ⟨F_ti[r_i], F_t'i[r_i]⟩ — the diagonal of a sum of
    Kronecker products of small per-attribute cross terms. None when the
    terms do not have that shape."""
    terms: list[tuple[float, Kronecker]] = []
    for t in W.terms:
        c, base = (t.weight, t.base) if isinstance(t, Weighted) else (1.0, t)
        if not (isinstance(base, Kronecker) and len(base.factors) == len(A.factors)
                and all(w.shape[1] == a.shape[1]
                        for w, a in zip(base.factors, A.factors, strict=True))):
            return None
        terms.append((float(c), base))
    F: list[list[np.ndarray]] = [[] for _ in terms]
    for i, a in enumerate(A.factors):
        V, lam = _spectrum(a)
        for k, (_, K) in enumerate(terms):
            w = K.factors[i]
            _dense_frob(w, a, False, max_dense)  # raises where A_i does not support W_ti
            F[k].append(np.asarray(w.matmat(V / np.sqrt(lam)), dtype=np.float64))
    out = np.zeros(W.shape[0])
    for k, (ck, _) in enumerate(terms):
        for j, (cj, _) in enumerate(terms):
            cross = np.einsum("ij,ij->i", F[k][0], F[j][0])
            for i in range(1, len(A.factors)):
                cross = np.kron(cross, np.einsum("ij,ij->i", F[k][i], F[j][i]))
            out += ck * cj * cross
    return out


def _dense_frob(W: EMatrix, A: EMatrix, per_query: bool, max_dense: int) -> tuple[float, Any]:
    n = A.shape[1]
    if n > max_dense:
        raise ValueError(
            f"expected error needs (AᵀA)⁺ for a domain of {n} cells densely "
            f"(O(n³) time, O(n²) memory), above max_dense={max_dense}; only Identity, "
            "Kronecker (with matching factors) and stacked structure factorise"
        )
    with small_blas(n):  # a small domain's on one BLAS thread (#41)
        return _dense_frob_of(W, A, per_query)


def _dense_frob_of(W: EMatrix, A: EMatrix, per_query: bool) -> tuple[float, Any]:
    V, lam = _spectrum(A)
    if V.shape[1] == 0:
        raise ValueError("strategy is zero: it supports no workload")
    WtW = _gram_dense(W)
    B = WtW @ V
    quad = np.einsum("ij,ij->j", V, B)  # v_kᵀ WᵀW v_k
    norm2 = float(np.trace(WtW))
    missing = norm2 - float(quad.sum())  # ‖W (I − Π)‖_F²
    if missing > _SUPPORT_RTOL * max(norm2, np.finfo(np.float64).tiny):
        raise ValueError(
            "the strategy does not support the workload (some workload query is not a "
            "linear combination of strategy queries): least-squares answers would be "
            "biased and their error would depend on the data"
        )
    total = float(np.sum(quad / lam))
    if not per_query:
        return total, None
    Z = V / np.sqrt(lam)
    m = W.shape[0]
    vec = np.zeros(m)
    step = max(1, _CHUNK_ENTRIES // max(m, 1))
    for j in range(0, Z.shape[1], step):
        vec += np.sum(W.matmat(Z[:, j : j + step]) ** 2, axis=1)
    return total, vec


def _spectrum(A: EMatrix) -> tuple[np.ndarray, np.ndarray]:
    """(V, λ): the non-zero eigenpairs of AᵀA (λ = squared singular values).

    Through the symmetric eigendecomposition of the n×n Gram matrix (several
    times faster than an SVD of a tall A); eigenvalues below
    10·n·ε_machine·λ_max count as zero.
    """
    n = A.shape[1]
    G = _gram_dense(A)
    lam, V = np.linalg.eigh(0.5 * (G + G.T))
    keep = lam > lam.max(initial=0.0) * n * np.finfo(np.float64).eps * 10
    return V[:, keep], lam[keep]


def _gram_dense(M: EMatrix) -> np.ndarray:
    """MᵀM as a dense n×n array, built in column blocks (never all of M)."""
    m, n = M.shape
    if isinstance(M, (Identity, Kronecker)) or m * n <= _CHUNK_ENTRIES:
        try:
            return np.asarray(M.gram().dense(), dtype=np.float64)
        except MemoryError:
            pass
    MT = M.T
    out = np.empty((n, n))
    step = max(1, _CHUNK_ENTRIES // max(m, 1))
    for j in range(0, n, step):
        E = np.zeros((n, min(step, n - j)))
        E[np.arange(j, j + E.shape[1]), np.arange(E.shape[1])] = 1.0
        out[:, j : j + E.shape[1]] = MT.matmat(M.matmat(E))
    return out
