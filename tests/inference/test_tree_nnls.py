"""The tree NNLS (`ektelo.inference.tree_nnls`) against scipy's NNLS on
the dense tree: the estimate, the objective, the computed bound on the
projected gradient (it must bound the measured one and be tight), ‖Aᵀy‖∞,
where the method declines, and bad input; and the parts (sorting networks,
segments located block by block, the local price) on their own."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize as so

from ektelo.inference import tree, tree_nnls
from ektelo.matrix import Hierarchy

# (domain shape, branching, root measured, level weights): trees whose parents
# of cells are all alike — 1-D and 2-D, uneven axis heights, weighted depths
# (a zero weight just above the cells, a negative leaf weight), no root row —
# and 1-D trees whose parents hold q or q + 1 cells (q = 1: single cells,
# parents without a row of their own).
SOLVED = [
    ((64,), 2, True, None),
    ((256,), 16, True, None),
    ((243,), 3, False, None),
    ((16, 16), 2, True, None),
    ((8, 8), 4, True, [1.0, 2.0, 3.0]),
    ((9, 27), 3, True, None),
    ((64,), 4, True, [3.0, 1.0, 0.0, 0.5]),
    ((27,), 3, True, [1.0, 1.0, 2.0, -1.5]),
    ((4,), 4, False, None),
    ((100,), 16, True, None),
    ((1000,), 16, False, None),
    ((200,), 4, True, None),
    ((300,), 16, True, None),
    ((37,), 2, True, None),
    ((90,), 3, True, [1.0, 2.0, 3.0, 1.0, 2.0, 2.0]),
    ((100,), 16, True, [1.0, 1.0, -2.0]),
    # parents of 9–16 cells: both sorts (network up to 12 cells, rows above),
    # 1-D runs with pads and 2-D grids in blocks of whole grid rows
    ((180,), 16, True, None),
    ((192,), 16, False, None),
    ((210,), 16, True, None),
    ((250,), 16, True, [1.0, 1.0, 2.0]),
    ((9, 9), 3, True, None),
    ((16, 16), 4, True, None),
]


def noisy_answers(H: Hierarchy, sparse: bool, rng: np.random.Generator) -> np.ndarray:
    n = H.num_cells
    if sparse:  # most cells 0: most bounds active at the optimum
        x = np.where(rng.random(n) < 0.7, 0.0, rng.integers(1, 10, n).astype(float))
    else:
        x = rng.poisson(20, n).astype(float)
    return H.matvec(x) + rng.laplace(0.0, 3.0, H.shape[0])


def projected_gradient(A: np.ndarray, y: np.ndarray, x: np.ndarray) -> float:
    g = A.T @ (A @ x - y)
    return float(np.abs(np.where(x > 0, g, np.minimum(g, 0.0))).max())


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize(("dims", "b", "root", "weights"), SOLVED)
def test_matches_scipy_nnls(dims, b, root, weights, sparse, rng) -> None:
    H = Hierarchy(dims, b, root, weights)
    A = H.dense()
    y = noisy_answers(H, sparse, rng)
    kept = y.copy()
    result = tree_nnls.solve(H, y)
    assert result is not None
    np.testing.assert_array_equal(y, kept)  # input not modified
    ref = so.nnls(A, y, maxiter=50 * A.shape[1])[0]
    scale = np.abs(A.T @ y).max()
    assert result.gradient_scale == pytest.approx(scale, rel=1e-12)
    assert np.all(result.x >= 0)
    np.testing.assert_allclose(result.x, ref, atol=1e-9 * max(1.0, np.abs(ref).max()))
    f = lambda v: 0.5 * np.sum((A @ v - y) ** 2)  # noqa: E731
    assert f(result.x) <= f(ref) * (1 + 1e-12) + 1e-12
    # the bound is at the rounding level, as is the gradient (whose dense
    # evaluation here rounds too: hence the slack)
    measured = projected_gradient(A, y, result.x)
    assert measured <= result.gradient_bound + 1e-13 * scale
    assert result.gradient_bound <= 1e-11 * scale
    assert 1 <= result.rounds <= 10


def test_sparse_data_needs_several_rounds_and_max_rounds_is_honoured(rng) -> None:
    H = Hierarchy(4096, 16)
    y = noisy_answers(H, True, rng)
    result = tree_nnls.solve(H, y)
    assert result is not None and result.rounds >= 2
    assert tree_nnls.solve(H, y, max_rounds=result.rounds - 1) is None
    again = tree_nnls.solve(H, y, max_rounds=result.rounds)
    np.testing.assert_array_equal(again.x, result.x)


@pytest.mark.parametrize(
    ("dims", "b"),
    [((30, 20), 2), ((27, 13), 3), ((16, 16), 16), ((100,), 128), ((1,), 2)],
    ids=["uneven-2d", "uneven-2d-b3", "parents-of-256-cells", "parents-of-100-cells", "one-cell"],
)
def test_declines_where_it_does_not_apply(dims, b, rng) -> None:
    H = Hierarchy(dims, b)
    assert tree_nnls.solve(H, rng.normal(size=H.shape[0])) is None


def test_the_bound_catches_an_estimate_that_is_not_optimal(rng, monkeypatch) -> None:
    """Power: with one parent's line deliberately wrong, the estimate is not
    the optimum, and the computed bound must still cover its gradient."""
    H = Hierarchy(256, 4)
    A = H.dense()
    y = noisy_answers(H, False, rng)
    # private `_Parents.lines`: a wrong line injected where no input can put one
    lines = tree_nnls._Parents.lines

    def skewed(self, c, Y, B, wy, rows):
        alpha, beta = lines(self, c, Y, B, wy, rows)
        alpha[np.arange(self.P)[rows] == 7] += 5.0
        return alpha, beta

    monkeypatch.setattr(tree_nnls._Parents, "lines", skewed)
    result = tree_nnls.solve(H, y)
    measured = projected_gradient(A, y, result.x)
    assert measured > 1.0  # far from optimal
    assert measured <= result.gradient_bound * (1 + 1e-12)


def test_mixed_leaf_weights_decline(rng) -> None:
    # 20 cells, b = 16: cells are leaves at depths 1 and 2, weighted apart
    H = Hierarchy(20, 16, level_weights=[1.0, 2.0, 3.0])
    assert len(set(np.diag(H.dense()[: H.num_cells]))) == 2  # the cells' own rows
    assert tree_nnls.solve(H, rng.normal(size=H.shape[0])) is None


def test_bad_input_is_refused() -> None:
    H = Hierarchy(16, 4)
    with pytest.raises(ValueError, match="transpose"):
        tree_nnls.solve(H.T, np.zeros(16))
    with pytest.raises(ValueError, match="answers"):
        tree_nnls.solve(H, np.zeros(H.shape[0] + 1))
    with pytest.raises(ValueError, match="finite"):
        tree_nnls.solve(H, np.full(H.shape[0], np.inf))


def test_zero_answers_give_zero() -> None:
    H = Hierarchy(64, 4)
    result = tree_nnls.solve(H, np.zeros(H.shape[0]))
    np.testing.assert_array_equal(result.x, np.zeros(64))
    assert result.gradient_scale == 0.0 and result.gradient_bound == 0.0


def test_large_parents_limit_is_the_documented_one() -> None:
    # parents of up to 64 cells are solved, of 65 declined
    for H, solved in [(Hierarchy((8, 8), 8), True), (Hierarchy(64, 64), True)]:
        assert (tree_nnls.solve(H, np.zeros(H.shape[0])) is not None) == solved
    for H in (Hierarchy(65, 65), Hierarchy((9, 8), 9)):
        assert tree_nnls.solve(H, np.zeros(H.shape[0])) is None


def test_uneven_parents_written_block_by_block(rng, monkeypatch) -> None:
    """1-D parents of q or q + 1 cells write their cells (and sum them per
    parent) a block of parents at a time; blocks of one parent give the
    default's estimate (to rounding, as the breakpoints' product may round
    differently by block) and certificate."""
    H = Hierarchy(300, 16)
    y = noisy_answers(H, True, rng)
    whole = tree_nnls.solve(H, y)
    # `BLOCK_CELLS` lowered: blocks of one parent, a path no small input takes
    monkeypatch.setattr(tree_nnls, "BLOCK_CELLS", 3)
    blocks = tree_nnls.solve(H, y)
    np.testing.assert_allclose(blocks.x, whole.x, rtol=1e-12, atol=1e-12 * whole.x.max())
    assert blocks.gradient_bound == pytest.approx(whole.gradient_bound, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize(("dims", "b"), [((4096,), 16), ((300,), 16), ((32, 32), 2)])
def test_segments_located_block_by_block(dims, b, rng, monkeypatch) -> None:
    """Parents are sorted and their segments counted a block at a time, and
    a round recounts the parents that left their segment's range: blocks of
    one parent give the default's estimate (to rounding: the breakpoints'
    product rounds differently by block size) and rounds."""
    H = Hierarchy(dims, b)
    y = noisy_answers(H, True, rng)
    default = tree_nnls.solve(H, y)
    monkeypatch.setattr(tree_nnls, "BLOCK_CELLS", 3)  # (as above)
    blocks = tree_nnls.solve(H, y)
    np.testing.assert_allclose(blocks.x, default.x, rtol=1e-12, atol=1e-12 * default.x.max())
    assert blocks.rounds == default.rounds
    assert blocks.gradient_bound <= 1e-11 * blocks.gradient_scale


@pytest.mark.parametrize("b", [2, 4, 16])
def test_tied_cells_settle(b, rng) -> None:
    """Exact integer answers with many equal cells in a parent (tied
    breakpoints): still scipy's optimum, within the computed bound."""
    H = Hierarchy(256, b)
    x = rng.integers(0, 3, 256).astype(float)
    y = H.matvec(x) - 1.0  # every node a little low: many cells at 0
    result = tree_nnls.solve(H, y)
    assert result is not None
    A = H.dense()
    ref = so.nnls(A, y, maxiter=50 * A.shape[1])[0]
    np.testing.assert_allclose(result.x, ref, atol=1e-9 * max(1.0, np.abs(ref).max()))
    slack = 1e-13 * result.gradient_scale
    assert projected_gradient(A, y, result.x) <= result.gradient_bound + slack


