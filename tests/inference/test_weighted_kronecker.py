"""A weighted Kronecker product c·(A₁ ⊗ … ⊗ A_d) — HDMM's strategy under the
Gaussian mechanism, a joint SQL workload's sums — is solved and its noise
factored through its factors, as an unweighted one is (issue #39: LSMR on
such a strategy over 17k cells ran for minutes)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ektelo.answers import noise_factor
from ektelo.inference import structured
from ektelo.matrix import Dense, Kronecker, Weighted


def _kron(rng: np.random.Generator) -> Kronecker:
    return Kronecker([Dense(rng.normal(size=(6, 4))), Dense(rng.normal(size=(3, 3))),
                      Dense(rng.normal(size=(5, 2)))])


def test_the_pseudo_inverse_of_a_weighted_kronecker() -> None:
    rng = np.random.default_rng(3)
    A = Weighted(_kron(rng), 0.37)
    assert structured.small_kronecker(A)
    y = rng.normal(size=A.shape[0])
    np.testing.assert_allclose(structured.kronecker_pinv(A)(y), np.linalg.pinv(A.dense()) @ y,
                               rtol=1e-9, atol=1e-12)


def test_the_noise_factor_of_weighted_products() -> None:
    rng = np.random.default_rng(4)
    Q = Weighted(_kron(rng), 0.21)
    W = Weighted(Kronecker([Dense(rng.normal(size=(2, 4))), Dense(rng.normal(size=(3, 3))),
                            Dense(rng.normal(size=(1, 2)))]), 2.5)
    m = SimpleNamespace(query_on_root=Q, variance=1.7)
    F = noise_factor(W, [m])
    assert F is not None
    Wd, Qd = W.dense(), Q.dense()
    expected = Wd @ np.linalg.pinv(Qd.T @ Qd) @ Wd.T * 1.7
    np.testing.assert_allclose(F @ F.T, expected, rtol=1e-8, atol=1e-10)
