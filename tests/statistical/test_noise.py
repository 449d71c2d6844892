"""Statistical and contract tests of the kernel's noise samplers (ektelo.kernel.noise).

Every distribution test has a power check: the same test must reject a wrong
parameter (0.7x / 1.3x scale, 2x epsilon).  Research-mode seeds make it deterministic.
The exact parts (tables L4/B2, bounds B3, the fine and exact paths B4/X1) are
checked against 80-digit decimal values, the rare paths by forcing their bits.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import FrozenInstanceError
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

# the exact sampler's tables and bit-level steps are checked exactly: they are
# noise.py's module names and RandomSource's methods (the proof notes' steps),
# outside `ektelo.kernel.__all__`; the kernel's port returns only noisy answers
from ektelo.kernel.noise import (
    LaplaceDraw,
    RandomSource,
    answer_limit,
    digit_table,
    em_weights,
    laplace_scale_for,
    lead_table,
    power_table,
)

# ---------------------------------------------------------------- helpers


def _interval_mass(lo: int, hi: int, q: float) -> float:
    """P(lo <= K <= hi) for P(K = k) = (1-q)/(1+q) q**|k| (lo <= hi, may be +-inf)."""

    def tail(a: float) -> float:  # P(K >= a), a >= 1 integer or inf
        return 0.0 if math.isinf(a) else q**a / (1 + q)

    def upto(b: float) -> float:  # P(K <= b)
        if b < 0:
            return tail(-b)
        return 1.0 - tail(b + 1)

    return upto(hi) - (0.0 if lo == -math.inf else upto(lo - 1))


def _chi2_discrete_laplace(k: np.ndarray, m: float, edges: list[float]) -> float:
    """Chi-square p-value of integer draws k against P(K = k) proportional to 2**(-|k|/m)."""
    q = 2.0 ** (-1.0 / m)
    bounds = [-math.inf, *edges, math.inf]
    lows = [-math.inf] + [e + 1 for e in edges]
    expected = np.array(
        [_interval_mass(lo, hi, q) for lo, hi in zip(lows, bounds[1:], strict=True)]
    )
    observed = np.histogram(k, bins=[-np.inf, *[e + 0.5 for e in edges], np.inf])[0]
    return float(stats.chisquare(observed, expected * k.size / expected.sum()).pvalue)


def _laplace(answers, seed: int = 7, **kw) -> LaplaceDraw:
    return RandomSource(seed).laplace(np.asarray(answers, dtype=float), **kw)


# ---------------------------------------------------------------- exact integer pmf


@pytest.mark.parametrize(("c", "j"), [(1, 0), (3, 0), (3, 2)])
def test_integer_pmf_exact_per_value(c: int, j: int) -> None:
    m = c << j
    k = RandomSource(11).integer_laplace(300_000, c, j)
    assert np.array_equal(k, np.rint(k))
    edges = list(range(-6 * m, 6 * m))  # one bin per value, plus two tails
    assert _chi2_discrete_laplace(k, m, edges) > 1e-3
    for wrong in (0.7 * m, 1.3 * m):  # power check
        assert _chi2_discrete_laplace(k, wrong, edges) < 1e-6


@pytest.mark.parametrize(("c", "j", "n"), [(5, 13, 1_000_000), (2900, 3, 600_000)])
def test_integer_pmf_with_low_bits(c: int, j: int, n: int) -> None:
    """m = c*2**j: D by the table, L (j bits) by rejection from uniform (L2)."""
    m = c << j
    k = RandomSource(12).integer_laplace(n, c, j)
    assert np.array_equal(k, np.rint(k))
    edges = [int(e) for e in np.arange(-6 * m, 6 * m, m // 8)]
    assert _chi2_discrete_laplace(k, m, edges) > 1e-3
    assert _chi2_discrete_laplace(k, 0.97 * m, edges) < 1e-6
    assert _chi2_discrete_laplace(k, 1.03 * m, edges) < 1e-6
    # sign symmetry and the zero atom (rejection of "-0")
    assert abs((k > 0).mean() - (k < 0).mean()) < 5 / math.sqrt(k.size)
    # L's residues: P(K mod 2**j = l | K >= 0) proportional to 2**(-l/m), per value
    low = k[k >= 0].astype(np.int64) % (1 << j)
    p = 2.0 ** (-np.arange(1 << j) / m)
    counts = np.bincount(low, minlength=1 << j)
    assert stats.chisquare(counts, p / p.sum() * low.size).pvalue > 1e-3


def _theta(c: int, r: int) -> Decimal:
    """theta_r = 2**65 * (1 - 2**(-r/c)) to 80 digits (L3)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(2) ** 65 * (1 - (-(Decimal(r) / c) * Decimal(2).ln()).exp())


