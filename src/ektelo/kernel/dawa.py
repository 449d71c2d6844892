"""DAWA's private L1 partition (Li, Hay & Miklau, PVLDB 7(5) 2014, §3) — Private→Public.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/dawa.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from ..matrix import Partition
from ..matrix.partition import hilbert_order
from .noise import laplace_scale_for

# Names without an underscore are read by the tests (against brute force and
# the note); `ektelo.kernel.__all__` exports none of this module.
COST_BITS = 8  # S: fixed-point bits of the costs
SHIFT = (1 << (COST_BITS + 2)) + 1  # D' of T2, in cost units
CELL_MAX = 2**30  # C1: every cell is clamped to [−2^30, 2^30] (after the floor)
_CAP = 2**60  # C2: a dyadic block's cost is min(r, 2^60); T1: noisy costs clipped to [0, 2^60]
_D1_CAP = 2**53  # `dyadic_costs`: Σ|v − q| beyond this already puts r above the cap (A2)
_CONST_MAX = 2**50  # bound on the public per-bucket constants (refused above, before any charge)
INT64_DP_BOUND = 2**62  # T2's DP runs in int64 when its public/noise bound on each sum is below
_DEFAULT_PENALTY: float | str = 2.0  # penalty=None: the fixed 2λ (P1)
_LOG_LENGTH_A = 4.0  # penalty="log-length": λ·(4 + ln L) for a bucket of L cells (P2)
_EXACT_AUTO_MAX = 1024  # approximate=None: exact DP up to this many cells
EXACT_MAX = 2048  # the exact DP's O(n²) tables are refused beyond this
_MAX_CELLS = 2**27  # the approximate partition's arithmetic is proven exact up to this
DEV_BATCH = 1 << 13  # intervals per vectorised batch in `interval_devs`
DP_BLOCK = 16  # ends per vectorised step of `chain_dp`


def check_options(
    shape: Any, eps: Any, *, approximate: Any = None, ratio: Any = 0.25, penalty: Any = None
) -> dict[str, Any]:
    """DAWA's arguments, validated from public values only: the kernel calls this
    before charging, so that `dawa_partition` cannot raise after the charge (the
    note's last section lists the refusals).  shape: the vector's (1-D, or 2-D read
    in the Hilbert order).  Returns the options, approximate resolved to a bool."""
    try:
        dims = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from None
    if len(dims) not in (1, 2) or min(dims) < 1:
        raise ValueError(f"x must be a non-empty 1-D or 2-D array, got shape {dims}")
    n = math.prod(dims)
    if n > _MAX_CELLS:
        raise ValueError(f"DAWA supports at most 2^27 cells, got shape {dims}")
    eps, ratio = _real(eps, "eps"), _real(ratio, "ratio")
    if ratio >= 1:
        raise ValueError(f"ratio must lie in (0, 1), got {ratio!r}")
    if approximate is not None and not isinstance(approximate, (bool, np.bool_)):
        raise TypeError(f"approximate must be None, True or False, got {approximate!r}")
    exact = (n <= _EXACT_AUTO_MAX) if approximate is None else not approximate
    if exact and n > EXACT_MAX:
        raise ValueError(
            f"the exact DAWA partition needs O(n²) memory; n = {n} > {EXACT_MAX}: "
            "use approximate=True (or None)"
        )
    if isinstance(penalty, str) and penalty != "log-length":
        raise ValueError(f'penalty must be None, a number ≥ 0 or "log-length", got {penalty!r}')
    if penalty is not None and not isinstance(penalty, str):
        penalty = _real(penalty, "penalty", "non-negative")
    levels = (n - 1).bit_length()
    sensitivity = SHIFT if exact or levels == 0 else dyadic_sensitivity(levels)
    try:
        laplace_scale_for(float(sensitivity), eps, integral=True)
    except ValueError:
        raise ValueError(
            f"eps={eps!r} is outside the range of DAWA's exact noise "
            f"(sensitivity {sensitivity} fixed-point units)"
        ) from None
    if (1 << COST_BITS) * ratio / (eps * (1 - ratio)) > _CONST_MAX:
        raise ValueError(
            f"eps={eps!r} with ratio={ratio!r} prices a bucket above DAWA's fixed-point range"
        )
    if exact and float(_penalty_factors(n, penalty).max()) * exact_noise_scale(eps) > _CONST_MAX:
        raise ValueError(f"penalty={penalty!r} at eps={eps!r} is above DAWA's fixed-point range")
    return {"approximate": not exact, "ratio": ratio, "penalty": penalty}


def dawa_partition(
    x: np.ndarray,
    eps: float,
    source: Any,
    *,
    approximate: bool | None = None,
    ratio: float = 0.25,
    penalty: float | str | None = None,
) -> Partition:
    """DAWA's private interval partition of x (1-D, or 2-D in the Hilbert order); eps-DP.

    eps: this operator's budget (the plan's ratio·ε).  ratio: the plan's split
    ρ = 0.25, used only to price a bucket's measurement 1/ε₂, ε₂ = eps·(1 − ratio)/ratio.
    approximate: None is the exact DP up to 1024 cells, the dyadic blocks above.
    penalty: the exact DP's public per-bucket penalty on top of 1/ε₂, in units of
    its noise scale λ: None is 2λ (P1), a number c is cλ, "log-length" is
    λ·(4 + ln L) for L cells (P2); ignored by the approximate partition.  The
    cells are read through the clamp C1; nothing raises on their values.
    """
    arr = np.asarray(x)
    opts = check_options(arr.shape, eps, approximate=approximate, ratio=ratio, penalty=penalty)
    eps, ratio = float(eps), opts["ratio"]
    order = np.arange(arr.size) if arr.ndim == 1 else hilbert_order(arr.shape)
    v = _clamped_cells(arr).reshape(-1)[order]
    bucket_cost = round((1 << COST_BITS) * ratio / (eps * (1 - ratio)))  # 1/ε₂ in units
    if opts["approximate"]:
        labels = _dyadic_partition(v, eps, source, bucket_cost)
    else:
        labels = exact_partition(v, eps, source, bucket_cost, opts["penalty"])
    groups = np.empty(v.size, dtype=np.int64)
    groups[order] = labels
    return Partition(groups, arr.shape)


# ---- checks (public values only), the clamp, the penalty and the noise --------
def _real(value: Any, name: str, least: str = "positive") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and least == "positive"):
        raise ValueError(f"{name} must be a finite {least} number, got {value!r}")
    return v


def _clamped_cells(arr: np.ndarray) -> np.ndarray:
    """C1: each cell x_j as clamp(floor(x_j), −2^30, 2^30), int64 (NaN reads as 0,
    ±inf as the bounds). Raises only on the dtype (structural, public)."""
    lo, hi = -CELL_MAX, CELL_MAX
    if np.issubdtype(arr.dtype, np.unsignedinteger):
        return np.minimum(arr.astype(np.uint64), np.uint64(hi)).astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        return np.clip(arr.astype(np.int64), lo, hi)
    if np.issubdtype(arr.dtype, np.floating):
        finite = np.nan_to_num(arr.astype(np.float64), nan=0.0, posinf=hi, neginf=lo)
        return np.floor(np.clip(finite, lo, hi)).astype(np.int64)
    raise TypeError(f"x must hold numbers, got dtype {arr.dtype}")


def _penalty_factors(n: int, penalty: float | str | None) -> np.ndarray:
    """c_L for L = 0..n: the exact DP's penalty on a bucket of L cells is c_L·λ (P1, P2)."""
    rule = _DEFAULT_PENALTY if penalty is None else penalty
    if rule == "log-length":
        return _LOG_LENGTH_A + np.log(np.maximum(np.arange(n + 1, dtype=np.float64), 1.0))
    return np.full(n + 1, float(rule))


