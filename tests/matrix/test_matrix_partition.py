"""The `Partition` value type: reduce/expand matrices, the pseudo-inverse
P⁺ = Pᵀ D⁻¹, and the workload identity W x = (W P⁺)(P x) of Prop. 1."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ektelo.matrix import Dense, Partition, Prefix, RangeQueries, Sparse, VStack

GROUPS = st.lists(st.integers(0, 5), min_size=1, max_size=24)


def dense_reduce(labels: list[int]) -> np.ndarray:
    """P with one row per distinct label, in order of first appearance."""
    order = list(dict.fromkeys(labels))
    return np.array([[1.0 if v == g else 0.0 for v in labels] for g in order])


def test_small_partition_by_hand():
    P = Partition([7, 7, 3, 9, 3])
    assert P.num_groups == 3 and P.size == 5
    np.testing.assert_array_equal(P.groups, [0, 0, 1, 2, 1])
    np.testing.assert_array_equal(P.sizes, [2, 2, 1])
    np.testing.assert_array_equal(
        P.reduce_matrix().dense(), [[1, 1, 0, 0, 0], [0, 0, 1, 0, 1], [0, 0, 0, 1, 0]]
    )
    np.testing.assert_allclose(
        P.expand_matrix().dense(),
        [[0.5, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 1], [0, 0.5, 0]],
    )
    np.testing.assert_array_equal(P.reduce([1, 2, 3, 4, 5]), [3, 8, 4])
    np.testing.assert_allclose(P.expand([3, 8, 4]), [1.5, 1.5, 4, 4, 4])
    np.testing.assert_array_equal(P.cells(1), [2, 4])
    assert isinstance(P.reduce_matrix(), Sparse) and isinstance(P.expand_matrix(), Sparse)
    assert P.reduce_matrix().sensitivity() == 1.0  # reduction is 1-stable


@settings(max_examples=80, deadline=None)
@given(GROUPS)
def test_reduce_and_expand_match_dense(labels):
    P = Partition(labels)
    D = dense_reduce(labels)
    np.testing.assert_array_equal(P.reduce_matrix().dense(), D)
    x = np.arange(len(labels), dtype=float) ** 1.5
    np.testing.assert_allclose(P.reduce(x), D @ x)
    np.testing.assert_allclose(P.reduce_matrix().matvec(x), D @ x)
    y = np.arange(D.shape[0], dtype=float) + 1
    np.testing.assert_allclose(P.expand(y), np.linalg.pinv(D) @ y)
    np.testing.assert_allclose(P.expand_matrix().matvec(y), P.expand(y))


@settings(max_examples=80, deadline=None)
@given(GROUPS)
def test_expand_matrix_is_the_pseudo_inverse(labels):
    P = Partition(labels)
    R = P.reduce_matrix().dense()
    E = P.expand_matrix().dense()
    np.testing.assert_allclose(E, np.linalg.pinv(R), atol=1e-12)
    np.testing.assert_allclose(E, R.T @ np.diag(1.0 / R.sum(axis=1)), atol=1e-15)
    np.testing.assert_allclose(R @ E, np.eye(P.num_groups), atol=1e-12)  # P P⁺ = I


@settings(max_examples=80, deadline=None)
@given(GROUPS, st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_workload_identity_when_columns_agree_within_groups(labels, rows, seed):
    """W = W' P has identical columns within each group, so W x = (W P⁺)(P x)."""
    P = Partition(labels)
    rng = np.random.default_rng(seed)
    W_reduced = Dense(rng.normal(size=(rows, P.num_groups)))
    W = P.expand_workload(W_reduced)
    x = rng.poisson(5, size=P.size).astype(float)
    lhs = W.matvec(x)
    np.testing.assert_allclose(P.reduce_workload(W).matvec(P.reduce(x)), lhs, atol=1e-9)
    np.testing.assert_allclose(W_reduced.matvec(P.reduce(x)), lhs, atol=1e-9)
    np.testing.assert_allclose(P.reduce_workload(W).dense(), W_reduced.dense(), atol=1e-12)


def test_workload_identity_fails_when_columns_differ():
    """The identity needs equal columns within groups (guards against a vacuous test)."""
    P = Partition([0, 0, 1, 1])
    W = Prefix(4)
    x = np.array([1.0, 3.0, 0.0, 2.0])
    assert not np.allclose(P.reduce_workload(W).matvec(P.reduce(x)), W.matvec(x))


def test_reduced_range_workload():
    # Ranges aligned with the groups, and a prefix over groups: exact when reduced.
    P = Partition(np.repeat(np.arange(4), 3))
    W = VStack([RangeQueries(12, [0, 3, 6], [5, 11, 8]), P.expand_workload(Prefix(4))])
    x = np.arange(12, dtype=float)
    np.testing.assert_allclose(P.reduce_workload(W).matvec(P.reduce(x)), W.matvec(x))


@settings(max_examples=80, deadline=None)
@given(GROUPS, st.permutations(range(6)))
def test_relabelling_makes_equal_partitions_equal(labels, perm):
    relabelled = [perm[v] + 10 for v in labels]
    a, b = Partition(labels), Partition(relabelled)
    assert a == b and hash(a) == hash(b)
    np.testing.assert_array_equal(a.reduce_matrix().dense(), b.reduce_matrix().dense())


def test_distinct_partitions_differ():
    assert Partition([0, 0, 1]) != Partition([0, 1, 1])
    assert Partition([0, 1, 1, 0], domain_shape=(2, 2)) != Partition([0, 1, 1, 0])
    assert Partition(np.array([[0, 1], [1, 0]])) == Partition([0, 1, 1, 0], domain_shape=(2, 2))
    assert Partition([0.0, 1.0]) == Partition([0, 1])
    assert (Partition([0]) == "x") is False


@pytest.mark.parametrize(
    ("groups", "kwargs", "error", "message"),
    [
        ([], {}, ValueError, "at least one cell"),
        ([0, -1], {}, ValueError, "must be non-negative"),
        ([0.5, 1], {}, TypeError, "must be integers"),
        ([0.0, np.inf], {}, TypeError, "must be integers"),
        ([0.0, np.nan], {}, TypeError, "must be integers"),
        (["a", "b"], {}, TypeError, "must be integers"),
        ([0, 1, 2], {"domain_shape": (2, 2)}, ValueError, "does not match 3 cells"),
    ],
)
def test_bad_partitions(groups, kwargs, error, message):
    with pytest.raises(error, match=message):
        Partition(groups, **kwargs)


def test_bad_partition_operands():
    P = Partition([0, 0, 1])
    with pytest.raises(ValueError, match="expected a vector of length 3"):
        P.reduce(np.ones(4))
    with pytest.raises(ValueError, match="expected a vector of length 2"):
        P.expand(np.ones(3))
    with pytest.raises(ValueError, match="workload has 4 columns; partition has 3 cells"):
        P.reduce_workload(Prefix(4))
    with pytest.raises(ValueError, match="3 columns; partition has 2 groups"):
        P.expand_workload(Prefix(3))
    with pytest.raises(IndexError, match="group 2 out of range"):
        P.cells(2)