@pytest.mark.parametrize("K", [6, 16], ids=["network", "row-sort"])
def test_a_located_parent_stays_put_when_cells_tie(K, rng) -> None:
    """Tied cells give breakpoints that are equal in exact arithmetic but a
    few ulps out of order once rounded. With G exactly on every parent's i-th
    breakpoint, each parent's range [lo, hi) must hold its own G, and a
    second pass at the same G moves nobody (else the rounds never settle)."""
    P = 4000
    leaves = rng.integers(0, 4, P * K) * 0.1
    # private `_Parents`/`_Grid`: the rounding case needs G set on the breakpoints
    parents = tree_nnls._Parents(tree_nnls._Grid((P,), (K,)), leaves, 1.0, 0.37, 3.1, None)
    wy = rng.normal(size=P)
    parents.locate_all(np.zeros(P), wy, np.zeros(P))
    Y = parents.ys  # (K, P)
    np.testing.assert_array_equal(Y.T, np.sort(leaves.reshape(P, K), axis=1))
    # the breakpoints as `_breaks` rounds them, before it orders them
    B, above = np.empty((K, P)), np.zeros(P)
    for i in range(K - 1, -1, -1):
        B[i] = Y[i] * parents.weights[i] - above * parents.own
        above = above + Y[i]
    assert (np.diff(B, axis=0) < 0).any()  # the case under test occurs
    for i in range(K):
        for G in (B[i].copy(), np.maximum.accumulate(B, axis=0)[i]):
            parents.locate_all(G, wy, np.zeros(P))
            assert np.all(parents.lo <= G) and np.all(parents.hi > G)
            assert parents.relocate(G, wy) == 0
    # and on the breakpoints as `_breaks` rounds and orders them: G on each
    # parent's B_c moves it up one segment
    G = np.zeros(P)
    parents.locate_all(G, wy, np.zeros(P))
    for _ in range(K):
        G = np.where(np.isfinite(parents.hi), parents.hi, G)
        before = parents.hi.copy()
        parents.locate_all(G, wy, np.zeros(P))
        assert np.all(parents.lo <= G) and np.all(parents.hi > G)
        assert np.all(parents.lo[np.isfinite(before)] == G[np.isfinite(before)])
        assert parents.relocate(G, wy) == 0


