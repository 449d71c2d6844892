"""Core matrices (paper §7.4, Table 2): Identity, Embedding, Ones/Total, Prefix,
Suffix, Diagonal, and the explicit Dense and Sparse wrappers (`Sparse` is defined in
`base`, which materialises into it; `Wavelet`, whose |W| is a set of ranges,
in `wavelet`).

Each class stores only its defining parameters and implements the primitive
methods in its own best complexity; e.g. `Prefix` applies in O(n) time with a
single cumulative sum and no stored entries.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .base import EMatrix, Sparse, check_dense_size, check_p, check_sparse_size

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = [
    "Dense",
    "Diagonal",
    "Embedding",
    "Identity",
    "Ones",
    "Prefix",
    "Sparse",
    "Suffix",
    "Total",
]


# Elements per block of `_cumsum_axis1`: small enough to stay in cache.
_BLOCK = 1 << 16


def _cumsum_axis1(T: np.ndarray) -> np.ndarray:
    """Cumulative sum along axis 1 of a 3-D array (pre, n, post), as a new array.

    `np.cumsum` walks the summed axis innermost, which is cache-hostile when
    that axis is not the contiguous one (a Kronecker factor in front of
    others). Here the array is swept in cache-sized pieces, or row by row with
    vector additions, so the cost stays about one pass over input and output
    whatever the layout (benchmarks/bench_matrix.py).
    """
    pre, n, post = T.shape
    if post == 1 or n == 1:
        return np.cumsum(T, axis=1)
    out = np.empty(T.shape)
    if n <= 8:  # a few vector additions over (pre, post) slices
        out[:, 0] = T[:, 0]
        for i in range(1, n):
            np.add(out[:, i - 1], T[:, i], out=out[:, i])
        return out
    if n * post <= _BLOCK:  # whole (n, post) slabs, several per call
        step = _BLOCK // (n * post)
        for p in range(0, pre, step):
            np.cumsum(T[p : p + step], axis=1, out=out[p : p + step])
        return out
    for p in range(pre):
        src, dst = T[p], out[p]
        if post >= 512:  # long rows: one vector addition per row
            dst[0] = src[0]
            for i in range(1, n):
                np.add(dst[i - 1], src[i], out=dst[i])
            continue
        rows = _BLOCK // post  # cache-sized blocks of rows, carrying the running total
        carry = None
        for start in range(0, n, rows):
            block = dst[start : start + rows]
            np.cumsum(src[start : start + rows], axis=0, out=block)
            if carry is not None:
                block += carry
            carry = block[-1]
    return out


def _triangle_csr(n: int, lower: bool) -> sp.csr_matrix:
    """The n×n lower (or upper) triangle of ones in CSR form, built directly."""
    check_sparse_size(n * (n + 1) // 2, (n, n))
    lengths = np.arange(1, n + 1) if lower else np.arange(n, 0, -1)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    within = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lengths)
    indices = within if lower else within + np.repeat(np.arange(n), lengths)
    return sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(n, n))


def _check_size(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


# Materialise all-ones column blocks (a total row, say) up to this many entries.
_ONES_BLOCK_ENTRIES = 1 << 22


class Identity(EMatrix):
    """The n×n identity: matvec is a copy, transpose/abs/sqr are itself."""

    _fields = ("n",)

    def __init__(self, n: int):
        self.n = _check_size(n, "n")
        self.shape = (self.n, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.array(X, dtype=np.float64, copy=True)

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return T

    def _transpose(self) -> EMatrix:
        return self

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)
        return np.ones(self.n)

    def sensitivity(self, p: int = 1) -> float:
        check_p(p)
        return 1.0

    def max_column_nnz(self) -> int:
        return 1

    def is_integral(self) -> bool:
        return True

    def gram(self) -> EMatrix:
        return self

    def dense(self) -> np.ndarray:
        check_dense_size(self.n, self.n)
        return np.eye(self.n)

    def sparse(self) -> sp.csr_matrix:
        return sp.identity(self.n, format="csr", dtype=np.float64)

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix:
        k = cols.size
        return sp.csc_matrix((np.ones(k), (cols, np.arange(k))), shape=(self.shape[0], k))


class Embedding(EMatrix):
    """The m×n matrix [I_n; 0] (n ≤ m): a vector of n cells padded with m − n
    empty cells (Privelet's padding to a power of two); transposed, [I_n 0]
    (n×m), the first n of m cells. Column j holds one 1, at row j (transposed:
    columns n.. are zero), so a product A·E has A's columns 0..n-1
    (`_column_rows`): its |A·E|, column norms and sensitivity are A's, read
    without materialising anything."""

    _fields = ("m", "n", "transposed")

    def __init__(self, m: int, n: int, transposed: bool = False):
        self.m = _check_size(m, "m")
        self.n = _check_size(n, "n")
        if self.n > self.m:
            raise ValueError(f"Embedding needs n <= m, got n={self.n} > m={self.m}")
        self.transposed = bool(transposed)
        self.shape = (self.n, self.m) if self.transposed else (self.m, self.n)

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        if self.transposed:
            return T[:, : self.n] + 0.0  # a new array (0.0 + x, as a sparse product gives)
        out = np.zeros((T.shape[0], self.m, T.shape[2]))
        out[:, : self.n] += T
        return out

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = self._apply_axis(X[np.newaxis])[0]
        return out

    def _transpose(self) -> EMatrix:
        return Embedding(self.m, self.n, not self.transposed)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def _column_rows(self) -> np.ndarray:
        rows = np.arange(self.shape[1])
        return np.where(rows < self.n, rows, -1) if self.transposed else rows

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)
        return (self._column_rows() >= 0).astype(np.float64)

    def sensitivity(self, p: int = 1) -> float:
        check_p(p)
        return 1.0

    def max_column_nnz(self) -> int:
        return 1

    def is_integral(self) -> bool:
        return True

    def dense(self) -> np.ndarray:
        check_dense_size(self.m, self.n)
        E = np.eye(self.m, self.n)
        return np.ascontiguousarray(E.T) if self.transposed else E

    def sparse(self) -> sp.csr_matrix:
        cells = np.arange(self.n)
        shape = (self.n, self.m) if self.transposed else (self.m, self.n)
        return sp.csr_matrix((np.ones(self.n), (cells, cells)), shape=shape)


class Ones(EMatrix):
    """The m×n matrix of all ones."""

    _fields: ClassVar[tuple[str, ...]] = ("m", "n")

    def __init__(self, m: int, n: int):
        self.m = _check_size(m, "m")
        self.n = _check_size(n, "n")
        self.shape = (self.m, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = self._apply_axis(X[np.newaxis])[0]
        return out

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        _, n, post = T.shape
        if post == 1:  # a matrix-vector product beats a reduction over short rows
            total = (T[:, :, 0] @ np.ones(n))[:, np.newaxis, np.newaxis]
        else:
            total = T.sum(axis=1, keepdims=True)
        return total if self.m == 1 else np.repeat(total, self.m, axis=1)

    def _transpose(self) -> EMatrix:
        return Ones(self.n, self.m)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)
        return np.full(self.n, float(self.m))

    def sensitivity(self, p: int = 1) -> float:
        return float(self.m) if check_p(p) == 1 else math.sqrt(self.m)

    def max_column_nnz(self) -> int:
        return self.m

    def is_integral(self) -> bool:
        return True

    def gram(self) -> EMatrix:
        return Ones(self.n, self.n) * float(self.m)

    def dense(self) -> np.ndarray:
        check_dense_size(self.m, self.n)
        return np.ones(self.shape)

    def sparse(self) -> sp.csr_matrix:
        check_sparse_size(self.m * self.n, self.shape)
        indptr = np.arange(0, self.m * self.n + 1, self.n)
        indices = np.tile(np.arange(self.n), self.m)
        return sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=self.shape)

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix | None:
        if self.shape[0] * cols.size > _ONES_BLOCK_ENTRIES:
            return None
        return sp.csc_matrix(np.ones((self.shape[0], cols.size)))


class Total(Ones):
    """The 1×n row of ones: the query for the total count."""

    _fields = ("n",)

    def __init__(self, n: int):
        super().__init__(1, n)


class Prefix(EMatrix):
    """Lower-triangular ones: row i sums x[0..i] (Example 1; O(n) matvec)."""

    _fields = ("n",)

    def __init__(self, n: int):
        self.n = _check_size(n, "n")
        self.shape = (self.n, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = _cumsum_axis1(X[np.newaxis])[0]
        return out

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return _cumsum_axis1(T)

    def _transpose(self) -> EMatrix:
        return Suffix(self.n)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)
        return np.arange(self.n, 0, -1, dtype=np.float64)

    def sensitivity(self, p: int = 1) -> float:
        return float(self.n) if check_p(p) == 1 else math.sqrt(self.n)

    def max_column_nnz(self) -> int:
        return self.n

    def is_integral(self) -> bool:
        return True

    def dense(self) -> np.ndarray:
        check_dense_size(self.n, self.n)
        return np.tril(np.ones(self.shape))

    def sparse(self) -> sp.csr_matrix:
        return _triangle_csr(self.n, lower=True)


class Suffix(EMatrix):
    """Upper-triangular ones: row i sums x[i..n-1]; the transpose of Prefix."""

    _fields = ("n",)

    def __init__(self, n: int):
        self.n = _check_size(n, "n")
        self.shape = (self.n, self.n)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return _cumsum_axis1(X[np.newaxis, ::-1])[0, ::-1]

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return _cumsum_axis1(T[:, ::-1])[:, ::-1]

    def _transpose(self) -> EMatrix:
        return Prefix(self.n)

    def abs(self) -> EMatrix:
        return self

    def sqr(self) -> EMatrix:
        return self

    is_nonnegative = True
    is_binary = True

    def column_norms(self, p: int = 1) -> np.ndarray:
        check_p(p)
        return np.arange(1, self.n + 1, dtype=np.float64)

    def sensitivity(self, p: int = 1) -> float:
        return float(self.n) if check_p(p) == 1 else math.sqrt(self.n)

    def max_column_nnz(self) -> int:
        return self.n

    def is_integral(self) -> bool:
        return True

    def dense(self) -> np.ndarray:
        check_dense_size(self.n, self.n)
        return np.triu(np.ones(self.shape))

    def sparse(self) -> sp.csr_matrix:
        return _triangle_csr(self.n, lower=False)


class Diagonal(EMatrix):
    """diag(d): scales entry i by d[i] (row weights in inference)."""

    _fields = ("d",)

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
        out: np.ndarray = self.d[:, None] * X
        return out

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.d[:, None] * T
        return out

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
        return np.abs(self.d) if check_p(p) == 1 else self.d**2

    def max_column_nnz(self) -> int:
        return 1

    def is_integral(self) -> bool:
        return bool(np.all(self.d == np.round(self.d)))

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        return np.diag(self.d)

    def sparse(self) -> sp.csr_matrix:
        return sp.diags(self.d, format="csr")

    def _row_weights(self) -> np.ndarray:
        return self.d

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix:
        k = cols.size
        d = np.asarray(self.d, dtype=np.float64)[cols]
        return sp.csc_matrix((d, (cols, np.arange(k))), shape=(self.shape[0], k))


class Dense(EMatrix):
    """An explicit dense matrix (copied, read-only, finite entries)."""

    _fields = ("array",)

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

    @classmethod
    def _wrap(cls, arr: np.ndarray) -> Dense:
        """An instance around an already validated, read-only array (no copy)."""
        obj = cls.__new__(cls)
        obj.array = arr
        obj.shape = (int(arr.shape[0]), int(arr.shape[1]))
        return obj

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        if self.shape[1] == 1:
            # an outer product (a row's transpose, say): the same single
            # products, ~10× faster than matmul's path for an inner size of 1
            out: np.ndarray = self.array * X
            return out
        out = self.array @ X
        return out

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        if T.shape[0] > 1 and T.shape[2] > 1:
            out: np.ndarray = np.matmul(self.array, T)  # batched over the leading axis
            return out
        return super()._apply_axis(T)

    def _transpose(self) -> EMatrix:
        return Dense._wrap(self.array.T)  # a read-only view

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
        if check_p(p) == 1:
            out: np.ndarray = np.abs(self.array).sum(axis=0)
            return out
        out = (self.array**2).sum(axis=0)
        return out

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

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix:
        return sp.csc_matrix(self.array[:, cols])
