"""DAWA's private L1 partition (Li, Hay & Miklau, PVLDB 7(5) 2014, §3) — Private→Public.

`dawa_partition(x, eps, source)` reads the private count vector x and returns a
public `Partition` of x's domain into intervals (in the Hilbert order for 2-D x)
whose counts are nearly uniform: εktelo's operator PD (§6, Plan 9).
`check_options(shape, eps, **options)` validates every argument from public
values only; the kernel calls it before charging (below: nothing raises after).

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
  n(n+1)/2 intervals, O(n²) chain DP, with a public per-bucket penalty (P1/P2).
Costs are fixed-point integers r_b = round(2^S·dev(x, b)), S = 8, computed
exactly in int64; round-to-nearest moves one by ≤ ceil(2^S·|Δdev|).  One cell
changing by ±1 moves dev(x, b) only for b ∋ i, by < 2(1 − 1/|b|).

Clamps (documented, stable, part of the mechanism; nothing is checked on values).
C1. Each cell is read as clamp(⌊x_j⌋, −2^30, 2^30) (NaN as 0, ±inf as the
    bounds).  The kernel only passes vectors declared integral, on which the
    floor is the identity; it is the floor (not round-half-even, which maps
    0.5 and 1.5 to 0 and 2) because ⌊y ± 1⌋ = ⌊y⌋ ± 1.  Floor and clamp are
    monotone and 1-Lipschitz per cell, so two neighbours (one cell ±1) are
    read as neighbours or as the same vector: every argument below holds for
    the clamped vectors, hence for the inputs.  The bound keeps every sum in
    `interval_devs` and `dyadic_costs` exact in int64 (bounds there).
C2. A dyadic block's cost is min(r_b, 2^60) (1-Lipschitz: sensitivities below
    are unchanged); needed only for blocks of more than 2^21 cells.
Noise.  `noise_units` draws the Laplace noise in one `source.laplace` call on
a zero vector and adds ⌊draw⌋ to the integer costs in int64: the draws are
g·K (K an integer, |K| < 2^53, grid g = 2^-k ≤ 1), so c + ⌊g·K⌋ = ⌊c + g·K⌋
is the floor of the Laplace mechanism's output on c, exact (no float rounding
of c).  The first version truncated the noisy costs towards zero, which,
unlike the floor, does not commute with T2's shift by D' and can eat its
one-unit margin when g < 1 (eps ≳ 0.35 in the exact DP).

Privacy (neighbours: integer count vectors at L1 distance 1, i.e. one cell
changes by ±1; the kernel charges a c-stable integral transform c·ε, by the
same argument along a path of unit steps).
T1 (approximate).  The noisy output is the Laplace mechanism on the vector of
    the non-singleton blocks' costs (singletons have dev ≡ 0, a public value).
    A cell lies in exactly one block per level k = 1..K, whose r moves by
    ≤ u_k = ceil(2^(S+1)·(1 − 2^-k)); the vector's L1 sensitivity is
    D = Σ u_k ≈ 2^(S+1)·K, touching ≤ K ≤ D coordinates: Laplace noise of
    scale ≥ D/eps (`integral=True`) is eps-DP.  The floor, clamping noisy
    costs to [0, 2^60] (at 0 as the published implementation does) and the
    tree DP are post-processing.
T2 (exact).  The released vector would be far too sensitive (a cell lies in
    ~n²/4 intervals), so the argument is report-noisy-min.  Every candidate
    (singletons too) gets N_b = ⌊g·K_b⌋, K_b independent discrete Laplace of
    scale λ ≥ D'/eps units, D' = 2^(S+2) + 1, and the DP returns the partition
    B* of least pcost(B) = Σ_{b∈B} (r_b + N_b + p_b) in exact integer
    arithmetic, ties broken by a fixed order on partitions (the longest last
    bucket first); p_b, the bucket's public penalty, depends only on eps,
    ratio, n and |b|.  Any partition B ∌ b* holds exactly one bucket b' ∋ i,
    as B* holds b*.  Lower K_b* by D'/g grid steps (an integer): N_b* drops by
    exactly D', and pcost'(B) − pcost'(B*) ≥ pcost(B) − pcost(B*) + D' −
    |Δr_b*| − |Δr_b'| > pcost(B) − pcost(B*) ≥ 0; partitions holding b* move
    with B* (same p_b*, same Δr_b*, the other buckets miss i), so the order
    among them is unchanged: B* is still the output.  The shift is injective
    (b* is fixed by B* and i) and changes one coordinate's probability by
    ≤ exp(D'/λ + 2⁻⁴⁶) ≤ e^eps (noise.py L4–L5): eps-DP.  The argument needs
    every noisy cost to enter the DP unclamped (a clamp at 0 breaks the
    coupling), which lets the DP chase very negative noise (below); any public
    per-candidate penalty leaves it intact.
Everything after the noise is post-processing; only the partition is returned.

The exact DP's penalty (a public constant per bucket: accuracy, not privacy).
Because noisy costs enter the DP unclamped, the DP splits a flat run wherever
the sum of a few buckets' noise beats their penalties; as flat costs are 0
and λ and 1/ε₂ both scale as 1/eps, the number of such spurious buckets does
not depend on eps.  On 4 constant pieces of 256 cells (n = 1024) DAWA with
P1 returns ~150–175 groups at every eps.
P1 (default, penalty=None): p_b = 1/ε₂ + 2λ.  A winner's-curse correction
    (our choice) that, on DPBench 1-D data at n = 1024, gives the published
    implementation's accuracy.
P2 (penalty="log-length"): p_b = 1/ε₂ + λ·(4 + ln |b|).  A constant c·λ that
    dominates the noise's expected minimum over the n(n+1)/2 candidates
    (c ≈ ln(n²/2) ≈ 13 at n = 1024) removes every spurious split but also
    every real one worth less than ~cλ.  With ln |b|, cutting a flat run of
    ℓ cells at j adds λ·(4 + ln(j(ℓ − j)/ℓ)) of penalty, which the noise's
    exponential tail pays with odds ∝ e⁻⁴·ℓ/(j(ℓ − j)): all ℓ − 1 cuts
    together ~2e⁻⁴·ln ℓ (a constant cλ: (ℓ − 1)·e^-c), while a cut next to a
    short bucket (a spike) costs only ~4λ.  A heuristic, calibrated on the
    4 pieces: it stops the spurious splits at a smaller cost to real
    structure than a constant does.  P2 returns 5–10 groups on the 4 pieces
    at every eps (P1: 151–177), and the DAWA plan's error there is 2.5–4×
    lower; on the DPBench 1-D data summed to 1,024 cells it is less
    accurate, so it is not the default (benchmarks/bench_dawa_small_domains.py, 5 seeds; scaled L2
    error ×1e6, mean over the 10 datasets, and geometric mean of P2/P1):
        plan ε  workload      P1      P2    P2/P1   4 pieces P1 → P2
        0.1     Prefix      66.6   135.8    1.76    73.7 → 30.0
        0.1     2000 ranges 50.7   103.4    1.88    57.2 → 23.7
        1       Prefix       7.09   24.8    1.84    7.60 → 1.92
        1       2000 ranges  6.68   21.5    1.71    6.50 → 2.13
        10      Prefix       0.924   3.91   1.60    0.847 → 0.213
        10      2000 ranges  0.772   3.10   1.63    0.620 → 0.166
    (better on NETTRACE, ≤ 0.8×; up to ~5–7× worse on ADULTFRANK and MEDCOST,
    sparse data whose small real splits P2 merges).
No fixed rule wins on both: a penalty proportional to λ leaves the number of
spurious groups on flat data independent of eps, and DPBench's fine
structure loses from any penalty much above 3λ (in our runs c = 3 was on a
par with 2, c = 4 about 1.1–1.2× worse, c ≈ ln(n²/2) ≈ 13 about 4× worse).

Nothing raises after the charge.  Every refusal is in `check_options`, on
public values (shape, eps, ratio, approximate, penalty): eps must be one the
noise sampler can serve at DAWA's sensitivity (1e-300 and 1e308 are refused;
the least is ~1.31e-9 for the exact DP, ~7e-9 to ~1.7e-8 for the approximate
one, by n), and the per-bucket constants must stay below 2^50 units.  After
it, C1 bounds the costs, the noise is bounded by the sampler (|K| < 2^53;
the sampler's own RuntimeError needs a run of ~2^13 fair coin flips all zero,
probability < 2^-8000, and depends on no data), and the exact DP's sums run
in int64 when a bound from public values and the noise's magnitude (never
the data) keeps them below 2^62, in Python ints otherwise: same partition,
and which path runs depends on no data.

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

# The building blocks (costs, noise, DPs and their constants) are module names
# so that tests check them against brute force and the notes above (C1, C2,
# T1, T2, P1, P2); `ektelo.kernel.__all__` exports none of them.
__all__ = [
    "CELL_MAX",
    "COST_BITS",
    "DEV_BATCH",
    "DP_BLOCK",
    "EXACT_MAX",
    "INT64_DP_BOUND",
    "SHIFT",
    "chain_dp",
    "check_options",
    "cost_units",
    "dawa_partition",
    "dyadic_costs",
    "dyadic_sensitivity",
    "exact_noise_scale",
    "exact_partition",
    "hilbert_order",
    "interval_devs",
    "intervals",
    "noise_units",
    "penalty_units",
]

COST_BITS = 8  # S: fixed-point bits of the costs
SHIFT = (1 << (COST_BITS + 2)) + 1  # D' of T2, in cost units
CELL_MAX = 2**30  # C1: every cell is clamped to [−2^30, 2^30] (after the floor)
_COST_CAP = 2**60  # C2: a dyadic block's cost is min(r, 2^60)
_D1_CAP = 2**53  # `dyadic_costs`: Σ|v − q| beyond this already puts r above the cap
_NOISY_CAP = 2**60  # T1: noisy block costs are clipped to [0, 2^60] (post-processing)
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
    shape: Any,
    eps: Any,
    *,
    approximate: Any = None,
    ratio: Any = 0.25,
    penalty: Any = None,
) -> dict[str, Any]:
    """DAWA's arguments, validated from public values only: the kernel calls this
    before charging, so that `dawa_partition` cannot raise after the charge.

    shape: the vector's shape (1-D, or 2-D read in the Hilbert order).
    eps, ratio, approximate, penalty: as in `dawa_partition`.  Refuses (ValueError
    or TypeError) any combination whose exact arithmetic DAWA cannot carry out:
    an eps outside the noise sampler's range at DAWA's sensitivity (e.g. 1e-300),
    per-bucket constants above 2^50 fixed-point units, more than 2^27 cells, the
    exact DP above 2048 cells.  Returns the normalised options for
    `dawa_partition` (approximate resolved to a bool).
    """
    dims = _shape(shape)
    n = math.prod(dims)
    eps = _positive(eps, "eps")
    ratio = _positive(ratio, "ratio")
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
    if penalty is not None:
        penalty = _penalty_option(penalty)
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
    if exact and _penalty_max(n, eps, penalty) > _CONST_MAX:
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

    eps: the budget of this operator (the plan's ratio·ε).  ratio: the plan's
    published split ρ = 0.25, used only to price a bucket's measurement noise
    1/ε₂ with ε₂ = eps·(1 − ratio)/ratio.  approximate: None picks the exact
    DP for n ≤ 1024 cells and the dyadic-block approximation above.
    penalty: the exact DP's public per-bucket penalty on top of 1/ε₂, in units
    of its noise scale λ: None (default) is the fixed 2λ (P1); a number c
    is c·λ; "log-length" is λ·(4 + ln L) for a bucket of L cells (P2), which
    recovers piecewise-constant data but merges more of DPBench's fine
    structure (module docstring).  Ignored by the approximate partition.
    The cells are read through the clamp C1 (floor, then [−2^30, 2^30]);
    nothing raises on their values.
    Returns a Partition of x's shape whose groups are intervals of the order.
    """
    arr = np.asarray(x)
    opts = check_options(arr.shape, eps, approximate=approximate, ratio=ratio, penalty=penalty)
    eps, ratio = float(eps), opts["ratio"]
    v_all = _clamped_cells(arr)
    order = np.arange(arr.size) if arr.ndim == 1 else hilbert_order(arr.shape)
    v = v_all.reshape(-1)[order]
    n = v.size
    bucket_cost = _bucket_cost(eps, ratio)
    if opts["approximate"]:
        labels = _dyadic_partition(v, eps, source, bucket_cost)
    else:
        labels = exact_partition(v, eps, source, bucket_cost, opts["penalty"])
    groups = np.empty(n, dtype=np.int64)
    groups[order] = labels
    return Partition(groups, arr.shape)


