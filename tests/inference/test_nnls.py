"""`inference.nnls` against scipy's NNLS and lsq_linear, on measurements built
as the kernel builds them: projected Newton, L-BFGS-B, the tree methods."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so
from inference_helpers import measure, random_matrix, rel, run, stacked  # tests/inference

from ektelo import inference as inf
from ektelo.inference import nonneg
from ektelo.matrix import (
    Hierarchy,
    Identity,
    Prefix,
)
from ektelo.measurement import Measurement
from ektelo.workload import builders


def nnls_objective(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> float:
    return 0.5 * float(np.sum((A @ x - b) ** 2))


@pytest.mark.parametrize("method", ["projected_newton", "lbfgsb"])
@pytest.mark.parametrize("kind", ["dense", "sparse", "range"])
@pytest.mark.parametrize("seed", range(4))
def test_nnls_matches_scipy_nnls(method: str, kind: str, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(5, 40))
    # Sparse data and large noise: many bounds active at the optimum.
    x = rng.integers(0, 10, n) * (rng.random(n) < 0.4)
    ms = [
        measure(random_matrix(kind, n + 5, n, rng), x, 3.0, rng),
        measure(Identity(n), x, 6.0, rng),
    ]
    A, b = stacked(ms)
    ref, _ = so.nnls(A, b, maxiter=50 * n)
    est, info = run(inf.nnls, ms, method=method)
    assert info.converged
    assert np.all(est >= 0)
    f, fref = nnls_objective(A, b, est), nnls_objective(A, b, ref)
    scale = 0.5 * float(b @ b)
    assert f - fref <= 1e-4 * fref + 1e-10 * scale
    assert rel(est, ref) < 1e-2


def test_nnls_agrees_with_lsq_linear_on_ranges_and_starts(rng: np.random.Generator) -> None:
    n = 50
    x = rng.integers(0, 5, n) * (rng.random(n) < 0.3)
    ms = [measure(builders.random_range(n, 80, seed=2), x, 2.0, rng)]
    A, b = stacked(ms)
    ref = so.lsq_linear(A, b, bounds=(0, np.inf), tol=1e-12).x
    fref = nnls_objective(A, b, ref)
    for start in ("ls", "zeros", np.ones(n)):
        est = inf.nnls(ms, start=start).x
        assert nnls_objective(A, b, est) - fref <= 1e-6 * fref


def test_nnls_equals_ls_when_ls_is_positive(rng: np.random.Generator) -> None:
    n = 16
    x = rng.integers(1000, 2000, n).astype(float)
    ms = [measure(Prefix(n), x, 1.0, rng), measure(Identity(n), x, 1.0, rng)]
    ls = inf.least_squares(ms).x
    assert np.all(ls > 0)
    np.testing.assert_allclose(inf.nnls(ms).x, ls, rtol=1e-6)


@pytest.mark.parametrize(
    ("dims", "b"), [((64,), 2), ((256,), 4), ((16, 16), 2), ((9, 27), 3), ((200,), 4)]
)
def test_nnls_on_one_complete_tree_is_exact(dims, b, rng) -> None:
    """Sparse data (most bounds active) on trees whose parents of cells are
    alike (or 1-D): `Hierarchy.nnls` ("tree_newton") reaches scipy's NNLS optimum, and
    the info reports the measured residual and projected gradient."""
    H = Hierarchy(dims, b)
    n = H.shape[1]
    x = np.where(rng.random(n) < 0.7, 0.0, rng.integers(1, 10, n).astype(float))
    m = measure(H, x, 7.0, rng)
    est, info = run(inf.nnls, [m])
    assert info.method == "tree_newton" and info.converged and info.iterations >= 1
    A = H.dense()
    ref = so.nnls(A, m.answers)[0]
    np.testing.assert_allclose(est, ref, atol=1e-8)
    assert info.optimality <= 1e-10
    assert info.residual == pytest.approx(np.linalg.norm(A @ est - m.answers), rel=1e-10)
    np.testing.assert_array_equal(inf.nnls([m]).x, est)  # the same without the info


def test_nnls_tree_falls_back_to_active_set_steps(rng, monkeypatch) -> None:
    """When the parents' rounds run out, the active-set steps finish the job."""
    H = Hierarchy(256, 4)
    x = np.where(rng.random(256) < 0.7, 0.0, rng.integers(1, 10, 256).astype(float))
    m = measure(H, x, 7.0, rng)
    # the tree rounds' cap alone (`maxiter` caps the fallback's steps too)
    monkeypatch.setattr(nonneg, "TREE_NEWTON_ROUNDS", 1)
    est, info = run(inf.nnls, [m], tol=1e-10)
    assert info.method == "tree_active_set" and info.converged
    np.testing.assert_allclose(est, so.nnls(H.dense(), m.answers)[0], atol=1e-8)


@pytest.mark.parametrize(("dims", "b"), [((30, 20), 2), ((27, 13), 3), ((20, 20), 16)])
def test_nnls_on_one_tree_uses_exact_active_set_steps(dims, b, rng) -> None:
    """Sparse data (most bounds active) on trees with uneven parents, where
    `Hierarchy.nnls` declines: the tree's active-set steps reach scipy's NNLS
    optimum from either start; L-BFGS-B agrees."""
    H = Hierarchy(dims, b)
    n = H.shape[1]
    x = np.where(rng.random(n) < 0.7, 0.0, rng.integers(1, 10, n).astype(float))
    m = measure(H, x, 7.0, rng)
    est, info = run(inf.nnls, [m], tol=1e-10)
    assert info.method == "tree_active_set" and info.converged
    ref = so.nnls(H.dense(), m.answers)[0]
    np.testing.assert_allclose(est, ref, atol=1e-8)
    np.testing.assert_allclose(inf.nnls([m], tol=1e-10, start="zeros").x, ref, atol=1e-8)
    general = inf.nnls([m], tol=1e-10, method="lbfgsb").x
    np.testing.assert_allclose(general, ref, atol=1e-4)


def test_nnls_of_all_negative_answers_is_zero(rng: np.random.Generator) -> None:
    m = Measurement(-np.ones(4), Identity(4), Identity(4), 1.0, 1.0, "r", (4,))
    est, info = run(inf.nnls, [m])
    np.testing.assert_array_equal(est, np.zeros(4))
    assert info.converged


