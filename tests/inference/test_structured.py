"""Structure read from the measurements (`ektelo.inference.structured`):
estimation on a partition's groups (``groups=``), and block-diagonal least
squares over disjoint split pieces; each against a direct solver."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

import ektelo
from ektelo import inference as inf
from ektelo.matrix import (
    Dense,
    EMatrix,
    Hierarchy,
    Identity,
    Partition,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Total,
)
from ektelo.measurement import Measurement


def measure(
    Q: EMatrix,
    x_measured: np.ndarray,
    scale: float,
    rng: np.random.Generator,
    on_root: EMatrix | None = None,
) -> Measurement:
    y = Q.matvec(x_measured) + rng.laplace(0.0, scale, Q.shape[0])
    root = Q if on_root is None else on_root
    return Measurement(y, Q, root, scale, 1.0, "root", (root.shape[1],))


def partition(n: int, k: int, rng: np.random.Generator) -> Partition:
    """k groups of scattered cells, of unequal sizes."""
    groups = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])
    return Partition(groups[rng.permutation(n)])


# ---------------------------------------------------------------------------
# groups=
# ---------------------------------------------------------------------------


def test_least_squares_on_groups_is_the_fit_on_the_group_totals(rng) -> None:
    """Measurements of x.reduce_by_partition(P): the fit on the k totals,
    spread uniformly — what the plans did by rewriting the record's root."""
    n = 60
    x = rng.integers(0, 30, n).astype(float)
    P = partition(n, 9, rng)
    Q = Prefix(P.num_groups)
    m = measure(Q, P.reduce(x), 2.0, rng, on_root=Product(Q, P.reduce_matrix()))
    m_total = measure(Total(P.num_groups), P.reduce(x), 4.0, rng)
    m_total = Measurement(m_total.answers, m_total.query, Total(n), 4.0, 1.0, "root", (n,))
    est = inf.least_squares([m, m_total], groups=P)
    A = np.vstack([Q.dense() / 2.0, np.ones((1, P.num_groups)) / 4.0])
    z = np.linalg.lstsq(A, np.concatenate([m.answers / 2.0, m_total.answers / 4.0]), rcond=None)[0]
    assert est.x.shape == (n,) and est.info.converged
    np.testing.assert_allclose(est.x, P.expand(z), rtol=1e-8, atol=1e-8)
    # the same as least squares on the cells (Q·R determines only the totals:
    # the minimum-norm solution spreads them evenly)
    on_cells = inf.least_squares([m, m_total])
    np.testing.assert_allclose(est.x, on_cells.x, rtol=1e-6, atol=1e-6)


