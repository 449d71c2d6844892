"""GreedyH's view of the workload (Li, Hay & Miklau, PVLDB 7(5), 2014, §4).

Public computation on the workload only. The greedy pass needs, per tree
node S, the quantities u_Sᵀ G_SS u_S, G_ii and whether the workload tells
S's cells apart, for G = WᵀW; an "oracle" answers them from the workload's
structure:

* `_RangeOracle` — range workloads (`_forms.range_form`), and such a
  workload reduced by a partition into intervals (DAWA's buckets: rows with
  fractional end values), by prefix sums: O(n + q) memory, no n×n matrix;
* `_RowsOracle` — any other workload with fewer rows than cells (or a dense
  one with up to four rows per cell), through its dense rows R (q×n; G = RᵀR
  is formed only in blocks of neighbouring cells);
* `_GramOracle` — any other workload, through its dense Gram matrix, from
  the library's `W.gram()` (`_forms.dense_gram`).

On small domains the batched dense pass takes the dense Gram instead
(`_small_gram`, `_gram_source`): a workload's own `W.gram()`, or, for ranges
wrapped in identity products or reduced by an interval partition, the
Grams of many such workloads at once from their ranges' ends (`_range_grams`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np

from ..matrix import Dense, EMatrix, Identity, Partition, Product, Sparse
from ._forms import BLOCK_ENTRIES, RangeForm, dense_gram, range_form
from ._greedy_h_tree import _cells

# `_RangeOracle`'s rows as (A, B, ω, fa, fb): 1 on [A_q, B_q] weighted ω_q,
# with end values fa_q and fb_q (None for plain ranges: ends of 1).
RangeTerms = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]

# A dense workload with up to this many rows per cell is held as its rows too:
# a pass reads them once (`_RowsOracle`: Gram blocks below the blocks' depth),
# where the Gram oracle forms the n×n Gram (q·n² flops) and then reads
# ~4·n² of it per pass (DAWA on a 2-D set with fewer buckets than ranges).
_ROWS_OVER_CELLS = 4
# Largest q·n for which a general workload with q < n rows is held as its dense
# rows instead of its Gram (2^26 doubles are 512 MiB).
_MAX_ROWS_ENTRIES = 2**26
# Largest domain on which a general (non-range) workload goes through the dense
# Gram matrix with every weighting in one batched pass (`_best_fit_dense`):
# per tree level a few (lanes × n)·(n × n) products instead of per-node work
# and one pass per weighting. DAWA-Striped's stripes (εktelo §9.2) reduce to
# some tens of groups each and call GreedyH once per stripe.
_SMALL_N = 256


class _Oracle(Protocol):
    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        """G_ii for each cell i: the error of a cell (or a collapsed node) measured alone."""

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Whether all workload columns in each range are equal."""

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Squared weight of the queries containing each (disjoint, sorted) range."""

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        """u_Sᵀ G_SS u_S for each (disjoint, sorted) range S; u is a cell vector."""


class _RangeOracle:
    """G = Σ_q ω_q r_q r_qᵀ for rows r_q that are 1 on [A_q, B_q] except the end
    values r_q[A_q] = fa_q and r_q[B_q] = fb_q (fa_q alone when A_q = B_q).

    Plain ranges have fa = fb = 1; a range workload reduced by a partition into
    intervals (DAWA: W·P⁺) has the covered fractions of its end buckets there.
    """

    def __init__(
        self,
        n: int,
        a: np.ndarray,
        b: np.ndarray,
        w2: np.ndarray,
        fa: np.ndarray | None = None,
        fb: np.ndarray | None = None,
    ):
        keep = w2 != 0
        self.n, self.a, self.b, self.w2 = n, a[keep], b[keep], w2[keep]
        one = np.ones(self.a.size)
        fa = one if fa is None else np.asarray(fa, dtype=np.float64)[keep]
        fb = one if fb is None else np.asarray(fb, dtype=np.float64)[keep]
        single = self.a == self.b
        # r = 1_[A,B] + da·e_A + db·e_B.
        self.da = fa - 1.0
        self.db = np.where(single, 0.0, fb - 1.0)
        # The longest interval on which the row is 1 (empty when A' > B').
        self.inner_a = self.a + (self.da != 0)
        self.inner_b = np.where(single, self.a - (self.da != 0), self.b - (self.db != 0))
        w, k = self.w2, n + 1
        diff = np.bincount(self.a, w, k) - np.bincount(self.b + 1, w, k)
        diff += np.bincount(self.a, w * ((1 + self.da) ** 2 - 1), k)
        diff -= np.bincount(self.a + 1, w * ((1 + self.da) ** 2 - 1), k)
        diff += np.bincount(self.b, w * ((1 + self.db) ** 2 - 1), k)
        diff -= np.bincount(self.b + 1, w * ((1 + self.db) ** 2 - 1), k)
        self.coverage = np.maximum(np.cumsum(diff[:n]), 0.0)  # G_ii ≥ 0 despite rounding
        # cut[j] = 1 when some row may differ between cells j-1 and j.
        cut = np.zeros(n + 2, dtype=np.int64)
        cut[self.a] = 1
        cut[self.b + 1] = 1
        cut[(self.a + 1)[self.da != 0]] = 1
        cut[self.b[self.db != 0]] = 1
        cut[0] = 0
        self.cuts = np.cumsum(cut[: n + 1])

    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        return self.coverage[cells]

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return self.cuts[upper] == self.cuts[lower]

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        # Rows equal to 1 on the consecutive ranges first..last: a difference array.
        first = np.searchsorted(lower, self.inner_a, side="left")
        last = np.searchsorted(upper, self.inner_b, side="right") - 1
        ok = first <= last
        k = lower.size + 1
        diff = np.bincount(first[ok], self.w2[ok], k) - np.bincount(last[ok] + 1, self.w2[ok], k)
        return np.cumsum(diff[:-1])

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        # Per range S: Σ_q ω_q (r_q·u_S)². A row equal to 1 on all of S adds
        # ω_q·(1ᵀu_S)². Any other row meeting S has A_q or B_q inside S (it is 1
        # strictly between them), so it meets at most two ranges of the level
        # otherwise: those are summed one by one.
        csum = np.concatenate(([0.0], np.cumsum(u)))
        total = csum[upper + 1] - csum[lower]
        out = self.covering(lower, upper) * total**2
        a, b, w2 = self.a, self.b, self.w2
        seen = np.full(a.size, -1)
        for end in (a, b):
            node = np.searchsorted(lower, end, side="right") - 1
            ok = node >= 0
            node_c = np.where(ok, node, 0)
            lo, hi = lower[node_c], upper[node_c]
            inside = (self.inner_a <= lo) & (hi <= self.inner_b)
            ok &= (hi >= end) & (node != seen) & ~inside
            lo, hi = lo[ok], hi[ok]
            qa, qb = a[ok], b[ok]
            part = csum[np.minimum(qb, hi) + 1] - csum[np.maximum(qa, lo)]
            part += np.where((lo <= qa) & (qa <= hi), self.da[ok] * u[qa], 0.0)
            part += np.where((lo <= qb) & (qb <= hi), self.db[ok] * u[qb], 0.0)
            out += np.bincount(node_c[ok], weights=w2[ok] * part**2, minlength=lower.size)
            seen = np.where(ok, node, seen)
        return out


class _GramOracle:
    """Any workload, through its dense Gram matrix G = WᵀW (n×n)."""

    def __init__(self, gram: np.ndarray):
        self.G = gram
        self.tol = 1e-9 * max(1.0, float(np.abs(np.diag(gram)).max()))

    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        return np.diag(self.G)[cells]

    def _blocks(
        self, lower: np.ndarray, upper: np.ndarray
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield (indices into lower, stacked diagonal blocks G_SS) by block size."""
        size = upper - lower + 1
        for s in np.unique(size):
            idx = np.nonzero(size == s)[0]
            if idx.size * s * s <= BLOCK_ENTRIES:
                cells = lower[idx, None] + np.arange(s)
                yield idx, self.G[cells[:, :, None], cells[:, None, :]]
            else:
                for i in idx:
                    lo = int(lower[i])
                    yield np.array([i]), self.G[None, lo : lo + s, lo : lo + s]

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        out = np.zeros(lower.size, dtype=bool)
        for idx, blocks in self._blocks(lower, upper):
            spread = np.abs(blocks - blocks[:, :1, :1]).max(axis=(1, 2))
            out[idx] = spread <= self.tol
        return out

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        # G alone does not identify the queries containing a range.
        return np.zeros(lower.size)

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        out = np.zeros(lower.size)
        for idx, blocks in self._blocks(lower, upper):
            s = blocks.shape[1]
            us = u[lower[idx, None] + np.arange(s)]
            out[idx] = np.einsum("ki,kij,kj->k", us, blocks, us)
        return out


