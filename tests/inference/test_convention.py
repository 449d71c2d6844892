"""The one calling convention of the estimators: the same keywords for the
same ideas, an `Estimate` shaped like the root, read-only, from any of
them; a previous Estimate as ``start``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from ektelo import inference as inf
from ektelo.matrix import Identity, Kronecker, Partition, Prefix
from ektelo.measurement import Measurement

ESTIMATORS = [inf.least_squares, inf.nnls, inf.multiplicative_weights]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_every_estimator_takes_the_same_keywords(estimator) -> None:
    params = inspect.signature(estimator).parameters
    assert next(iter(params)) == "measurements"
    for name in ("total", "start", "tol", "maxiter", "groups"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert "return_info" not in params


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_an_estimate_shaped_like_the_root(estimator, rng) -> None:
    shape = (6, 5)
    Q = Kronecker([Prefix(6), Identity(5)])
    x = rng.integers(1, 30, 30).astype(float)
    m = Measurement(Q.matvec(x) + rng.laplace(0, 1.0, 30), Q, Q, 1.0, 1.0, "r", shape)
    P = Partition(np.arange(30) // 3, shape)
    first = estimator([m], total=float(x.sum()), maxiter=500)
    assert isinstance(first, inf.Estimate) and isinstance(first.info, inf.SolveInfo)
    assert first.x.shape == shape and not first.x.flags.writeable
    with pytest.raises(ValueError):
        first.x[0, 0] = 1.0
    again = estimator([m], total=float(x.sum()), start=first, maxiter=500)
    assert again.x.shape == shape
    grouped = estimator([m], total=float(x.sum()), start=first.x, groups=P, maxiter=500)
    assert grouped.x.shape == shape
    flat = grouped.x.reshape(-1)
    np.testing.assert_allclose(flat, P.expand(P.reduce(flat)), rtol=1e-12, atol=1e-12)
