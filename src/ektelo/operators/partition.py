"""Public partition selection (paper §5.4, §8, §9.2): choose a `Partition`
of the domain from public facts only — the workload or the domain's shape.

Every function here is a **Public** operator: it never sees data and spends
no budget. The result is handed to the kernel's `reduce_by_partition`
(sum each group: 1-stable) or `split_by_partition` (one vector per group:
1-stable, parallel composition). The private partition selectors (AHP, DAWA)
live in the kernel.

* `workload_based(W)` — Algorithm 3 of §8: merge cells whose workload
  columns are identical, so that W x = (W P⁺)(P x) exactly (Prop. 1).
* `stripe(shape, axis)` — one group per value combination of the other
  attributes (the striped plans of §9.2).
* `grid(shape, cell_shape)` — the blocks of a regular grid.
* `marginal(shape, attrs)` — cells agreeing on `attrs`; reducing by it gives
  the marginal on `attrs` (in C order of those attributes).
* `hilbert_order(shape)` / `hilbert_partition(shape, intervals)` — the 2-D →
  1-D Hilbert-curve order DAWA uses, and the map from a partition of that
  1-D sequence back to a partition of the 2-D domain.

Group labels follow `Partition`'s convention: groups are numbered in order of
their first cell in C order, so e.g. `marginal(shape, attrs).reduce(x)`
equals the Kronecker marginal `workload.marginal(shape, attrs) @ x`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as check
from ..matrix import EMatrix, Partition
from ..matrix.partition import hilbert_order
from .ahp import ahp_clusters as ahp

__all__ = [
    "Partition",
    "ahp",
    "grid",
    "hilbert_order",
    "hilbert_partition",
    "marginal",
    "stripe",
    "workload_based",
]

Shape = int | Sequence[int]

# Exact arithmetic budget of float64: integers up to 2^53 are exact. The random
# integer vectors of `workload_based` use at most this many bits, fewer when
# the workload has many rows (so that every partial sum stays exact).
_MAX_BITS = 30
_MIN_BITS = 12
_EXACT_LIMIT = 2.0**52
# Relative gap below which two non-integral hashes count as equal (only used
# when the workload has non-integer entries and rounding is possible).
_REL_TOL = 2.0**-32


def _axes(attrs: Any, ndim: int, name: str) -> tuple[int, ...]:
    items = (attrs,) if check.is_integer(attrs) else tuple(attrs)
    out = [check.axis(a, ndim, name) for a in items]
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must not repeat an axis, got {attrs!r}")
    return tuple(sorted(out))


# ---------------------------------------------------------------------------
# Workload-based partition (§8, Algorithm 3, Prop. 1)
# ---------------------------------------------------------------------------
def workload_based(W: EMatrix, *, repetitions: int = 2, seed: int | None = None) -> Partition:
    """The coarsest partition that loses nothing for W (paper §8, Algorithm 3).

    Cells j, k share a group exactly when columns w_j and w_k of W are equal;
    then W x = (W P⁺)(P x) for every x (Prop. 1), so plans may measure and
    infer on the reduced vector P x (`Partition.select_workload(W)` gives
    W P⁺ with W's own entries). Only Wᵀ·v products are used, so implicit
    workloads stay implicit.

    Algorithm 3 hashes column j to h_j = (Wᵀ v)_j for a random v and groups
    equal hashes. Two changes make it dependable in floating point:

    * v holds random *integers* below 2^b (b ≤ 30, fewer for tall workloads),
      so for integer-valued workloads (ranges, prefixes, marginals, their
      Kronecker products and stacks) every sum is an exact float64 integer and
      equal columns get bitwise-equal hashes whatever the summation order
      (cumulative sums, inclusion–exclusion). Hashes are then grouped exactly.
      If some hash is not an integer (W has non-integer entries) or leaves the
      exact range, hashes are grouped with a relative tolerance of 2^-32
      instead (equal columns can then differ by rounding).
    * The grouping is repeated `repetitions` times with independent v and the
      groupings intersected. Two distinct columns collide in one repetition
      with probability ≤ 2^-b (integer case), so the chance of wrongly
      merging them is ≤ 2^-(b·repetitions). Equal columns are never split.

    Args:
        W: the workload (any `EMatrix`).
        repetitions: independent hashes to intersect (≥ 1).
        seed: seed for the public random vectors (the result does not depend
            on it except with the failure probability above).
    """
    if not isinstance(W, EMatrix):
        raise TypeError(f"W must be an EMatrix, got {type(W).__name__}")
    repetitions = check.positive_int(repetitions, "repetitions")
    m, n = W.shape
    # Keep m · 2^b well inside 2^52 so that partial sums of integer
    # workloads with moderate entries stay exact.
    bits = int(max(_MIN_BITS, min(_MAX_BITS, 48 - math.ceil(math.log2(m + 1)))))
    rng = np.random.default_rng(seed)
    V = rng.integers(0, 2**bits, size=(m, int(repetitions))).astype(np.float64)
    H = np.asarray(W.T.matmat(V), dtype=np.float64).reshape(n, int(repetitions))
    if not np.all(np.isfinite(H)):
        raise ValueError("the workload produced non-finite values; cannot group its columns")
    # Intersect the groupings: sort the cells once by all their keys and cut
    # wherever any key changes.
    keys = [_group_key(H[:, r]) for r in range(H.shape[1])]
    order = np.lexsort(keys[::-1])
    change = np.zeros(n, dtype=bool)
    for key in keys:
        sk = key[order]
        change[1:] |= sk[1:] != sk[:-1]
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.cumsum(change)
    shape = tuple(getattr(W, "domain_shape", (n,)))  # e.g. RangeQueries keep theirs
    return Partition(labels, shape if math.prod(shape) == n else (n,))


def _group_key(h: np.ndarray) -> np.ndarray:
    """A key per cell that is equal exactly for cells in the same hash group.

    Integral hashes in the exact range are their own keys. Otherwise rounding
    may separate equal columns by a few ulps: sort, and cut wherever
    consecutive values differ by more than the relative tolerance (single
    linkage), so near-equal values are never split; the key is the cluster.
    """
    top = float(np.abs(h).max()) if h.size else 0.0
    if top < _EXACT_LIMIT and np.array_equal(h, np.rint(h)):
        return h
    order = np.argsort(h, kind="stable")
    sh = h[order]
    tol = _REL_TOL * max(top, np.finfo(np.float64).tiny)
    cluster = np.empty(h.size, dtype=np.int64)
    cluster[0] = 0
    cluster[1:] = np.cumsum(np.diff(sh) > tol)
    key = np.empty(h.size, dtype=np.int64)
    key[order] = cluster
    return key


# ---------------------------------------------------------------------------
# Partitions from the domain's shape
# ---------------------------------------------------------------------------
def _by_kept_axes(dims: tuple[int, ...], keep: tuple[int, ...]) -> Partition:
    """Group cells by their coordinates on `keep` (C order of those axes)."""
    kept_shape = tuple(dims[a] for a in keep)
    ids = np.arange(math.prod(kept_shape), dtype=np.int64).reshape(kept_shape)
    view_shape = tuple(dims[a] if a in keep else 1 for a in range(len(dims)))
    labels = np.broadcast_to(ids.reshape(view_shape), dims)
    return Partition(np.ascontiguousarray(labels).reshape(-1), dims)


def marginal(shape: Shape, attrs: int | Sequence[int]) -> Partition:
    """Cells with the same values on `attrs` form one group (Public).

    Reducing by this partition gives the marginal on `attrs`, ordered like
    `ektelo.workload.marginal(shape, attrs)` (C order of the kept axes);
    `attrs=()` gives the single group whose reduce is the total.
    """
    dims = check.shape(shape)
    return _by_kept_axes(dims, _axes(attrs, len(dims), "attrs"))


def stripe(shape: Shape, axis: int) -> Partition:
    """One group (stripe) per value combination of the attributes other than
    `axis`; each stripe holds the cells along `axis` (Public; §9.2).

    With `split_by_partition` this gives the 1-D vectors of the striped plans
    (HB-Striped, DAWA-Striped); stripe g's cells, in increasing order along
    `axis`, are `stripe(shape, axis).cells(g)`.
    """
    dims = check.shape(shape)
    (ax,) = _axes(axis, len(dims), "axis")
    return _by_kept_axes(dims, tuple(a for a in range(len(dims)) if a != ax))


def grid(shape: Shape, cell_shape: Shape) -> Partition:
    """The blocks of a regular grid with blocks of `cell_shape` (Public).

    Blocks start at coordinate 0 on every axis; blocks at the upper edges are
    smaller when a size does not divide evenly. Groups are numbered in C order
    of the block coordinates.
    """
    dims = check.shape(shape)
    cells = check.shape(cell_shape, "cell_shape")
    if len(cells) != len(dims):
        raise ValueError(f"cell_shape {cells} must have one size per axis of {dims}")
    counts = tuple(-(-d // c) for d, c in zip(dims, cells, strict=True))
    index = [np.arange(d, dtype=np.int64) // c for d, c in zip(dims, cells, strict=True)]
    labels = np.ravel_multi_index(np.meshgrid(*index, indexing="ij"), counts)
    return Partition(labels.reshape(-1), dims)


# ---------------------------------------------------------------------------
# Hilbert curve (DAWA on 2-D domains)
# ---------------------------------------------------------------------------
def hilbert_partition(shape: Shape, intervals: Partition | Any) -> Partition:
    """A partition of the 2-D domain from a partition of its Hilbert sequence.

    `intervals` partitions the 1-D vector `x.reshape(-1)[hilbert_order(shape)]`
    (e.g. DAWA's interval partition): a `Partition` over that sequence or an
    array of group labels, one per position. Position i of the sequence is
    cell `hilbert_order(shape)[i]`; it keeps its group.
    """
    dims = check.shape(shape)
    order = hilbert_order(dims)
    labels = intervals.groups if isinstance(intervals, Partition) else np.asarray(intervals)
    labels = labels.reshape(-1)
    if labels.size != order.size:
        raise ValueError(
            f"intervals cover {labels.size} positions; the domain {dims} has {order.size} cells"
        )
    out = np.empty(order.size, dtype=np.int64)
    out[order] = np.asarray(labels, dtype=np.int64)
    return Partition(out, dims)
