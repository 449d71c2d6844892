"""Workload builders (paper §7.5, Examples 2–4) and the DPBench error metric."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ektelo.matrix import Identity, Kronecker, RangeQueries, Total, VStack
from ektelo.workload import (
    all_range,
    identity,
    marginal,
    marginals,
    prefix,
    prefix_marginal,
    random_range,
    range_queries,
    scaled_l2_error,
    total,
)


def test_prefix():
    W = prefix(5)
    np.testing.assert_array_equal(W.dense(), np.tril(np.ones((5, 5))))
    np.testing.assert_array_equal(W.matvec([1, 2, 3, 4, 5]), [1, 3, 6, 10, 15])
    assert W.sensitivity() == 5.0


@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_all_range_has_every_interval_once(n):
    W = all_range(n)
    assert W.shape == (n * (n + 1) // 2, n)
    D = W.dense()
    assert set(np.unique(D)) <= {0.0, 1.0}
    intervals = []
    for row in D:
        cells = np.nonzero(row)[0]
        assert cells.size and np.all(np.diff(cells) == 1)  # one contiguous interval
        intervals.append((int(cells[0]), int(cells[-1])))
    assert sorted(intervals) == [(i, j) for i in range(n) for j in range(i, n)]
    assert len(set(intervals)) == len(intervals)
    # cell k lies in (k+1)(n-k) intervals
    k = np.arange(n)
    np.testing.assert_array_equal(W.column_norms(), (k + 1) * (n - k))


def test_random_range_is_seeded_and_reproducible():
    a = random_range((16, 9), 50, seed=4)
    b = random_range((16, 9), 50, seed=4)
    c = random_range((16, 9), 50, seed=5)
    assert a == b
    np.testing.assert_array_equal(a.dense(), b.dense())
    assert a != c
    assert isinstance(a, RangeQueries) and a.shape == (50, 144)


@pytest.mark.parametrize("shape", [(1,), (10,), (256,), (8, 5), (4, 3, 6)])
def test_random_range_corners_inside_the_domain(shape):
    W = random_range(shape, 200, seed=1)
    lower, upper = np.asarray(W.lower), np.asarray(W.upper)
    assert lower.shape == upper.shape == (200, len(shape))
    assert np.all(lower >= 0) and np.all(lower <= upper)
    assert np.all(upper < np.array(shape))
    # each query is the box it describes
    D = W.dense()
    for q in range(0, 200, 37):
        box = np.zeros(shape)
        box[tuple(slice(lo, hi + 1) for lo, hi in zip(lower[q], upper[q], strict=True))] = 1
        np.testing.assert_array_equal(D[q], box.ravel())


def test_random_range_follows_dpbench_distribution():
    """DPBench / εktelo RandomRange: the length on each axis is uniform in
    1..n and the placement uniform among the positions where it fits."""
    n = 10
    W = random_range(n, 20000, seed=11)
    lengths = (np.asarray(W.upper) - np.asarray(W.lower) + 1).ravel()
    counts = np.bincount(lengths, minlength=n + 1)[1:]
    assert counts.min() > 0.9 * 2000 and counts.max() < 1.1 * 2000  # uniform lengths
    # given length n-1 the range starts at 0 or 1 with equal chance
    starts = np.asarray(W.lower).ravel()[lengths == n - 1]
    assert set(starts) == {0, 1} and abs(np.mean(starts) - 0.5) < 0.06
    # full-domain ranges only start at 0
    assert np.all(np.asarray(W.lower).ravel()[lengths == n] == 0)


def test_identity_and_total():
    np.testing.assert_array_equal(identity((2, 3)).dense(), np.eye(6))
    assert identity(4) == Identity(4)
    np.testing.assert_array_equal(total((2, 3)).dense(), np.ones((1, 6)))
    assert total(5) == Total(5)
    x = np.arange(6.0)
    assert total((2, 3)).matvec(x)[0] == 15.0


def test_marginal_sums_out_the_other_attributes(rng):
    shape = (3, 4, 5)
    x = rng.poisson(3, size=shape).astype(float)
    W = marginal(shape, [0, 2])
    assert W.shape == (15, 60)
    np.testing.assert_array_equal(W.matvec(x.ravel()), x.sum(axis=1).ravel())
    np.testing.assert_array_equal(marginal(shape, [1]).matvec(x.ravel()), x.sum(axis=(0, 2)))
    np.testing.assert_array_equal(marginal(shape, []).matvec(x.ravel()), [x.sum()])
    np.testing.assert_array_equal(marginal(shape, [0, 1, 2]).dense(), np.eye(60))


def test_all_two_way_marginals_example_4(rng):
    """Example 4: all 2-way marginals of 3 attributes is
    Union(I⊗I⊗T, I⊗T⊗I, T⊗I⊗I)."""
    shape = (3, 4, 5)
    two_way = marginals(shape, 2)
    expected = VStack(
        [
            Kronecker([Identity(3), Identity(4), Total(5)]),
            Kronecker([Identity(3), Total(4), Identity(5)]),
            Kronecker([Total(3), Identity(4), Identity(5)]),
        ]
    )
    assert two_way == expected
    assert two_way.shape == (12 + 15 + 20, 60)
    x = rng.poisson(3, size=shape).astype(float)
    answers = np.concatenate([x.sum(axis=2).ravel(), x.sum(axis=1).ravel(), x.sum(axis=0).ravel()])
    np.testing.assert_array_equal(two_way.matvec(x.ravel()), answers)
    assert two_way.sensitivity(1) == 3.0  # each record is in one cell of each marginal
    assert two_way.sensitivity(2) == pytest.approx(np.sqrt(3.0))


def test_k_way_marginal_counts():
    shape = (2, 3, 4, 5)
    for k in range(5):
        W = marginals(shape, k)
        expected_rows = sum(
            int(np.prod([shape[i] for i in c])) for c in itertools.combinations(range(4), k)
        )
        assert W.shape == (expected_rows, 120)
        assert W.sensitivity() == float(len(list(itertools.combinations(range(4), k))))


def test_prefix_marginal(rng):
    shape = (4, 6, 3)
    x = rng.poisson(2, size=shape).astype(float)
    for axis in range(3):
        W = prefix_marginal(shape, axis)
        others = tuple(i for i in range(3) if i != axis)
        np.testing.assert_array_equal(W.matvec(x.ravel()), np.cumsum(x.sum(axis=others)))
        assert W.shape == (shape[axis], 72)
        assert W.sensitivity() == float(shape[axis])


def test_range_queries_builder():
    W = range_queries((3, 4), np.array([[0, 1], [2, 0]]), np.array([[1, 3], [2, 0]]))
    box = np.zeros((3, 4))
    box[0:2, 1:4] = 1
    np.testing.assert_array_equal(W.dense()[0], box.ravel())
    np.testing.assert_array_equal(W.dense()[1], np.eye(12)[8])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: prefix(0), ValueError, "n must be a positive integer or a tuple of them"),
        (lambda: identity((3, 0)), ValueError, "shape must be a positive integer or a tuple"),
        (lambda: total(()), ValueError, "shape must be a positive integer or a tuple"),
        (lambda: all_range(2.5), TypeError, "n must be a positive integer or a tuple"),
        (lambda: identity((True, 2)), TypeError, "shape must be a positive integer or a tuple"),
        (lambda: random_range(5, 0), ValueError, "count must be a positive integer"),
        (lambda: random_range(5, True), TypeError, "count must be an integer"),
        (lambda: marginal((2, 3), [2]), ValueError, r"attributes \[2\] out of range for 2 axes"),
        (lambda: marginals((2, 3), 3), ValueError, r"k must be an integer in \[0, 2\]"),
        (lambda: prefix_marginal((2, 3), 2), ValueError, "axis 2 is out of range"),
        (lambda: range_queries(4, np.array([[3]]), np.array([[1]])), ValueError, "lower ≤ upper"),
    ],
)
def test_bad_builder_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_prefix_marginal_counts_a_negative_axis_from_the_end():
    assert prefix_marginal((2, 3), -1) == prefix_marginal((2, 3), 1)


def test_scaled_l2_error_by_hand():
    # Prefix(3): Wx = [1, 3, 6], Wx̂ = [1, 2, 3]; ‖(0, 1, 3)‖₂ = √10; |W| = 3, ‖x‖₁ = 6
    err = scaled_l2_error(prefix(3), [1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    assert err == pytest.approx(np.sqrt(10) / 18)
    assert scaled_l2_error(prefix(3), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 0.0
    # 2 queries over 4 cells, negative counts use the absolute L1 scale
    W = range_queries(4, np.array([0, 1]), np.array([1, 3]))
    err = scaled_l2_error(W, [2.0, -1.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0])
    assert err == pytest.approx(np.hypot(1.0, 2.0) / (2 * 6))


def test_scaled_l2_error_rejects_bad_input():
    with pytest.raises(ValueError, match="undefined for an all-zero data vector"):
        scaled_l2_error(prefix(3), np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="x_hat has shape"):
        scaled_l2_error(prefix(3), np.ones(3), np.ones(4))
