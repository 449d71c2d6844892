"""Non-negative least squares on a tree of range queries (`nnls` chooses it
for one measurement of H2, HB or QuadTree).

    x̂ = argmin_{x ≥ 0} ½‖A x − y‖₂²,   A a `Hierarchy` (H2, HB, QuadTree).

Every row of A measures one node's count, so with p_u = w_u² and ỹ_u = y_u/w_u
the objective is ½ Σ_u p_u (s_u − ỹ_u)², s_u the node's total, and the KKT
conditions of a cell c under its parent v read

    x_c = max(0, ỹ_c − Π_v / p),   Π_v = Σ_{u ⊇ v} p_u (s_u − ỹ_u),

with p the cells' common p_u. So a parent's cells are a closed-form function
of one number, and its total is piecewise linear in the price Γ_v = Π_v − p_v
(s_v − ỹ_v) its ancestors set: sorting the parent's cells gives the K
breakpoints B_i (the Γ at which the i-th smallest cell reaches 0) and the
total S_i there, and between two breakpoints the total is s = α − β·Γ with
β = j/(p + j·p_v) for j free cells. That line is what a leaf with answer α
and variance β returns, so with every parent's segment fixed the problem
above the parents is the exact tree solve of `tree.lstsq` (Hay et al.,
PVLDB 2010, §4.2) on the parents — K times smaller than the cells' problem.

The solver is semismooth Newton on the parents (the primal–dual active-set
method of Hintermüller, Ito & Kunisch, SIAM J. Optim. 2002, with the cells
eliminated exactly): fix every parent's segment, solve, move each parent to
the segment its new Γ falls in, and stop when none moves — the exact KKT
point. A first pass sorts every parent's cells and locates its segment, a
block of parents at a time, with the breakpoints computed in cache and
never stored. From Γ = 0 alone about half the parents would move in the
second round on sparse data; so while a block's breakpoints are still in
cache its parents are moved once more, to the price their grandparent
would set were it the root (its row and its children's lines: a two-level
solve in closed form), and then only ~7% move. Each round then costs a
tree solve on the parents, a range check per parent, and a recount of
only the parents whose Γ left their segment's range; HB measurements
settle in 1–4 rounds. The cells are written once, at the end.

It is NumPy only, nothing compiled: every per-parent step is a few whole-
array operations on a block of parents (a sorting network of row compares
for parents of up to 12 cells, NumPy's row sort above). A C version of the
per-parent step was tried and dropped (issue #23): it saved well under a
second at 2^24 cells, not worth a compiler in the install;
`benchmarks/bench_inference.py` measures NNLS against LS.

Applies to every 1-D tree (parents of q or q + 1 cells: the short ones are
padded with a cell held at 0; single cells as parents have no row) and to
d-D trees whose parents of cells all have one shape (b^h × b^h, …), with at
most 64 cells per parent and one leaf weight for all cells; `solve` returns
None elsewhere (callers then iterate).

The returned bound on the projected gradient is computed, not assumed: the
cells' true parent totals are summed from x̂ and pushed through the tree,
and the bound covers how far the prices they give differ from the ones x̂
was built from, plus the rounding of the cells' formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..matrix import Hierarchy
from .tree import answers as checked_answers
from .tree import node_terms, solve_from

__all__ = ["BLOCK_CELLS", "TreeNNLS", "solve", "sorting_network"]

# Parents with more cells fall back (the breakpoints cost O(K) per cell).
_MAX_CELLS_PER_PARENT = 64
# Cells per block where parents' cells are sorted, their segments counted
# and, at the end, written (temporaries of this size are reused by malloc
# instead of being mapped afresh every block).
BLOCK_CELLS = 1 << 18
# Below this p_v/p the parents' totals at the breakpoints are summed instead
# of being recovered from the breakpoints (which divides by p_v).
_RECOVER_RATIO = 1e-3
# Parents of at most this many cells are sorted by a network of row compares
# (measured at 2^23–2^24 cells: 13–27% faster than numpy's row sort at 12
# cells, even at 14, no faster at 16).
_NETWORK_CELLS = 12

# children per grandparent per axis; w·y and w² of the grandparents' rows
_Local = tuple[tuple[int, ...], np.ndarray, Any]


@dataclass(frozen=True)
class TreeNNLS:
    """The result of `solve`.

    Attributes:
        x: the estimate (cells in C order), x ≥ 0.
        rounds: tree solves on the parents.
        gradient_bound: an upper bound on ‖projected gradient of ½‖Ax − y‖²‖∞ at x.
        gradient_scale: ‖Aᵀy‖∞, the gradient's size at x = 0.
    """

    x: np.ndarray
    rounds: int
    gradient_bound: float
    gradient_scale: float


@dataclass(frozen=True)
class _Grid:
    """Parents of one shape: the cells as a (P, K) view of their grid (no
    copy: the parents' cells are read in place, in any dimension)."""

    parts: tuple[int, ...]  # parents per axis
    sizes: tuple[int, ...]  # cells per parent per axis

    @property
    def P(self) -> int:
        return math.prod(self.parts)

    @property
    def K(self) -> int:
        return math.prod(self.sizes)

    pads = None

    def _view(self, cells: np.ndarray) -> np.ndarray:
        """A flat C-order cell array as (parents…, cells of a parent…)."""
        d = len(self.parts)
        split = [n for pair in zip(self.parts, self.sizes, strict=True) for n in pair]
        return cells.reshape(split).transpose(list(range(0, 2 * d, 2)) + list(range(1, 2 * d, 2)))

    @property
    def step(self) -> int:
        """Parents per row of the parents' grid (blocks are whole rows)."""
        return math.prod(self.parts[1:])

    def rows(self, leaves: np.ndarray, a: int, b: int, pad: float) -> np.ndarray:
        """(b − a, K): the cells of parents [a, b), whole rows of the grid."""
        step = self.step
        return self._view(leaves)[a // step : b // step].reshape(b - a, self.K)

    def columns(self, leaves: np.ndarray, a: int, b: int, pad: float, out: np.ndarray) -> None:
        """out (K, b − a) = the cells of parents [a, b), cell-major."""
        np.copyto(out, self.rows(leaves, a, b, pad).T)

    def cells(
        self, leaves: np.ndarray, scale: float, tau: np.ndarray, spare: np.ndarray, totals: Any
    ):
        """max(scale·leaves − τ of the cell's parent, 0) in cell order (in 1-D
        written over `spare`, the sorted cells, no longer needed), and the
        parents' totals of it where they come cheaply, written into `totals`
        (else None)."""
        n = self.P * self.K
        x = spare.reshape(-1)[:n] if len(self.parts) == 1 else np.empty(n)
        cells = self._view(x)
        shifts = tau.reshape(self.parts + (1,) * len(self.sizes))
        if scale == 1.0:
            np.subtract(self._view(leaves), shifts, out=cells)
        else:
            np.multiply(self._view(leaves), scale, out=cells)
            cells -= shifts
        return np.maximum(x, 0.0, out=x), None


@dataclass(frozen=True)
class _Runs:
    """1-D parents of q or q + 1 cells: rows of K = q + 1, the short rows
    padded with a copy of their smallest cell, which `pads` holds at 0.
    `lengths` are the parents' cells in order, `ends` their running sum."""

    lengths: np.ndarray
    ends: np.ndarray
    K: int

    @property
    def P(self) -> int:
        return self.lengths.size

    @property
    def parts(self) -> tuple[int, ...]:
        return (self.P,)

    @property
    def pads(self) -> np.ndarray:
        return (self.K - self.lengths).astype(np.uint8)

    step = 1

    def columns(self, leaves: np.ndarray, a: int, b: int, pad: float, out: np.ndarray) -> None:
        """out (K, b − a) = the cells of parents [a, b), cell-major, `pad`
        in the last place of the short ones."""
        lengths = self.lengths[a:b]
        place = self.ends[a:b] - lengths
        for row in out:
            np.take(leaves, place, out=row, mode="clip")
            place += 1
        np.copyto(out[-1], pad, where=lengths < self.K)

    def rows(self, leaves: np.ndarray, a: int, b: int, pad: float) -> np.ndarray:
        """(b − a, K): the cells of parents [a, b) as in `columns`."""
        out = np.empty((self.K, b - a))
        self.columns(leaves, a, b, pad, out)
        return out.T

    def cells(
        self, leaves: np.ndarray, scale: float, tau: np.ndarray, spare: np.ndarray, totals: Any
    ):
        """As `_Grid.cells`, with the parents' totals always written."""
        # written over the sorted cells (P·K ≥ n), parents a block at a time,
        # and summed per parent while the block is in cache: fresh arrays of
        # the cells' size cost more than the arithmetic
        x = spare.reshape(-1)[: leaves.size]
        block = max(1, BLOCK_CELLS // self.K)
        for a in range(0, self.P, block):
            b = min(a + block, self.P)
            lengths = self.lengths[a:b]
            lo, hi = int(self.ends[a]) - int(lengths[0]), int(self.ends[b - 1])
            part = np.multiply(leaves[lo:hi], scale, out=x[lo:hi])
            part -= np.repeat(tau[a:b], lengths)
            np.maximum(part, 0.0, out=part)
            np.add.reduceat(part, self.ends[a:b] - lengths - lo, out=totals[a:b])
        return x, totals


def _layout(tree: Hierarchy) -> _Grid | _Runs | None:
    """The grouping of cells by parent, or None where the parents have
    children that are not cells, too many cells, or (beyond 1-D) differ in
    shape."""
    t0 = tree.height - 1
    if t0 < 0:
        return None
    parents = tree.level(t0)
    sizes = []
    for at_parents in parents.part_sizes:
        if max(at_parents) > tree.branching:  # its children would be parts, not cells
            return None
        if len(at_parents) != 1:
            # 1-D runs of q and q + 1 cells (q = 1: single cells, which have
            # no row as parents)
            if len(parents.parts) > 1 or max(at_parents) - min(at_parents) != 1:
                return None  # (each short row gets one pad)
            if max(at_parents) > _MAX_CELLS_PER_PARENT:
                return None
            lengths = tree.child_counts(0, t0)  # (all cells: shared with part_sums)
            return _Runs(lengths, np.cumsum(lengths, dtype=np.intp), max(at_parents))
        sizes.append(at_parents[0])
    layout = _Grid(parents.parts, tuple(sizes))
    return layout if layout.K <= _MAX_CELLS_PER_PARENT else None


def sorting_network(K: int) -> tuple[tuple[int, int], ...]:
    """Batcher's odd–even merge sort on K inputs (Knuth, TAOCP vol. 3,
    §5.3.4), as comparators (i, j), i < j: built for the next power of two,
    minus those touching the inputs beyond K (virtual +∞, never moved)."""
    n = 1 << max(K - 1, 0).bit_length()
    pairs = []
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return tuple((i, j) for i, j in pairs if j < K)


class _Parents:
    """Every parent's cells, sorted (ỹ_0 ≤ … ≤ ỹ_{K−1}, in `ys`), and the
    segment it is on: its line (α, β) and the range [lo, hi) of G over
    which that segment holds. Per sorted cell i,

        S_i = Σ_{l>i} (ỹ_l − ỹ_i)   the parent's total when cell i reaches 0,
        B_i = p·ỹ_i − p_v·S_i       the Γ − w_v·y_v at which it does.

    Everything is cell-major — `ys` is (K, P), a row per sorted position —
    so that each step is a few NumPy operations on rows of a block of
    parents. The breakpoints B are never stored: a block at a time, they are
    computed from running sums of the rows (not a matrix product: BLAS
    would thread a product this small, and on a busy machine its threads
    wait ~100× longer than the work), counted against G and dropped while
    the block is in cache. A later round recomputes them only for the
    parents whose G has left its range.

    Up to `_NETWORK_CELLS` cells per parent, a block is sorted by a sorting
    network (each compare-exchange is two operations on rows of the block:
    numpy's sort costs ~50 ns per row of a few cells, mostly per row
    overhead); above, numpy sorts each parent's row and the block is
    transposed.
    """

    def __init__(
        self,
        layout: _Grid | _Runs,
        leaves: np.ndarray,
        scale: float,
        p: float,
        own: float,
        rowless: np.ndarray | None,
        local: _Local | None = None,
    ):
        P, K = layout.P, layout.K
        self.layout, self.leaves, self.scale = layout, leaves, scale
        self.P, self.K, self.p, self.own, self.rowless = P, K, p, own, rowless
        self.pads = layout.pads
        # p_v per parent, only where some have no row (else `own` for all)
        self.own_rows = None if rowless is None else np.where(rowless, 0.0, own)
        self.network = sorting_network(K) if K <= _NETWORK_CELLS else None
        self.ys = np.empty((K, P))
        self.alpha, self.beta = np.empty(P), np.empty(P)
        self.lo, self.hi = np.empty(P), np.empty(P)
        # B_i = (p + p_v·(K − 1 − i))·ỹ_i − p_v·Σ_{l>i} ỹ_l
        self.weights = p + own * (K - 1 - np.arange(K))
        # S_c from B_c divides by p_v: below this p_v/p it is summed instead
        self.recover = own >= _RECOVER_RATIO * p
        free = K - np.arange(K + 1)
        self.slopes = free / (p + free * own)  # β by the count of cells at 0
        # parents per block: whole rows of the parents' grid beyond 1-D, and
        # (for the local price) whole grandparents
        self.local = local
        # (no larger than the grid: the buffers below are fresh memory)
        rows = max(1, min(BLOCK_CELLS // (K * layout.step), layout.parts[0]))
        if local is not None:
            rows = -(-rows // local[0][0]) * local[0][0]
        self.block = m = rows * layout.step
        self._span = np.arange(m)  # (the take offsets of `_place` and `lines`)
        self._B = np.empty((K + 2) * m)
        self._work = np.empty((K + 1) * m)
        self._sorted = np.empty(K * m)
        self._sums = np.empty((2, m))
        self._hit = np.empty(m, dtype=bool)
        self._miss = np.empty(m, dtype=bool)
        self._below = np.empty(K * m, dtype=bool)
        self._local_G = np.empty(m) if local is not None else None

    def locate_all(self, G: np.ndarray, wy: np.ndarray, below: np.ndarray) -> tuple[float, float]:
        """Sort every parent's cells and put it on the segment its G falls in,
        then move it by its grandparent's local price. Returns max |p·ỹ| over
        the cells, and ‖Aᵀy‖∞ — a cell's entry is p·ỹ_c minus `below` of its
        parent, extreme at the parent's smallest or largest cell."""
        largest = scale = 0.0
        for a in range(0, self.P, self.block):
            b = min(a + self.block, self.P)
            Y = self._sort(a, b)
            B = self._breaks(Y)
            self._place(B, Y, G[a:b], wy[a:b], slice(a, b))
            if self.local is not None:
                self._local_move(B, Y, self.local_price(G, a, b), wy, a, b)
            for row in (Y[0], Y[-1]):
                end = np.multiply(row, self.p, out=self._work[: b - a])
                largest = max(largest, _magnitude(end))
                end -= below[a:b]
                scale = max(scale, _magnitude(end))
        return largest, scale

    def relocate(self, G: np.ndarray, wy: np.ndarray) -> int:
        """Move every parent whose G left its segment's range to the segment
        G falls in; returns how many moved."""
        moved = 0
        for a in range(0, self.P, self.block):
            b = min(a + self.block, self.P)
            index = self._leaving(G[a:b], a, b)
            if index.size:
                index += a
                self.move(G, wy, index)
                moved += index.size
        return moved

    def move(self, G: np.ndarray, wy: np.ndarray, index: np.ndarray) -> None:
        """Put the parents `index` (sorted, intp) on the segment their G (of
        all parents) falls in, a block's worth at a time (the buffers')."""
        for a in range(0, index.size, self.block):
            part = index[a : a + self.block]
            Y = self.ys[:, part]
            self._place(self._breaks(Y), Y, G[part], wy[part], part)

    def _leaving(self, G: np.ndarray, a: int, b: int) -> np.ndarray:
        """Which of the parents [a, b) (from 0) have their G (of the block)
        outside their segment's range [lo, hi)."""
        out = np.less(G, self.lo[a:b], out=self._hit[: b - a])
        out |= np.greater_equal(G, self.hi[a:b], out=self._miss[: b - a])
        return np.flatnonzero(out)

    def _local_move(
        self, B: np.ndarray, Y: np.ndarray, G: np.ndarray, wy: np.ndarray, a: int, b: int
    ) -> None:
        """Move the parents [a, b) whose local price G left their segment's
        range: the whole block when many did (it is in cache), else just
        those (on dense data, almost none)."""
        index = self._leaving(G, a, b)
        if 4 * index.size > b - a:
            self._place(B, Y, G, wy[a:b], slice(a, b))
        elif index.size:
            rows = index + a
            self._place(B[:, index], Y[:, index], G[index], wy[rows], rows)

    def local_price(self, G: np.ndarray, a: int, b: int) -> np.ndarray:
        """G of the parents [a, b) plus the price their grandparent would
        set were it the root: its own row and its children's lines make a
        two-level tree whose estimate is closed-form (`tree.lstsq`'s
        passes on one node). Whole grandparents lie in [a, b)."""
        assert self.local is not None and self._local_G is not None  # (called only then)
        ks, wy_up, own_up = self.local
        grid = ((b - a) // self.layout.step, *self.layout.parts[1:])
        split = [n for size, k in zip(grid, ks, strict=True) for n in (size // k, k)]
        inner = tuple(range(1, 2 * len(ks), 2))
        s = self.alpha[a:b].reshape(split).sum(axis=inner)  # Σ of the children's α
        v = self.beta[a:b].reshape(split).sum(axis=inner)  # and variances
        first, last = a // math.prod(ks), b // math.prod(ks)
        wy_u = wy_up[first:last].reshape(s.shape)
        own_u = own_up if np.ndim(own_up) == 0 else own_up[first:last].reshape(s.shape)
        exact = v == 0  # every cell below held at 0: the total is known
        precision = 1.0 / np.where(exact, 1.0, v)
        estimate = np.where(exact, s, (wy_u + s * precision) / (precision + own_u))
        price = estimate * own_u - wy_u  # p_u·(s_u − ỹ_u)
        for axis, k in enumerate(ks):  # (a broadcast over short rows is slower)
            price = price.repeat(k, axis=axis)
        return np.add(G[a:b], price.reshape(-1), out=self._local_G[: b - a])

    def _sort(self, a: int, b: int) -> np.ndarray:
        """Sort the cells of parents [a, b), times the scale, into `ys`; short
        rows start with a copy of their smallest cell. Returns them as a
        contiguous (K, b − a) block."""
        K, m, scale = self.K, b - a, self.scale
        # (a pad is −∞ once scaled: it sorts first)
        pad = -math.copysign(math.inf, scale)
        Y = self._sorted[: K * m].reshape(K, m)
        if self.network is not None:  # a compare is two row operations
            work = self._work[: (K + 1) * m].reshape(K + 1, m)
            self.layout.columns(self.leaves, a, b, pad, work[:K])
            work[:K] *= scale
            rows, spare = list(work[:K]), work[K]
            for i, j in self.network:
                np.minimum(rows[i], rows[j], out=spare)
                np.maximum(rows[i], rows[j], out=rows[j])
                rows[i], spare = spare, rows[i]
            for row, out in zip(rows, Y, strict=True):
                np.copyto(out, row)
        else:
            block = self._work[: K * m].reshape(m, K)
            np.multiply(self.layout.rows(self.leaves, a, b, pad), scale, out=block)
            block.sort(axis=1)
            np.copyto(Y, block.T)
        if self.pads is not None:  # finite: the breakpoints stay defined
            np.copyto(Y[0], Y[1], where=self.pads[a:b] != 0)
        np.copyto(self.ys[:, a:b], Y)
        return Y

    def _breaks(self, Y: np.ndarray) -> np.ndarray:
        """(K + 2, m): the breakpoints of the parents whose sorted cells are
        Y (K, m), row i + 1 holding B_i, −∞ and +∞ around them. From the
        top cell down, B_i = (p + p_v·(K − 1 − i))·ỹ_i − p_v·Σ_{l>i} ỹ_l:
        four row operations per cell of a parent."""
        K, m = self.K, Y.shape[1]
        B = self._B[: (K + 2) * m].reshape(K + 2, m)
        B[0], B[K + 1] = -math.inf, math.inf
        above, owed = self._sums[:, :m]  # Σ_{l>i} ỹ_l, and p_v times it
        np.multiply(Y[K - 1], self.weights[K - 1], out=B[K])
        np.copyto(above, Y[K - 1])
        for i in range(K - 2, -1, -1):
            np.multiply(above, self.own, out=owed)
            np.multiply(Y[i], self.weights[i], out=B[i + 1])
            B[i + 1] -= owed
            above += Y[i]
        # tied cells give equal B that rounding may put a few ulps out of
        # order: ordered, the count is a position and [B_{c−1}, B_c) exact
        for i in range(2, K + 1):
            np.maximum(B[i - 1], B[i], out=B[i])
        return B

    def _place(self, B: np.ndarray, Y: np.ndarray, G: np.ndarray, wy: np.ndarray, rows: Any):
        """Put the parents `rows` (Y: their sorted cells, (K, m); B: their
        breakpoints, from `_breaks`) on the segment their G falls in: with c
        of their breakpoints B_i ≤ G (cells at 0), their line and the range
        [B_{c−1}, B_c) of G where it holds."""
        K, m = self.K, G.size
        below = self._below[: K * m].reshape(K, m)
        np.less_equal(B[1 : K + 1], G, out=below)
        c = np.add.reduce(below.view(np.uint8), axis=0, dtype=np.uint8)
        pads = None if self.pads is None else self.pads[rows]
        if pads is not None:  # padding cells are always at 0
            np.maximum(c, pads, out=c)
        at = c.astype(np.intp)
        at *= m
        at += self._span[:m]
        flat = B.reshape(-1)
        lo = flat.take(at)
        if pads is not None:  # below B_{pads} the segment is the pads' own
            lo[c == pads] = -math.inf
        self.lo[rows] = lo
        at += m
        hi = flat.take(at)
        self.hi[rows] = hi  # (a copy: `lines` may reuse hi)
        self.alpha[rows], self.beta[rows] = self.lines(c, Y, hi, wy, rows)

    def lines(
        self, c: np.ndarray, Y: np.ndarray, B: np.ndarray, wy: np.ndarray, rows: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """(α, β) of the parents `rows` (sorted cells Y, (K, m)) with c cells
        at 0: their total is α − β·Γ between their c-th and (c+1)-th
        breakpoints, α = S_c + β·(B_c + w_v·y_v), β = j/(p + j·p_v) for j
        free cells (B: their B_c, overwritten)."""
        K = self.K
        first_free = np.minimum(c, K - 1)  # (when there is one)
        # (Y[c_j, j] by one flat take: a pair of index arrays costs ~3× more)
        lowest_free = Y.reshape(-1).take(first_free.astype(np.intp) * c.size + self._span[: c.size])
        none_free = c == K
        B[none_free] = 0.0  # (+∞ there; α is 0 below)
        if self.recover:  # S_c = (p·ỹ_c − B_c)/p_v
            S = lowest_free * self.p
            S -= B
            S /= self.own
        else:
            S = np.maximum(Y - lowest_free, 0.0).sum(axis=0)
        beta = self.slopes.take(c)
        if self.rowless is not None:  # p_v = 0 there
            alone = np.flatnonzero(self.rowless[rows])
            beta[alone] = (K - c[alone]) / self.p
        alpha = np.add(B, wy, out=B)
        alpha *= beta
        alpha += S
        alpha[none_free] = 0.0
        return alpha, beta


def _spread_down(
    tree: Hierarchy,
    depth: int,
    parts: dict[int, Any],
    out: np.ndarray | None = None,
    base: np.ndarray | None = None,
) -> np.ndarray:
    """Per part of `depth` (flat): the sum over its strict ancestors u of
    parts[t][u], parts[t] a grid of depth t's parts (depths absent add 0).
    With `out` (flat), written there, plus `base` when given."""
    top = min(depth, max(tree.first_depth, 0))
    total = np.zeros((1, *tree.level(top).parts, 1))
    for t in range(tree.first_depth, depth):
        if t in parts:
            total = total + parts[t]
        shape = (1, *tree.level(t + 1).parts, 1)
        if out is not None and t == depth - 1:
            # the last, largest level straight into `out`: at 10^8 cells a
            # fresh array of the parents' size costs more than the arithmetic
            spread = out.reshape(shape)
            if base is None:
                spread.fill(0.0)
                tree.spread_to_children(spread, total, t)
            else:
                tree.spread_to_children(spread, total, t, base=base.reshape(shape))
            return out
        spread = np.zeros(shape)
        tree.spread_to_children(spread, total, t)
        total = spread
    if out is None:
        return total.reshape(-1)
    np.add(total.reshape(-1), 0.0 if base is None else base, out=out)
    return out


def _fitted_above(
    tree: Hierarchy,
    depth: int,
    terms: dict[int, Any],
    totals: np.ndarray,
    out: np.ndarray | None = None,
    base: np.ndarray | None = None,
) -> np.ndarray:
    """Per part of `depth` (flat): Σ w_u²·S_u over its strict ancestors u, S_u
    the sum of `totals` (a depth grid) under u; `out` and `base` as in
    `_spread_down`."""
    parts: dict[int, Any] = {}
    for t in range(depth - 1, tree.first_depth - 1, -1):
        totals = tree.part_sums(totals, t)
        if terms[t] is not None:
            parts[t] = terms[t][1] * totals
    return _spread_down(tree, depth, parts, out, base)


def _local(tree: Hierarchy, terms: dict[int, Any]) -> _Local | None:
    """(children per grandparent per axis, w·y and w² of the grandparents'
    rows, flat) for `_Parents.local_price`, or None where the grandparents
    have no rows or differ in their numbers of children."""
    t = tree.height - 2
    term = terms.get(t)
    found = list(tree.level(t).children) if t >= 0 else []
    ks = tuple(k for k in found if k is not None)
    if term is None or not ks or len(ks) != len(found):
        return None
    own = term[1] if np.ndim(term[1]) == 0 else term[1].reshape(-1)
    return ks, term[0].reshape(-1), own


def _settle(
    tree: Hierarchy,
    terms: dict[int, Any],
    parents: _Parents,
    y: np.ndarray,
    G: np.ndarray,
    wy: np.ndarray,
    below: np.ndarray,
    totals: np.ndarray,
    max_rounds: int,
) -> int | None:
    """Newton rounds on the parents until none leaves its segment: a tree
    solve from the parents up, every parent's G, and a recount of those off
    their segment. G and the parents' totals (written into `totals`, a
    parents' grid) are then the solution's. Returns the rounds, or None
    past `max_rounds`."""
    t0 = tree.height - 1
    for rounds in range(1, max_rounds + 1):
        fit = solve_from(
            tree,
            y,
            t0,
            parents.alpha.reshape(totals.shape),
            parents.beta.reshape(totals.shape),
            known=True,
            terms=terms,
            out=totals,
        )
        if fit is not totals:  # (the parents are the top of the tree)
            np.copyto(totals, fit)
        _fitted_above(tree, t0, terms, totals, out=G, base=below)
        if parents.relocate(G, wy) == 0:
            return rounds
    return None


def solve(tree: Hierarchy, y: Any, max_rounds: int = 50) -> TreeNNLS | None:
    """min_{x ≥ 0} ½‖A x − y‖² for the tree A (see the module), or None where
    the method does not apply (irregular parents, mixed leaf weights) or
    `max_rounds` parent solves did not settle every segment.

    Raises:
        ValueError: for the transpose, or a y of the wrong size or with
            non-finite values.
    """
    y = checked_answers(tree, y, "nnls")
    layout = _layout(tree)
    w_leaf = tree.leaf_weight
    if layout is None or not w_leaf:
        return None
    n, P, t0 = tree.num_cells, layout.P, tree.height - 1
    grid = (1, *layout.parts, 1)
    p = w_leaf * w_leaf
    terms = {t: node_terms(tree, y, t) for t in range(max(tree.first_depth, 0), t0 + 1)}
    term = terms.get(t0)
    wy, own, rowless = np.zeros(P), 0.0, None
    if term is not None:
        wy, own = term[0].reshape(P), term[1]
        if isinstance(own, np.ndarray):  # 0 at single cells
            rowless = own.reshape(P) == 0
            own = float(own.max())
    leaves = y[:n]
    parents = _Parents(layout, leaves, 1.0 / w_leaf, p, own, rowless, _local(tree, terms))
    own_rows = own if parents.own_rows is None else parents.own_rows
    # −Σ w_u·y_u over the parent and its ancestors: Γ − w_v·y_v = fitted + this
    answers = {t: rows[0] for t, rows in terms.items() if rows}
    below = _spread_down(tree, t0, answers)
    below += wy
    np.negative(below, out=below)
    # Γ = 0 to start: every parent's cells as if the ancestors agreed with it
    G = -wy  # compared with B: G = Γ − w_v·y_v
    largest, scale = parents.locate_all(G, wy, below)
    totals = np.empty(grid)
    rounds = _settle(tree, terms, parents, y, G, wy, below, totals, max_rounds)
    if rounds is None:
        return None
    # (in place where it can: at 10^8 cells fresh parent-sized arrays cost
    # more than the arithmetic on them; the segments' lines are free now)
    price = np.multiply(totals.reshape(P), own_rows, out=parents.alpha)
    price += G  # Π_v
    tau = np.divide(price, p, out=parents.beta)
    x, true_totals = layout.cells(leaves, parents.scale, tau, parents.ys, parents.lo)
    # The certificate: prices from the cells' true parent totals.
    if true_totals is None:
        true_totals = tree.part_sums(x.reshape((1, *tree.domain_shape, 1)), t0).reshape(P)
    moved_price = _fitted_above(tree, t0, terms, true_totals.reshape(grid), out=G, base=below)
    true_totals *= own_rows
    moved_price += true_totals
    moved_price -= price  # Π_true − Π
    eps = np.finfo(np.float64).eps
    bound = _magnitude(moved_price) + 8 * eps * (largest + p * _magnitude(tau))
    return TreeNNLS(x, rounds, bound, scale)


def _magnitude(v: np.ndarray) -> float:
    """max |v| (0 for an empty v) without the temporary of np.abs."""
    return max(float(v.max()), -float(v.min())) if v.size else 0.0