def _old_decimal_thresholds(c: int) -> list[int]:
    """The former tables: round(2**64 * CDF) in 60-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 60
        rho = Decimal(2) ** (Decimal(-1) / Decimal(c))
        total = 1 - rho**c
        one, power, cuts = Decimal(2**64), Decimal(1), []
        for _ in range(c - 1):
            power *= rho
            cuts.append(int(((1 - power) / total * one).to_integral_value()))
    return cuts


@pytest.mark.parametrize("c", [2, 3, 178, 2048, 2049, 2900, 3000, 4095, 4096])
def test_digit_tables_exact_within_the_stated_bound(c: int) -> None:
    """L4: every T_r within 1/2 + 2**-11 of theta_r, and equal to the old 60-digit
    Decimal table except where theta_r is that close to a half-integer."""
    table = digit_table(c)
    old = _old_decimal_thresholds(c)
    assert table.thresholds.size == len(old) == c - 1
    near_half = 0
    for r, (t, o) in enumerate(zip(table.thresholds.tolist(), old, strict=True), start=1):
        exact = _theta(c, r)
        assert abs(t - exact) <= Decimal("0.5") + Decimal(2) ** -11
        frac = exact - int(exact)
        if abs(frac - Decimal("0.5")) > Decimal(2) ** -10:
            assert t == o == int(exact + Decimal("0.5"))
        else:
            near_half += 1
    assert near_half <= max(3, c // 64)  # about c * 2**-9 entries are that close


def test_digit_guide_is_consistent() -> None:
    table = digit_table(2900)
    t = table.thresholds
    leads = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
    lo = np.searchsorted(t, leads, side="right")
    hi = np.searchsorted(t, leads | np.uint64((1 << 48) - 1), side="right")
    decided = table.guide >= 0
    assert np.array_equal(table.guide[decided], lo[decided])
    assert np.all(lo[decided] == hi[decided])
    index = -1 - table.guide[~decided].astype(np.int64)  # the bucket's only threshold
    assert np.array_equal(t[index] >> np.uint64(48), np.flatnonzero(~decided).astype(np.uint64))
    assert np.all(hi[~decided] - lo[~decided] <= 1)
    assert decided.mean() > 1 - 2900 / 2**16


@pytest.mark.parametrize("level", [1, 2, 3])
def test_power_tables_within_the_stated_bound(level: int) -> None:
    """B2: T_level[z] within 1/2 + 2**-14 of 2**62 * 2**(-z/2**(12 level))."""
    table = power_table(level).tolist()
    with localcontext() as ctx:
        ctx.prec = 80
        ln2 = Decimal(2).ln()
        for z in [*range(0, 4096, 37), 4095]:
            exact = Decimal(2) ** 62 * (-(Decimal(z) / 2 ** (12 * level)) * ln2).exp()
            assert abs(table[z] - exact) <= Decimal("0.5") + Decimal(2) ** -14


def test_lead_table_bounds_are_valid() -> None:
    """B3: for every x in bucket s, b < L[s] implies U < 2**-x, and b >= L[s] + 2
    implies U >= 2**-x (U in [b/2**8, (b+1)/2**8))."""
    lead = lead_table()
    assert lead.size == 9 << 12 and np.all(np.diff(lead) <= 0) and np.all(lead[8 << 12 :] == -1)
    with localcontext() as ctx:
        ctx.prec = 40
        ln2 = Decimal(2).ln()
        for s in [*range(0, 9 << 12, 97), 4095, 4096, (8 << 12) - 1, 8 << 12]:
            p_min = (-(Decimal(s + 1) / 4096) * ln2).exp()  # 2**-x over the bucket
            p_max = (-(Decimal(s) / 4096) * ln2).exp()
            b = int(lead[s])
            assert Decimal(b) / 256 <= p_min  # every accepted byte: (b+1)/2**8 <= 2**-x
            assert Decimal(b + 2) / 256 >= p_max  # every rejected byte: b/2**8 >= 2**-x


# ---------------------------------------------------------------- Bernoulli(2**-x), exact paths


def _pow2(x: Fraction, prec: int = 100) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = prec
        return (-(Decimal(x.numerator) / x.denominator) * Decimal(2).ln()).exp()


@pytest.mark.parametrize(
    ("num", "den"), [(0, 7), (1, 4096), (3, 7), (7, 3), (5, 1), (100, 9), (12345, 4321)]
)
def test_bernoulli_pow2_frequency_with_power(num: int, den: int) -> None:
    n = 400_000
    src = RandomSource(31)
    hits = int(src.bernoulli_pow2(np.full(n, num, dtype=np.int64), den).sum())
    p = 2.0 ** (-num / den)
    if p == 1.0:
        assert hits == n
        return
    assert stats.binomtest(hits, n, p).pvalue > 1e-3
    for wrong in (p * 0.97, min(1.0, p * 1.03)):
        if abs(wrong - p) * math.sqrt(n) > 8 * math.sqrt(p * (1 - p)):
            assert stats.binomtest(hits, n, wrong).pvalue < 1e-6


def test_bernoulli_pow2_mixed_exponents_vectorised() -> None:
    rng = np.random.default_rng(3)
    num = rng.integers(0, 9 * 1000, 300_000)
    hits = RandomSource(32).bernoulli_pow2(num, 1000)
    p = 2.0 ** (-num / 1000)
    z = (hits.sum() - p.sum()) / math.sqrt((p * (1 - p)).sum())
    assert abs(z) < 5
    big = num > 8000  # x >= 8: only a zero first byte can accept
    assert abs(hits[big].mean() - p[big].mean()) < 5 * math.sqrt(p[big].mean() / big.sum())


class _Words(RandomSource):
    """A research source whose next 64-bit words can be forced (the rare paths)."""

    def __init__(self, words: list[int]) -> None:
        super().__init__(seed=1)
        self.words = list(words)

    def uint64(self, n: int) -> np.ndarray:
        if self.words:
            out = np.array(self.words[:n], dtype=np.uint64)
            del self.words[:n]
            return out
        return super().uint64(n)


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(7, 5), Fraction(5, 1), Fraction(1, 10**9)])
def test_exact_less_at_the_boundary(x: Fraction) -> None:
    """X1: U's 62-bit prefix on the boundary of 2**-x: decided by the next word."""
    exact = _pow2(x) * 2**62
    u = int(exact)  # u < 2**62 * 2**-x < u + 1: undecided
    for word in (0, 1 << 63, (1 << 64) - 1, 0x5555_5555_5555_5555):
        src = _Words([word])
        got = src.exact_less(u, 62, Fraction(0), Fraction(1), x)
        want = (Decimal(u) + Decimal(word) / 2**64) < exact
        assert got == want
    assert RandomSource(0).exact_less(u - 1, 62, Fraction(0), Fraction(1), x)
    assert not RandomSource(0).exact_less(u + 1, 62, Fraction(0), Fraction(1), x)
    # a dyadic 2**-x (x an integer) is decided exactly at its boundary
    assert not RandomSource(0).exact_less(1 << 57, 62, Fraction(0), Fraction(1), Fraction(5))


