"""Query selection operators (paper §5.3; constructions of §7.5).

Every function here is a **Public** operator: pure client code that reads only
public facts (domain shapes, workloads, already released noisy answers) and
returns the strategy — an implicit `EMatrix` over the flattened (C-order)
data vector — that a plan then measures with the kernel's Vector Laplace
operator. Nothing here sees private data or spends budget; an `eps` argument,
where present, only sizes a grid and is never charged.

Hierarchies are `Hierarchy` matrices (§7.5's "Union(Identity,
Product(Sparse, Prefix))", stored by the tree's parameters and applied level
by level); grids are `RangeQueries`, stored by their corners. No strategy is
materialised.

Operators and their sources:

* `identity`, `total`, `prefix`, `workload`, `marginal`, `marginals`.
* `h2` — binary hierarchy (Hay, Rastogi, Miklau & Suciu, PVLDB 2010).
* `hb` — hierarchy with the branching factor of Qardaji, Yang & Li
  (PVLDB 2013, "Understanding hierarchical methods ..."); `hb_branching`.
* `hierarchy` — the general b-ary (or b×…×b-ary) tree both are built from.
* `wavelet` — Privelet's Haar strategy (Xiao, Wang & Gehrke, ICDE 2010).
* `quadtree` — Cormode, Procopiuc, Srivastava, Shen & Yu (ICDE 2012).
* `uniform_grid`, `ag_first_level`, `ag_second_level`, `adaptive_grid` —
  UniformGrid and AdaptiveGrid (Qardaji, Yang & Li, ICDE 2013).
* `stripe` — a 1-D strategy on one attribute ⊗ Identity on the rest (§9.2).
* `network_marginals` — the marginals a Bayesian network needs (PrivBayes,
  Zhang et al., TODS 2017): those of its maximal cliques.
* `workload_row` — one query of a workload as a one-row matrix (MWEM's
  measurement of the query it selected); `augmented_row` — that query plus
  the dyadic ranges disjoint from it (εktelo's augmented MWEM, §9.1).
* `greedy_h` (and `greedy_h_many`, one call per piece of a domain) — DAWA's
  GreedyH (Li, Hay & Miklau, PVLDB 2014): a hierarchy of 1-D intervals with
  weights chosen greedily, bottom-up, for the workload.
* `greedy_h_on_partition` — GreedyH on a partition's groups, along DAWA's
  1-D order (the Hilbert curve in 2-D): DAWA's second step
  (`interval_reduced_ranges`: the reduced workload it weighs after
  workload-based reduction, counted from the ranges' corners);
  `greedy_h_stripes` — the same on every stripe of a domain, as one matrix
  (DAWA-Striped, §9.2), from `stripe_workloads` (the workload restricted to
  each stripe) and `stripe_union` (the stripes' strategies on the domain).
* `hdmm` — HDMM (McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018):
  p-Identity strategies optimised for the workload (OPT_0), per attribute
  for Kronecker workloads and unions of them (OPT_⊗), weighted marginals for
  marginal workloads (OPT_M); memoised.
  Both read the workload only through its structure and its Gram
  (`EMatrix.gram`) and return strategies of L1 sensitivity 1; GreedyH's
  algorithm is documented in the private module `_greedy_h` (its exact error
  without the matrix: `greedy_h_error`), HDMM's in the public modules
  `ektelo.operators.hdmm` (OPT_⊗, OPT_M's closed form, `optimise` with the
  error and the winning method) and `ektelo.operators.hdmm_opt0` (OPT_0's
  objective, gradient and optimiser).

How trees split a domain that is not a power of the branching factor b:
every node is cut along each axis into min(b, side) contiguous parts whose
sizes differ by at most one, the larger parts first (so level t holds nodes
of side ⌊n/bᵗ⌋ or ⌈n/bᵗ⌉). A node of a single cell is a leaf and is not cut
again, so every cell is a leaf exactly once, the leaves form the Identity
block, and the tree height is ⌈log_b n⌉ for the longest axis — the same as
padding to bʰ would give, without queries over padding. Parts are balanced
rather than aligned to a padded power of b (DPBench pads the data instead).
Rows: the cells in C order, then the inner nodes breadth first (see
`ektelo.matrix.Hierarchy`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from .. import _validate as check
from .. import workload as _workload
from ..matrix import (
    Dense,
    EMatrix,
    Embedding,
    Hierarchy,
    Identity,
    Kronecker,
    Prefix,
    Product,
    RangeQueries,
    Total,
    VStack,
    Wavelet,
    Weighted,
    rebuild,
)
from ._greedy_h import greedy_h, greedy_h_error, greedy_h_many
from ._greedy_h_groups import (
    greedy_h_on_partition,
    greedy_h_stripes,
    interval_reduced_ranges,
    stripe_union,
    stripe_workloads,
)
from .hdmm import hdmm

__all__ = [
    "adaptive_grid",
    "ag_first_level",
    "ag_second_level",
    "augmented_row",
    "greedy_h",
    "greedy_h_error",
    "greedy_h_many",
    "greedy_h_on_partition",
    "greedy_h_stripes",
    "h2",
    "hb",
    "hb_branching",
    "hdmm",
    "hierarchy",
    "identity",
    "interval_reduced_ranges",
    "marginal",
    "marginals",
    "network_marginals",
    "prefix",
    "quadtree",
    "stripe",
    "stripe_union",
    "stripe_workloads",
    "total",
    "uniform_grid",
    "wavelet",
    "workload",
    "workload_row",
]

Shape = int | Sequence[int]
GridRule = Literal["dpbench", "paper"]


# -- argument checks ---------------------------------------------------------
def _dims_2d(shape: Shape, operator: str) -> tuple[int, int]:
    dims = check.shape(shape)
    if len(dims) != 2:
        raise ValueError(f"{operator} is defined for 2-D domains; got shape {dims}")
    return dims[0], dims[1]


def _count(value: Any, name: str) -> float:
    """A public or noisy record count: finite; negative noisy counts mean 0."""
    return max(check.real(value, name), 0.0)


def _rule(rule: str) -> GridRule:
    if rule not in ("dpbench", "paper"):
        raise ValueError(f"rule must be 'dpbench' or 'paper', got {rule!r}")
    return "paper" if rule == "paper" else "dpbench"


# -- simple strategies ---------------------------------------------------------
def identity(shape: Shape) -> EMatrix:
    """One query per cell (the Identity plan's strategy, Dwork et al. 2006)."""
    return Identity(math.prod(check.shape(shape)))


def total(shape: Shape) -> EMatrix:
    """The single query counting every record."""
    return Total(math.prod(check.shape(shape)))


def prefix(n: Shape) -> EMatrix:
    """All prefix queries [0, j] of a 1-D domain (the CDF plan of §2)."""
    dims = check.shape(n, "n")
    if len(dims) != 1:
        raise ValueError(f"prefix is defined for 1-D domains; got shape {dims}")
    return Prefix(dims[0])


def workload(W: EMatrix, shape: Shape | None = None) -> EMatrix:
    """The workload itself as the strategy, checked and rebuilt.

    `W` must be built from ektelo's own matrix classes (anything else raises
    `TypeError`: the kernel would refuse it later anyway) and, when `shape` is
    given, must have one column per cell of that domain.
    """
    if not isinstance(W, EMatrix):
        raise TypeError(f"W must be an ektelo matrix (EMatrix), got {type(W).__name__}")
    if shape is not None:
        n = math.prod(check.shape(shape))
        if W.shape[1] != n:
            raise ValueError(f"W has {W.shape[1]} columns; the domain {shape!r} has {n} cells")
    return rebuild(W)


def marginal(shape: Shape, attrs: Sequence[int]) -> EMatrix:
    """The marginal on axes `attrs`: Identity on those, Total elsewhere (§7.5)."""
    return _workload.marginal(shape, attrs)


def marginals(shape: Shape, k: int) -> EMatrix:
    """All k-way marginals, a VStack of Kronecker products (Example 4)."""
    return _workload.marginals(shape, k)


# -- trees ---------------------------------------------------------------------
# A set of boxes: per-axis arrays of lower and of upper corners (inclusive).
Boxes = tuple[list[np.ndarray], list[np.ndarray]]


def _split_axis(lo: list[np.ndarray], hi: list[np.ndarray], axis: int, branching: int) -> Boxes:
    """Cut every box along `axis` into min(branching, side) near-equal parts,
    larger parts first; children stay grouped by parent, in order."""
    side = hi[axis] - lo[axis] + 1
    if side.size == 0 or side.max() == 1:
        return lo, hi
    reps: int | np.ndarray
    if side.min() == side.max():  # one side length: a broadcast, no gathers
        reps = min(int(side[0]), branching)
        q, r = divmod(int(side[0]), reps)
        j = np.arange(reps, dtype=np.int64)
        offset = j * q + np.minimum(j, r)
        last = offset + q + (j < r) - 1
        new_lo = (lo[axis][:, None] + offset).reshape(-1)
        new_hi = (lo[axis][:, None] + last).reshape(-1)
    else:
        reps = np.minimum(side, branching)
        qs, rs = np.divmod(side, reps)
        owner = np.repeat(np.arange(side.size), reps)
        j = np.arange(owner.size, dtype=np.int64) - (np.cumsum(reps) - reps)[owner]
        q_o, r_o = qs[owner], rs[owner]
        new_lo = lo[axis][owner] + j * q_o + np.minimum(j, r_o)
        new_hi = new_lo + q_o + (j < r_o) - 1
    return (
        [new_lo if i == axis else np.repeat(x, reps) for i, x in enumerate(lo)],
        [new_hi if i == axis else np.repeat(x, reps) for i, x in enumerate(hi)],
    )


def _select(boxes: Boxes, keep: np.ndarray) -> Boxes:
    return [x[keep] for x in boxes[0]], [x[keep] for x in boxes[1]]


class _Tree(NamedTuple):
    """A tree grown from the whole domain; index t of each list is depth t."""

    inner: list[Boxes]  # nodes of more than one cell
    leaves: list[Boxes | None]  # single-cell nodes (None unless kept)
    leaf_counts: list[int]  # number of single-cell nodes

    @property
    def height(self) -> int:
        return len(self.inner) - 1

    @property
    def truncated(self) -> bool:
        """True when nodes of several cells are left at the deepest level."""
        return self.inner[-1][0][0].size > 0


def _grow(
    dims: tuple[int, ...], branching: int, max_depth: int | None = None, keep_leaves: bool = False
) -> _Tree:
    """Grow the tree level by level, vectorised over the nodes of a level.

    Unless `keep_leaves`, a node whose sides are all ≤ `branching` is not
    expanded — its children are exactly its cells — so the work and memory
    are O(number of inner nodes), not O(number of cells).
    """
    lo = [np.zeros(1, dtype=np.int64) for _ in dims]
    hi = [np.array([s - 1], dtype=np.int64) for s in dims]
    none: Boxes = ([x[:0] for x in lo], [x[:0] for x in hi])
    if math.prod(dims) == 1:
        return _Tree([none], [(lo, hi) if keep_leaves else None], [1])
    tree = _Tree([(lo, hi)], [none if keep_leaves else None], [0])
    while lo[0].size and (max_depth is None or tree.height < max_depth):
        cells_in_small = 0
        if not keep_leaves:
            sides = [h - l + 1 for l, h in zip(lo, hi, strict=True)]
            small = np.logical_and.reduce([s <= branching for s in sides])
            if small.any():
                cells_in_small = int(np.prod([s[small] for s in sides], axis=0).sum())
                lo, hi = _select((lo, hi), ~small)
        for axis in range(len(dims)):
            lo, hi = _split_axis(lo, hi, axis, branching)
        single = np.logical_and.reduce([l == h for l, h in zip(lo, hi, strict=True)])
        tree.leaf_counts.append(int(single.sum()) + cells_in_small)
        tree.leaves.append(_select((lo, hi), single) if keep_leaves else None)
        if single.any():
            lo, hi = _select((lo, hi), ~single)
        tree.inner.append((lo, hi))
    return tree


def _union(dims: tuple[int, ...], nodes: list[Boxes]) -> EMatrix:
    """The range queries of `nodes` in order (Identity if they are all the cells)."""
    lo = np.stack([np.concatenate([b[0][a] for b in nodes]) for a in range(len(dims))], axis=1)
    hi = np.stack([np.concatenate([b[1][a] for b in nodes]) for a in range(len(dims))], axis=1)
    n = math.prod(dims)
    if lo.shape[0] == n and np.array_equal(lo, hi):
        return Identity(n)
    return RangeQueries(dims, lo, hi)


def _hierarchy(dims: tuple[int, ...], branching: int, root: bool) -> EMatrix:
    """The complete tree (root optional): the implicit `Hierarchy`, or just
    `Identity` when no node but the cells is measured."""
    H = Hierarchy(dims, branching, root=root)
    return Identity(H.num_cells) if H.num_rows == H.num_cells else H


def hierarchy(shape: Shape, branching: int, *, root: bool = True) -> EMatrix:
    """Every node of a balanced tree over the domain, down to single cells.

    Each node is cut into `branching` parts along every axis (a b×…×b-ary tree
    in d dimensions; see the module notes for uneven sizes). The result is the
    implicit `Hierarchy(shape, branching, root=root)` — the N cells, then the
    internal nodes top-down — or just `Identity` when there are no internal
    nodes. With `root=False` the root (the total) is left out. L1 sensitivity
    = the number of levels measured: ⌈log_b max(shape)⌉ + 1 with the root,
    one less without.
    """
    return _hierarchy(check.shape(shape), check.integer(branching, "branching", minimum=2), root)


def h2(shape: Shape) -> EMatrix:
    """H2 (Hay et al., PVLDB 2010): every node of a binary tree, root to cells.

    In d dimensions each node has up to 2^d children (for 2-D this is the
    uniform-budget quadtree). Sensitivity ⌈log₂ max(shape)⌉ + 1, the number of
    levels including the root.
    """
    return hierarchy(shape, 2, root=True)


def _int_height(n: int, b: int) -> int:
    """The least h with bʰ ≥ n (exact integers, unlike ⌈log(n, b)⌉ in floats)."""
    h, reach = 0, 1
    while reach < n:
        reach *= b
        h += 1
    return h


def _least_base(n: int, h: int) -> int:
    """The least integer b ≥ 2 with bʰ ≥ n."""
    b = max(2, round(n ** (1.0 / h)))
    while b > 2 and (b - 1) ** h >= n:
        b -= 1
    while b**h < n:
        b += 1
    return b


def _argmin_branching(n: int, cost: Callable[[int, int], float]) -> int | None:
    """The least b in [2, n] minimising cost(b, ⌈log_b n⌉); None when n < 2.

    At fixed height both published costs increase with b, so the minimiser is
    the least b reaching each height: O(log n) candidates instead of n.
    """
    best: tuple[float, int] | None = None
    for h in range(1, n.bit_length() + 1):
        b = _least_base(n, h)
        if b > n:
            continue
        key = (cost(b, _int_height(n, b)), b)
        if best is None or key < best:
            best = key
    return None if best is None else best[1]


def hb_branching(shape: Shape) -> int | None:
    """The branching factor HB uses on `shape` (Qardaji, Yang & Li, PVLDB 2013).

    1-D, n cells: the b in [2, n] minimising their range-query variance
    estimate (Eq. 3 of the paper, as used by DPBench and εktelo)
        V(b) = (b − 1)·h³ − 2(b + 1)·h²/3,   h = ⌈log_b n⌉,
    e.g. b = 16 for n = 256, 4096, 65536 or 2²⁴; n ≤ 128 gives b = n (a flat
    histogram). 2-D, N cells: with n = ⌊√N⌋, the b in [2, n] minimising the
    estimate of §5.1 (as used by DPBench's HB2D)
        V₂(b) = b·(n − 1)·h²,   h = ⌈log_b n⌉,
    e.g. b = 7 for 256×256, 8 for 4096×4096. Ties go to the least b. Heights
    are exact integers (DPBench's floating-point log overstates h when n is an
    exact power such as 125 = 5³, which changes its 2-D choice for sides 125
    and 216). None for a single cell.
    """
    dims = check.shape(shape)
    if len(dims) == 1:
        return _argmin_branching(dims[0], lambda b, h: (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3)
    if len(dims) == 2:
        side = math.isqrt(dims[0] * dims[1])
        return _argmin_branching(side, lambda b, h: b * (side - 1) * h**2)
    raise ValueError(
        f"HB is defined for 1-D and 2-D domains (Qardaji et al. find a flat histogram "
        f"better from 3 dimensions on); got shape {dims}"
    )


def hb(shape: Shape) -> EMatrix:
    """HB (Qardaji, Yang & Li, PVLDB 2013): the tree with `hb_branching(shape)`.

    1-D: a b-ary tree; 2-D: a b×b-ary tree (each node cut into b parts per
    axis). The root (total count) is *not* measured: the variance estimate
    behind b counts the h = ⌈log_b n⌉ levels below it, and εktelo's HB (1-D
    and 2-D) and DPBench's HB2D leave it out (DPBench's 1-D HB alone measures
    it, at ε/(h + 1) per level). Sensitivity h (the longest axis in 2-D). On
    small 1-D domains (n ≤ 128) the rule picks b = n and HB is the Identity.
    """
    dims = check.shape(shape)
    b = hb_branching(dims)
    if b is None:
        return Identity(math.prod(dims))
    return _hierarchy(dims, b, False)


def quadtree(
    shape: Shape,
    *,
    budget: Literal["geometric", "uniform"] = "geometric",
    max_height: int | None = None,
) -> EMatrix:
    """QuadTree (Cormode et al., ICDE 2012): a 2×2-ary tree over a 2-D domain.

    All levels from the root down to single cells (DPBench's choice: no
    height cap; `max_height` truncates the tree below that depth, leaving
    blocks as leaves and the strategy rank-deficient). A node with one row or
    one column is cut in two along the other axis only.

    `budget="geometric"` (the published default) reproduces Cormode et al.'s
    geometric budget split, leaves getting the most: the rows of depth t are
    weighted wₜ = 2^(t/3)·(2^(1/3) − 1)/(2^((h+1)/3) − 1), Σwₜ = 1, so one
    Vector Laplace call with budget ε gives level t noise of scale 1/(wₜ·ε),
    exactly εₜ = wₜ·ε as in the paper; sensitivity 1. `budget="uniform"` is
    εktelo's original variant: unweighted rows, sensitivity h + 1.

    The whole tree is the implicit `Hierarchy(shape, 2, level_weights=w)`
    (a leaf's row weighted by the depth where its cell became a leaf); a tree
    truncated by `max_height` is a VStack of per-level range queries.
    """
    dims = _dims_2d(shape, "quadtree")
    if max_height is not None:
        max_height = check.integer(max_height, "max_height", minimum=0)
    if budget not in ("geometric", "uniform"):
        raise ValueError(f"budget must be 'geometric' or 'uniform', got {budget!r}")
    if math.prod(dims) == 1:
        return Identity(1)
    height = _int_height(max(dims), 2)
    if max_height is None or max_height >= height:  # the whole tree, implicit
        if budget == "uniform":
            return _hierarchy(dims, 2, True)
        return Hierarchy(dims, 2, level_weights=_geometric_weights(height))
    # A truncated tree: its deepest nodes are blocks, each level listed with
    # its (block or single-cell) leaves as range queries.
    tree = _grow(dims, 2, max_depth=max_height)
    if tree.height == 0:  # max_height=0: the root alone
        return _union(dims, tree.inner)
    if any(tree.leaf_counts):
        tree = _grow(dims, 2, max_depth=max_height, keep_leaves=True)
    levels: list[EMatrix] = []
    for depth in range(tree.height + 1):
        nodes = [tree.inner[depth]]
        leaves = tree.leaves[depth]
        if leaves is not None:
            nodes.append(leaves)
        levels.append(_union(dims, nodes))
    if budget == "uniform":
        return VStack(levels)
    weights = _geometric_weights(tree.height)
    return VStack([Weighted(M, w) for w, M in zip(weights, levels, strict=True)])


def _geometric_weights(height: int) -> list[float]:
    """Cormode et al.'s geometric split over depths 0..height, summing to 1."""
    scale = (2 ** (1 / 3) - 1) / (2 ** ((height + 1) / 3) - 1)
    return [2 ** (t / 3) * scale for t in range(height + 1)]


# -- wavelets --------------------------------------------------------------------
def _haar_1d(n: int) -> EMatrix:
    size = 1 << (n - 1).bit_length()
    if size == n:
        return Wavelet(n)
    # Privelet pads the domain with empty cells up to a power of two: the
    # strategy is Wavelet(size) applied to x embedded by zeros, i.e. the first
    # n columns of Wavelet(size). Every column keeps 1 + log₂(size) entries ±1
    # (priced from the structure, without SciPy: `Embedding`).
    return Product(Wavelet(size), Embedding(size, n))


def wavelet(shape: Shape) -> EMatrix:
    """Privelet's Haar strategy (Xiao, Wang & Gehrke, ICDE 2010).

    1-D: the unnormalised Haar matrix `Wavelet(n)` (the total, then ±1 on the
    halves of every dyadic interval); Privelet's per-coefficient noise λ/W(c)
    on normalised coefficients is exactly uniform Laplace noise on these
    unnormalised rows. A size that is not a power of two is padded with empty
    cells to the next power of two (the paper's construction):
    `Product(Wavelet(2^k), embedding)`; rows over padding alone are zero.
    d-D: the Kronecker product of the 1-D matrices, Privelet's multi-dimensional
    (ordinal) transform. Sensitivity Π(1 + ⌈log₂ nᵢ⌉).
    """
    factors = [_haar_1d(s) for s in check.shape(shape)]
    return factors[0] if len(factors) == 1 else Kronecker(factors)


# -- grids (Qardaji, Yang & Li, ICDE 2013) -------------------------------------------
def _cuts_by_width(side: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    starts = np.arange(0, side, width, dtype=np.int64)
    return starts, np.minimum(starts + width - 1, side - 1)


def _cuts_by_parts(side: int, parts: int) -> tuple[np.ndarray, np.ndarray]:
    parts = min(parts, side)
    q, r = divmod(side, parts)
    sizes = q + (np.arange(parts) < r)
    ends = np.cumsum(sizes, dtype=np.int64) - 1
    return ends - sizes + 1, ends


def _grid_cells(
    rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Corners of the cells of a grid, in C order (row cut, then column cut)."""
    grid = np.meshgrid(np.arange(rows[0].size), np.arange(cols[0].size), indexing="ij")
    i, j = grid[0].reshape(-1), grid[1].reshape(-1)
    lo = np.stack([rows[0][i], cols[0][j]], axis=1)
    hi = np.stack([rows[1][i], cols[1][j]], axis=1)
    return lo, hi


def _floor_at_least_1(x: float) -> int:
    """DPBench's `int(x - 1) + 1` on x ≥ 0: ⌊x⌋ for x ≥ 1, else 1."""
    return max(1, math.floor(x))


def _cuts_paper(dims: tuple[int, int], per_side: int) -> tuple[Any, Any]:
    """`per_side` near-equal parts on each axis (capped at the side)."""
    return _cuts_by_parts(dims[0], per_side), _cuts_by_parts(dims[1], per_side)


def _cuts_dpbench(dims: tuple[int, int], cells: float) -> tuple[Any, Any]:
    """DPBench's grid of about `cells` cells: square cells of side
    ⌊√(n₁n₂/cells)⌋ ≥ 1, clipped at the domain's edges (one cell if cells ≤ 0)."""
    n1, n2 = dims
    width = max(n1, n2) if cells <= 0 else _floor_at_least_1(math.sqrt(n1 * n2 / cells))
    return _cuts_by_width(n1, width), _cuts_by_width(n2, width)


def uniform_grid(
    shape: Shape, total: float, eps: float, *, c: float = 10.0, rule: GridRule = "dpbench"
) -> EMatrix:
    """UniformGrid (Qardaji, Yang & Li, ICDE 2013): the cells of one grid.

    The paper's guideline is an m×m grid with m = √(N·ε/c), c = 10, where N
    is the number of records — an input here (public, or a noisy estimate:
    the plan decides) — and ε the budget the grid will be measured with
    (used for sizing only, never spent).

    `rule="dpbench"` (default) reproduces DPBench's and εktelo's sizing, with
    which published comparisons were run: square cells of side
    w = ⌊√(n₁n₂·c/(N·ε))⌋, at least 1 (DPBench's `int(x - 1) + 1`), clipped at
    the domain's edges. On 256×256 that is the Identity as soon as
    N·ε > 1.6384·10⁵. `rule="paper"`: m = ⌈√(N·ε/c)⌉ near-equal parts per
    axis, capped at the side (Identity once N·ε ≥ c·side²).

    Returns `Identity` when every cell is a single cell, else `RangeQueries`
    (cells in C order); sensitivity 1 (the cells partition the domain).
    """
    dims = _dims_2d(shape, "uniform_grid")
    n_records = _count(total, "total")
    eps = check.positive(eps, "eps")
    c = check.positive(c, "c")
    rule = _rule(rule)
    cells = n_records * eps / c
    if rule == "paper":
        cuts = _cuts_paper(dims, max(1, math.ceil(math.sqrt(cells))))
    else:
        cuts = _cuts_dpbench(dims, cells)
    lo, hi = _grid_cells(*cuts)
    if lo.shape[0] == dims[0] * dims[1]:
        return Identity(dims[0] * dims[1])
    return RangeQueries(dims, lo, hi)


def ag_first_level(
    shape: Shape, total: float, eps: float, *, c: float = 10.0, rule: GridRule = "dpbench"
) -> RangeQueries:
    """AdaptiveGrid's level-1 grid (Qardaji, Yang & Li, ICDE 2013).

    m₁ = max(10, ⌈√(N·ε/c)/4⌉) cells per side with c = 10, N the (public or
    estimated) record count and ε the *whole* AG budget (sizing only; the
    plan measures this grid with α·ε). `rule="dpbench"` sizes like DPBench:
    m₁ = max(10, ⌊√(N·ε/c)/4⌋) and square cells of side ⌊√(n₁n₂)/m₁⌋ ≥ 1;
    `rule="paper"` cuts each axis into m₁ near-equal parts. Always returns
    `RangeQueries` (cells in C order), the input of `ag_second_level`.
    """
    dims = _dims_2d(shape, "ag_first_level")
    n_records = _count(total, "total")
    eps = check.positive(eps, "eps")
    c = check.positive(c, "c")
    rule = _rule(rule)
    root = math.sqrt(n_records * eps / c) / 4
    m1 = max(10, math.ceil(root) if rule == "paper" else _floor_at_least_1(root))
    cuts = _cuts_paper(dims, m1) if rule == "paper" else _cuts_dpbench(dims, float(m1) ** 2)
    lo, hi = _grid_cells(*cuts)
    return RangeQueries(dims, lo, hi)


def _level1_cells(dims: tuple[int, int], level1: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(level1, RangeQueries) or level1.transposed:
        raise TypeError(
            "level1_queries must be the RangeQueries returned by ag_first_level, "
            f"got {type(level1).__name__}"
        )
    if level1.domain_shape != dims:
        raise ValueError(f"level-1 grid is over {level1.domain_shape}, expected the domain {dims}")
    lower, upper = level1.lower, level1.upper
    # A grid: its row intervals tile the rows, its column intervals tile the
    # columns, and the cells are each (row, column) pair once — O(m log m),
    # without touching the N cells of the domain.
    axes: list[tuple[int, np.ndarray]] = []  # per axis: (intervals, each cell's interval)
    for a in range(2):
        spans, which = np.unique(
            np.column_stack([lower[:, a], upper[:, a]]), axis=0, return_inverse=True
        )
        tiled = spans[0, 0] == 0 and spans[-1, 1] == dims[a] - 1
        if not (tiled and np.array_equal(spans[1:, 0], spans[:-1, 1] + 1)):
            axes = []
            break
        axes.append((spans.shape[0], which.reshape(-1)))
    if (
        not axes
        or lower.shape[0] != axes[0][0] * axes[1][0]
        or (np.unique(axes[0][1] * axes[1][0] + axes[1][1]).size != lower.shape[0])
    ):
        raise ValueError("level-1 queries must be a grid of disjoint cells covering the domain")
    return lower, upper


def ag_second_level(
    shape: Shape,
    level1_queries: RangeQueries,
    level1_noisy_counts: Any,
    eps: float,
    alpha: float = 0.5,
    *,
    c2: float = 5.0,
    rule: GridRule = "dpbench",
) -> RangeQueries:
    """AdaptiveGrid's level-2 grids: the union over level-1 cells.

    Public: it reads only the released noisy level-1 counts. A level-1 cell
    with noisy count N' gets an m₂×m₂ grid, m₂ = ⌈√(N'·(1 − α)·ε/c₂)⌉, with
    c₂ = c/2 = 5 and α = 0.5 the published defaults (ε the whole AG budget;
    the plan measures these cells with (1 − α)·ε). A non-positive N' or
    m₂ ≤ 1 leaves the cell whole (a 1×1 grid, as DPBench does). The level-2
    cells partition the domain: sensitivity 1. `rule="dpbench"`:
    m₂ = max(1, ⌊√(N'·(1 − α)·ε/c₂)⌋) and square sub-cells of side
    ⌊√(area)/m₂⌋ ≥ 1; `rule="paper"`: m₂ near-equal parts per axis.
    Cells are listed level-1 cell by level-1 cell, each in C order.
    """
    dims = _dims_2d(shape, "ag_second_level")
    lower, upper = _level1_cells(dims, level1_queries)
    counts = np.asarray(level1_noisy_counts, dtype=np.float64).reshape(-1)
    if counts.size != lower.shape[0]:
        raise ValueError(f"got {counts.size} noisy counts for {lower.shape[0]} level-1 cells")
    if not np.all(np.isfinite(counts)):
        raise ValueError("level-1 noisy counts must be finite")
    eps = check.positive(eps, "eps")
    alpha = check.positive(alpha, "alpha")
    if alpha >= 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    c2 = check.positive(c2, "c2")
    rule = _rule(rule)
    root = np.sqrt(np.maximum(counts, 0.0) * (1 - alpha) * eps / c2)
    m2 = np.maximum(1, np.ceil(root) if rule == "paper" else np.floor(root)).astype(np.int64)
    # Level-1 cells of one size and one m₂ share a sub-grid: cut each kind
    # once, then place the copies at their cells' corners.
    kinds, kind_of = np.unique(
        np.column_stack([upper - lower + 1, m2]), axis=0, return_inverse=True
    )
    kind_of = kind_of.reshape(-1)
    shapes_lo, shapes_hi = [], []
    for rows, cols, m in kinds.tolist():
        cuts = (
            _cuts_paper((rows, cols), m) if rule == "paper" else _cuts_dpbench((rows, cols), m**2)
        )
        lo, hi = _grid_cells(*cuts)
        shapes_lo.append(lo)
        shapes_hi.append(hi)
    per_kind = np.array([lo.shape[0] for lo in shapes_lo])
    kind_start = np.cumsum(per_kind) - per_kind
    per_cell = per_kind[kind_of]
    first = np.cumsum(per_cell) - per_cell
    take = np.arange(int(per_cell.sum())) - np.repeat(first - kind_start[kind_of], per_cell)
    offset = np.repeat(lower, per_cell, axis=0)
    return RangeQueries(
        dims,
        np.concatenate(shapes_lo)[take] + offset,
        np.concatenate(shapes_hi)[take] + offset,
    )


def adaptive_grid(
    shape: Shape,
    level1: Any,
    eps: float,
    alpha: float = 0.5,
    *,
    c2: float = 5.0,
    rule: GridRule = "dpbench",
) -> RangeQueries:
    """`ag_second_level` from the level-1 `Measurement` (its query and answers)."""
    query = getattr(level1, "query", None)
    answers = getattr(level1, "answers", None)
    if query is None or answers is None:
        raise TypeError(
            "level1 must be the Measurement of the level-1 grid (with .query and .answers)"
        )
    return ag_second_level(shape, query, answers, eps, alpha, c2=c2, rule=rule)


# -- composition -------------------------------------------------------------------
def stripe(shape: Shape, axis: int, strategy_1d: EMatrix | Callable[[int], EMatrix]) -> EMatrix:
    """A 1-D strategy on attribute `axis` ⊗ Identity on every other (§9.2).

    The same 1-D queries on every stripe (every fixed value of the other
    attributes), as one Kronecker product — the HB-Striped_kron plan's
    StripeSelect. `strategy_1d` is a matrix with `shape[axis]` columns, or a
    selection function called with that size (e.g. `selection.hb`).
    Sensitivity = that of the 1-D strategy.
    """
    dims = check.shape(shape)
    axis = check.axis(axis, len(dims))
    S = strategy_1d if isinstance(strategy_1d, EMatrix) else strategy_1d(dims[axis])
    if not isinstance(S, EMatrix):
        raise TypeError(f"strategy_1d must give an EMatrix, got {type(S).__name__}")
    if S.shape[1] != dims[axis]:
        raise ValueError(
            f"the 1-D strategy has {S.shape[1]} columns; axis {axis} has {dims[axis]} values"
        )
    if len(dims) == 1:
        return S
    return Kronecker([S if i == axis else Identity(s) for i, s in enumerate(dims)])


def workload_row(W: EMatrix, i: int) -> EMatrix:
    """Query i of the workload W as a one-row matrix (Public): what MWEM
    measures after selecting query i (Hardt, Ligett & McSherry 2012). Range
    queries stay implicit (a one-row `RangeQueries`); any other workload's
    row is held densely."""
    if not isinstance(W, EMatrix):
        raise TypeError(f"W must be an EMatrix, got {type(W).__name__}")
    i = check.integer(i, "i", minimum=0)
    if i >= W.shape[0]:
        raise IndexError(f"query {i} out of range for a workload of {W.shape[0]} queries")
    if type(W) is RangeQueries and not W.transposed:
        return RangeQueries(W.domain_shape, W.lower[i : i + 1], W.upper[i : i + 1])
    return Dense(W.row(i).reshape(1, -1))


def augmented_row(W: EMatrix, i: int, round_index: int) -> EMatrix:
    """εktelo's augmented MWEM selection (§9.1; Public: post-processing of
    the index i the kernel's `worst_approx` released): query i of W plus, in
    round k ≥ 1, every dyadic range [j·2^(k−1), (j+1)·2^(k−1)) of the
    flattened (C-order) cells, cut at n, that does not meet the query's
    support ("in round one, it adds any unit length queries that do not
    intersect with the selected query; in round two, length two queries, ...").
    The rows are pairwise disjoint, so a 0/1 query keeps sensitivity 1.
    Returns VStack([query, ranges]), or the query alone when no range fits;
    the query is a one-row `RangeQueries` when it is one contiguous 0/1 range
    (`Dense` otherwise)."""
    query = workload_row(W, i)
    k = check.integer(round_index, "round_index", minimum=1)
    row = W.row(int(i))
    n, nz = row.size, np.flatnonzero(row)
    if type(query) is Dense and nz.size and np.all(row[nz] == 1.0) and nz[-1] - nz[0] < nz.size:
        query = RangeQueries(n, nz[:1], nz[-1:])  # one contiguous 0/1 range
    support = np.cumsum(np.concatenate([[0], (row != 0).astype(np.int64)]))
    length = 1 << min(k - 1, 62)
    if length > n:
        return query
    lower = np.arange(0, n, length, dtype=np.int64)
    upper = np.minimum(lower + length, n) - 1
    free = support[upper + 1] == support[lower]
    return VStack([query, RangeQueries(n, lower[free], upper[free])]) if free.any() else query


def network_marginals(shape: Shape, cliques: Sequence[Sequence[int]]) -> VStack:
    """The marginals a Bayesian network needs (Public; PrivBayes, Zhang,
    Cormode, Procopiuc, Srivastava & Xiao, TODS 2017, §3): those of its
    maximal cliques, stacked in the cliques' order. The first k+1 cliques of
    a degree-k network are nested and the smaller ones' conditionals are read
    off the largest (`inference.network_distribution`), so the sensitivity is
    the number of maximal cliques (d − k), not d."""
    dims = check.shape(shape)
    sets = [tuple(check.axis(a, len(dims), "clique") for a in c) for c in cliques]
    measured = [c for c in sets if not any(set(c) < set(d) for d in sets)]
    if not measured:
        raise ValueError("a network needs at least one clique")
    return VStack([marginal(dims, c) for c in measured])