def test_groups_through_the_kernel_with_composed_partitions(rng) -> None:
    """A vector reduced twice: the groups of the root are the composition,
    numbered in any order; the measurement's own query is used."""
    n = 64
    x = rng.integers(0, 30, n).astype(float)
    h = ektelo.protect(x, epsilon=2.0, seed=5)
    P1 = Partition(np.arange(n) // 4)
    P2 = Partition((np.arange(16) * 7) % 5)  # 5 groups of the 16 totals
    m = h.reduce_by_partition(P1).reduce_by_partition(P2).laplace(Identity(5), eps=1.0)
    composed = Partition(P2.groups[P1.groups])
    est = inf.least_squares([m], groups=composed)
    totals = composed.reduce(est.x)
    np.testing.assert_allclose(P2.reduce(P1.reduce(est.x)), m.answers, rtol=1e-9)
    np.testing.assert_allclose(est.x, composed.expand(totals), rtol=1e-12)
    relabelled = Partition(4 - composed.groups)  # the same groups, other numbers
    np.testing.assert_allclose(inf.least_squares([m], groups=relabelled).x, est.x, rtol=1e-9)


def test_a_chain_of_partitions_spreads_each_step_evenly(rng) -> None:
    """groups=[P1, P2] for x.reduce_by_partition(P1).reduce_by_partition(P2):
    the fit on P2's totals, spread evenly over P1's groups, then over the
    cells (DAWA after workload reduction)."""
    n = 48
    x = rng.integers(0, 30, n).astype(float)
    P1 = partition(n, 20, rng)
    P2 = partition(P1.num_groups, 6, rng)
    Q = Prefix(P2.num_groups)
    on_root = Product(Q, Product(P2.reduce_matrix(), P1.reduce_matrix()))
    m = measure(Q, P2.reduce(P1.reduce(x)), 1.0, rng, on_root=on_root)
    z = np.linalg.lstsq(Q.dense(), m.answers, rcond=None)[0]
    est = inf.least_squares([m], groups=[P1, P2])
    np.testing.assert_allclose(est.x, P1.expand(P2.expand(z)), rtol=1e-8, atol=1e-8)
    mw = inf.multiplicative_weights([m], groups=[P1, P2], total=float(x.sum()), maxiter=5)
    np.testing.assert_allclose(P1.expand(P2.expand(P2.reduce(P1.reduce(mw.x)))), mw.x, rtol=1e-12)
    with pytest.raises(ValueError, match=r"groups\[1\] partitions 6 cells"):
        inf.least_squares([m], groups=[P1, Partition(np.arange(6))])


def test_nnls_on_groups_matches_scipy_on_the_group_totals(rng) -> None:
    n = 80
    x = np.where(rng.random(n) < 0.6, 0.0, rng.integers(1, 20, n).astype(float))
    P = partition(n, 12, rng)
    k = P.num_groups
    lo = rng.integers(0, k, 20)
    hi = np.minimum(lo + rng.integers(0, 4, 20), k - 1)
    Q = RangeQueries(k, lo, hi)
    m = measure(Q, P.reduce(x), 6.0, rng, on_root=Product(Q, P.reduce_matrix()))
    est = inf.nnls([m], groups=P, tol=1e-12)
    z = so.nnls(Q.dense(), m.answers)[0]
    assert np.all(est.x >= 0)
    np.testing.assert_allclose(P.reduce(est.x), z, atol=1e-7)
    np.testing.assert_allclose(est.x, P.expand(P.reduce(est.x)), rtol=1e-12)


def test_groups_restrict_measurements_of_the_cells_to_group_uniform_vectors(rng) -> None:
    """A measurement of the cells themselves: the fit over vectors uniform
    within each group (x = P⁺z), in closed form."""
    n = 30
    x = rng.integers(0, 30, n).astype(float)
    P = partition(n, 7, rng)
    m = measure(Dense(rng.normal(size=(40, n))), x, 1.0, rng)
    E = P.expand_matrix().dense()
    z = np.linalg.lstsq(m.query.dense() @ E, m.answers, rcond=None)[0]
    est = inf.least_squares([m], groups=P, total=float(x.sum()))
    assert est.x.sum() == pytest.approx(x.sum(), rel=1e-5)
    free = inf.least_squares([m], groups=P)
    np.testing.assert_allclose(free.x, E @ z, rtol=1e-7, atol=1e-7)


def test_groups_must_partition_the_root(rng) -> None:
    m = measure(Identity(8), np.ones(8), 1.0, rng)
    for estimator in (inf.least_squares, inf.nnls, inf.multiplicative_weights):
        with pytest.raises(ValueError, match="partitions 4 cells"):
            estimator([m], groups=Partition(np.arange(4) // 2))
        with pytest.raises(TypeError, match="Partition"):
            estimator([m], groups=np.arange(8) // 2)


# ---------------------------------------------------------------------------
# Block-diagonal systems: disjoint split pieces
# ---------------------------------------------------------------------------


def _selection(cells: np.ndarray, n: int) -> Sparse:
    k = cells.size
    return Sparse(sp.csr_matrix((np.ones(k), (np.arange(k), cells)), shape=(k, n)))


@pytest.mark.parametrize("stripe", [8, 3000])
def test_split_pieces_are_solved_piece_by_piece(stripe, rng) -> None:
    """Stripes measured by one matrix each (HB-Striped): block diagonal,
    solved per stripe (one dense solve for small equal stripes, the tree
    solve for large ones) — the joint least-squares estimate."""
    stripes = 4
    n = stripes * stripe
    x = rng.integers(0, 30, n).astype(float)
    cells = np.arange(n).reshape(stripe, stripes).T  # stripe g: cells g, g + 4, …
    H = Hierarchy(stripe, 4, root=False)
    ms = [measure(H, x[c], 2.0, rng, on_root=Product(H, _selection(c, n))) for c in cells]
    est = inf.least_squares(ms)
    assert est.info.method == "blocks"
    expected = np.zeros(n)
    for c, m in zip(cells, ms, strict=True):
        expected[c] = inf.least_squares([Measurement(m.answers, H, H, 2.0, 1.0, "s", (stripe,))]).x
    np.testing.assert_allclose(est.x, expected, rtol=1e-10, atol=1e-10)
    joint = inf.least_squares(ms, method="lsmr")
    np.testing.assert_allclose(est.x, joint.x, rtol=1e-6, atol=1e-6)
    assert est.info.residual == pytest.approx(joint.info.residual, rel=1e-6)


def test_pieces_measured_twice_or_left_out(rng) -> None:
    """A piece measured by two matrices with their weights, another piece
    not measured (its cells stay 0, the minimum-norm answer), and public
    facts (which couple the pieces: LSMR)."""
    n = 12
    x = rng.integers(0, 30, n).astype(float)
    a, b = np.arange(0, 4), np.arange(4, 8)
    ms = [
        measure(Prefix(4), x[a], 1.0, rng, on_root=Product(Prefix(4), _selection(a, n))),
        measure(Identity(4), x[a], 3.0, rng, on_root=Product(Identity(4), _selection(a, n))),
        measure(Identity(4), x[b], 1.0, rng, on_root=Product(Identity(4), _selection(b, n))),
    ]
    est = inf.least_squares(ms)
    assert est.info.method == "blocks"
    A = np.vstack([m.query_on_root.dense() / m.noise_scale for m in ms])
    y = np.concatenate([m.answers / m.noise_scale for m in ms])
    np.testing.assert_allclose(est.x, np.linalg.lstsq(A, y, rcond=None)[0], atol=1e-9)
    assert np.all(est.x[8:] == 0)
    assert inf.least_squares(ms, total=float(x.sum())).info.method == "lsmr"
