"""Statistical and contract tests of the kernel's noise samplers (ektelo.kernel.noise).

Every distribution test has a power check: the same test must reject a wrong
parameter (0.7x / 1.3x scale, 2x epsilon).  Research-mode seeds make it deterministic.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
from scipy import stats

from ektelo.kernel.noise import (
    LaplaceDraw,
    RandomSource,
    _em_weights,
    _Plan,
    _table,
    answer_limit,
    laplace_scale_for,
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
    k = RandomSource(11)._integer_laplace(300_000, c, j)
    assert np.array_equal(k, np.rint(k))
    edges = list(range(-6 * m, 6 * m))  # one bin per value, plus two tails
    assert _chi2_discrete_laplace(k, m, edges) > 1e-3
    for wrong in (0.7 * m, 1.3 * m):  # power check
        assert _chi2_discrete_laplace(k, wrong, edges) < 1e-6


def test_integer_pmf_multi_digit_factorisation() -> None:
    c, j = 5, 13  # digits of size 4096, 2 and 5 (m = 40960)
    m = c << j
    assert _Plan(0, c, j, 0.0, 0.0).digits == ((4096, 1), (2, 4096), (5, 8192))
    k = RandomSource(12)._integer_laplace(1_000_000, c, j)
    edges = [int(e) for e in np.arange(-6 * m, 6 * m, m // 8)]
    assert _chi2_discrete_laplace(k, m, edges) > 1e-3
    assert _chi2_discrete_laplace(k, 0.97 * m, edges) < 1e-6
    assert _chi2_discrete_laplace(k, 1.03 * m, edges) < 1e-6
    # sign symmetry and the zero atom (rejection of "-0")
    assert abs((k > 0).mean() - (k < 0).mean()) < 5 / math.sqrt(k.size)


def test_digit_tables_match_the_cdf() -> None:
    size, weight, m = 1000, 7, 9000
    t = _table(size, weight, m)
    rho = 2.0 ** (-weight / m)
    cdf = (1 - rho ** np.arange(1, size)) / (1 - rho**size)
    assert np.allclose(t.thresholds.astype(float) / 2.0**64, cdf, rtol=0, atol=1e-14)
    assert np.all(np.diff(t.thresholds.astype(np.float64)) > 0)  # every digit value reachable
    decided = t.guide >= 0
    assert decided.mean() > 1 - size / 2**16  # the 16-bit shortcut decides most lookups


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
                assert nnz * d.grid <= sens * (2**-20 if nnz / eps < 1e6 else 2**-12)
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
    exponent, mantissa = _em_weights(scores, 1.0, 0.3)
    implemented = np.log(mantissa.astype(float)) + exponent * math.log(2)
    eps_internal = 0.3 - 2**-34  # the slack that absorbs the weights' rounding (E4)
    ideal = np.maximum(eps_internal * (scores - scores.max()) / 2, -1024 * math.log(2))
    shift = implemented.max() - ideal.max()
    assert np.allclose(implemented - shift, ideal, rtol=0, atol=1e-9)


def test_exponential_mechanism_huge_range_never_zero() -> None:
    scores = np.array([0.0, -1e300, 1e300, -1.7e308, 1.7e308, 1.7e308, 3.0])
    exponent, mantissa = _em_weights(scores, 1.0, 1.0)
    assert np.all(mantissa > 0) and np.all(exponent >= -1024)  # every candidate reachable
    assert exponent[4] == exponent[5] == 0 and mantissa[4] == mantissa[5]
    counts = _em_counts(scores, 1.0, 400, seed=23)
    assert counts[[4, 5]].sum() == 400
    assert stats.binomtest(int(counts[4]), 400).pvalue > 1e-3  # the tie splits evenly


def test_exponential_mechanism_ties() -> None:
    scores = np.array([1.0, 1.0, 1.0, 0.0])
    exponent, mantissa = _em_weights(scores, 1.0, 1.0)
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
