"""Structure the estimators read from the measurements themselves (§7.6),
instead of a plan choosing a solver:

* **groups** — ``groups=P``, a public `Partition` of the root: estimation
  restricted to vectors uniform within each group (x = P⁺z, z the groups'
  totals; §8, Prop. 1); or a chain [P1, P2, …] as the plan reduced the root
  (x = P1⁺P2⁺…z: each total spread evenly over the groups of the step
  before, and so on down to the cells). A measurement taken on
  ``x.reduce_by_partition(P)`` has ``query_on_root = Q·R_P``, so its query
  on the totals is Q itself, read from the record; any other measurement's
  is ``query_on_root·P⁺`` (exact whenever its columns are equal within each
  group). Least squares solves for the totals z: the measured query on
  them keeps its structure (a tree, a Kronecker product), and where it
  does not determine every total the minimum-norm totals are returned (the
  fitted answers are those of every least-squares solution). NNLS solves in
  the orthonormal basis of the subspace, u = z/√|g| for one partition (x ↦ u
  is an isometry there: its steps, start and stopping rule are those of the
  cells' problem restricted; x ≥ 0 ⟺ u ≥ 0). Multiplicative weights works
  on the totals, its own coordinates (MW on the cells from a group-uniform
  start stays group-uniform and moves the totals exactly so).
* **tree** — one measurement whose query on the root is a `Hierarchy` with
  every leaf measured: the exact two-pass solve (`tree.lstsq`, Hay et al.
  2010) or the tree NNLS (`tree_nnls`).
* **Kronecker** — one measurement of A₁ ⊗ … ⊗ A_d with small factors
  (HDMM, stripe strategies): (A₁ ⊗ … ⊗ A_d)⁺ = A₁⁺ ⊗ … ⊗ A_d⁺.
* **blocks** — measurements of disjoint pieces of the root
  (``x.split_by_partition(R)``: query_on_root = Q·S, S a selection of
  cells), no public facts: least squares is block diagonal, solved piece by
  piece; pieces measured by the same matrices with the same weights share
  one dense factorisation with a right-hand side each (HB-Striped, §9.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..matrix import Dense, Diagonal, EMatrix, Hierarchy, Kronecker, Partition, Product, Sparse
from ..measurement import Measurement

# ---------------------------------------------------------------------------
# groups=
# ---------------------------------------------------------------------------

# Queries on the groups are held densely up to this many entries (no sparse
# dispatch per product), else sparse, when they are materialised.
_DENSE_ENTRIES = 1 << 18


def groups_of(groups: Any, size: int, orthonormal: bool) -> OnGroups:
    """``groups=`` checked: a `Partition` of the root, or a chain of them as
    the plan reduced the root (x.reduce_by_partition(P1).reduce_by_partition(P2):
    [P1, P2], each partitioning the groups of the one before)."""
    chain = [groups] if isinstance(groups, Partition) else groups
    if not isinstance(chain, (list, tuple)) or not chain or not all(
        isinstance(P, Partition) for P in chain
    ):
        raise TypeError(
            "groups must be a Partition of the root (or a list of them, each partitioning "
            f"the groups of the one before), got {type(groups).__name__}"
        )
    cells = size
    for i, P in enumerate(chain):
        if P.size != cells:
            where = "the root domain has" if i == 0 else f"groups[{i - 1}] has groups for"
            raise ValueError(f"groups[{i}] partitions {P.size} cells; {where} {cells}")
        cells = P.num_groups
    labels = np.arange(size)
    divisor = np.ones(size)
    for P in chain:
        labels = P.groups[labels]
        divisor *= P.sizes[labels]
    norms = np.sqrt(np.bincount(labels, weights=1.0 / divisor**2, minlength=cells))
    return OnGroups(labels, divisor, cells, norms, orthonormal)


@dataclass(frozen=True, eq=False)
class OnGroups:
    """Estimation on groups: x = E·z for the groups' totals z, E spreading
    each total uniformly (cell c gets z_g / divisor_c: 1/|g| for one
    partition, the product of the group sizes along a chain). The unknowns
    are z, or with `orthonormal` u = z·‖E_g‖ (x = B·u, B = E·diag(1/‖E_g‖)
    with orthonormal columns: u = z/√|g| for one partition)."""

    labels: np.ndarray  # the group of every root cell
    divisor: np.ndarray  # per root cell: x_c = z_g / divisor_c
    size: int  # the number of groups
    norms: np.ndarray  # ‖E_g‖ per group
    orthonormal: bool

    def _expansion(self) -> sp.csr_matrix:
        n = self.labels.size
        return sp.csr_matrix(
            (1.0 / self.divisor, (np.arange(n), self.labels)), shape=(n, self.size)
        )

    def query(self, m: Measurement) -> EMatrix:
        """m's query on the unknowns."""
        Q = self._on_totals(m.query_on_root)
        return _scale_columns(Q, 1.0 / self.norms) if self.orthonormal else Q

    def fact(self, M: EMatrix) -> EMatrix:
        """A public fact's matrix (on the root) on the unknowns: a few rows,
        materialised (M·E has one column per group)."""
        Q = _explicit(sp.csr_matrix(M.sparse() @ self._expansion()))
        return _scale_columns(Q, 1.0 / self.norms) if self.orthonormal else Q

    def _on_totals(self, Q: EMatrix) -> EMatrix:
        """Q's query on the totals: Q = A·R with R the sums over the groups
        (the record of a measurement on the vector of the totals, perhaps
        numbered otherwise) gives A; else Q·E (exact whenever Q's columns are
        equal within each group)."""
        if type(Q) is Product:
            labels = _group_labels(Q.B)
            k = self.size
            if labels is not None and labels.size == self.labels.size and Q.A.shape[1] == k:
                pairs = np.unique(labels * k + self.labels)
                if pairs.size == k and np.unique(pairs // k).size == k:  # a relabelling
                    if np.array_equal(labels, self.labels):
                        return Q.A
                    perm = sp.csr_matrix((np.ones(k), (pairs // k, pairs % k)), shape=(k, k))
                    return Product(Q.A, Sparse(perm))
        if type(Q) in (Dense, Sparse):
            return _explicit(sp.csr_matrix(Q.sparse() @ self._expansion()))
        return Product(Q, Sparse(self._expansion()))

    def reduce(self, x: np.ndarray) -> np.ndarray:
        """A vector on the root to the unknowns: the totals R·x, or Bᵀx
        (both exact on x = E·z)."""
        if not self.orthonormal:
            return np.bincount(self.labels, weights=x, minlength=self.size)
        return np.bincount(self.labels, weights=x / self.divisor, minlength=self.size) / self.norms

    def expand(self, v: np.ndarray) -> np.ndarray:
        """The unknowns to the root (E·z or B·u)."""
        z = v / self.norms if self.orthonormal else v
        return z[self.labels] / self.divisor


def _group_labels(T: EMatrix) -> np.ndarray | None:
    """For T the sums over a partition's groups (0/1, one 1 per column), or a
    product of such, the group of every column; None otherwise."""
    if type(T) is Product:
        outer, inner = _group_labels(T.A), _group_labels(T.B)
        return None if outer is None or inner is None else outer[inner]
    if type(T) is not Sparse:
        return None
    csc = T.matrix.tocsc()
    if not (np.all(np.diff(csc.indptr) == 1) and np.all(csc.data == 1.0)):
        return None
    return np.asarray(csc.indices, dtype=np.int64)


def _scale_columns(Q: EMatrix, d: np.ndarray) -> EMatrix:
    """Q·diag(d), materialised when Q is explicit."""
    if type(Q) is Dense:
        return _explicit(sp.csr_matrix(Q.array * d))
    if type(Q) is Sparse:
        return _explicit(sp.csr_matrix(Q.matrix @ sp.diags(d)))
    return Product(Q, Diagonal(d))


def _explicit(csr: sp.csr_matrix) -> EMatrix:
    m, k = csr.shape
    return Dense(csr.toarray()) if m * k <= _DENSE_ENTRIES else Sparse(csr)


# ---------------------------------------------------------------------------
# One tree, one Kronecker product
# ---------------------------------------------------------------------------


def tree_of(A: EMatrix) -> Hierarchy | None:
    """A itself when it is one untransposed tree with every leaf measured
    (then it has full column rank)."""
    if not isinstance(A, Hierarchy) or A.transposed:
        return None
    return A if A.leaves_measured else None


# A Kronecker strategy is solved through its factors' pseudo-inverses when
# every factor is this small (a dense pinv costs O(m n²): ≤ 10⁹ flops here).
_KRON_FACTOR_COLUMNS = 512
_KRON_FACTOR_ENTRIES = 2**21


def small_kronecker(A: EMatrix) -> bool:
    return (
        type(A) is Kronecker
        and len(A.factors) > 1
        and all(
            f.shape[1] <= _KRON_FACTOR_COLUMNS and f.shape[0] * f.shape[1] <= _KRON_FACTOR_ENTRIES
            for f in A.factors
        )
    )


def kronecker_pinv(A: Kronecker) -> Callable[[np.ndarray], np.ndarray]:
    """y ↦ (A₁ ⊗ … ⊗ A_d)⁺ y = (A₁⁺ ⊗ … ⊗ A_d⁺) y, one factor (axis) at a time:
    the minimum-norm least-squares solution, as LSMR's from x = 0."""
    pinvs = [np.linalg.pinv(f.dense()) for f in A.factors]

    def solve(y: np.ndarray) -> np.ndarray:
        Y = y.reshape([f.shape[0] for f in A.factors])
        for axis, P in enumerate(pinvs):
            Y = np.moveaxis(np.tensordot(P, Y, axes=([1], [axis])), 0, axis)
        return Y.reshape(-1)

    return solve


# ---------------------------------------------------------------------------
# Block-diagonal systems: measurements of disjoint pieces of the root
# ---------------------------------------------------------------------------

# Pieces up to this many cells that share their matrices are solved by one
# dense least-squares solve with a right-hand side per piece.
_DENSE_PIECE_CELLS = 2048


@dataclass
class Piece:
    """Cells of the root measured only by `parts` (query on the cells, answers,
    weight), with the parts' key (their matrices and weights) for batching."""

    cells: np.ndarray
    parts: list[tuple[EMatrix, np.ndarray, float]]

    @property
    def key(self) -> tuple[Any, ...]:
        """The parts' matrices (equal by value) and weights."""
        return tuple((Q, w) for Q, _, w in self.parts)


def pieces(parts: list[tuple[EMatrix, np.ndarray, float]], size: int) -> list[Piece] | None:
    """The pieces of a block-diagonal system: every part's query on the root
    is Q·S with S selecting distinct cells, and two parts' cells are equal or
    disjoint. None otherwise, or for a single piece (nothing to split)."""
    by_cells: dict[bytes, Piece] = {}
    owner = np.full(size, -1, dtype=np.int64)
    for Q, y, w in parts:
        cells = _selected(Q)
        if cells is None:
            return None
        key = cells.tobytes()
        piece = by_cells.get(key)
        if piece is None:
            if np.any(owner[cells] >= 0) or np.unique(cells).size != cells.size:
                return None  # overlaps another piece, or repeats a cell
            owner[cells] = len(by_cells)
            piece = by_cells[key] = Piece(cells, [])
        piece.parts.append((Q.A, y, w))  # type: ignore[attr-defined]
    return list(by_cells.values()) if len(by_cells) > 1 else None


def _selected(Q: EMatrix) -> np.ndarray | None:
    """The cells S selects when Q = Product(·, S), S a 0/1 selection of cells
    (one 1 per row); None otherwise."""
    if type(Q) is not Product or type(Q.B) is not Sparse:
        return None
    S = Q.B.matrix
    if not (np.all(np.diff(S.indptr) == 1) and np.all(S.data == 1.0)):
        return None
    return np.asarray(S.indices, dtype=np.int64)


def solve_pieces(
    found: list[Piece], size: int, solve: Callable[[Piece], np.ndarray]
) -> np.ndarray:
    """The block-diagonal least-squares estimate: pieces of equal key and up to
    `_DENSE_PIECE_CELLS` cells by one minimum-norm dense solve with several
    right-hand sides; the others by `solve` (the general dispatch on the
    piece's own system). Cells no piece covers stay 0 (minimum norm)."""
    x = np.zeros(size)
    batches: dict[tuple[Any, ...], list[Piece]] = {}
    for piece in found:
        if piece.cells.size <= _DENSE_PIECE_CELLS:
            batches.setdefault(piece.key, []).append(piece)
        else:
            x[piece.cells] = solve(piece)
    for members in batches.values():
        first = members[0]
        A = np.vstack([Q.dense() * w if w != 1.0 else Q.dense() for Q, _, w in first.parts])
        Y = np.column_stack(
            [np.concatenate([y * w if w != 1.0 else y for _, y, w in p.parts]) for p in members]
        )
        X = np.linalg.lstsq(A, Y, rcond=None)[0]
        x[np.column_stack([p.cells for p in members])] = X
    return x
