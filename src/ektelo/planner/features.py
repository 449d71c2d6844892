"""Tier 1's noisy features (issue #29): what the learned planner may know
about the data, bought with a small declared share of the budget.

Pythia (Kotsogiannis et al., SIGMOD 2017) chooses an algorithm from public
facts plus a few cheap noisy features; DPBench (Hay et al., SIGMOD 2016,
§6) finds the data's scale × ε ("signal") and its shape decide which
algorithm wins. `measure_features` buys both with ONE Laplace measurement
through the kernel: x summed over a public partition of its domain into at
most 16 contiguous blocks (16 in 1-D, 4×4 in 2-D), then the identity on the
blocks. The total is the sum of the noisy blocks (no second charge), and
the shape features (`top_share`, `empty_share`) are post-processing of the
same noisy counts. Nothing else touches x.

A custodian may instead *declare* the table's row count public (a census
total, a published headcount; approximate is fine: the trees split on
log10 of it). Then `Features.declared` holds only public facts, no budget
is spent on features, and only `PUBLIC_FEATURES` may be split on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as check
from ..matrix import Identity, Partition
from ..port import ProtectedVector

__all__ = ["FEATURE_NAMES", "KINDS", "MAX_BLOCKS", "PUBLIC_FEATURES", "Features",
           "coarse_partition", "measure_features"]

# The workload kinds of `ektelo.workload.spec` (with its friendly aliases):
# the planner refuses anything else before spending.
KINDS = ("identity", "histogram", "prefix", "cdf", "ranges", "random-ranges", "file",
         "marginals", "custom", "aggregates")
# At most this many coarse blocks: enough to see where the mass is, few
# enough that each noisy count stays large against its noise.
MAX_BLOCKS = 16
# The names `Features.named()` returns: what a decision table may split on.
FEATURE_NAMES = ("dims", "log10_cells", "is_prefix", "log10_eps", "log10_total",
                 "log10_signal", "top_share", "empty_share")
# The features a declared row count makes public: the shape features need
# the noisy coarse histogram, so a declared-rows tree may not split on them.
PUBLIC_FEATURES = ("dims", "log10_cells", "is_prefix", "log10_eps", "log10_total",
                   "log10_signal")


@dataclass(frozen=True)
class Features:
    """Public facts and the noisy features of one private vector.

    `dims`, `cells`, `kind` and `eps` (the ε the chosen plan will run with)
    are public; `total`, `coarse` (the noisy coarse histogram, row-major
    blocks) are noisy, already paid for; `coarse_scale` is the Laplace scale
    of each coarse count (public: it depends only on ε and the stability)."""

    dims: int
    cells: int
    kind: str
    eps: float
    total: float
    coarse: tuple[float, ...]
    coarse_scale: float
    declared: bool = False

    @classmethod
    def from_declared_rows(cls, *, dims: int, cells: int, kind: str, eps: float,
                           rows: float) -> Features:
        """Public facts only: `rows` is the row count the custodian declared
        public (nothing measured, nothing spent); `eps` the ε the plan runs
        with. No coarse histogram: only `PUBLIC_FEATURES` mean anything."""
        return cls(dims=dims, cells=cells, kind=check_kind(kind), eps=check.positive(eps, "eps"),
                   total=check.positive(rows, "rows"), coarse=(), coarse_scale=0.0,
                   declared=True)

    def named(self) -> dict[str, float]:
        """Every numeric feature a decision table may split on, by name
        (`FEATURE_NAMES`): log10_signal = log10(max(total, 1)·ε) is
        DPBench's scale×ε; top_share is the share of the clamped (≥ 0)
        coarse mass in its two largest blocks (2/k, uniform, when no block
        is positive); empty_share the fraction of blocks whose noisy count is
        below twice the noise scale (indistinguishable from empty)."""
        coarse = np.asarray(self.coarse, dtype=np.float64)
        k = max(coarse.size, 1)
        clamped = np.clip(coarse, 0.0, None)
        mass = float(clamped.sum())
        top = float(np.sort(clamped)[::-1][:2].sum()) / mass if mass > 0 else min(2, k) / k
        empty = float(np.mean(coarse < 2 * self.coarse_scale)) if coarse.size else 1.0
        total = max(self.total, 1.0)
        return {
            "dims": float(self.dims),
            "log10_cells": math.log10(self.cells),
            "is_prefix": 1.0 if self.kind in ("prefix", "cdf") else 0.0,
            "log10_eps": math.log10(self.eps),
            "log10_total": math.log10(total),
            "log10_signal": math.log10(total * self.eps),
            "top_share": top,
            "empty_share": empty,
        }


def coarse_partition(shape: tuple[int, ...]) -> Partition:
    """The public partition of a domain of `shape` into contiguous blocks:
    along each axis min(size, ⌊16^(1/d)⌋) nearly equal runs (`np.array_split`),
    blocks numbered row-major — 16 in 1-D, 4×4 in 2-D, 2×2×2 in 3-D."""
    shape = tuple(int(s) for s in shape)
    per_axis = max(1, math.floor(MAX_BLOCKS ** (1 / len(shape)) + 1e-9))
    labels = np.zeros(shape, dtype=np.int64)
    for axis, size in enumerate(shape):
        b = min(size, per_axis)
        runs = np.concatenate([np.full(len(r), i) for i, r in
                               enumerate(np.array_split(np.arange(size), b))])
        view = [1] * len(shape)
        view[axis] = size
        labels = labels * b + runs.reshape(view)
    return Partition(labels.reshape(-1), shape)


def check_kind(kind: object) -> str:
    """A workload kind the planner knows (`KINDS`), else a clear error."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"unknown workload kind {kind!r}; the planner knows "
                         f"{', '.join(KINDS)}")
    return kind


def measure_features(x: ProtectedVector, eps: float, *, kind: str, plan_eps: float) -> Features:
    """Charges exactly `eps` through the kernel: one Laplace measurement of
    x reduced by a public contiguous-block partition (reduce_by_partition,
    then laplace on the identity of the blocks). Nothing else touches x.

    `plan_eps` (public) is the ε the chosen plan will run with; it is
    recorded in the features (log10_eps, log10_signal). Every argument is
    checked before the charge."""
    eps = check.positive(eps, "eps")
    plan_eps = check.positive(plan_eps, "plan_eps")
    kind = check_kind(kind)
    if not isinstance(x, ProtectedVector):
        raise TypeError(f"measure_features needs a ProtectedVector, got {type(x).__name__}")
    shape = tuple(int(s) for s in x.shape)
    P = coarse_partition(shape)
    blocks = x.reduce_by_partition(P)  # Private, 1-stable: sums over public blocks
    m = blocks.laplace(Identity(P.num_groups), eps=eps)  # Private→Public: the one charge
    coarse = tuple(float(v) for v in m.answers)
    return Features(dims=len(shape), cells=int(math.prod(shape)), kind=kind, eps=plan_eps,
                    total=float(sum(coarse)), coarse=coarse, coarse_scale=float(m.noise_scale))
