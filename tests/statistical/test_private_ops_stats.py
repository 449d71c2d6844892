"""Statistical tests of the kernel's private operators (ektelo.kernel.mwem).

`worst_approx` must select row i with probability ∝ exp(ε·s_i/(2Δ)), s_i =
|w_i·x − w_i·x_hat| and Δ = max |w_ij|.  The observed frequencies are tested
against that softmax with a chi-square test, and the same sample must reject
the softmax of a wrong ε (0.7x, 1.3x, 2x) — a power check — and, for a
weighted workload, the softmax that assumes Δ = 1.  Research-mode seeds make
the tests deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import ektelo
from ektelo.matrix import EMatrix, Identity, Weighted

DRAWS = 6000
SCORES = np.arange(5.0)  # |x - x_hat| per cell; Identity rows read one cell each


def _softmax(scores: np.ndarray, eps: float, delta: float) -> np.ndarray:
    w = np.exp(eps * (scores - scores.max()) / (2 * delta))
    return w / w.sum()


def _frequencies(workload: EMatrix, eps: float, seed: int) -> np.ndarray:
    """Draws through the kernel, which computes Δ itself (sensitivity.py)."""
    x = ektelo.protect(SCORES.astype(np.int64), epsilon=DRAWS * eps + 1.0, seed=seed)
    x_hat = np.zeros(SCORES.size)
    picks = [x.worst_approx(workload, x_hat, eps=eps) for _ in range(DRAWS)]
    return np.bincount(picks, minlength=SCORES.size)


def _pvalue(observed: np.ndarray, probabilities: np.ndarray) -> float:
    return float(stats.chisquare(observed, probabilities * observed.sum()).pvalue)


@pytest.fixture(scope="module")
def unit_sample() -> np.ndarray:
    return _frequencies(Identity(5), 1.0, seed=2024)


def test_selection_frequencies_match_the_softmax(unit_sample: np.ndarray) -> None:
    assert _pvalue(unit_sample, _softmax(SCORES, 1.0, 1.0)) > 1e-3


@pytest.mark.parametrize("factor", [0.7, 1.3, 2.0])
def test_power_a_wrong_epsilon_is_detected(unit_sample: np.ndarray, factor: float) -> None:
    assert _pvalue(unit_sample, _softmax(SCORES, factor * 1.0, 1.0)) < 1e-6


def test_sensitivity_is_taken_from_the_coefficients() -> None:
    """Weights 3: scores triple and so does Δ, so the softmax is unchanged; a
    mechanism that assumed Δ = 1 would select ∝ exp(ε·3s/2)."""
    sample = _frequencies(Weighted(Identity(5), 3.0), 1.0, seed=77)
    weighted_scores = 3.0 * SCORES
    assert _pvalue(sample, _softmax(weighted_scores, 1.0, 3.0)) > 1e-3
    assert _pvalue(sample, _softmax(weighted_scores, 1.0, 1.0)) < 1e-6
