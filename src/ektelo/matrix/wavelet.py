"""The Haar wavelet matrix `Wavelet` of Privelet (Xiao, Wang & Gehrke, ICDE
2010; paper §7.4, Table 2). Its element-wise |W| is a set of dyadic ranges,
so it comes after `ranges`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .base import EMatrix, check_p, check_sparse_size
from .core import _check_size
from .ranges import RangeQueries

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = ["Wavelet"]


class Wavelet(EMatrix):
    """The unnormalised Haar wavelet matrix of Privelet (Xiao et al., ICDE 2010).

    Row 0 is the total; then, level by level from the root, one row per dyadic
    interval with +1 on its left half and -1 on its right half. n must be a
    power of two. matvec and its transpose run in O(n); every column has
    1 + log2(n) entries of ±1, so both sensitivities are exact in O(1). Its
    element-wise |W| = W∘W is the set of those dyadic intervals: a
    `RangeQueries` with O(n) corners.
    """

    _fields = ("n", "transposed")

    def __init__(self, n: int, transposed: bool = False):
        self.n = _check_size(n, "n")
        if self.n & (self.n - 1):
            raise ValueError(f"Wavelet needs a power-of-two size, got {self.n}")
        self.transposed = bool(transposed)
        self.levels = self.n.bit_length() - 1
        self.shape = (self.n, self.n)

    def _forward(self, X: np.ndarray) -> np.ndarray:
        out = [np.empty((0, X.shape[1]))] * (self.levels + 1)
        sums = X
        for level in range(self.levels - 1, -1, -1):
            left, right = sums[0::2], sums[1::2]
            out[level + 1] = left - right
            sums = left + right
        out[0] = sums
        return np.concatenate(out, axis=0)

    def _backward(self, Y: np.ndarray) -> np.ndarray:
        values = Y[0:1]
        start = 1
        for level in range(self.levels):
            width = 1 << level
            coef = Y[start : start + width]
            nxt = np.empty((2 * width, Y.shape[1]))
            nxt[0::2] = values + coef
            nxt[1::2] = values - coef
            values = nxt
            start += width
        return np.array(values, copy=True)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self._backward(X) if self.transposed else self._forward(X)

    def _transpose(self) -> EMatrix:
        return Wavelet(self.n, not self.transposed)

    def _intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Inclusive [lower, upper] of each row's support, in row order."""
        lower, upper = [np.zeros(1, dtype=np.int64)], [np.full(1, self.n - 1, dtype=np.int64)]
        for level in range(self.levels):
            width = self.n >> level
            starts = np.arange(0, self.n, width, dtype=np.int64)
            lower.append(starts)
            upper.append(starts + width - 1)
        return np.concatenate(lower), np.concatenate(upper)

    def abs(self) -> EMatrix:
        lower, upper = self._intervals()
        return RangeQueries(self.n, lower, upper, transposed=self.transposed)

    def sqr(self) -> EMatrix:
        return self.abs()  # entries are 0 or ±1

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)
        if self.transposed:  # column j of Wᵀ is row j of W: its interval's length
            lower, upper = self._intervals()
            out: np.ndarray = (upper - lower + 1).astype(np.float64)
            return out
        return np.full(self.n, float(1 + self.levels))

    def sensitivity(self, p: int = 1) -> float:
        top = float(self.n) if self.transposed else float(1 + self.levels)
        return top if check_p(p) == 1 else math.sqrt(top)

    def max_column_nnz(self) -> int:
        return (1 + self.levels) if not self.transposed else self.n

    def is_integral(self) -> bool:
        return True

    def sparse(self) -> sp.csr_matrix:
        n = self.n
        check_sparse_size(n * (1 + self.levels), self.shape)
        cells = np.arange(n)
        rows, cols, vals = [np.zeros(n, dtype=np.int64)], [cells], [np.ones(n)]
        first = 1  # index of the first row of the current level
        for level in range(self.levels):
            width = n >> level  # the intervals of a level tile the domain
            rows.append(first + cells // width)
            cols.append(cells)
            vals.append(np.where(cells % width < width // 2, 1.0, -1.0))
            first += 1 << level
        mat = sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
        )
        return mat.T.tocsr() if self.transposed else mat
