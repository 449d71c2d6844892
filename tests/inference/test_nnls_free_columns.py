"""NNLS's restricted solves on A's free columns (`inference.nonneg._FreeBlock`):
the columns read from the matrix's structure, the exact steps reaching the
optimum whatever the start (warm or cold) and whatever the tolerance, and the
same optimum as the masked-product path and scipy's NNLS."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

from ektelo import inference as inf
from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Identity,
    Ones,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ektelo.measurement import Measurement


def _measure(Q: EMatrix, x: np.ndarray, scale: float, rng: np.random.Generator) -> Measurement:
    y = Q.matvec(x) + rng.laplace(0.0, scale, Q.shape[0])
    return Measurement(y, Q, Q, scale, 1.0, "root", (Q.shape[1],))


def _ranges(n: int, m: int, rng: np.random.Generator) -> RangeQueries:
    lo, hi = rng.integers(0, n, m), rng.integers(0, n, m)
    return RangeQueries(n, np.minimum(lo, hi), np.maximum(lo, hi))


def _system(ms: list[Measurement], total: float) -> tuple[np.ndarray, np.ndarray]:
    """The weighted system the estimators fit, dense (measurements, then the
    known total), with `least_squares`' documented weights: 1/b for noise
    scale b, the total at the default exact_scale (1e-3) times the smallest b."""
    unit = min(m.noise_scale for m in ms)
    n = ms[0].query_on_root.shape[1]
    rows = [m.query_on_root.dense() * (unit / m.noise_scale) for m in ms]
    answers = [m.answers * (unit / m.noise_scale) for m in ms]
    A = np.vstack([*rows, np.full((1, n), 1e3)])
    return A, np.concatenate([*answers, [1e3 * total]])


def _objective(ms: list[Measurement], x: np.ndarray, total: float) -> float:
    A, b = _system(ms, total)
    r = A @ x - b
    return 0.5 * float(r @ r)


def _reference(ms: list[Measurement], total: float) -> tuple[np.ndarray, float]:
    """scipy's NNLS (Lawson–Hanson, exact) on the same weighted system."""
    A, b = _system(ms, total)
    x, _ = so.nnls(A, b, maxiter=100 * A.shape[1])
    return x, _objective(ms, x, total)


def test_columns_are_the_matrix_columns(rng: np.random.Generator) -> None:
    n = 12
    cols = np.array([0, 3, 4, 11])
    S = Sparse(sp.random(7, n, density=0.4, random_state=rng, format="csr"))
    D = Dense(rng.normal(size=(3, n)))
    matrices = [
        S,
        D,
        Identity(n),
        Diagonal(rng.normal(size=n)),
        Ones(2, n),
        Total(n),
        Weighted(S, 2.5),
        Product(Diagonal(rng.normal(size=7)), S),
        VStack([S, Weighted(Total(n), 1e3), D]),
    ]
    for M in matrices:
        got = M.column_block(cols)
        np.testing.assert_allclose(got.toarray(), M.dense()[:, cols], rtol=1e-15, atol=0)
    assert _ranges(n, 5, rng).column_block(cols) is None  # implicit: masked products


@pytest.mark.parametrize("seed", range(4))
def test_warm_and_cold_starts_reach_the_same_optimum(seed: int) -> None:
    """Sparse data, a heavily weighted known total (the case where the
    tolerance is loose): from the LS start, from zeros and from a warm start
    near the optimum (the last round's estimate, as MWEM passes it), the
    estimate is scipy's NNLS optimum, not just within the tolerance (its
    fitted answers: cells with equal columns can share mass differently)."""
    rng = np.random.default_rng(seed)
    n = 150
    x = np.where(rng.random(n) < 0.9, 0.0, rng.integers(50, 400, n).astype(float))
    total = float(x.sum())
    first = [_measure(Sparse(_ranges(n, 60, rng).sparse()), x, 20.0, rng)]
    ms = [*first, _measure(Sparse(_ranges(n, 60, rng).sparse()), x, 20.0, rng)]
    ref, f_ref = _reference(ms, total)
    A, _ = _system(ms, total)
    last_round = inf.nnls(first, total=total)  # a warm start near the optimum
    for start in ("ls", "zeros", last_round, last_round.x):
        e = inf.nnls(ms, total=total, start=start)
        est, info = e.x, e.info
        assert info.converged and np.all(est >= 0)
        assert _objective(ms, est, total) <= f_ref * (1 + 1e-9)
        fitted, fitted_ref = A @ est, A @ ref
        np.testing.assert_allclose(fitted, fitted_ref, rtol=0, atol=1e-8 * fitted_ref.max())


def test_free_columns_and_masked_products_reach_the_same_optimum(
    rng: np.random.Generator,
) -> None:
    """The same measurements as an explicit matrix (restricted solves on its
    columns) and as implicit ranges (masked products): one optimum."""
    n = 120
    x = np.where(rng.random(n) < 0.8, 0.0, rng.integers(10, 100, n).astype(float))
    R = _ranges(n, 90, rng)
    y = R.matvec(x) + rng.laplace(0.0, 5.0, R.shape[0])
    implicit = [Measurement(y, R, R, 5.0, 1.0, "root", (n,))]
    S = Sparse(R.sparse())
    explicit = [Measurement(y, S, S, 5.0, 1.0, "root", (n,))]
    a = inf.nnls(implicit, tol=1e-10).x
    b = inf.nnls(explicit, tol=1e-10).x
    ref = so.nnls(R.dense() / 5.0, y / 5.0, maxiter=100 * n)[0]
    for est in (a, b):
        f = 0.5 * float(np.sum((R.dense() @ est - y) ** 2))
        fref = 0.5 * float(np.sum((R.dense() @ ref - y) ** 2))
        assert f <= fref * (1 + 1e-8)