def test_bernoulli_fine_path_agrees_with_decimal() -> None:
    """B4 (then X1) for exponents with all 12-bit parts nonzero, u near 2**62 * 2**-x."""
    rng = np.random.default_rng(5)
    for _ in range(60):
        den = int(rng.integers(2, 1 << 40))
        num = int(rng.integers(0, 9 * den))
        exact = _pow2(Fraction(num, den)) * 2**62
        for u in (int(exact) - 2, int(exact) + 1, int(exact) - (1 << 20), int(exact) + (1 << 20)):
            if 0 <= u < 1 << 62:
                assert RandomSource(7).bernoulli_fine(num, den, u) == (u < exact)
        u = int(exact)  # on the boundary: the next word decides, exactly
        for word in (0, (1 << 64) - 1, 0x9E37_79B9_7F4A_7C15):
            got = _Words([word]).bernoulli_fine(num, den, u)
            assert got == (Decimal(u) + Decimal(word) / 2**64 < exact)


def test_digit_ties_are_exact() -> None:
    """L3: a 64-bit prefix equal to T_i or T_i - 1 is decided by further bits (X1)."""
    c, i = 2900, 1234
    table = digit_table(c)
    t = int(table.thresholds[i])
    exact = _theta(c, i + 1)
    for u in (t - 1, t):
        assert table.guide[u >> 48] == -1 - i
        for word in (0, (1 << 64) - 1, 1 << 63):
            src = _Words([(u & ((1 << 48) - 1)) << 16, word])  # u's low 48 bits, then more
            lead = np.array([u >> 48], dtype=np.uint16)
            d = int(src.open_digits(table, table.guide[lead], lead, c)[0])
            assert d == (i + 1 if Decimal(u) + Decimal(word) / 2**64 >= exact else i)


