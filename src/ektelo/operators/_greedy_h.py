"""GreedyH: a hierarchy of range queries weighted for the workload.

Public operator (paper §5.3, query selection): the strategy depends only on
the domain size and the workload, never on the data.

The algorithm is the workload-aware strategy selection of DAWA (Li, Hay &
Miklau, "A Data- and Workload-Aware Algorithm for Range Queries Under
Differential Privacy", PVLDB 7(5), 2014, §4). Its strategy is a b-ary tree of
interval queries over a 1-D domain in which node v carries a weight c_v, and
every root-to-leaf path has weights summing to 1 (so the L1 sensitivity is 1).
The weights are chosen greedily, bottom-up. For a node v over the cells S,
with children whose sub-strategies A_c are already fixed, v's sub-strategy is

    A_v = [ (1-p)·1ᵀ ; p·blockdiag(A_c) ],    p ∈ {1, (g-1)/g, …, 1/g},

and p is the grid value minimising a local error. With B = blockdiag(A_cᵀA_c),
u = B⁺1, k = 1ᵀu and m = ‖W_S u‖² (W_S: the workload's columns on S),
Sherman–Morrison gives the matrix-mechanism error of W_S exactly:

    E_v(p) = tr(W_S (A_vᵀA_v)⁺ W_Sᵀ)
           = ( Σ_c E_c − (1-p)²·m / (p² + (1-p)²·k) ) / p²,
    k_v(p) = 1ᵀ(A_vᵀA_v)⁺1 = k / (p² + (1-p)²·k),   u_v = u·k_v/k.

So each node needs three numbers from below (E, k, and u, which is its
children's u's rescaled by one scalar), and the workload enters only through
m = u_Sᵀ G_SS u_S with G = WᵀW. A node whose workload columns are all equal
(no query separates two of its cells) is answered best by its own total
alone: its subtree collapses to one query of weight 1 with error G_ii. The
E_v carried up are always exact, so the root's value is the exact error
tr(W (AᵀA)⁺ Wᵀ) of the returned strategy.

Minimising E_v itself at every node is short-sighted: a query that contains
v's whole parent needs from S only its total, which v's ancestors also
estimate, yet E_v charges it to v in full (ω·k_v). The local objectives tried:

* "canonical" (ours): E_v(p) − C_v·k_v(p), C_v the squared weight of the
  queries containing v's parent, which leaves each such query to the highest
  nodes inside it, as in the canonical range decomposition;
* "reference" (the heuristic of the DPBench/εktelo reference code, which we
  read to understand it): m replaced by m₁ + (m − m₁)·b^(−depth/2),
  m₁ = Σ_c u_cᵀ G_cc u_c, damping the cross-children part of m deeper in the
  tree; the damped values are also what it carries up as errors;
* "damped": the same damping, but exact errors carried up;
* "exact": E_v itself;
* "uniform": no search, every node of a complete tree weighted equally (H_b).

`greedy_h` runs all five, evaluates each weighting exactly, and returns the
one of least error: never worse than the plain hierarchy nor than the
reference heuristic on the same tree and grid. In our measurements
"canonical" usually wins, e.g. 0.07 vs 0.17 (reference) and 0.12 (H2) of the
Identity's error on Prefix(4096) (benchmarks/bench_strategies_opt.py).

Two implementations of the workload's part ("oracles") are used:

* range workloads (Prefix, Suffix, Identity, Total, 1-D `RangeQueries`,
  weighted and stacked), and such a workload reduced by a partition into
  intervals (`Partition.reduce_workload`, as DAWA does: its rows are ranges of
  buckets with fractional end buckets): m comes from prefix sums of u per
  tree level, so the whole selection costs O((n + q)·log n) time and
  O(n + q) memory for q queries — no n×n matrix is ever formed;
* any other workload with fewer rows than cells (q < n, e.g. DAWA's 2-D
  ranges reduced to its buckets): its rows R (q×n, dense; G = RᵀR is never
  formed). Each node carries its image R_S u_S (a q-vector) up the tree, a
  parent's being its children's summed and rescaled, so m = ‖R_S u_S‖² costs
  O(q) per node: O(q·n) per pass, O(q·n) memory;
* any other workload: the dense Gram matrix WᵀW (n×n), built in column blocks
  from `workload.gram()`.
Neither says which queries contain a node, so there C_v = 0 and "canonical"
is the exact local error E_v.

On small domains (n ≤ 256) such non-range workloads skip the oracles: their
dense Gram (from the ranges' ends when they are ranges wrapped in identity
products, as DAWA-Striped's reduced stripe workloads are) goes to one
bottom-up pass that runs H_b and the local objectives side by side
(`_best_fit_dense`, the choices of `_best_fit` with the Gram oracle), and
`greedy_h_many` batches such workloads of equal n into that one pass — a
striped plan (εktelo §9.2) calls GreedyH once per stripe, on tens of groups.

This module is 1-D only. Plans on 2-D data flatten the domain first (DAWA
uses the Hilbert order); `greedy_h` then sees a 1-D domain of n cells.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np

from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Ones,
    Partition,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Suffix,
    VStack,
    Weighted,
)

__all__ = ["greedy_h", "greedy_h_many"]

# Largest domain for which a general (non-range) workload's dense Gram matrix is
# formed: 8192² doubles are 512 MiB.
_MAX_GRAM_N = 8192
# Largest q·n for which a general workload with q < n rows is held as its dense
# rows instead (2^26 doubles are 512 MiB).
_MAX_ROWS_ENTRIES = 2**26
# Work arrays of at most this many entries when building a Gram in blocks.
_BLOCK_ENTRIES = 2**22
# Largest domain on which a general (non-range) workload goes through the dense
# Gram matrix with every weighting in one batched pass (`_best_fit_dense`):
# per tree level a few (lanes × n)·(n × n) products instead of per-node work
# and one pass per weighting. DAWA-Striped's stripes (εktelo §9.2) reduce to
# some tens of groups each and call GreedyH once per stripe.
_SMALL_N = 256
# Entries of the (workloads × n × n) work arrays of one batched dense pass.
_DENSE_BATCH_ENTRIES = 2**20


def greedy_h(
    n_or_shape: int | Sequence[int],
    workload: EMatrix,
    *,
    branching: int = 2,
    granularity: int = 100,
) -> EMatrix:
    """GreedyH (Li, Hay & Miklau, PVLDB 2014, §4): a weighted hierarchy for `workload`.

    The weights are chosen bottom-up, one split per node, by each of the local
    objectives of the module docstring; every resulting weighting is then
    evaluated exactly and the one of least expected error tr(W (AᵀA)⁺ Wᵀ) is
    returned (never worse than the equally weighted hierarchy).

    Args:
        n_or_shape: the domain size n, or a 1-D shape ``(n,)``. Multi-dimensional
            domains must be flattened by the plan first (DAWA: Hilbert order).
        workload: an n-column query matrix (public).
        branching: the tree's branching factor b ≥ 2 (DAWA uses 2).
        granularity: the number g of grid values tried for each node's split
            p ∈ {1, (g-1)/g, …, 1/g} (the reference code uses 100).

    Returns:
        ``Product(Diagonal(c), RangeQueries(n, lower, upper))``: the tree's
        interval queries (breadth-first, root first) with their weights c > 0.
        Every root-to-leaf path has weights summing to 1, so the L1
        sensitivity is 1 (up to rounding). Nodes given weight 0 are left out, and so is
        every node below a node the workload cannot see inside; the strategy
        always answers the workload (W lies in its row space) but need not
        determine every cell.
    """
    n = _domain_size(n_or_shape)
    if not isinstance(workload, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(workload).__name__}")
    if workload.shape[1] != n:
        raise ValueError(f"workload has {workload.shape[1]} columns; the domain has {n} cells")
    b = _positive_int(branching, "branching", minimum=2)
    g = _positive_int(granularity, "granularity", minimum=1)
    tree = _tree(n, b)
    gram = _small_gram(workload, n)
    if gram is not None:  # the weightings `_best_fit` would try, on the dense Gram
        fit = _best_fit_dense(n, b, gram[None], granularity=g)[0]
    else:
        fit = _best_fit(tree, _oracle_for(workload, n), granularity=g)
    return _strategy(tree, fit)


def greedy_h_many(
    problems: Sequence[tuple[int | Partition, EMatrix]],
    *,
    branching: int = 2,
    granularity: int = 100,
) -> list[EMatrix]:
    """`greedy_h(n, W)` for every (n, W) of `problems`: the same strategies,
    with the small general workloads of equal n (`_small_gram`) weighted in
    one batched pass (`_best_fit_dense`). For plans that run GreedyH once per
    piece of the domain, e.g. DAWA-Striped once per stripe (εktelo §9.2):
    most of a single call on a few tens of cells is per-call overhead.

    A problem (P, W) with a `Partition` P is W reduced by P, i.e.
    `greedy_h(P.num_groups, P.reduce_workload(W))` (DAWA's GreedyH on its
    buckets), without building P⁺ when P's groups are intervals in order.
    """
    b = _positive_int(branching, "branching", minimum=2)
    g = _positive_int(granularity, "granularity", minimum=1)
    out: list[EMatrix | None] = [None] * len(problems)
    batches: dict[int, list[tuple[int, tuple[np.ndarray, ...] | np.ndarray]]] = {}
    for i, (n_or_partition, workload) in enumerate(problems):
        if isinstance(n_or_partition, Partition):
            P = n_or_partition
            n, source = P.num_groups, _reduced_gram_source(workload, P)
            if source is None:
                workload = P.reduce_workload(workload)  # checks W's columns
        else:
            n, source = _domain_size(n_or_partition), None
        if source is None and isinstance(workload, EMatrix) and workload.shape[1] == n:
            source = _gram_source(workload, n)
        if source is None:  # the oracles (or greedy_h's error for a bad workload)
            out[i] = greedy_h(n, workload, branching=b, granularity=g)
        else:
            batches.setdefault(n, []).append((i, source))
    for n, items in batches.items():
        tree = _tree(n, b)
        step = max(1, _DENSE_BATCH_ENTRIES // (n * n))  # bounded (S × n × n) work arrays
        for lo in range(0, len(items), step):
            chunk = items[lo : lo + step]
            G = np.empty((len(chunk), n, n))
            ranged = [j for j, (_, src) in enumerate(chunk) if isinstance(src, tuple)]
            if ranged:
                G[ranged] = _range_grams(n, [chunk[j][1] for j in ranged])  # type: ignore[misc]
            for j, (_, src) in enumerate(chunk):
                if not isinstance(src, tuple):
                    G[j] = src
            fits = _best_fit_dense(n, b, G, granularity=g)
            for (i, _), (lower, upper, weights) in zip(
                chunk, _node_weights_many(tree, fits), strict=True
            ):
                out[i] = Product(Diagonal(weights), RangeQueries(n, lower, upper))
    return out  # type: ignore[return-value]  # every entry is set above


def _strategy(tree: _Tree, fit: _Fit) -> EMatrix:
    lower, upper, weights = _node_weights(tree, fit)
    return Product(Diagonal(weights), RangeQueries(tree.n, lower, upper))


def _domain_size(n_or_shape: int | Sequence[int]) -> int:
    if isinstance(n_or_shape, (int, np.integer)) and not isinstance(n_or_shape, bool):
        return _positive_int(n_or_shape, "n")
    shape = tuple(n_or_shape)
    if len(shape) != 1:
        raise ValueError(
            f"greedy_h works on a 1-D domain, got shape {shape}; flatten a multi-dimensional "
            "domain first (DAWA uses the Hilbert order) and pass its size"
        )
    return _positive_int(shape[0], "n")


def _positive_int(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}")
    return int(value)


# -- the tree ---------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    """The nodes at one depth, in left-to-right order (inclusive cell ranges)."""

    lower: np.ndarray
    upper: np.ndarray
    child_start: np.ndarray  # index of the first child in the next level
    child_count: np.ndarray  # 0 for a leaf (a single cell)
    height: np.ndarray  # edges on the longest path down to a leaf

    @property
    def size(self) -> np.ndarray:
        return self.upper - self.lower + 1


@dataclass(frozen=True)
class _Tree:
    """DAWA's b-ary tree: a node of s > b cells splits into b - (s mod b)
    children of ⌊s/b⌋ cells followed by (s mod b) children of ⌊s/b⌋ + 1;
    a node of 2..b cells splits into single cells."""

    n: int
    levels: tuple[_Level, ...]

    @staticmethod
    def build(n: int, b: int) -> _Tree:
        lower = np.zeros(1, dtype=np.int64)
        upper = np.full(1, n - 1, dtype=np.int64)
        raw: list[tuple[np.ndarray, ...]] = []
        while True:
            size = upper - lower + 1
            count = np.where(size > 1, np.minimum(size, b), 0)
            start = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
            raw.append((lower, upper, start, count))
            if not count.any():
                break
            parent = np.repeat(np.arange(size.size), count)
            rank = np.arange(parent.size) - start[parent]  # child's index within its parent
            ps = size[parent]
            step, rem = ps // b, ps % b
            child_size = np.where(ps <= b, 1, step + (rank >= b - rem))
            offset = np.cumsum(child_size) - child_size  # exclusive running sum
            first_offset = offset[start[count > 0]]
            lower = lower[parent] + offset - np.repeat(first_offset, count[count > 0])
            upper = lower + child_size - 1
        levels: list[_Level] = []
        below = np.zeros(0, dtype=np.int64)
        for lo, hi, start, count in reversed(raw):
            height = np.zeros(lo.size, dtype=np.int64)
            internal = count > 0
            if internal.any():
                height[internal] = 1 + np.maximum.reduceat(below, start[internal])
            levels.append(_Level(lo, hi, start, count, height))
            below = height
        return _Tree(n, tuple(reversed(levels)))


@lru_cache(maxsize=64)
def _tree(n: int, b: int) -> _Tree:
    """`_Tree.build(n, b)`, memoised with read-only arrays: the tree depends on
    n and b only, and a striped plan builds one per stripe (DAWA-Striped's
    stripes have a few tens of distinct group counts)."""
    tree = _Tree.build(n, b)
    for lv in tree.levels:
        for arr in (lv.lower, lv.upper, lv.child_start, lv.child_count, lv.height):
            arr.setflags(write=False)
    return tree


# -- the workload's part: oracles ---------------------------------------------


class _Oracle(Protocol):
    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        """G_ii for each cell i: the error of a cell (or a collapsed node) measured alone."""

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Whether all workload columns in each range are equal."""

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Squared weight of the queries containing each (disjoint, sorted) range."""

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        """u_Sᵀ G_SS u_S for each (disjoint, sorted) range S; u is a cell vector."""


class _RangeOracle:
    """G = Σ_q ω_q r_q r_qᵀ for rows r_q that are 1 on [A_q, B_q] except the end
    values r_q[A_q] = fa_q and r_q[B_q] = fb_q (fa_q alone when A_q = B_q).

    Plain ranges have fa = fb = 1; a range workload reduced by a partition into
    intervals (DAWA: W·P⁺) has the covered fractions of its end buckets there.
    """

    def __init__(
        self,
        n: int,
        a: np.ndarray,
        b: np.ndarray,
        w2: np.ndarray,
        fa: np.ndarray | None = None,
        fb: np.ndarray | None = None,
    ):
        keep = w2 != 0
        self.n, self.a, self.b, self.w2 = n, a[keep], b[keep], w2[keep]
        one = np.ones(self.a.size)
        fa = one if fa is None else np.asarray(fa, dtype=np.float64)[keep]
        fb = one if fb is None else np.asarray(fb, dtype=np.float64)[keep]
        single = self.a == self.b
        # r = 1_[A,B] + da·e_A + db·e_B.
        self.da = fa - 1.0
        self.db = np.where(single, 0.0, fb - 1.0)
        # The longest interval on which the row is 1 (empty when A' > B').
        self.inner_a = self.a + (self.da != 0)
        self.inner_b = np.where(single, self.a - (self.da != 0), self.b - (self.db != 0))
        w, k = self.w2, n + 1
        diff = np.bincount(self.a, w, k) - np.bincount(self.b + 1, w, k)
        diff += np.bincount(self.a, w * ((1 + self.da) ** 2 - 1), k)
        diff -= np.bincount(self.a + 1, w * ((1 + self.da) ** 2 - 1), k)
        diff += np.bincount(self.b, w * ((1 + self.db) ** 2 - 1), k)
        diff -= np.bincount(self.b + 1, w * ((1 + self.db) ** 2 - 1), k)
        self.coverage = np.maximum(np.cumsum(diff[:n]), 0.0)  # G_ii ≥ 0 despite rounding
        # cut[j] = 1 when some row may differ between cells j-1 and j.
        cut = np.zeros(n + 2, dtype=np.int64)
        cut[self.a] = 1
        cut[self.b + 1] = 1
        cut[(self.a + 1)[self.da != 0]] = 1
        cut[self.b[self.db != 0]] = 1
        cut[0] = 0
        self.cuts = np.cumsum(cut[: n + 1])

    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        return self.coverage[cells]

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return self.cuts[upper] == self.cuts[lower]

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        # Rows equal to 1 on the consecutive ranges first..last: a difference array.
        first = np.searchsorted(lower, self.inner_a, side="left")
        last = np.searchsorted(upper, self.inner_b, side="right") - 1
        ok = first <= last
        k = lower.size + 1
        diff = np.bincount(first[ok], self.w2[ok], k) - np.bincount(last[ok] + 1, self.w2[ok], k)
        return np.cumsum(diff[:-1])

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        # Per range S: Σ_q ω_q (r_q·u_S)². A row equal to 1 on all of S adds
        # ω_q·(1ᵀu_S)². Any other row meeting S has A_q or B_q inside S (it is 1
        # strictly between them), so it meets at most two ranges of the level
        # otherwise: those are summed one by one.
        csum = np.concatenate(([0.0], np.cumsum(u)))
        total = csum[upper + 1] - csum[lower]
        out = self.covering(lower, upper) * total**2
        a, b, w2 = self.a, self.b, self.w2
        seen = np.full(a.size, -1)
        for end in (a, b):
            node = np.searchsorted(lower, end, side="right") - 1
            ok = node >= 0
            node_c = np.where(ok, node, 0)
            lo, hi = lower[node_c], upper[node_c]
            inside = (self.inner_a <= lo) & (hi <= self.inner_b)
            ok &= (hi >= end) & (node != seen) & ~inside
            lo, hi = lo[ok], hi[ok]
            qa, qb = a[ok], b[ok]
            part = csum[np.minimum(qb, hi) + 1] - csum[np.maximum(qa, lo)]
            part += np.where((lo <= qa) & (qa <= hi), self.da[ok] * u[qa], 0.0)
            part += np.where((lo <= qb) & (qb <= hi), self.db[ok] * u[qb], 0.0)
            out += np.bincount(node_c[ok], weights=w2[ok] * part**2, minlength=lower.size)
            seen = np.where(ok, node, seen)
        return out


class _GramOracle:
    """Any workload, through its dense Gram matrix G = WᵀW (n×n)."""

    def __init__(self, gram: np.ndarray):
        self.G = gram
        self.tol = 1e-9 * max(1.0, float(np.abs(np.diag(gram)).max()))

    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        return np.diag(self.G)[cells]

    def _blocks(
        self, lower: np.ndarray, upper: np.ndarray
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield (indices into lower, stacked diagonal blocks G_SS) by block size."""
        size = upper - lower + 1
        for s in np.unique(size):
            idx = np.nonzero(size == s)[0]
            if idx.size * s * s <= _BLOCK_ENTRIES:
                cells = lower[idx, None] + np.arange(s)
                yield idx, self.G[cells[:, :, None], cells[:, None, :]]
            else:
                for i in idx:
                    lo = int(lower[i])
                    yield np.array([i]), self.G[None, lo : lo + s, lo : lo + s]

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        out = np.zeros(lower.size, dtype=bool)
        for idx, blocks in self._blocks(lower, upper):
            spread = np.abs(blocks - blocks[:, :1, :1]).max(axis=(1, 2))
            out[idx] = spread <= self.tol
        return out

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        # G alone does not identify the queries containing a range.
        return np.zeros(lower.size)

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        out = np.zeros(lower.size)
        for idx, blocks in self._blocks(lower, upper):
            s = blocks.shape[1]
            us = u[lower[idx, None] + np.arange(s)]
            out[idx] = np.einsum("ki,kij,kj->k", us, blocks, us)
        return out


