"""The abstract implicit matrix `EMatrix` (paper §7.3–§7.4), and the three
matrices its generic methods build: `Product` (``A @ B``, the Gram matrix
AᵀA), `Weighted` (scalar ``c * A``) and `Sparse` (the materialised |A| and
A∘A). They live here so that the package's modules import one another in
one direction only, every import at module level: `core` and `combinators`
import `base` (and export these three with their kin); `ranges` imports
those; `hierarchy` and `wavelet` import `ranges`; `partition` the first
three; `spec` all of them.

An `EMatrix` is a linear map given by its structure rather than its entries.
Subclasses implement two primitives, `_matmat` (apply to a block of column
vectors) and `_transpose`; everything else — `matvec`, `rmatvec`, `@`, scalar
`*`, `abs`, `sqr`, sensitivity, Gram matrix, row access, `sum`,
materialisation — has a correct generic implementation here that subclasses
override when their structure allows something faster (Tables 2–3). A
product diag(d)·B asks B for its structure through two hooks
(`_weighted_coverage`, `_weighted_gram`; range queries answer them) and
its left factor for d (`_row_weights`; `Diagonal` answers).

Value semantics: two matrices are equal when they are of the same library
class with equal constructor arguments (each class names them in `_fields`);
instances of other classes equal only themselves.

This is deliberately *not* a `scipy.sparse.linalg.LinearOperator` subclass
(see STYLE.md): `as_linear_operator()` adapts any matrix for SciPy solvers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from .lazy import issparse

if TYPE_CHECKING:  # scipy.sparse.linalg (with scipy.linalg) is imported where used (#41)
    import scipy.sparse as sp
    from scipy.sparse.linalg import LinearOperator
else:  # scipy.sparse too, on first use (`lazy`)
    from .lazy import sparse as sp

__all__ = ["EMatrix", "Product", "Sparse", "Weighted", "as_blocks", "as_vector"]

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
    # The constructor arguments that define the matrix's value (see the module).
    _fields: ClassVar[tuple[str, ...]] = ()
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
            return Product(self, other)
        if issparse(other):
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
        return Weighted(self, float(c))

    __rmul__ = __mul__

    def __neg__(self) -> EMatrix:
        return self * -1.0

    # -- element-wise structure ------------------------------------------
    def abs(self) -> EMatrix:
        """The element-wise absolute value |A| (exact)."""
        return Sparse(abs(self.sparse()))

    def sqr(self) -> EMatrix:
        """The element-wise square A∘A (exact)."""
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
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator(
            shape=self.shape,
            matvec=self.matvec,
            rmatvec=self.rmatvec,
            matmat=self._matmat,
            rmatmat=self.T._matmat,
            dtype=np.float64,
        )

    # -- structure of a product diag(d)·B (see the module) ---------------------
    def _row_weights(self) -> np.ndarray | None:
        """d when this matrix is diag(d); None otherwise."""
        return None

    def _weighted_coverage(self, w: np.ndarray) -> np.ndarray | None:
        """Per column, Σ w_i over the rows i holding a 1 there, when the
        structure gives it cheaply (0/1 entries); None otherwise."""
        return None

    def _weighted_gram(self, w: np.ndarray) -> EMatrix | None:
        """Aᵀ·diag(w)·A in closed form, or None."""
        return None

    # -- structure of a product A·E, E a column embedding (`core.Embedding`) ---
    def _column_rows(self) -> np.ndarray | None:
        """Per column j, the row r_j of its single entry, a 1, or −1 for a zero
        column — when every column is a unit vector or zero; None otherwise.
        Then column j of A·self is A's column r_j (or zero)."""
        return None

    # -- value semantics ---------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EMatrix):
            return NotImplemented
        if type(self) is not type(other) or self.shape != other.shape:
            return False
        if self is other:
            return True
        if "_fields" not in type(self).__dict__:  # not a library class: identity
            return False
        return all(_same(getattr(self, f), getattr(other, f)) for f in self._fields)

    def __getstate__(self) -> dict[str, Any]:
        # Caches (the transpose, range corners) are rebuilt on demand.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_cache")}

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.shape))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shape[0]}x{self.shape[1]})"