# ---------------------------------------------------------------- Laplace: scale, KS with power


@pytest.mark.parametrize("integral", [True, False])
def test_laplace_ks_power(integral: bool) -> None:
    answers = np.zeros(20_000) if integral else np.full(20_000, 0.3)
    draw = _laplace(answers, seed=3, sensitivity=1.0, epsilon=0.5, integral=integral)
    noise = draw.values - (0.0 if integral else 0.3)
    b = draw.scale
    assert stats.kstest(noise, "laplace", args=(0, b)).pvalue > 1e-3
    for wrong in (0.7 * b, 1.3 * b):
        assert stats.kstest(noise, "laplace", args=(0, wrong)).pvalue < 1e-6


def test_laplace_mean_and_scale_recovered() -> None:
    draw = _laplace(np.full(400_000, 5.0), seed=5, sensitivity=2.0, epsilon=0.25, integral=True)
    noise = draw.values - 5.0
    b = draw.scale
    q = math.exp(-draw.grid / b)
    mean_abs = 2 * q / ((1 - q) * (1 + q)) * draw.grid  # E|K| * grid, K discrete Laplace
    sd = math.sqrt(2) * b / math.sqrt(noise.size)
    assert abs(noise.mean()) < 5 * sd
    assert abs(np.abs(noise).mean() - mean_abs) < 5 * b / math.sqrt(noise.size)
    assert abs(np.abs(noise).mean() / 8.0 - 1) < 0.01  # b ~ sensitivity/epsilon = 8


SENS = [1e-6, 0.01, 0.5, 1.0, 3.0, 17.5, 1e3, 1e6]
EPS = [1e-4, 0.01, 0.1, 1.0, 10.0, 100.0]