class _RowsOracle:
    """Any workload through its dense rows R (q×n): G = RᵀR is never formed.

    Held as Rᵀ (n×q, a cell's column contiguous). `_greedy_pass` computes m
    from the nodes' images R_S u_S (`columns`); `quadratic` is the direct
    O(q·|S|) form of the same quantity.
    """

    def __init__(self, rows: np.ndarray):
        self.Rt = np.ascontiguousarray(np.asarray(rows, dtype=np.float64).T)
        self.colsq = np.einsum("ij,ij->i", self.Rt, self.Rt)
        big = max(float(self.Rt.max(initial=0.0)), -float(self.Rt.min(initial=0.0)))
        self.tol = 1e-9 * max(1.0, big)
        # cut[j] = 1 when column j differs from column j-1 (as in _RangeOracle)
        n = self.Rt.shape[0]
        cut = np.zeros(n + 1, dtype=np.int64)
        step = max(1, _BLOCK_ENTRIES // max(1, self.Rt.shape[1]))
        for j in range(1, n, step):
            e = min(n, j + step)
            diff = np.abs(self.Rt[j:e] - self.Rt[j - 1 : e - 1]).max(axis=1, initial=0.0)
            cut[j:e] = diff > self.tol
        self.cuts = np.cumsum(cut[:n])
        self._memo: dict[bytes, np.ndarray] = {}

    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        return self.colsq[cells]

    def columns(self, cells: np.ndarray) -> np.ndarray:
        """R's columns at `cells`, one per row (len(cells) × q, read-only);
        memoised, as every pass over the tree asks for the same leaves."""
        key = cells.tobytes()
        got = self._memo.get(key)
        if got is None:
            got = self.Rt[cells]
            got.setflags(write=False)
            self._memo[key] = got
        return got

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return self.cuts[upper] == self.cuts[lower]

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return np.zeros(lower.size)

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        out = np.empty(lower.size)
        for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)):
            v = u[lo : hi + 1] @ self.Rt[lo : hi + 1]
            out[i] = v @ v
        return out


