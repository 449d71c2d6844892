"""GreedyH: a hierarchy of range queries weighted for the workload.

Public operator (paper §5.3, query selection): the strategy depends only on
the domain size and the workload, never on the data.

The algorithm is the workload-aware strategy selection of DAWA (Li, Hay &
Miklau, "A Data- and Workload-Aware Algorithm for Range Queries Under
Differential Privacy", PVLDB 7(5), 2014, §4). Its strategy is a b-ary tree of
interval queries over a 1-D domain in which node v carries a weight c_v, and
every root-to-leaf path has weights summing to 1 (so the L1 sensitivity is 1).
The weights are chosen greedily, bottom-up. For a node v over the cells S,
with children whose sub-strategies A_c are already fixed, v's sub-strategy is

    A_v = [ (1-p)·1ᵀ ; p·blockdiag(A_c) ],    p ∈ {1, (g-1)/g, …, 1/g},

and p is the grid value minimising a local error. With B = blockdiag(A_cᵀA_c),
u = B⁺1, k = 1ᵀu and m = ‖W_S u‖² (W_S: the workload's columns on S),
Sherman–Morrison gives the matrix-mechanism error of W_S exactly:

    E_v(p) = tr(W_S (A_vᵀA_v)⁺ W_Sᵀ)
           = ( Σ_c E_c − (1-p)²·m / (p² + (1-p)²·k) ) / p²,
    k_v(p) = 1ᵀ(A_vᵀA_v)⁺1 = k / (p² + (1-p)²·k),   u_v = u·k_v/k.

So each node needs three numbers from below (E, k, and u, which is its
children's u's rescaled by one scalar), and the workload enters only through
m = u_Sᵀ G_SS u_S with G = WᵀW. A node whose workload columns are all equal
(no query separates two of its cells) is answered best by its own total
alone: its subtree collapses to one query of weight 1 with error G_ii. The
E_v carried up are always exact, so the root's value is the exact error
tr(W (AᵀA)⁺ Wᵀ) of the returned strategy.

Minimising E_v itself at every node is short-sighted: a query that contains
v's whole parent needs from S only its total, which v's ancestors also
estimate, yet E_v charges it to v in full (ω·k_v). The local objectives tried:

* "canonical" (ours): E_v(p) − C_v·k_v(p), C_v the squared weight of the
  queries containing v's parent, which leaves each such query to the highest
  nodes inside it, as in the canonical range decomposition;
* "reference" (the heuristic of the DPBench/εktelo reference code, which we
  read to understand it): m replaced by m₁ + (m − m₁)·b^(−depth/2),
  m₁ = Σ_c u_cᵀ G_cc u_c, damping the cross-children part of m deeper in the
  tree; the damped values are also what it carries up as errors;
* "damped": the same damping, but exact errors carried up;
* "exact": E_v itself;
* "uniform": no search, every node of a complete tree weighted equally (H_b).

`greedy_h` runs all five, evaluates each weighting exactly, and returns the
one of least error: never worse than the plain hierarchy nor than the
reference heuristic on the same tree and grid. In our measurements
"canonical" usually wins, e.g. 0.07 vs 0.17 (reference) and 0.12 (H2) of the
Identity's error on Prefix(4096) (benchmarks/bench_strategies_opt.py).

Three implementations of the workload's part ("oracles",
`_greedy_h_oracles`) are used:

* range workloads (Prefix, Suffix, Identity, Total, 1-D `RangeQueries`,
  weighted and stacked), and such a workload reduced by a partition into
  intervals (`Partition.reduce_workload`, as DAWA does: its rows are ranges of
  buckets with fractional end buckets): m comes from prefix sums of u per
  tree level, so the whole selection costs O((n + q)·log n) time and
  O(n + q) memory for q queries — no n×n matrix is ever formed;
* any other workload with fewer rows than cells (q < n, e.g. DAWA's 2-D
  ranges reduced to its buckets), or a dense one with up to four rows per
  cell: its rows R (q×n, dense; G = RᵀR is never formed whole). Once per
  tree, the Gram blocks G_BB of the nodes B at the shallowest depth whose
  nodes have at most 32 cells (`_block_depth`): below and at that depth
  m = u_Sᵀ G_SS u_S from the block holding S. There each node's image
  R_S u_S (a q-vector) is formed, and above it carried up the tree, a
  parent's being its children's summed and rescaled, so m = ‖R_S u_S‖²
  costs O(q) per node: O(q·n) per pass (one read of R, then O(q·n/16)),
  O(q·n) memory;
* any other workload: the dense Gram matrix WᵀW (n×n), from the library's
  `workload.gram()` (in column blocks unless it is dense already).
The last two do not say which queries contain a node, so there C_v = 0 and "canonical"
is the exact local error E_v.

On small domains (n ≤ 256) such non-range workloads skip the oracles: their
dense Gram (from the ranges' ends when they are ranges wrapped in identity
products, as DAWA-Striped's reduced stripe workloads are) goes to one
bottom-up pass that runs H_b and the local objectives side by side
(`_best_fit_dense`, the choices of `_best_fit` with the Gram oracle), and
`greedy_h_many` batches such workloads of equal n into that one pass — a
striped plan (εktelo §9.2) calls GreedyH once per stripe, on tens of groups.

The tree and its weights live in `_greedy_h_tree`. This module is 1-D only.
Plans on 2-D data flatten the domain first (DAWA uses the Hilbert order);
`greedy_h` then sees a 1-D domain of n cells.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import numpy as np

from .. import _validate as check
from ..matrix import Diagonal, EMatrix, Partition, Product, RangeQueries
from ._greedy_h_oracles import (
    RangeTerms,
    _gram_source,
    _GramOracle,
    _Oracle,
    _oracle_for,
    _range_grams,
    _reduced_gram_source,
    _RowsOracle,
    _small_gram,
    _sum_children,
)
from ._greedy_h_tree import (
    _cells,
    _dense_levels,
    _Fit,
    _Fits,
    _node_weights,
    _node_weights_many,
    _Tree,
    _tree,
)

__all__ = ["greedy_h", "greedy_h_error", "greedy_h_many"]

# Entries of the (workloads × n × n) work arrays of one batched dense pass.
_DENSE_BATCH_ENTRIES = 2**20


def greedy_h(
    n_or_shape: int | Sequence[int],
    workload: EMatrix,
    *,
    branching: int = 2,
    granularity: int = 100,
    local: str | None = None,
) -> EMatrix:
    """GreedyH (Li, Hay & Miklau, PVLDB 2014, §4): a weighted hierarchy for `workload`.

    The weights are chosen bottom-up, one split per node, by each of the local
    objectives of the module docstring; every resulting weighting is then
    evaluated exactly and the one of least expected error tr(W (AᵀA)⁺ Wᵀ) is
    returned (never worse than the equally weighted hierarchy).

    Args:
        n_or_shape: the domain size n, or a 1-D shape ``(n,)``. Multi-dimensional
            domains must be flattened by the plan first (DAWA: Hilbert order).
        workload: an n-column query matrix (public).
        branching: the tree's branching factor b ≥ 2 (DAWA uses 2).
        granularity: the number g of grid values tried for each node's split
            p ∈ {1, (g-1)/g, …, 1/g} (the reference code uses 100).
        local: None (the default: the best of all), or the one weighting to
            return, for comparing them: "uniform" (H_b), "canonical",
            "damped", "reference" or "exact" (the module docstring).

    Returns:
        ``Product(Diagonal(c), RangeQueries(n, lower, upper))``: the tree's
        interval queries (breadth-first, root first) with their weights c > 0.
        Every root-to-leaf path has weights summing to 1, so the L1
        sensitivity is 1 (up to rounding). Nodes given weight 0 are left out, and so is
        every node below a node the workload cannot see inside; the strategy
        always answers the workload (W lies in its row space) but need not
        determine every cell.
    """
    tree, fit = _fit(n_or_shape, workload, branching, granularity, local)
    return _strategy(tree, fit)


def greedy_h_error(
    n_or_shape: int | Sequence[int],
    workload: EMatrix,
    *,
    branching: int = 2,
    granularity: int = 100,
    local: str | None = None,
) -> float:
    """tr(W (AᵀA)⁺ Wᵀ) for the strategy A that `greedy_h` returns with the
    same arguments (sensitivity 1, so the expected total squared error at
    ε = √2): the exact value GreedyH's recursion carries to the root (module
    docstring), without materialising A — O((n + q)·log n) for range
    workloads, at any n."""
    return _fit(n_or_shape, workload, branching, granularity, local)[1].root_error


def _fit(
    n_or_shape: int | Sequence[int],
    workload: EMatrix,
    branching: int,
    granularity: int,
    local: str | None,
) -> tuple[_Tree, _Fit]:
    """The tree and the weighting `greedy_h` returns, its arguments checked."""
    n = _domain_size(n_or_shape)
    if not isinstance(workload, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(workload).__name__}")
    if workload.shape[1] != n:
        raise ValueError(f"workload has {workload.shape[1]} columns; the domain has {n} cells")
    b = check.integer(branching, "branching", minimum=2)
    g = check.positive_int(granularity, "granularity")
    if local is not None and local not in ("uniform", *_LOCAL_OBJECTIVES):
        raise ValueError(
            f"local must be None, 'uniform' or one of {', '.join(_LOCAL_OBJECTIVES)}; "
            f"got {local!r}"
        )
    tree = _tree(n, b)
    if local is not None:  # one weighting, through the workload's oracle
        oracle = _oracle_for(workload, n)
        if local == "uniform":
            return tree, _uniform_fit(tree, oracle)
        return tree, _greedy_pass(tree, oracle, granularity=g, local=local)
    gram = _small_gram(workload, n)
    if gram is not None:  # the weightings `_best_fit` would try, on the dense Gram
        return tree, _best_fit_dense(n, b, gram[None], granularity=g)[0]
    return tree, _best_fit(tree, _oracle_for(workload, n), granularity=g)


def greedy_h_many(
    problems: Sequence[tuple[int | Partition, EMatrix]],
    *,
    branching: int = 2,
    granularity: int = 100,
) -> list[EMatrix]:
    """`greedy_h(n, W)` for every (n, W) of `problems`: the same strategies,
    with the small general workloads of equal n (`_small_gram`) weighted in
    one batched pass (`_best_fit_dense`). For plans that run GreedyH once per
    piece of the domain, e.g. DAWA-Striped once per stripe (εktelo §9.2):
    most of a single call on a few tens of cells is per-call overhead.

    A problem (P, W) with a `Partition` P is W reduced by P, i.e.
    `greedy_h(P.num_groups, P.reduce_workload(W))` (DAWA's GreedyH on its
    buckets), without building P⁺ when P's groups are intervals in order.
    """
    b = check.integer(branching, "branching", minimum=2)
    g = check.positive_int(granularity, "granularity")
    out: list[EMatrix | None] = [None] * len(problems)
    batches: dict[int, list[tuple[int, RangeTerms | np.ndarray]]] = {}
    for i, (n_or_partition, workload) in enumerate(problems):
        source: RangeTerms | np.ndarray | None
        if isinstance(n_or_partition, Partition):
            P = n_or_partition
            n, source = P.num_groups, _reduced_gram_source(workload, P)
            if source is None:
                workload = P.reduce_workload(workload)  # checks W's columns
        else:
            n, source = _domain_size(n_or_partition), None
        if source is None and isinstance(workload, EMatrix) and workload.shape[1] == n:
            source = _gram_source(workload, n)
        if source is None:  # the oracles (or greedy_h's error for a bad workload)
            out[i] = greedy_h(n, workload, branching=b, granularity=g)
        else:
            batches.setdefault(n, []).append((i, source))
    for n, items in batches.items():
        tree = _tree(n, b)
        step = max(1, _DENSE_BATCH_ENTRIES // (n * n))  # bounded (S × n × n) work arrays
        for lo in range(0, len(items), step):
            chunk = items[lo : lo + step]
            G = np.empty((len(chunk), n, n))
            ranged = [(j, src) for j, (_, src) in enumerate(chunk) if isinstance(src, tuple)]
            if ranged:
                G[[j for j, _ in ranged]] = _range_grams(n, [src for _, src in ranged])
            for j, (_, src) in enumerate(chunk):
                if not isinstance(src, tuple):
                    G[j] = src
            fits = _best_fit_dense(n, b, G, granularity=g)
            for (i, _), (lower, upper, weights) in zip(
                chunk, _node_weights_many(tree, fits), strict=True
            ):
                out[i] = Product(Diagonal(weights), RangeQueries(n, lower, upper))
    return out  # type: ignore[return-value]  # every entry is set above


def _strategy(tree: _Tree, fit: _Fit) -> EMatrix:
    lower, upper, weights = _node_weights(tree, fit)
    return Product(Diagonal(weights), RangeQueries(tree.n, lower, upper))


def _domain_size(n_or_shape: int | Sequence[int]) -> int:
    if isinstance(n_or_shape, (int, np.integer)):  # (bool too: refused below)
        return check.positive_int(n_or_shape, "n")
    shape = tuple(n_or_shape)
    if len(shape) != 1:
        raise ValueError(
            f"greedy_h works on a 1-D domain, got shape {shape}; flatten a multi-dimensional "
            "domain first (DAWA uses the Hilbert order) and pass its size"
        )
    return check.positive_int(shape[0], "n")


# -- the greedy pass and the weights -------------------------------------------


_LOCAL_OBJECTIVES = ("canonical", "damped", "reference", "exact")


def _greedy_pass(
    tree: _Tree,
    oracle: _Oracle,
    *,
    granularity: int = 100,
    local: str = "canonical",
    fixed: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> _Fit:
    """One pass of `_greedy_steps` (its docstring), on its own."""
    steps = _greedy_steps(tree, oracle, granularity=granularity, local=local, fixed=fixed)
    return _run_passes([steps], oracle)[0]


# A pass of `_greedy_steps`: asks (lower, upper, u) for the images R_S u_S of
# the nodes at the blocks' depth (a `_RowsOracle` only, once), returns its fit.
_Steps = Generator[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, _Fit]


def _run_passes(passes: Sequence[_Steps], oracle: _Oracle) -> list[_Fit]:
    """Run independent passes side by side: their asks for images (all at the
    same level of the same tree) are answered by one product of R's columns
    (`_RowsOracle.images_many`: R read once, not once per pass)."""
    fits: list[_Fit | None] = [None] * len(passes)
    asks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, steps in enumerate(passes):
        try:
            asks[i] = next(steps)
        except StopIteration as done:
            fits[i] = done.value
    if asks:
        if not isinstance(oracle, _RowsOracle):
            raise TypeError("only a rows oracle's passes ask for images")
        lower, upper, _ = next(iter(asks.values()))
        images = oracle.images_many(lower, upper, [u for _, _, u in asks.values()])
        for i, img in zip(asks, images, strict=True):
            try:
                passes[i].send(img)
            except StopIteration as done:
                fits[i] = done.value
            else:
                raise RuntimeError("a pass asks for images once")
    return fits  # type: ignore[return-value]  # every pass has returned


def _greedy_steps(
    tree: _Tree,
    oracle: _Oracle,
    *,
    granularity: int = 100,
    local: str = "canonical",
    fixed: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> _Steps:
    """Bottom-up over the levels; the errors carried up are exact.

    Search mode (`fixed` None): each node's split p is the grid value
    minimising the `local` objective ("canonical", "damped", "reference", or
    "exact": E_v itself; module docstring), and a node the
    workload cannot see inside collapses. Evaluation mode (`fixed` = (split,
    stop) per level): the exact error of that weighting, e.g. H_b's.
    """
    if local not in ("canonical", "damped", "reference", "exact"):
        raise ValueError(f"unknown local objective {local!r}")
    grid = (granularity - np.arange(granularity)) / granularity  # 1, …, 1/g
    branching = max(int(lv.child_count.max()) for lv in tree.levels)
    u = np.ones(tree.n)  # per cell: the u-vector of the deepest finished node
    rows = oracle if isinstance(oracle, _RowsOracle) else None  # m from the images R_S u_S
    # ... above the blocks' depth; at and below it, from the blocks' Grams
    blocks_at = _block_depth(tree) if rows is not None else -1
    if rows is not None:
        top = tree.levels[blocks_at]
        internal_top = top.child_count > 0
        if internal_top.any():
            rows.set_blocks(top.lower[internal_top], top.upper[internal_top])
    splits: list[np.ndarray] = []
    stops: list[np.ndarray] = []
    errors: list[np.ndarray] = []
    # "reference" compares damped errors; the exact errors of the weighting it
    # picks ride along (u, k and m do not depend on the errors), as a second,
    # evaluating pass would compute them — the same formulas on the same values
    exacts: list[np.ndarray] = []
    carry_exact = local == "reference" and fixed is None
    child_error = child_k = child_q = child_exact = np.zeros(0)
    # The level below's images R_S u_S (a row each), without its plain leaves
    # (their images are R's columns, never copied): `child_img` holds the rows
    # of its other nodes in order, `below_leaf` marks the plain leaves and
    # `below_cells` are the nodes' first cells.
    child_img = np.zeros((0, 0))
    below_leaf: np.ndarray = np.zeros(0, dtype=bool)
    below_cells: np.ndarray = np.zeros(0, dtype=np.int64)
    for depth in range(len(tree.levels) - 1, -1, -1):
        lv = tree.levels[depth]
        internal = lv.child_count > 0
        diag = oracle.diagonal(lv.lower)
        error = diag.copy()
        exact = diag.copy() if carry_exact else error
        k = np.ones(lv.lower.size)
        q_self = diag.copy()  # u_vᵀ G_SS u_v
        split = np.zeros(lv.lower.size)
        stop = ~internal
        if internal.any():
            lo, hi = lv.lower[internal], lv.upper[internal]
            start = lv.child_start[internal]
            sum_error = np.add.reduceat(child_error, start)
            sum_k = np.add.reduceat(child_k, start)
            if rows is not None and depth >= blocks_at:
                m = rows.block_quadratic(lo, hi, u)
            elif rows is not None:
                img_sum, m = _child_images(
                    rows, child_img, below_leaf, below_cells, start, lv.child_count[internal]
                )
            else:
                m = oracle.quadratic(lo, hi, u)
            if fixed is None:
                m_search, c_parent = m, np.zeros(lo.size)
                if local in ("damped", "reference"):
                    m1 = np.add.reduceat(child_q, start)
                    m_search = m1 + (m - m1) * branching ** (-depth / 2.0)
                elif local == "canonical" and depth > 0:
                    par = tree.levels[depth - 1]
                    parent = np.repeat(np.arange(par.lower.size), par.child_count)
                    c_parent = oracle.covering(par.lower, par.upper)[parent][internal]
                p = grid[None, :]
                denom = p**2 + (1.0 - p) ** 2 * sum_k[:, None]
                search = (
                    sum_error[:, None] - (1.0 - p) ** 2 * m_search[:, None] / denom
                ) / p**2 - c_parent[:, None] * sum_k[:, None] / denom
                best = np.argmin(search, axis=1)
                p_v = grid[best]
                q_v = (1.0 - p_v) ** 2
                if local == "reference":
                    e_v = search[np.arange(best.size), best]
                else:
                    e_v = (sum_error - q_v * m / (p_v**2 + q_v * sum_k)) / p_v**2
                flat = oracle.uniform(lo, hi)
            else:
                flat = np.asarray(fixed[1][depth], dtype=bool)[internal]
                p_v = np.where(flat, 1.0, np.asarray(fixed[0][depth], dtype=np.float64)[internal])
                q_v = (1.0 - p_v) ** 2
                e_v = (sum_error - q_v * m / (p_v**2 + q_v * sum_k)) / p_v**2
            scale = 1.0 / (p_v**2 + (1.0 - p_v) ** 2 * sum_k)
            u[_cells(lo, hi)] *= np.repeat(scale, hi - lo + 1)
            if flat.any():
                flo, fhi = lo[flat], hi[flat]
                u[_cells(flo, fhi)] = np.repeat(1.0 / (fhi - flo + 1), fhi - flo + 1)
            if rows is not None and depth <= blocks_at:
                # R_S u_S after the rescaling; a flat node's columns are all equal
                # (img_sum may be shared: not in place)
                if depth == blocks_at:  # asked of the caller: R_S u_S for every pass at once
                    img = yield lo, hi, u
                else:
                    img = img_sum * scale[:, None]
                img[flat] = rows.columns(lo[flat])
            error[internal] = np.where(flat, diag[internal], e_v)
            if carry_exact:  # the evaluating pass's error: p = 1 on flat nodes (unused there)
                p_x = np.where(flat, 1.0, p_v)
                q_x = (1.0 - p_x) ** 2
                sum_exact = np.add.reduceat(child_exact, start)
                exact_v = (sum_exact - q_x * m / (p_x**2 + q_x * sum_k)) / p_x**2
                exact[internal] = np.where(flat, diag[internal], exact_v)
            k[internal] = np.where(flat, 1.0, sum_k * scale)
            q_self[internal] = np.where(flat, diag[internal], scale**2 * m)
            split[internal] = np.where(flat, 0.0, p_v)
            stop[internal] = flat
        splits.append(split)
        stops.append(stop)
        errors.append(error)
        exacts.append(exact)
        child_error, child_k, child_q, child_exact = error, k, q_self, exact
        if rows is not None and depth <= blocks_at:  # internal nodes' images; leaves: R's columns
            child_img = img if internal.any() else np.zeros((0, rows.Rt.shape[1]))
            below_leaf, below_cells = ~internal, lv.lower
    if carry_exact:  # the carried errors were damped: the exact ones are the fit's
        errors = exacts
    return _Fit(
        tuple(reversed(splits)),
        tuple(reversed(stops)),
        tuple(reversed(errors)),
        float(errors[-1][0]),
    )


def _block_depth(tree: _Tree) -> int:
    """The shallowest depth whose nodes have at most `_BLOCK_CELLS` cells each:
    `_greedy_pass` takes m from the Gram blocks of its nodes there and below."""
    for depth, lv in enumerate(tree.levels):
        if int(lv.size.max()) <= _BLOCK_CELLS:
            return depth
    return len(tree.levels) - 1


# Cells of the largest Gram block of a `_RowsOracle` pass (`_block_depth`).
_BLOCK_CELLS = 32


def _child_images(
    rows: _RowsOracle,
    child_img: np.ndarray,
    below_leaf: np.ndarray,
    below_cells: np.ndarray,
    start: np.ndarray,
    count: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Every internal node's sum of its children's images R_S u_S, and its
    squared norm m, from the level below: plain leaves (`below_leaf`, images
    R's columns at `below_cells`) and the other children's rows `child_img`
    in order. The leaves' part is the same in every pass (`leaf_sums`: once
    per tree); the others' rows are added to it — in a binary tree the same
    sums, term for term, as summing every child's row (x + 0 = x); wider
    nodes sum every child's row in order, as before."""
    if not below_leaf.any():  # every child has its row
        img_sum = _sum_children(child_img, start, count)
        return img_sum, np.einsum("ij,ij->i", img_sum, img_sum)
    if count.max() > 2:  # wider nodes: every child's row, summed in child order
        full = np.empty((below_leaf.size, child_img.shape[1]))
        full[below_leaf] = rows.columns(below_cells[below_leaf])
        full[~below_leaf] = child_img
        img_sum = _sum_children(full, start, count)
        return img_sum, np.einsum("ij,ij->i", img_sum, img_sum)
    leaves, leaf_norms = rows.leaf_sums(below_leaf, below_cells, start, count)
    if below_leaf.all():  # leaves only: shared and read-only
        return leaves, leaf_norms
    parent = np.repeat(np.arange(count.size), count)[~below_leaf]  # of each row, in order
    first = np.flatnonzero(np.diff(parent, prepend=-1))
    img_sum = leaves.copy()
    img_sum[parent[first]] += np.add.reduceat(child_img, first, axis=0)
    return img_sum, np.einsum("ij,ij->i", img_sum, img_sum)


