"""The kernel's own evaluator of Q·x (kernel/evaluate.py, issue #35).

1. It agrees with the dense form of every ruled matrix (a catalog with many
   hierarchy shapes, branchings, roots and weights, and every combinator).
2. Matrix methods are not on the path from request to noise: with every
   matrix class's evaluation methods monkeypatched to return garbage, the
   kernel's seeded answers do not change.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import ektelo
import ektelo.matrix as mx
from ektelo.kernel.evaluate import evaluate, tree
from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Hierarchy,
    HStack,
    Identity,
    Kronecker,
    Ones,
    Partition,
    Prefix,
    RangeQueries,
    Sparse,
    Suffix,
    Sum,
    Total,
    VStack,
    Wavelet,
    Weighted,
)

RNG = np.random.default_rng(20261202)


def _hierarchies() -> list[Hierarchy]:
    out = []
    shapes = [(1,), (2,), (5,), (7,), (16,), (17,), (100,), (3, 4), (5, 3), (1, 6), (7, 9)]
    shapes += [(2, 3, 4), (8, 8), (3, 1, 5)]
    for shape in shapes:
        for b in (2, 3, 4):
            for root in (True, False):
                H = Hierarchy(shape, b, root)
                out.append(H)
                weights = np.round(RNG.random(H.height + 1) * 4 + 0.5, 2)
                out.append(Hierarchy(shape, b, root, level_weights=weights))
    return out


def _others() -> list[EMatrix]:
    lo, hi = np.array([[0, 1], [2, 0], [3, 4]]), np.array([[3, 2], [2, 4], [3, 4]])
    return [
        Identity(5), Total(5), Ones(3, 5), Prefix(6), Suffix(6), Diagonal([1.0, -2.0, 3.5]),
        Dense(RNG.normal(size=(3, 4))), Wavelet(8), Wavelet(16, True), Wavelet(1),
        RangeQueries((4, 5), lo, hi), RangeQueries((4, 5), lo, hi, True),
        RangeQueries(9, np.array([0, 3, 8]), np.array([8, 5, 8])),
        Kronecker([Prefix(3), Identity(4)]), Kronecker([Hierarchy(5, 2), Total(3), Wavelet(4)]),
        VStack([Identity(4), Total(4)]), HStack([Identity(3), Prefix(3)]),
        Sum([Identity(4), Prefix(4)]), Weighted(Prefix(4), 2.5), Weighted(Hierarchy(6, 2), -1.0),
        Sparse(sp.random(5, 6, density=0.5, random_state=1, format="csr")),
        VStack([Kronecker([Identity(3), Hierarchy((4,), 2)]), Weighted(Total(12), 3.0)]),
    ]  # fmt: skip


CATALOG = _hierarchies() + _others()


@pytest.mark.parametrize("Q", CATALOG, ids=lambda Q: repr(Q)[:60])
def test_agrees_with_the_dense_form(Q: EMatrix) -> None:
    X = RNG.normal(size=(Q.shape[1], 3))
    got = evaluate(Q, X)
    assert got.shape == (Q.shape[0], 3)
    np.testing.assert_allclose(got, Q.dense() @ X, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("H", _hierarchies()[::3], ids=lambda H: repr(H)[:60])
def test_tree_leaf_depths_are_the_classes(H: Hierarchy) -> None:
    assert np.array_equal(tree(H).leaf_depth, H.cell_leaf_depths())


def test_types_outside_the_rules_are_refused() -> None:
    with pytest.raises(TypeError, match="no evaluation rule"):
        evaluate(Prefix(3) @ Prefix(3), np.ones((3, 1)))
    with pytest.raises(TypeError, match="no evaluation rule"):
        evaluate(Hierarchy(4, 2).T, np.ones((7, 1)))


# --------------------------------------------------------------- garbage methods
EVALUATION_METHODS = (
    "_matmat", "_rmatmat", "_apply_axis", "matvec", "rmatvec", "dense", "sparse", "row",
    "__matmul__", "reduce", "expand",
)  # fmt: skip


def _garbage(*args: Any, **kwargs: Any) -> Any:
    return np.full(1, 1e9)


def _seeded_answers() -> list[Any]:
    x = ektelo.protect(np.arange(24, dtype=np.int64) % 7, epsilon=50.0, seed=11)
    queries = [Q for Q in CATALOG if Q.shape[1] == 24 and type(Q) is not Sparse]
    queries += [
        Identity(24), Prefix(24), Hierarchy(24, 2), Hierarchy((4, 6), 3, False, [1, 2, 3]),
        Kronecker([Prefix(4), Hierarchy(6, 2)]), RangeQueries((4, 6), [[0, 1]], [[3, 4]]),
        VStack([Total(24), Weighted(Suffix(24), 0.5)]), HStack([Identity(12), Prefix(12)]),
    ]
    out: list[Any] = []
    for Q in queries:
        m = x.laplace(Q, eps=0.5)
        out.append((m.answers.tolist(), m.noise_scale))
    y = x.transform(Kronecker([Identity(4), Prefix(6)]))
    out.append(y.laplace(Hierarchy(24, 4), eps=0.5).answers.tolist())
    z = x.reduce_by_partition(Partition(np.arange(24) // 5))
    out.append(z.laplace(Prefix(5), eps=0.5).answers.tolist())
    out.append(x.worst_approx(Prefix(24), np.zeros(24), eps=0.5))
    return out


def test_matrix_methods_are_not_on_the_path_to_the_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _seeded_answers()
    patched = 0
    classes = {c for _, c in inspect.getmembers(mx, inspect.isclass) if issubclass(c, EMatrix)}
    for cls in classes | {Partition}:
        for name in EVALUATION_METHODS:
            if name in vars(cls):
                monkeypatch.setattr(cls, name, _garbage)
                patched += 1
    assert patched > 40  # the patch reaches every class's own methods
    assert np.array_equal(Prefix(3).matvec(np.ones(3)), np.full(1, 1e9))  # it really is garbage
    assert _seeded_answers() == before
