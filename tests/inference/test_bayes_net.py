"""PrivBayes's inference (`inference.network_distribution`): from exact
marginals of data that follow the network, the network's joint is the
data's distribution; the product of conditionals otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from ektelo import inference
from ektelo.measurement import Measurement
from ektelo.operators import selection


def _exact(M, x: np.ndarray) -> Measurement:
    return Measurement(M.matvec(x.reshape(-1)), M, M, 1.0, 1.0, "root", tuple(x.shape))


def test_the_joint_of_a_chain_from_exact_marginals():
    rng = np.random.default_rng(0)
    a = rng.dirichlet(np.ones(3))  # P(A)
    b_a = rng.dirichlet(np.ones(4), size=3)  # P(B | A)
    c_b = rng.dirichlet(np.ones(2), size=4)  # P(C | B)
    p = a[:, None, None] * b_a[:, :, None] * c_b[None, :, :]
    x = 1e6 * p  # counts that follow the chain A → B → C exactly
    cliques = [(0,), (1, 0), (2, 1)]
    M = selection.network_marginals(x.shape, cliques)
    joint = inference.network_distribution(_exact(M, x), cliques)
    np.testing.assert_allclose(joint, p.reshape(-1), rtol=1e-9)
    assert joint.sum() == pytest.approx(1.0)


def test_left_out_attributes_are_uniform_and_negatives_clipped():
    x = np.arange(24.0).reshape(2, 3, 4)
    cliques = [(1,), (0, 1)]  # attribute 2 is not in the network
    M = selection.network_marginals(x.shape, cliques)
    y = _exact(M, x)
    noisy = Measurement(y.answers - 100.0 * (np.arange(y.answers.size) == 0), M, M, 1.0, 1.0,
                        "root", x.shape)  # fmt: skip
    joint = inference.network_distribution(noisy, cliques).reshape(2, 3, 4)
    np.testing.assert_allclose(joint, joint[:, :, :1].repeat(4, axis=2))
    assert np.all(joint >= 0) and joint.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="maximal cliques"):
        inference.network_distribution(y, [(1,), (0, 1), (2, 1)])
