"""The abstract implicit matrix `EMatrix` (paper §7.3–§7.4).

An `EMatrix` is a linear map given by its structure rather than its entries.
Subclasses implement two primitives, `_matmat` (apply to a block of column
vectors) and `_transpose`; everything else — `matvec`, `rmatvec`, `@`, scalar
`*`, `abs`, `sqr`, sensitivity, Gram matrix, row access, `sum`,
materialisation — has a correct generic implementation here that subclasses
override when their structure allows something faster (Tables 2–3).

This is deliberately *not* a `scipy.sparse.linalg.LinearOperator` subclass
(see STYLE.md): `as_linear_operator()` adapts any matrix for SciPy solvers.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

__all__ = ["EMatrix", "as_vector"]

# Materialising beyond this many entries (dense) or non-zeros (sparse) is
# refused: it would exhaust memory silently instead of telling the caller to
# use structure.
_MAX_DENSE_ENTRIES = 2**28
_MAX_SPARSE_NNZ = 2**28


def check_p(p: Any) -> int:
    """Validate the norm order of `column_norms`/`sensitivity` (1 or 2)."""
    if isinstance(p, bool) or p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    return int(p)


def check_dense_size(m: int, n: int) -> None:
    """Refuse to materialise an m×n dense array beyond the size cap."""
    if m * n > _MAX_DENSE_ENTRIES:
        raise MemoryError(
            f"refusing to materialise a {m}x{n} matrix densely "
            f"({8 * m * n / 1e9:.1f} GB); use its implicit form"
        )


def check_sparse_size(nnz: int, shape: tuple[int, int]) -> None:
    """Refuse to materialise a sparse matrix with more than the capped non-zeros."""
    if nnz > _MAX_SPARSE_NNZ:
        raise MemoryError(
            f"refusing to materialise a {shape[0]}x{shape[1]} matrix with {nnz} non-zeros "
            f"(about {12 * nnz / 1e9:.1f} GB) in sparse form; use its implicit form"
        )


def as_vector(v: Any, length: int, name: str = "vector") -> np.ndarray:
    """Return `v` as a 1-D float64 array of `length`, or raise a clear error."""
    arr = np.asarray(v, dtype=np.float64)
    if arr.ndim != 1:
        arr = arr.reshape(-1) if arr.size == length and arr.ndim > 1 else arr
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(f"{name} has shape {np.shape(v)}; expected a vector of length {length}")
    return arr


class EMatrix:
    """An implicitly represented real matrix.

    Required in subclasses: the `shape` attribute, `_matmat(X)` for a 2-D
    float array `X` of shape (n, k), and `_transpose()`. `_matmat` must return
    a new array (never a view of `X`): callers may write into the result.

    Optional: `_apply_axis(T)` applies the matrix along the middle axis of a
    3-D array (pre, n, post) → (pre, m, post), so that a `Kronecker` factor
    works in place of the data's layout instead of transposing it; it may
    return `T` itself (the identity) and its result is never written into.
    """

    shape: tuple[int, int]
    dtype = np.dtype(np.float64)
    # NumPy defers to our operators (`ndarray @ M`, `np.float64(2) * M`) and
    # refuses ufuncs such as `np.abs(M)`: element-wise structure only through
    # the explicit, exact `abs()`/`sqr()` methods.
    __array_ufunc__ = None

    # -- primitives -------------------------------------------------------
    def _matmat(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _transpose(self) -> EMatrix:  # pragma: no cover - abstract
        raise NotImplementedError

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        pre, n, post = T.shape
        if pre == 1:
            return self._matmat(T[0])[np.newaxis]
        if post == 1:
            return self._matmat(T[:, :, 0].T).T[:, :, np.newaxis]
        moved = np.moveaxis(T, 1, 0).reshape(n, pre * post)
        out = self._matmat(moved)
        return np.moveaxis(out.reshape(self.shape[0], pre, post), 0, 1)

    # -- application ------------------------------------------------------
    def matvec(self, v: Any) -> np.ndarray:
        """Return A·v for a vector `v` of length n."""
        x = as_vector(v, self.shape[1])
        return self._matmat(x.reshape(-1, 1)).reshape(-1)

    def rmatvec(self, v: Any) -> np.ndarray:
        """Return Aᵀ·v for a vector `v` of length m."""
        return self.T.matvec(v)

    def matmat(self, X: Any) -> np.ndarray:
        """Return A·X for a 2-D array `X` with n rows."""
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[0] != self.shape[1]:
            raise ValueError(f"matmat operand has shape {arr.shape}; expected ({self.shape[1]}, k)")
        return self._matmat(arr)

    @property
    def T(self) -> EMatrix:
        """The transpose, itself an implicit matrix (built once, then cached)."""
        cached = self.__dict__.get("_cache_T")
        if cached is None:
            cached = self._transpose()
            self.__dict__["_cache_T"] = cached
            if cached is not self:
                cached.__dict__["_cache_T"] = self
        return cached

    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, EMatrix):
            from .combinators import Product

            return Product(self, other)
        if sp.issparse(other):
            from .core import Sparse

            return self @ Sparse(other)
        arr = np.asarray(other)
        if arr.ndim == 1:
            return self.matvec(arr)
        if arr.ndim == 2:
            return self.matmat(arr)
        raise ValueError(f"cannot multiply a matrix by an array of shape {arr.shape}")

    def __rmatmul__(self, other: Any) -> Any:
        arr = np.asarray(other, dtype=np.float64)
        if arr.ndim == 1:
            return self.rmatvec(arr)
        if arr.ndim == 2:
            return self.T.matmat(arr.T).T
        raise ValueError(f"cannot multiply an array of shape {arr.shape} by a matrix")

    def __mul__(self, c: Any) -> EMatrix:
        if not isinstance(c, numbers.Real) or isinstance(c, bool):
            return NotImplemented
        from .combinators import Weighted

        return Weighted(self, float(c))

    __rmul__ = __mul__

    def __neg__(self) -> EMatrix:
        return self * -1.0

    # -- element-wise structure ------------------------------------------
    def abs(self) -> EMatrix:
        """The element-wise absolute value |A| (exact)."""
        from .core import Sparse

        return Sparse(abs(self.sparse()))

    def sqr(self) -> EMatrix:
        """The element-wise square A∘A (exact)."""
        from .core import Sparse

        S = self.sparse()
        return Sparse(S.multiply(S))

    @property
    def is_nonnegative(self) -> bool:
        """True when every entry is known to be ≥ 0 (then abs() is self)."""
        return False

    @property
    def is_binary(self) -> bool:
        """True when every entry is known to be 0 or 1 (then sqr() is self)."""
        return False

    def column_norms(self, p: int = 1) -> np.ndarray:
        """Per-column Σᵢ|aᵢⱼ| (p=1) or Σᵢ aᵢⱼ² (p=2, *squared* norms)."""
        E = self.abs() if check_p(p) == 1 else self.sqr()
        return E.T.matvec(np.ones(self.shape[0]))

    def sensitivity(self, p: int = 1) -> float:
        """The maximum column L1 (p=1) or L2 (p=2) norm: the query's sensitivity."""
        norms = self.column_norms(check_p(p))
        top = float(norms.max()) if norms.size else 0.0
        return top if p == 1 else float(np.sqrt(top))

    def max_column_nnz(self) -> int:
        """An upper bound on the number of non-zero entries in any column."""
        S = self.sparse().tocsc()
        counts = np.diff(S.indptr)
        return int(counts.max()) if counts.size else 0

    def is_integral(self) -> bool:
        """True when every entry is an integer (answers on integer data stay integral)."""
        S = self.sparse()
        return bool(np.all(S.data == np.round(S.data)))

    # -- derived computations ---------------------------------------------
    def gram(self) -> EMatrix:
        """The Gram matrix AᵀA as an implicit matrix."""
        from .combinators import Product

        return Product(self.T, self)

    def row(self, i: int) -> np.ndarray:
        """Row i as a dense vector (computed as Aᵀ·eᵢ, §7.3)."""
        m = self.shape[0]
        if not -m <= i < m:
            raise IndexError(f"row index {i} out of range for {m} rows")
        e = np.zeros(m)
        e[i] = 1.0
        return self.rmatvec(e)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, numbers.Integral):
            return self.row(int(key))
        raise TypeError("matrices support row access with an integer index only")

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix | None:
        """The columns `cols` (sorted indices) as a CSC matrix (m × len(cols)),
        read from the structure at a cost in those columns' entries rather
        than in the matrix's size; None when the type has no such access
        (implicit operators: callers then use masked products). Restricted
        least-squares steps use it (`inference.nnls` on few free variables)."""
        return None

    def sum(self, axis: int | None = None) -> Any:
        """Sum of all entries (None), of each column (0) or of each row (1)."""
        m, n = self.shape
        if axis is None:
            return float(self.matvec(np.ones(n)).sum())
        if axis == 0:
            return self.rmatvec(np.ones(m))
        if axis == 1:
            return self.matvec(np.ones(n))
        raise ValueError(f"axis must be None, 0 or 1, got {axis!r}")

    # -- materialisation ---------------------------------------------------
    def dense(self) -> np.ndarray:
        """The matrix as a dense ndarray (by applying it, or its transpose, to
        the identity of the smaller dimension)."""
        m, n = self.shape
        check_dense_size(m, n)
        if m < n:
            return np.ascontiguousarray(self.T._matmat(np.eye(m)).T)
        return self._matmat(np.eye(n))

    def sparse(self) -> sp.csr_matrix:
        """The matrix in SciPy CSR form."""
        return sp.csr_matrix(self.dense())

    def as_linear_operator(self) -> LinearOperator:
        """A SciPy `LinearOperator` view for iterative solvers (lsmr, cg, ...)."""
        return LinearOperator(
            shape=self.shape,
            matvec=self.matvec,
            rmatvec=self.rmatvec,
            matmat=self._matmat,
            rmatmat=self.T._matmat,
            dtype=np.float64,
        )

    # -- value semantics ---------------------------------------------------
    def spec(self) -> dict[str, Any]:
        """A plain description (type name and constructor arguments)."""
        from .spec import to_spec

        return to_spec(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EMatrix):
            return NotImplemented
        if type(self) is not type(other) or self.shape != other.shape:
            return False
        from .spec import specs_equal

        try:
            return specs_equal(self.spec(), other.spec())
        except TypeError:  # classes outside the library have no spec
            return self is other

    def __getstate__(self) -> dict[str, Any]:
        # Caches (the transpose, range corners) are rebuilt on demand.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_cache")}

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.shape))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shape[0]}x{self.shape[1]})"
