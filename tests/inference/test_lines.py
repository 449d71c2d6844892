"""Structure read from the records (`ektelo.inference.structured`):

* lines — range queries along one axis of a ≥ 2-D root, each within one line
  of cells (DAWA-Striped's one measurement), solved line by line: the
  minimum-norm least-squares solution of a direct solver, from the implicit
  ranges and from the explicit matrix the kernel measures;
* ``groups="measured"`` — the partitions a measurement was reduced by, read
  from its record: the estimate ``groups=[P1, …]`` gives for reductions of
  the root, the cells' estimate otherwise (no random probe).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import ektelo
from ektelo import inference
from ektelo import workload as wl
from ektelo.inference import structured
from ektelo.matrix import (
    Diagonal,
    EMatrix,
    Identity,
    Kronecker,
    Ones,
    Partition,
    Product,
    RangeQueries,
    Sparse,
    Weighted,
)
from ektelo.measurement import Measurement
from ektelo.operators import selection


def _measure(Q: EMatrix, x: np.ndarray, rng: np.random.Generator, b: float = 1.0) -> Measurement:
    y = Q.matvec(x.reshape(-1)) + rng.laplace(0.0, b, Q.shape[0])
    return Measurement(y, Q, Q, b, 1.0, "root", tuple(x.shape))


def _line_ranges(shape: tuple[int, ...], axis: int, rng: np.random.Generator) -> RangeQueries:
    """Random ranges along `axis`, a few per line (some lines with none)."""
    lower, upper = [], []
    others = [range(s) for i, s in enumerate(shape) if i != axis]
    for corner in np.array(np.meshgrid(*others, indexing="ij")).reshape(len(others), -1).T:
        if rng.random() < 0.2:
            continue
        for _ in range(rng.integers(1, 5)):
            a, b = np.sort(rng.integers(0, shape[axis], 2))
            lo, hi = np.insert(corner, axis, a), np.insert(corner, axis, b)
            lower.append(lo)
            upper.append(hi)
    return RangeQueries(shape, np.array(lower), np.array(upper))


def _min_norm(Q: EMatrix, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(Q.dense(), y, rcond=None)[0]


@pytest.mark.parametrize(("shape", "axis"), [((6, 9), 1), ((6, 9), 0), ((3, 4, 7), 1)])
@pytest.mark.parametrize("form", ["ranges", "weighted", "sparse"])
def test_lines_give_the_minimum_norm_solution(shape, axis, form):
    rng = np.random.default_rng(sum(shape) + axis)
    R = _line_ranges(shape, axis, rng)
    w = rng.random(R.shape[0]) + 0.5
    Q: EMatrix = {
        "ranges": R,
        "weighted": Product(Diagonal(w), R),
        "sparse": Sparse(Product(Diagonal(w), R).sparse()),
    }[form]
    x = rng.poisson(5.0, shape)
    m = _measure(Q, x, rng)
    est = inference.least_squares([m])
    assert est.info.method == "lines"
    np.testing.assert_allclose(est.x.reshape(-1), _min_norm(Q, m.answers), rtol=1e-9, atol=1e-9)


def test_the_kernel_measured_union_of_dawa_striped_is_solved_line_by_line():
    """The kernel holds a measured `Product` as an explicit matrix; its rows
    are still recognised as lines, and the estimate is the direct solver's."""
    rng = np.random.default_rng(2)
    shape, axis = (4, 3, 16), 2
    x = rng.poisson(3, shape)
    x[..., 5:12] = 0
    X = ektelo.protect(x, epsilon=1.0, seed=3)
    R = ektelo.operators.partition.stripe(shape, axis)
    P = [s.dawa_partition(eps=0.25, ratio=0.25) for s in X.split_by_partition(R)]
    W = selection.stripe_workloads(wl.prefix_marginal(shape, axis), shape, axis)
    m = X.laplace(selection.greedy_h_stripes(shape, axis, P, W), eps=0.75)
    assert type(m.query_on_root) is Sparse
    assert structured.lines_of(m.query_on_root, shape) is not None
    est = inference.least_squares([m])
    # GreedyH collapses these stripes to disjoint ranges: then the closed form
    assert est.info.method in ("lines", "disjoint")
    ref = _min_norm(m.query_on_root, m.answers)
    np.testing.assert_allclose(est.x.reshape(-1), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize(
    "Q",
    [
        RangeQueries((4, 6), [[0, 0], [1, 2]], [[1, 3], [1, 5]]),  # a box, not a line
        RangeQueries((4, 6), [[0, 1], [0, 3]], [[0, 2], [0, 5]]),  # one line only
        RangeQueries(24, [0, 5], [3, 20]),  # 1-D
        Sparse(sp.csr_matrix(np.array([[0, 0, 0, 0, 0, 1, 1, 0] + [0] * 16]))),  # wraps
        Sparse(sp.csr_matrix(np.array([[1, 2, 0, 0] + [0] * 20, [0] * 8 + [1] * 2 + [0] * 14]))),
    ],
)
def test_what_is_not_lines_is_left_to_the_other_solvers(Q):
    shape = (4, 6)
    if isinstance(Q, RangeQueries) and len(Q.domain_shape) == 1:
        assert structured.lines_of(Q, shape) is None  # the root is 2-D, the ranges 1-D
    else:
        assert structured.lines_of(Q, shape) is None
    assert structured.lines_of(Q, (24,)) is None  # never on a 1-D root


def test_rows_of_single_cells_are_lines_too():
    rng = np.random.default_rng(5)
    Q = Weighted(RangeQueries((5, 5), [[0, 0], [2, 3], [4, 1]], [[0, 0], [2, 3], [4, 1]]), 2.0)
    x = rng.poisson(4.0, (5, 5))
    m = _measure(Q, x, rng)
    assert structured.lines_of(Q, (5, 5)) is not None
    est = inference.least_squares([m])
    assert est.info.method == "disjoint"  # single cells share none: the closed form first
    np.testing.assert_allclose(est.x.reshape(-1), _min_norm(Q, m.answers), atol=1e-12)


# -- groups="measured" ----------------------------------------------------------------
def test_measured_groups_are_the_reductions_of_the_root():
    x = np.random.default_rng(1).poisson(5, 64)
    P1 = Partition(np.arange(64) // 4)
    P2 = Partition(np.arange(16) // 2)
    X = ektelo.protect(x, epsilon=2.0, seed=1)
    once = X.reduce_by_partition(P1).laplace(wl.prefix(16), eps=1.0)
    twice = X.reduce_by_partition(P1).reduce_by_partition(P2).laplace(wl.prefix(8), eps=1.0)
    chain = structured.measured_groups([once])
    assert [P.groups.tolist() for P in chain] == [P1.groups.tolist()]
    chain = structured.measured_groups([twice])
    assert [P.groups.tolist() for P in chain] == [P1.groups.tolist(), P2.groups.tolist()]
    assert structured.measured_groups([once, twice]) is None  # different reductions
    for m, groups in ((once, P1), (twice, [P1, P2])):
        by_record = inference.least_squares([m], groups="measured").x
        np.testing.assert_array_equal(by_record, inference.least_squares([m], groups=groups).x)


def test_measured_groups_of_a_derived_vector_are_none_or_its_own():
    """A transform of the root: no partition of the root in the record (the
    cells' estimate), or — for a permutation, itself a 0/1 map of one cell
    to one cell — the groups as they lie on the root; either way the LS
    estimate of the root (the cells' minimum-norm one)."""
    rng = np.random.default_rng(4)
    n = 64
    x = rng.poisson(5, size=n)
    P = Partition(np.arange(n) // 8)
    M = wl.prefix(P.num_groups)
    root = ektelo.protect(np.repeat(x, 2), epsilon=4.0, seed=1)
    summed = root.transform(Kronecker([Identity(n), Ones(1, 2)]))
    m = summed.reduce_by_partition(P).laplace(M, eps=1.0)
    assert structured.measured_groups([m]) is None
    np.testing.assert_array_equal(
        inference.least_squares([m], groups="measured").x, inference.least_squares([m]).x
    )
    perm = rng.permutation(n)
    root = ektelo.protect(x, epsilon=4.0, seed=1)
    shuffled = root.transform(Sparse(sp.csr_matrix((np.ones(n), (np.arange(n), perm)), (n, n))))
    m = shuffled.reduce_by_partition(P).laplace(M, eps=1.0)
    on_root = structured.measured_groups([m])
    assert on_root is not None and len(on_root) == 2
    est = inference.least_squares([m], groups="measured").x
    np.testing.assert_allclose(est, _min_norm(m.query_on_root, m.answers), rtol=1e-9, atol=1e-9)


def test_other_strings_are_refused():
    m = _measure(Identity(4), np.arange(4.0), np.random.default_rng(0))
    with pytest.raises(ValueError, match="measured"):
        inference.least_squares([m], groups="columns")
    with pytest.raises(ValueError, match="measured"):
        inference.multiplicative_weights([m], groups="cells")