def penalty_units(n: int, eps: float, penalty: float | str | None) -> np.ndarray:
    """The exact DP's public per-bucket penalty in units, by bucket length L = 0..n."""
    return np.rint(_penalty_factors(n, penalty) * exact_noise_scale(eps)).astype(np.int64)


def noise_units(count: int, sensitivity: int, eps: float, source: Any) -> np.ndarray:
    """T1's and T2's noise (the note's "Noise"): `count` discrete Laplace draws of
    scale ≥ sensitivity/eps units in one call on zeros, floored to int64, exact."""
    draw = source.laplace(
        np.zeros(count), sensitivity=float(sensitivity), epsilon=eps, integral=True
    )
    return np.floor(np.asarray(draw.values, dtype=np.float64)).astype(np.int64)


# ---- approximate: aligned dyadic blocks, DP on the tree (T1) ----------------
def _dyadic_partition(v: np.ndarray, eps: float, source: Any, bucket_cost: int) -> np.ndarray:
    costs = dyadic_costs(v)
    noisy = [np.full(v.size, min(bucket_cost, _CAP), dtype=np.int64)]  # singletons: public
    if costs:
        flat = np.concatenate(costs)
        flat += noise_units(flat.size, dyadic_sensitivity(len(costs)), eps, source)
        flat = np.clip(flat + bucket_cost, 0, _CAP)  # post-processing from here on (T1)
        noisy += np.split(flat, np.cumsum([c.size for c in costs])[:-1])
    return _tree_dp(noisy, v.size)


def dyadic_costs(v: np.ndarray) -> list[np.ndarray]:
    """C2: min(round(2^S·dev), 2^60) of every aligned block of size 2^k, k = 1..K
    (2^K ≥ n), by level; exact in int64 for |v_j| ≤ 2^30, n ≤ 2^27 (the note's A2)."""
    n = v.size
    pos = np.arange(n, dtype=np.int64)
    costs = []
    for k in range(1, (n - 1).bit_length() + 1):
        starts = np.arange(0, n, 1 << k)
        L = np.minimum(starts + (1 << k), n) - starts
        q, rem = np.divmod(np.add.reduceat(v, starts), L)
        d = v - q[pos >> k]
        D1 = np.minimum(np.add.reduceat(np.abs(d), starts), _D1_CAP)
        above = np.add.reduceat((d > 0).astype(np.int64), starts)
        qe, re = np.divmod(rem * (L - 2 * above), L)
        r = (D1 << COST_BITS) + (qe << COST_BITS) + ((re << (COST_BITS + 1)) + L) // (2 * L)
        costs.append(np.minimum(r, _CAP))
    return costs


