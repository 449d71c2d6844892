"""Noise for the privacy kernel: exact discrete Laplace and a safe exponential mechanism.

Private->Public building block; everything here is audited code.  Numbers drawn
here never pass through a floating-point transcendental function.

Bits.  ``RandomSource()`` reads ``os.urandom`` (the OS CSPRNG) and cannot be
seeded.  ``RandomSource(seed=...)`` is RESEARCH MODE: bits come from numpy's
PCG64, the noise is reproducible and predictable, and it is NOT secure.

Laplace (``RandomSource.laplace``), argument in five steps:
L1. Output = a + g*K with grid g = 2**-k and P(K = k) proportional to q**|k|,
    q = 2**(-1/m), m a positive integer; noise scale b = g*m/ln 2.
L2. Sampling: magnitude G with P(G >= x) = q**x, sign S, reject (S<0, G=0);
    then P(K=k) = P(S=sign k) P(G=|k|)/Z is proportional to q**|k| exactly.
    G = m*A + R with A, R independent: P(A >= a) = 2**-a, P(R = r)
    proportional to q**r on {0..m-1}.  S is the top bit of a uniform byte and
    A counts the trailing zeros of its low 7 bits; if those are all zero, A is
    7 + the count in fresh 16-bit words (exact, by memorylessness).  With
    m = c*2**j, R's mixed-radix digits (one of size c, the others powers of two
    <= 2**12) are independent, each with P(d) proportional to (q**w)**d for its
    place value w.
L3. A digit is drawn by inverse CDF: thresholds round(2**64 * CDF) (computed
    in 60-digit decimal arithmetic) compared with a uniform 64-bit word.  Its
    first 16 bits are drawn first, the other 48 only when a threshold falls in
    that 16-bit bucket (< 2**12/2**16 of the time).  The outcome is that of the
    full 64-bit comparison: exact w.r.t. the tables, ~2.4 bytes per digit.
L4. Digit probabilities are >= 1/(2*size) >= 2**-13 (as (q**w)**size >= 1/2)
    and off by <= 2**-64: relative error <= 2**-51.  There are <= 4 digits
    (m < 2**40), so each P(K=k) is within a factor 1 +- 2**-48 of ideal and
    one noisy coordinate's log-ratio between neighbours gains at most
    XI = 2**-46.  The rejection normaliser Z is data independent and cancels.
L5. Neighbouring inputs move the answers (in grid units) by a vector of L1
    norm <= D/g, touching T coordinates, so the loss is <= D/b + T*XI.
    Integral answers: g <= 1 divides 1, D = sensitivity, T <= floor(D) (a
    nonzero integer change is >= 1).  Real answers are first rounded to the
    grid, which adds <= 1 grid step per touched row: D = sensitivity + c*g
    and T = c = max_column_nnz, with g chosen so c*g <= sensitivity*2**-20
    (coarser, still accounted, only if c/epsilon > ~1.5e6, to keep m < 2**40).
    m is the least c*2**j (2**11 <= c <= 2**12) with D*LN2_HI/(g*m) + T*XI
    <= epsilon (exact rationals, LN2_HI > ln 2), so b >= sensitivity/epsilon;
    b <= (1 + 2**-10) * sensitivity/epsilon whenever T*XI <= epsilon*2**-13.
    The output a + g*K is one correctly rounded float addition of two exact
    floats: a deterministic function of the exact result, i.e. post-processing
    (this is what defeats Mironov's attack).
L6. The answers are clamped before noise, never checked: NaN -> 0, then into
    [-limit, limit] with limit = 2**52 for integral answers (every integer of
    that size is a float, so rint is a no-op on exact integer answers) and
    2**(1000-k) otherwise (no overflow when scaling to the grid or adding
    noise).  The clamp is 1-Lipschitz per coordinate, so it keeps the L1
    sensitivity; it is part of the mechanism, the same for every input, and
    nothing after the kernel's charge raises or warns on the answers' values
    (the kernel's rule, DESIGN.md).
Caveat: ``sensitivity`` must bound the L1 change of the answers as computed.
Floating-point error in computing Q.x is outside this argument: integer
queries on integer data are exact while every partial sum stays below 2**53;
real-valued queries are exact up to rounding of the order of 2**-52 times
|Q|.|x|, which the grid step (<= sensitivity * 2**-20 / c) covers for data of
realistic size (docs/kernel.md, "residual channels").

Exponential mechanism (``RandomSource.exponential_mechanism``):
E1. Ideal weights 2**y_i, y_i = max(c*(s_i - s_max), -Y), c = eps'/(2*D*ln 2),
    Y = 1024.  This is the exponential mechanism on the scores
    max(s_i, s_max - Y/c), which still have sensitivity D: eps'-DP exactly,
    and no candidate has weight below 2**-1024 of the best (never zero).
E2. The float y has relative error < 5*2**-53; where it matters (|y| <= 2Y;
    below that both sides clamp to -Y) that is < 2**-39.6 absolute.  Weight
    M * 2**E, E = floor(y), M = round(2**(y-E) * 2**(B-1)), B >= 39 bits: each
    weight is within a factor 1 +- 2**-38.4 of ideal, so a probability ratio
    between neighbours gains at most 4.1 * 2**-38.4 < 2**-36 in log.
E3. Sampling from the integer weights is exact: a binade E is drawn with
    probability proportional to 2**E * sum(M) (big integers), then a member
    proportional to M; both by exact rejection-sampled uniform integers.
E4. eps' <= epsilon - 2**-34 (rounded down), so the stated epsilon holds.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

__all__ = ["LaplaceDraw", "RandomSource", "answer_limit", "laplace_scale_for"]

_LN2_HI = Fraction("0.6931471805599453094173")  # > ln 2 = 0.693147180559945309417232...
_XI = Fraction(1, 2**46)  # per-coordinate log-slack of the 64-bit tables (L4)
_GRID_SLACK = 20  # c * grid <= sensitivity * 2**-20 (L5)
_DIGIT_BITS = 12  # digit tables have at most 2**12 entries
_CHUNK = 1 << 16  # draws per vectorised chunk (keeps temporaries in cache)
_URANDOM_CHUNK = 1 << 24  # bytes per os.urandom call
_EM_FLOOR = 1024  # Y of E1
_EM_SLACK = 2.0**-34  # E4


def _trailing_zeros(bits: int, width: int) -> np.ndarray:
    """Trailing zeros of the low `bits` bits of every `width`-bit word (all zero maps to `bits`)."""
    w = np.arange(1 << width, dtype=np.int64) & ((1 << bits) - 1)
    exponent = np.frexp((w & -w).astype(np.float64))[1] - 1  # exact: powers of two
    return np.where(w == 0, bits, exponent).astype(np.float64)


_TZ7 = _trailing_zeros(7, 8)  # A from the low 7 bits of the sign byte
_TZ16 = _trailing_zeros(16, 16)  # continuation words
_SIGN = np.where(np.arange(256) >= 128, -1.0, 1.0)  # sign from the top bit of the byte


@dataclass(frozen=True)
class LaplaceDraw:
    """Noisy answers and the public facts about the noise that produced them."""

    values: np.ndarray  # answers + noise, float64, read-only
    scale: float  # b: the noise has P(value) proportional to exp(-|value - answer|/b)
    grid: float  # gamma: noise (and rounded answers) are multiples of it
    epsilon: float  # the privacy guaranteed, <= the epsilon requested
    research_mode: bool  # True when the bits came from a seeded (insecure) PRNG


@dataclass(frozen=True)
class _Plan:
    k: int  # grid = 2**-k
    c: int  # top digit size
    j: int  # m = c * 2**j
    scale: float
    epsilon: float

    @property
    def m(self) -> int:
        return self.c << self.j

    @property
    def digits(self) -> tuple[tuple[int, int], ...]:
        """(size, place value) of R's mixed-radix digits (L2)."""
        out = [
            (1 << min(_DIGIT_BITS, self.j - low), 1 << low) for low in range(0, self.j, _DIGIT_BITS)
        ]
        return (*out, (self.c, 1 << self.j))


