"""Exact discrete Gaussian noise for the privacy kernel (zCDP), on a dyadic grid.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/gaussian.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .noise import (
    _SIGN,
    LN2_HI,
    RandomSource,
    _count,
    _floor_log2,
    _positive,
    _round_up,
    lead_table,
    noisy,
)

# The sampler's steps (plan, acceptance table, integer draws) are module names
# so that tests check them against G1-G5; `ektelo.kernel.__all__` exports none.
__all__ = [
    "GaussPlan",
    "GaussianDraw",
    "acceptance_bounds",
    "gaussian_draw",
    "gaussian_plan",
    "gaussian_sigma_for",
    "integer_gaussian",
    "sqrt_up",
]

_SLACK = 11  # sqrt(T) * grid <= sensitivity * 2**-11 (G5)
_V_LO = 1 << 23  # V's range (G5): s >= 2**11.26 grid steps ...
_V_HI = 1 << 46  # ... and V < 2**47 after rounding up (G3)
_HUGE = 1 << 31  # ||y| - h| from here on stands in as 2**31 - 1 (G3)
_TABLE_MAX = 1 << 16  # largest table of first-byte bounds by distance (G3)


@dataclass(frozen=True)
class GaussianDraw:
    """Noisy answers and the public facts about the discrete Gaussian noise."""

    values: np.ndarray  # answers + noise, float64, read-only
    sigma: float  # P(value) proportional to exp(-(value - answer)**2 / (2 sigma**2)) (rounded up)
    grid: float  # gamma: noise (and rounded answers) are multiples of it
    rho: float  # the zCDP guaranteed, <= the rho requested
    research_mode: bool  # True when the bits came from a seeded (insecure) PRNG


@dataclass(frozen=True)
class GaussPlan:
    """The public plan of a draw: grid 2**-k (G5), proposal m = c*2**j and centre h (G2), V (G1)."""

    k: int  # grid = 2**-k
    rounded: bool  # answers rounded to the grid (G5)
    c: int  # proposal m = c * 2**j (G1)
    j: int
    h: int  # acceptance centre (G2)
    v: int  # V = 2*h*m
    sigma: float
    rho: float


def sqrt_up(t: int) -> Fraction:
    """A rational >= sqrt(t), within 2**-20 (G5's sqrt(T), rounded up)."""
    return Fraction(math.isqrt(t << 40) + 1, 1 << 20)


@lru_cache(maxsize=1024, typed=True)  # public arguments; a refusal is never cached
def gaussian_plan(sensitivity: float, rho: float, integral: bool, max_column_nnz: int) -> GaussPlan:
    """The grid, V and proposal for these public arguments (G1, G2, G4, G5); memoised."""
    d, r = _positive("sensitivity", sensitivity), _positive("rho", rho)
    nnz, integral = _count("max_column_nnz", max_column_nnz), bool(integral)
    touched = min(nnz, max(1, math.floor(d * d))) if integral else nnz
    root = sqrt_up(touched)
    if integral:  # the least k >= 0 with V >= 2**23 (the loop below confirms it)
        k = max(0, (24 - _floor_log2(d * d * LN2_HI / r)) // 2)
    else:
        k = -_floor_log2(d / (root * 2**_SLACK))
    while abs(k) <= 1000:  # G5: refine while V < 2**23, coarsen while V > 2**46
        grid = Fraction(2) ** -k
        rounded = not integral or k < 0
        d_eff = d + root * grid if rounded else d
        v_min = (d_eff / grid) ** 2 * LN2_HI / r
        if v_min < _V_LO:
            k += 1
        elif v_min > _V_HI:
            k -= 1
        else:
            break
    if abs(k) > 1000:
        raise ValueError(f"sensitivity/sqrt(rho) = {float(d)}/sqrt({float(r)}) is out of range")
    # m about h*ln 2 = sqrt(V*ln 2/2): the best acceptance (G2); floats choose, never decide
    m_star = math.sqrt(float(v_min) * math.log(2.0) / 2.0)
    j = max(0, math.floor(math.log2(m_star)) - 11)
    c = min(1 << 12, max(1, round(m_star / 2**j)))
    if j and c == 1 << 12:
        c, j = c >> 1, j + 1
    m = c << j
    h = math.ceil(v_min / (2 * m))
    v = 2 * h * m
    sigma = float(grid) * math.sqrt(v / (2.0 * math.log(2.0))) * (1.0 + 2.0**-48)  # rounded up
    rho_out = _round_up((d_eff / grid) ** 2 * LN2_HI / v)
    return GaussPlan(k, rounded, c, j, h, v, sigma, rho_out)


def gaussian_sigma_for(
    sensitivity: float, rho: float, *, integral: bool = True, max_column_nnz: int = 1
) -> float:
    """The sigma that `gaussian_draw` uses; sigma >= sensitivity/sqrt(2*rho).

    Raises ValueError on bad public arguments: the kernel calls it before charging.
    """
    return gaussian_plan(sensitivity, rho, integral, max_column_nnz).sigma


def _squares(dist: np.ndarray) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[int], int]]:
    """indices -> dist**2 there as int64 (2**31 - 1 standing in from 2**31 on), and
    i -> dist[i]**2 in Python integers (B4's true numerator) (G3)."""
    return (
        lambda i: np.minimum(dist[i], _HUGE - 1).astype(np.int64) ** 2,
        lambda i: int(dist[i]) ** 2,
    )


