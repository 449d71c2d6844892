"""Reference trees for the hierarchy tests (tests/matrix and tests/inference):
a literal breadth-first construction of the balanced b-ary tree over a
domain, to check `Hierarchy` and the tree solvers against."""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np


def ref_parts(lo: int, hi: int, b: int) -> list[tuple[int, int]]:
    """min(b, side) near-equal parts of [lo, hi], larger ones first."""
    side = hi - lo + 1
    k = min(b, side)
    out, start = [], lo
    for i in range(k):
        size = side // k + (1 if i < side % k else 0)
        out.append((start, start + size - 1))
        start += size
    return out


def ref_boxes(dims, b, root=True):
    """(the depth where each cell became a leaf, [(box, depth)] of the inner
    nodes in breadth-first order, the root left out unless `root`)."""
    leaf_depth = np.zeros(dims, dtype=int)
    inner = []
    queue = deque([(tuple((0, s - 1) for s in dims), 0)])
    while queue:
        box, depth = queue.popleft()
        if all(lo == hi for lo, hi in box):
            leaf_depth[tuple(lo for lo, _ in box)] = depth
            continue
        if root or depth > 0:
            inner.append((box, depth))
        for child in itertools.product(*[ref_parts(lo, hi, b) for lo, hi in box]):
            queue.append((child, depth + 1))
    return leaf_depth, inner


def ref_dense(dims, b, root=True, weights=None) -> np.ndarray:
    """Leaves (C order, weighted by the depth where each cell became a leaf),
    then the inner nodes in breadth-first order, each weighted by its depth."""
    n = math.prod(dims)
    leaf_depth, inner = ref_boxes(dims, b, root)
    w = [1.0] * 64 if weights is None else list(weights)
    rows = [np.diag([w[d] for d in leaf_depth.reshape(-1)])]
    for box, depth in inner:
        x = np.zeros(dims)
        x[tuple(slice(lo, hi + 1) for lo, hi in box)] = w[depth]
        rows.append(x.reshape(1, n))
    return np.vstack(rows)
