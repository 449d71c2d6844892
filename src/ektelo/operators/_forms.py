"""Workload structure the strategy optimisers (GreedyH, HDMM) look for.

Public code: these read only the workload, a public matrix.

* `range_form` recognises a workload whose rows are weighted 1-D intervals
  (Prefix, Suffix, Identity, Ones/Total, 1-D `RangeQueries`, and weighted,
  row-scaled or stacked combinations of them): both optimisers have exact
  fast paths for those.
* `ranges_matrix` builds the library matrix with the same Gram from such a
  form, repeated intervals merged; its `gram()` is the closed form
  (`RangeQueries.weighted_gram`).
* `dense_gram` materialises any workload's Gram WᵀW from `W.gram()`.

The Grams themselves live on the matrix classes (`EMatrix.gram`); nothing
here computes one.
"""

from __future__ import annotations

import numpy as np

from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Ones,
    Prefix,
    Product,
    RangeQueries,
    Suffix,
    Sum,
    VStack,
    Weighted,
)

# Largest domain for which a workload's dense Gram matrix is formed: 8192²
# doubles are 512 MiB.
MAX_GRAM_N = 8192
# Work arrays of at most this many entries when a Gram is materialised in blocks.
BLOCK_ENTRIES = 2**22

RangeForm = tuple[np.ndarray, np.ndarray, np.ndarray]


def range_form(W: EMatrix, n: int) -> RangeForm | None:
    """(lower, upper, squared weight) per row when W's rows are weighted 1-D
    intervals of [0, n), so that WᵀW = Σ_q ω_q 1_q 1_qᵀ; None otherwise."""
    if isinstance(W, Prefix):
        return np.zeros(n, dtype=np.int64), np.arange(n), np.ones(n)
    if isinstance(W, Suffix):
        return np.arange(n), np.full(n, n - 1, dtype=np.int64), np.ones(n)
    if isinstance(W, Identity):
        return np.arange(n), np.arange(n), np.ones(n)
    if isinstance(W, Ones):  # includes Total; m equal rows weigh m
        return np.zeros(1, dtype=np.int64), np.full(1, n - 1), np.full(1, float(W.shape[0]))
    if isinstance(W, RangeQueries):
        if W.transposed or len(W.domain_shape) != 1:
            return None
        return W.lower[:, 0], W.upper[:, 0], np.ones(W.num_queries)
    if isinstance(W, Weighted):
        inner = range_form(W.base, n)
        return None if inner is None else (inner[0], inner[1], inner[2] * W.weight**2)
    if isinstance(W, Product) and isinstance(W.A, Diagonal):
        inner = range_form(W.B, n)
        return None if inner is None else (inner[0], inner[1], inner[2] * W.A.d**2)
    if isinstance(W, VStack):
        parts = [range_form(block, n) for block in W.blocks]
        found = [p for p in parts if p is not None]
        if len(found) < len(parts):
            return None
        return (
            np.concatenate([p[0] for p in found]),
            np.concatenate([p[1] for p in found]),
            np.concatenate([p[2] for p in found]),
        )
    return None


def ranges_matrix(n: int, form: RangeForm) -> EMatrix:
    """diag(√ω)·R for the distinct intervals R of `form` (a repeated interval
    once, with the sum of its weights; weight-0 rows left out), so that its
    Gram is the form's Σ_q ω_q 1_q 1_qᵀ: `RangeQueries`, or a `Product` of a
    `Diagonal` and one. A form with no weight left gives the single range
    [0, n) with weight 0."""
    a, b, w = form
    keep = np.asarray(w) != 0
    if not keep.any():
        return Product(Diagonal([0.0]), RangeQueries(n, np.zeros(1, np.int64), np.full(1, n - 1)))
    a = np.asarray(a, dtype=np.int64)[keep]
    b = np.asarray(b, dtype=np.int64)[keep]
    key, inverse = np.unique(a * (n + 1) + b, return_inverse=True)
    weight = np.bincount(inverse.ravel(), np.asarray(w, dtype=np.float64)[keep], key.size)
    R = RangeQueries(n, key // (n + 1), key % (n + 1))
    return R if np.all(weight == 1.0) else Product(Diagonal(np.sqrt(weight)), R)


def dense_gram(W: EMatrix, n: int) -> np.ndarray:
    """WᵀW as a dense n×n array (symmetrised), from the library's `W.gram()`:
    a dense Gram as it is, a sum term by term, anything else by its action on
    column blocks of the identity (work arrays of bounded size)."""
    if n > MAX_GRAM_N:
        raise ValueError(
            f"this needs the dense {n}×{n} Gram matrix of the workload, which is too large "
            f"(limit n = {MAX_GRAM_N}); range workloads (Prefix, RangeQueries, ...) avoid it"
        )
    G = _densify(W.gram(), max(W.shape[0], n))
    return (G + G.T) / 2


def _densify(G: EMatrix, width: int) -> np.ndarray:
    if isinstance(G, Dense):
        return G.dense()
    if isinstance(G, Sum):
        out = _densify(G.terms[0], width)
        for t in G.terms[1:]:
            out += _densify(t, width)
        return out
    if isinstance(G, Weighted):
        out = _densify(G.base, width)
        out *= G.weight
        return out
    n = G.shape[1]
    block = max(1, BLOCK_ENTRIES // width)
    out = np.empty((n, n))
    for j in range(0, n, block):
        cols = np.zeros((n, min(block, n - j)))
        cols[np.arange(j, j + cols.shape[1]), np.arange(cols.shape[1])] = 1.0
        out[:, j : j + cols.shape[1]] = G.matmat(cols)
    return out