@pytest.mark.parametrize("K", range(1, 13))
def test_sorting_networks_sort(K) -> None:
    """Every 0–1 input comes out sorted, so every input does (Knuth, TAOCP
    vol. 3, §5.3.4, the 0–1 principle): the sizes used, up to 12."""
    network = tree_nnls.sorting_network(K)
    for word in range(2**K):
        v = [(word >> i) & 1 for i in range(K)]
        for i, j in network:
            v[i], v[j] = min(v[i], v[j]), max(v[i], v[j])
        assert v == sorted(v)
    assert len(tree_nnls.sorting_network(6)) == 12  # the optimum for 6 inputs


def test_parent_solve_writes_into_the_given_buffer(rng) -> None:
    """`tree.solve_from(out=)` (NNLS reuses one buffer every round)
    gives the same estimates as a fresh array, in that buffer."""
    H = Hierarchy(300, 16)
    y = noisy_answers(H, True, rng)
    t0 = H.height - 1
    grid = tree.node_terms(H, y, t0)[0].shape  # the parts of depth t0: (1, parts, 1)
    z = rng.normal(size=grid)
    V = rng.random(grid)
    fresh = tree.solve_from(H, y, t0, z, V, known=True)
    out = np.empty_like(fresh)
    again = tree.solve_from(H, y, t0, z, V, known=True, out=out)
    assert again is out
    np.testing.assert_array_equal(out, fresh)


