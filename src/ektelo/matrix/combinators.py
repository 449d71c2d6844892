"""Combinators that build implicit matrices from others (paper §7.4, Table 3):
`VStack` (the paper's Union), `HStack`, `Product`, `Kronecker`, `Sum` and
`Weighted` (scalar multiple). `Product` and `Weighted` are defined with
`EMatrix` in `base` (its `@` and scalar `*` build them) and exported here.

Each delegates the primitive methods to its parts, so a composed matrix keeps
its parts' complexity. Sensitivities compose exactly: column norms of a stack
add, column norms of a Kronecker product multiply. Where no exact structural
rule exists (|AB|, A∘A of a sum or product with signed entries) the entries
are materialised, never estimated from below.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np

from .base import (
    EMatrix,
    Product,
    Weighted,
    as_blocks,
    check_dense_size,
    check_p,
    check_sparse_size,
)

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = ["HStack", "Kronecker", "Product", "Sum", "VStack", "Weighted"]


def _fresh_sum(parts: Iterable[np.ndarray]) -> np.ndarray:
    """Sum of arrays; the first two are added into a new array, the rest into it
    in place (parts may alias the caller's input, the total never does unless
    there is a single part)."""
    it = iter(parts)
    total = next(it)
    fresh = False
    for part in it:
        if fresh:
            total += part
        else:
            total = total + part
            fresh = True
    return total


class VStack(EMatrix):
    """Rows of every block stacked: the union of their queries."""

    _fields = ("blocks",)

    def __init__(self, blocks: Sequence[EMatrix]):
        self.blocks = as_blocks(blocks, "VStack")
        n = self.blocks[0].shape[1]
        for b in self.blocks:
            if b.shape[1] != n:
                raise ValueError(
                    f"VStack blocks must have the same number of columns: {n} vs {b.shape[1]}"
                )
        self.shape = (sum(b.shape[0] for b in self.blocks), n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        if len(self.blocks) == 1:
            return self.blocks[0]._matmat(X)
        out = np.empty((self.shape[0], X.shape[1]))
        start = 0
        for b in self.blocks:
            out[start : start + b.shape[0]] = b._matmat(X)
            start += b.shape[0]
        return out

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return np.concatenate([b._apply_axis(T) for b in self.blocks], axis=1)

    def _transpose(self) -> EMatrix:
        return HStack([b.T for b in self.blocks])

    def abs(self) -> EMatrix:
        return VStack([b.abs() for b in self.blocks])

    def sqr(self) -> EMatrix:
        return VStack([b.sqr() for b in self.blocks])

    @property
    def is_nonnegative(self) -> bool:
        return all(b.is_nonnegative for b in self.blocks)

    @property
    def is_binary(self) -> bool:
        return all(b.is_binary for b in self.blocks)

    def column_norms(self, p: int = 1) -> np.ndarray:
        return reduce(np.add, (b.column_norms(p) for b in self.blocks))

    def max_column_nnz(self) -> int:
        return sum(b.max_column_nnz() for b in self.blocks)

    def is_integral(self) -> bool:
        return all(b.is_integral() for b in self.blocks)

    def gram(self) -> EMatrix:
        return Sum([b.gram() for b in self.blocks])

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        return np.concatenate([b.dense() for b in self.blocks], axis=0)

    def sparse(self) -> sp.csr_matrix:
        return sp.vstack([b.sparse() for b in self.blocks], format="csr")

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix | None:
        parts = [block.column_block(cols) for block in self.blocks]
        return None if any(p is None for p in parts) else sp.vstack(parts, format="csc")


class HStack(EMatrix):
    """Columns of every block side by side (the transpose of a VStack)."""

    _fields = ("blocks",)

    def __init__(self, blocks: Sequence[EMatrix]):
        self.blocks = as_blocks(blocks, "HStack")
        m = self.blocks[0].shape[0]
        for b in self.blocks:
            if b.shape[0] != m:
                raise ValueError(
                    f"HStack blocks must have the same number of rows: {m} vs {b.shape[0]}"
                )
        self.shape = (m, sum(b.shape[1] for b in self.blocks))
        self._splits = np.cumsum([b.shape[1] for b in self.blocks])[:-1]

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        parts = np.split(X, self._splits, axis=0)
        return _fresh_sum(b._matmat(x) for b, x in zip(self.blocks, parts, strict=True))

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        parts = np.split(T, self._splits, axis=1)
        return _fresh_sum(b._apply_axis(t) for b, t in zip(self.blocks, parts, strict=True))

    def _transpose(self) -> EMatrix:
        return VStack([b.T for b in self.blocks])

    def abs(self) -> EMatrix:
        return HStack([b.abs() for b in self.blocks])

    def sqr(self) -> EMatrix:
        return HStack([b.sqr() for b in self.blocks])

    @property
    def is_nonnegative(self) -> bool:
        return all(b.is_nonnegative for b in self.blocks)

    @property
    def is_binary(self) -> bool:
        return all(b.is_binary for b in self.blocks)

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.concatenate([b.column_norms(p) for b in self.blocks])

    def max_column_nnz(self) -> int:
        return max(b.max_column_nnz() for b in self.blocks)

    def is_integral(self) -> bool:
        return all(b.is_integral() for b in self.blocks)

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        return np.concatenate([b.dense() for b in self.blocks], axis=1)

    def sparse(self) -> sp.csr_matrix:
        return sp.hstack([b.sparse() for b in self.blocks], format="csr")


class Sum(EMatrix):
    """The entry-wise sum of matrices of equal shape (e.g. a stack's Gram)."""

    _fields = ("terms",)

    def __init__(self, terms: Sequence[EMatrix]):
        self.terms = as_blocks(terms, "Sum")
        shape = self.terms[0].shape
        for t in self.terms:
            if t.shape != shape:
                raise ValueError(f"Sum terms must have equal shapes: {shape} vs {t.shape}")
        self.shape = shape

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return _fresh_sum(t._matmat(X) for t in self.terms)

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return _fresh_sum(t._apply_axis(T) for t in self.terms)

    def _transpose(self) -> EMatrix:
        return Sum([t.T for t in self.terms])

    def abs(self) -> EMatrix:
        return self if self.is_nonnegative else super().abs()

    @property
    def is_nonnegative(self) -> bool:
        return all(t.is_nonnegative for t in self.terms)

    def column_norms(self, p: int = 1) -> np.ndarray:
        if check_p(p) == 1 and self.is_nonnegative:
            return reduce(np.add, (t.column_norms(1) for t in self.terms))
        return super().column_norms(p)

    def max_column_nnz(self) -> int:
        return min(self.shape[0], sum(t.max_column_nnz() for t in self.terms))

    def is_integral(self) -> bool:
        return all(t.is_integral() for t in self.terms) or super().is_integral()

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        return reduce(np.add, (t.dense() for t in self.terms))

    def sparse(self) -> sp.csr_matrix:
        return reduce(lambda a, b: a + b, (t.sparse() for t in self.terms)).tocsr()


class Kronecker(EMatrix):
    """A₁ ⊗ A₂ ⊗ … ⊗ A_d, applied mode by mode without materialising.

    The data vector is indexed in C (row-major) order over the factors'
    column sizes, matching `numpy.ravel` of a d-dimensional array. Each factor
    is applied along its own axis of that array (`_apply_axis`), in place of
    the layout: no transposition copies, identities cost nothing.
    """

    _fields = ("factors",)

    def __init__(self, factors: Sequence[EMatrix]):
        self.factors = as_blocks(factors, "Kronecker")
        self.shape = (
            math.prod(f.shape[0] for f in self.factors),
            math.prod(f.shape[1] for f in self.factors),
        )

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        pre, _, post = T.shape
        after = self.shape[1]  # columns of the factors not yet applied
        Z = T
        for f in self.factors:
            m, n = f.shape
            after //= n
            Z = f._apply_axis(Z.reshape(pre, n, after * post))
            pre *= m
        return Z.reshape(T.shape[0], self.shape[0], post)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = self._apply_axis(X.reshape(1, self.shape[1], X.shape[1]))[0]
        # Only all-identity factors leave the input untouched: then copy.
        return out.copy() if np.may_share_memory(out, X) else out

    def _transpose(self) -> EMatrix:
        return Kronecker([f.T for f in self.factors])

    def abs(self) -> EMatrix:
        return Kronecker([f.abs() for f in self.factors])

    def sqr(self) -> EMatrix:
        return Kronecker([f.sqr() for f in self.factors])

    @property
    def is_nonnegative(self) -> bool:
        return all(f.is_nonnegative for f in self.factors)

    @property
    def is_binary(self) -> bool:
        return all(f.is_binary for f in self.factors)

    def column_norms(self, p: int = 1) -> np.ndarray:
        return reduce(np.kron, (f.column_norms(p) for f in self.factors))

    def sensitivity(self, p: int = 1) -> float:
        return math.prod(f.sensitivity(p) for f in self.factors)

    def max_column_nnz(self) -> int:
        return math.prod(f.max_column_nnz() for f in self.factors)

    def is_integral(self) -> bool:
        return all(f.is_integral() for f in self.factors)

    def gram(self) -> EMatrix:
        return Kronecker([f.gram() for f in self.factors])

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        return reduce(np.kron, (f.dense() for f in self.factors))

    def sparse(self) -> sp.csr_matrix:
        parts = [f.sparse() for f in self.factors]
        check_sparse_size(math.prod(p.nnz for p in parts), self.shape)
        return reduce(lambda a, b: sp.kron(a, b, format="csr"), parts)
