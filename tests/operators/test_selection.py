"""Query selection operators against dense references built independently here.

Tree references are grown by plain recursion over boxes (not the vectorised
level-by-level code under test); Haar references by the textbook recursion
H₂ₘ = [Hₘ ⊗ (1 1); Iₘ ⊗ (1 −1)]. Rows are compared as multisets, since a
strategy's row order carries no meaning.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.sparse.linalg import lsmr

from ektelo import workload as wl
from ektelo.matrix import (
    Dense,
    EMatrix,
    Hierarchy,
    Identity,
    Kronecker,
    Prefix,
    RangeQueries,
    Total,
    Wavelet,
)
from ektelo.measurement import Measurement
from ektelo.operators import selection as sel

# -- references ------------------------------------------------------------------


def ref_parts(lo: int, hi: int, b: int) -> list[tuple[int, int]]:
    """Near-equal parts of [lo, hi], larger ones first."""
    side = hi - lo + 1
    k = min(b, side)
    out, start = [], lo
    for i in range(k):
        size = side // k + (1 if i < side % k else 0)
        out.append((start, start + size - 1))
        start += size
    return out


def ref_tree(dims, b, max_depth=None):
    """[(box, depth)] for every node, by recursion; box = ((lo, hi), ...) per axis."""
    nodes = []

    def visit(box, depth):
        nodes.append((box, depth))
        if all(lo == hi for lo, hi in box) or (max_depth is not None and depth == max_depth):
            return
        for child in itertools.product(*[ref_parts(lo, hi, b) for lo, hi in box]):
            visit(child, depth + 1)

    visit(tuple((0, s - 1) for s in dims), 0)
    return nodes


def indicator(dims, box) -> np.ndarray:
    x = np.zeros(dims)
    x[tuple(slice(lo, hi + 1) for lo, hi in box)] = 1
    return x.reshape(-1)


def ref_hierarchy(dims, b, root=True) -> np.ndarray:
    return np.array([indicator(dims, box) for box, depth in ref_tree(dims, b) if root or depth > 0])


def ref_haar(n: int) -> np.ndarray:
    if n == 1:
        return np.ones((1, 1))
    half = ref_haar(n // 2)
    return np.vstack([np.kron(half, [1, 1]), np.kron(np.eye(n // 2), [1, -1])])


def ref_haar_padded(n: int) -> np.ndarray:
    size = 1
    while size < n:
        size *= 2
    return ref_haar(size)[:, :n]


def rows(A: np.ndarray) -> list[tuple]:
    return sorted(map(tuple, np.round(np.asarray(A), 12)))


def assert_same_rows(M: EMatrix, ref: np.ndarray) -> None:
    D = M.dense()
    assert D.shape == ref.shape
    assert rows(D) == rows(ref)


def dense_sensitivity(M: EMatrix) -> float:
    return float(np.abs(M.dense()).sum(axis=0).max())


def full_rank(M: EMatrix) -> bool:
    return int(np.linalg.matrix_rank(M.dense())) == M.shape[1]


# -- simple strategies ---------------------------------------------------------------


def test_identity_total_prefix():
    assert sel.identity((3, 4)) == Identity(12)
    assert sel.identity(5) == Identity(5)
    assert sel.total((2, 3)) == Total(6)
    assert sel.prefix(7) == Prefix(7)
    assert sel.prefix((7,)) == Prefix(7)
    with pytest.raises(ValueError):
        sel.prefix((3, 3))
    for bad in [0, (), (3, 0)]:
        with pytest.raises(ValueError, match="shape must be a positive integer"):
            sel.identity(bad)
    for bad in [(2.5,), True, "3"]:
        with pytest.raises(TypeError, match="shape must be a positive integer"):
            sel.identity(bad)


def test_workload_as_strategy_is_checked_and_rebuilt():
    W = wl.all_range(6)
    M = sel.workload(W, shape=6)
    assert M == W and M is not W
    with pytest.raises(ValueError, match="columns"):
        sel.workload(W, shape=(2, 4))
    with pytest.raises(TypeError):
        sel.workload(np.eye(3))

    class Liar(Identity):
        def sensitivity(self, p: int = 1) -> float:
            return 0.0

    with pytest.raises(TypeError):
        sel.workload(Liar(3))


def test_marginals_delegate_to_workload():
    assert sel.marginal((2, 3, 4), [0, 2]) == wl.marginal((2, 3, 4), [0, 2])
    assert sel.marginals((2, 3, 4), 2) == wl.marginals((2, 3, 4), 2)
    D = sel.marginal((2, 3), [1]).dense()
    np.testing.assert_array_equal(D, np.kron(np.ones((1, 2)), np.eye(3)))


# -- hierarchies ---------------------------------------------------------------------


def test_h2_of_five_cells_by_hand():
    # 5 = 3 + 2 (larger part first), 3 = 2 + 1, 2 = 1 + 1.
    nodes = [(0, 4), (0, 2), (3, 4), (0, 1), (2, 2), (3, 3), (4, 4), (0, 0), (1, 1)]
    ref = np.array([indicator((5,), [node]) for node in nodes])
    M = sel.h2(5)
    assert isinstance(M, Hierarchy)
    assert_same_rows(M, ref)
    # rows in order: the cells, then the inner nodes top-down
    np.testing.assert_array_equal(M.dense(), np.vstack([np.eye(5), ref[[0, 1, 2, 3]]]))
    assert M.sensitivity() == 4 == dense_sensitivity(M)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 33, 64])
def test_h2_1d_matches_reference(n):
    M = sel.h2(n)
    assert M.shape == (2 * n - 1, n)  # a full binary tree with n leaves
    assert_same_rows(M, ref_hierarchy((n,), 2))
    height = math.ceil(math.log2(n)) + 1 if n > 1 else 1
    assert M.sensitivity() == height == dense_sensitivity(M)
    assert full_rank(M)


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (1, 6), (5, 1), (2, 3, 4), (7, 6)])
def test_h2_multidimensional_matches_reference(dims):
    M = sel.h2(dims)
    assert_same_rows(M, ref_hierarchy(dims, 2))
    assert M.sensitivity() == math.ceil(math.log2(max(dims))) + 1 == dense_sensitivity(M)
    assert full_rank(M)


@pytest.mark.parametrize(
    ("dims", "b", "root"),
    [((10,), 3, True), ((10,), 3, False), ((27,), 3, False), ((9, 7), 3, True), ((20,), 20, False)],
)
def test_hierarchy_matches_reference(dims, b, root):
    M = sel.hierarchy(dims, b, root=root)
    assert_same_rows(M, ref_hierarchy(dims, b, root))
    levels = max(math.ceil(math.log(s, b) - 1e-9) for s in dims) + (1 if root else 0)
    assert M.sensitivity() == levels == dense_sensitivity(M)
    assert full_rank(M)


def test_hierarchy_rejects_bad_branching():
    with pytest.raises(ValueError):
        sel.hierarchy(8, 1)
    with pytest.raises(TypeError):
        sel.hierarchy(8, 2.0)


# -- HB branching factor (Qardaji, Yang & Li, PVLDB 2013) ---------------------------------


def ref_height(n: int, b: int) -> int:
    h = 0
    while b**h < n:
        h += 1
    return h


def ref_hb_branching_1d(n: int) -> int:
    """Brute force over every b in [2, n] (Eq. 3), least b on ties."""
    best = None
    for b in range(2, n + 1):
        h = ref_height(n, b)
        v = (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3
        if best is None or v < best[0]:
            best = (v, b)
    return best[1]


def ref_hb_branching_2d(side: int) -> int:
    best = None
    for b in range(2, side + 1):
        h = ref_height(side, b)
        v = b * (side - 1) * h**2
        if best is None or v < best[0]:
            best = (v, b)
    return best[1]


@pytest.mark.parametrize(
    ("n", "b"),
    # worked by hand from V(b) = (b-1)h^3 - 2(b+1)h^2/3:
    # n = 4096: b = 16 (h = 3) gives 303, b = 64 (h = 2) 330.7, b = 8 (h = 4) 352;
    # n = 1024: b = 32 (h = 2) gives 160 against 198 for b = 11 (h = 3);
    # n = 300: b = 18 (h = 2) gives 85.3 against 98.3 for the flat b = 300;
    # n = 100: the flat b = 100 (h = 1) gives 31.7 against 42.7 for b = 10.
    [
        (4096, 16),
        (256, 16),
        (65536, 16),
        (2**20, 16),
        (2**24, 16),
        (1024, 32),
        (300, 18),
        (100, 100),
        (128, 128),
        (2, 2),
    ],
)
def test_hb_branching_1d_published_choices(n, b):
    assert sel.hb_branching(n) == b


def test_hb_branching_1d_matches_brute_force():
    for n in range(2, 700):
        assert sel.hb_branching(n) == ref_hb_branching_1d(n), n


@pytest.mark.parametrize(
    ("shape", "b"),
    # V2(b) = b(n-1)h^2 with n the side: for 256, b = 7 (h = 3) gives 16065 against
    # 16320 for both b = 4 (h = 4) and b = 16 (h = 2); for 64, b = 8 (h = 2) gives 2016.
    [((256, 256), 7), ((64, 64), 8), ((4096, 4096), 8), ((16, 16), 4), ((4, 4), 4)],
)
def test_hb_branching_2d_published_choices(shape, b):
    assert sel.hb_branching(shape) == b


def test_hb_branching_2d_matches_brute_force():
    for side in range(2, 300):
        assert sel.hb_branching((side, side)) == ref_hb_branching_2d(side), side
    # A non-square domain uses the side of the square with as many cells.
    assert sel.hb_branching((128, 512)) == ref_hb_branching_2d(256)


def test_hb_branching_edge_cases():
    assert sel.hb_branching(1) is None
    assert sel.hb_branching((1, 1)) is None
    with pytest.raises(ValueError, match="1-D and 2-D"):
        sel.hb_branching((4, 4, 4))
    with pytest.raises(ValueError):
        sel.hb((4, 4, 4))


@pytest.mark.parametrize("n", [2, 5, 100, 129, 300, 520])
def test_hb_1d_is_the_tree_without_root(n):
    b = ref_hb_branching_1d(n)
    M = sel.hb(n)
    assert_same_rows(M, ref_hierarchy((n,), b, root=False))
    assert M.sensitivity() == ref_height(n, b) == dense_sensitivity(M)
    assert full_rank(M)


def test_hb_small_domains_are_flat():
    assert sel.hb(100) == Identity(100)
    assert sel.hb(1) == Identity(1)
    assert sel.hb((1, 1)) == Identity(1)


@pytest.mark.parametrize("dims", [(16, 16), (20, 20), (12, 30), (2, 2), (1, 9)])
def test_hb_2d_is_the_bxb_tree_without_root(dims):
    b = ref_hb_branching_2d(math.isqrt(dims[0] * dims[1]))
    M = sel.hb(dims)
    assert_same_rows(M, ref_hierarchy(dims, b, root=False))
    assert M.sensitivity() == max(ref_height(s, b) for s in dims) == dense_sensitivity(M)
    assert full_rank(M)


# -- quadtree (Cormode et al., ICDE 2012) ---------------------------------------------------


def geometric_weights(height: int) -> np.ndarray:
    t = np.arange(height + 1)
    w = 2.0 ** (t / 3)
    return w / w.sum()


@pytest.mark.parametrize("dims", [(4, 4), (8, 8), (3, 5), (6, 1), (5, 7)])
def test_quadtree_geometric_budget(dims):
    M = sel.quadtree(dims)
    nodes = ref_tree(dims, 2)
    height = max(depth for _, depth in nodes)
    w = geometric_weights(height)
    assert w[-1] / w[-2] == pytest.approx(2 ** (1 / 3))  # leaves get the most
    ref = np.array([w[depth] * indicator(dims, box) for box, depth in nodes])
    D = M.dense()
    assert D.shape == ref.shape
    np.testing.assert_allclose(np.array(rows(D)), np.array(rows(ref)), atol=1e-12)
    # One Laplace call at ε charges sensitivity 1: level t is measured at w_t·ε.
    assert M.sensitivity() == pytest.approx(1.0)
    assert M.sensitivity() == pytest.approx(dense_sensitivity(M))
    assert full_rank(M)


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (8, 2)])
def test_quadtree_uniform_is_h2(dims):
    M = sel.quadtree(dims, budget="uniform")
    assert_same_rows(M, ref_hierarchy(dims, 2))
    assert M.sensitivity() == math.ceil(math.log2(max(dims))) + 1 == dense_sensitivity(M)
    assert sel.h2(dims) == M


@pytest.mark.parametrize("budget", ["uniform", "geometric"])
def test_quadtree_max_height(budget):
    dims = (8, 6)
    M = sel.quadtree(dims, budget=budget, max_height=2)
    nodes = ref_tree(dims, 2, max_depth=2)
    assert M.shape == (len(nodes), 48)
    patterns = sorted(tuple(indicator(dims, box)) for box, _ in nodes)
    assert sorted(tuple((r != 0).astype(float)) for r in M.dense()) == patterns
    # Blocks of 2×2 (or 2×1) cells are left as leaves: no longer full rank.
    assert np.linalg.matrix_rank(M.dense()) == sum(1 for _, d in nodes if d == 2)
    assert sel.quadtree(dims, max_height=0).dense().tolist() == [[1.0] * 48]


def test_quadtree_checks():
    with pytest.raises(ValueError, match="2-D"):
        sel.quadtree(16)
    with pytest.raises(ValueError):
        sel.quadtree((4, 4), budget="linear")
    with pytest.raises(ValueError):
        sel.quadtree((4, 4), max_height=-1)
    assert sel.quadtree((1, 1)) == Identity(1)


# -- Privelet -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 8, 64])
def test_wavelet_power_of_two(n):
    M = sel.wavelet(n)
    assert Wavelet(n) == M
    np.testing.assert_array_equal(M.dense(), ref_haar(n))
    assert M.sensitivity() == 1 + math.log2(n) == dense_sensitivity(M)
    assert full_rank(M)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12, 100])
def test_wavelet_pads_to_a_power_of_two(n):
    M = sel.wavelet(n)
    np.testing.assert_array_equal(M.dense(), ref_haar_padded(n))
    assert M.sensitivity() == 1 + math.ceil(math.log2(n)) == dense_sensitivity(M)
    assert full_rank(M)


@pytest.mark.parametrize("n", [3, 100, 300])
def test_a_padded_wavelet_is_priced_from_its_structure_and_measured_as_before(n):
    """Wavelet(2^k)·Embedding: its sensitivities, |·| and ∘ from the Haar
    columns (no materialising); the kernel materialises it into the same
    CSR entries as the former SciPy embedding (the same answers)."""
    import scipy.sparse as sp

    from ektelo.kernel.kernel import trusted_matrix
    from ektelo.matrix import Embedding, Product, Sparse

    M = sel.wavelet(n)
    size = 1 << (n - 1).bit_length()
    assert Product(Wavelet(size), Embedding(size, n)) == M
    assert isinstance(M.abs(), Product) and isinstance(M.sqr(), Product)
    np.testing.assert_array_equal(M.column_norms(1), np.abs(M.dense()).sum(axis=0))
    np.testing.assert_array_equal(M.column_norms(2), (M.dense() ** 2).sum(axis=0))
    cells = np.arange(n)
    former = Product(Wavelet(size), Sparse(sp.csr_matrix((np.ones(n), (cells, cells)),
                                                         shape=(size, n))))

    def csr_parts(Q):  # the kernel's sparse matrices, one per Kronecker factor
        return [f.matrix for f in (Q.factors if isinstance(Q, Kronecker) else [Q])]

    for new, old in ((M, former), (Kronecker([M, M]), Kronecker([former, former]))):
        a, b = trusted_matrix(new), trusted_matrix(old)
        assert a == b and type(a) is type(b)
        for x, y in zip(csr_parts(a), csr_parts(b), strict=True):
            for part in ("data", "indices", "indptr"):
                np.testing.assert_array_equal(getattr(x, part), getattr(y, part))


@pytest.mark.parametrize("dims", [(4, 8), (3, 4), (2, 3, 5)])
def test_wavelet_multidimensional_is_kronecker(dims):
    M = sel.wavelet(dims)
    assert isinstance(M, Kronecker)
    ref = ref_haar_padded(dims[0])
    for s in dims[1:]:
        ref = np.kron(ref, ref_haar_padded(s))
    np.testing.assert_array_equal(M.dense(), ref)
    expected = math.prod(1 + math.ceil(math.log2(s)) for s in dims)
    assert M.sensitivity() == expected == dense_sensitivity(M)
    assert full_rank(M)


# -- UniformGrid and AdaptiveGrid (Qardaji, Yang & Li, ICDE 2013) ----------------------------


def grid_cells(M: EMatrix) -> int:
    return M.shape[0]


def test_uniform_grid_reduces_to_identity_past_dpbench_threshold():
    # DPBench: cell side ⌊√(256²·10/(N·ε))⌋ is 1 as soon as N·ε > 256²·10/4 = 163840.
    M = sel.uniform_grid((256, 256), 163840, 1.0)
    assert isinstance(M, RangeQueries) and grid_cells(M) == 128 * 128
    for total, eps in [(163841, 1.0), (1_700_000, 0.1), (10**6, 1.0)]:
        assert sel.uniform_grid((256, 256), total, eps) == Identity(65536)


@pytest.mark.parametrize(
    ("total", "eps", "dpbench_side", "paper_side"),
    [
        # N·ε/c = 1000 cells: DPBench cell side ⌊√65.5⌋ = 8 → 32 per side; paper ⌈√1000⌉ = 32.
        (100_000, 0.1, 32, 32),
        # N·ε/c = 5000: DPBench side ⌊√13.1⌋ = 3 → ⌈256/3⌉ = 86; paper ⌈70.7⌉ = 71.
        (50_000, 1.0, 86, 71),
        # N·ε/c = 1: one 256×256 cell under both rules.
        (10, 1.0, 1, 1),
        # N = 0 (or a negative noisy estimate): one cell.
        (0, 1.0, 1, 1),
        (-50, 1.0, 1, 1),
    ],
)
def test_uniform_grid_sizes(total, eps, dpbench_side, paper_side):
    for rule, side in [("dpbench", dpbench_side), ("paper", paper_side)]:
        M = sel.uniform_grid((256, 256), total, eps, rule=rule)
        assert grid_cells(M) == side * side
        # The cells partition the domain: every cell in exactly one query.
        np.testing.assert_array_equal(M.column_norms(), np.ones(65536))
        assert M.sensitivity() == 1.0


def test_uniform_grid_paper_rule_identity_threshold():
    # m = ⌈√(N·ε/10)⌉ reaches the side 256 once N·ε > 10·255² = 650250.
    assert grid_cells(sel.uniform_grid((256, 256), 650250, 1.0, rule="paper")) == 255**2
    assert sel.uniform_grid((256, 256), 650251, 1.0, rule="paper") == Identity(65536)


def test_uniform_grid_cells_by_hand():
    # 5×7 domain, N·ε/c = 35/4 cells: DPBench side ⌊√4⌋ = 2, clipped at the edges.
    M = sel.uniform_grid((5, 7), 87.5, 1.0)
    assert isinstance(M, RangeQueries)
    np.testing.assert_array_equal(M.lower[:5], [[0, 0], [0, 2], [0, 4], [0, 6], [2, 0]])
    np.testing.assert_array_equal(M.upper[:5], [[1, 1], [1, 3], [1, 5], [1, 6], [3, 1]])
    assert M.shape == (12, 35)
    # The paper rule: m = ⌈√8.75⌉ = 3 near-equal parts per axis, larger first.
    P = sel.uniform_grid((5, 7), 87.5, 1.0, rule="paper")
    np.testing.assert_array_equal(P.lower[:3], [[0, 0], [0, 3], [0, 5]])
    np.testing.assert_array_equal(P.upper[-1], [4, 6])
    assert P.shape == (9, 35)
    for G in (M, P):
        assert dense_sensitivity(G) == 1.0
        assert np.linalg.matrix_rank(G.dense()) == G.shape[0]


def test_grid_argument_checks():
    with pytest.raises(ValueError, match="2-D"):
        sel.uniform_grid(256, 1000, 1.0)
    with pytest.raises(ValueError):
        sel.uniform_grid((8, 8), 1000, 0.0)
    with pytest.raises(ValueError):
        sel.uniform_grid((8, 8), float("nan"), 1.0)
    with pytest.raises(ValueError):
        sel.uniform_grid((8, 8), 1000, 1.0, rule="exact")
    with pytest.raises(ValueError):
        sel.ag_first_level((8, 8), 1000, 1.0, c=-1)


@pytest.mark.parametrize(
    ("shape", "total", "eps", "dpbench_side", "paper_side"),
    [
        # √(N·ε/c)/4 = 79.06: DPBench m1 = 79 → cell side ⌊1024/79⌋ = 12 → 86 per side;
        # the paper m1 = 80 parts.
        ((1024, 1024), 10**6, 1.0, 86, 80),
        # √(10)/4 < 10: m1 = 10; DPBench side ⌊25.6⌋ = 25 → 11 per side.
        ((256, 256), 1000, 0.1, 11, 10),
        # A domain smaller than the minimum grid: every cell alone.
        ((8, 8), 1000, 0.1, 8, 8),
    ],
)
def test_ag_first_level_sizes(shape, total, eps, dpbench_side, paper_side):
    for rule, side in [("dpbench", dpbench_side), ("paper", paper_side)]:
        M = sel.ag_first_level(shape, total, eps, rule=rule)
        assert isinstance(M, RangeQueries)
        assert grid_cells(M) == side * side
        assert M.sensitivity() == 1.0


def test_ag_second_level_sizes():
    shape = (60, 60)
    L1 = sel.ag_first_level(shape, 1000, 1.0, rule="paper")  # 10×10 cells of 6×6
    assert grid_cells(L1) == 100
    counts = np.zeros(100)
    counts[0] = 2000.0  # √(2000·0.5·1/5) = 14.1: paper m2 = 15 (capped at 6), DPBench 14
    counts[1] = 40.0  # √4 = 2: m2 = 2 under both rules
    counts[2] = 9.0  # √0.9 < 1: the cell is kept whole
    counts[3] = -7.0  # a negative noisy count: kept whole
    counts[4] = 90.0  # √9 = 3
    for rule in ["paper", "dpbench"]:
        M = sel.ag_second_level(shape, L1, counts, 1.0, 0.5, rule=rule)
        assert isinstance(M, RangeQueries) and M.domain_shape == shape
        per_cell = [36, 4, 1, 1, 9] + [1] * 95
        assert grid_cells(M) == sum(per_cell)
        # Level-2 cells partition the domain and nest in the level-1 cells.
        assert M.sensitivity() == 1.0 == dense_sensitivity(M)
        inside = (L1.dense() @ M.dense().T) == M.dense().sum(axis=1)
        assert np.all(inside.sum(axis=0) == 1)


def test_ag_second_level_dpbench_sub_cells_by_hand():
    L1 = sel.ag_first_level((20, 20), 10, 1.0)  # m1 = 10: cells 2×2
    assert grid_cells(L1) == 100
    counts = np.zeros(100)
    counts[0] = 40.0  # m2 = 2 → sub-cell side ⌊√(4/4)⌋ = 1
    M = sel.ag_second_level((20, 20), L1, counts, 1.0)
    np.testing.assert_array_equal(M.lower[:4], [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(M.upper[:4], [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(M.lower[4], [0, 2])
    np.testing.assert_array_equal(M.upper[4], [1, 3])
    assert grid_cells(M) == 103


def dpbench_int_ceil(x: float) -> int:
    """DPBench's grid-size expression `int(x - 1) + 1` (⌊x⌋ for x ≥ 1, else 1)."""
    return max(int(x - 1) + 1, 1)


