"""Tree-based least-squares inference (Hay, Rastogi, Miklau & Suciu, "Boosting
the accuracy of differentially private histograms through consistency",
PVLDB 3(1), 2010, §4.2): a **Public** operator, the specialised baseline the
general LSMR inference is compared with in the paper's inference figure (§10.2).

The input is a complete b-ary tree of noisy counts: every node of a tree of
height h over n = bʰ cells, each answered once with the same noise scale
(what `selection.hierarchy((n,), b)` measured with one Vector Laplace call
gives; b = 2 is H2). For such trees the ordinary least-squares estimate has a
closed form computed in two linear passes (Hay et al., Theorem 3). With the
height of a node i = 1 at the leaves and i = h + 1 at the root, and ỹ the
noisy counts:

* up pass:   z_v = ỹ_v at a leaf, otherwise
             z_v = (bⁱ − bⁱ⁻¹)/(bⁱ − 1) · ỹ_v + (bⁱ⁻¹ − 1)/(bⁱ − 1) · Σ_{c child of v} z_c;
* down pass: x̄_root = z_root, and for a child u of v
             x̄_u = z_u + (x̄_v − Σ_{c child of v} z_c) / b.

The leaves of x̄ are the least-squares estimate of the data vector (the same
vector `inference.least_squares` computes on the same measurement, in O(n)
time and memory instead of an iterative solve). The method needs exactly this
structure: one noise scale, every level measured, a complete tree.

Functions:

* `solve_levels(levels, branching)` — the two passes on the noisy counts given
  level by level (root first, leaves last, left to right within a level).
* `levels(answers, n, branching)` — split the answers of
  `selection.hierarchy((n,), branching)` (cells first, then the internal
  nodes top-down) into those levels.
* `least_squares(measurements, branching=...)` — the operator on a list of one
  `Measurement` of that hierarchy (checked), returning the estimate of the
  root vector like `inference.least_squares`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..matrix import EMatrix
from ..measurement import Measurement

__all__ = ["least_squares", "levels", "solve_levels"]


def _check_branching(branching: Any) -> int:
    if isinstance(branching, bool) or not isinstance(branching, (int, np.integer)):
        raise TypeError(f"branching must be an integer, got {type(branching).__name__}")
    if branching < 2:
        raise ValueError(f"branching must be at least 2, got {branching}")
    return int(branching)


def _height(n: int, b: int) -> int:
    """h with bʰ = n exactly, or a ValueError (the tree must be complete)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
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
    b = _check_branching(branching)
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
    b = _check_branching(branching)
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


def least_squares(measurements: Sequence[Measurement], *, branching: int = 2) -> np.ndarray:
    """Tree-based least squares (Hay et al. 2010) on one hierarchy measurement.

    `measurements` is a list holding one `Measurement` whose `query_on_root`
    is exactly `selection.hierarchy((n,), branching)` for n = branchingʰ (a
    1-D root vector). Returns the estimate of the root vector, equal (up to
    rounding) to `inference.least_squares(measurements)`.
    """
    from . import selection

    if isinstance(measurements, Measurement) or len(measurements) != 1:
        raise ValueError("tree-based inference takes a list of exactly one Measurement")
    (m,) = measurements
    if not isinstance(m, Measurement):
        raise TypeError(f"expected a Measurement, got {type(m).__name__}")
    b = _check_branching(branching)
    shape = tuple(m.root_shape)
    if len(shape) != 1:
        raise ValueError(f"tree-based inference is for 1-D vectors; the root has shape {shape}")
    n = shape[0]
    _height(n, b)
    expected: EMatrix = selection.hierarchy((n,), b)
    if m.query_on_root.shape != expected.shape or m.query_on_root != expected:
        raise ValueError(
            f"the measurement is not the complete {b}-ary hierarchy over {n} cells "
            "(selection.hierarchy); use inference.least_squares"
        )
    return solve_levels(levels(m.answers, n, b), b)