@lru_cache(maxsize=1)
def _lead_runs() -> tuple[np.ndarray, np.ndarray]:
    """Where the runs of equal `lead_table` entries start (int64), and their entries."""
    lead = lead_table()
    starts = np.flatnonzero(np.diff(lead, prepend=lead[0] + 1)).astype(np.int64)
    return starts, lead[starts]


@lru_cache(maxsize=64)
def acceptance_bounds(h: int, v: int) -> np.ndarray | None:
    """B3's first-byte bound by distance d = ||y| - h| (int16), where V is small
    enough for a table (G3): the `lead_table` entry of s = floor(4096 d**2/V)
    for d**2 < 9V, and -1 (x >= 8's entry) at the end, standing for all larger d.

    Built by runs: `lead_table` is non-increasing in s, and the run starting at
    s_k starts at the least d with 4096 d**2 >= s_k V (exact integer square roots).
    """
    end = math.isqrt(9 * v - 1) + 1  # d < end iff d**2 < 9V
    if end > _TABLE_MAX:
        return None
    starts, values = _lead_runs()
    need = (starts * v + 4095) >> 12  # d**2 >= ceil(s_k V / 4096)
    root = np.sqrt(need.astype(np.float64)).astype(np.int64)  # within 1, then made exact
    root -= root * root > need
    root += (root + 1) * (root + 1) <= need
    first = root + (root * root < need)  # ceil(sqrt(need))
    steps = np.diff(first, append=end + 1)  # the last run (-1) also takes the end entry
    bounds = np.repeat(values, steps)
    bounds.flags.writeable = False
    return bounds


def integer_gaussian(source: RandomSource, n: int, plan: GaussPlan) -> np.ndarray:
    """n independent draws of N_Z(0, V/(2 ln 2)) as (integral) floats (G1-G3)."""
    out = np.empty(n, dtype=np.float64)
    bounds = acceptance_bounds(plan.h, plan.v)
    filled = 0
    while filled < n:
        want = n - filled
        count = want + want // 3 + 8
        g, sign = source._magnitudes(count, plan.c, plan.j)  # m*A + 2**j*D, and S
        low_keep = None
        if plan.j:  # L uniform, its factor 2**(-L/m) one more exact Bernoulli (G2)
            low, low_keep = source._uniform_low(count, plan.c, plan.j)
            g += low
        dist = np.abs(g - plan.h)  # exact: integers < 2**53
        squares, exact = _squares(dist)
        if bounds is not None:  # the first byte's bound by distance (G3)
            index = np.minimum(dist, bounds.size - 1).astype(np.intp)
            keep = source._bernoulli_bounded(np.take(bounds, index), squares, plan.v, exact=exact)
        else:
            small = np.minimum(dist, _HUGE - 1).astype(np.int64)
            keep = source.bernoulli_pow2(small * small, plan.v, exact=exact)
        if low_keep is not None:
            keep &= low_keep
        zero = np.flatnonzero(g == 0)
        keep[zero[sign[zero] >= 128]] = False  # (S < 0, |Y'| = 0) is no proposal (L2)
        g *= np.take(_SIGN, sign)
        take = np.flatnonzero(keep)[:want]
        out[filled : filled + take.size] = np.take(g, take)
        filled += take.size
    return out


def gaussian_draw(
    source: RandomSource,
    answers: np.ndarray,
    *,
    sensitivity: float,
    rho: float,
    integral: bool,
    max_column_nnz: int = 1,
) -> GaussianDraw:
    """answers + N_Z(0, sigma**2) on a dyadic grid, rho-zCDP (G1-G7).

    sensitivity: L2 sensitivity of the answer vector.  integral: answers are
    integers.  max_column_nnz: bounds the answers one record changes (used
    when answers are rounded to the grid, G5).
    """
    plan = gaussian_plan(sensitivity, rho, integral, max_column_nnz)
    values, grid = noisy(answers, plan.k, integral, lambda n: integer_gaussian(source, n, plan))
    return GaussianDraw(values, plan.sigma, grid, plan.rho, source.research_mode)
