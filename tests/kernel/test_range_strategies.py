"""The kernel's Laplace measurement of weighted range strategies (§5.2):
GreedyH's `Product(Diagonal(c), RangeQueries)` and DAWA-Striped's union of one
such strategy per stripe, measured in one call on the 2-D vector.

The kernel computes the sensitivity itself (max column L1 norm, through
`Product.column_norms` term by term, and integrality through the diagonal
and the binary rows); these tests pin the recorded sensitivity, the noise
scale and the charge to exact values, so a wrong shortcut is caught.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import ektelo
from ektelo import workload as wl
from ektelo.matrix import Diagonal, Partition, Product, RangeQueries
from ektelo.operators import selection
from ektelo.operators.selection import greedy_h
from ektelo.plans import striped

EPS = 0.1


def _measure(x: np.ndarray, M: Product, eps: float = EPS):
    h = ektelo.protect(x, epsilon=1.0, seed=3)
    m = h.laplace(M, eps=eps)
    return h, m, h.history()[-1]


def test_overlapping_weighted_ranges_have_the_summed_weight():
    # columns 1 and 2 lie in both ranges: 0.5 + 0.75
    M = Product(Diagonal([0.5, 0.75]), RangeQueries(4, np.array([0, 1]), np.array([2, 3])))
    h, m, record = _measure(np.arange(4.0), M)
    assert record.sensitivity >= 1.25
    assert record.sensitivity <= 1.25 * (1 + 2 * (2 + 16) * 2.0**-52)
    assert m.noise_scale >= 1.25 / EPS
    assert h.ledger()[0].spent == Fraction(EPS)


def test_integral_weights_are_exact_fractional_ones_padded():
    """Integral entries: the column sums are exact, no rounding pad. A
    fractional weight on a non-empty range makes the product non-integral,
    and the kernel pads the sensitivity for rounding (`sensitivity_of`)."""
    ranges = RangeQueries(6, np.array([0, 3, 0]), np.array([2, 5, 5]))
    _, m, record = _measure(np.arange(6.0), Product(Diagonal([2.0, 3.0, 1.0]), ranges))
    assert record.sensitivity == 4.0
    assert m.noise_scale >= 4.0 / EPS
    _, m, record = _measure(np.arange(6.0), Product(Diagonal([2.0, 0.5, 1.0]), ranges))
    assert 3.0 < record.sensitivity <= 3.0 * (1 + 20 * 2.0**-52)
    assert m.noise_scale >= 3.0 / EPS


def test_greedy_h_strategy_has_sensitivity_one():
    W = wl.random_range(64, 40, seed=2)
    A = greedy_h(64, W)
    D = A.dense()
    truth = max(sum(Fraction(float(v)) for v in D[:, j]) for j in range(64))
    _, m, record = _measure(np.arange(64.0), A)
    assert Fraction(record.sensitivity) >= truth
    assert abs(record.sensitivity - 1.0) < 1e-12
    assert m.noise_scale >= record.sensitivity / EPS


def test_striped_union_is_measured_with_the_largest_stripe_sensitivity():
    """DAWA-Striped's one call: its sensitivity is the largest of the stripes'
    (they share no cell), computed by the kernel on the union."""
    rng = np.random.default_rng(4)
    shape, axis = (5, 24), 1
    partitions, strategies = [], []
    for g in range(5):
        cuts = np.sort(rng.choice(np.arange(1, 24), size=3, replace=False))
        P = Partition(np.searchsorted(cuts, np.arange(24), side="right"))
        c = rng.random(P.num_groups) + 0.25 * g  # stripe g: weights up to 1 + g/4
        lo = np.arange(P.num_groups)
        strategies.append(Product(Diagonal(c), RangeQueries(P.num_groups, lo, lo)))
        partitions.append(P)
    M = selection.stripe_union(shape, axis, partitions, strategies)
    offsets = np.cumsum([0] + [A.shape[0] for A in strategies])
    D = M.dense()
    expected = max(float(A.sensitivity(1)) for A in strategies)
    assert np.isclose(np.abs(D).sum(axis=0).max(), expected, rtol=1e-15)
    h, m, record = _measure(rng.poisson(3, shape), M)
    assert expected <= record.sensitivity <= expected * (1 + 20 * 2.0**-52)
    assert m.noise_scale >= expected / EPS
    assert h.ledger()[0].spent == Fraction(EPS)
    # each stripe's row block reads exactly its own cells, group by group
    cells = np.arange(np.prod(shape)).reshape(shape)
    for g, (P, A) in enumerate(zip(partitions, strategies, strict=True)):
        block = D[offsets[g] : offsets[g + 1]]
        on_stripe = np.zeros_like(block)
        on_stripe[:, cells[g]] = A.dense() @ P.reduce_matrix().dense()
        np.testing.assert_array_equal(block, on_stripe)


def test_dawa_striped_charges_partitions_in_parallel_and_one_union():
    """ratio·ε per stripe's partition, charged once at the root through the
    split (parallel composition), and (1 − ratio)·ε for the one union call."""
    x = np.random.default_rng(5).poisson(4, size=(6, 32))
    x[:, 10:20] = 0
    h = ektelo.protect(x, epsilon=1.0, seed=8)
    out = striped.dawa_striped(h, wl.random_range((6, 32), 15, seed=2), 1.0)
    assert out.shape == (6 * 32,) and np.all(np.isfinite(out))
    history = h.history()
    assert [r.operation for r in history].count("dawa_partition") == 6
    (union,) = [r for r in history if r.operation == "laplace"]
    assert union.eps == 0.75 and union.charged_at_root == 0.75
    assert 1.0 <= union.sensitivity <= 1.0 + 1e-12  # GreedyH's strategies: 1 per stripe
    parts = sum(Fraction(r.charged_at_root) for r in history if r.operation == "dawa_partition")
    assert parts == Fraction(0.25)
    assert abs(h.ledger()[0].spent - 1) <= Fraction(1, 10**9)
