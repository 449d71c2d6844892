"""Workload builders (paper §7.5, Examples 2–4): identity, total, prefix,
range queries (explicit, all, DPBench-style random), and marginals.

Every builder returns an implicit matrix over the flattened (C-order) data
vector of a domain with the given shape.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .. import _validate as check
from ..matrix import EMatrix, Identity, Kronecker, Prefix, RangeQueries, Total, VStack

__all__ = [
    "all_range",
    "identity",
    "marginal",
    "marginals",
    "prefix",
    "prefix_marginal",
    "random_range",
    "range_queries",
    "total",
]

Shape = int | Sequence[int]


def identity(shape: Shape) -> EMatrix:
    """One query per cell: the histogram itself."""
    return Identity(math.prod(check.shape(shape)))


def total(shape: Shape) -> EMatrix:
    """The single query counting every record."""
    return Total(math.prod(check.shape(shape)))


def prefix(n: int) -> EMatrix:
    """All n prefix queries [0, j] of a 1-D domain: the empirical CDF."""
    return Prefix(check.shape(n, "n")[0])


def prefix_marginal(shape: Shape, axis: int) -> EMatrix:
    """The CDF of one attribute: Prefix on `axis`, summed over the others."""
    dims = check.shape(shape)
    axis = check.axis(axis, len(dims))
    return Kronecker([Prefix(s) if i == axis else Total(s) for i, s in enumerate(dims)])


def range_queries(shape: Shape, lower: np.ndarray, upper: np.ndarray) -> RangeQueries:
    """Explicit range queries with inclusive corners (arrays of shape (m, d))."""
    return RangeQueries(check.shape(shape), lower, upper)


def all_range(n: int) -> RangeQueries:
    """Every interval [i, j], 0 ≤ i ≤ j < n, of a 1-D domain (n(n+1)/2 queries)."""
    size = check.shape(n, "n")[0]
    lo, hi = np.triu_indices(size)
    return RangeQueries(size, lo.reshape(-1, 1), hi.reshape(-1, 1))


def random_range(shape: Shape, count: int, seed: int | None = 0) -> RangeQueries:
    """`count` random ranges as in DPBench's RandomRange (Hay et al., SIGMOD
    2016; εktelo's `RandomRange` with no shape list): on each axis the range's
    length is uniform in 1..size and its position uniform among the places
    where it fits. Seeded and reproducible (`seed=None` draws fresh ranges)."""
    dims = check.shape(shape)
    count = check.positive_int(count, "count")
    rng = np.random.default_rng(seed)
    sizes = np.array(dims, dtype=np.int64)
    lengths = rng.integers(1, sizes + 1, size=(count, len(dims)))
    lower = rng.integers(0, sizes - lengths + 1)
    return RangeQueries(dims, lower, lower + lengths - 1)


def marginal(shape: Shape, attributes: Sequence[int]) -> EMatrix:
    """The marginal on `attributes` (axis indices): Identity on those, Total elsewhere."""
    dims = check.shape(shape)
    keep = set(attributes)
    if not keep <= set(range(len(dims))):
        raise ValueError(f"marginal attributes {sorted(keep)} out of range for {len(dims)} axes")
    return Kronecker([Identity(s) if i in keep else Total(s) for i, s in enumerate(dims)])


def marginals(shape: Shape, k: int) -> EMatrix:
    """All k-way marginals (Example 4) as a VStack of Kronecker products."""
    dims = check.shape(shape)
    k = check.integer(k, "k", minimum=0)
    if k > len(dims):
        raise ValueError(f"k must be an integer in [0, {len(dims)}], got {k!r}")
    return VStack([marginal(dims, c) for c in itertools.combinations(range(len(dims)), k)])
