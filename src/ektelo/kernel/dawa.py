"""DAWA's private L1 partition (Li, Hay & Miklau, PVLDB 7(5) 2014, §3) — Private→Public.

`dawa_partition(x, eps, source)` reads the private count vector x and returns a
public `Partition` of x's domain into intervals (in the Hilbert order for 2-D x)
whose counts are nearly uniform: εktelo's operator PD (§6, Plan 9).

The algorithm.  A bucket b (an interval of the 1-D order) costs
    cost(b) = dev(x, b) + 1/ε₂,    dev(x, b) = Σ_{j∈b} |x_j − mean_b(x)|,
the L1 error of replacing b's counts by their mean plus the expected absolute
Laplace error of measuring b's total with the plan's remaining budget ε₂ =
eps·(1 − ratio)/ratio (the plan gives this operator ratio·ε; published
ρ = 0.25: DAWA paper §5, εktelo §9.2).  Candidate buckets get noisy costs and
a dynamic program returns the interval partition of least total noisy cost.
* approximate (`approximate=True`; also the default above n = 1024 cells): the
  2n − 1 aligned dyadic blocks [j·2^k, (j+1)·2^k) (the last of a level cut at
  n), DP on the binary tree, O(n log n), vectorised.  DAWA's published
  approximation (§3.3) keeps every power-of-two length at every offset
  (n log n candidates, O(n log² n) with a balanced tree); aligning them is what
  lets each cell lie in only one candidate per level (privacy T1 below).
* exact (`approximate=False`, default up to n = 1024, refused above 2048): all
  n(n+1)/2 intervals, O(n²) chain DP.
Costs are fixed-point integers r_b = round(2^S·dev(x, b)), S = 8, computed
exactly in int64; round-to-nearest moves one by ≤ ceil(2^S·|Δdev|).  One cell
changing by ±1 moves dev(x, b) only for b ∋ i, by < 2(1 − 1/|b|).

Privacy (neighbours: integer count vectors at L1 distance 1, i.e. one cell
changes by ±1; the kernel charges a c-stable integral transform c·ε, by the
same argument along a path of unit steps).
T1 (approximate).  The noisy output is the Laplace mechanism on the vector of
    the non-singleton blocks' costs (singletons have dev ≡ 0, a public value).
    A cell lies in exactly one block per level k = 1..K, whose r moves by
    ≤ u_k = ceil(2^(S+1)·(1 − 2^-k)); the vector's L1 sensitivity is
    D = Σ u_k ≈ 2^(S+1)·K, touching ≤ K ≤ D coordinates:
    `source.laplace(r, sensitivity=D, epsilon=eps, integral=True)` is eps-DP.
    Clamping noisy costs at 0 (as the published implementation does) and the
    tree DP are post-processing.
T2 (exact).  The released vector would be far too sensitive (a cell lies in
    ~n²/4 intervals), so the argument is report-noisy-min.  Every candidate
    (singletons too) gets independent discrete Laplace noise of scale
    λ ≥ D'/eps units, D' = 2^(S+2) + 1, and the DP returns the partition B* of
    least Σ_b (r_b + Z_b + C) in exact int64 arithmetic, ties broken by a
    fixed order on partitions (the longest last bucket first).  Any other
    partition B holds exactly one bucket b' ∋ i, as B* holds b*.  Lower Z_b*
    by D' units: pcost'(B) − pcost'(B*) ≥ pcost(B) − pcost(B*) + D' −
    |Δr_b*| − |Δr_b'| > pcost(B) − pcost(B*) ≥ 0 if b' ≠ b* (unchanged if
    b' = b*), so B* is still the output.  That shift changes one coordinate's
    probability by ≤ exp(D'/λ + 2⁻⁴⁶) ≤ e^eps (noise.py L4–L5): eps-DP.  The
    argument needs every noisy cost to enter the DP unclamped (a clamp at 0
    breaks the coupling), which lets the DP chase very negative noise and
    split flat regions; we therefore add a public per-bucket penalty of
    2λ (a winner's-curse correction, our choice: on DPBench data at n = 1024
    it restores the published implementation's accuracy; any public constant
    leaves the argument intact).
Everything after the noise is post-processing; only the partition is returned.

Differences from DPBench's L1partition (as read, to understand and not copied,
in a public Python port of its C++ `cutil`; the εktelo operator wraps it): it
uses noise (2 − 1/|b| − 1/n)/ε₁ on all n log n power-of-two intervals (or
all intervals), none on singletons, and clamps noisy costs at 0.  We found no
proof that this is ε₁-DP: the cost vector's sensitivity is ~2n (resp. ~n²),
and the report-noisy-min argument above needs twice the noise, noise on
singletons and no clamp.  So T1 and T2 replace it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from ..matrix import Partition
from ..matrix.partition import hilbert_order
from .noise import laplace_scale_for

__all__ = ["dawa_partition", "hilbert_order"]

_S = 8  # fixed-point bits of the costs
_SHIFT = (1 << (_S + 2)) + 1  # D' of T2, in cost units
_PENALTY = 2.0  # T2's public per-bucket penalty, in units of the noise scale λ
_EXACT_AUTO_MAX = 1024  # approximate=None: exact DP up to this many cells
_EXACT_MAX = 2048  # the exact DP's O(n²) tables are refused beyond this
_MAX_TOTAL = 2**36  # ‖x‖₁ bound that keeps every int64 sum exact
_DEV_BATCH = 1 << 13  # intervals per vectorised batch in `_interval_devs`
_DP_BLOCK = 16  # ends per vectorised step of `_chain_dp`


def dawa_partition(
    x: np.ndarray,
    eps: float,
    source: Any,
    *,
    approximate: bool | None = None,
    ratio: float = 0.25,
) -> Partition:
    """DAWA's private interval partition of x (1-D, or 2-D in the Hilbert order); eps-DP.

    eps: the budget of this operator (the plan's ratio·ε).  ratio: the plan's
    published split ρ = 0.25, used only to price a bucket's measurement noise
    1/ε₂ with ε₂ = eps·(1 − ratio)/ratio.  approximate: None picks the exact
    DP for n ≤ 1024 cells and the dyadic-block approximation above.
    Returns a Partition of x's shape whose groups are intervals of the order.
    """
    arr = _counts(x)
    eps = _positive(eps, "eps")
    ratio = _positive(ratio, "ratio")
    if ratio >= 1:
        raise ValueError(f"ratio must lie in (0, 1), got {ratio!r}")
    if approximate is not None and not isinstance(approximate, bool):
        raise TypeError(f"approximate must be None, True or False, got {approximate!r}")
    order = np.arange(arr.size) if arr.ndim == 1 else hilbert_order(arr.shape)
    v = arr.reshape(-1)[order]
    n = v.size
    exact = (n <= _EXACT_AUTO_MAX) if approximate is None else not approximate
    if exact and n > _EXACT_MAX:
        raise ValueError(
            f"the exact DAWA partition needs O(n²) memory; n = {n} > {_EXACT_MAX}: "
            "use approximate=True (or None)"
        )
    bucket_cost = round((1 << _S) * ratio / (eps * (1 - ratio)))  # 1/ε₂ in units (public)
    if exact:
        labels = _exact_partition(v, eps, source, bucket_cost)
    else:
        labels = _dyadic_partition(v, eps, source, bucket_cost)
    groups = np.empty(n, dtype=np.int64)
    groups[order] = labels
    return Partition(groups, arr.shape)


# ---- checks ----------------------------------------------------------------
def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def _counts(x: Any) -> np.ndarray:
    """x as an int64 array of 1 or 2 dimensions (a count vector), or a clear error."""
    arr = np.asarray(x)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise ValueError(f"x must be a non-empty 1-D or 2-D array, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"x must hold numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not (
        np.isfinite(arr).all() and np.array_equal(arr, np.round(arr))
    ):
        raise ValueError("x must hold integer counts (the privacy argument is for count vectors)")
    if float(np.abs(arr).sum(dtype=np.float64)) > _MAX_TOTAL:
        raise ValueError("x has ‖x‖₁ > 2^36: too large for exact fixed-point costs")
    return arr.astype(np.int64)


# ---- costs -----------------------------------------------------------------
def _units(T: np.ndarray, L: np.ndarray) -> np.ndarray:
    """round(2^S · T / L) exactly (T ≥ 0 integer, L ≥ 1): the fixed-point dev."""
    q, rem = np.divmod(T, L)
    return (q << _S) + ((rem << (_S + 1)) + L) // (2 * L)


def _laplace_int(costs: np.ndarray, sensitivity: int, eps: float, source: Any) -> np.ndarray:
    """costs + independent discrete Laplace noise of scale ≥ sensitivity/eps units, int64."""
    draw = source.laplace(
        costs.astype(np.float64), sensitivity=float(sensitivity), epsilon=eps, integral=True
    )
    values = np.asarray(draw.values)
    if values.size and float(np.abs(values).max()) * (values.size + 1) >= 2.0**62:
        raise RuntimeError("noisy DAWA costs left the exact int64 range")
    return values.astype(np.int64)


# ---- approximate: aligned dyadic blocks, DP on the tree (T1) ----------------
def _dyadic_partition(v: np.ndarray, eps: float, source: Any, bucket_cost: int) -> np.ndarray:
    n = v.size
    costs = _dyadic_costs(v)
    noisy: list[np.ndarray] = [np.full(n, bucket_cost, dtype=np.int64)]  # singletons: public
    if costs:
        sens = _dyadic_sensitivity(len(costs))
        flat = _laplace_int(np.concatenate(costs), sens, eps, source)
        flat = np.maximum(flat + bucket_cost, 0)  # post-processing from here on (T1)
        noisy += np.split(flat, np.cumsum([c.size for c in costs])[:-1])
    return _tree_dp(noisy, n)


def _dyadic_costs(v: np.ndarray) -> list[np.ndarray]:
    """Fixed-point dev of every aligned block of size 2^k, k = 1..K (2^K ≥ n)."""
    n = v.size
    pos = np.arange(n, dtype=np.int64)
    costs = []
    for k in range(1, (n - 1).bit_length() + 1):
        starts = np.arange(0, n, 1 << k)
        L = np.minimum(starts + (1 << k), n) - starts
        S = np.add.reduceat(v, starts)
        blk = pos >> k
        T = np.add.reduceat(np.abs(L[blk] * v - S[blk]), starts)
        costs.append(_units(T, L))
    return costs


def _dyadic_sensitivity(levels: int) -> int:
    """T1's L1 sensitivity D = Σ_{k=1..K} ceil(2^(S+1)·(1 − 2^-k)), in cost units."""
    return sum(-(-((1 << (_S + 1)) * ((1 << k) - 1)) >> k) for k in range(1, levels + 1))


def _tree_dp(noisy: list[np.ndarray], n: int) -> np.ndarray:
    """Least-cost cut of the dyadic tree; noisy[k][j] is block (k, j)'s cost."""
    levels = len(noisy)
    # bottom-up: keep a block whole when it is no dearer than its best split
    best, keep = [noisy[0]], [np.ones(n, dtype=bool)]
    for k in range(1, levels):
        child = best[k - 1]
        split = child[0::2].copy()
        split[: child[1::2].size] += child[1::2]  # a lone left child covers the block
        keep.append(noisy[k] <= split)
        best.append(np.where(keep[k], noisy[k], split))
    # top-down: a cell's bucket is the block kept whole below a chain of splits
    pos = np.arange(n, dtype=np.int64)
    offsets = np.cumsum([0] + [a.size for a in noisy])
    labels = np.full(n, -1, dtype=np.int64)
    active = np.ones(1, dtype=bool)
    for k in range(levels - 1, -1, -1):
        blk = pos >> k
        take = (active & keep[k])[blk]
        labels[take] = offsets[k] + blk[take]
        if k:
            active = np.repeat(active & ~keep[k], 2)[: noisy[k - 1].size]
    return labels


# ---- exact: all intervals, O(n²) chain DP (T2) --------------------------------
def _exact_partition(v: np.ndarray, eps: float, source: Any, bucket_cost: int) -> np.ndarray:
    n = v.size
    units = _interval_devs(v, fixed_point=True)
    penalty = bucket_cost + round(_PENALTY * _exact_noise_scale(eps))  # public
    # noisy[e, a]: the noisy cost of the last bucket [a, e) (row e holds every
    # candidate ending at e contiguously, the order the chain DP reads them in).
    noisy = np.zeros((n + 1) * (n + 1), dtype=np.int64)
    noisy[_intervals(n)[3]] = _laplace_int(units, _SHIFT, eps, source) + penalty
    start = _chain_dp(noisy.reshape(n + 1, n + 1))
    labels = np.empty(n, dtype=np.int64)
    e, g = n, 0
    while e > 0:
        labels[start[e] : e] = g
        e, g = int(start[e]), g + 1
    return labels


def _chain_dp(noisy: np.ndarray) -> list[int]:
    """The chain DP over the by-end table noisy[e, a] (cost of the last bucket
    [a, e)): best[0] = 0, best[e] = min over a < e of best[a] + noisy[e, a];
    returns start[e], the first (smallest) a attaining it — the longest last
    bucket, T2's fixed order on partitions. Exact int64 sums (bounded by
    `_laplace_int`'s range check; Python ints in the inner loop).

    The ends go in blocks of `_DP_BLOCK`: the candidates a before the block
    for all its ends in one vectorised step (first minimum), then the few
    a inside the block end by end, replacing the candidate only when strictly
    smaller — the same first minimum as one argmin over all a < e.
    """
    n = noisy.shape[0] - 1
    best = np.zeros(n + 1, dtype=np.int64)
    best_py = [0] * (n + 1)
    start = [0] * (n + 1)
    for e0 in range(1, n + 1, _DP_BLOCK):
        e1 = min(n + 1, e0 + _DP_BLOCK)
        outer = noisy[e0:e1, :e0] + best[:e0]
        first = outer.argmin(axis=1)
        value = outer[np.arange(e1 - e0), first].tolist()
        first = first.tolist()
        inner = noisy[e0:e1, e0:e1].tolist()
        for i in range(e1 - e0):
            v, a, row = value[i], first[i], inner[i]
            for j in range(i):  # a = e0 + j, in increasing order: strict < keeps the first
                candidate = best_py[e0 + j] + row[j]
                if candidate < v:
                    v, a = candidate, e0 + j
            best_py[e0 + i], start[e0 + i] = v, a
        best[e0:e1] = best_py[e0:e1]
    return start


@lru_cache(maxsize=16)
def _exact_noise_scale(eps: float) -> float:
    """T2's noise scale λ in cost units (public: a function of eps alone), memoised
    because a striped plan runs the exact DP once per stripe with the same eps."""
    return laplace_scale_for(float(_SHIFT), eps, integral=True)


@lru_cache(maxsize=4)
def _intervals(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every interval [a, e) of n cells, 0 ≤ a < e ≤ n, in `np.triu_indices`
    order (by start, then end): (a, e, length e − a, position e·(n+1) + a of
    its cost in the DP's by-end table). Public (depends on n only) and read-only;
    memoised because a striped plan asks for the same n once per stripe."""
    a, e = np.triu_indices(n + 1, k=1)
    out = (a.astype(np.int64), e.astype(np.int64))
    out += (out[1] - out[0], out[1] * (n + 1) + out[0])
    for arr in out:
        arr.setflags(write=False)
    return out


@lru_cache(maxsize=4)
def _double_lengths(n: int) -> np.ndarray:
    """2·(e − a) for every interval of `_intervals(n)` (the fixed-point divisor)."""
    out = 2 * _intervals(n)[2]
    out.setflags(write=False)
    return out


def _interval_devs(v: np.ndarray, *, fixed_point: bool = False) -> np.ndarray:
    """L·dev(v, [a, e)) = Σ_{a≤j<e} |L·v_j − S| (L = e − a, S the interval's sum)
    for every interval in `_intervals` order, exact in int64; with
    `fixed_point`, the costs r = `_units`(L·dev, L) = round(2^S·dev) instead.

    With c and s the count and sum of the interval's cells at or below
    ⌊S/L⌋ (those have L·v_j ≤ S, the others L·v_j > S) the sum is
    (S·c − L·s) + (L·(S − s) − S·(L − c)) = 2·X, X = S·c − L·s. c and s come
    from 2-D prefix tables over (position, value rank). The fixed-point cost
    is ⌊(2^(S+2)·X + L) / 2L⌋, `_units`' rounding (half up) in one exact
    division: X ≤ L·‖x‖₁ ≤ 2^47, so 2^(S+2)·X < 2^57. The intervals go in
    batches of `_DEV_BATCH`: temporaries of 64 KiB stay in the allocator's
    pool, where larger ones cost a fresh mapping (page faults) each.
    """
    n = v.size
    a_all, e_all, l_all, _ = _intervals(n)
    values, rank = np.unique(v, return_inverse=True)
    width = values.size + 1
    onehot = np.zeros((n + 1, width), dtype=np.int64)
    onehot[np.arange(1, n + 1), rank.reshape(-1) + 1] = 1
    cnt = onehot.cumsum(axis=0).cumsum(axis=1).reshape(-1)  # [p·width + t]: j < p, rank < t
    onehot[np.arange(1, n + 1), rank.reshape(-1) + 1] = v
    tot = onehot.cumsum(axis=0).cumsum(axis=1).reshape(-1)
    del onehot
    prefix = np.concatenate([[0], np.cumsum(v)])
    low, span = int(values[0]), int(values[-1]) - int(values[0])
    below = None  # ranks by lookup when the values are close (counts), else by search
    if span <= 4 * n + 1024:
        below = np.searchsorted(values, np.arange(low, low + span + 1), side="right")
    two_l = _double_lengths(n)
    out = np.empty(a_all.size, dtype=np.int64)
    for lo in range(0, a_all.size, _DEV_BATCH):
        batch = slice(lo, lo + _DEV_BATCH)
        a, e, L = a_all[batch], e_all[batch], l_all[batch]
        S = prefix[e] - prefix[a]
        mean = S // L  # ⌊S/L⌋ ∈ [min v, max v]
        if below is None:
            t = np.searchsorted(values, mean, side="right")
        else:
            t = below[mean - low] if low else below[mean]
        ae, aa = e * width + t, a * width + t
        X = S * (cnt[ae] - cnt[aa]) - L * (tot[ae] - tot[aa])
        if fixed_point:
            out[lo : lo + a.size] = ((X << (_S + 2)) + L) // two_l[batch]
        else:
            out[lo : lo + a.size] = 2 * X
    return out