def dyadic_sensitivity(levels: int) -> int:
    """T1's L1 sensitivity D = Σ_{k=1..K} ceil(2^(S+1)·(1 − 2^-k)), in cost units."""
    return sum(-(-((1 << (COST_BITS + 1)) * ((1 << k) - 1)) >> k) for k in range(1, levels + 1))


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
def exact_partition(
    v: np.ndarray, eps: float, source: Any, bucket_cost: int, penalty: float | str | None = None
) -> np.ndarray:
    """T2: the group label of each cell of v (clamped, C1) in the exact DP's
    least-noisy-cost interval partition, numbered from the last bucket."""
    n = v.size
    units = interval_devs(v)
    by_length = bucket_cost + penalty_units(n, eps, penalty)  # public, per length
    noise = noise_units(units.size, SHIFT, eps, source)
    # noisy[e, a]: the noisy cost of the last bucket [a, e) (row e holds every
    # candidate ending at e contiguously, the order the chain DP reads them in).
    # int64 when a bound from public values and the noise alone keeps every DP
    # sum below 2^62; Python ints otherwise (same result, slower).
    top = (n * CELL_MAX << COST_BITS) + 1 + int(np.abs(by_length).max())
    top += max(-int(noise.min()), int(noise.max()))
    dtype = np.int64 if (n + 1) * top < INT64_DP_BOUND else object
    _, _, lengths, where = intervals(n)
    noisy = np.zeros((n + 1) * (n + 1), dtype=dtype)
    noisy[where] = sum(a.astype(dtype, copy=False) for a in (units, noise, by_length[lengths]))
    start = chain_dp(noisy.reshape(n + 1, n + 1))
    labels = np.empty(n, dtype=np.int64)
    e, g = n, 0
    while e > 0:
        labels[start[e] : e] = g
        e, g = int(start[e]), g + 1
    return labels


def chain_dp(noisy: np.ndarray) -> list[int]:
    """T2's chain DP over the by-end table noisy[e, a] (cost of the last bucket
    [a, e)): best[0] = 0, best[e] = min over a < e of best[a] + noisy[e, a];
    returns start[e], the first (smallest) a attaining it — the longest last
    bucket, T2's fixed order — in exact sums (Python ints in the inner loop).
    The ends go in blocks of `DP_BLOCK`: the a before the block for all its ends
    in one vectorised step (first minimum), then the a inside the block end by
    end, replacing the candidate only when strictly smaller: the same first minimum.
    """
    n = noisy.shape[0] - 1
    best = np.zeros(n + 1, dtype=noisy.dtype)
    best_py = [0] * (n + 1)
    start = [0] * (n + 1)
    for e0 in range(1, n + 1, DP_BLOCK):
        e1 = min(n + 1, e0 + DP_BLOCK)
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
def exact_noise_scale(eps: float) -> float:
    """T2's noise scale λ in cost units (public), memoised: a striped plan runs
    the exact DP once per stripe with the same eps."""
    return laplace_scale_for(float(SHIFT), eps, integral=True)


@lru_cache(maxsize=4)
def intervals(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """T2's candidates, every [a, e) with 0 ≤ a < e ≤ n by start then end: (a, e,
    e − a, e·(n+1) + a its place in the DP's by-end table). Public, read-only,
    memoised (a striped plan asks for the same n once per stripe)."""
    a, e = (i.astype(np.int64) for i in np.triu_indices(n + 1, k=1))
    out = (a, e, e - a, e * (n + 1) + a)
    for arr in out:
        arr.setflags(write=False)
    return out


def interval_devs(v: np.ndarray) -> np.ndarray:
    """The fixed-point cost r = round(2^S·dev(v, b)) (half up) of every interval b
    in `intervals` order, exact in int64 for |v_j| ≤ 2^30, n ≤ 2^11: one exact
    division of X = S·c − L·s, c and s read from 2-D prefix tables over
    (position, value rank) (the note's A1). Batches of `DEV_BATCH` intervals keep
    temporaries in the allocator's pool (larger ones page-fault a fresh mapping)."""
    n = v.size
    a_all, e_all, l_all, _ = intervals(n)
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
    out = np.empty(a_all.size, dtype=np.int64)
    for lo in range(0, a_all.size, DEV_BATCH):
        a, e, L = (arr[lo : lo + DEV_BATCH] for arr in (a_all, e_all, l_all))
        S = prefix[e] - prefix[a]
        mean = S // L  # ⌊S/L⌋ ∈ [min v, max v]
        t = np.searchsorted(values, mean, side="right") if below is None else below[mean - low]
        ae, aa = e * width + t, a * width + t
        X = S * (cnt[ae] - cnt[aa]) - L * (tot[ae] - tot[aa])
        out[lo : lo + a.size] = ((X << (COST_BITS + 2)) + L) // (2 * L)
    return out