def _same(a: Any, b: Any) -> bool:
    """Equality of constructor arguments: matrices by value, arrays (dense or
    sparse) entry by entry, sequences item by item."""
    if isinstance(a, EMatrix) or isinstance(b, EMatrix):
        return bool(a == b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if issparse(a) or issparse(b):
        return bool(
            issparse(a) and issparse(b) and a.shape == b.shape and (a != b).nnz == 0
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        return a_arr.shape == b_arr.shape and bool(np.array_equal(a_arr, b_arr))
    return bool(a == b)


def as_blocks(blocks: Sequence[EMatrix], kind: str) -> tuple[EMatrix, ...]:
    if isinstance(blocks, EMatrix):
        blocks = [blocks]
    blocks = tuple(blocks)
    if not blocks:
        raise ValueError(f"{kind} needs at least one matrix")
    for b in blocks:
        if not isinstance(b, EMatrix):
            raise TypeError(f"{kind} parts must be matrices, got {type(b).__name__}")
    return blocks


class Product(EMatrix):
    """The matrix product A·B, applied right to left without materialising."""

    _fields = ("A", "B")

    def __init__(self, A: EMatrix, B: EMatrix):
        as_blocks([A, B], "Product")
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"Product shapes do not align: {A.shape} @ {B.shape}")
        self.A, self.B = A, B
        self.shape = (A.shape[0], B.shape[1])

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self.A._matmat(self.B._matmat(X))

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return self.A._apply_axis(self.B._apply_axis(T))

    def _transpose(self) -> EMatrix:
        return Product(self.B.T, self.A.T)

    def abs(self) -> EMatrix:
        # |AB| = AB exactly when both factors are non-negative; |A·E| = |A|·E
        # when E's columns are unit vectors or zero (`_column_rows`: A·E's
        # columns are A's); otherwise the exact answer needs the entries
        # (materialised below).
        if self.is_nonnegative:
            return self
        if self.B._column_rows() is not None:
            return Product(self.A.abs(), self.B)
        return super().abs()

    def sqr(self) -> EMatrix:
        if self.B._column_rows() is not None:  # (A·E)∘(A·E) = (A∘A)·E, as for abs
            return Product(self.A.sqr(), self.B)
        return super().sqr()

    @property
    def is_nonnegative(self) -> bool:
        return self.A.is_nonnegative and self.B.is_nonnegative

    def max_column_nnz(self) -> int:
        return min(self.shape[0], self.A.max_column_nnz() * self.B.max_column_nnz())

    def column_norms(self, p: int = 1) -> np.ndarray:
        rows = self.B._column_rows()
        if rows is not None:
            # A·E, E's column j the unit vector e_{r_j} or zero (r_j = −1): column
            # j of the product is A's column r_j, so its norm is A's (Privelet's
            # padded Haar strategy: Wavelet(2^k)·Embedding, no materialising)
            of_a = self.A.column_norms(p)
            out: np.ndarray = np.where(rows >= 0, of_a[rows], 0.0)
            return out
        d = self.A._row_weights()
        if d is not None:
            # Weighted ranges (GreedyH's strategies, striped unions of them, §5.2):
            # entry (i, j) is d_i on range i's cells, so column j's norm is the sum
            # of |d_i| (p = 1) or d_i² (p = 2) over the ranges containing j, added
            # term by term (`RangeQueries.weighted_coverage`).
            norms = self.B._weighted_coverage(np.abs(d) if check_p(p) == 1 else d**2)
            if norms is not None:
                return norms
        return super().column_norms(p)

    def is_integral(self) -> bool:
        if self.A.is_integral() and self.B.is_integral():
            return True
        d = self.A._row_weights()
        if d is not None and self.B.is_binary:
            # Exact without materialising (the kernel asks this of every weighted
            # range strategy, e.g. GreedyH's, §5.2): entry (i, j) of diag(d)·B is
            # d_i where B_ij = 1, else 0, so the product is integral iff d_i is
            # for every row i of B that holds a 1 — the rows with a positive sum
            # (binary entries: exact small-integer sums).
            fractional = d != np.round(d)
            if not fractional.any():
                return True
            return not bool(np.any(self.B.matvec(np.ones(self.B.shape[1]))[fractional] > 0))
        return super().is_integral()

    def gram(self) -> EMatrix:
        d = self.A._row_weights()
        if d is not None:
            # Weighted 1-D ranges (GreedyH's strategies, HDMM's weighted
            # workloads): Bᵀ·diag(d²)·B in closed form.
            G = self.B._weighted_gram(d**2)
            if G is not None:
                return G
        return super().gram()

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        if self.B.shape[0] * self.B.shape[1] <= self.A.shape[0] * self.A.shape[1]:
            return self.A.matmat(self.B.dense())
        return np.ascontiguousarray(self.B.T.matmat(self.A.dense().T).T)

    def sparse(self) -> sp.csr_matrix:
        return (self.A.sparse() @ self.B.sparse()).tocsr()

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix | None:
        d = self.A._row_weights()
        if d is None:  # only row weights on a block (inference's stacking)
            return None
        sub = self.B.column_block(cols)
        return None if sub is None else sp.csc_matrix(sp.diags(d) @ sub)


class Weighted(EMatrix):
    """c·A for a finite real scalar c."""

    _fields = ("base", "weight")

    def __init__(self, base: EMatrix, weight: float):
        as_blocks([base], "Weighted")
        w = float(weight)
        if not math.isfinite(w):
            raise ValueError(f"weight must be finite, got {weight!r}")
        self.base, self.weight = base, w
        self.shape = base.shape

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self.weight * self.base._matmat(X)

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return self.weight * self.base._apply_axis(T)

    def _transpose(self) -> EMatrix:
        return Weighted(self.base.T, self.weight)

    def abs(self) -> EMatrix:
        return Weighted(self.base.abs(), abs(self.weight))

    def sqr(self) -> EMatrix:
        return Weighted(self.base.sqr(), self.weight**2)

    @property
    def is_nonnegative(self) -> bool:
        return self.weight >= 0 and self.base.is_nonnegative

    @property
    def is_binary(self) -> bool:
        return self.weight == 1.0 and self.base.is_binary

    def column_norms(self, p: int = 1) -> np.ndarray:
        scale = abs(self.weight) if check_p(p) == 1 else self.weight**2
        return scale * self.base.column_norms(p)

    def sensitivity(self, p: int = 1) -> float:
        return abs(self.weight) * self.base.sensitivity(p)

    def max_column_nnz(self) -> int:
        return 0 if self.weight == 0 else self.base.max_column_nnz()

    def is_integral(self) -> bool:
        return self.weight == round(self.weight) and self.base.is_integral()

    def gram(self) -> EMatrix:
        return Weighted(self.base.gram(), self.weight**2)

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)
        return self.weight * self.base.dense()

    def sparse(self) -> sp.csr_matrix:
        return (self.weight * self.base.sparse()).tocsr()

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix | None:
        sub = self.base.column_block(cols)
        return None if sub is None else sub * self.weight


