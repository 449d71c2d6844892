"""The `Partition` value type (paper §5.4, §7.1, Prop. 1).

A partition of a domain of n cells into p groups, stored as one group index
per cell. As matrices: `reduce_matrix()` is the p×n 0/1 matrix P that sums
the cells of each group (1-stable), `expand_matrix()` its pseudo-inverse
P⁺ = Pᵀ D⁻¹ (D = group sizes) that spreads each group's total uniformly.
Partitions are public values: they are chosen by partition-selection
operators and handed to the kernel's `reduce_by_partition`/`split_by_partition`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import EMatrix, as_vector
from .combinators import Product
from .core import Sparse

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = ["Partition", "hilbert_order"]


class Partition:
    """A grouping of n cells into groups 0..p-1 (every group non-empty)."""

    def __init__(self, groups: Any, domain_shape: tuple[int, ...] | None = None):
        arr = np.asarray(groups)
        if arr.size == 0:
            raise ValueError("a partition needs at least one cell")
        if not np.issubdtype(arr.dtype, np.integer):
            if (
                np.issubdtype(arr.dtype, np.floating)
                and np.all(np.isfinite(arr))
                and np.all(arr == np.round(arr))
            ):
                arr = arr.astype(np.int64)
            else:
                raise TypeError("partition group labels must be integers")
        shape = tuple(int(s) for s in (domain_shape or arr.shape))
        flat = arr.reshape(-1).astype(np.int64)
        if int(np.prod(shape)) != flat.size:
            raise ValueError(f"domain_shape {shape} does not match {flat.size} cells")
        if flat.min() < 0:
            raise ValueError("partition group labels must be non-negative")
        # Relabel to 0..p-1 in order of first appearance so that equal
        # groupings are equal values.
        _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first))
        labels = order[inverse].astype(np.int64)
        labels.setflags(write=False)
        self.groups = labels
        self.domain_shape = shape
        self.num_groups = int(labels.max()) + 1
        sizes = np.bincount(labels, minlength=self.num_groups)
        sizes.setflags(write=False)
        self.sizes = sizes

    @property
    def size(self) -> int:
        """Number of cells in the partitioned domain."""
        return int(self.groups.size)

    def reduce_matrix(self) -> Sparse:
        """P (p × n): row g has ones at the cells of group g."""
        n = self.size
        mat = sp.csr_matrix((np.ones(n), (self.groups, np.arange(n))), shape=(self.num_groups, n))
        return Sparse(mat)

    def expand_matrix(self) -> Sparse:
        """P⁺ = Pᵀ D⁻¹ (n × p): each cell gets its group's value / group size."""
        n = self.size
        mat = sp.csr_matrix(
            (1.0 / self.sizes[self.groups], (np.arange(n), self.groups)),
            shape=(n, self.num_groups),
        )
        return Sparse(mat)

    def reduce(self, x: Any) -> np.ndarray:
        """P·x: the total of each group."""
        v = as_vector(x, self.size, "data vector")
        return np.bincount(self.groups, weights=v, minlength=self.num_groups)

    def expand(self, y: Any) -> np.ndarray:
        """P⁺·y: spread each group's value uniformly over its cells."""
        v = as_vector(y, self.num_groups, "reduced vector")
        return v[self.groups] / self.sizes[self.groups]

    def reduce_workload(self, W: EMatrix) -> EMatrix:
        """W P⁺: the workload expressed on the reduced vector (Prop. 1)."""
        if W.shape[1] != self.size:
            raise ValueError(f"workload has {W.shape[1]} columns; partition has {self.size} cells")
        return Product(W, self.expand_matrix())

    def select_workload(self, W: EMatrix) -> EMatrix:
        """W·S, S picking the first cell of each group: W's own column for
        every group. For a partition W cannot see inside (equal columns in
        each group, as `workload_based` finds) this is W P⁺ exactly, with W's
        entries — P⁺'s averages round (ten 1/10s sum to 1 − 2⁻⁵³), which
        makes integer workloads non-integral and so changes the kernel's
        noise mechanism. For other partitions use `reduce_workload`."""
        if W.shape[1] != self.size:
            raise ValueError(f"workload has {W.shape[1]} columns; partition has {self.size} cells")
        k = self.num_groups
        _, first = np.unique(self.groups, return_index=True)
        select = sp.csr_matrix((np.ones(k), (first, np.arange(k))), shape=(self.size, k))
        return Product(W, Sparse(select))

    def expand_workload(self, W_reduced: EMatrix) -> EMatrix:
        """W' P: a workload on the reduced vector mapped back to the full domain."""
        if W_reduced.shape[1] != self.num_groups:
            raise ValueError(
                f"reduced workload has {W_reduced.shape[1]} columns; partition has "
                f"{self.num_groups} groups"
            )
        return Product(W_reduced, self.reduce_matrix())

    def cells(self, group: int) -> np.ndarray:
        """Flat indices of the cells in `group`."""
        if not 0 <= group < self.num_groups:
            raise IndexError(f"group {group} out of range for {self.num_groups} groups")
        return np.nonzero(self.groups == group)[0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Partition):
            return NotImplemented
        return self.domain_shape == other.domain_shape and np.array_equal(self.groups, other.groups)

    def __hash__(self) -> int:
        return hash((self.domain_shape, self.num_groups, self.groups[:64].tobytes()))

    def __repr__(self) -> str:
        return f"Partition({self.num_groups} groups over {self.size} cells)"


def hilbert_order(shape: tuple[int, ...]) -> np.ndarray:
    """Flat (C-order) cell indices of a 2-D domain listed along a Hilbert curve.

    DAWA (Li, Hay & Miklau, PVLDB 2014) linearises 2-D data with this order
    before its 1-D interval partition. For non-square or non-power-of-two
    shapes the curve fills the enclosing 2^k × 2^k square, starting at cell
    (0, 0), and cells outside the domain are skipped: every cell appears
    exactly once. Cost O(4^k) with 2^k ≥ max(shape).
    """
    dims = tuple(shape)
    if len(dims) != 2 or any(not isinstance(s, (int, np.integer)) or s < 1 for s in dims):
        raise ValueError(f"hilbert_order needs a 2-D shape of positive sizes, got {shape!r}")
    rows, cols = int(dims[0]), int(dims[1])
    side = 1 << max(0, (max(rows, cols) - 1).bit_length())
    t = np.arange(side * side, dtype=np.int64)
    r = np.zeros_like(t)
    c = np.zeros_like(t)
    s = 1
    while s < side:  # the classic d → (x, y) conversion, vectorised over d
        rx = (t >> 1) & 1
        ry = (t ^ rx) & 1
        flip = (ry == 0) & (rx == 1)
        r = np.where(flip, s - 1 - r, r)
        c = np.where(flip, s - 1 - c, c)
        swap = ry == 0
        r, c = np.where(swap, c, r), np.where(swap, r, c)
        r += s * rx
        c += s * ry
        t >>= 2
        s <<= 1
    inside = (r < rows) & (c < cols)
    return r[inside] * cols + c[inside]
