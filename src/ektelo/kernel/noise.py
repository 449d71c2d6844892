"""Noise for the privacy kernel: exact discrete Laplace, exact Bernoulli(2^-x), safe
exponential mechanism.  (The exact discrete Gaussian is in `gaussian.py`, on these parts.)

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/noise.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

# The building blocks after the samplers (tables, weights, constants) are module
# names so that tests check them line by line against their proof notes; the
# kernel package (`ektelo.kernel.__all__`) exports none of them.
__all__ = [
    "CHUNK",
    "LN2_HI",
    "DigitTable",
    "LaplaceDraw",
    "RandomSource",
    "answer_limit",
    "digit_table",
    "em_weights",
    "laplace_scale_for",
    "lead_table",
    "power_table",
]

LN2_HI = Fraction("0.6931471805599453094173")  # L5: > ln 2 = 0.693147180559945309417232...
_GRID_SLACK = 12  # c * grid <= sensitivity * 2**-12 (L5)
CHUNK = 1 << 16  # draws per vectorised chunk (keeps temporaries in cache)
_URANDOM_CHUNK = 1 << 24  # bytes per os.urandom call
_EM_FLOOR = 1024  # Y of E1
_EM_SLACK = 2.0**-34  # E4
_FIX = 90  # bits of the fixed-point factors of L4
_SLOTS = 64  # products per big-integer multiplication (L4)
_SLOT_BYTES = 24  # 192-bit slots: every product is <= 2**180
_DIGITS = 45  # decimal digits of R (L4) and of X1's first bracket


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
    c: int  # size of the digit D (L2)
    j: int  # m = c * 2**j
    scale: float
    epsilon: float


@dataclass(frozen=True)
class DigitTable:
    """The digit D's inverse-CDF thresholds and 16-bit guide (L3), built exactly (L4)."""

    thresholds: np.ndarray  # uint64, T_r within 1 of 2**65 * (1 - 2**(-r/c)), r = 1..c-1 (L4)
    guide: np.ndarray  # int16 by leading 16 bits: the digit, or -1 - i if T_i shares them (L3)


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def _positive(name: str, value: float) -> Fraction:
    v = float(value)
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return Fraction(v)


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _round_up(x: Fraction) -> float:
    """The least float >= x."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


@lru_cache(maxsize=1024, typed=True)  # public arguments; a refusal is never cached
def _plan(sensitivity: float, epsilon: float, integral: bool, max_column_nnz: int) -> _Plan:
    d, eps = _positive("sensitivity", sensitivity), _positive("epsilon", epsilon)
    touched, integral = _count("max_column_nnz", max_column_nnz), bool(integral)
    if integral:  # the least k >= 0 with x >= 2**11 (the loop below confirms it)
        k = max(0, 11 - _floor_log2(d * LN2_HI / eps))
    else:
        k = -_floor_log2(d / (touched * 2**_GRID_SLACK))
    while abs(k) <= 1000:  # adjust the grid until m = c * 2**j has 11 to 39 bits (L5)
        grid = Fraction(2) ** -k
        d_eff = d if integral else d + touched * grid
        x = d_eff * LN2_HI / (grid * eps)  # m must be >= x
        if x < 2**11:
            k += 1
        elif x >= 2**39 and not integral:  # coarser than 2**-12: still accounted in d_eff
            k -= 1
        else:
            break
    # m < 2**40 keeps m * A + R < 2**53 for every A < 2**13 (probability 1 - 2**-8192)
    if abs(k) > 1000 or x >= 2**39:
        raise ValueError(f"sensitivity/epsilon = {float(d)}/{float(eps)} is out of range")
    j = _floor_log2(x) - 11
    c = math.ceil(x / 2**j)
    eps_out = _round_up(d_eff * LN2_HI / (grid * (c << j)))
    return _Plan(k=k, c=c, j=j, scale=float(grid * (c << j) / LN2_HI), epsilon=eps_out)


def answer_limit(k: int, integral: bool) -> float:
    """The clamp of L6: answers are moved into [-limit, limit] before noise."""
    return math.ldexp(1.0, 52) if integral else math.ldexp(1.0, 1000 - max(k, 0))


def noisy(
    answers: np.ndarray, k: int, integral: bool, draw: Callable[[int], np.ndarray]
) -> tuple[np.ndarray, float]:
    """answers + grid * draw(n), grid = 2**-k, by chunks: read-only values, and the grid.

    The answers are clamped first (L6: NaN -> 0, then into [-limit, limit]);
    real answers, and integral ones on a grid > 1, are rounded to the grid by
    exact scaling by powers of two (L5), while rint is a no-op on exact integer
    answers.  Both terms of the sum are exact floats, rounded once (L5).
    """
    flat = np.asarray(answers, dtype=np.float64).ravel()
    limit, grid = answer_limit(k, integral), math.ldexp(1.0, -k)
    rounded = not integral or k < 0
    out = np.empty(flat.size, dtype=np.float64)
    for start in range(0, flat.size, CHUNK):
        stop = min(flat.size, start + CHUNK)
        with np.errstate(all="ignore"):  # the clamp: no data-dependent signal
            base = np.clip(flat[start:stop], -limit, limit)  # NaN stays NaN here ...
            np.copyto(base, 0.0, where=base != base)  # ... and becomes 0 (as nan_to_num)
            if rounded:
                np.multiply(base, math.ldexp(1.0, k), out=base)
            np.rint(base, out=base)
            if rounded:
                np.multiply(base, grid, out=base)
        y = draw(stop - start)
        np.add(base, np.multiply(y, grid, out=y), out=out[start:stop])
    values = out.reshape(np.shape(answers))
    values.flags.writeable = False
    return values, grid


def laplace_scale_for(
    sensitivity: float, epsilon: float, *, integral: bool = True, max_column_nnz: int = 1
) -> float:
    """The noise scale b that `RandomSource.laplace` uses; b >= sensitivity/epsilon."""
    return _plan(sensitivity, epsilon, integral, max_column_nnz).scale


# ---- exact tables (L4, B2) ----------------------------------------------------
with localcontext() as _ctx:
    _ctx.prec = _DIGITS
    _LN2_DECIMAL = Decimal(2).ln()  # correctly rounded to 45 digits


def _rounded_powers(n: int, size: int, bits: int) -> np.ndarray:
    """round(2**bits * 2**(-t/n)) mod 2**64 for t < size <= 4096, within 1/2 + 2**(bits-76.4).

    L4: R = 2**90 * 2**(-1/n) within 2 (four correctly rounded 45-digit decimal
    operations, relative error < 10**-43, then floor), powers by iterated
    floor products, and the 64 products A_a * B_b for one a in one
    multiplication of A_a by the B_b packed in 192-bit slots.
    """
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        r = int((-(_LN2_DECIMAL / n)).exp() * (1 << _FIX))
    b = [1 << _FIX]
    for _ in range(_SLOTS):
        b.append((b[-1] * r) >> _FIX)
    a = [1 << _FIX]
    for _ in range((size - 1) // _SLOTS):
        a.append((a[-1] * b[_SLOTS]) >> _FIX)
    shift = 2 * _FIX - bits  # in (64, 128): the result straddles words 1 and 2 of a slot
    slots = b"".join(v.to_bytes(_SLOT_BYTES, "little") for v in b[:_SLOTS])
    packed = int.from_bytes(slots, "little")
    raw = b"".join((v * packed).to_bytes(_SLOTS * _SLOT_BYTES, "little") for v in a)
    words = np.frombuffer(raw, dtype=np.uint64).reshape(-1, 3)[:size]
    high = words[:, 2] << np.uint64(128 - shift)  # modulo 2**64
    out: np.ndarray = high | (words[:, 1] >> np.uint64(shift - 64))
    out += (words[:, 1] >> np.uint64(shift - 65)) & np.uint64(1)  # round half up
    return out


@lru_cache(maxsize=1024)
def digit_table(c: int) -> DigitTable:
    """Inverse-CDF table and 16-bit guide of D, P(D = d) proportional to 2**(-d/c), d < c (L3)."""
    # theta_r = 2**65 - 2**65 * 2**(-r/c) < 2**64: the negation modulo 2**64 is exact
    thresholds = (~_rounded_powers(c, c, 65) + np.uint64(1))[1:]
    top = (thresholds >> np.uint64(48)).astype(np.intp)  # distinct: gaps exceed 2**51 (L3)
    steps = np.diff(top, prepend=-1, append=(1 << 16) - 1)  # leads with d thresholds below
    guide = np.repeat(np.arange(c, dtype=np.int16), steps)
    guide[top] = -1 - np.arange(c - 1, dtype=np.int16)  # undecided: -1 - the threshold's index
    thresholds.flags.writeable = guide.flags.writeable = False
    return DigitTable(thresholds=thresholds, guide=guide)


@lru_cache(maxsize=3)
def power_table(level: int) -> np.ndarray:
    """T_level[z] = round(2**62 * 2**(-z / 2**(12*level))), z < 4096, as int64 (B2)."""
    table = _rounded_powers(1 << (12 * level), 4096, 62).view(np.int64)
    table.flags.writeable = False
    return table


@lru_cache(maxsize=64)
def _gate(c: int, most: int) -> int:
    """The most bits g <= most <= 8 with 1 - 2**-g <= 2**(-1/c): all of them once
    c >= 178 (2**(-1/c) >= 1 - ln 2/c >= 1 - 2**-8), else 2*(2**g - 1)**c <= 2**(g*c)."""
    if c >= 178:
        return most
    return max(g for g in range(most + 1) if 2 * ((1 << g) - 1) ** c <= 1 << (g * c))


@lru_cache(maxsize=1)
def lead_table() -> np.ndarray:
    """B3 by s = floor(4096 x), x < 9: floor(lo / 2**54) for x < 8, where U's first
    byte accepts below it; -1 for x >= 8 (2**-x <= 2**-8: only a zero byte is open)."""
    s = np.arange(8 << 12)
    t = power_table(1)[s & 4095] >> (s >> 12)
    table = np.append((t - 3 - (t >> 12)) >> 54, np.full(1 << 12, -1)).astype(np.int16)
    table.flags.writeable = False
    return table


def _pow2_bracket(f: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """Rationals lo <= 2**-f <= hi for 0 <= f < 1, hi/lo - 1 < 3 * 10**(2-digits) (X1).

    Three correctly rounded operations make y = f*ln 2 within 3.01 half-ulps
    relatively (< 2.1 half-ulps absolutely, y < ln 2), and exp rounds once more:
    the result is within 3.2 half-ulps, 1.6 * 10**(1-digits) < 10**(2-digits).
    """
    if f == 0:
        return Fraction(1), Fraction(1)
    with localcontext() as ctx:
        ctx.prec = digits
        p = Fraction((-(Decimal(f.numerator) / f.denominator * Decimal(2).ln())).exp())
    err = Fraction(1, 10 ** (digits - 2))
    return p * (1 - err), p * (1 + err)


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
        mode = "secure" if self.seed is None else f"seed={self.seed}, research mode: NOT secure"
        return f"RandomSource({mode})"

    # ---- bits ----------------------------------------------------------
    def _bytes(self, nbytes: int) -> np.ndarray:
        if self._rng is not None:
            return self._rng.bit_generator.random_raw(-(-nbytes // 8)).view(np.uint8)[:nbytes]
        if nbytes <= _URANDOM_CHUNK:
            return np.frombuffer(os.urandom(nbytes), dtype=np.uint8)
        step = _URANDOM_CHUNK
        chunks = [os.urandom(min(step, nbytes - i)) for i in range(0, nbytes, step)]
        return np.frombuffer(b"".join(chunks), dtype=np.uint8)

    def uint64(self, n: int) -> np.ndarray:
        """n independent uniform 64-bit words (possibly a read-only array)."""
        return self._bytes(8 * n).view(np.uint64)

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n) for any positive Python int n (exact, by rejection)."""
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        bits = (n - 1).bit_length()
        while True:
            r = int.from_bytes(self._bytes((bits + 7) // 8).tobytes(), "little") & ((1 << bits) - 1)
            if r < n:
                return r

    # ---- exact comparisons (X1) and Bernoulli(2**-x) (B1-B4) -------------------
    def exact_less(self, u: int, k: int, a: Fraction, b: Fraction, x: Fraction) -> bool:
        """Whether a + b*U < 2**-x for the uniform U in [u/2**k, (u+1)/2**k) (X1).

        U's further bits are drawn here, 64 at a time, until the interval of
        a + b*U lies on one side of a rational bracket of 2**-x.
        """
        n = x.numerator // x.denominator
        digits = _DIGITS
        while True:
            ends = (a + b * Fraction(u, 1 << k), a + b * Fraction(u + 1, 1 << k))
            w_lo, w_hi = min(ends), max(ends)
            if n <= k + 128:
                lo, hi = _pow2_bracket(x - n, digits)
                if w_hi <= lo / (1 << n):
                    return True
                if w_lo >= hi / (1 << n):
                    return False
                digits += 20
            elif w_lo * (1 << (k + 128)) >= 1:  # w_lo >= 2**-(k+128) > 2**-n >= 2**-x
                return False
            u, k = (u << 64) | int(self.uint64(1)[0]), k + 64

    def bernoulli_fine(self, num: int, den: int, u: int) -> bool:
        """B4, then X1: U < 2**(-num/den) for U in [u/2**62, (u+1)/2**62)."""
        q, r = divmod(num, den)
        x = Fraction(num, den)
        if q > 100:  # 2**-x < 2**-100: decided by any nonzero bit of u
            return False if u else self.exact_less(u, 62, Fraction(0), Fraction(1), x)
        prod = 1
        for level in (1, 2, 3):
            r <<= 12
            z, r = divmod(r, den)
            prod *= int(power_table(level)[z])
        slack = 1 << 126
        if ((u + 1) << (160 + q)) <= (prod - slack) * ((1 << 36) - 1):
            return True
        if (u << (124 + q)) >= prod + slack:
            return False
        return self.exact_less(u, 62, Fraction(0), Fraction(1), x)

    def bernoulli_pow2(
        self,
        num: np.ndarray,
        den: int,
        lead: np.ndarray | None = None,
        exact: Callable[[int], int] | None = None,
    ) -> np.ndarray:
        """Exact Bernoulli(2**(-num/den)) per element (B1-B4).

        num: int64 in [0, 2**63); 1 <= den < 2**47.  lead: U's first byte per
        element if already drawn (uint8), else drawn here.  exact(i): element
        i's true numerator where num[i] is a smaller stand-in with the same
        coarse decisions (both give 2**-x < 2**-100).
        """
        # s = floor(4096 x) for x clipped below 9 (unsigned: faster)
        unsigned = np.minimum(num.view(np.uint64), np.uint64(9 * den - 1))
        bound = np.take(lead_table(), (unsigned << np.uint64(12)) // np.uint64(den))
        return self._bernoulli_bounded(bound, lambda i: num[i], den, lead, exact)

    def _bernoulli_bounded(
        self,
        bound: np.ndarray,
        numerators: Callable[[np.ndarray], np.ndarray],
        den: int,
        lead: np.ndarray | None = None,
        exact: Callable[[int], int] | None = None,
    ) -> np.ndarray:
        """`bernoulli_pow2` given each element's `lead_table` entry (int16) and
        numerators(indices) -> those elements' num (int64), read only where open:
        U's first byte, then its first 62 bits where that left it open (B3), then B4."""
        if lead is None:
            lead = self._bytes(bound.size)
        diff = lead - bound  # int16: < 0 accepts, 0 or 1 is open, > 1 rejects (B3)
        accept: np.ndarray = diff < 0
        index = np.flatnonzero(diff.view(np.uint16) <= 1)
        if index.size:
            num = numerators(index)
            q = num // den
            t = power_table(1)[((num - q * den) << 12) // den] >> np.minimum(q, 63)
            lo, hi = t - 3 - (t >> 12), t + 2
            u = (lead[index].astype(np.int64) << 54) | (
                self.uint64(index.size) >> np.uint64(10)
            ).astype(np.int64)
            sure = u + 1 <= lo
            for i in np.flatnonzero(~sure & (u < hi)):
                true_num = int(num[i]) if exact is None else exact(int(index[i]))
                sure[i] = self.bernoulli_fine(true_num, den, int(u[i]))
            accept[index] = sure
        return accept

    # ---- discrete Laplace ------------------------------------------------
    def open_digits(
        self, table: DigitTable, code: np.ndarray, lead: np.ndarray, c: int
    ) -> np.ndarray:
        """D where the 16-bit guide left it open: U's first 64 bits, then X1 (L3).

        The bucket holds exactly one threshold T_i (code = -1 - i): D = i + [theta_i <= U].
        """
        index = -1 - code.astype(np.intp)
        t = table.thresholds[index]
        u = (lead.astype(np.uint64) << np.uint64(48)) | (self.uint64(lead.size) >> np.uint64(16))
        d = index + (u > t)  # u >= T_i + 1 counts theta_i, u <= T_i - 2 does not
        for i in np.flatnonzero((u == t) | (u + np.uint64(1) == t)):  # < 2**-62 each: X1
            # theta_i <= U iff 1 - U/2**65 <= 2**(-(i+1)/c)
            below = self.exact_less(
                int(u[i]), 64, Fraction(1), Fraction(-1, 2), Fraction(int(index[i]) + 1, c)
            )
            d[i] = index[i] + below
        return d

    def _uniform_low(self, n: int, c: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """n uniform j-bit L (int64) and exact Bernoulli(2**(-L/m)) outcomes, m = c*2**j (L2).

        2**(-L/m) > 2**(-1/c) >= 1 - 2**-gate (`_gate`; 8 bits once c >= 178): a
        word's top `gate` bits not all one accept at once (U < 1 - 2**-gate);
        otherwise they start U for the exact Bernoulli (B1-B4).
        """
        width = 8 if j <= 4 else 16 if j <= 12 else 32 if j <= 28 else 64
        dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
        gate = _gate(c, min(8, width - j))
        words = self._bytes(n * width // 8).view(dtype)
        low = (words & dtype((1 << j) - 1)).astype(np.int64)
        keep = np.ones(n, dtype=bool)
        check = np.flatnonzero(words >= dtype(((1 << gate) - 1) << (width - gate)))
        if check.size:  # U's first byte: the all-one gate bits, then fresh bits
            fresh = self._bytes(check.size) & np.uint8((1 << (8 - gate)) - 1)
            lead = np.uint8(((1 << gate) - 1) << (8 - gate)) | fresh
            keep[check] = self.bernoulli_pow2(np.take(low, check), c << j, lead)
        return low, keep

    def _low_bits(self, n: int, c: int, j: int) -> np.ndarray:
        """n draws of L, P(L = l) proportional to 2**(-l/m) on {0..2**j-1}, as floats (L2)."""
        low, keep = self._uniform_low(n, c, j)
        redo = np.flatnonzero(~keep)
        if redo.size:  # rejected: a fresh draw of L
            low[redo] = self._low_bits(redo.size, c, j)
        return low.astype(np.float64)

    def _magnitudes(self, n: int, c: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """n draws of m*A + 2**j*D (L2) as floats, and n sign bytes as intp (S < 0: >= 128)."""
        m, table = c << j, digit_table(c)
        raw = self._bytes(3 * n)
        lead = raw[: 2 * n].view(np.uint16)
        sign = raw[2 * n :].astype(np.intp)  # intp: np.take is slow on uint8 indices
        # m*A, A the trailing zeros of the sign byte's low 7 bits
        g: np.ndarray = np.take(_TZ7 * m, sign)
        more = np.flatnonzero(g == 7.0 * m)
        while more.size:  # all 7 bits zero: A >= 7, continue with fresh 16-bit words
            w = self._bytes(2 * more.size).view(np.uint16)
            g[more] += _TZ16[w] * m
            if g[more].max() >= (2**53 // m - 1) * m:
                raise RuntimeError("noise magnitude out of exact float range")
            more = more[w == 0]
        d = np.take(table.guide, lead)
        open_ = np.flatnonzero(d < 0)
        if open_.size:  # a threshold shares the leading 16 bits (L3)
            d[open_] = self.open_digits(table, d[open_], lead[open_], c)
        g += d * float(1 << j) if j else d
        return g, sign

    def integer_laplace(self, n: int, c: int, j: int = 0) -> np.ndarray:
        """n draws of K, P(K = k) proportional to 2**(-|k|/m), m = c * 2**j, as floats (L2-L4)."""
        g, sign = self._magnitudes(n, c, j)
        if j:
            g += self._low_bits(n, c, j)
        zero = np.flatnonzero(g == 0)
        redo = zero[sign[zero] >= 128]  # negative sign with magnitude 0: reject
        g *= np.take(_SIGN, sign)
        if redo.size:
            g[redo] = self.integer_laplace(redo.size, c, j)
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
        """answers + discrete Laplace noise of scale >= sensitivity/epsilon; epsilon-DP (L1-L6).

        sensitivity: L1 sensitivity of the answer vector.  integral: answers are
        integers (then exact).  Otherwise they are rounded to the grid first and
        max_column_nnz must bound the number of answers one record changes.
        """
        plan = _plan(sensitivity, epsilon, integral, max_column_nnz)
        c, j = plan.c, plan.j
        values, grid = noisy(answers, plan.k, integral, lambda n: self.integer_laplace(n, c, j))
        return LaplaceDraw(values, plan.scale, grid, plan.epsilon, self.research_mode)

    # ---- exponential mechanism --------------------------------------------
    def exponential_mechanism(
        self, scores: np.ndarray, *, sensitivity: float, epsilon: float
    ) -> int:
        """Index i with probability proportional to exp(epsilon*score_i/(2*sensitivity)) (E1-E4)."""
        exponent, mantissa = em_weights(scores, sensitivity, epsilon)
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


def em_weights(
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