@pytest.mark.parametrize("integral", [True, False])
@pytest.mark.parametrize("nnz", [1, 10, 1000])
def test_scale_never_below_nominal_and_within_0_1_percent(integral: bool, nnz: int) -> None:
    src = RandomSource(0)
    for sens in SENS:
        for eps in EPS:
            d = src.laplace(
                np.zeros(0), sensitivity=sens, epsilon=eps, integral=integral, max_column_nnz=nnz
            )
            nominal = sens / eps
            assert nominal <= d.scale <= nominal * (1 + 2**-10), (sens, eps)
            assert eps * (1 - 2**-10) <= d.epsilon <= eps
            assert d.scale == laplace_scale_for(sens, eps, integral=integral, max_column_nnz=nnz)
            assert math.frexp(d.grid)[0] == 0.5  # a power of two
            if integral:
                assert d.grid <= 1.0
            else:
                assert nnz * d.grid <= sens * 2**-12  # L5 (coarser only if nnz/eps > ~1.9e8)
                assert (sens + nnz * d.grid) / d.scale <= eps


def test_outputs_on_the_grid_and_read_only() -> None:
    d = _laplace([0.1234, -7.3, 1e6 + 0.5], sensitivity=1.0, epsilon=1.0, integral=False)
    assert np.array_equal(d.values / d.grid, np.rint(d.values / d.grid))
    with pytest.raises(ValueError):
        d.values[0] = 0.0
    with pytest.raises(FrozenInstanceError):
        d.scale = 0.0  # type: ignore[misc]
    i = _laplace(np.arange(12.0).reshape(3, 4), sensitivity=1.0, epsilon=1.0, integral=True)
    assert i.values.shape == (3, 4) and i.values.dtype == np.float64
    assert np.array_equal(i.values / i.grid, np.rint(i.values / i.grid))
    assert _laplace(np.zeros(0), sensitivity=1.0, epsilon=1.0, integral=True).values.shape == (0,)