def ref_cells_by_width(r0, c0, r1, c1, width):
    lows, highs = [], []
    for i in range((r1 - r0) // width + 1):
        for j in range((c1 - c0) // width + 1):
            lows.append((r0 + i * width, c0 + j * width))
            highs.append((min(r0 + (i + 1) * width - 1, r1), min(c0 + (j + 1) * width - 1, c1)))
    return lows, highs


@pytest.mark.parametrize(
    ("shape", "total", "eps"),
    [((256, 256), 10**5, 0.1), ((100, 37), 5000, 1.0), ((64, 300), 20000, 0.5)],
)
def test_grids_follow_dpbench_sizing_rule_cell_by_cell(shape, total, eps, rng):
    n, m = shape
    width = dpbench_int_ceil(math.sqrt(n * m / (total * eps / 10)))
    lows, highs = ref_cells_by_width(0, 0, n - 1, m - 1, width)
    U = sel.uniform_grid(shape, total, eps)
    np.testing.assert_array_equal(U.lower, lows)
    np.testing.assert_array_equal(U.upper, highs)

    m1 = max(dpbench_int_ceil(math.sqrt(total * eps / 10) / 4), 10)
    width = dpbench_int_ceil(math.sqrt(n * m / m1**2))
    lows, highs = ref_cells_by_width(0, 0, n - 1, m - 1, width)
    L1 = sel.ag_first_level(shape, total, eps)
    np.testing.assert_array_equal(L1.lower, lows)
    np.testing.assert_array_equal(L1.upper, highs)

    counts = rng.normal(total / len(lows), 30.0, size=len(lows))
    counts[::7] = -3.0
    lows2, highs2 = [], []
    for (r0, c0), (r1, c1), cnt in zip(lows, highs, counts, strict=True):
        m2 = 1 if cnt <= 0 else dpbench_int_ceil(math.sqrt(cnt * (1 - 0.5) * eps / 5))
        w2 = dpbench_int_ceil(math.sqrt((r1 - r0 + 1) * (c1 - c0 + 1) / m2**2))
        lo, hi = ref_cells_by_width(r0, c0, r1, c1, w2)
        lows2 += lo
        highs2 += hi
    L2 = sel.ag_second_level(shape, L1, counts, eps)
    np.testing.assert_array_equal(L2.lower, lows2)
    np.testing.assert_array_equal(L2.upper, highs2)


def test_ag_second_level_paper_rule_cell_by_cell(rng):
    shape, eps = (45, 38), 1.0
    L1 = sel.ag_first_level(shape, 5000, eps, rule="paper")  # 10×10 parts of 4–5 cells
    counts = rng.normal(60.0, 40.0, size=L1.shape[0])
    lows, highs = [], []
    for (r0, c0), (r1, c1), cnt in zip(L1.lower, L1.upper, counts, strict=True):
        m2 = max(1, math.ceil(math.sqrt(max(cnt, 0) * 0.5 * eps / 5)))
        rows = ref_parts(r0, r1, m2)
        cols = ref_parts(c0, c1, m2)
        for (a, b), (c, d) in itertools.product(rows, cols):
            lows.append((a, c))
            highs.append((b, d))
    L2 = sel.ag_second_level(shape, L1, counts, eps, rule="paper")
    np.testing.assert_array_equal(L2.lower, lows)
    np.testing.assert_array_equal(L2.upper, highs)


def test_ag_second_level_checks():
    L1 = sel.ag_first_level((20, 20), 10, 1.0)
    with pytest.raises(ValueError, match="noisy counts"):
        sel.ag_second_level((20, 20), L1, np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="finite"):
        sel.ag_second_level((20, 20), L1, np.full(100, np.inf), 1.0)
    with pytest.raises(ValueError, match="alpha"):
        sel.ag_second_level((20, 20), L1, np.zeros(100), 1.0, 1.0)
    with pytest.raises(ValueError, match="domain"):
        sel.ag_second_level((20, 21), L1, np.zeros(100), 1.0)
    with pytest.raises(TypeError):
        sel.ag_second_level((20, 20), Identity(400), np.zeros(400), 1.0)
    overlapping = RangeQueries((4, 4), np.array([[0, 0], [0, 0]]), np.array([[3, 3], [1, 1]]))
    with pytest.raises(ValueError, match="grid of disjoint cells"):
        sel.ag_second_level((4, 4), overlapping, np.zeros(2), 1.0)
    lo, hi = np.asarray(L1.lower), np.asarray(L1.upper)
    for bad_lo, bad_hi in [
        (lo[1:], hi[1:]),  # a cell missing
        (np.vstack([lo, lo[:1]]), np.vstack([hi, hi[:1]])),  # a cell twice
        (lo, np.minimum(hi + np.array([0, 1]), 19)),  # overlapping columns
    ]:
        with pytest.raises(ValueError, match="grid of disjoint cells"):
            sel.ag_second_level(
                (20, 20), RangeQueries((20, 20), bad_lo, bad_hi), np.zeros(len(bad_lo)), 1.0
            )
    # The same grid listed in another order is accepted, cell counts following it.
    order = np.random.default_rng(1).permutation(100)
    shuffled = RangeQueries((20, 20), lo[order], hi[order])
    counts = np.arange(100.0) * 4
    M = sel.ag_second_level((20, 20), shuffled, counts[order], 1.0)
    assert rows(M.dense()) == rows(sel.ag_second_level((20, 20), L1, counts, 1.0).dense())


def test_adaptive_grid_from_a_measurement():
    L1 = sel.ag_first_level((20, 20), 10, 1.0)
    answers = np.zeros(100)
    answers[0] = 40.0
    m = Measurement(
        answers=answers,
        query=L1,
        query_on_root=L1,
        noise=2.0,
        epsilon=0.5,
        root_id="root",
        root_shape=(20, 20),
    )
    assert sel.adaptive_grid((20, 20), m, 1.0) == sel.ag_second_level((20, 20), L1, answers, 1.0)
    with pytest.raises(TypeError):
        sel.adaptive_grid((20, 20), answers, 1.0)


# -- stripes ------------------------------------------------------------------------------


def test_stripe_is_kronecker_with_identity():
    dims = (3, 20, 2)
    M = sel.stripe(dims, 1, sel.hb)
    assert isinstance(M, Kronecker)
    ref = np.kron(np.kron(np.eye(3), sel.hb(20).dense()), np.eye(2))
    np.testing.assert_array_equal(M.dense(), ref)
    assert M.sensitivity() == sel.hb(20).sensitivity() == dense_sensitivity(M)
    assert full_rank(M)
    P = sel.stripe((4, 5), 0, Prefix(4))
    np.testing.assert_array_equal(P.dense(), np.kron(np.tril(np.ones((4, 4))), np.eye(5)))
    assert sel.stripe(9, 0, sel.h2) == sel.h2(9)


def test_stripe_checks():
    with pytest.raises(ValueError, match="axis"):
        sel.stripe((3, 4), 2, sel.h2)
    with pytest.raises(ValueError, match="columns"):
        sel.stripe((3, 4), 0, Identity(4))
    with pytest.raises(TypeError):
        sel.stripe((3, 4), 0, lambda n: np.eye(n))


# -- every strategy answers its workload -------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: sel.h2(1000),
        lambda: sel.hb(1000),
        lambda: sel.hb((30, 40)),
        lambda: sel.wavelet(300),
        lambda: sel.wavelet((12, 20)),
        lambda: sel.quadtree((33, 31)),
        lambda: sel.stripe((50, 6), 0, sel.hb),
    ],
)
def test_least_squares_recovers_the_data(make, rng):
    M = make()
    x = rng.integers(0, 20, size=M.shape[1]).astype(float)
    y = M.matvec(x)
    x_hat = lsmr(M.as_linear_operator(), y, atol=1e-14, btol=1e-14, maxiter=5000)[0]
    np.testing.assert_allclose(x_hat, x, atol=1e-6)


