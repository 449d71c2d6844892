"""Striped plans for high-dimensional data (εktelo §9.2, Algorithms 5–6):
split the domain into 1-D stripes along one attribute, run a 1-D subplan on
every stripe in parallel (parallel composition: ε is charged once), and infer
jointly on the full domain."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lstsq

from ..matrix import (
    Diagonal,
    EMatrix,
    Identity,
    Kronecker,
    Partition,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ..operators import partition as partition_ops
from ..operators import selection
from ..operators.selection import greedy_h_many
from ._registry import register
from .budget import check_eps, split
from .common import estimate

__all__ = ["dawa_striped", "hb_striped", "hb_striped_kron"]

def _axis(x: Any, axis: int) -> int:
    if not -len(x.shape) <= axis < len(x.shape):
        raise ValueError(f"stripe axis {axis} out of range for a {len(x.shape)}-D vector")
    return axis % len(x.shape)


@register(
    "hb_striped",
    citation="εktelo §9.2, Algorithm 5",
    summary="HB on every 1-D stripe along one attribute, joint least squares",
    data_dependent=False,
)
def hb_striped(x: Any, workload: EMatrix, eps: float, *, axis: int = -1) -> np.ndarray:
    """HB-Striped: split x into stripes along `axis`, measure HB on each with
    all of ε (the stripes are disjoint), LS over all stripes. Returns x̂."""
    eps, axis = check_eps(eps), _axis(x, axis)
    R = partition_ops.stripe(x.shape, axis)
    strategy = selection.hb((x.shape[axis],))
    measurements = [s.laplace(strategy, eps=eps) for s in x.split_by_partition(R)]
    return estimate(measurements)  # block diagonal: solved stripe by stripe


@register(
    "hb_striped_kron",
    citation="εktelo §9.2, Algorithm 6",
    summary="HB on the stripe attribute ⊗ Identity on the others, one measurement",
    data_dependent=False,
)
def hb_striped_kron(x: Any, workload: EMatrix, eps: float, *, axis: int = -1) -> np.ndarray:
    """HB-Striped_kron: the same measurements as `hb_striped`, selected at once
    as HB(axis) ⊗ Identity(others); all of ε to one Laplace call; LS."""
    eps, axis = check_eps(eps), _axis(x, axis)
    strategy = selection.stripe(x.shape, axis, selection.hb((x.shape[axis],)))
    return estimate([x.laplace(strategy, eps=eps)])


@register(
    "dawa_striped",
    citation="εktelo §9.2 (plan 18), after Li, Hay & Miklau 2014",
    summary="DAWA on every 1-D stripe along one attribute, joint least squares",
    data_dependent=True,
)
def dawa_striped(
    x: Any, workload: EMatrix, eps: float, *, axis: int = -1, ratio: float = 0.25
) -> np.ndarray:
    """DAWA-Striped: on each stripe (in parallel, so ε is charged once):
    ratio·ε to DAWA's private partition, the rest to GreedyH's strategy for
    the workload restricted to the stripe, on the groups; LS over all stripes.

    The stripes' strategies are measured by one Laplace call on x: the union
    of every stripe's GreedyH queries, each group interval written as the
    range of its cells (the same answers as measuring the stripe's group
    totals). The stripes share no cell, so the union's sensitivity — computed
    by the kernel — is the largest of theirs (1 for GreedyH) and its noise
    that of each stripe's own call; the stripes' partitions are charged
    ratio·ε once through their split (parallel composition, Algorithm 2), the
    union (1 − ratio)·ε on x: ε in all, as stripe-by-stripe measurement."""
    eps, axis = check_eps(eps), _axis(x, axis)
    eps_part, eps_meas = split(eps, ratio, 1 - ratio)
    R = partition_ops.stripe(x.shape, axis)
    stripe_workloads = _stripe_workloads(workload, x.shape, axis)
    problems: dict[tuple[int, bytes], tuple[Partition, EMatrix]] = {}  # GreedyH is deterministic
    partitions, keys = [], []
    for s, W_s in zip(x.split_by_partition(R), stripe_workloads, strict=True):
        P = s.dawa_partition(eps=eps_part, ratio=ratio)  # Private→Public
        key = (id(W_s), P.groups.tobytes())
        problems.setdefault(key, (P, W_s))  # Public from here on: W_s reduced by P
        partitions.append(P)
        keys.append(key)
    strategies = dict(zip(problems, greedy_h_many(list(problems.values())), strict=True))
    union = _StripeStrategies(R, axis, partitions, [strategies[k] for k in keys], keys)
    measurement = x.laplace(union.matrix(), eps=eps_meas)  # Private→Public
    return _estimate_stripe_union(union, measurement)


class _StripeStrategies:
    """Every stripe's GreedyH strategy on its DAWA groups (public), and their
    union as range queries on the cells of x (`matrix`).

    Stripe g's groups are intervals of the stripe in order (DAWA on a 1-D
    vector), so its query over groups [a, b] with weight c is c times the sum
    of the stripe's cells [first(a), last(b)]: a range along `axis` at the
    stripe's coordinates on the other axes.
    """

    def __init__(
        self,
        R: Partition,
        axis: int,
        partitions: list[Partition],
        strategies: list[EMatrix],
        keys: list[Hashable],
    ):
        self.R, self.axis, self.keys = R, axis, keys
        self.cells = _cells_by_stripe(R)
        self.sizes = [P.sizes for P in partitions]
        self.weights, self.lower, self.upper = [], [], []  # per stripe: c, group ranges
        for P, A in zip(partitions, strategies, strict=True):
            if not (
                isinstance(A, Product)
                and isinstance(A.A, Diagonal)
                and isinstance(A.B, RangeQueries)
                and not A.B.transposed
            ):
                raise TypeError(f"GreedyH returned {A!r}, not weighted ranges")
            if np.any(np.diff(P.groups) < 0):  # labels in order of first cell
                raise ValueError("a stripe's DAWA groups are not intervals of the stripe")
            self.weights.append(A.A.d)
            self.lower.append(A.B.lower[:, 0])
            self.upper.append(A.B.upper[:, 0])
        self.offsets = np.cumsum([0] + [c.size for c in self.weights])

    def matrix(self) -> EMatrix:
        """The union: Product(Diagonal(c), RangeQueries(x's shape, …)), stripe by stripe."""
        shape = self.R.domain_shape
        first = np.array([c[0] for c in self.cells])
        corner = np.column_stack(np.unravel_index(first, shape))  # the stripe's cell 0
        count = np.diff(self.offsets)
        lower = np.repeat(corner, count, axis=0)
        upper = lower.copy()
        for g, (P, a, b) in enumerate(zip(self.sizes, self.lower, self.upper, strict=True)):
            starts = np.concatenate(([0], np.cumsum(P)))  # cell offsets of the groups
            rows = slice(self.offsets[g], self.offsets[g + 1])
            lower[rows, self.axis] = corner[g, self.axis] + starts[a]
            upper[rows, self.axis] = corner[g, self.axis] + starts[b + 1] - 1
        return Product(Diagonal(np.concatenate(self.weights)), RangeQueries(shape, lower, upper))

    def on_groups(self, g: int) -> np.ndarray:
        """Stripe g's strategy on its groups, dense (rows × groups)."""
        a, b, k = self.lower[g], self.upper[g], self.sizes[g].size
        rows = np.arange(a.size)
        M = np.zeros((a.size, k + 1))
        M[rows, a] = 1.0
        M[rows, b + 1] = -1.0  # a ≤ b: never the same entry
        return np.cumsum(M, axis=1)[:, :k] * self.weights[g][:, None]


def _estimate_stripe_union(union: _StripeStrategies, m: Any) -> np.ndarray:
    """LS over the union's measurement, on x's domain, stripe by stripe.

    The union is block diagonal over the stripes (each query reads one
    stripe's cells), so its minimum-norm LS solution is, per stripe, the
    minimum-norm solution of M·P x = y (M the stripe's strategy on its k
    groups, P the k × cells group sums, y its answers). With D = P Pᵀ (the
    group sizes), x = Pᵀ D^(−1/2) w for the minimum-norm LS solution w of
    (M D^(1/2)) w = y: P x = D^(1/2) w reaches every LS optimum and
    ‖x‖ = ‖w‖. (M D^(1/2) has the singular values of M·P.) So a k-column
    solve per stripe, not a cells-column one; stripes with equal keys (the
    same partition and strategy) share one solve with several right-hand sides.
    """
    x_hat = np.zeros(union.R.size)
    batches: dict[Hashable, list[int]] = {}
    for g, key in enumerate(union.keys):
        batches.setdefault(key, []).append(g)
    for members in batches.values():
        g = members[0]
        root = np.sqrt(union.sizes[g])
        Y = np.column_stack([m.answers[union.offsets[i] : union.offsets[i + 1]] for i in members])
        # min-norm LS by complete orthogonal factorisation (xGELSY): the same
        # solution as the SVD's, a third of its time at these sizes
        w = lstsq(union.on_groups(g) * root, Y, lapack_driver="gelsy", check_finite=False)[0]
        Z = w / root[:, None]
        spread = np.repeat(Z, union.sizes[g], axis=0)  # a group's total, evenly on its cells
        x_hat[np.column_stack([union.cells[i] for i in members])] = spread
    return x_hat


def _stripe_workloads(W: EMatrix, shape: tuple[int, ...], axis: int) -> list[EMatrix]:
    """For every stripe (in the order of `partition.stripe`), a matrix with
    the same Gram matrix as W restricted to the stripe's cells (W·Sᵍ, Sᵍ the
    stripe's column selection). GreedyH depends on its workload only through
    the Gram matrix (its objective is the matrix-mechanism error
    tr(Wᵀ W (MᵀM)⁺)), so this is the per-stripe workload of the original
    εktelo DAWA-Striped (`W * P_i.T`) in compact form: for W = ⊗ⱼ Wⱼ it is
    W_axis scaled by Πⱼ≠axis ‖Wⱼ[:, vⱼ]‖₂, vⱼ the stripe's coordinates; a
    union of products gives a union of scaled axis factors. Stripes with
    equal weights share one matrix object. For n-D range queries
    (`RangeQueries` on x's shape) it is the 1-D ranges, along `axis`, of the
    queries whose box contains the stripe: exactly W·Sᵍ without its zero
    rows, with no 2-D product per stripe (`_stripe_ranges`)."""
    if not isinstance(W, EMatrix):
        raise TypeError(f"dawa_striped needs the workload as an EMatrix, got {type(W).__name__}")
    n = math.prod(shape)
    if W.shape[1] != n:
        raise ValueError(f"workload has {W.shape[1]} columns; the data vector has {n} cells")
    if isinstance(W, RangeQueries) and not W.transposed and W.domain_shape == tuple(shape):
        return _stripe_ranges(W, shape, axis)
    others = [d for i, d in enumerate(shape) if i != axis]
    count = math.prod(others)
    terms = _gram_terms(W, shape, axis)
    if terms is None:  # any other matrix: restrict it column by column (slower)
        R = partition_ops.stripe(shape, axis)
        return [Product(W, _selection(R.cells(g), n)) for g in range(count)]
    weights = np.column_stack([w for _, w in terms])
    shared: dict[bytes, EMatrix] = {}
    out = []
    for g in range(count):
        key = weights[g].tobytes()
        if key not in shared:
            pairs = zip((A for A, _ in terms), weights[g], strict=True)
            blocks = [Weighted(A, math.sqrt(w)) for A, w in pairs if w > 0]
            if not blocks:  # the workload never looks at this stripe
                blocks = [A for A, _ in terms]
            shared[key] = blocks[0] if len(blocks) == 1 else VStack(blocks)
        out.append(shared[key])
    return out


def _stripe_ranges(W: RangeQueries, shape: tuple[int, ...], axis: int) -> list[EMatrix]:
    """Per stripe (C order of the other axes' coordinates, as `partition.stripe`):
    the 1-D ranges along `axis` of W's queries whose box contains the stripe
    (a stripe no query meets: one query of zero weight, as W·Sᵍ is zero).

    The ranges are handed over as `Product(Identity, RangeQueries)`, outside
    GreedyH's range form, so GreedyH weighs them through their Gram matrix,
    as it weighed W·Sᵍ: the same objective and strategies as the general
    path, at the cost of a q×256 range product instead of a 2-D one. (In
    range form GreedyH would also try its "canonical" objective and find
    other strategies — on DPBench Adult_2D 0.80–0.98× the expected error of
    these, for ~1.6× the selection time.)"""
    others = [i for i in range(len(shape)) if i != axis]
    coords = np.indices([shape[i] for i in others]).reshape(len(others), -1).T
    lo_o, hi_o = W.lower[:, others], W.upper[:, others]
    lo_a, hi_a = W.lower[:, axis], W.upper[:, axis]
    shared: dict[bytes, EMatrix] = {}
    out: list[EMatrix] = []
    for c in coords:
        hit = np.all((lo_o <= c) & (c <= hi_o), axis=1)
        key = np.packbits(hit).tobytes()
        if key not in shared:
            ranges: EMatrix = (
                RangeQueries(shape[axis], lo_a[hit], hi_a[hit])
                if hit.any()
                else Weighted(Total(shape[axis]), 0.0)
            )
            shared[key] = Product(Identity(ranges.shape[0]), ranges)
        out.append(shared[key])
    return out


def _gram_terms(
    W: EMatrix, shape: tuple[int, ...], axis: int
) -> list[tuple[EMatrix, np.ndarray]] | None:
    """W's Gram restricted to stripe g as Σₖ w_k[g]·A_kᵀA_k, as pairs (A_k, w_k)
    for Kronecker products with one factor per attribute, identities, and
    weighted unions of those; None for anything else."""
    others = [d for i, d in enumerate(shape) if i != axis]
    if isinstance(W, Identity):
        return [(Identity(shape[axis]), np.ones(math.prod(others)))]
    if isinstance(W, Weighted):
        inner = _gram_terms(W.base, shape, axis)
        return None if inner is None else [(A, w * W.weight**2) for A, w in inner]
    if isinstance(W, VStack):
        parts = [_gram_terms(B, shape, axis) for B in W.blocks]
        return None if any(p is None for p in parts) else [t for p in parts for t in p]  # type: ignore[union-attr]
    if isinstance(W, Kronecker) and tuple(f.shape[1] for f in W.factors) == tuple(shape):
        w = np.ones(1)
        for i, f in enumerate(W.factors):
            if i != axis:
                w = np.multiply.outer(w, f.column_norms(2)).reshape(-1)
        return [(W.factors[axis], w)]
    return None


def _selection(cells: np.ndarray, n: int) -> Sparse:
    """The n × |cells| matrix whose column j is the unit vector of cells[j]."""
    k = cells.size
    return Sparse(sp.csr_matrix((np.ones(k), (cells, np.arange(k))), shape=(n, k)))


def _cells_by_stripe(R: Partition) -> list[np.ndarray]:
    """Every stripe's cells (C order), stripe by stripe."""
    return np.split(np.argsort(R.groups, kind="stable"), np.cumsum(R.sizes)[:-1])