def test_large_request_is_chunked_and_independent() -> None:
    d = _laplace(np.zeros(2_500_000), seed=9, sensitivity=1.0, epsilon=1.0, integral=True)
    v = d.values
    assert abs(np.abs(v).mean() - d.scale) < 0.01 * d.scale
    assert abs(np.corrcoef(v[:-1], v[1:])[0, 1]) < 5 / math.sqrt(v.size)
    half = v.size // 2
    assert stats.ks_2samp(v[:half], v[half:]).pvalue > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "answers", "message"),
    [
        ({"sensitivity": 1.0, "epsilon": 0.0}, [0.0], "epsilon"),
        ({"sensitivity": 1.0, "epsilon": -1.0}, [0.0], "epsilon"),
        ({"sensitivity": 1.0, "epsilon": math.nan}, [0.0], "epsilon"),
        ({"sensitivity": 1.0, "epsilon": math.inf}, [0.0], "epsilon"),
        ({"sensitivity": -1.0, "epsilon": 1.0}, [0.0], "sensitivity"),
        ({"sensitivity": 0.0, "epsilon": 1.0}, [0.0], "sensitivity"),
        ({"sensitivity": math.inf, "epsilon": 1.0}, [0.0], "sensitivity"),
        ({"sensitivity": 1.0, "epsilon": 1.0, "max_column_nnz": 0}, [1.0], "max_column_nnz"),
    ],
)
def test_bad_input_raises(kwargs: dict, answers: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RandomSource(0).laplace(np.array(answers), integral=True, **kwargs)


def test_the_memoised_plan_refuses_what_it_refused_before() -> None:
    """The noise plan is memoised on its public arguments, by value and type:
    a valid call first does not let a refused argument through — a bool is
    not a sensitivity though True == 1.0, and a refusal is never cached."""
    scale = laplace_scale_for(1.0, 0.5, integral=True, max_column_nnz=1)
    assert laplace_scale_for(1.0, 0.5, integral=True, max_column_nnz=1) == scale
    with pytest.raises(ValueError, match="sensitivity"):
        laplace_scale_for(True, 0.5, integral=True, max_column_nnz=1)
    for _ in range(2):
        with pytest.raises(ValueError, match="epsilon"):
            laplace_scale_for(1.0, math.nan, integral=True, max_column_nnz=1)
    with pytest.raises(ValueError, match="max_column_nnz"):
        laplace_scale_for(1.0, 0.5, integral=True, max_column_nnz=True)


@pytest.mark.parametrize("integral", [True, False])
def test_answers_are_clamped_never_checked(integral: bool) -> None:
    """L6: the answers' values never raise (the kernel draws after charging):
    NaN → 0, ±∞ and huge values → ±limit, fractions → rint (integral)."""
    answers = np.array([math.nan, math.inf, -math.inf, 1e308, -1e308, 2.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = RandomSource(0).laplace(answers, sensitivity=1.0, epsilon=1e6, integral=integral)
    limit = answer_limit(round(-math.log2(d.grid)), integral)
    assert np.all(np.isfinite(d.values))
    centre = [0.0, limit, -limit, limit, -limit, 2.0 if integral else 2.5]
    np.testing.assert_allclose(d.values, centre, rtol=1e-9, atol=1e-3)


def test_non_integral_accepts_reals() -> None:
    d = RandomSource(0).laplace(np.array([1.0, 2.5]), sensitivity=1.0, epsilon=1.0, integral=False)
    assert d.values.shape == (2,)


# ---------------------------------------------------------------- bit sources


def test_secure_mode_is_not_reproducible() -> None:
    a, b = RandomSource(), RandomSource()
    assert a.seed is None and not a.research_mode
    x = a.laplace(np.zeros(64), sensitivity=1.0, epsilon=1.0, integral=True)
    y = b.laplace(np.zeros(64), sensitivity=1.0, epsilon=1.0, integral=True)
    assert not x.research_mode
    assert not np.array_equal(x.values, y.values)
    assert not np.array_equal(a.uint64(4), b.uint64(4))


def test_research_mode_is_reproducible_and_visible() -> None:
    a, b = RandomSource(seed=42), RandomSource(seed=42)
    assert a.seed == 42 and a.research_mode and "NOT secure" in repr(a)
    x = a.laplace(np.zeros(1000), sensitivity=1.0, epsilon=1.0, integral=False)
    y = b.laplace(np.zeros(1000), sensitivity=1.0, epsilon=1.0, integral=False)
    assert x.research_mode and np.array_equal(x.values, y.values)
    assert a.exponential_mechanism(
        np.arange(50.0), sensitivity=1, epsilon=1
    ) == b.exponential_mechanism(np.arange(50.0), sensitivity=1, epsilon=1)
    z = RandomSource(seed=43).laplace(np.zeros(1000), sensitivity=1.0, epsilon=1.0, integral=False)
    assert not np.array_equal(x.values, z.values)
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="seed"):
            RandomSource(seed=bad)  # type: ignore[arg-type]


def test_bits_and_randbelow_are_uniform() -> None:
    src = RandomSource(1)
    words = src.uint64(200_000)
    assert words.dtype == np.uint64
    bits = ((words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 5 * 0.5 / math.sqrt(words.size))
    draws = np.array([src.randbelow(6) for _ in range(12_000)])
    assert stats.chisquare(np.bincount(draws, minlength=6)).pvalue > 1e-3
    assert 0 <= src.randbelow(3 * 2**200) < 3 * 2**200
    with pytest.raises(ValueError):
        src.randbelow(0)


# ---------------------------------------------------------------- exponential mechanism


def _em_counts(scores: np.ndarray, eps: float, n: int, seed: int, sens: float = 1.0) -> np.ndarray:
    src = RandomSource(seed)
    picks = [src.exponential_mechanism(scores, sensitivity=sens, epsilon=eps) for _ in range(n)]
    return np.bincount(picks, minlength=scores.size)


def _softmax(scores: np.ndarray, eps: float, sens: float = 1.0) -> np.ndarray:
    z = eps * (scores - scores.max()) / (2 * sens)
    p = np.exp(z)
    return p / p.sum()


def test_exponential_mechanism_matches_softmax_with_power() -> None:
    scores = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 2.5])
    eps, n = 1.0, 6000
    counts = _em_counts(scores, eps, n, seed=21)
    p = _softmax(scores, eps)
    assert stats.chisquare(counts, n * p).pvalue > 1e-3
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(counts / n - p) < 4.5 * se)  # per-candidate intervals
    assert stats.chisquare(counts, n * _softmax(scores, 2 * eps)).pvalue < 1e-6  # power: 2x eps
    assert stats.chisquare(counts, n * _softmax(scores, eps / 2)).pvalue < 1e-6


