"""`Hierarchy` against two oracles built from a plain breadth-first recursion
over boxes written here: the dense matrix, and the same rows as public
implicit matrices, `VStack([Identity, RangeQueries])` (the form the
selection operators built before `Hierarchy`), for trees too large to densify.

Rows are compared *in order* (not as multisets): the implicit class must keep
the layout measurements were answered in — the cells in C order, then the
inner nodes breadth first.
"""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import lsmr

import ektelo
from ektelo.matrix import (
    Dense,
    Hierarchy,
    Identity,
    Kronecker,
    RangeQueries,
    VStack,
    from_json,
    from_spec,
    rebuild,
    to_json,
    to_spec,
)
from ektelo.operators import selection as sel
from tests.reference_trees import ref_boxes, ref_dense

# -- oracles -------------------------------------------------------------------------


def ref_implicit(dims, b, root=True):
    """The unweighted rows of `ref_dense` as public implicit matrices: the
    cells, then the inner boxes breadth first as range queries."""
    n = math.prod(dims)
    _, inner = ref_boxes(dims, b, root)
    if not inner:
        return Identity(n)
    lower = np.array([[lo for lo, _ in box] for box, _ in inner])
    upper = np.array([[hi for _, hi in box] for box, _ in inner])
    return VStack([Identity(n), RangeQueries(dims, lower, upper)])


def height(dims, b) -> int:
    h = 0
    while b**h < max(dims):
        h += 1
    return h


SHAPES_1D = [(n,) for n in [1, 2, 3, 4, 5, 7, 8, 9, 10, 13, 16, 17, 27, 31, 33, 64, 100]]
SHAPES_2D = [(1, 1), (1, 6), (5, 1), (2, 2), (3, 4), (4, 4), (3, 5), (6, 6), (7, 6), (8, 8)]
SHAPES_2D += [(3, 16), (5, 12), (9, 4), (12, 30), (16, 3), (10, 10)]
SHAPES_3D = [(2, 3, 4), (3, 3, 3), (5, 1, 7), (4, 4, 4), (1, 2, 1), (2, 2, 9)]
SHAPES = SHAPES_1D + SHAPES_2D + SHAPES_3D
CASES = [(dims, b) for dims in SHAPES for b in (2, 3, 4, 7)]


def case_id(case) -> str:
    dims, b = case
    return "x".join(map(str, dims)) + f"-b{b}"


@pytest.fixture(params=CASES, ids=[case_id(c) for c in CASES])
def tree(request):
    return request.param


# -- the matrix, row by row ------------------------------------------------------------


@pytest.mark.parametrize("root", [True, False])
def test_dense_equals_breadth_first_reference(tree, root):
    dims, b = tree
    H = Hierarchy(dims, b, root=root)
    ref = ref_dense(dims, b, root)
    assert H.shape == ref.shape
    np.testing.assert_array_equal(H.dense(), ref)
    np.testing.assert_array_equal(H.sparse().toarray(), ref)
    assert H.height == height(dims, b)


@pytest.mark.parametrize("root", [True, False])
def test_equals_the_vstack_form(tree, root):
    dims, b = tree
    H = Hierarchy(dims, b, root=root)
    np.testing.assert_array_equal(H.dense(), ref_implicit(dims, b, root).dense())