# ---- checks (public values only) and the clamp ------------------------------
def _positive(value: Any, name: str) -> float:
    v = _real(value, name)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def _penalty_option(value: Any) -> float | str:
    if isinstance(value, str):
        if value != "log-length":
            raise ValueError(f'penalty must be None, a number ≥ 0 or "log-length", got {value!r}')
        return value
    v = _real(value, "penalty")
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"penalty must be a finite non-negative number, got {value!r}")
    return v


def _real(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def _shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from None
    if len(dims) not in (1, 2) or min(dims) < 1:
        raise ValueError(f"x must be a non-empty 1-D or 2-D array, got shape {dims}")
    if math.prod(dims) > _MAX_CELLS:
        raise ValueError(f"DAWA supports at most 2^27 cells, got shape {dims}")
    return dims


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


def _bucket_cost(eps: float, ratio: float) -> int:
    """1/ε₂ in fixed-point units, ε₂ = eps·(1 − ratio)/ratio (public)."""
    return round((1 << COST_BITS) * ratio / (eps * (1 - ratio)))


def _penalty_max(n: int, eps: float, penalty: float | str | None) -> float:
    """The largest of `penalty_units(n, eps, penalty)`, in float (no cast)."""
    rule = _DEFAULT_PENALTY if penalty is None else penalty
    c = _LOG_LENGTH_A + math.log(n) if rule == "log-length" else float(rule)
    return c * exact_noise_scale(eps)


def penalty_units(n: int, eps: float, penalty: float | str | None) -> np.ndarray:
    """The exact DP's public per-bucket penalty in units, indexed by the bucket's
    length L = 0..n: c·λ (P1, c = 2 by default) or λ·(4 + ln L) (P2)."""
    rule = _DEFAULT_PENALTY if penalty is None else penalty
    lam = exact_noise_scale(eps)
    if rule == "log-length":
        c = _LOG_LENGTH_A + np.log(np.maximum(np.arange(n + 1, dtype=np.float64), 1.0))
    else:
        c = np.full(n + 1, float(rule))
    return np.rint(c * lam).astype(np.int64)


# ---- noise ------------------------------------------------------------------
def noise_units(count: int, sensitivity: int, eps: float, source: Any) -> np.ndarray:
    """The noise of T1 and T2 (module docstring, "Noise"): `count` independent
    discrete Laplace draws of scale ≥ sensitivity/eps units, floored to
    integers, int64 (|draw| < 2^53: the sampler's bound, grid ≤ 1).

    One `source.laplace` call on zeros: its draws are g·K, K an integer with
    |K| < 2^53 and g = 2^-k ≤ 1, so g·K and its floor are exact. Adding them to
    integer costs c in int64 gives c + ⌊g·K⌋ = ⌊c + g·K⌋, the floor of the
    Laplace mechanism's output on c, with no float rounding of c."""
    draw = source.laplace(
        np.zeros(count), sensitivity=float(sensitivity), epsilon=eps, integral=True
    )
    return np.floor(np.asarray(draw.values, dtype=np.float64)).astype(np.int64)


# ---- costs -------------------------------------------------------------------
def cost_units(T: np.ndarray, L: np.ndarray) -> np.ndarray:
    """round(2^S · T / L) exactly (T ≥ 0 integer, L ≥ 1): the fixed-point cost r_b."""
    q, rem = np.divmod(T, L)
    dev: np.ndarray = (q << COST_BITS) + ((rem << (COST_BITS + 1)) + L) // (2 * L)
    return dev


# ---- approximate: aligned dyadic blocks, DP on the tree (T1) ----------------
def _dyadic_partition(v: np.ndarray, eps: float, source: Any, bucket_cost: int) -> np.ndarray:
    n = v.size
    costs = dyadic_costs(v)
    singletons = np.full(n, min(bucket_cost, _NOISY_CAP), dtype=np.int64)  # public
    noisy: list[np.ndarray] = [singletons]
    if costs:
        flat = np.concatenate(costs)
        flat += noise_units(flat.size, dyadic_sensitivity(len(costs)), eps, source)
        flat = np.clip(flat + bucket_cost, 0, _NOISY_CAP)  # post-processing from here on (T1)
        noisy += np.split(flat, np.cumsum([c.size for c in costs])[:-1])
    return _tree_dp(noisy, n)


def dyadic_costs(v: np.ndarray) -> list[np.ndarray]:
    """C2: min(round(2^S·dev), 2^60) of every aligned block of size 2^k,
    k = 1..K (2^K ≥ n), exact in int64 for |v_j| ≤ 2^30 and n ≤ 2^27.

    With q = ⌊S/L⌋, rem = S − qL (S the block's sum, L its size): for v_j ≤ q,
    |L·v_j − S| = L(q − v_j) + rem; for v_j > q it is L(v_j − q) − rem. So
    L·dev = L·D1 + E, D1 = Σ|v_j − q| ≤ L·2^31 ≤ 2^58, E = rem·(L − 2·c_gt),
    |E| < L² ≤ 2^54 (c_gt the cells above q), and round(2^S·dev) =
    2^S·D1 + 2^S·⌊E/L⌋ + ⌊(2^(S+1)·(E mod L) + L)/(2L)⌋ (round half up, as
    `cost_units`). D1 is first capped at 2^53: beyond it r > 2^61 − 2^36 > 2^60,
    so the capped cost is unchanged and every term stays below 2^62."""
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
        costs.append(np.minimum(r, _COST_CAP))
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
    least-noisy-cost interval partition (report-noisy-min, P1/P2 penalties)."""
    n = v.size
    units = interval_devs(v, fixed_point=True)
    by_length = bucket_cost + penalty_units(n, eps, penalty)  # public, per length
    shift: Any = int(by_length[1])  # one number when it is the same for every length (P1)
    if not (by_length[1:] == shift).all():
        shift = by_length[intervals(n)[2]]
    noise = noise_units(units.size, SHIFT, eps, source)
    # noisy[e, a]: the noisy cost of the last bucket [a, e) (row e holds every
    # candidate ending at e contiguously, the order the chain DP reads them in).
    # int64 when a bound from public values and the noise alone keeps every DP
    # sum below 2^62; Python ints otherwise (same result, slower).
    top = (n * CELL_MAX << COST_BITS) + 1 + int(np.abs(by_length).max())
    top += max(-int(noise.min()), int(noise.max()))
    if (n + 1) * top < INT64_DP_BOUND:
        noisy = np.zeros((n + 1) * (n + 1), dtype=np.int64)
        noisy[intervals(n)[3]] = units + noise + shift
    else:
        noisy = np.zeros((n + 1) * (n + 1), dtype=object)
        big = shift.astype(object) if isinstance(shift, np.ndarray) else shift
        noisy[intervals(n)[3]] = units.astype(object) + noise.astype(object) + big
    start = chain_dp(noisy.reshape(n + 1, n + 1))
    labels = np.empty(n, dtype=np.int64)
    e, g = n, 0
    while e > 0:
        labels[start[e] : e] = g
        e, g = int(start[e]), g + 1
    return labels


def chain_dp(noisy: np.ndarray) -> list[int]:
    """The chain DP over the by-end table noisy[e, a] (cost of the last bucket
    [a, e)): best[0] = 0, best[e] = min over a < e of best[a] + noisy[e, a];
    returns start[e], the first (smallest) a attaining it — the longest last
    bucket, T2's fixed order on partitions. Exact sums: int64 tables within
    the bound `exact_partition` checks, object (Python int) tables otherwise;
    Python ints in the inner loop.

    The ends go in blocks of `DP_BLOCK`: the candidates a before the block
    for all its ends in one vectorised step (first minimum), then the few
    a inside the block end by end, replacing the candidate only when strictly
    smaller — the same first minimum as one argmin over all a < e.
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
    """T2's noise scale λ in cost units (public: a function of eps alone), memoised
    because a striped plan runs the exact DP once per stripe with the same eps."""
    return laplace_scale_for(float(SHIFT), eps, integral=True)


@lru_cache(maxsize=4)
def intervals(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """T2's candidates: every interval [a, e) of n cells, 0 ≤ a < e ≤ n, in `np.triu_indices`
    order (by start, then end): (a, e, length e − a, position e·(n+1) + a of
    its cost in the DP's by-end table). Public (depends on n only) and read-only;
    memoised because a striped plan asks for the same n once per stripe."""
    a, e = np.triu_indices(n + 1, k=1)
    start, end = a.astype(np.int64), e.astype(np.int64)
    out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = (
        start, end, end - start, end * (n + 1) + start
    )
    for arr in out:
        arr.setflags(write=False)
    return out


@lru_cache(maxsize=4)
def _double_lengths(n: int) -> np.ndarray:
    """2·(e − a) for every interval of `intervals(n)` (the fixed-point divisor)."""
    out = 2 * intervals(n)[2]
    out.setflags(write=False)
    return out


def interval_devs(v: np.ndarray, *, fixed_point: bool = False) -> np.ndarray:
    """L·dev(v, [a, e)) = Σ_{a≤j<e} |L·v_j − S| (L = e − a, S the interval's sum)
    for every interval in `intervals` order, exact in int64; with
    `fixed_point`, the costs r = `cost_units`(L·dev, L) = round(2^S·dev) instead.

    With c and s the count and sum of the interval's cells at or below
    ⌊S/L⌋ (those have L·v_j ≤ S, the others L·v_j > S) the sum is
    (S·c − L·s) + (L·(S − s) − S·(L − c)) = 2·X, X = S·c − L·s. c and s come
    from 2-D prefix tables over (position, value rank). The fixed-point cost
    is ⌊(2^(S+2)·X + L) / 2L⌋, `cost_units`' rounding (half up) in one exact
    division. Bounds (C1: |v_j| ≤ 2^30; n ≤ 2^11): the prefix tables stay
    below Σ|v_j| ≤ 2^41, S·c and L·s below 2^52, X = L·dev/2 ≤ L²·2^29 ≤ 2^51,
    so 2^(S+2)·X ≤ 2^61. The intervals go in
    batches of `DEV_BATCH`: temporaries of 64 KiB stay in the allocator's
    pool, where larger ones cost a fresh mapping (page faults) each.
    """
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
    two_l = _double_lengths(n)
    out = np.empty(a_all.size, dtype=np.int64)
    for lo in range(0, a_all.size, DEV_BATCH):
        batch = slice(lo, lo + DEV_BATCH)
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
            out[lo : lo + a.size] = ((X << (COST_BITS + 2)) + L) // two_l[batch]
        else:
            out[lo : lo + a.size] = 2 * X
    return out