@pytest.mark.parametrize(("dims", "b"), [((256,), 16), ((16, 16), 4), ((200,), 16)])
def test_local_price_is_the_grandparents_own_solve(dims, b, rng, monkeypatch) -> None:
    """Where the grandparents are the root, the local price a block gives its
    parents is exactly the price of a parent solve from their lines: the
    two-level closed form agrees with `tree.solve_from`."""
    H = Hierarchy(dims, b)
    assert H.height == 2
    y = noisy_answers(H, True, rng)
    seen = []
    # `_Parents.local_price`: the price a block sets is internal; it is
    # checked against the public `tree.solve_from`
    price = tree_nnls._Parents.local_price

    def recorded(self, G, a, b):
        lines = self.alpha.copy(), self.beta.copy()
        out = price(self, G, a, b)
        seen.append((a, b, lines, G.copy(), out.copy()))
        return out

    monkeypatch.setattr(tree_nnls._Parents, "local_price", recorded)
    tree_nnls.solve(H, y)
    t0 = H.height - 1
    terms = {t: tree.node_terms(H, y, t) for t in range(t0 + 1)}
    grid = terms[t0][0].shape  # (1, parts per axis..., 1)
    assert len(seen) == 1 and seen[0][:2] == (0, math.prod(grid))
    _, _, (alpha, beta), G, local = seen[0]
    totals = tree.solve_from(H, y, t0, alpha.reshape(grid), beta.reshape(grid), True, terms=terms)
    # the parents' one ancestor is the root: G less the root's w·y, plus the
    # root's w² times the total the solve fits under it
    (root_wy, root_w2) = terms[0]
    expected = G - float(root_wy.reshape(-1)[0]) + float(np.asarray(root_w2)) * totals.sum()
    np.testing.assert_allclose(local, expected, rtol=1e-12, atol=1e-12 * np.abs(G).max())


@pytest.mark.parametrize(
    ("dims", "b", "fewer"), [((65536,), 16, True), ((5000,), 16, True), ((64, 64), 4, False)]
)
def test_local_price_saves_rounds(dims, b, fewer, rng, monkeypatch) -> None:
    """The local price only changes where the rounds start: the same
    estimate, in no more parent solves (fewer on the 1-D sparse cases)."""
    H = Hierarchy(dims, b)
    y = noisy_answers(H, True, rng)
    local = tree_nnls.solve(H, y)
    # private `_local`: the solve without the local price, to compare rounds
    monkeypatch.setattr(tree_nnls, "_local", lambda tree, terms: None)
    plain = tree_nnls.solve(H, y)
    np.testing.assert_allclose(local.x, plain.x, rtol=1e-12, atol=1e-12 * plain.x.max())
    assert local.rounds < plain.rounds if fewer else local.rounds <= plain.rounds
    assert local.gradient_bound <= 1e-11 * local.gradient_scale


@pytest.mark.parametrize(("dims", "b"), [((8192,), 16), ((1000,), 16), ((16, 16), 4)])
def test_first_pass_finds_the_problem_scale(dims, b, rng, monkeypatch) -> None:
    """The first pass's by-products: max |p·ỹ| over the cells (the rounding
    term of the bound) and ‖Aᵀy‖∞, on cells of both signs."""
    H = Hierarchy(dims, b, level_weights=[1.0] * Hierarchy(dims, b).height + [0.5])
    y = noisy_answers(H, True, rng) - 2.0
    found = []
    # private `_Parents.locate_all`: the first pass's by-products are not returned
    locate_all = tree_nnls._Parents.locate_all

    def recorded(self, *args):
        found.append(locate_all(self, *args))
        return found[-1]

    monkeypatch.setattr(tree_nnls._Parents, "locate_all", recorded)
    tree_nnls.solve(H, y)
    cells = y[: H.num_cells] / 0.5
    largest = 0.25 * max(cells.max(), -cells.min())
    assert found[0][0] == pytest.approx(largest, rel=1e-15)
    assert found[0][1] == pytest.approx(np.abs(H.dense().T @ y).max(), rel=1e-12)


def test_strided_answers_give_the_contiguous_estimate(rng) -> None:
    """Answers that are a strided view give the estimate of a contiguous
    copy (the cells are gathered through views and takes)."""
    H = Hierarchy(4096, 16)
    spaced = np.repeat(noisy_answers(H, True, rng), 2)
    strided = tree_nnls.solve(H, spaced[::2])
    np.testing.assert_array_equal(strided.x, tree_nnls.solve(H, spaced[::2].copy()).x)
