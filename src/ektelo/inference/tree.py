"""Least squares on a tree of range queries (Hay, Rastogi, Miklau & Suciu,
"Boosting the accuracy of differentially private histograms through
consistency", PVLDB 3(1), 2010, §4.2): the exact solves `least_squares`
chooses for one measurement of H2, HB or QuadTree, and the closed form the
paper's inference figure compares the general solver with (§10.2).

* `lstsq(tree, y, zero=None)` — the least-squares solution of a `Hierarchy`
  (any shape, branching and level weights) in two passes over its levels,
  O(N); optionally with cells held at 0 (NNLS's active-set steps).
* `solve_levels(levels, branching)` and `levels(answers, n, branching)` —
  the original two passes (Hay et al., Theorem 3) on a complete b-ary tree
  of noisy counts given level by level; with the height i of a node (1 at
  the leaves, h + 1 at the root) and ỹ the noisy counts:

  * up:   z_v = ỹ_v at a leaf, else
          z_v = (bⁱ − bⁱ⁻¹)/(bⁱ − 1)·ỹ_v + (bⁱ⁻¹ − 1)/(bⁱ − 1)·Σ_{c child of v} z_c;
  * down: x̄_root = z_root, and x̄_u = z_u + (x̄_v − Σ_{c child of v} z_c)/b
          for a child u of v.

  `levels` splits the answers of `selection.hierarchy((n,), b)` (cells
  first, then the inner nodes top-down) into those levels.

The passes read the tree's public structure (`Hierarchy.level`, its part
sums, the spreading of a depth's values to its children, a depth's rows as
a grid), which applies the matrix as well: the solvers live here, the
algebra in `ektelo.matrix.hierarchy`. `solve_from` and `node_terms` are
shared with the tree NNLS (`tree_nnls`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as check
from ..matrix import Hierarchy

__all__ = ["levels", "lstsq", "solve_levels"]


def lstsq(tree: Hierarchy, y: Any, zero: Any = None) -> np.ndarray:
    """The least-squares solution x̂ = argmin_x ‖A x − y‖₂ of the tree A, in O(N).

    Every row measures one node's count (times its depth's weight), so
    with equal noise on the rows the problem is Gaussian estimation on a
    tree, solved exactly by two passes (Hay, Rastogi, Miklau & Suciu,
    PVLDB 2010, §4.2, generalised to uneven trees and weighted depths as
    in Qardaji, Yang & Li, PVLDB 2013, §4):

    * up, from the cells to the root: a node's estimate from its subtree,
      z = (w·y + s/V_s) / (w² + 1/V_s), with s the sum of its children's
      z, V_s the sum of their variances, y its answer, w its weight
      (nodes without a row — single cells above their leaf depth, the
      unmeasured root, zero-weight depths — keep z = s, V = V_s);
    * down, from the root: a child's estimate z_c plus its share of the
      parent's correction, (x̄ − s)·V_c / V_s.

    The cells of x̄ are the unique minimiser (the leaves' rows give A full
    column rank); it equals what an iterative solver converges to, at the
    cost of a few passes over the data instead of tens of products.

    Args:
        y: the answers, one per row.
        zero: optional boolean mask over the cells (C order) held at 0:
            the minimiser over x with x[zero] = 0 (a known cell has
            variance 0; NNLS's active-set steps use this).

    Raises:
        ValueError: for the transpose, a y or mask of the wrong size or
            non-finite values, or a zero leaf weight (then A is rank
            deficient).
    """
    y = answers(tree, y, "lstsq")
    n = tree.num_cells
    grid = (1, *tree.domain_shape, 1)
    w_leaf = tree.leaf_weight
    if w_leaf is None:
        w_cells = np.asarray(tree.level_weights)[tree.cell_leaf_depths()]
        if not np.all(w_cells != 0):
            raise ValueError("lstsq needs non-zero leaf weights (A is rank deficient)")
        z = (y[:n] / w_cells).reshape(grid)
        V = (1.0 / (w_cells * w_cells)).reshape(grid)
    else:
        if w_leaf == 0:
            raise ValueError("lstsq needs non-zero leaf weights (A is rank deficient)")
        z = (y[:n] / w_leaf).reshape(grid)
        # one variance for every cell: a read-only broadcast, no N-vector
        V = np.broadcast_to(1.0 / (w_leaf * w_leaf), grid)
    known = False
    free: np.ndarray | None = None  # 1.0 per free cell, when V stays one broadcast value
    if zero is not None:
        mask = np.asarray(zero)
        if mask.dtype != np.bool_ or mask.shape != (n,):
            raise ValueError(f"zero must be a boolean mask of {n} cells, got {mask.shape}")
        known = bool(mask.any())
        if known:
            # 1.0/0.0 rather than bools: products with a float mask are
            # several times faster than masked assignment
            keep = np.logical_not(mask, out=np.empty(n)).reshape(grid)
            z *= keep
            if V.strides == (0,) * V.ndim:
                # equal variances: keep V a broadcast and count the free
                # cells per parent instead (NNLS calls this every step, so
                # the N-sized variance array and its passes are worth saving)
                free = keep
            else:
                V = V * keep
    return solve_from(tree, y, tree.height, z, V, known, free).reshape(-1)


def answers(tree: Hierarchy, y: Any, solver: str) -> np.ndarray:
    """y as a finite float vector of one answer per row, for `solver`."""
    if tree.transposed:
        raise ValueError(f"{solver} needs the tree itself, not its transpose")
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.size != tree.num_rows:
        raise ValueError(f"y must be a vector of {tree.num_rows} answers, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite")
    return y


def node_terms(tree: Hierarchy, y: np.ndarray, t: int) -> tuple[np.ndarray, Any] | None:
    """The depth-t parts' own rows as grids: (w·y, w²) — w² a scalar, or a
    grid that is 0 at single cells — or None where depth t has no rows."""
    if not 0 <= t < tree.height:
        return None
    level = tree.level(t)
    w = level.weight
    if not level.rows or w == 0:
        return None
    rows = level.rows
    wy = tree.rows_as_parts(y[None, rows.start : rows.stop, None], t)
    mask = tree.inner_mask(t)
    own = w * w if mask is None else np.where(mask.reshape(wy.shape), w * w, 0.0)
    return wy, own


def solve_from(
    tree: Hierarchy,
    y: np.ndarray,
    depth: int,
    z: np.ndarray,
    V: np.ndarray,
    known: bool,
    free: np.ndarray | None = None,
    terms: dict[int, Any] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The two passes of `lstsq` from the parts of `depth` up: given their
    estimates z and variances V (grids; V = 0 where a part is known
    exactly, which `known` must then flag), the final estimates of those
    parts. `free` (cells only): V is one broadcast value, 0 where free is 0.
    `terms`: the `node_terms` of the depths above, when the caller
    solves repeatedly with the same y (`tree_nnls`). `out`: a grid like z to
    write the estimates into where V is not one broadcast value (`nnls`
    reuses it every round: at 10^8 cells a fresh array of the parents'
    size costs more than the arithmetic on it).
    """
    # Up pass: keep every depth's (z, V) and the children's sums (s, V_s).
    zs: list[np.ndarray] = [z]
    Vs: list[np.ndarray] = [V]
    sums: list[tuple[np.ndarray, np.ndarray]] = []
    for t in range(depth - 1, tree.first_depth - 1, -1):
        s = tree.part_sums(zs[-1], t)
        if free is not None and len(zs) == 1:  # V = v·[cell free]: v · free count
            v_s = tree.part_sums(free, t) * float(V.flat[0])
        else:
            v_s = tree.part_sums(Vs[-1], t)
        sums.append((s, v_s))
        term = node_terms(tree, y, t) if terms is None else terms[t]
        if term is None:
            zs.append(s)
            Vs.append(v_s)
            continue
        wy, own = term
        exact = v_s == 0 if known else None  # subtrees of cells held at 0
        precision = 1.0 / (v_s if exact is None else np.where(exact, 1.0, v_s))
        V_t = 1.0 / (precision + own)
        z_t = (wy + s * precision) * V_t
        if exact is not None:
            z_t = np.where(exact, s, z_t)
            V_t = np.where(exact, 0.0, V_t)
        zs.append(z_t)
        Vs.append(V_t)
    # Down pass: the estimates of the top depth are final.
    x = zs.pop()
    Vs.pop()
    for t in range(tree.first_depth, depth):
        s, v_s = sums.pop()
        z_c, V_c = zs.pop(), Vs.pop()
        if known:
            correction = np.divide(x - s, v_s, out=np.zeros(s.shape), where=v_s > 0)
        else:
            correction = (x - s) / v_s
        if V_c.strides == (0,) * V_c.ndim:  # equal variances: z_c += V·correction, in place
            tree.spread_to_children(z_c, correction * V_c.flat[0], t)
            if free is not None and not zs:  # the cells: held ones have variance 0
                z_c *= free
            x = z_c
            continue
        share = np.empty(z_c.shape) if out is None or zs else out
        # (a zero base: the spread written in one pass, share's values unread)
        tree.spread_to_children(share, correction, t, base=np.broadcast_to(0.0, share.shape))
        share *= V_c
        share += z_c
        x = share
    return x


def _height(n: int, b: int) -> int:
    """h with bʰ = n exactly, or a ValueError (the tree must be complete)."""
    n = check.positive_int(n, "n")
    h, reach = 0, 1
    while reach < n:
        reach *= b
        h += 1
    if reach != n:
        raise ValueError(
            f"tree-based inference needs a complete tree: n = {n} is not a power of {b}"
        )
    return h


def solve_levels(levels: Sequence[Any], branching: int) -> np.ndarray:
    """Least-squares leaf estimates from a complete tree of noisy counts.

    Args:
        levels: h + 1 arrays; levels[t] holds the bᵗ noisy counts of the
            nodes at depth t, left to right (levels[0] is the root, levels[h]
            are the n = bʰ cells). Every count must carry the same noise scale.
        branching: b ≥ 2.

    Returns:
        The n least-squares estimates of the cells (a new array; the inputs
        are not modified).
    """
    b = check.integer(branching, "branching", minimum=2)
    arrays = [np.asarray(level, dtype=np.float64).reshape(-1) for level in levels]
    if not arrays:
        raise ValueError("levels must hold at least the root")
    for t, level in enumerate(arrays):
        if level.size != b**t:
            raise ValueError(
                f"level {t} has {level.size} counts; a complete {b}-ary tree has {b**t} there"
            )
        if not np.all(np.isfinite(level)):
            raise ValueError(f"level {t} has non-finite counts")
    h = len(arrays) - 1
    # Up pass: z at each level (a fresh copy of the leaves, then upwards).
    z: list[np.ndarray] = [np.empty(0)] * (h + 1)
    z[h] = np.array(arrays[h], copy=True)
    for t in range(h - 1, -1, -1):
        i = h + 1 - t  # height of depth t (leaves have height 1)
        top, below = b**i, b ** (i - 1)  # exact integers, then one rounding each
        own = (top - below) / (top - 1)
        kids = (below - 1) / (top - 1)
        z[t] = own * arrays[t] + kids * z[t + 1].reshape(-1, b).sum(axis=1)
    # Down pass, in place over z (each level is needed once more, for its sums).
    x = z[0]
    for t in range(1, h + 1):
        correction = (x - z[t].reshape(-1, b).sum(axis=1)) / b
        z[t] += np.repeat(correction, b)
        x = z[t]
    return x


def levels(answers: Any, n: int, branching: int) -> list[np.ndarray]:
    """The answers of `selection.hierarchy((n,), branching)` split by depth.

    That strategy lists the n cells first (its Identity block), then the
    internal nodes top-down, left to right within a depth. Returns the views
    [root, depth 1, …, depth h − 1, cells] that `solve_levels` takes.
    """
    b = check.integer(branching, "branching", minimum=2)
    h = _height(n, b)
    y = np.asarray(answers, dtype=np.float64).reshape(-1)
    internal = (n - 1) // (b - 1)
    if y.size != n + internal:
        raise ValueError(
            f"a complete {b}-ary tree over {n} cells has {n + internal} nodes; got {y.size} answers"
        )
    out: list[np.ndarray] = []
    start = n
    for t in range(h):
        out.append(y[start : start + b**t])
        start += b**t
    out.append(y[:n])
    return out