@dataclass(frozen=True)
class _Table:
    thresholds: np.ndarray  # uint64, round(2**64 * CDF(r)) for r < size - 1
    guide: np.ndarray  # float64 by leading 16 bits: digit * weight, or -1 if undecided
    weight: int  # place value of the digit


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def _positive(name: str, value: float) -> Fraction:
    v = float(value)
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return Fraction(v)


def _plan(sensitivity: float, epsilon: float, integral: bool, max_column_nnz: int) -> _Plan:
    d, eps = _positive("sensitivity", sensitivity), _positive("epsilon", epsilon)
    if (
        isinstance(max_column_nnz, bool)
        or not isinstance(max_column_nnz, (int, np.integer))
        or max_column_nnz < 1
    ):
        raise ValueError(f"max_column_nnz must be a positive integer, got {max_column_nnz!r}")
    touched = max(1, math.floor(d)) if integral else int(max_column_nnz)
    budget = eps - touched * _XI
    if budget <= eps / 2:
        raise ValueError(f"epsilon={epsilon!r} is too small for {touched} touched rows")
    k = 0 if integral else -_floor_log2(d / (touched * 2**_GRID_SLACK))
    while abs(k) <= 1000:  # adjust the grid until m = c * 2**j has 11 to 39 bits (L5)
        grid = Fraction(2) ** -k
        d_eff = d if integral else d + touched * grid
        x = d_eff * _LN2_HI / (grid * budget)  # m must be >= x
        if x < 2**11:
            k += 1
        elif x >= 2**39 and not integral:  # coarser than 2**-20: still accounted in d_eff
            k -= 1
        else:
            break
    # m < 2**40 keeps m * A + R < 2**53 for every A < 2**13 (probability 1 - 2**-8192)
    if x >= 2**39 or abs(k) > 1000:
        raise ValueError(f"sensitivity/epsilon = {sensitivity}/{epsilon} is out of range")
    j = _floor_log2(x) - 11
    c = math.ceil(x / 2**j)
    m = c << j
    exact_eps = d_eff * _LN2_HI / (grid * m) + touched * _XI
    eps_out = float(exact_eps)
    if Fraction(eps_out) < exact_eps:
        eps_out = math.nextafter(eps_out, math.inf)
    return _Plan(k=k, c=c, j=j, scale=float(grid * m / _LN2_HI), epsilon=eps_out)


