"""GreedyH's tree and its weights (Li, Hay & Miklau, PVLDB 7(5), 2014, §4).

Public computation on the domain size alone: DAWA's b-ary tree of intervals
(`_Tree`, memoised per (n, b) by `_tree`), the per-level index arrays of the
batched dense pass (`_dense_levels`), a weighting of the tree found by a
greedy pass (`_Fit`, or `_Fits` for several workloads at once), and the
weighted nodes it gives (`_node_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

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