class Sparse(EMatrix):
    """An explicit sparse matrix (CSR copy, finite entries)."""

    _fields = ("matrix",)

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

    @classmethod
    def _wrap(cls, mat: sp.csr_matrix) -> Sparse:
        """An instance around an already validated canonical CSR matrix (no copy)."""
        obj = cls.__new__(cls)
        obj.matrix = mat
        obj.shape = (int(mat.shape[0]), int(mat.shape[1]))
        return obj

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrix @ X)

    def _transpose(self) -> EMatrix:
        # One O(nnz) conversion, no re-validation; `T` caches the result, so
        # repeated rmatvec calls (iterative solvers) do not pay it again.
        return Sparse._wrap(sp.csr_matrix(self.matrix.T))

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
        data = np.abs(self.matrix.data) if check_p(p) == 1 else self.matrix.data**2
        return np.bincount(self.matrix.indices, weights=data, minlength=self.shape[1])

    def max_column_nnz(self) -> int:
        counts = np.bincount(self.matrix.indices, minlength=self.shape[1])
        return int(counts.max()) if counts.size else 0

    def is_integral(self) -> bool:
        return bool(np.all(self.matrix.data == np.round(self.matrix.data)))

    def gram(self) -> EMatrix:
        return Sparse(self.matrix.T @ self.matrix)

    def dense(self) -> np.ndarray:
        return np.asarray(self.matrix.toarray())

    def sparse(self) -> sp.csr_matrix:
        return self.matrix.copy()

    def column_block(self, cols: np.ndarray) -> sp.csc_matrix:
        transpose = cast(Sparse, self.T)  # a Sparse's transpose is a Sparse
        return transpose.matrix[cols].T  # the rows of its cached CSR transpose