def _range_form(W: EMatrix, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(lower, upper, squared weight) per row when W's rows are weighted 1-D intervals."""
    if isinstance(W, Prefix):
        return np.zeros(n, dtype=np.int64), np.arange(n), np.ones(n)
    if isinstance(W, Suffix):
        return np.arange(n), np.full(n, n - 1, dtype=np.int64), np.ones(n)
    if isinstance(W, Identity):
        return np.arange(n), np.arange(n), np.ones(n)
    if isinstance(W, Ones):  # includes Total; m equal rows weigh m
        return np.zeros(1, dtype=np.int64), np.full(1, n - 1), np.full(1, float(W.shape[0]))
    if isinstance(W, RangeQueries):
        if W.transposed or len(W.domain_shape) != 1:
            return None
        return W.lower[:, 0], W.upper[:, 0], np.ones(W.num_queries)
    if isinstance(W, Weighted):
        inner = _range_form(W.base, n)
        return None if inner is None else (inner[0], inner[1], inner[2] * W.weight**2)
    if isinstance(W, Product) and isinstance(W.A, Diagonal):
        inner = _range_form(W.B, n)
        return None if inner is None else (inner[0], inner[1], inner[2] * W.A.d**2)
    if isinstance(W, VStack):
        parts = [_range_form(block, n) for block in W.blocks]
        found = [p for p in parts if p is not None]
        if len(found) < len(parts):
            return None
        return (
            np.concatenate([p[0] for p in found]),
            np.concatenate([p[1] for p in found]),
            np.concatenate([p[2] for p in found]),
        )
    return None


def _dense_gram(W: EMatrix, n: int) -> np.ndarray:
    """WᵀW as a dense n×n array, built in column blocks of bounded size."""
    if n > _MAX_GRAM_N:
        raise ValueError(
            f"greedy_h needs the dense {n}×{n} Gram matrix of this workload, which is too "
            f"large (limit n = {_MAX_GRAM_N}); range workloads (Prefix, RangeQueries, ...) "
            "avoid it"
        )
    G_op = W.gram()
    block = max(1, _BLOCK_ENTRIES // max(W.shape[0], n))
    G = np.empty((n, n))
    for j in range(0, n, block):
        cols = np.zeros((n, min(block, n - j)))
        cols[np.arange(j, j + cols.shape[1]), np.arange(cols.shape[1])] = 1.0
        G[:, j : j + cols.shape[1]] = G_op.matmat(cols)
    return (G + G.T) / 2


def _small_gram(W: EMatrix, n: int) -> np.ndarray | None:
    """WᵀW (n×n, symmetric) when GreedyH takes the dense path: a domain of at
    most `_SMALL_N` cells and a workload outside the range forms, which keep
    `_RangeOracle` and its "canonical" objective; None otherwise.

    Ranges that are only wrapped in identity products (DAWA-Striped's stripe
    workloads, reduced by a partition into intervals: `Partition.reduce_workload`)
    get their Gram from the ranges' ends (`_range_grams`); any other workload
    through `_dense_gram`, as `_GramOracle` would.
    """
    source = _gram_source(W, n)
    return _range_grams(n, [source])[0] if isinstance(source, tuple) else source


def _gram_source(W: EMatrix, n: int) -> tuple[np.ndarray, ...] | np.ndarray | None:
    """`_small_gram`'s work up to the Gram: None (not the dense path), the
    `_RangeOracle` terms (A, B, ω, fa, fb) of wrapped ranges (fa, fb None for
    plain ones), or any other workload's dense Gram."""
    if n > _SMALL_N or _range_form(W, n) is not None or _reduced_range_form(W, n) is not None:
        return None
    bare = _without_identities(W)
    form = _range_form(bare, n)
    if form is not None:
        return (*form, None, None)
    form = _reduced_range_form(bare, n)
    return form if form is not None else _dense_gram(W, n)


def _reduced_gram_source(W: EMatrix, P: Partition) -> tuple[np.ndarray, ...] | None:
    """`_gram_source(P.reduce_workload(W), P.num_groups)` for ranges wrapped in
    identity products and a partition of a 1-D domain into intervals in order:
    the reduced ranges from P's group sizes; None for anything else (the
    caller then reduces W and asks `_gram_source`)."""
    if not isinstance(W, EMatrix) or len(P.domain_shape) != 1 or W.shape[1] != P.size:
        return None
    k, n = P.num_groups, P.size
    if k > _SMALL_N or _range_form(W, n) is not None:  # a range form keeps the oracles
        return None
    form = _range_form(_without_identities(W), n)
    if form is None or np.any(np.diff(P.groups) < 0):  # labels in order: intervals
        return None
    return _reduce_form(form, np.concatenate(([0], np.cumsum(P.sizes))))


def _without_identities(W: EMatrix) -> EMatrix:
    """W with the identity factors of its products left out (the same matrix)."""
    if not isinstance(W, Product):
        return W
    A, B = _without_identities(W.A), _without_identities(W.B)
    if isinstance(A, Identity):
        return B
    if isinstance(B, Identity):
        return A
    return W if A is W.A and B is W.B else Product(A, B)


def _range_grams(n: int, forms: Sequence[tuple[np.ndarray, ...]]) -> np.ndarray:
    """G = Σ_q ω_q r_q r_qᵀ for each of `forms`, `_RangeOracle`'s rows r_q
    given as (A, B, ω, fa, fb) (1 on [A_q, B_q], with the end values fa_q and
    fb_q when those are not None): a stack (len(forms) × n × n, symmetric), in
    O(q + n²) per form without the q×n rows.

    r_q = s_q + t_q with s_q = 1_[A,B] and t_q = da·e_A + db·e_B. The s-part
    Σ ω s sᵀ at (i, j), i ≤ j, is the weight of the ranges with A ≤ i and
    B ≥ j (a 2-D cumulative sum of the (A, B) histogram); Σ ω s tᵀ puts ω·da
    on column A and ω·db on column B over the rows A..B (a difference array
    down each column); Σ ω t tᵀ touches (A, A), (A, B), (B, A), (B, B) only.
    The forms share each NumPy call (histograms offset by form): a form's
    Gram does not depend on the others'.
    """
    S, nn = len(forms), n * n
    count = [f[0].size for f in forms]
    form_of = np.repeat(np.arange(S), count)
    a = np.concatenate([f[0] for f in forms]).astype(np.int64)
    b = np.concatenate([f[1] for f in forms]).astype(np.int64)
    w2 = np.concatenate([f[2] for f in forms]).astype(np.float64)
    at = form_of * nn
    hist = np.bincount(at + a * n + b, w2, S * nn).reshape(S, n, n)  # A ≤ B
    C = np.cumsum(np.cumsum(hist, axis=1)[:, :, ::-1], axis=2)[:, :, ::-1]  # A ≤ i, B ≥ j
    G = np.triu(C)
    G += np.triu(C, 1).transpose(0, 2, 1)
    if any(f[3] is not None for f in forms):
        one = [np.ones(c) for c in count]
        fa = np.concatenate([one[i] if f[3] is None else f[3] for i, f in enumerate(forms)])
        fb = np.concatenate([one[i] if f[4] is None else f[4] for i, f in enumerate(forms)])
        da = fa - 1.0
        db = np.where(a == b, 0.0, fb - 1.0)
        # Σ ω s tᵀ: column A += ω·da and column B += ω·db on rows A..B
        steps_at, size = form_of * ((n + 1) * n), S * (n + 1) * n
        steps = np.bincount(steps_at + a * n + a, w2 * da, size)
        steps -= np.bincount(steps_at + (b + 1) * n + a, w2 * da, size)
        steps += np.bincount(steps_at + a * n + b, w2 * db, size)
        steps -= np.bincount(steps_at + (b + 1) * n + b, w2 * db, size)
        st = np.cumsum(steps.reshape(S, n + 1, n), axis=1)[:, :n]
        G += st + st.transpose(0, 2, 1)
        # Σ ω t tᵀ
        G += np.bincount(at + a * n + a, w2 * da * da, S * nn).reshape(S, n, n)
        G += np.bincount(at + b * n + b, w2 * db * db, S * nn).reshape(S, n, n)
        cross = np.bincount(at + a * n + b, w2 * da * db, S * nn).reshape(S, n, n)
        G += cross + cross.transpose(0, 2, 1)
    return (G + G.transpose(0, 2, 1)) / 2


def _interval_expansion(E: EMatrix, k: int) -> np.ndarray | None:
    """For a partition's expand matrix P⁺ (n × k, entry 1/|g| at (cell, group g))
    whose groups are consecutive intervals in order: the first cell of every
    group plus n (length k + 1); otherwise None."""
    if not isinstance(E, Sparse) or E.shape[1] != k:
        return None
    S = E.matrix
    if np.any(np.diff(S.indptr) != 1):
        return None
    group = S.indices
    if group[0] != 0 or np.any(np.diff(group) < 0) or np.any(np.diff(group) > 1):
        return None
    if group[-1] != k - 1:
        return None
    starts = np.concatenate((np.searchsorted(group, np.arange(k)), [group.size]))
    expected = 1.0 / np.diff(starts)[group]
    if not np.all(np.abs(S.data - expected) <= 1e-12 * expected):  # np.allclose, cheaper
        return None
    return starts


def _reduced_range_form(W: EMatrix, n: int) -> tuple[np.ndarray, ...] | None:
    """W = R·P⁺ for a range workload R and an interval partition (DAWA's reduced
    workload): per row (A, B, ω, fa, fb) in `_RangeOracle`'s terms."""
    if not isinstance(W, Product):
        return None
    form = _range_form(W.A, W.A.shape[1])  # the cheaper test first
    if form is None:
        return None
    starts = _interval_expansion(W.B, n)
    if starts is None:
        return None
    return _reduce_form(form, starts)


def _reduce_form(form: tuple[np.ndarray, ...], starts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Ranges (A, B, ω) over cells, reduced by the interval partition whose
    groups start at `starts` (plus the cell count): (A, B, ω, fa, fb) over groups."""
    a, b, w2 = form
    group_a = np.searchsorted(starts, a, side="right") - 1
    group_b = np.searchsorted(starts, b, side="right") - 1
    size = np.diff(starts).astype(np.float64)
    fa = np.where(
        group_a == group_b,
        (b - a + 1) / size[group_a],
        (starts[group_a + 1] - a) / size[group_a],
    )
    fb = (b - starts[group_b] + 1) / size[group_b]
    return group_a, group_b, w2, fa, fb


def _oracle_for(W: EMatrix, n: int) -> _Oracle:
    form = _range_form(W, n)
    if form is not None:
        return _RangeOracle(n, *form)
    reduced = _reduced_range_form(W, n)
    if reduced is not None:
        return _RangeOracle(n, *reduced)
    q = W.shape[0]
    if q < n and q * n <= _MAX_ROWS_ENTRIES:
        return _RowsOracle(_dense_rows(W))
    return _GramOracle(_dense_gram(W, n))


def _dense_rows(W: EMatrix) -> np.ndarray:
    """W as a dense q×n array: its own array when Dense, else Wᵀ on blocks of unit rows."""
    if isinstance(W, Dense):
        return W.array
    q, n = W.shape
    block = max(1, min(256, _BLOCK_ENTRIES // max(q, n)))
    R = np.empty((q, n))
    for j in range(0, q, block):
        rows = np.zeros((q, min(block, q - j)))
        rows[np.arange(j, j + rows.shape[1]), np.arange(rows.shape[1])] = 1.0
        R[j : j + rows.shape[1]] = W.T.matmat(rows).T
    return R


# -- the greedy pass and the weights -------------------------------------------


@dataclass(frozen=True)
class _Fit:
    split: tuple[np.ndarray, ...]  # p per node (0 where `stop`)
    stop: tuple[np.ndarray, ...]  # leaf or collapsed: the node's total alone
    error: tuple[np.ndarray, ...]  # E_v per node
    root_error: float  # tr(W (AᵀA)⁺ Wᵀ) for the whole strategy (sensitivity 1)


def _cells(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The cells of disjoint ranges, concatenated in order."""
    size = upper - lower + 1
    offset = np.cumsum(size) - size
    return np.repeat(lower - offset, size) + np.arange(int(size.sum()))


_LOCAL_OBJECTIVES = ("canonical", "damped", "reference", "exact")


def _greedy_pass(
    tree: _Tree,
    oracle: _Oracle,
    *,
    granularity: int = 100,
    local: str = "canonical",
    fixed: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> _Fit:
    """Bottom-up over the levels; the errors carried up are exact.

    Search mode (`fixed` None): each node's split p is the grid value
    minimising the `local` objective ("canonical", "damped", "reference", or
    "exact": E_v itself; module docstring), and a node the
    workload cannot see inside collapses. Evaluation mode (`fixed` = (split,
    stop) per level): the exact error of that weighting, e.g. H_b's.
    """
    if local not in ("canonical", "damped", "reference", "exact"):
        raise ValueError(f"unknown local objective {local!r}")
    grid = (granularity - np.arange(granularity)) / granularity  # 1, …, 1/g
    branching = max(int(lv.child_count.max()) for lv in tree.levels)
    u = np.ones(tree.n)  # per cell: the u-vector of the deepest finished node
    rows = isinstance(oracle, _RowsOracle)  # m from the nodes' images R_S u_S
    splits: list[np.ndarray] = []
    stops: list[np.ndarray] = []
    errors: list[np.ndarray] = []
    child_error = child_k = child_q = np.zeros(0)
    child_img = np.zeros((0, 0))  # per node of the level below: R_S u_S (a row each)
    for depth in range(len(tree.levels) - 1, -1, -1):
        lv = tree.levels[depth]
        internal = lv.child_count > 0
        diag = oracle.diagonal(lv.lower)
        if rows:  # a leaf's image is its column (u = 1 there)
            leaf = ~internal
            if leaf.all():
                img = oracle.columns(lv.lower)
            else:
                img = np.empty((lv.lower.size, child_img.shape[1]))
                img[leaf] = oracle.columns(lv.lower[leaf])
        error = diag.copy()
        k = np.ones(lv.lower.size)
        q_self = diag.copy()  # u_vᵀ G_SS u_v
        split = np.zeros(lv.lower.size)
        stop = ~internal
        if internal.any():
            lo, hi = lv.lower[internal], lv.upper[internal]
            start = lv.child_start[internal]
            sum_error = np.add.reduceat(child_error, start)
            sum_k = np.add.reduceat(child_k, start)
            if rows:
                img_sum = _sum_children(child_img, start, lv.child_count[internal])
                m = np.einsum("ij,ij->i", img_sum, img_sum)
            else:
                m = oracle.quadratic(lo, hi, u)
            if fixed is None:
                m_search, c_parent = m, np.zeros(lo.size)
                if local in ("damped", "reference"):
                    m1 = np.add.reduceat(child_q, start)
                    m_search = m1 + (m - m1) * branching ** (-depth / 2.0)
                elif local == "canonical" and depth > 0:
                    par = tree.levels[depth - 1]
                    parent = np.repeat(np.arange(par.lower.size), par.child_count)
                    c_parent = oracle.covering(par.lower, par.upper)[parent][internal]
                p = grid[None, :]
                denom = p**2 + (1.0 - p) ** 2 * sum_k[:, None]
                search = (
                    sum_error[:, None] - (1.0 - p) ** 2 * m_search[:, None] / denom
                ) / p**2 - c_parent[:, None] * sum_k[:, None] / denom
                best = np.argmin(search, axis=1)
                p_v = grid[best]
                q_v = (1.0 - p_v) ** 2
                if local == "reference":
                    e_v = search[np.arange(best.size), best]
                else:
                    e_v = (sum_error - q_v * m / (p_v**2 + q_v * sum_k)) / p_v**2
                flat = oracle.uniform(lo, hi)
            else:
                flat = np.asarray(fixed[1][depth], dtype=bool)[internal]
                p_v = np.where(flat, 1.0, np.asarray(fixed[0][depth], dtype=np.float64)[internal])
                q_v = (1.0 - p_v) ** 2
                e_v = (sum_error - q_v * m / (p_v**2 + q_v * sum_k)) / p_v**2
            scale = 1.0 / (p_v**2 + (1.0 - p_v) ** 2 * sum_k)
            u[_cells(lo, hi)] *= np.repeat(scale, hi - lo + 1)
            if flat.any():
                flo, fhi = lo[flat], hi[flat]
                u[_cells(flo, fhi)] = np.repeat(1.0 / (fhi - flo + 1), fhi - flo + 1)
            if rows:  # R_S u_S after the rescaling; a flat node's columns are all equal
                img_sum *= scale[:, None]
                if internal.all():
                    img = img_sum
                else:
                    img[internal] = img_sum
                img[np.flatnonzero(internal)[flat]] = oracle.columns(lo[flat])
            error[internal] = np.where(flat, diag[internal], e_v)
            k[internal] = np.where(flat, 1.0, sum_k * scale)
            q_self[internal] = np.where(flat, diag[internal], scale**2 * m)
            split[internal] = np.where(flat, 0.0, p_v)
            stop[internal] = flat
        splits.append(split)
        stops.append(stop)
        errors.append(error)
        child_error, child_k, child_q = error, k, q_self
        if rows:
            child_img = img
    if local == "reference" and fixed is None:  # the carried errors were damped
        return _greedy_pass(tree, oracle, fixed=(splits[::-1], stops[::-1]))
    return _Fit(
        tuple(reversed(splits)),
        tuple(reversed(stops)),
        tuple(reversed(errors)),
        float(errors[-1][0]),
    )


def _sum_children(child: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Row sums of the consecutive blocks child[start_i : start_i + count_i],
    which tile `child`: strided slices when every block has the same size."""
    c = int(count[0])
    if c > 1 and np.all(count == c) and child.shape[0] == c * count.size:
        out = np.add(child[0::c], child[1::c])
        for j in range(2, c):
            out += child[j::c]
        return out
    return np.add.reduceat(child, start, axis=0)


def _uniform_fit(tree: _Tree, oracle: _Oracle) -> _Fit:
    """H_b: p_v = h_v/(h_v + 1) gives every node of a complete tree the same
    weight 1/(height + 1) (ragged trees: still sensitivity 1), nothing collapsed."""
    split = [lv.height / (lv.height + 1.0) for lv in tree.levels]
    stop = [lv.child_count == 0 for lv in tree.levels]
    return _greedy_pass(tree, oracle, fixed=(split, stop))


def _best_fit(tree: _Tree, oracle: _Oracle, *, granularity: int = 100) -> _Fit:
    """The weighting of least exact error among the local objectives and H_b."""
    best = _uniform_fit(tree, oracle)
    for local in _LOCAL_OBJECTIVES:
        if local == "canonical" and isinstance(oracle, (_GramOracle, _RowsOracle)):
            continue  # C_v = 0 there: the same as "exact"
        fit = _greedy_pass(tree, oracle, granularity=granularity, local=local)
        if fit.root_error < best.root_error:
            best = fit
    return best


@dataclass(frozen=True)
class _DenseLevel:
    """One tree level's public index arrays for `_best_fit_dense` (internal nodes only)."""

    depth: int
    internal: np.ndarray  # indices of the level's internal nodes
    leaves: np.ndarray  # indices of its leaves
    leaf_cells: np.ndarray  # the leaves' cells
    start: np.ndarray  # per internal node: its first child in the level below
    cells: np.ndarray  # the internal nodes' cells, in order
    offsets: np.ndarray  # per internal node: the position of its first cell in `cells`
    node_of_cell: np.ndarray  # per entry of `cells`: its internal node
    corner: np.ndarray  # per entry of `cells`: its node's first cell
    label: np.ndarray  # per domain cell: its internal node, or a distinct negative label
    uniform_split: np.ndarray  # H_b's split h/(h + 1) per internal node


@lru_cache(maxsize=64)
def _dense_levels(n: int, b: int) -> tuple[_DenseLevel, ...]:
    """`_tree(n, b)`'s levels with internal nodes, bottom-up, as `_DenseLevel`s
    (public: they depend on n and b only; memoised with the tree)."""
    tree = _tree(n, b)
    out = []
    for depth in range(len(tree.levels) - 1, -1, -1):
        lv = tree.levels[depth]
        internal = np.flatnonzero(lv.child_count > 0)
        if not internal.size:
            continue
        lo, hi = lv.lower[internal], lv.upper[internal]
        size = hi - lo + 1
        cells = _cells(lo, hi)
        node_of_cell = np.repeat(np.arange(lo.size), size)
        label = -1 - np.arange(n)
        label[cells] = node_of_cell
        height = lv.height[internal]
        level = _DenseLevel(
            depth=depth,
            internal=internal,
            leaves=np.flatnonzero(lv.child_count == 0),
            leaf_cells=lv.lower[lv.child_count == 0],
            start=lv.child_start[internal],
            cells=cells,
            offsets=np.cumsum(size) - size,
            node_of_cell=node_of_cell,
            corner=lo[node_of_cell],
            label=label,
            uniform_split=height / (height + 1.0),
        )
        for arr in vars(level).values():
            if isinstance(arr, np.ndarray):
                arr.setflags(write=False)
        out.append(level)
    return tuple(out)


def _best_fit_dense(n: int, b: int, G: np.ndarray, *, granularity: int = 100) -> _Fits:
    """`_best_fit` on `_tree(n, b)` for general workloads on a small domain, from
    their dense Grams G (a stack, S × n × n): their fits, stacked (`_Fits`).

    The weightings `_best_fit` compares for a `_GramOracle` — H_b, then the
    local objectives "damped", "reference" and "exact" ("canonical" is "exact"
    there) — with `_greedy_pass`'s formulas, run side by side as "lanes" of
    (S × 4 × nodes) arrays in one bottom-up pass; per workload the first of
    least exact error wins, as there. Per level, every internal node's
    m = u_Sᵀ G_SS u_S is, for all lanes at once, (U·G_L ∘ U) summed over the
    node's cells, G_L = G on the level's node blocks (zero elsewhere). The
    "reference" lane carries its damped errors (what its search compares) and,
    beside them, the exact errors of the same weighting, which `_greedy_pass`
    gets from a second, evaluating pass (u and k do not depend on the errors).
    """
    tree, lanes = _tree(n, b), 4  # lanes: uniform, damped, reference, exact (`_best_fit`'s order)
    S = G.shape[0]
    grid = (granularity - np.arange(granularity)) / granularity  # 1, …, 1/g
    grid2, cogrid2 = grid**2, (1.0 - grid) ** 2
    branching = max(int(lv.child_count.max()) for lv in tree.levels)
    gdiag = G[:, np.arange(n), np.arange(n)]
    tol = 1e-9 * np.maximum(1.0, np.abs(gdiag).max(axis=1))  # `_GramOracle`'s tolerance
    U = np.ones((S, lanes, n))  # per lane and cell: u of the deepest finished node
    # per node of the level below, stacked: error carried (damped for "reference"),
    # exact error, k = 1ᵀ(AᵀA)⁺1 and q = u_Sᵀ G_SS u_S
    child = np.empty((4, S, lanes, tree.levels[-1].lower.size))
    child[:] = gdiag[:, None, tree.levels[-1].lower]
    child[2] = 1.0
    chosen: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # depth → (p per lane, collapsed)
    exact_by_depth: dict[int, np.ndarray] = {len(tree.levels) - 1: child[1]}
    for lv in _dense_levels(n, b):
        sum_err, sum_exact, sum_k, sum_q = np.add.reduceat(child, lv.start, axis=3)
        block = lv.label[lv.cells, None] == lv.label[None, :]  # the nodes' rows of G_L
        rows = G[:, lv.cells]
        Uc = U[:, :, lv.cells]
        m = np.add.reduceat(
            np.matmul(U, np.where(block, rows, 0.0).transpose(0, 2, 1)) * Uc, lv.offsets, axis=2
        )
        # search lanes (damped, reference, exact): the split minimising the local objective
        m_search = m[:, 1:].copy()
        m1 = sum_q[:, 1:3]  # damped: m₁ + (m − m₁)·b^(−depth/2), m₁ = Σ_c u_cᵀ G_cc u_c
        m_search[:, :2] = m1 + (m[:, 1:3] - m1) * branching ** (-lv.depth / 2.0)
        denom = grid2 + cogrid2 * sum_k[:, 1:, :, None]
        search = (sum_err[:, 1:, :, None] - cogrid2 * m_search[..., None] / denom) / grid2
        best = np.argmin(search, axis=3)
        p_v = np.empty_like(m)
        p_v[:, 0] = lv.uniform_split
        p_v[:, 1:] = grid[best]
        q_v = (1.0 - p_v) ** 2
        scale = 1.0 / (p_v**2 + q_v * sum_k)
        e_x = (sum_exact - q_v * m / (p_v**2 + q_v * sum_k)) / p_v**2
        e_c = e_x.copy()
        e_c[:, 2] = np.take_along_axis(search[:, 1], best[:, 1, :, None], axis=2)[..., 0]
        # a node the workload cannot see inside collapses (search lanes only)
        ref = G[:, lv.corner, lv.corner][:, :, None]
        spread = np.where(block, np.abs(rows - ref), 0.0).max(axis=2)
        flat = np.maximum.reduceat(spread, lv.offsets, axis=1) <= tol[:, None]
        U[:, :, lv.cells] = Uc * scale[:, :, lv.node_of_cell]
        level = np.empty((4, S, lanes, lv.internal.size + lv.leaves.size))
        level[..., lv.leaves] = gdiag[:, None, lv.leaf_cells]
        level[2][..., lv.leaves] = 1.0
        inner = np.stack((e_c, e_x, sum_k * scale, scale**2 * m))
        if flat.any():  # its total alone: error G_ii, k = 1, u = 1/|S| on its cells
            fs, fn = np.nonzero(flat)
            inner[:, fs, 1:, fn] = gdiag[fs, lv.corner[lv.offsets[fn]]][:, None, None]
            inner[2, fs, 1:, fn] = 1.0
            sizes = np.diff(np.append(lv.offsets, lv.cells.size))
            cs, cc = np.nonzero(flat[:, lv.node_of_cell])
            U[cs, 1:, lv.cells[cc]] = (1.0 / sizes[lv.node_of_cell[cc]])[:, None]
        level[..., lv.internal] = inner
        chosen[lv.depth] = (p_v, flat)
        exact_by_depth[lv.depth] = level[1]
        child = level
    root = child[1][:, :, 0]
    lane = np.argmin(root, axis=1)  # per workload: the first of least error, as there
    every = np.arange(S)
    splits, stops, errors = [], [], []
    for depth, lv in enumerate(tree.levels):
        internal = lv.child_count > 0
        split = np.zeros((S, lv.lower.size))
        stop = np.tile(~internal, (S, 1))
        if depth in chosen:
            p_v, flat = chosen[depth]
            collapsed = flat & (lane > 0)[:, None]
            split[:, internal] = np.where(collapsed, 0.0, p_v[every, lane])
            stop[:, internal] = collapsed
        splits.append(split)
        stops.append(stop)
        errors.append(exact_by_depth[depth][every, lane])
    return _Fits(tuple(splits), tuple(stops), tuple(errors), root[every, lane])


@dataclass(frozen=True)
class _Fits:
    """The `_Fit`s of S workloads on one tree, stacked (S × nodes per level)."""

    split: tuple[np.ndarray, ...]
    stop: tuple[np.ndarray, ...]
    error: tuple[np.ndarray, ...]
    root_error: np.ndarray  # (S,)

    def __len__(self) -> int:
        return int(self.root_error.size)

    def __getitem__(self, s: int) -> _Fit:
        return _Fit(
            tuple(a[s] for a in self.split),
            tuple(a[s] for a in self.stop),
            tuple(a[s] for a in self.error),
            float(self.root_error[s]),
        )


def _node_weights_many(tree: _Tree, fits: _Fits) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`_node_weights` of every fit of `fits`, top-down for all at once."""
    S = len(fits)
    pi = np.ones((S, 1))
    active = np.ones((S, 1), dtype=bool)
    weights, keeps = [], []
    for lv, split, stop in zip(tree.levels, fits.split, fits.stop, strict=True):
        c = np.where(stop, pi, pi * (1.0 - split))
        keeps.append(active & (c > 0))
        weights.append(c)
        pi = np.repeat(pi * split, lv.child_count, axis=1)
        active = np.repeat(active & ~stop, lv.child_count, axis=1)
    keep, c = np.concatenate(keeps, axis=1), np.concatenate(weights, axis=1)
    lower = np.concatenate([lv.lower for lv in tree.levels])
    upper = np.concatenate([lv.upper for lv in tree.levels])
    return [(lower[k], upper[k], w[k]) for k, w in zip(keep, c, strict=True)]


def _node_weights(tree: _Tree, fit: _Fit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-down: c_v = π_v·(1-p_v) (π_v·1 at a stop), children get π_v·p_v
    (`_node_weights_many` for the one fit)."""
    one = _Fits(
        tuple(a[None] for a in fit.split),
        tuple(a[None] for a in fit.stop),
        tuple(a[None] for a in fit.error),
        np.array([fit.root_error]),
    )
    return _node_weights_many(tree, one)[0]


def _hierarchy_error(n: int, workload: EMatrix, *, branching: int = 2) -> float:
    """‖H‖₁²·tr(W (HᵀH)⁺ Wᵀ) for the unweighted b-ary hierarchy H of a complete
    tree (benchmarks, tests): tr(W (AᵀA)⁺ Wᵀ) for A = H/‖H‖₁."""
    tree = _Tree.build(n, branching)
    return _uniform_fit(tree, _oracle_for(workload, n)).root_error


def _objective(
    n: int,
    workload: EMatrix,
    *,
    branching: int = 2,
    granularity: int = 100,
    local: str | None = None,
) -> float:
    """tr(W (AᵀA)⁺ Wᵀ) of GreedyH's strategy A (sensitivity 1), from the tree
    recursion; `local` restricts the search to one local objective."""
    tree = _Tree.build(n, branching)
    oracle = _oracle_for(workload, n)
    if local is None:
        return _best_fit(tree, oracle, granularity=granularity).root_error
    return _greedy_pass(tree, oracle, granularity=granularity, local=local).root_error
