"""Core matrices (paper §7.4, Table 2): Identity, Ones/Total, Prefix, Suffix,
Wavelet, Diagonal, and the explicit Dense and Sparse wrappers.

Each class stores only its defining parameters and implements the primitive
methods in its own best complexity; e.g. `Prefix` applies in O(n) time with a
single cumulative sum and no stored entries.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from .base import EMatrix

__all__ = [
    "Dense",
    "Diagonal",
    "Identity",
    "Ones",
    "Prefix",
    "Sparse",
    "Suffix",
    "Total",
    "Wavelet",
]


def _check_size(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


class Identity(EMatrix):
    """The n×n identity: matvec is a copy, transpose/abs/sqr are itself."""

    def __init__(self, n: int):
        self.n = _check_size(n, "n")
        self.shape = (self.n, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.array(X, dtype=np.float64, copy=True)

    def _transpose(self) -> EMatrix:
        return self

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.ones(self.n)

    def sensitivity(self, p: int = 1) -> float:
        return 1.0

    def max_column_nnz(self) -> int:
        return 1

    def is_integral(self) -> bool:
        return True

    def gram(self) -> EMatrix:
        return self

    def dense(self) -> np.ndarray:
        return np.eye(self.n)

    def sparse(self) -> sp.csr_matrix:
        return sp.identity(self.n, format="csr", dtype=np.float64)


class Ones(EMatrix):
    """The m×n matrix of all ones."""

    def __init__(self, m: int, n: int):
        self.m = _check_size(m, "m")
        self.n = _check_size(n, "n")
        self.shape = (self.m, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.repeat(X.sum(axis=0, keepdims=True), self.m, axis=0)

    def _transpose(self) -> EMatrix:
        return Ones(self.n, self.m)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.full(self.n, float(self.m))

    def sensitivity(self, p: int = 1) -> float:
        return float(self.m) if p == 1 else math.sqrt(self.m)

    def max_column_nnz(self) -> int:
        return self.m

    def is_integral(self) -> bool:
        return True

    def gram(self) -> EMatrix:
        return Ones(self.n, self.n) * float(self.m)

    def dense(self) -> np.ndarray:
        return np.ones(self.shape)

    def sparse(self) -> sp.csr_matrix:
        return sp.csr_matrix(np.ones(self.shape))


class Total(Ones):
    """The 1×n row of ones: the query for the total count."""

    def __init__(self, n: int):
        super().__init__(1, n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return X.sum(axis=0, keepdims=True)


class Prefix(EMatrix):
    """Lower-triangular ones: row i sums x[0..i] (Example 1; O(n) matvec)."""

    def __init__(self, n: int):
        self.n = _check_size(n, "n")
        self.shape = (self.n, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.cumsum(X, axis=0)

    def _transpose(self) -> EMatrix:
        return Suffix(self.n)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.arange(self.n, 0, -1, dtype=np.float64)

    def sensitivity(self, p: int = 1) -> float:
        return float(self.n) if p == 1 else math.sqrt(self.n)

    def max_column_nnz(self) -> int:
        return self.n

    def is_integral(self) -> bool:
        return True

    def dense(self) -> np.ndarray:
        return np.tril(np.ones(self.shape))

    def sparse(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.dense())


class Suffix(EMatrix):
    """Upper-triangular ones: row i sums x[i..n-1]; the transpose of Prefix."""

    def __init__(self, n: int):
        self.n = _check_size(n, "n")
        self.shape = (self.n, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.cumsum(X[::-1], axis=0)[::-1]

    def _transpose(self) -> EMatrix:
        return Prefix(self.n)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.arange(1, self.n + 1, dtype=np.float64)

    def sensitivity(self, p: int = 1) -> float:
        return float(self.n) if p == 1 else math.sqrt(self.n)

    def max_column_nnz(self) -> int:
        return self.n

    def is_integral(self) -> bool:
        return True

    def dense(self) -> np.ndarray:
        return np.triu(np.ones(self.shape))

    def sparse(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.dense())


class Wavelet(EMatrix):
    """The unnormalised Haar wavelet matrix of Privelet (Xiao et al., ICDE 2010).

    Row 0 is the total; then, level by level from the root, one row per dyadic
    interval with +1 on its left half and -1 on its right half. n must be a
    power of two. matvec and its transpose run in O(n); every column has
    1 + log2(n) entries of ±1, so both sensitivities are exact in O(1).
    """

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

    def column_norms(self, p: int = 1) -> np.ndarray:
        if self.transposed:
            return super().column_norms(p)
        return np.full(self.n, float(1 + self.levels))

    def sensitivity(self, p: int = 1) -> float:
        if self.transposed:
            return super().sensitivity(p)
        return float(1 + self.levels) if p == 1 else math.sqrt(1 + self.levels)

    def max_column_nnz(self) -> int:
        return (1 + self.levels) if not self.transposed else self.n

    def is_integral(self) -> bool:
        return True


class Diagonal(EMatrix):
    """diag(d): scales entry i by d[i] (row weights in inference)."""

    def __init__(self, d: Any):
        arr = np.array(d, dtype=np.float64, copy=True).reshape(-1)
        if arr.size == 0:
            raise ValueError("Diagonal needs at least one entry")
        if not np.all(np.isfinite(arr)):
            raise ValueError("Diagonal entries must be finite")
        arr.setflags(write=False)
        self.d = arr
        self.shape = (arr.size, arr.size)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self.d[:, None] * X

    def _transpose(self) -> EMatrix:
        return self

    def abs(self) -> EMatrix:
        return Diagonal(np.abs(self.d))

    def sqr(self) -> EMatrix:
        return Diagonal(self.d**2)

    @property
    def is_nonnegative(self) -> bool:
        return bool(np.all(self.d >= 0))

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.abs(self.d) if p == 1 else self.d**2

    def max_column_nnz(self) -> int:
        return 1

    def is_integral(self) -> bool:
        return bool(np.all(self.d == np.round(self.d)))

    def dense(self) -> np.ndarray:
        return np.diag(self.d)

    def sparse(self) -> sp.csr_matrix:
        return sp.diags(self.d, format="csr")


class Dense(EMatrix):
    """An explicit dense matrix (copied, read-only, finite entries)."""

    def __init__(self, array: Any):
        arr = np.array(array, dtype=np.float64, copy=True)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or 0 in arr.shape:
            raise ValueError(f"Dense needs a non-empty 2-D array, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("Dense matrix entries must be finite (found NaN or inf)")
        arr.setflags(write=False)
        self.array = arr
        self.shape = (int(arr.shape[0]), int(arr.shape[1]))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self.array @ X

    def _transpose(self) -> EMatrix:
        return Dense(self.array.T)

    def abs(self) -> EMatrix:
        return Dense(np.abs(self.array))

    def sqr(self) -> EMatrix:
        return Dense(self.array**2)

    @property
    def is_nonnegative(self) -> bool:
        return bool(np.all(self.array >= 0))

    @property
    def is_binary(self) -> bool:
        return bool(np.all((self.array == 0) | (self.array == 1)))

    def column_norms(self, p: int = 1) -> np.ndarray:
        return np.abs(self.array).sum(axis=0) if p == 1 else (self.array**2).sum(axis=0)

    def max_column_nnz(self) -> int:
        return int((self.array != 0).sum(axis=0).max())

    def is_integral(self) -> bool:
        return bool(np.all(self.array == np.round(self.array)))

    def gram(self) -> EMatrix:
        return Dense(self.array.T @ self.array)

    def dense(self) -> np.ndarray:
        return np.array(self.array, copy=True)

    def sparse(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.array)


class Sparse(EMatrix):
    """An explicit sparse matrix (CSR copy, finite entries)."""

    def __init__(self, matrix: Any):
        mat = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
        if 0 in mat.shape:
            raise ValueError(f"Sparse needs a non-empty matrix, got shape {mat.shape}")
        mat.sum_duplicates()
        mat.eliminate_zeros()
        if not np.all(np.isfinite(mat.data)):
            raise ValueError("Sparse matrix entries must be finite (found NaN or inf)")
        self.matrix = mat
        self.shape = (int(mat.shape[0]), int(mat.shape[1]))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrix @ X)

    def _transpose(self) -> EMatrix:
        return Sparse(self.matrix.T)

    def abs(self) -> EMatrix:
        return Sparse(abs(self.matrix))

    def sqr(self) -> EMatrix:
        return Sparse(self.matrix.multiply(self.matrix))

    @property
    def is_nonnegative(self) -> bool:
        return bool(np.all(self.matrix.data >= 0))

    @property
    def is_binary(self) -> bool:
        return bool(np.all(self.matrix.data == 1))

    def column_norms(self, p: int = 1) -> np.ndarray:
        data = np.abs(self.matrix.data) if p == 1 else self.matrix.data**2
        out = np.zeros(self.shape[1])
        np.add.at(out, self.matrix.indices, data)
        return out

    def max_column_nnz(self) -> int:
        counts = np.bincount(self.matrix.indices, minlength=self.shape[1])
        return int(counts.max()) if counts.size else 0

    def is_integral(self) -> bool:
        return bool(np.all(self.matrix.data == np.round(self.matrix.data)))

    def gram(self) -> EMatrix:
        return Sparse(self.matrix.T @ self.matrix)

    def dense(self) -> np.ndarray:
        return self.matrix.toarray()

    def sparse(self) -> sp.csr_matrix:
        return self.matrix.copy()