def answer_limit(k: int, integral: bool) -> float:
    """The clamp of L6: answers are moved into [-limit, limit] before noise."""
    return math.ldexp(1.0, 52) if integral else math.ldexp(1.0, 1000 - max(k, 0))


def laplace_scale_for(
    sensitivity: float, epsilon: float, *, integral: bool = True, max_column_nnz: int = 1
) -> float:
    """The noise scale b that `RandomSource.laplace` uses; b >= sensitivity/epsilon."""
    return _plan(sensitivity, epsilon, integral, max_column_nnz).scale


@lru_cache(maxsize=128)
def _table(size: int, weight: int, m: int) -> _Table:
    """Inverse-CDF table of P(d) proportional to rho**d, rho = 2**(-weight/m), d < size (L3)."""
    with localcontext() as ctx:
        ctx.prec = 60
        rho = Decimal(2) ** (Decimal(-weight) / Decimal(m))
        total = 1 - rho**size
        one, power, cuts = Decimal(2**64), Decimal(1), []
        for _ in range(size - 1):
            power *= rho
            cuts.append(int(((1 - power) / total * one).to_integral_value()))
    thresholds = np.array(cuts, dtype=np.uint64)
    lead = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
    lo = np.searchsorted(thresholds, lead, side="right")
    hi = np.searchsorted(thresholds, lead | np.uint64((1 << 48) - 1), side="right")
    guide = np.where(lo == hi, lo * float(weight), -1.0)
    return _Table(thresholds=thresholds, guide=guide, weight=weight)