def _uniform_steps(tree: _Tree, oracle: _Oracle) -> _Steps:
    """H_b: p_v = h_v/(h_v + 1) gives every node of a complete tree the same
    weight 1/(height + 1) (ragged trees: still sensitivity 1), nothing collapsed."""
    split = [lv.height / (lv.height + 1.0) for lv in tree.levels]
    stop = [lv.child_count == 0 for lv in tree.levels]
    return _greedy_steps(tree, oracle, fixed=(split, stop))


def _uniform_fit(tree: _Tree, oracle: _Oracle) -> _Fit:
    """H_b's fit (`_uniform_steps`)."""
    return _run_passes([_uniform_steps(tree, oracle)], oracle)[0]


def _best_fit(tree: _Tree, oracle: _Oracle, *, granularity: int = 100) -> _Fit:
    """The weighting of least exact error among the local objectives and H_b
    (the first of least error, in that order), the passes run side by side."""
    passes = [_uniform_steps(tree, oracle)]
    for local in _LOCAL_OBJECTIVES:
        if local == "canonical" and isinstance(oracle, (_GramOracle, _RowsOracle)):
            continue  # C_v = 0 there: the same as "exact"
        passes.append(_greedy_steps(tree, oracle, granularity=granularity, local=local))
    best, *others = _run_passes(passes, oracle)
    for fit in others:
        if fit.root_error < best.root_error:
            best = fit
    return best


