"""The implicit tree of range queries `Hierarchy` (paper §7.5).

H2, HB and QuadTree measure every node of a balanced tree over the domain.
§7.5 writes such a strategy as Union(Identity, Product(Sparse, Prefix)): the
cells, then the inner nodes as range queries stored by their corners. Here
the tree is stored by its parameters only — domain shape, branching factor,
whether the root is measured, optional per-depth weights — and applied level
by level, so building one costs O(1) time and memory at any size.

The tree. Every node is cut along each axis into min(b, side) contiguous
parts whose sizes differ by at most one, the larger parts first (a b×…×b-ary
tree in d dimensions; an axis of side 1 is not cut). A single cell is a leaf.
Every cell is a leaf exactly once; the tree height is h = ⌈log_b max(shape)⌉.

The rows, in order:

1. the N leaves, one per cell in C order (an Identity block);
2. the inner nodes (more than one cell), depth by depth from the root (from
   depth 1 with `root=False`), breadth first: within a depth grouped by
   parent in the parents' order, a parent's children in C order of their
   part indices.

With `level_weights` (one weight per depth 0..h) every row of a node at
depth t — a leaf's row at the depth where the cell became a leaf — is scaled
by the weight of t: the geometric budget of QuadTree in one matrix.

Application. A·x sums x bottom-up, one depth at a time: the part sums along
each axis (a reshaped sum where every parent has the same number of
children, `np.add.reduceat` on the split boundaries where not); Aᵀ·y
spreads the weighted level answers top-down with `np.repeat`/broadcasting,
accumulating. Both cost about one pass over the data, O(N) in all. In d ≥ 2
dimensions the breadth-first order of a depth is the base-b digit
interleaving of the per-axis positions (a Morton order), obtained by one
transposition of the level's array; shapes whose axes reach single cells at
different depths with uneven parts fall back to sorting the nodes' keys.

Column norms, sensitivity, `max_column_nnz`, `is_integral`,
`is_nonnegative` and `is_binary` are exact and computed from the parameters
(a cell's column holds one entry per ancestor, of the ancestor depth's
weight). `sparse()`/`dense()` materialise the rows for small sizes.

The tree's structure is public and read-only — `level(t)` (a `TreeLevel`:
the grid of a depth's parts, their children and sizes per axis, the rows of
its inner nodes, its weight), `first_depth`, `leaf_weight`,
`cell_leaf_depths()`, `child_counts(axis, t)` — and so are the level
operations that apply the matrix: the part sums of a depth (`part_sums`),
spreading a depth's values to its children (`spread_to_children`), a
depth's rows as a grid of its parts (`rows_as_parts`, zero at single cells
per `inner_mask`). The exact tree solvers of `ektelo.inference.tree` and
`ektelo.inference.tree_nnls` run on these; the solvers live there, this
module is algebra only.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .base import EMatrix, check_dense_size, check_p, check_sparse_size
from .ranges import RangeQueries

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = ["Hierarchy", "TreeLevel"]

# The largest number of axes a single transposition may use (NumPy 1.x's limit).
_MAX_AXES = 32


def _check_domain_shape(domain_shape: Any) -> tuple[int, ...]:
    dims = (
        (domain_shape,)
        if isinstance(domain_shape, (numbers.Integral, np.integer))
        else domain_shape
    )
    try:
        dims = tuple(dims)
    except TypeError:
        dims = ()
    if not dims or any(
        isinstance(s, (bool, np.bool_)) or not isinstance(s, (numbers.Integral, np.integer))
        for s in dims
    ):
        raise ValueError(f"domain_shape must hold positive integer sizes, got {domain_shape!r}")
    if any(s < 1 for s in dims):
        raise ValueError(f"domain_shape must hold positive integer sizes, got {domain_shape!r}")
    return tuple(int(s) for s in dims)


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a boolean, got {type(value).__name__}")
    return bool(value)


class _Axis:
    """The 1-D tree of one axis, as per-depth counts of part sizes.

    At every depth the parts of an axis have at most three sizes (1, q and
    q + 1), so the whole structure is O(h) numbers. `k[t]` is the number of
    children of every part at depth t when they all have the same number
    (None otherwise: only at the depth just above this axis's cells).
    """

    def __init__(self, side: int, b: int, height: int):
        self.side, self.b = side, b
        sizes: list[dict[int, int]] = [{side: 1}]
        k: list[int | None] = []
        for _ in range(height):
            children = {min(b, z) for z in sizes[-1]}
            k.append(children.pop() if len(children) == 1 else None)
            nxt: dict[int, int] = {}
            for z, count in sizes[-1].items():
                c = min(b, z)
                q, r = divmod(z, c)
                if r:
                    nxt[q + 1] = nxt.get(q + 1, 0) + count * r
                nxt[q] = nxt.get(q, 0) + count * (c - r)
            sizes.append(nxt)
        self.sizes = sizes
        self.k = k
        self.count = [sum(s.values()) for s in sizes]
        self.ones = [s.get(1, 0) for s in sizes]
        self.max_len = [max(s) for s in sizes]
        # the largest number of children of a part at each depth (≥ 1)
        self.radix = [min(b, z) for z in self.max_len[:-1]]
        self.leaf_depths = (
            {0}
            if side == 1
            else {t for t in range(1, height + 1) if self.ones[t] > self.ones[t - 1]}
        )

    def segments(self, depth: int, place: Any = None) -> Any:
        """The parts at `depth`, built top-down: (starts, lengths, keys). With
        `place`, keys are the parts' breadth-first keys in the mixed radix it
        describes (see Hierarchy._order_keys); otherwise None."""
        starts = np.zeros(1, dtype=np.int64)
        lengths = np.full(1, self.side, dtype=np.int64)
        keys = np.zeros(1, dtype=np.int64) if place is not None else None
        for t in range(depth):
            counts = np.minimum(lengths, self.b)
            q, r = np.divmod(lengths, counts)
            total = int(self.count[t + 1])
            first = np.cumsum(counts) - counts
            owner = np.repeat(np.arange(lengths.size), counts)
            j = np.arange(total, dtype=np.int64) - first[owner]
            q_o, r_o = q[owner], r[owner]
            starts = starts[owner] + j * q_o + np.minimum(j, r_o)
            lengths = q_o + (j < r_o)
            if keys is not None:
                step, digit = place(t)
                keys = keys[owner] * step + j * digit
        return starts, lengths, keys

    def child_counts(self, t: int) -> np.ndarray:
        """Children of each part at depth t (for the depth where they differ).

        The lengths are built top-down; where every part has k children the
        split is one broadcast, without the index arrays of `segments`."""
        lengths = np.full(1, self.side, dtype=np.int64)
        for u in range(t):
            k = self.k[u]
            if k is None:
                lengths = self._split(lengths)
                continue
            q, r = np.divmod(lengths, k)
            lengths = (q[:, np.newaxis] + (np.arange(k) < r[:, np.newaxis])).reshape(-1)
        return np.minimum(lengths, self.b)

    def _split(self, lengths: np.ndarray) -> np.ndarray:
        counts = np.minimum(lengths, self.b)
        q, r = np.divmod(lengths, counts)
        owner = np.repeat(np.arange(lengths.size), counts)
        j = np.arange(owner.size, dtype=np.int64) - (np.cumsum(counts) - counts)[owner]
        out: np.ndarray = q[owner] + (j < r[owner])
        return out


@dataclass(frozen=True)
class TreeLevel:
    """One depth of a `Hierarchy`'s tree, as the exact tree solvers read it.

    Attributes:
        depth: t, from the root (0) to the deepest leaves (the height).
        parts: the grid of the depth's parts: along each axis, how many.
            A depth's values are held as an array (pre, *parts, post).
        children: along each axis, the number of children of every part at
            this depth, or None where parts have unequal numbers (only at
            the depth just above that axis's cells); 1 at the last depth.
        part_sizes: along each axis, the distinct numbers of cells of the
            parts (at most three: 1, q and q + 1).
        rows: the rows of the depth's inner nodes (parts of more than one
            cell), in breadth-first order; empty where the depth has none
            (above `Hierarchy.first_depth`, or only single cells).
        weight: the weight of the depth's rows (1.0 without weights).
    """

    depth: int
    parts: tuple[int, ...]
    children: tuple[int | None, ...]
    part_sizes: tuple[tuple[int, ...], ...]
    rows: range
    weight: float


class Hierarchy(EMatrix):
    """Every node of the balanced b-ary tree over `domain_shape` (see module).

    Args:
        domain_shape: the data's shape (an int in 1-D); N cells in C order.
        branching: b ≥ 2, the parts per axis of each node.
        root: measure the root (the total); leaves are always measured.
        level_weights: None, or h + 1 finite weights, one per depth from the
            root (0) to the deepest leaves (h = ⌈log_b max(domain_shape)⌉).
        transposed: the object is the transpose (N × rows) of that matrix.

    Attributes: the arguments, `height` (h), `num_cells` (N), `num_rows`
    (N + the measured inner nodes), `shape`, and `first_depth`, the
    shallowest depth with rows (0 with the root measured, else 1). L1 sensitivity without
    weights: the number of measured depths, h + 1 with the root and h without.
    """

    _fields = ("domain_shape", "branching", "root", "level_weights", "transposed")

    def __init__(
        self,
        domain_shape: int | Sequence[int],
        branching: int,
        root: bool = True,
        level_weights: Sequence[float] | np.ndarray | None = None,
        transposed: bool = False,
    ):
        self.domain_shape: tuple[int, ...] = _check_domain_shape(domain_shape)
        if isinstance(branching, (bool, np.bool_)) or not isinstance(
            branching, (numbers.Integral, np.integer)
        ):
            raise TypeError(f"branching must be an integer, got {type(branching).__name__}")
        if branching < 2:
            raise ValueError(f"branching must be ≥ 2, got {branching}")
        b = int(branching)
        self.branching: int = b
        self.root: bool = _check_flag(root, "root")
        self.transposed: bool = _check_flag(transposed, "transposed")
        height = 0
        while b**height < max(self.domain_shape):
            height += 1
        self.height: int = height
        self.level_weights: tuple[float, ...] | None = None
        if level_weights is not None:
            w = np.asarray(level_weights)
            if w.dtype.kind not in "iuf" or w.ndim != 1:
                raise ValueError("level_weights must be a 1-D sequence of real numbers")
            w = w.astype(np.float64)
            if w.size != height + 1:
                raise ValueError(
                    f"level_weights needs {height + 1} weights (depths 0..{height}), got {w.size}"
                )
            if not np.all(np.isfinite(w)):
                raise ValueError("level_weights must be finite")
            if not np.all(w == 1.0):  # all ones is the unweighted tree
                self.level_weights = tuple(float(v) for v in w)
        self._axes: list[_Axis] = [_Axis(s, b, height) for s in self.domain_shape]
        self.first_depth: int = 0 if self.root else 1
        n = math.prod(self.domain_shape)
        self.num_cells: int = n
        inner = [0] * (height + 1)
        for t in range(self.first_depth, height):
            inner[t] = math.prod(a.count[t] for a in self._axes) - math.prod(
                a.ones[t] for a in self._axes
            )
        self._inner: list[int] = inner
        offsets = [n] * (height + 2)
        for t in range(height + 1):
            offsets[t + 1] = offsets[t] + inner[t]
        self._offset: list[int] = offsets
        m = offsets[-1]
        self.num_rows: int = m
        self.shape = (n, m) if self.transposed else (m, n)
        # Depths at which cells become leaves (the max over axes of theirs).
        floor = max(min(a.leaf_depths) for a in self._axes)
        self._leaf_depths: list[int] = sorted(
            {t for a in self._axes for t in a.leaf_depths if t >= floor}
        )

    # -- parameters -------------------------------------------------------------
    def weight(self, depth: int) -> float:
        """The weight of the rows of nodes at `depth` (1.0 without weights)."""
        return 1.0 if self.level_weights is None else self.level_weights[depth]

    def _used_depths(self) -> list[int]:
        inner = [t for t in range(self.first_depth, self.height) if self._inner[t]]
        return sorted(set(inner) | set(self._leaf_depths))

    @property
    def leaves_measured(self) -> bool:
        """True when every cell's leaf row has a non-zero weight (then the
        matrix has full column rank and inference's exact tree solve applies)."""
        return all(self.weight(t) != 0 for t in self._leaf_depths)

    @property
    def leaf_weight(self) -> float | None:
        """The leaves' common weight, or None when it differs between cells."""
        weights = {self.weight(t) for t in self._leaf_depths}
        return weights.pop() if len(weights) == 1 else None

    def level(self, depth: int) -> TreeLevel:
        """The structure of the tree at `depth` (0 ≤ depth ≤ height), read-only:
        the shape of its grid of parts, the parts' children and sizes per axis,
        and which rows hold the depth's inner nodes (see `TreeLevel`)."""
        if isinstance(depth, bool) or not isinstance(depth, numbers.Integral):
            raise TypeError(f"depth must be an integer, got {type(depth).__name__}")
        if not 0 <= depth <= self.height:
            raise ValueError(f"depth must be in 0..{self.height}, got {depth}")
        t = int(depth)
        return TreeLevel(
            depth=t,
            parts=tuple(ax.count[t] for ax in self._axes),
            children=tuple(ax.k[t] if t < self.height else 1 for ax in self._axes),
            part_sizes=tuple(tuple(sorted(ax.sizes[t])) for ax in self._axes),
            rows=range(self._offset[t], self._offset[t + 1]),
            weight=self.weight(t),
        )

    def cell_leaf_depths(self) -> np.ndarray:
        """Per cell (C order), the depth at which it is a leaf."""
        per_axis = []
        for ax in self._axes:
            if len(ax.leaf_depths) == 1:
                per_axis.append(np.full(ax.side, next(iter(ax.leaf_depths)), dtype=np.int64))
                continue
            # Leaves appear at two depths only, t and t + 1: above t every part
            # has ≥ b cells (⌊side/bᵘ⌋ ≥ b), at t every part ≤ b cells, so its
            # children are cells; parts of one cell at t are leaves there.
            t = min(ax.leaf_depths)
            counts = ax.child_counts(t)
            per_axis.append(np.repeat(np.where(counts == 1, t, t + 1), counts))
        grid = per_axis[0]
        for arr in per_axis[1:]:
            grid = np.maximum.outer(grid, arr)
        return grid.reshape(-1)

    def child_counts(self, axis: int, t: int) -> np.ndarray:
        """Children of each part of depth t on `axis`, at the one depth per axis
        where their numbers differ: one byte per part (for b < 256), computed
        once and shared with the transpose."""
        cache = self.__dict__.get("_cache_parts")
        if cache is None:
            cache = self.__dict__["_cache_parts"] = {}
        key = (axis, t)
        if key not in cache:
            counts = self._axes[axis].child_counts(t)
            counts = counts.astype(np.uint8 if self.branching < 256 else np.int64)
            counts.setflags(write=False)
            cache[key] = counts
        out: np.ndarray = cache[key]
        return out

    # -- application --------------------------------------------------------------
    def _matmat(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = self._apply_axis(X[np.newaxis])[0]
        return out

    def _apply_axis(self, T: np.ndarray) -> np.ndarray:
        return self._spread(T) if self.transposed else self._sums(T)

    def _transpose(self) -> EMatrix:
        T = Hierarchy(
            self.domain_shape, self.branching, self.root, self.level_weights, not self.transposed
        )
        T.__dict__["_cache_parts"] = self.__dict__.setdefault("_cache_parts", {})
        return T

    def part_sums(self, S: np.ndarray, t: int) -> np.ndarray:
        """Sums over the parts of depth t + 1 → the parts of depth t: S is an
        array (pre, *level(t + 1).parts, post), the result (pre,
        *level(t).parts, post) — every part's total of its children."""
        for a, ax in enumerate(self._axes):
            k = ax.k[t]
            if k == 1:
                continue
            if k is not None:
                S = _group_sum(S, 1 + a, k)
            else:
                counts = self.child_counts(a, t)
                first = np.cumsum(counts, dtype=np.intp) - counts
                S = np.add.reduceat(S, first, axis=1 + a)
        return S

    def _sums(self, T: np.ndarray) -> np.ndarray:
        pre, n, post = T.shape
        out = np.empty((pre, self.num_rows, post))
        w_leaf = self.leaf_weight
        if w_leaf is None:
            scale = np.asarray(self.level_weights)[self.cell_leaf_depths()]
            np.multiply(T, scale[np.newaxis, :, np.newaxis], out=out[:, :n])
        elif w_leaf == 1.0:
            out[:, :n] = T
        else:
            np.multiply(T, w_leaf, out=out[:, :n])
        S = T.reshape((pre, *self.domain_shape, post))
        for t in range(self.height - 1, self.first_depth - 1, -1):
            S = self.part_sums(S, t)
            rows = out[:, self._offset[t] : self._offset[t + 1]]
            self._emit(S, t, rows)
        return out

    def _spread(self, Y: np.ndarray) -> np.ndarray:
        pre, _, post = Y.shape
        n = self.num_cells
        acc: np.ndarray | None = None  # the answers spread down to depth t
        for t in range(self.first_depth, self.height):
            y = Y[:, self._offset[t] : self._offset[t + 1]]
            if acc is not None and self._plain(t):  # one pass: y + acc repeated
                G = np.empty((pre, *(ax.count[t] for ax in self._axes), post))
                self.spread_to_children(G, acc, t - 1, base=y.reshape(G.shape))
            else:
                G = self.rows_as_parts(y, t)
                if acc is not None:
                    self.spread_to_children(G, acc, t - 1)
            acc = G
        out = np.empty((pre, n, post))  # C order: reshaped below as a view
        grid = out.reshape((pre, *self.domain_shape, post))
        w_leaf = self.leaf_weight
        if acc is not None and w_leaf == 1.0:
            self.spread_to_children(grid, acc, self.height - 1, base=Y[:, :n].reshape(grid.shape))
            return out
        if w_leaf is None:
            scale = np.asarray(self.level_weights)[self.cell_leaf_depths()]
            np.multiply(Y[:, :n], scale[np.newaxis, :, np.newaxis], out=out)
        else:
            _scaled(Y[:, :n], w_leaf, out)
        if acc is not None:
            self.spread_to_children(grid, acc, self.height - 1)
        return out

    def _plain(self, t: int) -> bool:
        """True when the depth-t inner rows are the depth-t parts in C order,
        unweighted: 1-D (or one axis split) without single cells, weight 1."""
        split = sum(1 for ax in self._axes if ax.count[t] > 1)
        return split <= 1 and self.inner_mask(t) is None and self.weight(t) == 1.0

    def spread_to_children(
        self, G: np.ndarray, acc: np.ndarray, t: int, base: np.ndarray | None = None
    ) -> None:
        """G (pre, *level(t + 1).parts, post) += the value in acc (pre,
        *level(t).parts, post) of every part's parent, in place; with `base`
        (G's shape), G = base + that instead (one pass, G's values unread)."""
        view_shape = [G.shape[0]]
        acc_shape = [G.shape[0]]
        for a, ax in enumerate(self._axes):
            k = ax.k[t]
            if k is None:
                acc = np.repeat(acc, self.child_counts(a, t), axis=1 + a)
                k = 1
            view_shape += [G.shape[1 + a] // k, k]
            acc_shape += [acc.shape[1 + a], 1]
        view_shape.append(G.shape[-1])
        acc_shape.append(G.shape[-1])
        target = _view(G, view_shape)
        spread = acc.reshape(acc_shape)
        source = None if base is None else base.reshape(view_shape)
        if view_shape[-1] == 1 and 1 < view_shape[-2] <= 3:
            # a few children on the contiguous axis: whole strided slices, since
            # broadcasting over an innermost axis of 2 or 3 runs tiny loops
            spread = spread[..., 0, :]
            for i in range(view_shape[-2]):
                if source is None:
                    target[..., i, :] += spread
                else:
                    np.add(source[..., i, :], spread, out=target[..., i, :])
        elif source is None:
            target += spread
        else:
            np.add(source, spread, out=target)

    # -- breadth-first order of a depth ------------------------------------------------
    def _plan(self, t: int, pre: int, post: int) -> tuple[list[int], list[int]] | None:
        """How a depth-t array (pre, parts…, post) becomes breadth-first order:
        (source shape, axis permutation) for one transposition, or None when
        some part above depth t has children of unequal number (then the keys
        are sorted). In 1-D the orders coincide (the identity permutation)."""
        if len(self._axes) == 1:
            return [pre, self._axes[0].count[t], post], [0, 1, 2]
        digits = []
        for a, ax in enumerate(self._axes):
            for u in range(t):
                k = ax.k[u]
                if k is None:
                    return None
                if k > 1:
                    digits.append((u, a, k))
        if len(digits) + 2 > _MAX_AXES:
            return None
        # source axes: axis 0's digits (depth 1 first), then axis 1's, …;
        # breadth-first order: depth 1's digits (axis 0 first), then depth 2's, …
        order = sorted(range(len(digits)), key=lambda i: (digits[i][0], digits[i][1]))
        source = [pre] + [k for _, _, k in digits] + [post]
        perm = [0] + [1 + i for i in order] + [len(digits) + 1]
        return source, perm

    def inner_mask(self, t: int) -> np.ndarray | None:
        """Mask over the depth-t parts (flat, C order) of those of more than
        one cell — the inner nodes, which have rows — or None when no part at
        depth t is a single cell."""
        if t >= self.height or math.prod(ax.ones[t] for ax in self._axes) == 0:
            return None
        inner = np.zeros(1, dtype=bool)
        for a, ax in enumerate(self._axes):
            k = ax.k[t]
            axis_inner = self.child_counts(a, t) > 1 if k is None else np.full(ax.count[t], k > 1)
            inner = np.logical_or.outer(inner, axis_inner)
        return inner.reshape(-1)

    def _order_keys(self, t: int) -> np.ndarray:
        """Flat C-order indices of the depth-t inner nodes in breadth-first order,
        by sorting mixed-radix keys: the digits of depth 1 (axis 0, …, d − 1),
        then of depth 2, …; a digit is a part's index among its parent's.
        O(parts of the axes + M log M) for M inner nodes at depth t."""
        radix = [[ax.radix[u] for ax in self._axes] for u in range(t)]
        if math.prod(r for row in radix for r in row) >= 2**62:
            raise ValueError("the tree is too deep to order its nodes")

        def place_for(a: int) -> Any:
            def place(u: int) -> tuple[int, int]:  # (radix of depth u + 1, digit weight)
                return math.prod(radix[u]), math.prod(radix[u][a + 1 :])

            return place

        grid = tuple(ax.count[t] for ax in self._axes)
        mask = self.inner_mask(t)
        flat = np.arange(math.prod(grid), dtype=np.int64) if mask is None else np.flatnonzero(mask)
        keys = np.zeros(flat.size, dtype=np.int64)
        for a, i in enumerate(np.unravel_index(flat, grid)):
            keys += self._axes[a].segments(t, place=place_for(a))[2][i]
        return flat[np.argsort(keys, kind="stable")]

    def _emit(self, S: np.ndarray, t: int, rows: np.ndarray) -> None:
        """Write the depth-t inner nodes of S (pre, parts…, post), weighted, in
        breadth-first order into rows (pre, inner_t, post)."""
        pre, post = S.shape[0], S.shape[-1]
        w = self.weight(t)
        plan = self._plan(t, pre, post)
        if plan is None:
            values = S.reshape(pre, -1, post)[:, self._order_keys(t)]
        else:
            source, perm = plan
            moved = S.reshape(source).transpose(perm)
            mask = self.inner_mask(t)
            if mask is None:
                target = _view(rows, [source[i] for i in perm])
                _scaled(moved, w, target)
                return
            tree_mask = _transpose_flat(mask, source[1:-1], perm)
            values = np.ascontiguousarray(moved).reshape(pre, -1, post)[:, tree_mask]
        _scaled(values, w, rows)

    def rows_as_parts(self, y: np.ndarray, t: int) -> np.ndarray:
        """The depth-t parts (pre, *level(t).parts, post) holding w·y, for
        y (pre, len(level(t).rows), post) the answers of the depth-t rows and
        w their weight, zero at single cells: the rows as a grid (A·x writes
        them the other way), scaled as the tree solvers' normal equations
        read them."""
        pre, post = y.shape[0], y.shape[-1]
        grid = [pre, *(ax.count[t] for ax in self._axes), post]
        w = self.weight(t)
        plan = self._plan(t, pre, post)
        if plan is None:
            G = np.zeros(grid)
            G.reshape(pre, -1, post)[:, self._order_keys(t)] = y * w
            return G
        source, perm = plan
        mask = self.inner_mask(t)
        if mask is not None:
            tree_mask = _transpose_flat(mask, source[1:-1], perm)
            full = np.zeros((pre, tree_mask.size, post))
            full[:, tree_mask] = y
            y = full
        G = np.empty(grid)
        target = G.reshape(source).transpose(perm)
        _scaled(y.reshape(target.shape), w, target)
        return G

    # -- the rows as ranges -----------------------------------------------------------
    def nodes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The inner nodes in row order (they follow the N cell rows): inclusive
        lower and upper corners (rows, d) and depths (rows,). Materialises."""
        lowers, uppers, depths = [], [], []
        for t in range(self.first_depth, self.height):
            if not self._inner[t]:
                continue
            parts = [ax.segments(t)[:2] for ax in self._axes]
            grid = tuple(p[0].size for p in parts)
            idx = np.unravel_index(self._order_keys(t), grid)
            lowers.append(np.stack([p[0][i] for p, i in zip(parts, idx, strict=True)], axis=1))
            uppers.append(
                np.stack([p[0][i] + p[1][i] - 1 for p, i in zip(parts, idx, strict=True)], axis=1)
            )
            depths.append(np.full(idx[0].size, t, dtype=np.int64))
        d = len(self.domain_shape)
        if not lowers:
            empty = np.zeros((0, d), dtype=np.int64)
            return empty, empty.copy(), np.zeros(0, dtype=np.int64)
        return np.concatenate(lowers), np.concatenate(uppers), np.concatenate(depths)

    def sparse(self) -> sp.csr_matrix:
        n = self.num_cells
        lower, upper, depth = self.nodes()
        nnz = n + int(np.prod(upper - lower + 1, axis=1).sum())
        check_sparse_size(nnz, self.shape)
        w_leaf = self.leaf_weight
        leaf = (
            np.full(n, w_leaf)
            if w_leaf is not None
            else np.asarray(self.level_weights)[self.cell_leaf_depths()]
        )
        blocks = [sp.diags(leaf, format="csr")]
        if depth.size:
            ranges = RangeQueries(self.domain_shape, lower, upper).sparse()
            if self.level_weights is not None:
                ranges = sp.diags(np.asarray(self.level_weights)[depth]) @ ranges
            blocks.append(ranges)
        mat = sp.vstack(blocks, format="csr")
        return mat.T.tocsr() if self.transposed else mat

    def dense(self) -> np.ndarray:
        check_dense_size(*self.shape)  # (as `sparse`, in NumPy: no SciPy, #41)
        lower, upper, depth = self.nodes()
        w_leaf = self.leaf_weight
        leaf = (
            np.full(self.num_cells, w_leaf)
            if w_leaf is not None
            else np.asarray(self.level_weights)[self.cell_leaf_depths()]
        )
        blocks = [np.diag(np.asarray(leaf, dtype=np.float64))]
        if depth.size:
            ranges = RangeQueries(self.domain_shape, lower, upper).dense()
            if self.level_weights is not None:
                ranges = np.asarray(self.level_weights)[depth][:, None] * ranges
            blocks.append(ranges)
        mat = np.vstack(blocks)
        return np.ascontiguousarray(mat.T) if self.transposed else mat

    # -- element-wise structure and norms ----------------------------------------------
    def _mapped(self, f: Any) -> Hierarchy:
        if self.level_weights is None:
            return self
        weights = [f(w) for w in self.level_weights]
        return Hierarchy(self.domain_shape, self.branching, self.root, weights, self.transposed)

    def abs(self) -> EMatrix:
        return self if self.is_nonnegative else self._mapped(abs)

    def sqr(self) -> EMatrix:
        return self if self.is_binary else self._mapped(lambda w: w * w)

    @property
    def is_nonnegative(self) -> bool:
        return all(self.weight(t) >= 0 for t in self._used_depths())

    @property
    def is_binary(self) -> bool:
        return all(self.weight(t) in (0.0, 1.0) for t in self._used_depths())

    def is_integral(self) -> bool:
        return all(float(self.weight(t)).is_integer() for t in self._used_depths())

    def _path_norms(self, p: int) -> dict[int, float]:
        """For each leaf depth L, the column norm of a cell that is a leaf at L:
        Σ |w_t|^p over its inner ancestors (depths first..L-1) and its leaf."""
        power = abs if p == 1 else (lambda w: w * w)
        return {
            L: math.fsum([power(self.weight(t)) for t in range(self.first_depth, L)])
            + power(self.weight(L))
            for L in self._leaf_depths
        }

    def column_norms(self, p: int = 1) -> np.ndarray:
        p = check_p(p)
        if self.transposed:  # the original's rows: |w|^p · the node's size
            # a Hierarchy's transpose is a Hierarchy
            E = cast(Hierarchy, self._mapped(abs if p == 1 else (lambda w: w * w)).T)
            out: np.ndarray = E._sums(np.ones((1, self.num_cells, 1)))[0, :, 0]
            return out
        norms = self._path_norms(p)
        if len(norms) == 1:
            return np.full(self.num_cells, next(iter(norms.values())))
        table = np.zeros(self.height + 1)
        for L, v in norms.items():
            table[L] = v
        out = table[self.cell_leaf_depths()]
        return out

    def sensitivity(self, p: int = 1) -> float:
        p = check_p(p)
        if self.transposed:
            top = 0.0
            power = abs if p == 1 else (lambda w: w * w)
            for t in self._used_depths():
                largest = 1 if t in self._leaf_depths else 0
                if t < self.height and self._inner[t]:
                    largest = math.prod(ax.max_len[t] for ax in self._axes)
                top = max(top, power(self.weight(t)) * largest)
        else:
            top = max(self._path_norms(p).values())
        return float(top) if p == 1 else math.sqrt(top)

    def max_column_nnz(self) -> int:
        if self.transposed:
            sizes = [1] + [
                math.prod(ax.max_len[t] for ax in self._axes)
                for t in range(self.first_depth, self.height)
                if self._inner[t] and self.weight(t) != 0
            ]
            return int(max(sizes))
        return max(
            sum(1 for t in range(self.first_depth, L) if self.weight(t) != 0)
            + (self.weight(L) != 0)
            for L in self._leaf_depths
        )

    def __repr__(self) -> str:
        tag = ".T" if self.transposed else ""
        return (
            f"Hierarchy({self.domain_shape}, b={self.branching}, root={self.root}"
            f"{', weighted' if self.level_weights is not None else ''}){tag}"
        )


def _group_sum(S: np.ndarray, axis: int, k: int) -> np.ndarray:
    """Sums of consecutive groups of k along `axis` of S (a new array)."""
    shape = S.shape
    A, n, B = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
    V = S.reshape(A, n // k, k, B)
    if B == 1 and k > 4:  # short contiguous groups: a matrix-vector product
        R = V[..., 0] @ np.ones(k)
    elif k <= 16:  # whole slices added, each read once
        R = V[:, :, 0] + V[:, :, 1]
        for i in range(2, k):
            R += V[:, :, i]
    else:
        R = V.sum(axis=2)
    return R.reshape((*shape[:axis], n // k, *shape[axis + 1 :]))


def _transpose_flat(values: np.ndarray, source: list[int], perm: list[int]) -> np.ndarray:
    """A flat array in the spatial order of `source` axes, reordered by perm
    (given with the pre and post axes at both ends)."""
    inner = [p - 1 for p in perm[1:-1]]
    return np.ascontiguousarray(values.reshape(source).transpose(inner)).reshape(-1)


def _view(a: np.ndarray, shape: list[int]) -> np.ndarray:
    """`a` reshaped without copying (splitting one axis always can)."""
    v = a.reshape(shape)
    if v.size and not np.may_share_memory(v, a):  # pragma: no cover - defensive
        raise RuntimeError("internal error: a reshaped output is not a view")
    return v


def _scaled(src: np.ndarray, w: float, out: np.ndarray) -> None:
    if w == 1.0:
        np.copyto(out, src)
    else:
        np.multiply(src, w, out=out)
