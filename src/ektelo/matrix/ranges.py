"""Range-query matrices in 1-D and n-D (paper §7.5, Example 3).

A set of m axis-aligned ranges over a d-dimensional domain is stored as its
corners only and applied as `Product(Sparse, Kronecker(Prefix, …, Prefix))`:
each range sum is an inclusion–exclusion of at most 2^d prefix sums, so
matvec costs O(N + m·2^d) for a domain of N cells. Because the class is built
from ranges (never from an arbitrary sparse matrix) its entries are 0/1 by
construction, so `abs` and `sqr` are the matrix itself — exactly.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import EMatrix, check_dense_size, check_p, check_sparse_size
from .combinators import Kronecker, Product, Sum
from .core import Dense, Diagonal, Identity, Prefix, Sparse, Suffix

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = ["RangeQueries"]

# Most range cells (entries) that `weighted_coverage` expands at once (≈ 3 × 8
# bytes each); ranges larger than _LARGE_RANGE cells are added as slices instead.
_MAX_DIRECT_ENTRIES = 2**22
_LARGE_RANGE = 4096
# `weighted_gram` returns the dense Gram of 1-D ranges on at most this many cells
# when its sparse core would hold more than n²/_SPARSE_CORE_FRACTION entries:
# then applying the core costs about as much as the dense product, and the
# dense form is built in O(n² + m).
_DENSE_GRAM_N = 2048
_SPARSE_CORE_FRACTION = 16


class RangeQueries(EMatrix):
    """m range queries over a domain of shape `domain_shape`.

    `lower` and `upper` are integer arrays of shape (m, d) (or (m,) in 1-D)
    holding inclusive corners. With `transposed=True` the object is the
    transpose (n × m) of that query matrix.
    """

    _fields = ("domain_shape", "lower", "upper", "transposed")

    def __init__(
        self,
        domain_shape: int | Sequence[int],
        lower: Any,
        upper: Any,
        transposed: bool = False,
    ):
        dshape = (domain_shape,) if isinstance(domain_shape, (int, np.integer)) else domain_shape
        dshape = tuple(dshape)
        if (
            not dshape
            or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) for s in dshape)
            or any(s < 1 for s in dshape)
        ):
            raise ValueError(f"domain_shape must hold positive integer sizes, got {domain_shape!r}")
        self.domain_shape = tuple(int(s) for s in dshape)
        d = len(self.domain_shape)
        lo = np.asarray(lower)
        hi = np.asarray(upper)
        if lo.ndim == 1 and d == 1:
            lo, hi = lo.reshape(-1, 1), hi.reshape(-1, 1)
        if lo.ndim != 2 or lo.shape != hi.shape or lo.shape[1] != d or lo.shape[0] == 0:
            raise ValueError(
                f"lower/upper must both have shape (m, {d}) with m ≥ 1; "
                f"got {np.shape(lower)} and {np.shape(upper)}"
            )
        if not (np.issubdtype(lo.dtype, np.integer) and np.issubdtype(hi.dtype, np.integer)):
            raise TypeError("range corners must be integer arrays")
        bound = np.array(self.domain_shape)
        if np.any(lo < 0) or np.any(hi >= bound) or np.any(lo > hi):
            raise ValueError(
                "every range needs 0 ≤ lower ≤ upper < domain size on each axis "
                f"(domain {self.domain_shape})"
            )
        self.lower = np.array(lo, dtype=np.int64)
        self.upper = np.array(hi, dtype=np.int64)
        self.lower.setflags(write=False)
        self.upper.setflags(write=False)
        self.transposed = bool(transposed)
        m, n = self.lower.shape[0], math.prod(self.domain_shape)
        self.shape = (n, m) if self.transposed else (m, n)

    @property
    def num_queries(self) -> int:
        return int(self.lower.shape[0])

    def corner_matrix(self) -> sp.csr_matrix:
        """The sparse ±1 matrix S with this = S · (Prefix ⊗ … ⊗ Prefix)."""
        corners: sp.csr_matrix | None = self.__dict__.get("_cache_corners")
        if corners is None:  # the transpose (same ranges) may have built it
            twin = self.__dict__.get("_cache_T")
            corners = None if twin is None else twin.__dict__.get("_cache_corners")
            if corners is not None:
                self.__dict__["_cache_corners"] = corners
        if corners is None:
            m, d = self.lower.shape
            rows, cols, vals = [], [], []
            strides = np.array(
                [math.prod(self.domain_shape[i + 1 :]) for i in range(d)], dtype=np.int64
            )
            for choice in itertools.product((0, 1), repeat=d):
                # choice[i] == 1 picks the corner just below the range on axis i.
                idx = np.where(np.array(choice) == 1, self.lower - 1, self.upper)
                valid = np.all(idx >= 0, axis=1)
                sign = (-1.0) ** sum(choice)
                rows.append(np.nonzero(valid)[0])
                cols.append(idx[valid] @ strides)
                vals.append(np.full(int(valid.sum()), sign))
            corners = sp.csr_matrix(
                (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                shape=(m, math.prod(self.domain_shape)),
            )
            self.__dict__["_cache_corners"] = corners
        return corners

    def _prefix(self) -> Kronecker:
        return Kronecker([Prefix(s) for s in self.domain_shape])

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        S = self.corner_matrix()
        if self.transposed:
            return self._prefix().T._matmat(np.asarray(S.T @ X))
        return np.asarray(S @ self._prefix()._matmat(X))

    def _transpose(self) -> EMatrix:
        return RangeQueries(self.domain_shape, self.lower, self.upper, not self.transposed)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def _coverage(self) -> np.ndarray:
        """How many ranges cover each cell (the column sums), exact. In 1-D a
        difference array (+1 at lower, −1 past upper): the kernel asks for this
        on every measurement of a range strategy (max_column_nnz, §5.2)."""
        if len(self.domain_shape) == 1:
            n = self.domain_shape[0]
            lo, hi = self.lower[:, 0], self.upper[:, 0]
            steps = np.bincount(lo, minlength=n + 1) - np.bincount(hi + 1, minlength=n + 1)
            return np.cumsum(steps[:n]).astype(np.float64)
        S = self.corner_matrix()
        return self._prefix().T.matvec(np.asarray(S.sum(axis=0)).reshape(-1))

    def _sizes(self) -> np.ndarray:
        out: np.ndarray = np.prod(self.upper - self.lower + 1, axis=1).astype(np.float64)
        return out

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)  # entries are 0/1: both norms are the same counts
        return self._sizes() if self.transposed else self._coverage()

    def max_column_nnz(self) -> int:
        return int(self.column_norms().max())

    def is_integral(self) -> bool:
        return True

    def sparse(self) -> sp.csr_matrix:
        m = self.lower.shape[0]
        n = math.prod(self.domain_shape)
        sizes = self._sizes().astype(np.int64)
        nnz = int(sizes.sum())
        check_sparse_size(nnz, self.shape)
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        mat = sp.csr_matrix((np.ones(nnz), self._entry_columns(sizes), indptr), shape=(m, n))
        return mat.T.tocsr() if self.transposed else mat

    def _entry_columns(self, sizes: np.ndarray) -> np.ndarray:
        """The cell of every entry, range by range (each range's cells in C order)."""
        d = self.lower.shape[1]
        extent = self.upper - self.lower + 1
        nnz = int(sizes.sum())
        starts = np.cumsum(sizes) - sizes
        # Position of each entry within its range, unravelled in C order.
        rest = np.arange(nnz, dtype=np.int64) - np.repeat(starts, sizes)
        cols = np.zeros(nnz, dtype=np.int64)
        stride = 1
        for axis in range(d - 1, -1, -1):
            ext = np.repeat(extent[:, axis], sizes)
            cols += (np.repeat(self.lower[:, axis], sizes) + rest % ext) * stride
            rest //= ext
            stride *= self.domain_shape[axis]
        return cols

    def weighted_coverage(self, weights: np.ndarray) -> np.ndarray:
        """Per cell j, Σ of weights[q] over the ranges q containing j, each range's
        weight added to its cells' totals in turn — a recursive sum (in some
        order) of at most max_column_nnz terms, so for non-negative weights it
        is within a relative (max_column_nnz − 1)·2⁻⁵³ (to first order) of the
        exact value, the rounding `kernel.sensitivity_of` allows for. (Sums
        through the prefix form cancel ± partial sums over the whole domain,
        with no such bound.) Memory stays bounded at any size: ranges of more
        than `_LARGE_RANGE` cells are added as slices of the output; the others
        are expanded to their cells `_MAX_DIRECT_ENTRIES` at a time. Ranges of
        the untransposed matrix only.
        """
        if self.transposed:
            raise ValueError("weighted_coverage is for the untransposed range matrix")
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != self.num_queries:
            raise ValueError(f"{w.size} weights for {self.num_queries} ranges")
        sizes = self._sizes().astype(np.int64)
        n = math.prod(self.domain_shape)
        out = np.zeros(n)
        grid = out.reshape(self.domain_shape)
        large = sizes > _LARGE_RANGE
        for q in np.flatnonzero(large):
            corners = zip(self.lower[q], self.upper[q], strict=True)
            box = tuple(slice(int(a), int(b) + 1) for a, b in corners)
            grid[box] += w[q]
        small = np.flatnonzero(~large)
        ends = np.cumsum(sizes[small])
        first = 0
        while first < small.size:
            done = int(ends[first - 1]) if first else 0
            last = max(first + 1, int(np.searchsorted(ends, done + _MAX_DIRECT_ENTRIES, "right")))
            idx = small[first:last]
            chunk = RangeQueries(self.domain_shape, self.lower[idx], self.upper[idx])
            out += np.bincount(
                chunk._entry_columns(sizes[idx]), np.repeat(w[idx], sizes[idx]), minlength=n
            )
            first = last
        return out

    def _weighted_coverage(self, w: np.ndarray) -> np.ndarray | None:
        return None if self.transposed else self.weighted_coverage(w)

    def _weighted_gram(self, w: np.ndarray) -> EMatrix | None:
        if self.transposed or len(self.domain_shape) != 1:
            return None
        return self.weighted_gram(w)

    def gram(self) -> EMatrix:
        """WᵀW: for 1-D ranges in closed form (`weighted_gram` with unit
        weights); d-D ranges and the transpose through the generic product."""
        if self.transposed or len(self.domain_shape) != 1:
            return super().gram()
        return self.weighted_gram(np.ones(self.num_queries))

    def weighted_gram(self, weights: Any) -> EMatrix:
        """Wᵀ·diag(w)·W = Σ_q w_q 1_q 1_qᵀ for 1-D ranges q = [a_q, b_q] (the
        Gram of diag(√w)·W), in the cheapest exact form:

        * every range a single cell: `Diagonal` of the summed weights
          (`Identity` when they are all 1);
        * every range of [0, n) exactly once, with one weight c (all ranges):
          G_ij = c·(min(i, j) + 1)(n − max(i, j)), i.e. with l_i = i + 1 and
          r_i = n − i, G = c·(D_r·Prefix·D_l + D_l·Suffix·D_r − D_{l∘r}):
          O(n) per column;
        * ranges that all start at cell 0 (prefixes): Suffix·diag(h)·Prefix
          with h_j the weight of the prefixes ending at j (Prefix's own Gram
          Suffix·Prefix when h = 1): O(n) per column;
        * otherwise W = S·Prefix for the corner matrix S (±1 at b_q and
          a_q − 1), so G = Suffix·H·Prefix with the sparse core
          H = Sᵀ·diag(w)·S of at most 4m entries: O(n + m) per column. On at
          most 2048 cells whose core holds more than n²/16 entries the
          dense G instead, from the dominance sums G_ij = Σ w_q over the
          ranges with a_q ≤ i and b_q ≥ j (i ≤ j), in O(n² + m).
        """
        if self.transposed or len(self.domain_shape) != 1:
            raise ValueError("weighted_gram is for untransposed 1-D range queries")
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != self.num_queries:
            raise ValueError(f"{w.size} weights for {self.num_queries} ranges")
        n = self.domain_shape[0]
        a, b = self.lower[:, 0], self.upper[:, 0]
        if np.array_equal(a, b):
            d = np.bincount(a, w, n)
            return Identity(n) if np.all(d == 1.0) else Diagonal(d)
        if (
            w.size == n * (n + 1) // 2
            and np.all(w == w[0])
            and np.bincount(a * n + b, minlength=n * n).max() == 1  # every range once
        ):
            left = np.arange(1.0, n + 1.0)
            right = n - np.arange(n, dtype=np.float64)
            G: EMatrix = Sum(
                [
                    Product(Diagonal(right), Product(Prefix(n), Diagonal(left))),
                    Product(Diagonal(left), Product(Suffix(n), Diagonal(right))),
                    Diagonal(-left * right),
                ]
            )
            return G if w[0] == 1.0 else G * float(w[0])
        if not a.any():
            h = np.bincount(b, w, n)
            core: EMatrix = Prefix(n) if np.all(h == 1.0) else Product(Diagonal(h), Prefix(n))
            return Product(Suffix(n), core)
        inner = a > 0
        before, wi = a[inner] - 1, w[inner]
        H = sp.csr_matrix(
            (
                np.concatenate([w, wi, -wi, -wi]),
                (
                    np.concatenate([b, before, before, b[inner]]),
                    np.concatenate([b, before, b[inner], before]),
                ),
            ),
            shape=(n, n),
        )
        H.sum_duplicates()
        if n <= _DENSE_GRAM_N and H.nnz > n * n // _SPARSE_CORE_FRACTION:
            hist = np.bincount(a * n + b, w, n * n).reshape(n, n)  # weight per (a, b)
            S = np.cumsum(np.cumsum(hist, axis=0)[:, ::-1], axis=1)[:, ::-1]  # a ≤ i, b ≥ j
            dense = np.triu(S)
            dense += np.triu(S, 1).T
            dense.setflags(write=False)
            return Dense._wrap(dense)  # finite: sums of finite weights
        return Product(Suffix(n), Product(Sparse(H), Prefix(n)))

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)  # (in NumPy: no SciPy for a small matrix, #41)
        m = self.lower.shape[0]
        sizes = self._sizes().astype(np.int64)
        out = np.zeros((m, math.prod(self.domain_shape)))
        out[np.repeat(np.arange(m), sizes), self._entry_columns(sizes)] = 1.0
        return np.ascontiguousarray(out.T) if self.transposed else out