def _best_fit_dense(n: int, b: int, G: np.ndarray, *, granularity: int = 100) -> _Fits:
    """`_best_fit` on `_tree(n, b)` for general workloads on a small domain, from
    their dense Grams G (a stack, S × n × n): their fits, stacked (`_Fits`).

    The weightings `_best_fit` compares for a `_GramOracle` — H_b, then the
    local objectives "damped", "reference" and "exact" ("canonical" is "exact"
    there) — with `_greedy_pass`'s formulas, run side by side as "lanes" of
    (S × 4 × nodes) arrays in one bottom-up pass; per workload the first of
    least exact error wins, as there. Per level, every internal node's
    m = u_Sᵀ G_SS u_S is, for all lanes at once, (U·G_L ∘ U) summed over the
    node's cells, G_L = G on the level's node blocks (zero elsewhere). The
    "reference" lane carries its damped errors (what its search compares) and,
    beside them, the exact errors of the same weighting, which `_greedy_pass`
    gets from a second, evaluating pass (u and k do not depend on the errors).
    """
    tree, lanes = _tree(n, b), 4  # lanes: uniform, damped, reference, exact (`_best_fit`'s order)
    S = G.shape[0]
    grid = (granularity - np.arange(granularity)) / granularity  # 1, …, 1/g
    grid2, cogrid2 = grid**2, (1.0 - grid) ** 2
    branching = max(int(lv.child_count.max()) for lv in tree.levels)
    gdiag = G[:, np.arange(n), np.arange(n)]
    tol = 1e-9 * np.maximum(1.0, np.abs(gdiag).max(axis=1))  # `_GramOracle`'s tolerance
    U = np.ones((S, lanes, n))  # per lane and cell: u of the deepest finished node
    # per node of the level below, stacked: error carried (damped for "reference"),
    # exact error, k = 1ᵀ(AᵀA)⁺1 and q = u_Sᵀ G_SS u_S
    child = np.empty((4, S, lanes, tree.levels[-1].lower.size))
    child[:] = gdiag[:, None, tree.levels[-1].lower]
    child[2] = 1.0
    chosen: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # depth → (p per lane, collapsed)
    exact_by_depth: dict[int, np.ndarray] = {len(tree.levels) - 1: child[1]}
    for lv in _dense_levels(n, b):
        sum_err, sum_exact, sum_k, sum_q = np.add.reduceat(child, lv.start, axis=3)
        block = lv.label[lv.cells, None] == lv.label[None, :]  # the nodes' rows of G_L
        rows = G[:, lv.cells]
        Uc = U[:, :, lv.cells]
        m = np.add.reduceat(
            np.matmul(U, np.where(block, rows, 0.0).transpose(0, 2, 1)) * Uc, lv.offsets, axis=2
        )
        # search lanes (damped, reference, exact): the split minimising the local objective
        m_search = m[:, 1:].copy()
        m1 = sum_q[:, 1:3]  # damped: m₁ + (m − m₁)·b^(−depth/2), m₁ = Σ_c u_cᵀ G_cc u_c
        m_search[:, :2] = m1 + (m[:, 1:3] - m1) * branching ** (-lv.depth / 2.0)
        denom = grid2 + cogrid2 * sum_k[:, 1:, :, None]
        search = (sum_err[:, 1:, :, None] - cogrid2 * m_search[..., None] / denom) / grid2
        best = np.argmin(search, axis=3)
        p_v = np.empty_like(m)
        p_v[:, 0] = lv.uniform_split
        p_v[:, 1:] = grid[best]
        q_v = (1.0 - p_v) ** 2
        scale = 1.0 / (p_v**2 + q_v * sum_k)
        e_x = (sum_exact - q_v * m / (p_v**2 + q_v * sum_k)) / p_v**2
        e_c = e_x.copy()
        e_c[:, 2] = np.take_along_axis(search[:, 1], best[:, 1, :, None], axis=2)[..., 0]
        # a node the workload cannot see inside collapses (search lanes only)
        ref = G[:, lv.corner, lv.corner][:, :, None]
        spread = np.where(block, np.abs(rows - ref), 0.0).max(axis=2)
        flat = np.maximum.reduceat(spread, lv.offsets, axis=1) <= tol[:, None]
        U[:, :, lv.cells] = Uc * scale[:, :, lv.node_of_cell]
        level = np.empty((4, S, lanes, lv.internal.size + lv.leaves.size))
        level[..., lv.leaves] = gdiag[:, None, lv.leaf_cells]
        level[2][..., lv.leaves] = 1.0
        inner = np.stack((e_c, e_x, sum_k * scale, scale**2 * m))
        if flat.any():  # its total alone: error G_ii, k = 1, u = 1/|S| on its cells
            fs, fn = np.nonzero(flat)
            inner[:, fs, 1:, fn] = gdiag[fs, lv.corner[lv.offsets[fn]]][:, None, None]
            inner[2, fs, 1:, fn] = 1.0
            sizes = np.diff(np.append(lv.offsets, lv.cells.size))
            cs, cc = np.nonzero(flat[:, lv.node_of_cell])
            U[cs, 1:, lv.cells[cc]] = (1.0 / sizes[lv.node_of_cell[cc]])[:, None]
        level[..., lv.internal] = inner
        chosen[lv.depth] = (p_v, flat)
        exact_by_depth[lv.depth] = level[1]
        child = level
    root = child[1][:, :, 0]
    lane = np.argmin(root, axis=1)  # per workload: the first of least error, as there
    every = np.arange(S)
    splits, stops, errors = [], [], []
    for depth, tree_level in enumerate(tree.levels):
        internal = tree_level.child_count > 0
        split = np.zeros((S, tree_level.lower.size))
        stop = np.tile(~internal, (S, 1))
        if depth in chosen:
            p_v, flat = chosen[depth]
            collapsed = flat & (lane > 0)[:, None]
            split[:, internal] = np.where(collapsed, 0.0, p_v[every, lane])
            stop[:, internal] = collapsed
        splits.append(split)
        stops.append(stop)
        errors.append(exact_by_depth[depth][every, lane])
    return _Fits(tuple(splits), tuple(stops), tuple(errors), root[every, lane])