def test_exponential_mechanism_sensitivity_scales() -> None:
    scores = np.array([0.0, 10.0, 20.0, 30.0])
    counts = _em_counts(scores, 1.0, 4000, seed=22, sens=10.0)
    assert stats.chisquare(counts, 4000 * _softmax(scores, 1.0, 10.0)).pvalue > 1e-3


def test_exponential_mechanism_implemented_weights_are_accurate() -> None:
    scores = np.random.default_rng(0).normal(scale=200.0, size=1000)
    exponent, mantissa = em_weights(scores, 1.0, 0.3)
    implemented = np.log(mantissa.astype(float)) + exponent * math.log(2)
    eps_internal = 0.3 - 2**-34  # the slack that absorbs the weights' rounding (E4)
    ideal = np.maximum(eps_internal * (scores - scores.max()) / 2, -1024 * math.log(2))
    shift = implemented.max() - ideal.max()
    assert np.allclose(implemented - shift, ideal, rtol=0, atol=1e-9)


def test_exponential_mechanism_huge_range_never_zero() -> None:
    scores = np.array([0.0, -1e300, 1e300, -1.7e308, 1.7e308, 1.7e308, 3.0])
    exponent, mantissa = em_weights(scores, 1.0, 1.0)
    assert np.all(mantissa > 0) and np.all(exponent >= -1024)  # every candidate reachable
    assert exponent[4] == exponent[5] == 0 and mantissa[4] == mantissa[5]
    counts = _em_counts(scores, 1.0, 400, seed=23)
    assert counts[[4, 5]].sum() == 400
    assert stats.binomtest(int(counts[4]), 400).pvalue > 1e-3  # the tie splits evenly


def test_exponential_mechanism_ties() -> None:
    scores = np.array([1.0, 1.0, 1.0, 0.0])
    exponent, mantissa = em_weights(scores, 1.0, 1.0)
    assert len(set(zip(exponent[:3], mantissa[:3], strict=True))) == 1
    counts = _em_counts(scores, 1.0, 3000, seed=24)
    assert stats.chisquare(counts, 3000 * _softmax(scores, 1.0)).pvalue > 1e-3
    assert _em_counts(np.zeros(7), 1.0, 1, seed=1).sum() == 1


def test_exponential_mechanism_many_candidates() -> None:
    scores = np.random.default_rng(1).uniform(0, 50, size=100_000)
    picks = [
        RandomSource(s).exponential_mechanism(scores, sensitivity=1.0, epsilon=1.0)
        for s in range(20)
    ]
    assert all(0 <= i < scores.size for i in picks)
    # concentrated on high scores: the top candidates have ~e**25 times more weight
    assert np.mean(scores[picks]) > 40


@pytest.mark.parametrize(
    ("scores", "kwargs", "message"),
    [
        ([1.0, math.nan], {"sensitivity": 1.0, "epsilon": 1.0}, "finite"),
        ([1.0, math.inf], {"sensitivity": 1.0, "epsilon": 1.0}, "finite"),
        ([], {"sensitivity": 1.0, "epsilon": 1.0}, "non-empty"),
        ([[1.0]], {"sensitivity": 1.0, "epsilon": 1.0}, "1-D"),
        ([1.0], {"sensitivity": 1.0, "epsilon": 0.0}, "epsilon"),
        ([1.0], {"sensitivity": -2.0, "epsilon": 1.0}, "sensitivity"),
        ([1.0], {"sensitivity": 1.0, "epsilon": 1e-12}, "too small"),
    ],
)
def test_exponential_mechanism_bad_input(scores: list, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RandomSource(0).exponential_mechanism(np.array(scores), **kwargs)