@pytest.mark.parametrize("root", [True, False])
def test_products_equal_dense(tree, root, rng):
    dims, b = tree
    H = Hierarchy(dims, b, root=root)
    D = ref_dense(dims, b, root)
    x = rng.normal(size=D.shape[1])
    y = rng.normal(size=D.shape[0])
    np.testing.assert_allclose(H.matvec(x), D @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H.rmatvec(y), D.T @ y, rtol=1e-12, atol=1e-12)
    X = np.asfortranarray(rng.normal(size=(D.shape[1], 3)))
    Y = rng.normal(size=(D.shape[0], 2))
    np.testing.assert_allclose(H.matmat(X), D @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H.T.matmat(Y), D.T @ Y, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(H.T.dense(), D.T)


def test_as_a_kronecker_factor(tree, rng):
    """Applied along a middle axis (pre and post both > 1)."""
    dims, b = tree
    H = Hierarchy(dims, b, level_weights=np.arange(1.0, height(dims, b) + 2))
    A = rng.normal(size=(2, 3))
    K = Kronecker([Dense(A), H, Identity(2)])
    D = np.kron(np.kron(A, ref_dense(dims, b, True, np.arange(1.0, 64))), np.eye(2))
    x = rng.normal(size=D.shape[1])
    y = rng.normal(size=D.shape[0])
    np.testing.assert_allclose(K.matvec(x), D @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.rmatvec(y), D.T @ y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("root", [True, False])
def test_weighted_levels(tree, root, rng):
    dims, b = tree
    w = np.round(rng.normal(size=height(dims, b) + 1), 3)
    H = Hierarchy(dims, b, root=root, level_weights=w)
    D = ref_dense(dims, b, root, w)
    np.testing.assert_array_equal(H.dense(), D)
    x = rng.normal(size=D.shape[1])
    y = rng.normal(size=D.shape[0])
    np.testing.assert_allclose(H.matvec(x), D @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H.rmatvec(y), D.T @ y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H.abs().dense(), np.abs(D))
    np.testing.assert_allclose(H.sqr().dense(), D**2)


def test_every_application_path_is_exercised():
    """The shapes above use each way of ordering a depth: one transposition,
    the same with single cells masked out, and sorting keys (in d ≥ 2 when a
    part above the depth has children of unequal number: the module's rule,
    read from the public structure)."""
    sorted_keys, masks = set(), set()
    for dims, b in CASES:
        H = Hierarchy(dims, b)
        for t in range(H.height):
            uneven = any(None in H.level(u).children for u in range(t))
            sorted_keys.add(len(dims) > 1 and uneven)
            masks.add(H.inner_mask(t) is None)
    assert sorted_keys == {True, False} and masks == {True, False}


@pytest.mark.parametrize("root", [True, False])
def test_levels_describe_the_reference_tree(tree, root, rng):
    """`level(t)` against the literal tree: the grid of parts (every cell in
    one part per depth, single cells carried down), their sizes and children
    per axis, and the rows of the depth's inner nodes; the level operations
    (`part_sums`, `rows_as_parts`, `inner_mask`, `spread_to_children`) agree
    with the matrix's own rows."""
    dims, b = tree
    w = rng.uniform(0.5, 2.0, size=height(dims, b) + 1)
    H = Hierarchy(dims, b, root=root, level_weights=w)
    _, inner = ref_boxes(dims, b, root)
    assert H.first_depth == (0 if root else 1)
    x = rng.normal(size=H.num_cells)
    y = H.matvec(x)
    sums = x.reshape((1, *dims, 1))
    start = H.num_cells
    for t in range(H.height, -1, -1):
        level = H.level(t)
        boxes = [box for box, depth in inner if depth == t]
        assert level.depth == t and level.weight == pytest.approx(w[t])
        assert level.rows == range(level.rows.start, level.rows.start + len(boxes))
        assert sums.shape == (1, *level.parts, 1)
        inner_parts = np.zeros(1, dtype=bool)  # parts of more than one cell
        for a, side in enumerate(dims):
            cuts = [(0, side - 1)]
            for _ in range(t):
                cuts = [p for lo, hi in cuts for p in _axis_parts(lo, hi, b)]
            assert level.parts[a] == len(cuts)
            assert level.part_sizes[a] == tuple(sorted({hi - lo + 1 for lo, hi in cuts}))
            kids = {min(b, hi - lo + 1) for lo, hi in cuts}
            even = kids.pop() if len(kids) == 1 else None
            assert level.children[a] == (1 if t == H.height else even)
            inner_parts = np.logical_or.outer(inner_parts, [hi > lo for lo, hi in cuts])
        inner_parts = inner_parts.reshape(-1)
        mask = H.inner_mask(t)
        if t < H.height and not inner_parts.all():
            np.testing.assert_array_equal(mask, inner_parts)
        else:
            assert mask is None
        if t >= H.first_depth and t < H.height:
            assert len(boxes) == int(inner_parts.sum())
        if boxes:
            grid = H.rows_as_parts(y[None, level.rows.start : level.rows.stop, None], t)
            inside = np.ones(math.prod(level.parts), bool) if mask is None else mask
            np.testing.assert_allclose(
                grid.reshape(-1)[inside] / w[t] ** 2, sums.reshape(-1)[inside]
            )
            assert np.all(grid.reshape(-1)[~inside] == 0)
        if t > 0:
            sums = H.part_sums(sums, t - 1)
        if t < H.height:
            # each child of a depth-t part receives the part's value
            parent = rng.normal(size=(1, *level.parts, 1))
            below = np.zeros((1, *H.level(t + 1).parts, 1))
            H.spread_to_children(below, parent, t)
            np.testing.assert_allclose(H.part_sums(below, t) / parent, _children(H, t))
    rows = [H.level(t).rows for t in range(H.height + 1)]
    assert [r.start for r in rows] == [start, *(r.stop for r in rows[:-1])]
    assert rows[-1].stop == H.num_rows


def _axis_parts(lo: int, hi: int, b: int) -> list[tuple[int, int]]:
    side = hi - lo + 1
    k = min(b, side)
    out, first = [], lo
    for i in range(k):
        size = side // k + (i < side % k)
        out.append((first, first + size - 1))
        first += size
    return out


def _children(H: Hierarchy, t: int) -> np.ndarray:
    """Children of every depth-t part (a grid), from the part sums of ones."""
    ones = np.ones((1, *H.level(t + 1).parts, 1))
    return H.part_sums(ones, t)


def test_level_refuses_depths_outside_the_tree():
    H = Hierarchy(8, 2)
    with pytest.raises(ValueError, match="depth"):
        H.level(4)
    with pytest.raises(ValueError, match="depth"):
        H.level(-1)
    with pytest.raises(TypeError, match="depth"):
        H.level(1.0)  # type: ignore[arg-type]


# -- norms, sensitivity and flags -------------------------------------------------------


@pytest.mark.parametrize("weighted", [False, True])
def test_column_norms_and_sensitivity(tree, weighted, rng):
    dims, b = tree
    w = rng.normal(size=height(dims, b) + 1) if weighted else None
    for root in (True, False):
        H = Hierarchy(dims, b, root=root, level_weights=w)
        D = ref_dense(dims, b, root, w)
        for M, A in ((H, D), (H.T, D.T)):
            for p, E in ((1, np.abs(A)), (2, A**2)):
                truth = E.sum(axis=0)
                np.testing.assert_allclose(M.column_norms(p), truth, rtol=1e-12)
                exact = truth.max() if p == 1 else math.sqrt(truth.max())
                assert M.sensitivity(p) == pytest.approx(exact, rel=1e-12)
                assert M.sensitivity(p) >= exact * (1 - 1e-14)  # never below the truth
            assert M.max_column_nnz() >= int((A != 0).sum(axis=0).max())
        assert H.max_column_nnz() == int((D != 0).sum(axis=0).max())


def test_unweighted_sensitivity_counts_levels(tree):
    dims, b = tree
    h = height(dims, b)
    assert Hierarchy(dims, b).sensitivity() == h + 1
    assert Hierarchy(dims, b, root=False).sensitivity() == max(h, 1)
    assert Hierarchy(dims, b).sensitivity(2) == pytest.approx(math.sqrt(h + 1))


@pytest.mark.parametrize(
    ("weights", "integral", "nonnegative", "binary"),
    [
        (None, True, True, True),
        ([1, 1, 1, 1], True, True, True),
        ([0, 1, 1, 0], True, True, True),
        ([2, 1, 3, 1], True, True, False),
        ([0.5, 1, 1, 1], False, True, False),
        ([1, -1, 1, 1], True, False, False),
    ],
)
def test_flags_follow_the_weights(weights, integral, nonnegative, binary):
    H = Hierarchy(5, 2, level_weights=weights)  # depths 0..3; leaves at 2 and 3
    D = H.dense()
    assert H.is_integral() is integral == bool(np.all(np.round(D) == D))
    assert H.is_nonnegative is nonnegative == bool(np.all(D >= 0))
    assert H.is_binary is binary == bool(np.all((D == 0) | (D == 1)))
    assert (H.abs() is H) is nonnegative
    assert (H.sqr() is H) is binary


def test_unused_weights_do_not_change_flags():
    # Without the root, depth 0 has no row: its weight is never applied.
    H = Hierarchy(8, 2, root=False, level_weights=[-0.5, 1, 1, 1])
    assert H.is_binary and H.is_integral() and H.abs() is H
    assert Hierarchy(8, 2, root=False, level_weights=[-0.5, 1, 1, 1]) == H


def test_zero_weight_levels():
    H = Hierarchy(8, 2, level_weights=[0, 1, 0, 1])
    D = H.dense()
    assert H.max_column_nnz() == int((D != 0).sum(axis=0).max()) == 2
    assert H.T.max_column_nnz() >= int((D != 0).sum(axis=1).max())
    assert H.sensitivity() == 2.0


# -- solving -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dims", "b", "root"),
    [((1000,), 2, True), ((1000,), 16, False), ((33, 31), 2, True), ((30, 40), 7, False)],
)
def test_least_squares_recovers_the_data(dims, b, root, rng):
    H = Hierarchy(dims, b, root=root)
    x = rng.integers(0, 20, size=H.shape[1]).astype(float)
    x_hat = lsmr(H.as_linear_operator(), H.matvec(x), atol=1e-14, btol=1e-14, maxiter=5000)[0]
    np.testing.assert_allclose(x_hat, x, atol=1e-6)


def test_kernel_measures_it_with_its_sensitivity():
    H = Hierarchy(300, 18, root=False)
    x = np.arange(300.0)
    m = ektelo.protect(x, epsilon=1.0, seed=0).laplace(H, eps=0.5)
    assert type(m.query) is Hierarchy and m.query == H and m.query is not H
    assert m.noise_scale >= H.sensitivity() / 0.5
    assert m.answers.shape == (H.shape[0],)


# -- larger trees against the previous form ----------------------------------------------


@pytest.mark.parametrize(
    ("dims", "b", "root"),
    [
        ((4096,), 16, False),
        ((5000,), 2, True),
        ((64, 64), 2, True),
        ((100, 90), 3, True),
        ((81, 27), 3, False),
        ((20, 300), 2, True),
        ((16, 16, 16), 2, True),
    ],
)
def test_larger_trees_match_the_vstack_form(dims, b, root, rng):
    H = Hierarchy(dims, b, root=root)
    old = ref_implicit(dims, b, root)
    assert H.shape == old.shape
    x = rng.normal(size=H.shape[1])
    y = rng.normal(size=H.shape[0])
    np.testing.assert_allclose(H.matvec(x), old.matvec(x), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(H.rmatvec(y), old.rmatvec(y), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(H.column_norms(), old.column_norms())
    assert H.sensitivity() == old.sensitivity()


def test_large_trees_store_only_parameters():
    for dims, b, root in [((2**24,), 2, True), ((2**24,), 16, False), ((4096, 4096), 8, False)]:
        H = Hierarchy(dims, b, root=root)
        arrays = [v for v in vars(H).values() if isinstance(v, np.ndarray)]
        assert arrays == []
        assert len(pickle.dumps(H)) < 10_000
        assert H.sensitivity() == height(dims, b) + root


# -- value semantics and specs -------------------------------------------------------------


@pytest.mark.parametrize(
    "H",
    [
        Hierarchy(10, 3),
        Hierarchy((4, 6), 2, root=False),
        Hierarchy((4, 6), 2, level_weights=[0.25, 0.5, 1.0, 2.0]),
        Hierarchy((3, 2, 2), 2).T,
    ],
    ids=repr,
)
def test_spec_round_trip(H):
    for copy in (rebuild(H), from_json(to_json(H)), from_spec(to_spec(H))):
        assert type(copy) is Hierarchy and copy is not H
        assert copy == H and hash(copy) == hash(H)
        np.testing.assert_array_equal(copy.dense(), H.dense())
    json.loads(to_json(H))  # plain JSON


def test_equality_is_by_parameters():
    assert Hierarchy(8, 2) == Hierarchy((8,), np.int64(2), True)
    assert Hierarchy(8, 2, level_weights=[1, 1, 1, 1]) == Hierarchy(8, 2)  # all ones
    assert Hierarchy(8, 2).level_weights is None
    assert Hierarchy(8, 2) != Hierarchy(8, 2, root=False)
    assert Hierarchy(8, 2) != Hierarchy(8, 4)
    assert Hierarchy(9, 3) != Hierarchy(9, 3, level_weights=[1, 2, 1])
    assert Hierarchy((2, 4), 2) != Hierarchy((4, 2), 2)
    assert Hierarchy((2, 4), 2, transposed=True) == Hierarchy((2, 4), 2).T
    assert Hierarchy(8, 2) == Hierarchy(8, 2).T.T


def test_pickle_drops_caches(rng):
    H = Hierarchy(1000, 2)  # uneven parts: the boundaries at one depth are cached
    fresh = pickle.dumps(Hierarchy(1000, 2))
    y = rng.normal(size=H.shape[0])
    before = H.rmatvec(y)
    assert pickle.dumps(H) == fresh  # the parameters only, not what was cached
    copy = pickle.loads(pickle.dumps(H))
    np.testing.assert_array_equal(copy.rmatvec(y), before)


def test_selection_strategies_are_hierarchies():
    assert sel.h2(20) == Hierarchy(20, 2)
    assert sel.hb(300) == Hierarchy(300, sel.hb_branching(300), root=False)
    assert sel.hb((16, 16)) == Hierarchy((16, 16), 4, root=False)
    assert sel.hierarchy((9, 7), 3, root=False) == Hierarchy((9, 7), 3, root=False)
    assert sel.quadtree((5, 6), budget="uniform") == Hierarchy((5, 6), 2)
    w = np.array(sel.quadtree((5, 6)).level_weights)
    assert w.sum() == pytest.approx(1.0) and np.all(np.diff(w) > 0)
    assert sel.hierarchy(5, 5, root=False) == Identity(5)  # no inner node measured
    Q = sel.quadtree((4096, 4096))
    assert isinstance(Q, Hierarchy) and Q.sensitivity() == pytest.approx(1.0)
    assert Q.shape == (sum(4**t for t in range(13)), 4096**2)


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((0, 2), {}, ValueError),
        (((), 2), {}, ValueError),
        (((3, 0), 2), {}, ValueError),
        (((2.5,), 2), {}, ValueError),
        ((True, 2), {}, ValueError),
        (("ab", 2), {}, ValueError),
        ((8, 1), {}, ValueError),
        ((8, 2.0), {}, TypeError),
        ((8, True), {}, TypeError),
        ((8, 2), {"root": 1}, TypeError),
        ((8, 2), {"transposed": "no"}, TypeError),
        ((8, 2), {"level_weights": [1, 1, 1]}, ValueError),
        ((8, 2), {"level_weights": [1, 1, 1, np.nan]}, ValueError),
        ((8, 2), {"level_weights": [1, 1, 1, np.inf]}, ValueError),
        ((8, 2), {"level_weights": ["a", "b", "c", "d"]}, ValueError),
        ((8, 2), {"level_weights": [[1, 1], [1, 1]]}, ValueError),
        ((8, 2), {"level_weights": [True, True, True, True]}, ValueError),
    ],
)
def test_bad_arguments_are_refused(args, kwargs, error):
    with pytest.raises(error):
        Hierarchy(*args, **kwargs)


def _spec(**changes):
    spec = to_spec(Hierarchy((4, 4), 2, level_weights=[1, 2, 3]))
    spec["args"].update(changes)
    return spec


@pytest.mark.parametrize(
    "spec",
    [
        _spec(domain_shape=[4.0, 4.0]),
        _spec(domain_shape=[]),
        _spec(domain_shape=[True, True]),
        _spec(branching=2.0),
        _spec(branching=True),
        _spec(branching=1),
        _spec(root=1),
        _spec(transposed="false"),
        _spec(level_weights=[1, 2]),
        _spec(level_weights="abc"),
        _spec(level_weights=[[1, 2, 3]]),
        _spec(level_weights=[1, 2, float("nan")]),
        {"type": "Hierarchy", "args": {"domain_shape": [4], "branching": 2}},
        {"type": "Hierarchy", "args": [4, 2]},
    ],
)
def test_malformed_specs_are_refused(spec):
    with pytest.raises((ValueError, TypeError)):
        from_spec(spec)


def test_materialising_huge_trees_is_refused():
    H = Hierarchy(2**24, 2)
    with pytest.raises(MemoryError):
        H.dense()
    with pytest.raises(MemoryError):
        H.sparse()


# -- random trees (hypothesis) -------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    dims=st.lists(st.integers(1, 12), min_size=1, max_size=3).filter(lambda d: math.prod(d) <= 400),
    b=st.integers(2, 6),
    root=st.booleans(),
    weighted=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_trees_match_the_reference(dims, b, root, weighted, seed):
    rng = np.random.default_rng(seed)
    w = np.round(rng.normal(size=height(dims, b) + 1), 2) if weighted else None
    H = Hierarchy(tuple(dims), b, root=root, level_weights=w)
    D = ref_dense(tuple(dims), b, root, w)
    np.testing.assert_array_equal(H.dense(), D)
    x = rng.normal(size=D.shape[1])
    y = rng.normal(size=D.shape[0])
    np.testing.assert_allclose(H.matvec(x), D @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H.rmatvec(y), D.T @ y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H.column_norms(1), np.abs(D).sum(axis=0), rtol=1e-12)
    assert H.sensitivity(1) >= np.abs(D).sum(axis=0).max() * (1 - 1e-14)