def test_grids_recover_cell_totals(rng):
    M = sel.uniform_grid((40, 40), 5000, 1.0)
    x = rng.integers(0, 20, size=1600).astype(float)
    x_hat = lsmr(M.as_linear_operator(), M.matvec(x), atol=1e-14, btol=1e-14)[0]
    np.testing.assert_allclose(M.matvec(x_hat), M.matvec(x), atol=1e-8)


def test_strategies_are_library_expressions():
    from ektelo.matrix import rebuild

    for M in [
        sel.h2(20),
        sel.hb((16, 16)),
        sel.quadtree((5, 6)),
        sel.wavelet((3, 4)),
        sel.uniform_grid((30, 30), 1000, 1.0),
        sel.stripe((4, 8), 1, sel.h2),
    ]:
        assert rebuild(M) == M


# -- nothing is materialised -----------------------------------------------------------------


def test_large_domains_stay_implicit():
    n = 2**24
    W = sel.wavelet(n)
    assert isinstance(W, Wavelet) and W.shape == (n, n) and W.sensitivity() == 25
    H = sel.hb(n)  # b = 16: about n/15 inner nodes, stored by the tree's parameters
    assert isinstance(H, Hierarchy) and H.branching == 16 and not H.root
    assert H.shape == (n + sum(16**k for k in range(1, 6)), n)
    assert H.sensitivity() == 6
    G = sel.stripe((4096, 4096), 0, sel.hb)
    assert isinstance(G, Kronecker) and G.shape[1] == n
    assert sel.identity((4096, 4096)).shape == (n, n)


def test_dense_wrapper_is_still_accepted_as_workload():
    D = Dense(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    assert sel.workload(D) == D
