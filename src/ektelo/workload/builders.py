"""Workload builders (paper §7.5, Examples 2–4): identity, total, prefix,
range queries (explicit, all, DPBench-style random), and marginals; and the
weighted queries of sums (issue #38): a sum of a numeric attribute over a
group is Σ value(cell)·count(cell), a row of a workload matrix like any count,
so sums, counts (and the means and quantiles derived from them) are answered
jointly by one strategy.

Every builder returns an implicit matrix over the flattened (C-order) data
vector of a domain with the given shape. The weighted builders keep the
structure: a Kronecker product with one small dense *value factor* ([v] or
[v; 1]) on the summed attribute, so HDMM optimises the value factor apart
from the groups' factors and the workload scales like a marginal.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .. import _validate as check
from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Kronecker,
    Prefix,
    RangeQueries,
    Total,
    VStack,
)

__all__ = [
    "all_range",
    "group_sums",
    "identity",
    "marginal",
    "marginals",
    "prefix",
    "prefix_marginal",
    "random_range",
    "range_queries",
    "range_sums",
    "total",
    "value_factor",
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


# -- weighted queries: sums (issue #38) ---------------------------------------------
def _values(values: Sequence[float] | np.ndarray, n: int | None = None) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("a sum's values must be finite numbers, one per cell")
    if n is not None and v.size != n:
        raise ValueError(f"{v.size} values for an attribute of {n} cells")
    return v


def value_factor(values: Sequence[float] | np.ndarray, *, counts: bool = False) -> EMatrix:
    """The value factor of a sum: the row vᵀ (Σ value·count), and with
    `counts` the rows [vᵀ; 1ᵀ] (the sum, then the count) — what a mean is
    the ratio of. `values` holds each cell's representative value
    (`ektelo.workload.values.representatives`)."""
    v = _values(values)
    return Dense(np.vstack([v, np.ones_like(v)]) if counts else v.reshape(1, -1))


def group_sums(shape: Shape, axis: int, values: Sequence[float] | np.ndarray,
               by: Sequence[int] = (), *, counts: bool = False,
               totals: bool = False) -> EMatrix:
    """Sums of the attribute on `axis` (cell values `values`) for every cell
    of the marginal on the `by` axes — per group, or per marginal cell —
    and with `counts` the groups' counts too: value_factor ⊗ Identity on
    `by` ⊗ Total elsewhere. With `totals`, every `by` factor is
    [Identity; Total]: the sums over every sub-breakdown as well (each
    group, each attribute's groups summed over the others, the grand total).
    Rows in C order over the factors: sums of all groups, then counts."""
    dims = check.shape(shape)
    axis = check.axis(axis, len(dims))
    keep = [check.axis(b, len(dims)) for b in by]
    if axis in keep or len(set(keep)) != len(keep):
        raise ValueError(f"group_sums: by axes {list(by)} must be distinct and not the summed "
                         f"axis {axis}")
    factors: list[EMatrix] = []
    for i, s in enumerate(dims):
        if i == axis:
            factors.append(value_factor(_values(values, s), counts=counts))
        elif i in keep:
            factors.append(VStack([Identity(s), Total(s)]) if totals else Identity(s))
        else:
            factors.append(Total(s))
    return factors[0] if len(factors) == 1 else Kronecker(factors)


def range_sums(shape: Shape, axis: int, values: Sequence[float] | np.ndarray,
               lower: np.ndarray, upper: np.ndarray) -> EMatrix:
    """Sums of the attribute on `axis` over range queries (inclusive corners,
    arrays of shape (m, d)): R · (I ⊗ diag(v) ⊗ I), each range's count
    weighted cell by cell by the value of the summed attribute."""
    dims = check.shape(shape)
    axis = check.axis(axis, len(dims))
    R = RangeQueries(dims, lower, upper)
    factors: list[EMatrix] = [Diagonal(_values(values, s)) if i == axis else Identity(s)
                              for i, s in enumerate(dims)]
    return R @ (factors[0] if len(factors) == 1 else Kronecker(factors))