class _RowsOracle:
    """Any workload through its dense rows R (q×n): G = RᵀR is never formed
    whole.

    Held as Rᵀ (n×q, a cell's column contiguous). `_greedy_pass` computes m
    from the Gram blocks of one tree level's nodes (`set_blocks`,
    `block_quadratic`) at and below that level, and above it from the
    nodes' images R_S u_S (`images_many`, `columns`); `quadratic` is the direct
    O(q·|S|) form of the same quantity.
    """

    def __init__(self, rows: np.ndarray):
        self.Rt = np.ascontiguousarray(np.asarray(rows, dtype=np.float64).T)
        self.colsq = np.einsum("ij,ij->i", self.Rt, self.Rt)
        big = max(float(self.Rt.max(initial=0.0)), -float(self.Rt.min(initial=0.0)))
        self.tol = 1e-9 * max(1.0, big)
        # cut[j] = 1 when column j differs from column j-1 by more than tol in
        # some entry (as in _RangeOracle)
        n, q = self.Rt.shape
        cut = np.zeros(n + 1, dtype=np.int64)
        cut[1:n] = self._surely_cut()
        check = np.flatnonzero(cut[:n] == 0)[1:] if n > 1 else np.zeros(0, dtype=np.int64)
        step = max(1, BLOCK_ENTRIES // max(1, q))
        for s in range(0, check.size, step):  # the others entry by entry
            j = check[s : s + step]
            diff = np.abs(self.Rt[j] - self.Rt[j - 1]).max(axis=1, initial=0.0)
            cut[j] = diff > self.tol
        self.cuts = np.cumsum(cut[:n])
        self._memo: dict[bytes, np.ndarray] = {}
        self._sums: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._blocks: tuple[bytes, np.ndarray, np.ndarray] | None = None

    def _surely_cut(self) -> np.ndarray:
        """For j = 1 … n−1: True where columns j−1 and j surely differ by more
        than tol in some entry, read off their squared norms: for columns a, b
        of q entries |‖a‖² − ‖b‖²| = |(a − b)·(a + b)| ≤ max|a − b|·√q·(‖a‖ + ‖b‖),
        so a gap in the squared norms beyond tol·√q·(‖a‖ + ‖b‖) — with margins
        for the rounding of the norms (q·2⁻⁵² relative) and of the entries'
        differences — implies one. Equal columns are never surely cut; the
        rest is checked entry by entry (O(q) per neighbouring pair)."""
        q = self.Rt.shape[1]
        a, b = self.colsq[:-1], self.colsq[1:]
        slack = 4.0 * (q + 1) * 2.0**-53 * (a + b)
        bound = self.tol * np.sqrt(q) * (np.sqrt(a) + np.sqrt(b)) * (1.0 + 1e-9)
        return np.abs(a - b) - slack > bound

    def diagonal(self, cells: np.ndarray) -> np.ndarray:
        return self.colsq[cells]

    def columns(self, cells: np.ndarray) -> np.ndarray:
        """R's columns at `cells`, one per row (len(cells) × q, read-only);
        memoised, as every pass over the tree asks for the same leaves."""
        if cells.size and cells[-1] - cells[0] + 1 == cells.size and np.all(np.diff(cells) == 1):
            view = self.Rt[cells[0] : cells[-1] + 1]  # consecutive cells (the deepest leaves)
            view.setflags(write=False)  # a view: no copy of a k × q block
            return view
        key = cells.tobytes()
        got = self._memo.get(key)
        if got is None:
            got = self.Rt[cells]
            got.setflags(write=False)
            self._memo[key] = got
        return got

    def leaf_sums(
        self, leaf: np.ndarray, cells: np.ndarray, start: np.ndarray, count: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per parent of a level (its children at start … start + count − 1),
        the sum of R's columns over its children that are plain leaves
        (`leaf`, first cells `cells`; other children count 0) and its squared
        norm: the same in every pass of `_best_fit`, so computed once per
        level (read-only), from the leaves' columns only."""
        key = b"".join(v.tobytes() for v in (leaf, cells, start, count))
        got = self._sums.get(key)
        if got is None:
            parent = np.repeat(np.arange(count.size), count)[leaf]  # of each leaf, in order
            first = np.flatnonzero(np.diff(parent, prepend=-1))
            sums = np.add.reduceat(self.Rt[cells[leaf]], first, axis=0)  # in child order
            if first.size == count.size:  # every parent has a leaf child
                total = sums
            else:
                total = np.zeros((count.size, self.Rt.shape[1]))
                total[parent[first]] = sums
            norms = np.einsum("ij,ij->i", total, total)
            total.setflags(write=False)
            norms.setflags(write=False)
            got = self._sums[key] = (total, norms)
        return got

    def uniform(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return self.cuts[upper] == self.cuts[lower]

    def covering(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return np.zeros(lower.size)

    def set_blocks(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Hold the Gram blocks G_BB = R_Bᵀ R_B of the disjoint, sorted cell
        ranges B = [lower, upper] (the nodes of one tree level: `_greedy_pass`'s
        blocks), for `block_quadratic` on them and on nodes inside them.
        Computed once per set of blocks (every pass over one tree asks for the
        same), one small product per block: O(q·Σ|B|²) instead of the images
        of every node below the blocks in every pass."""
        key = lower.tobytes() + upper.tobytes()
        if self._blocks is not None and self._blocks[0] == key:
            return
        size = upper - lower + 1
        grams = np.zeros((lower.size, int(size.max()), int(size.max())))
        for i, (lo, s) in enumerate(zip(lower.tolist(), size.tolist(), strict=True)):
            part = self.Rt[lo : lo + s]
            grams[i, :s, :s] = part @ part.T
        self._blocks = (key, lower, grams)

    def block_quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        """`quadratic` for disjoint, sorted ranges S that each lie inside one
        block of `set_blocks`: u_Sᵀ G_SS u_S from the block's Gram."""
        if self._blocks is None:
            raise RuntimeError("set_blocks first")
        _, starts, grams = self._blocks
        size = upper - lower + 1
        cells = _cells(lower, upper)
        node = np.repeat(np.arange(lower.size), size)
        block = np.searchsorted(starts, cells, side="right") - 1
        pos = cells - starts[block]
        label = np.full(grams.shape[:2], -1)
        label[block, pos] = node
        ub = np.zeros(grams.shape[:2])
        ub[block, pos] = u[cells]
        same = (label[:, :, None] == label[:, None, :]) & (label[:, :, None] >= 0)
        per_cell = ub * np.matmul(np.where(same, grams, 0.0), ub[:, :, None])[:, :, 0]
        return np.bincount(node, weights=per_cell[block, pos], minlength=lower.size)

    def images_many(
        self, lower: np.ndarray, upper: np.ndarray, us: Sequence[np.ndarray]
    ) -> list[np.ndarray]:
        """R_S u_S for disjoint, sorted ranges S (one row each, len × q), for
        every cell vector u of `us`: per range one product of the u's on S
        with R's columns on S (read once for all u's)."""
        U = np.stack(us)
        out = np.empty((lower.size, len(us), self.Rt.shape[1]))
        for i, (lo, hi) in enumerate(zip(lower.tolist(), upper.tolist(), strict=True)):
            np.matmul(U[:, lo : hi + 1], self.Rt[lo : hi + 1], out=out[i])
        return [np.ascontiguousarray(out[:, i]) for i in range(len(us))]

    def quadratic(self, lower: np.ndarray, upper: np.ndarray, u: np.ndarray) -> np.ndarray:
        out = np.empty(lower.size)
        for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)):
            v = u[lo : hi + 1] @ self.Rt[lo : hi + 1]
            out[i] = v @ v
        return out


def _small_gram(W: EMatrix, n: int) -> np.ndarray | None:
    """WᵀW (n×n, symmetric) when GreedyH takes the dense path: a domain of at
    most `_SMALL_N` cells and a workload outside the range forms, which keep
    `_RangeOracle` and its "canonical" objective; None otherwise.

    Ranges that are only wrapped in identity products (DAWA-Striped's stripe
    workloads, reduced by a partition into intervals: `Partition.reduce_workload`)
    get their Gram from the ranges' ends (`_range_grams`); any other workload
    through `_forms.dense_gram`, as `_GramOracle` would.
    """
    source = _gram_source(W, n)
    return _range_grams(n, [source])[0] if isinstance(source, tuple) else source


def _gram_source(W: EMatrix, n: int) -> RangeTerms | np.ndarray | None:
    """`_small_gram`'s work up to the Gram: None (not the dense path), the
    `_RangeOracle` terms (A, B, ω, fa, fb) of wrapped ranges (fa, fb None for
    plain ones), or any other workload's dense Gram."""
    if n > _SMALL_N or range_form(W, n) is not None or _reduced_range_form(W, n) is not None:
        return None
    bare = _without_identities(W)
    form = range_form(bare, n)
    if form is not None:
        return (*form, None, None)
    reduced = _reduced_range_form(bare, n)
    return reduced if reduced is not None else dense_gram(W, n)


def _reduced_gram_source(W: EMatrix, P: Partition) -> RangeTerms | None:
    """`_gram_source(P.reduce_workload(W), P.num_groups)` for ranges wrapped in
    identity products and a partition of a 1-D domain into intervals in order:
    the reduced ranges from P's group sizes; None for anything else (the
    caller then reduces W and asks `_gram_source`)."""
    if not isinstance(W, EMatrix) or len(P.domain_shape) != 1 or W.shape[1] != P.size:
        return None
    k, n = P.num_groups, P.size
    if k > _SMALL_N or range_form(W, n) is not None:  # a range form keeps the oracles
        return None
    form = range_form(_without_identities(W), n)
    if form is None or np.any(np.diff(P.groups) < 0):  # labels in order: intervals
        return None
    return _reduce_form(form, np.concatenate(([0], np.cumsum(P.sizes))))


def _without_identities(W: EMatrix) -> EMatrix:
    """W with the identity factors of its products left out (the same matrix)."""
    if not isinstance(W, Product):
        return W
    A, B = _without_identities(W.A), _without_identities(W.B)
    if isinstance(A, Identity):
        return B
    if isinstance(B, Identity):
        return A
    return W if A is W.A and B is W.B else Product(A, B)


def _range_grams(n: int, forms: Sequence[RangeTerms]) -> np.ndarray:
    """G = Σ_q ω_q r_q r_qᵀ for each of `forms`, `_RangeOracle`'s rows r_q
    given as (A, B, ω, fa, fb) (1 on [A_q, B_q], with the end values fa_q and
    fb_q when those are not None): a stack (len(forms) × n × n, symmetric), in
    O(q + n²) per form without the q×n rows.

    r_q = s_q + t_q with s_q = 1_[A,B] and t_q = da·e_A + db·e_B. The s-part
    Σ ω s sᵀ at (i, j), i ≤ j, is the weight of the ranges with A ≤ i and
    B ≥ j (a 2-D cumulative sum of the (A, B) histogram); Σ ω s tᵀ puts ω·da
    on column A and ω·db on column B over the rows A..B (a difference array
    down each column); Σ ω t tᵀ touches (A, A), (A, B), (B, A), (B, B) only.
    The forms share each NumPy call (histograms offset by form): a form's
    Gram does not depend on the others'. This is the batched form, for the
    many small workloads of a striped plan (`greedy_h_many`), of the dense
    Gram `RangeQueries.weighted_gram` gives one range workload; the fractional
    ends of a workload reduced by an interval partition (W·P⁺ over P's
    groups, never formed here) have no matrix class of their own.
    """
    S, nn = len(forms), n * n
    count = [f[0].size for f in forms]
    form_of = np.repeat(np.arange(S), count)
    a = np.concatenate([f[0] for f in forms]).astype(np.int64)
    b = np.concatenate([f[1] for f in forms]).astype(np.int64)
    w2 = np.concatenate([f[2] for f in forms]).astype(np.float64)
    at = form_of * nn
    hist = np.bincount(at + a * n + b, w2, S * nn).reshape(S, n, n)  # A ≤ B
    C = np.cumsum(np.cumsum(hist, axis=1)[:, :, ::-1], axis=2)[:, :, ::-1]  # A ≤ i, B ≥ j
    G = np.triu(C)
    G += np.triu(C, 1).transpose(0, 2, 1)
    if any(f[3] is not None for f in forms):
        one = [np.ones(c) for c in count]
        fa = np.concatenate([one[i] if f[3] is None else f[3] for i, f in enumerate(forms)])
        fb = np.concatenate([one[i] if f[4] is None else f[4] for i, f in enumerate(forms)])
        da = fa - 1.0
        db = np.where(a == b, 0.0, fb - 1.0)
        # Σ ω s tᵀ: column A += ω·da and column B += ω·db on rows A..B
        steps_at, size = form_of * ((n + 1) * n), S * (n + 1) * n
        steps = np.bincount(steps_at + a * n + a, w2 * da, size)
        steps -= np.bincount(steps_at + (b + 1) * n + a, w2 * da, size)
        steps += np.bincount(steps_at + a * n + b, w2 * db, size)
        steps -= np.bincount(steps_at + (b + 1) * n + b, w2 * db, size)
        st = np.cumsum(steps.reshape(S, n + 1, n), axis=1)[:, :n]
        G += st + st.transpose(0, 2, 1)
        # Σ ω t tᵀ
        G += np.bincount(at + a * n + a, w2 * da * da, S * nn).reshape(S, n, n)
        G += np.bincount(at + b * n + b, w2 * db * db, S * nn).reshape(S, n, n)
        cross = np.bincount(at + a * n + b, w2 * da * db, S * nn).reshape(S, n, n)
        G += cross + cross.transpose(0, 2, 1)
    return (G + G.transpose(0, 2, 1)) / 2


def _interval_expansion(E: EMatrix, k: int) -> np.ndarray | None:
    """For a partition's expand matrix P⁺ (n × k, entry 1/|g| at (cell, group g))
    whose groups are consecutive intervals in order: the first cell of every
    group plus n (length k + 1); otherwise None."""
    if not isinstance(E, Sparse) or E.shape[1] != k:
        return None
    S = E.matrix
    if np.any(np.diff(S.indptr) != 1):
        return None
    group = S.indices
    if group[0] != 0 or np.any(np.diff(group) < 0) or np.any(np.diff(group) > 1):
        return None
    if group[-1] != k - 1:
        return None
    starts = np.concatenate((np.searchsorted(group, np.arange(k)), [group.size]))
    expected = 1.0 / np.diff(starts)[group]
    if not np.all(np.abs(S.data - expected) <= 1e-12 * expected):  # np.allclose, cheaper
        return None
    return starts


def _reduced_range_form(W: EMatrix, n: int) -> RangeTerms | None:
    """W = R·P⁺ for a range workload R and an interval partition (DAWA's reduced
    workload): per row (A, B, ω, fa, fb) in `_RangeOracle`'s terms."""
    if not isinstance(W, Product):
        return None
    form = range_form(W.A, W.A.shape[1])  # the cheaper test first
    if form is None:
        return None
    starts = _interval_expansion(W.B, n)
    if starts is None:
        return None
    return _reduce_form(form, starts)


def _reduce_form(form: RangeForm, starts: np.ndarray) -> RangeTerms:
    """Ranges (A, B, ω) over cells, reduced by the interval partition whose
    groups start at `starts` (plus the cell count): (A, B, ω, fa, fb) over groups."""
    a, b, w2 = form
    group_a = np.searchsorted(starts, a, side="right") - 1
    group_b = np.searchsorted(starts, b, side="right") - 1
    size = np.diff(starts).astype(np.float64)
    fa = np.where(
        group_a == group_b,
        (b - a + 1) / size[group_a],
        (starts[group_a + 1] - a) / size[group_a],
    )
    fb = (b - starts[group_b] + 1) / size[group_b]
    return group_a, group_b, w2, fa, fb


def _oracle_for(W: EMatrix, n: int) -> _Oracle:
    form = range_form(W, n)
    if form is not None:
        return _RangeOracle(n, *form)
    reduced = _reduced_range_form(W, n)
    if reduced is not None:
        return _RangeOracle(n, *reduced)
    q = W.shape[0]
    few = q < n or (isinstance(W, Dense) and q <= _ROWS_OVER_CELLS * n)
    if few and q * n <= _MAX_ROWS_ENTRIES:
        return _RowsOracle(_dense_rows(W))
    return _GramOracle(dense_gram(W, n))


def _dense_rows(W: EMatrix) -> np.ndarray:
    """W as a dense q×n array: its own array when Dense, else Wᵀ on blocks of unit rows."""
    if isinstance(W, Dense):
        return W.array
    q, n = W.shape
    block = max(1, min(256, BLOCK_ENTRIES // max(q, n)))
    R = np.empty((q, n))
    for j in range(0, q, block):
        rows = np.zeros((q, min(block, q - j)))
        rows[np.arange(j, j + rows.shape[1]), np.arange(rows.shape[1])] = 1.0
        R[j : j + rows.shape[1]] = W.T.matmat(rows).T
    return R


def _sum_children(child: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Row sums of the consecutive blocks child[start_i : start_i + count_i],
    which tile `child`: strided slices when every block has the same size."""
    c = int(count[0])
    if c > 1 and np.all(count == c) and child.shape[0] == c * count.size:
        out = np.add(child[0::c], child[1::c])
        for j in range(2, c):
            out += child[j::c]
        return out
    return np.add.reduceat(child, start, axis=0)
