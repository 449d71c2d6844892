"""Kronecker factors applied along one axis of large data layouts.

A factor of a Kronecker product sees the data as a 3-D array (pre, n, post);
`Prefix`/`Suffix` sweep it by slabs, by rows or in blocks with a running
carry depending on the layout (to stay one pass over memory). Each strategy
is checked exactly against `numpy.cumsum` on layouts large enough to use it.
"""

from __future__ import annotations

import numpy as np
import pytest

from ektelo.matrix import Dense, Identity, Kronecker, Ones, Prefix, Suffix, Total, VStack


@pytest.mark.parametrize(
    "layout",
    [(1, 300, 600), (2, 3000, 30), (50, 100, 7), (1000, 5, 3), (7, 20000, 1), (1, 70000, 1)],
)
def test_prefix_and_suffix_along_any_axis_of_large_layouts(rng, layout):
    """Kronecker factors see the data as (pre, n, post); every sweep strategy of
    the cumulative sum (by slabs, by rows, in blocks with a carry) is exact."""
    pre, n, post = layout
    x = rng.integers(-5, 6, size=pre * n * post).astype(float)
    T = x.reshape(layout)
    for core, expected in (
        (Prefix(n), np.cumsum(T, axis=1)),
        (Suffix(n), np.cumsum(T[:, ::-1], axis=1)[:, ::-1]),
    ):
        K = Kronecker([Identity(pre), core, Identity(post)])
        np.testing.assert_array_equal(K.matvec(x), expected.ravel())
        X = np.column_stack([x, -x])
        np.testing.assert_array_equal(K.matmat(X)[:, 1], -expected.ravel())


@pytest.mark.parametrize("layout", [(1, 40, 3000), (3000, 40, 1), (60, 40, 50)])
def test_explicit_and_summing_factors_along_any_axis(rng, layout):
    pre, n, post = layout
    x = rng.normal(size=pre * n * post)
    T = x.reshape(layout)
    A = rng.normal(size=(3, n))
    factor = VStack([Total(n), Dense(A), Ones(2, n)])
    K = Kronecker([Identity(pre), factor, Identity(post)])
    expected = np.concatenate(
        [
            T.sum(axis=1, keepdims=True),
            np.einsum("mn,pnq->pmq", A, T),
            np.repeat(T.sum(axis=1, keepdims=True), 2, axis=1),
        ],
        axis=1,
    )
    np.testing.assert_allclose(K.matvec(x), expected.ravel(), atol=1e-9)
    y = rng.normal(size=K.shape[0])
    np.testing.assert_allclose(K.rmatvec(y) @ x, y @ K.matvec(x), rtol=1e-9)
