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
  ``groups="measured"`` reads the chain from the records instead
  (`measured_groups`): the partitions every measurement was reduced by on
  its way from the root, or the cells when the records show none (the
  measured vector derives from the root by another transformation).
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
* **disjoint** — rows whose supports partition the cells they measure
  (Identity, a Total, a grid of ranges, a partition's group totals, each
  group measured once or several times with its own weight): least squares
  is closed-form, group by group (`disjoint_of`, `solve_disjoint`).
* **lines** — one set of (weighted) range queries on a ≥ 2-D root, each
  along the same axis within one line of cells (DAWA-Striped's union of
  every stripe's GreedyH ranges, §9.2): least squares is block diagonal
  over the lines, each solved densely on the atoms its ranges' endpoints
  cut it into (`lines_of`, `solve_lines`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Hierarchy,
    Identity,
    Kronecker,
    Partition,
    Product,
    RangeQueries,
    Sparse,
    Total,
    Weighted,
)
from ..measurement import Measurement

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from ..matrix.lazy import sparse as sp

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


def _weighted_kronecker(A: EMatrix) -> tuple[Kronecker, float] | None:
    """A as c·(A₁ ⊗ … ⊗ A_d) — a Kronecker product, possibly weighted (HDMM's
    strategy under the Gaussian mechanism is scaled to ‖A‖₂ = 1) — or None."""
    weight = 1.0
    while type(A) is Weighted:
        weight *= float(A.weight)
        A = A.base
    if type(A) is not Kronecker or weight == 0:
        return None
    return A, weight


def small_kronecker(A: EMatrix) -> bool:
    found = _weighted_kronecker(A)
    if found is None:
        return False
    K = found[0]
    return len(K.factors) > 1 and all(
        f.shape[1] <= _KRON_FACTOR_COLUMNS and f.shape[0] * f.shape[1] <= _KRON_FACTOR_ENTRIES
        for f in K.factors
    )


def kronecker_pinv(A: EMatrix) -> Callable[[np.ndarray], np.ndarray]:
    """y ↦ (c·A₁ ⊗ … ⊗ A_d)⁺ y = (A₁⁺ ⊗ … ⊗ A_d⁺) y / c, one factor (axis) at
    a time: the minimum-norm least-squares solution, as LSMR's from x = 0."""
    found = _weighted_kronecker(A)
    if found is None:
        raise ValueError("kronecker_pinv needs a (weighted) Kronecker product")
    K, weight = found
    pinvs = [np.linalg.pinv(f.dense()) for f in K.factors]

    def solve(y: np.ndarray) -> np.ndarray:
        Y = y.reshape([f.shape[0] for f in K.factors])
        for axis, P in enumerate(pinvs):
            Y = np.moveaxis(np.tensordot(P, Y, axes=([1], [axis])), 0, axis)
        return Y.reshape(-1) / weight

    return solve


# ---------------------------------------------------------------------------
# Disjoint rows: identity, total, grids, group totals
# ---------------------------------------------------------------------------

# Rows are looked at one by one only when no cell is covered by more than this
# many of them (a group measured this many times): the matrix then has at most
# this many entries per cell.
_DISJOINT_REPEATS = 16
# Relative tolerance of "two rows of a group are multiples of each other".
_PARALLEL_RTOL = 1e-12


@dataclass(frozen=True)
class Disjoint:
    """The closed-form least-squares solution of a system whose non-zero rows
    fall into groups with disjoint supports, the rows of a group multiples
    cᵢ·a of one row a: x_j = coef_j · s_g for every cell j of group g, s_g
    = Σ cᵢbᵢ over the group's rows (`solve_disjoint`); cells of no group
    stay 0. `cells`: the cells of some group (None: all of them), in the
    order of `cell_group` (their groups) and `coef`. `rows`, `scales`,
    `labels`: the rows that enter s, their cᵢ and groups (None when every
    group is one row, c = 1: s_g = b_g, a gather)."""

    size: int  # rows of the system (groups are numbered by row)
    n: int  # cells
    cells: np.ndarray | None
    cell_group: np.ndarray
    coef: np.ndarray
    rows: np.ndarray | None = None
    scales: np.ndarray | None = None
    labels: np.ndarray | None = None


def disjoint_of(A: EMatrix) -> Disjoint | None:
    """A's rows as `Disjoint` groups, or None when they are not.

    Identities, totals and ranges that share no cell (weighted or not) are
    read from their structure, every row a group of its own (`_cell_rows`).
    Otherwise a first, cheap test: no cell covered by more than
    `_DISJOINT_REPEATS` rows (`max_column_nnz`, an upper bound), so that the
    explicit matrix has at most that many entries per cell. On the explicit
    matrix, every cell's lowest row is its group's label: the rows form
    disjoint groups exactly when every entry of a row carries its row's label
    and each group's rows and cells form a complete block (entries = rows ×
    cells); and least squares separates group by group when the rows of a
    group are parallel (to `_PARALLEL_RTOL`).

    The solution (`solve_disjoint`): a group's rows are cᵢ·a, so its fit
    depends on x only through t = a·x, minimised by t = Σ cᵢbᵢ / Σ cᵢ² — for
    0/1 rows weighted by 1/σᵢ the inverse-variance weighted mean of the
    group's noisy totals — and the minimum-norm x with a·x = t is t·a/‖a‖²
    (for 0/1 rows: t spread uniformly over the group's cells). A cell no
    row looks at gets 0, as LSMR's minimum-norm solution from x = 0 gives."""
    m, n = A.shape
    found = _cell_rows(A)
    if found is not None:  # no cell covered twice: every row its own group, c = 1
        row, value = found
        cells = None if row.min(initial=0) >= 0 else np.flatnonzero(row >= 0)
        if cells is not None:
            row = row[cells]
            value = None if value is None else value[cells]
        if value is None:  # 0/1 rows: 1/|row| on its cells (the same quotients)
            if m == 1:
                return Disjoint(1, n, cells, row, np.full(row.size, 1.0 / row.size))
            sizes = np.bincount(row, minlength=m).astype(np.float64)
            inverse = np.divide(1.0, sizes, out=np.zeros(m), where=sizes > 0)
            return Disjoint(m, n, cells, row, inverse[row])
        if m == 1:  # a total: one group, no gathers
            return Disjoint(1, n, cells, row, value / float(np.dot(value, value)))
        norm2 = np.bincount(row, weights=value * value, minlength=m)
        return Disjoint(m, n, cells, row, value / norm2[row])
    bound = A.max_column_nnz()
    if bound < 1 or bound > _DISJOINT_REPEATS:
        return None
    S = sp.csr_matrix(A.sparse(), dtype=np.float64, copy=True)
    S.eliminate_zeros()
    S.sort_indices()
    C = S.tocsc()
    C.sort_indices()
    counts, col_counts = np.diff(S.indptr), np.diff(C.indptr)
    rows, measured = np.flatnonzero(counts), np.flatnonzero(col_counts)
    if rows.size == 0:
        return None
    cell_group = np.full(n, -1, dtype=np.int64)
    cell_group[measured] = C.indices[C.indptr[measured]]  # the lowest row looking at the cell
    entry_group = cell_group[S.indices]
    row_group = np.full(m, -1, dtype=np.int64)
    row_group[rows] = entry_group[S.indptr[rows]]
    row_of = np.repeat(np.arange(m), counts)
    if not np.array_equal(entry_group, row_group[row_of]):
        return None  # a row reaches into another group's cells
    group = cell_group[measured]
    if not np.array_equal(
        np.bincount(entry_group, minlength=m),
        np.bincount(row_group[rows], minlength=m) * np.bincount(group, minlength=m),
    ):
        return None  # a group's rows do not all cover all of its cells
    a = np.zeros(n)
    a[measured] = C.data[C.indptr[measured]]  # the group's first row
    heads = S.indptr[rows]
    scale = S.data[heads] / a[S.indices[heads]]  # c of every non-zero row
    if not np.allclose(S.data, np.repeat(scale, counts[rows]) * a[S.indices],
                       rtol=_PARALLEL_RTOL, atol=0.0):  # fmt: skip
        return None  # two rows of a group are not multiples of each other
    labels = row_group[rows]
    den = np.bincount(labels, weights=scale * scale, minlength=m)
    value = a[measured]
    norm2 = np.bincount(group, weights=value * value, minlength=m)
    coef = value / (den[group] * norm2[group])
    cells = None if measured.size == n else measured
    return Disjoint(m, n, cells, group, coef, rows, scale, labels)


def _cell_rows(A: EMatrix) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Per cell the row of its one entry (-1: none) and the entry (None: 1
    wherever there is one), read from the structure of an Identity, a Total,
    range queries no two of which share a cell, or a weighted or row-scaled
    one of these, in O(n + m) with no sparse matrix; None for any other
    matrix (the caller reads the explicit one) and for ranges that overlap.
    Entries equal to 0 count as none."""
    m, n = A.shape
    if type(A) is Identity:
        return np.arange(n, dtype=np.int64), None
    if type(A) is Total:
        return np.zeros(n, dtype=np.int64), None
    if type(A) is RangeQueries and not A.transposed:
        grid = _grid_rows(A)
        if grid is not None:
            return grid, None
        sizes = A._sizes().astype(np.int64)
        if int(sizes.sum()) > n:  # some cell is in two ranges
            return None
        cols = A._entry_columns(sizes)
        row = np.full(n, -1, dtype=np.int64)
        row[cols] = np.repeat(np.arange(m, dtype=np.int64), sizes)
        if np.count_nonzero(row >= 0) != cols.size:  # a cell written twice
            return None
        return row, None
    inner = None
    if type(A) is Weighted:
        inner = _cell_rows(A.base)
        if inner is not None:
            inner = (inner[0], _entries(*inner) * A.weight)
    elif type(A) is Product and type(A.A) is Diagonal:
        inner = _cell_rows(A.B)
        if inner is not None:
            row = inner[0]
            inner = (row, _entries(*inner) * np.where(row >= 0, A.A.d[np.maximum(row, 0)], 0.0))
    if inner is None:
        return None
    row, value = inner
    return np.where(value != 0, row, -1), value


def _entries(row: np.ndarray, value: np.ndarray | None) -> np.ndarray:
    """`_cell_rows`'s entries as an array (None: 1 where a row holds the cell)."""
    return (row >= 0).astype(np.float64) if value is None else value


def _grid_rows(R: RangeQueries) -> np.ndarray | None:
    """Per cell the range holding it (-1: none) when R's ranges are products
    of disjoint intervals per axis, each product at most once (a grid, as
    UniformGrid's): from each cell's interval on every axis, in O(n) with no
    list of the ranges' cells. None for any other ranges."""
    labels, counts, index = [], [], []
    for axis, size in enumerate(R.domain_shape):
        pairs, which = np.unique(
            R.lower[:, axis] * (size + 1) + R.upper[:, axis], return_inverse=True
        )  # distinct intervals, sorted by lower end (then upper)
        spans = np.stack(np.divmod(pairs, size + 1), axis=1)
        if np.any(spans[1:, 0] <= spans[:-1, 1]):
            return None  # two intervals on this axis overlap
        label = np.full(size + 1, -1, dtype=np.int64)  # the last entry: outside
        for_cells = np.repeat(np.arange(spans.shape[0]), spans[:, 1] - spans[:, 0] + 1)
        label[np.concatenate([np.arange(a, b + 1) for a, b in spans])] = for_cells
        labels.append(label[:size])
        counts.append(spans.shape[0])
        index.append(which.reshape(-1))
    cells = math.prod(counts)
    if cells > 4 * R.shape[1] + 16:
        return None
    key = np.ravel_multi_index(tuple(index), counts)
    if np.unique(key).size != key.size:
        return None  # a product of intervals asked twice
    # the range of every product of intervals, one more slot per axis for a
    # cell outside every interval; every cell's in one gather
    table = np.full([c + 1 for c in counts], -1, dtype=np.int64)
    table[tuple(index)] = np.arange(key.size)
    at = [np.where(label < 0, count, label) for label, count in zip(labels, counts, strict=True)]
    return np.asarray(table[np.ix_(*at)].reshape(-1))


def solve_disjoint(found: Disjoint) -> Callable[[np.ndarray], np.ndarray]:
    """b ↦ the minimum-norm least-squares solution of a `Disjoint` system
    (`disjoint_of` says why it is that): x_j = coef_j · Σ cᵢbᵢ over the
    rows of j's group, a gather when every group is one row."""

    def solve(b: np.ndarray) -> np.ndarray:
        if found.rows is None:
            sums = b[0] if found.size == 1 else b[found.cell_group]
        else:
            weights = found.scales * b[found.rows]
            sums = np.bincount(found.labels, weights=weights, minlength=found.size)  # type: ignore[arg-type]
            sums = sums[found.cell_group]
        if found.cells is None:
            return np.asarray(sums * found.coef)
        x = np.zeros(found.n)
        x[found.cells] = sums * found.coef
        return x

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


# ---------------------------------------------------------------------------
# groups="measured": the reductions read from the records
# ---------------------------------------------------------------------------


def chosen_groups(
    groups: Partition | list[Partition] | str | None, items: list[Measurement]
) -> Partition | list[Partition] | None:
    """``groups=`` as given, or for ``"measured"`` the chain read from the
    records (`measured_groups`); another string is refused."""
    if isinstance(groups, str):
        if groups != "measured":
            raise ValueError(
                f"groups must be a Partition, a list of them or 'measured', got {groups!r}"
            )
        return measured_groups(items)
    return groups


def measured_groups(items: list[Measurement]) -> list[Partition] | None:
    """``groups="measured"``: the partitions every measurement was taken
    through, read from its record — ``query_on_root = Q·R_k⋯R_1`` with each
    R_i the sums over a partition's groups (x.reduce_by_partition(P1)
    .reduce_by_partition(P2)… gives [P1, P2, …]) — when all the measurements
    share them; None otherwise (a measured vector derived from the root by
    another transformation, or by different reductions): then the cells."""
    chain: list[Partition] | None = None
    for m in items:
        found = _reductions(m.query_on_root)
        if found is None:
            return None
        if chain is None:
            chain = found
        elif len(found) != len(chain) or any(
            not np.array_equal(P.groups, Q.groups) for P, Q in zip(found, chain, strict=True)
        ):
            return None
    return chain


def _reductions(Q: EMatrix) -> list[Partition] | None:
    """The partitions of ``Q = A·(R_k·(…·R_1))``, root first (the kernel
    records a vector's map to the root so, each step on the left)."""
    if type(Q) is not Product:
        return None
    steps = []
    T = Q.B
    while type(T) is Product:
        steps.append(T.A)
        T = T.B
    steps.append(T)
    chain: list[Partition] = []
    renumbered = None  # the last step's outputs as its Partition numbers them
    for R in reversed(steps):
        labels = _group_labels(R) if type(R) is Sparse else None
        if labels is None or np.unique(labels).size != R.shape[0]:
            return None  # not the sums over a partition's (non-empty) groups
        if renumbered is not None:  # its inputs in the numbering of the step before
            inputs = np.empty_like(labels)
            inputs[renumbered] = labels
            labels = inputs
        P = Partition(labels)
        renumbered = np.empty(P.num_groups, dtype=np.int64)
        renumbered[labels] = P.groups  # output o of R is group renumbered[o]
        chain.append(P)
    return chain


# ---------------------------------------------------------------------------
# Lines: weighted ranges, each along one axis within one line of the domain
# ---------------------------------------------------------------------------

# A line is solved densely when its ranges cut it into at most this many atoms.
_LINE_ATOMS = 4096


@dataclass(frozen=True)
class _LineBlock:
    """Lines measured by the same ranges with the same weights: the cuts of
    the atoms along the axis, every row's first and last atom and weight,
    and per line its first cell and its rows in the system."""

    cuts: np.ndarray
    first_atom: np.ndarray
    last_atom: np.ndarray
    weight: np.ndarray
    lines: list[tuple[int, np.ndarray]]


@dataclass(frozen=True)
class Lines:
    """A system of ranges along `axis` of a ≥ 2-D domain, each within one
    line (all other coordinates fixed), grouped into blocks of equal lines;
    `stride` is the step between a line's cells."""

    size: int
    stride: int
    blocks: list[_LineBlock]


def lines_of(A: EMatrix, shape: tuple[int, ...]) -> Lines | None:
    """A (the system's matrix on a root of `shape`) as `Lines` when its rows
    are weighted ranges, every one along the same axis within one line of a
    ≥ 2-D domain, spread over at least two lines, none cut into more than
    `_LINE_ATOMS` atoms; else None.

    Read from (weighted) `RangeQueries`, or from an explicit `Sparse` matrix
    whose every row is one constant value on consecutive cells along one
    axis — as the kernel holds a `Product` it measured, e.g. DAWA-Striped's
    one measurement of every stripe's GreedyH ranges (§9.2). Such a system
    is block diagonal over the lines (`solve_lines`)."""
    if len(shape) < 2 or math.prod(shape) != A.shape[1]:
        return None
    found = _ranges_along(A, shape) if type(A) is not Sparse else _sparse_along(A, shape)
    if found is None:
        return None
    axis, rows, first, lo, hi, weight = found
    order = np.argsort(first, kind="stable")
    lines, starts = np.unique(first[order], return_index=True)
    if lines.size < 2:
        return None
    bounds = np.append(starts, order.size)
    blocks: dict[bytes, _LineBlock] = {}
    for j, cell in enumerate(lines):
        at = order[bounds[j] : bounds[j + 1]]
        a_lo, a_hi, w = lo[at], hi[at], weight[at]
        cuts = np.unique(np.concatenate([a_lo, a_hi + 1]))
        if cuts.size - 1 > _LINE_ATOMS:
            return None
        first_atom = np.searchsorted(cuts, a_lo)
        last_atom = np.searchsorted(cuts, a_hi + 1) - 1
        key = b"".join(v.tobytes() for v in (cuts, first_atom, last_atom, w))
        if key not in blocks:
            blocks[key] = _LineBlock(cuts, first_atom, last_atom, w, [])
        blocks[key].lines.append((int(cell), rows[at]))
    return Lines(A.shape[1], math.prod(shape[axis + 1 :]), list(blocks.values()))


_Along = tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _ranges_along(A: EMatrix, shape: tuple[int, ...]) -> _Along | None:
    """(axis, rows, first cell of each row's line, first and last coordinate
    along the axis, weight) of (weighted) `RangeQueries` that are lines."""
    R, weight = A, None
    if type(A) is Weighted and type(A.base) is RangeQueries:
        R = A.base
    elif type(A) is Product and type(A.A) is Diagonal and type(A.B) is RangeQueries:
        R, weight = A.B, A.A.d
    if type(R) is not RangeQueries or R.transposed or R.domain_shape != tuple(shape):
        return None
    if weight is None:
        weight = np.full(R.shape[0], A.weight if type(A) is Weighted else 1.0)
    thin = R.lower == R.upper
    axis = next((a for a in reversed(range(len(shape))) if np.delete(thin, a, 1).all()), None)
    if axis is None:
        return None
    corner = R.lower.copy()
    corner[:, axis] = 0
    first = np.ravel_multi_index(tuple(corner.T), shape)
    rows = np.arange(R.shape[0])
    return axis, rows, first, R.lower[:, axis], R.upper[:, axis], np.asarray(weight, float)


def _sparse_along(A: Sparse, shape: tuple[int, ...]) -> _Along | None:
    """The same for an explicit matrix: every non-empty row one value on
    consecutive cells along one axis (the stride of that axis apart), within
    one line. Empty rows are left out (they do not depend on x)."""
    Q = A.matrix.tocsr()
    if not Q.has_sorted_indices:
        Q = Q.sorted_indices()
    counts = np.diff(Q.indptr)
    rows = np.flatnonzero(counts)
    if rows.size == 0:
        return None
    head = Q.indptr[rows]
    length = counts[rows]
    row_of = np.repeat(np.arange(Q.shape[0]), counts)
    if not np.array_equal(Q.data, Q.data[Q.indptr[row_of]]):
        return None  # not one value per row
    steps = np.diff(Q.indices)[np.diff(row_of) == 0]  # between neighbours in a row
    strides = [math.prod(shape[a + 1 :]) for a in range(len(shape))]
    if steps.size == 0:
        axis = len(shape) - 1  # single cells: lines along the last axis
    else:
        if not np.all(steps == steps[0]):
            return None
        axis = next((a for a in range(len(shape)) if strides[a] == steps[0] and shape[a] > 1), -1)
        if axis < 0:
            return None
    start = Q.indices[head].astype(np.int64)
    lo = (start // strides[axis]) % shape[axis]
    hi = lo + length - 1
    if np.any(hi >= shape[axis]):
        return None  # a run wraps past the end of its line
    first = start - lo * strides[axis]
    return axis, rows, first, lo, hi, np.asarray(Q.data[head], dtype=np.float64)


def solve_lines(found: Lines) -> Callable[[np.ndarray], np.ndarray]:
    """b ↦ the minimum-norm least-squares solution of the lines' system, line
    by line.

    On a line the ranges' endpoints cut the cells into atoms (runs no range
    tells apart); with M the line's ranges on its k atoms and D = diag(atom
    sizes), the line's solution is x = Eᵀ D^(−1/2) w, E the atoms'
    indicator, for the minimum-norm solution w of (M D^(1/2)) w = b: the
    minimum-norm solution on the cells lies in the span of the ranges' rows
    (uniform on atoms), where x ↦ w is an isometry. So a k-column dense solve
    per line; lines with the same ranges and weights share one factorisation
    with a right-hand side each. Cells no range covers get 0."""

    def solve(b: np.ndarray) -> np.ndarray:
        x = np.zeros(found.size)
        for block in found.blocks:
            sizes = np.diff(block.cuts)
            k, rows = sizes.size, np.arange(block.first_atom.size)
            M = np.zeros((rows.size, k + 1))
            M[rows, block.first_atom] = 1.0
            M[rows, block.last_atom + 1] = -1.0  # first ≤ last: never the same entry
            M = np.cumsum(M, axis=1)[:, :k] * block.weight[:, None]
            root = np.sqrt(sizes)
            Y = np.column_stack([b[r] for _, r in block.lines])
            # min-norm LS by complete orthogonal factorisation (xGELSY): the
            # same solution as the SVD's, a third of its time at these sizes
            from scipy.linalg import lstsq as dense_lstsq  # lazy: scipy.linalg costs start-up (#41)

            W = dense_lstsq(M * root, Y, lapack_driver="gelsy", check_finite=False)[0]
            spread = np.repeat(W / root[:, None], sizes, axis=0)  # an atom's total, evenly
            along = (block.cuts[0] + np.arange(spread.shape[0])) * found.stride
            x[along[:, None] + np.array([c for c, _ in block.lines])[None, :]] = spread
        return x

    return solve
