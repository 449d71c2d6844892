"""GreedyH on a partition's groups: DAWA's second step (Li, Hay & Miklau,
PVLDB 2014, §4), on one domain or stripe by stripe (DAWA-Striped, εktelo §9.2).

**Public** query selection: everything here reads public values only — a
partition DAWA released (Private→Public, already charged), the workload, the
domain's shape — and returns a strategy matrix. The functions are exported
by `ektelo.operators.selection`:

* `greedy_h_on_partition(P, W)` — GreedyH's strategy for W reduced to P's
  groups, its tree built along DAWA's 1-D order of the groups (the Hilbert
  curve for 2-D domains);
* `interval_reduced_ranges(P, W)` — W P⁺ counted from 2-D ranges' corners
  when P's groups are intervals of W's columns (DAWA after workload-based
  reduction), instead of densifying the implicit product;
* `stripe_workloads(W, shape, axis)` — W restricted to every stripe, in a
  compact form with the same Gram matrix;
* `stripe_union(shape, axis, partitions, strategies)` — every stripe's
  strategy on its groups as one matrix of range queries on the whole domain;
* `greedy_h_stripes(shape, axis, partitions, workloads)` — GreedyH on every
  stripe's groups for its workload, as one matrix: DAWA-Striped's strategy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .. import _validate as check
from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Kronecker,
    Partition,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ..matrix.partition import hilbert_order
from ._greedy_h import greedy_h, greedy_h_many
from .partition import stripe

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from ..matrix.lazy import sparse as sp

__all__ = [
    "greedy_h_on_partition",
    "greedy_h_stripes",
    "interval_reduced_ranges",
    "stripe_union",
    "stripe_workloads",
]


# ---------------------------------------------------------------------------
# One domain: DAWA's buckets in the curve's order
# ---------------------------------------------------------------------------
def greedy_h_on_partition(P: Partition, W: EMatrix) -> EMatrix:
    """GreedyH's strategy for the workload W (on P's cells) reduced to P's
    groups, its tree built over neighbouring groups of DAWA's 1-D order
    (Public; DAWA's second step, Li, Hay & Miklau 2014).

    On a 1-D domain this is ``greedy_h(P.num_groups, P.reduce_workload(W))``.
    On a 2-D domain DAWA orders the cells along the Hilbert curve
    (`partition.hilbert_order`), but `Partition` numbers groups by their first
    cell in C order: the groups are put in curve order by a permutation C
    ((C·y)[r] = total of the r-th group along the curve), GreedyH runs on
    W P⁺ Cᵀ and its strategy is applied as M C (the same sensitivity: C only
    permutes columns). When W is a set of 2-D ranges and every group is a
    rectangle — as every bucket of the dyadic (approximate) DAWA partition is:
    an aligned Hilbert interval of 4^j cells is a square, of 2·4^j two
    neighbouring squares — W P⁺ Cᵀ is formed densely from the overlaps per
    axis instead of through the implicit product.

    Returns a matrix on the k = P.num_groups group totals (measure it on
    ``x.reduce_by_partition(P)``); its sensitivity is GreedyH's, 1.
    """
    if not isinstance(P, Partition):
        raise TypeError(f"P must be a Partition, got {type(P).__name__}")
    if not isinstance(W, EMatrix):
        raise TypeError(f"W must be an EMatrix, got {type(W).__name__}")
    k = P.num_groups
    if len(P.domain_shape) != 2:
        counted = interval_reduced_ranges(P, W)
        return greedy_h(k, P.reduce_workload(W) if counted is None else counted)
    along = P.groups[hilbert_order(P.domain_shape)]
    first = np.full(k, along.size)
    np.minimum.at(first, along, np.arange(along.size))
    order = np.argsort(first)  # the groups along the curve
    rank = np.argsort(order)
    C = Sparse(sp.csr_matrix((np.ones(k), (rank, np.arange(k))), shape=(k, k)))
    reduced = reduced_ranges(P, W, order)
    if reduced is None:
        reduced = P.reduce_workload(W) @ C.T
    return greedy_h(k, reduced) @ C


def reduced_ranges(P: Partition, W: EMatrix, order: np.ndarray) -> EMatrix | None:
    """W P⁺ Cᵀ (q × k, the groups taken in `order`) held densely, when W is a
    set of 2-D ranges and every group is a rectangle: entry (i, r) =
    |range_i ∩ g| / |g| for g = order[r], from the overlaps per axis. None
    otherwise (or when it would exceed `_DENSE_REDUCED_MAX` entries)."""
    k = P.num_groups
    if not (
        isinstance(W, RangeQueries)
        and not W.transposed
        and len(W.domain_shape) == 2
        and W.num_queries * k <= _DENSE_REDUCED_MAX
    ):
        return None
    rows, cols = np.divmod(np.arange(P.size), W.domain_shape[1])
    box = [np.full(k, P.size), np.full(k, -1), np.full(k, P.size), np.full(k, -1)]
    np.minimum.at(box[0], P.groups, rows)
    np.maximum.at(box[1], P.groups, rows)
    np.minimum.at(box[2], P.groups, cols)
    np.maximum.at(box[3], P.groups, cols)
    if not np.array_equal((box[1] - box[0] + 1) * (box[3] - box[2] + 1), P.sizes):
        return None
    # overlaps per axis, once per distinct extent of the groups on that axis
    # per axis, once per distinct extent of the groups on that axis: the share
    # of the extent inside each range (a group's entry is the product of its
    # two shares: |range ∩ g| / |g| for a rectangle g)
    share = []
    for axis, (start, stop) in enumerate(((box[0], box[1]), (box[2], box[3]))):
        extents, which = np.unique(np.stack([start, stop]), axis=1, return_inverse=True)
        length = np.minimum(W.upper[:, axis], extents[1][:, None])
        length -= np.maximum(W.lower[:, axis], extents[0][:, None])
        inside = np.maximum(length + 1, 0) / (extents[1] - extents[0] + 1)[:, None]
        share.append((inside, which.reshape(-1)[order]))
    (by_row, row_of), (by_col, col_of) = share
    q = W.num_queries
    out = np.empty((k, q))  # transposed: a group's column is contiguous
    step = max(1, 2**16 // q)  # blocks of the two factors that stay in the cache
    rows_part, cols_part = np.empty((step, q)), np.empty((step, q))
    for g in range(0, k, step):
        m = min(step, k - g)
        np.take(by_row, row_of[g : g + m], axis=0, out=rows_part[:m])
        np.take(by_col, col_of[g : g + m], axis=0, out=cols_part[:m])
        np.multiply(rows_part[:m], cols_part[:m], out=out[g : g + m])
    out.setflags(write=False)
    return Dense._wrap(out).T  # finite by construction: no validating copy; a view


_DENSE_REDUCED_MAX = 2**26  # entries of a dense W P⁺ (512 MiB)


def interval_reduced_ranges(P: Partition, W: EMatrix) -> EMatrix | None:
    """W P⁺ (q × k) held densely, counted from the ranges' corners, when W is
    2-D ranges R with columns taken at cells in increasing C order — R
    itself, or R·S with S a selection of such cells, as
    ``Partition.select_workload`` builds after workload-based reduction (§8)
    — and P's groups are intervals of W's columns in order (DAWA's buckets on
    a 1-D vector). None otherwise, or beyond `_DENSE_REDUCED_MAX` entries.

    Bucket r holds the columns [s_r, s_{r+1}), i.e. the cells
    cells[s_r] … cells[s_{r+1} − 1], an interval of the selected cells in C
    order, so (W P⁺)[i, r] = (N_i(s_{r+1}) − N_i(s_r)) / |r| with N_i(t) the
    number of selected cells before cells[t] (in C order) inside range i.
    N_i(t) is the selected cells in the range's full rows above cells[t]'s
    row plus those left of it in its row: four corners of a 2-D prefix count
    of the selected cells and two of a per-row one — O(n + q·k), instead of
    pushing identity blocks through the ranges' prefix sums (O(n·k) per
    product, seconds on 256 × 256 at a few thousand buckets)."""
    found = _ranges_at_cells(W)
    if found is None or np.any(np.diff(P.groups) < 0):  # labels in order: intervals
        return None
    R, cells = found
    k, q = P.num_groups, R.num_queries
    if cells.size != P.size or q * (k + 1) > _DENSE_REDUCED_MAX or R.shape[1] >= 2**31:
        return None  # (int32 counts)
    Y, X = R.domain_shape
    chosen = np.zeros((Y + 1, X), dtype=np.int32)  # a zero row: cutoffs at the end
    chosen.reshape(-1)[cells] = 1
    row_prefix = np.zeros((Y + 1, X + 1), dtype=np.int32)  # [y, x]: row y, columns < x
    np.cumsum(chosen, axis=1, out=row_prefix[:, 1:])
    block = np.zeros((Y + 1, X + 1), dtype=np.int32)  # [y, x]: rows < y, columns < x
    np.cumsum(row_prefix[:-1], axis=0, out=block[1:])
    y0, x0 = R.lower[:, 0], R.lower[:, 1]
    y1, x1 = R.upper[:, 0] + 1, R.upper[:, 1] + 1  # exclusive
    # Per row y of a cutoff and range i (tables of (Y + 1) × q): the selected
    # cells of the range in its full rows above y, and the per-row counts at
    # the range's left and right edges in row y (0 wide outside the range).
    top = np.clip(np.arange(Y + 1)[:, None], y0, y1)
    above = block[top, x1] - block[y0, x1] - block[top, x0] + block[y0, x0]
    left = row_prefix[:, x0]
    width = np.where((np.arange(Y + 1)[:, None] >= y0) & (np.arange(Y + 1)[:, None] < y1),
                     row_prefix[:, x1] - left, 0).astype(np.int32)  # fmt: skip
    starts = np.concatenate(([0], np.cumsum(P.sizes)))
    cut = np.append(cells, Y * X)[starts]  # the first cell after each bucket boundary
    cut_y, cut_x = np.divmod(cut, X)
    before = row_prefix[cut_y, cut_x]  # selected cells left of the cutoff in its row
    # N (cutoffs × ranges) row block by row block: cutoffs are in C order, so
    # those in one row are consecutive; in row y, N = above + clip(before −
    # left, 0, width) (the row's count is monotone in x: clipping the count
    # is clipping x to the range's columns).
    # N in float64 (integers below 2³¹: exact), then W P⁺ in the same array,
    # row r overwritten by (N[r + 1] − N[r]) / |r| block by block in cache:
    # one large array, not two (a fresh one is not free: page faults, and
    # where transparent huge pages are on madvise, NumPy's huge-page advice)
    counts = np.empty((k + 1, q))
    bounds = np.flatnonzero(np.diff(cut_y)) + 1
    for lo, hi in zip(np.concatenate(([0], bounds)), np.append(bounds, k + 1), strict=True):
        y = cut_y[lo]
        part = counts[lo:hi]
        np.subtract(before[lo:hi, None], left[y], out=part)
        np.maximum(part, 0, out=part)
        np.minimum(part, width[y], out=part)
        part += above[y]
    sizes = P.sizes.astype(np.float64)[:, None]
    step = max(1, 2**17 // q)
    for a in range(0, k, step):  # rows a … b − 1 read N[a … b]; N[b] stays for the next block
        b = min(k, a + step)
        np.subtract(counts[a + 1 : b + 1], counts[a:b], out=counts[a:b])  # (overlap: buffered)
        counts[a:b] /= sizes[a:b]
    out = counts[:k]  # k × q: a bucket's count over its size
    out.setflags(write=False)
    return Dense._wrap(out).T  # finite by construction: no validating copy; a view


def _ranges_at_cells(W: EMatrix) -> tuple[RangeQueries, np.ndarray] | None:
    """(R, cells) for W = 2-D ranges R, or R·S with S picking the cells
    `cells` (one per column, increasing): W's column j is R's column cells[j]."""
    R, S = W, None
    if isinstance(W, Product) and isinstance(W.B, Sparse):
        R, S = W.A, W.B.matrix.tocsc()
    if not (isinstance(R, RangeQueries) and not R.transposed and len(R.domain_shape) == 2):
        return None
    if S is None:
        return R, np.arange(R.shape[1])
    if not (np.all(np.diff(S.indptr) == 1) and np.all(S.data == 1.0)):
        return None  # not one 1 per column
    cells = np.asarray(S.indices, dtype=np.int64)
    if np.any(np.diff(cells) <= 0):
        return None
    return R, cells


# ---------------------------------------------------------------------------
# Stripe by stripe (DAWA-Striped)
# ---------------------------------------------------------------------------
def greedy_h_stripes(
    shape: Sequence[int],
    axis: int,
    partitions: Sequence[Partition],
    workloads: Sequence[EMatrix],
) -> EMatrix:
    """DAWA-Striped's strategy (Public; εktelo §9.2): on every stripe g of
    `partition.stripe(shape, axis)`, GreedyH for the stripe's workload
    ``workloads[g]`` (see `stripe_workloads`) reduced to the stripe's groups
    ``partitions[g]`` (intervals of the stripe: DAWA's buckets on a 1-D
    vector); all of them as one matrix on the whole domain (`stripe_union`).

    Stripes with the same workload object and the same partition share one
    GreedyH run (`stripe_workloads` shares the objects of equal
    restrictions), and the small ones are weighted in one batch
    (`greedy_h_many`). The stripes share no cell, so the union's sensitivity
    is the largest of the stripes' (1 for GreedyH): measured with one
    Laplace call it gets the noise each stripe's own call would.
    """
    dims, ax = _stripe_axis(shape, axis)
    if len(partitions) != len(workloads):
        raise ValueError(f"{len(partitions)} partitions for {len(workloads)} stripe workloads")
    problems: dict[tuple[int, bytes], tuple[Partition, EMatrix]] = {}  # GreedyH is deterministic
    keys = []
    for P, W_s in zip(partitions, workloads, strict=True):
        key = (id(W_s), P.groups.tobytes())
        problems.setdefault(key, (P, W_s))
        keys.append(key)
    strategies = dict(zip(problems, greedy_h_many(list(problems.values())), strict=True))
    return stripe_union(dims, ax, partitions, [strategies[k] for k in keys])


def stripe_union(
    shape: Sequence[int],
    axis: int,
    partitions: Sequence[Partition],
    strategies: Sequence[EMatrix],
) -> EMatrix:
    """Every stripe's strategy on its groups as one matrix on the whole domain
    (Public; εktelo §9.2).

    Stripe g (in `partition.stripe(shape, axis)`'s order) is partitioned into
    intervals by ``partitions[g]`` (groups numbered in order along the
    stripe) and measured on its group totals by ``strategies[g]``, weighted
    ranges of groups (``Product(Diagonal(c), RangeQueries(k, lo, hi))``, as
    GreedyH returns). Its query over groups [a, b] with weight c is c times the
    sum of the stripe's cells [first(a), last(b)]: a range along `axis` at the
    stripe's coordinates on the other axes. The rows are the stripes' rows,
    stripe by stripe.

    Returns ``Product(Diagonal(c), RangeQueries(shape, lower, upper))``; the
    answers equal those of measuring each stripe's group totals.
    """
    dims, ax = _stripe_axis(shape, axis)
    R = stripe(dims, ax)
    if len(partitions) != R.num_groups or len(strategies) != R.num_groups:
        raise ValueError(
            f"{len(partitions)} partitions and {len(strategies)} strategies "
            f"for {R.num_groups} stripes"
        )
    weights, lowers, uppers, starts = [], [], [], []
    for P, A in zip(partitions, strategies, strict=True):
        if not (
            isinstance(A, Product)
            and isinstance(A.A, Diagonal)
            and isinstance(A.B, RangeQueries)
            and not A.B.transposed
        ):
            raise TypeError(f"a stripe's strategy must be weighted ranges of groups, got {A!r}")
        if P.size != dims[ax] or A.shape[1] != P.num_groups:
            raise ValueError("a stripe's partition or strategy does not fit the stripe")
        if np.any(np.diff(P.groups) < 0):  # labels in order of first cell
            raise ValueError("a stripe's groups are not intervals of the stripe")
        weights.append(A.A.d)
        lowers.append(A.B.lower[:, 0])
        uppers.append(A.B.upper[:, 0])
        starts.append(np.concatenate(([0], np.cumsum(P.sizes))))  # cell offsets of the groups
    offsets = np.cumsum([0] + [c.size for c in weights])
    first = np.unique(R.groups, return_index=True)[1]  # every stripe's first cell
    corner = np.column_stack(np.unravel_index(first, dims))  # the stripe's cell 0
    lower = np.repeat(corner, np.diff(offsets), axis=0)
    upper = lower.copy()
    for g, (start, a, b) in enumerate(zip(starts, lowers, uppers, strict=True)):
        rows = slice(offsets[g], offsets[g + 1])
        lower[rows, ax] = corner[g, ax] + start[a]
        upper[rows, ax] = corner[g, ax] + start[b + 1] - 1
    return Product(Diagonal(np.concatenate(weights)), RangeQueries(dims, lower, upper))


def stripe_workloads(W: EMatrix, shape: Sequence[int], axis: int) -> list[EMatrix]:
    """For every stripe (in the order of `partition.stripe(shape, axis)`), a
    matrix with the same Gram matrix as W restricted to the stripe's cells
    (W·Sᵍ, Sᵍ the stripe's column selection) — Public.

    GreedyH depends on its workload only through the Gram matrix (its
    objective is the matrix-mechanism error tr(Wᵀ W (MᵀM)⁺)), so this is the
    per-stripe workload of the original εktelo DAWA-Striped (`W * P_i.T`) in
    compact form: for W = ⊗ⱼ Wⱼ it is W_axis scaled by Πⱼ≠axis ‖Wⱼ[:, vⱼ]‖₂,
    vⱼ the stripe's coordinates; a union of products gives a union of scaled
    axis factors. Stripes with equal weights share one matrix object. For
    n-D range queries (`RangeQueries` on the domain's shape) it is the 1-D
    ranges, along `axis`, of the queries whose box contains the stripe:
    exactly W·Sᵍ without its zero rows, with no n-D product per stripe. Any
    other matrix is restricted column by column (W·Sᵍ, slower).
    """
    if not isinstance(W, EMatrix):
        raise TypeError(f"the workload must be an EMatrix, got {type(W).__name__}")
    dims, ax = _stripe_axis(shape, axis)
    n = math.prod(dims)
    if W.shape[1] != n:
        raise ValueError(f"workload has {W.shape[1]} columns; the domain has {n} cells")
    if isinstance(W, RangeQueries) and not W.transposed and W.domain_shape == dims:
        return _stripe_ranges(W, dims, ax)
    count = math.prod(d for i, d in enumerate(dims) if i != ax)
    terms = _gram_terms(W, dims, ax)
    if terms is None:  # any other matrix: restrict it column by column (slower)
        R = stripe(dims, ax)
        return [Product(W, _selection(R.cells(g), n)) for g in range(count)]
    weights = np.column_stack([w for _, w in terms])
    shared: dict[bytes, EMatrix] = {}
    out = []
    for g in range(count):
        key = weights[g].tobytes()
        if key not in shared:
            pairs = zip((A for A, _ in terms), weights[g], strict=True)
            blocks: list[EMatrix] = [Weighted(A, math.sqrt(w)) for A, w in pairs if w > 0]
            if not blocks:  # the workload never looks at this stripe
                blocks = [A for A, _ in terms]
            shared[key] = blocks[0] if len(blocks) == 1 else VStack(blocks)
        out.append(shared[key])
    return out


def _stripe_ranges(W: RangeQueries, shape: tuple[int, ...], axis: int) -> list[EMatrix]:
    """Per stripe (C order of the other axes' coordinates, as `partition.stripe`):
    the 1-D ranges along `axis` of W's queries whose box contains the stripe
    (a stripe no query meets: one query of zero weight, as W·Sᵍ is zero).

    The ranges are handed over as `Product(Identity, RangeQueries)`, outside
    GreedyH's range form, so GreedyH weighs them through their Gram matrix,
    as it weighed W·Sᵍ: the same objective and strategies as the general
    path, at the cost of a q×256 range product instead of a 2-D one. (In
    range form GreedyH would also try its "canonical" objective and find
    other strategies — on DPBench Adult_2D 0.80–0.98× the expected error of
    these, for ~1.6× the selection time.)"""
    others = [i for i in range(len(shape)) if i != axis]
    coords = np.indices([shape[i] for i in others]).reshape(len(others), -1).T
    lo_o, hi_o = W.lower[:, others], W.upper[:, others]
    lo_a, hi_a = W.lower[:, axis], W.upper[:, axis]
    shared: dict[bytes, EMatrix] = {}
    out: list[EMatrix] = []
    for c in coords:
        hit = np.all((lo_o <= c) & (c <= hi_o), axis=1)
        key = np.packbits(hit).tobytes()
        if key not in shared:
            ranges: EMatrix = (
                RangeQueries(shape[axis], lo_a[hit], hi_a[hit])
                if hit.any()
                else Weighted(Total(shape[axis]), 0.0)
            )
            shared[key] = Product(Identity(ranges.shape[0]), ranges)
        out.append(shared[key])
    return out


def _gram_terms(
    W: EMatrix, shape: tuple[int, ...], axis: int
) -> list[tuple[EMatrix, np.ndarray]] | None:
    """W's Gram restricted to stripe g as Σₖ w_k[g]·A_kᵀA_k, as pairs (A_k, w_k)
    for Kronecker products with one factor per attribute, identities, and
    weighted unions of those; None for anything else."""
    others = [d for i, d in enumerate(shape) if i != axis]
    if isinstance(W, Identity):
        return [(Identity(shape[axis]), np.ones(math.prod(others)))]
    if isinstance(W, Weighted):
        inner = _gram_terms(W.base, shape, axis)
        return None if inner is None else [(A, w * W.weight**2) for A, w in inner]
    if isinstance(W, VStack):
        parts = [_gram_terms(B, shape, axis) for B in W.blocks]
        return None if any(p is None for p in parts) else [t for p in parts for t in p]  # type: ignore[union-attr]
    if isinstance(W, Kronecker) and tuple(f.shape[1] for f in W.factors) == tuple(shape):
        w = np.ones(1)
        for i, f in enumerate(W.factors):
            if i != axis:
                w = np.multiply.outer(w, f.column_norms(2)).reshape(-1)
        return [(W.factors[axis], w)]
    return None


def _selection(cells: np.ndarray, n: int) -> Sparse:
    """The n × |cells| matrix whose column j is the unit vector of cells[j]."""
    k = cells.size
    return Sparse(sp.csr_matrix((np.ones(k), (cells, np.arange(k))), shape=(n, k)))


def _stripe_axis(shape: Sequence[int], axis: int) -> tuple[tuple[int, ...], int]:
    """The shape as a tuple and the axis in range (negative axes count from the end)."""
    dims = check.shape(shape)
    return dims, check.axis(axis, len(dims))
