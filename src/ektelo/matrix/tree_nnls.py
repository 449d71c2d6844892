"""Non-negative least squares on a tree of range queries (`Hierarchy.nnls`).

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
above the parents is the exact tree solve of `Hierarchy.lstsq` (Hay et al.,
PVLDB 2010, §4.2) on the parents — K times smaller than the cells' problem.

The solver is semismooth Newton on the parents (the primal–dual active-set
method of Hintermüller, Ito & Kunisch, SIAM J. Optim. 2002, with the cells
eliminated exactly): fix every parent's segment, solve, move each parent to
the segment its new Γ falls in, and stop when none moves — the exact KKT
point. From Γ = 0 this takes 2–5 rounds on HB measurements; each costs a
tree solve on the parents and one comparison per cell, after one sort of
every parent's cells. The cells are written once, at the end.

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
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .hierarchy import Hierarchy

__all__ = ["TreeNNLS", "solve"]

# Parents with more cells fall back (the breakpoints cost O(K) per cell).
_MAX_CELLS_PER_PARENT = 64
# Below this p_v/p the parents' totals at the breakpoints get their own
# product instead of being recovered from the breakpoints (which divides by p_v).
_RECOVER_RATIO = 1e-3
# Parents per block where cells are written through per-cell temporaries.
_BLOCK_PARENTS = 1 << 18
# Parents per block where each round counts their segments.
_BLOCK_COUNT = 1 << 16


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
    """Parents of one shape: the cells as a (P, K) view of their grid."""

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

    def sorted_cells(self, leaves: np.ndarray, scale: float) -> np.ndarray:
        """(P, K): each parent's cells times `scale`, sorted."""
        ys = np.empty((self.P, self.K))
        np.multiply(self._view(leaves), scale, out=ys.reshape(self.parts + self.sizes))
        ys.sort(axis=1)
        return ys

    def cells(self, leaves: np.ndarray, scale: float, tau: np.ndarray, spare: np.ndarray):
        """max(scale·leaves − τ of the cell's parent, 0) in cell order (in 1-D
        written over `spare`, the sorted cells, no longer needed), and the
        parents' totals of it where they come cheaply (else None)."""
        x = spare.reshape(-1) if len(self.parts) == 1 else np.empty(spare.size)
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

    def sorted_cells(self, leaves: np.ndarray, scale: float) -> np.ndarray:
        short = np.flatnonzero(self.lengths < self.K)
        # −∞ (once scaled) at the end of every short row: it sorts first
        pad = -math.copysign(math.inf, scale)
        ys = np.insert(leaves, self.ends[short], pad)
        ys *= scale
        ys = ys.reshape(self.P, self.K)
        ys.sort(axis=1)
        ys[short, 0] = ys[short, 1]  # finite: the products with it stay defined
        return ys

    def cells(self, leaves: np.ndarray, scale: float, tau: np.ndarray, spare: np.ndarray):
        # written over the sorted cells (P·K ≥ n), parents a block at a time,
        # and summed per parent while the block is in cache: fresh arrays of
        # the cells' size cost more than the arithmetic
        x = spare.reshape(-1)[: leaves.size]
        totals = np.empty(self.P)
        for a in range(0, self.P, _BLOCK_PARENTS):
            b = min(a + _BLOCK_PARENTS, self.P)
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
    sizes = []
    for ax in tree._axes:
        at_parents = ax.sizes[t0]
        if max(at_parents) > tree.branching:  # its children would be parts, not cells
            return None
        if len(at_parents) != 1:
            # 1-D runs of q and q + 1 cells (q = 1: single cells, which have
            # no row as parents)
            if len(tree._axes) > 1 or max(at_parents) - min(at_parents) != 1:
                return None  # (each short row gets one pad)
            if max(at_parents) > _MAX_CELLS_PER_PARENT:
                return None
            lengths = tree._child_counts(0, t0)  # (all cells: shared with _reduce)
            return _Runs(lengths, np.cumsum(lengths, dtype=np.intp), max(at_parents))
        sizes.append(next(iter(at_parents)))
    layout = _Grid(tuple(ax.count[t0] for ax in tree._axes), tuple(sizes))
    return layout if layout.K <= _MAX_CELLS_PER_PARENT else None