class RandomSource:
    """Bits and noise samplers.  Secure (os.urandom) unless an explicit research seed is given.

    With ``seed`` the bits come from ``np.random.Generator(np.random.PCG64(seed))``:
    reproducible, for tests and experiments only, NOT secure.
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
        ):
            raise ValueError(f"seed must be None (secure) or a non-negative integer, got {seed!r}")
        self.seed: int | None = None if seed is None else int(seed)
        self._rng = None if seed is None else np.random.Generator(np.random.PCG64(self.seed))

    @property
    def research_mode(self) -> bool:
        return self.seed is not None

    def __repr__(self) -> str:
        return (
            "RandomSource(secure)"
            if self.seed is None
            else f"RandomSource(seed={self.seed}, research mode: NOT secure)"
        )

    # ---- bits ----------------------------------------------------------
    def _bytes(self, nbytes: int) -> np.ndarray:
        if self._rng is not None:
            return self._rng.bit_generator.random_raw(-(-nbytes // 8)).view(np.uint8)[:nbytes]
        if nbytes <= _URANDOM_CHUNK:
            return np.frombuffer(os.urandom(nbytes), dtype=np.uint8)
        out = np.empty(nbytes, dtype=np.uint8)
        for start in range(0, nbytes, _URANDOM_CHUNK):
            stop = min(nbytes, start + _URANDOM_CHUNK)
            out[start:stop] = np.frombuffer(os.urandom(stop - start), dtype=np.uint8)
        return out

    def uint64(self, n: int) -> np.ndarray:
        """n independent uniform 64-bit words (possibly a read-only array)."""
        return self._bytes(8 * n).view(np.uint64)

    def uint16(self, n: int) -> np.ndarray:
        """n independent uniform 16-bit words (possibly a read-only array)."""
        return self._bytes(2 * n).view(np.uint16)

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n) for any positive Python int n (exact, by rejection)."""
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        bits = (n - 1).bit_length()
        while True:
            r = int.from_bytes(self._bytes((bits + 7) // 8).tobytes(), "little") & ((1 << bits) - 1)
            if r < n:
                return r

    # ---- discrete Laplace ------------------------------------------------
    def _integer_laplace(self, n: int, c: int, j: int = 0) -> np.ndarray:
        """n draws of K, P(K = k) proportional to 2**(-|k|/m), m = c * 2**j, as floats (L2)."""
        plan = _Plan(k=0, c=c, j=j, scale=0.0, epsilon=0.0)
        m, tables = plan.m, [_table(size, w, plan.m) for size, w in plan.digits]
        raw = self._bytes((2 * len(tables) + 1) * n)
        leads = raw[: 2 * len(tables) * n].view(np.uint16).reshape(len(tables), n)
        sign = raw[2 * len(tables) * n :]
        g: np.ndarray = _TZ7[sign]  # A: trailing zeros of the low 7 bits of the sign byte
        more = np.flatnonzero(g == 7.0)
        while more.size:  # all 7 bits zero: A >= 7, continue with fresh 16-bit words
            w = self.uint16(more.size)
            g[more] += _TZ16[w]
            if g[more].max() >= 2**53 // m - 1:
                raise RuntimeError("noise magnitude out of exact float range")
            more = more[w == 0]
        g *= m
        for table, lead in zip(tables, leads, strict=True):
            d = table.guide[lead]
            open_ = np.flatnonzero(d < 0)
            if open_.size:  # draw the other 48 bits only where the 16 leave it open (L3)
                u = (lead[open_].astype(np.uint64) << np.uint64(48)) | (
                    self.uint64(open_.size) >> np.uint64(16)
                )
                d[open_] = np.searchsorted(table.thresholds, u, side="right") * table.weight
            g += d
        zero = np.flatnonzero(g == 0)
        redo = zero[sign[zero] >= 128]  # negative sign with magnitude 0: reject
        g *= _SIGN[sign]
        if redo.size:
            g[redo] = self._integer_laplace(redo.size, c, j)
        return g

    def laplace(
        self,
        answers: np.ndarray,
        *,
        sensitivity: float,
        epsilon: float,
        integral: bool,
        max_column_nnz: int = 1,
    ) -> LaplaceDraw:
        """answers + discrete Laplace noise of scale >= sensitivity/epsilon; epsilon-DP (L1-L5).

        sensitivity: L1 sensitivity of the answer vector.  integral: answers are
        integers (then exact).  Otherwise they are rounded to the grid first and
        max_column_nnz must bound the number of answers one record changes.
        """
        plan = _plan(sensitivity, epsilon, integral, max_column_nnz)
        flat = np.asarray(answers, dtype=np.float64).ravel()
        limit = answer_limit(plan.k, integral)
        grid = math.ldexp(1.0, -plan.k)
        out = np.empty(flat.size, dtype=np.float64)
        for start in range(0, flat.size, _CHUNK):
            stop = min(flat.size, start + _CHUNK)
            with np.errstate(all="ignore"):  # the clamp (L6): no data-dependent signal
                base = np.clip(np.nan_to_num(flat[start:stop], nan=0.0), -limit, limit)
                # integral: rint is a no-op on exact integer answers (L6); otherwise
                # round to the grid (exact scaling by powers of two, L5)
                scaled = base if integral else base * math.ldexp(1.0, plan.k)
                base = np.rint(scaled) * (1.0 if integral else grid)
            k = self._integer_laplace(stop - start, plan.c, plan.j)
            # both terms are exact floats; the sum is rounded once (post-processing, L5)
            np.add(base, np.multiply(k, grid, out=k), out=out[start:stop])
        values = out.reshape(np.shape(answers))
        values.flags.writeable = False
        return LaplaceDraw(values, plan.scale, grid, plan.epsilon, self.research_mode)

    # ---- exponential mechanism --------------------------------------------
    def exponential_mechanism(
        self, scores: np.ndarray, *, sensitivity: float, epsilon: float
    ) -> int:
        """Index i with probability proportional to exp(epsilon*score_i/(2*sensitivity)) (E1-E4)."""
        exponent, mantissa = _em_weights(scores, sensitivity, epsilon)
        offset = exponent + _EM_FLOOR
        # exact integer sums per binade: 26-bit halves summed in float64 stay < 2**53
        hi = np.bincount(offset, weights=mantissa >> 26, minlength=_EM_FLOOR + 1)
        lo = np.bincount(offset, weights=mantissa & ((1 << 26) - 1), minlength=_EM_FLOOR + 1)
        sums = {int(e): (int(hi[e]) << 26) + int(lo[e]) for e in np.flatnonzero(hi + lo)}
        r = self.randbelow(sum(s << e for e, s in sums.items()))
        for e in sorted(sums, reverse=True):
            r -= sums[e] << e
            if r < 0:
                break
        members = np.flatnonzero(offset == e)
        pick = np.searchsorted(np.cumsum(mantissa[members]), self.randbelow(sums[e]), side="right")
        return int(members[pick])


def _em_weights(
    scores: np.ndarray, sensitivity: float, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """Integer weights M * 2**E (E in [-1024, 0]) of the exponential mechanism (E1-E2)."""
    delta, eps = _positive("sensitivity", sensitivity), _positive("epsilon", epsilon)
    if eps <= 2 * Fraction(_EM_SLACK):
        raise ValueError(
            f"epsilon={epsilon!r} is too small for the exponential mechanism (needs > 2**-33)"
        )
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite (found NaN or inf)")
    bits = min(52, 62 - s.size.bit_length())
    if bits < 39:
        raise ValueError(f"too many candidates ({s.size}); must be < 2**23")
    eps_internal = float(eps) - _EM_SLACK
    if Fraction(eps_internal) > eps - Fraction(_EM_SLACK):
        eps_internal = math.nextafter(eps_internal, 0.0)
    c = eps_internal / (2.0 * float(delta) * math.log(2.0))
    with np.errstate(over="ignore"):  # s - max may overflow to -inf: clamped below anyway
        y = np.maximum((s - s.max()) * c, -float(_EM_FLOOR))
    exponent = np.floor(y)
    mantissa = np.rint(np.exp2(y - exponent) * 2.0 ** (bits - 1)).astype(np.int64)
    return exponent.astype(np.int64), mantissa