class _Breakpoints:
    """Every parent's cells sorted (ỹ_0 ≤ … ≤ ỹ_{K−1}) and, per sorted cell i,

        S_i = Σ_{l>i} (ỹ_l − ỹ_i)   the parent's total when cell i reaches 0,
        B_i = p·ỹ_i − p_v·S_i       the Γ − w_v·y_v at which it does,

    stored cell-major (K, P) so a parent's segment count is K vector compares.
    """

    def __init__(self, ys: np.ndarray, p: float, own: float, pads: np.ndarray | None, rowless: Any):
        P, K = ys.shape
        self.ys, self.p, self.own, self.P, self.K, self.pads = ys, p, own, P, K, pads
        # parents without a row (single cells): p_v = 0 there. Their one cell
        # is the last sorted, where B = p·ỹ and S = 0 whatever p_v, so only
        # their slopes differ
        self.rowless = rowless
        i = np.arange(K)
        to_total = np.tril(np.ones((K, K)), -1)  # ys @ to_total = S
        to_total[i, i] = -(K - 1 - i)
        # one product, written cell-major, with a last row p·ỹ_0: B_{K−1} = p·ỹ_{K−1}
        # and it bound every cell's p·ỹ (the scale and the rounding need them)
        M = np.zeros((K, K + 1))
        M[:, :K] = p * np.eye(K) - own * to_total
        M[0, K] = p
        out = np.matmul(M.T, ys.T)
        self.B, self.lowest = out[:K], out[K]
        self.S = None if own >= _RECOVER_RATIO * p else np.matmul(to_total.T, ys.T)
        free = K - np.arange(K + 1)
        self.slopes = free / (p + free * own)  # β by the count of cells at 0

    def count(self, G: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
        """Per parent of `rows` (G given for them), the cells at 0: the
        number of B_i ≤ G."""
        B = self.B[:, rows]
        c = np.zeros(G.size, dtype=np.uint8)
        hit = np.empty(G.size, dtype=bool)
        for row in B:
            np.less_equal(row, G, out=hit)
            np.add(c, hit.view(np.uint8), out=c)
        if self.pads is not None:  # padding cells are always at 0
            np.maximum(c, self.pads[rows], out=c)
        return c

    def locate(self, G: np.ndarray, wy: np.ndarray, seg: _Segments) -> int:
        """Move every parent to the segment its G falls in (writing `seg`);
        returns the number that moved. A block of parents at a time: the
        count compares contiguous rows of B, and its temporaries stay in
        cache instead of being faulted in afresh (at 10^8 cells a fresh
        parent-sized array costs more than the arithmetic on it)."""
        moved = 0
        for a in range(0, self.P, _BLOCK_COUNT):
            b = min(a + _BLOCK_COUNT, self.P)
            c = self.count(G[a:b], slice(a, b))
            moves = c != seg.c[a:b]
            if moves.all():  # (every parent, on the first round)
                rows: Any = slice(a, b)
                index = np.arange(a, b)
            else:
                index = rows = a + np.flatnonzero(moves)
                c = c[moves]
            if index.size:
                seg.c[rows] = c
                seg.alpha[rows], seg.beta[rows] = self.lines(c, index, wy[rows])
            moved += index.size
        return moved

    def lines(
        self, c: np.ndarray, rows: np.ndarray, wy: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(α, β) of the parents `rows` with c cells at 0: their total is
        α − β·Γ between their c-th and (c+1)-th breakpoints."""
        K, P = self.K, self.P
        first_free = np.minimum(c, K - 1)  # (when there is one)
        at = first_free.astype(np.intp)
        at *= P
        at += rows
        B = self.B.reshape(-1).take(at)
        if self.S is not None:
            S = self.S.reshape(-1).take(at)
        else:  # S_i = (p·ỹ_i − B_i)/p_v
            S = self.ys.reshape(-1).take(first_free + rows * K)
            S *= self.p
            S -= B
            S /= self.own
        beta = self.slopes.take(c)
        if self.rowless is not None:
            alone = np.flatnonzero(self.rowless[rows])
            beta[alone] = (K - c[alone]) / self.p
        alpha = np.add(B, wy, out=B)
        alpha *= beta
        alpha += S
        alpha[c == K] = 0.0
        return alpha, beta


class _Segments:
    """Every parent's segment: c cells at 0 and its total α − β·Γ there.
    Starts with none (every parent moves on the first `_Breakpoints.locate`)."""

    def __init__(self, P: int):
        self.c = np.full(P, 255, dtype=np.uint8)  # (K ≤ 64: no real count)
        self.alpha, self.beta = np.empty(P), np.empty(P)


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
    top = min(depth, max(tree._first, 0))
    total = np.zeros((1, *(ax.count[top] for ax in tree._axes), 1))
    for t in range(tree._first, depth):
        if t in parts:
            total = total + parts[t]
        shape = (1, *(ax.count[t + 1] for ax in tree._axes), 1)
        if out is not None and t == depth - 1:
            # the last, largest level straight into `out`: at 10^8 cells a
            # fresh array of the parents' size costs more than the arithmetic
            spread = out.reshape(shape)
            if base is None:
                spread.fill(0.0)
                tree._expand_into(spread, total, t)
            else:
                tree._expand_into(spread, total, t, base=base.reshape(shape))
            return out
        spread = np.zeros(shape)
        tree._expand_into(spread, total, t)
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
    for t in range(depth - 1, tree._first - 1, -1):
        totals = tree._reduce(totals, t)
        if terms[t] is not None:
            parts[t] = terms[t][1] * totals
    return _spread_down(tree, depth, parts, out, base)


def solve(tree: Hierarchy, y: np.ndarray, max_rounds: int = 50) -> TreeNNLS | None:
    """min_{x ≥ 0} ½‖A x − y‖² for the tree A (see the module), or None where
    the method does not apply (irregular parents, mixed leaf weights) or
    `max_rounds` parent solves did not settle every segment."""
    layout = _layout(tree)
    w_leaf = tree._leaf_weight()
    if layout is None or not w_leaf:
        return None
    n, P, K, t0 = tree.num_cells, layout.P, layout.K, tree.height - 1
    grid = (1, *layout.parts, 1)
    p = w_leaf * w_leaf
    terms = {t: tree._node_terms(y, t) for t in range(max(tree._first, 0), t0 + 1)}
    term = terms.get(t0)
    wy, own, rowless = np.zeros(P), 0.0, None
    if term is not None:
        wy, own = term[0].reshape(P), term[1]
        if isinstance(own, np.ndarray):  # 0 at single cells
            rowless = own.reshape(P) == 0
            own = float(own.max())
    own_rows = own if rowless is None else np.where(rowless, 0.0, own)
    # −Σ w_u·y_u over the parent and its ancestors: Γ − w_v·y_v = fitted + this
    below = _spread_down(tree, t0, {t: rows[0] for t, rows in terms.items() if rows})
    below += wy
    np.negative(below, out=below)
    leaves = y[:n]
    ys = layout.sorted_cells(leaves, 1.0 / w_leaf)
    breaks = _Breakpoints(ys, p, own, layout.pads, rowless)
    # Γ = 0 to start: every parent's cells as if the ancestors agreed with it
    G = -wy  # compared with B: G = Γ − w_v·y_v
    seg = _Segments(P)
    breaks.locate(G, wy, seg)
    rounds = 0
    totals = np.empty(grid)  # (reused: see `_spread_down`)
    while True:
        if rounds == max_rounds:
            return None
        rounds += 1
        totals = tree._solve_from(
            y,
            t0,
            seg.alpha.reshape(grid),
            seg.beta.reshape(grid),
            known=True,
            terms=terms,
            out=totals,
        )
        G = _fitted_above(tree, t0, terms, totals, out=G, base=below)
        if breaks.locate(G, wy, seg) == 0:
            break
    # (in place where it can: at 10^8 cells fresh parent-sized arrays cost
    # more than the arithmetic on them; the segments' lines are free now)
    price = np.multiply(totals.reshape(P), own_rows, out=seg.alpha)
    price += G  # Π_v
    tau = np.divide(price, p, out=seg.beta)
    x, true_totals = layout.cells(leaves, 1.0 / w_leaf, tau, ys)
    # The certificate: prices from the cells' true parent totals.
    if true_totals is None:
        true_totals = tree._reduce(x.reshape((1, *tree.domain_shape, 1)), t0).reshape(P)
    moved_price = _fitted_above(tree, t0, terms, true_totals.reshape(grid), out=G, base=below)
    true_totals *= own_rows
    moved_price += true_totals
    moved_price -= price  # Π_true − Π
    # every cell's p·ỹ lies in [p·ỹ_0, p·ỹ_{K−1}] of its parent
    lowest, highest = breaks.lowest, breaks.B[K - 1]
    eps = np.finfo(np.float64).eps
    largest = max(_magnitude(lowest), _magnitude(highest))
    bound = _magnitude(moved_price) + 8 * eps * (largest + p * _magnitude(tau))
    # ‖Aᵀy‖∞: a cell's entry is p·ỹ_c plus its ancestors' w_u·y_u, its parent's included
    scale = max(
        _magnitude(np.subtract(lowest, below, out=price)),
        _magnitude(np.subtract(highest, below, out=price)),
    )
    return TreeNNLS(x, rounds, bound, scale)


def _magnitude(v: np.ndarray) -> float:
    """max |v| (0 for an empty v) without the temporary of np.abs."""
    return max(float(v.max()), -float(v.min())) if v.size else 0.0
