"""The evaluation of multiplicative weights' passes (`multiplicative_weights`
documents the update; Hardt, Ligett & McSherry, NeurIPS 2012): the measured
rows as steps — blocks of pairwise disjoint rows that are constant on runs
of cells (ranges, totals, identities), n-D boxes, and general sparse rows —
and the passes over them, cyclic (the literal loop's result, blocks
vectorised through their running-mass recurrence) or simultaneous.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..matrix import EMatrix, Identity, Ones, RangeQueries, Total, VStack, Weighted
from ._system import ConvergenceError, Estimate, SolveInfo

# A measurement's query on the unknowns and its answers.
Rows = tuple[EMatrix, np.ndarray]

# The ufuncs' own reductions: the hot MW loops call them ~10⁵ times per plan
# run, and NumPy's Python-level wrappers (ndarray.sum, .min, np.cumsum) cost
# about a microsecond per call on top.
_add, _min, _max = np.add.reduce, np.minimum.reduce, np.maximum.reduce


_MAX_EXPONENT = 700.0
# The running mass is brought back to T when it leaves [T·1e-150, T·1e150].
_MASS_RANGE = 1e150
# Disjoint blocks with more rows than this use the vectorised recurrence.
_BLOCK_VECTOR_ROWS = 8
# Fixed-point iteration of a block's running mass: accept when no exponent
# moves by more than this; give up (literal loop) after this many steps.
_BLOCK_EXPONENT_TOL = 1e-13
_BLOCK_MAX_STEPS = 30
# Later steps of that iteration update the factors e ← e·exp(δ) by Taylor
# terms: first order up to |δ| ≤ 2⁻²⁷, second order up to 1e-5, else exp.
_TAYLOR_FIRST = 2.0**-27
_TAYLOR_SECOND = 1e-5


def _empty() -> np.ndarray:
    return np.zeros(0)


@dataclass
class _Scratch:
    """A vectorised block's work arrays: `work` rows 0–6 hold beta·p, [S_0, d],
    the first guess, pull, fresh, z and e; `p` the rows' masses, `ones` a row
    of L ones. Blocks with holes either gather the rows' cells into `rows`
    (when they cover little of the span) or sum every chunk into `masses`
    and multiply the span by `factors`, every chunk's factor (1 in the holes,
    which stay so)."""

    work: np.ndarray
    p: np.ndarray
    ones: np.ndarray
    rows: np.ndarray | None = None
    factors: np.ndarray | None = None
    masses: np.ndarray | None = None


@dataclass
class SegBlock:
    """Pairwise disjoint rows, each the constant `value` on cells lo..hi of
    the flat vector, in update order (with their answers and weights)."""

    lo: np.ndarray
    hi: np.ndarray
    value: np.ndarray
    answer: np.ndarray
    weight: np.ndarray
    # Vectorised evaluation (blocks of many rows, sorted by position): the
    # span x[start:stop] they cover, its cut points interleaving rows and the
    # gaps between them, the lengths of [row, gap, row, ..., gap, row], and
    # exponent_r = alpha_r − beta_r·p_r/S (p_r: x's mass on row r, S: the
    # running mass before row r).
    vectorised: bool = False
    start: int = 0
    stop: int = 0
    cuts: np.ndarray = field(default_factory=_empty)
    lengths: np.ndarray = field(default_factory=_empty)
    alpha: np.ndarray = field(default_factory=_empty)
    beta: np.ndarray = field(default_factory=_empty)
    alpha_range: tuple[float, float] = (0.0, 0.0)
    beta_top: float = 0.0  # max(beta)
    # The running masses before each row (and after the block) of the last
    # passes, newest at history[slot − 1] (a ring of `_HISTORY` rows, one for
    # huge blocks), with those passes' starting masses; `count` rows hold
    # data. The next pass's first guess extrapolates them (see
    # `_predict_masses`).
    history: np.ndarray | None = None
    history_starts: np.ndarray | None = None
    history_count: int = 0
    history_slot: int = 0
    # work arrays reused by every pass (blocks of up to _SCRATCH_ROWS rows)
    # instead of ~10 fresh arrays of m per pass
    scratch: _Scratch | None = None
    # Regular blocks (every row of one length L, aligned to multiples of L
    # from `start`): the span is x[start:stop].reshape(-1, L), one row of it
    # per chunk; chunks no row covers (holes) are left out of the
    # recurrence and keep the factor 1.
    width: int = 0  # L, or 0 when not regular
    chunks: np.ndarray | None = None  # the rows' chunks when there are holes


@dataclass
class _BoxRow:
    """One row: the constant `value` on an n-D box of x reshaped to `shape`."""

    shape: tuple[int, ...]
    box: tuple[slice, ...]
    value: float
    answer: float
    weight: float


@dataclass
class _GeneralRow:
    """One row with arbitrary entries `q` on the cells `idx`."""

    idx: np.ndarray
    q: np.ndarray
    answer: float
    weight: float


Step = SegBlock | _BoxRow | _GeneralRow


def _segments_of(Q: EMatrix, scale: float) -> list[tuple[str, Any]]:
    """Q's rows, in order, as pieces: ("seg", (lo, hi, value)) for rows that
    are a constant on a contiguous run of flat cells, ("box", (shape, lo,
    hi, value)) for n-D ranges, ("rows", csr) for anything else. Queries are
    read from their structure; only unknown kinds are materialised."""
    n = Q.shape[1]
    if type(Q) is RangeQueries and not Q.transposed:
        m = Q.shape[0]
        value = np.full(m, scale)
        if len(Q.domain_shape) == 1:
            return [("seg", (Q.lower[:, 0], Q.upper[:, 0], value))]
        return [("box", (Q.domain_shape, Q.lower, Q.upper, value))]
    if type(Q) in (Ones, Total):
        m = Q.shape[0]
        return [("seg", (np.zeros(m, np.int64), np.full(m, n - 1, np.int64), np.full(m, scale)))]
    if type(Q) is Identity:
        cells = np.arange(n, dtype=np.int64)
        return [("seg", (cells, cells, np.full(n, scale)))]
    if type(Q) is Weighted:
        return _segments_of(Q.base, scale * Q.weight)
    if type(Q) is VStack:
        return [piece for block in Q.blocks for piece in _segments_of(block, scale)]
    csr = Q.sparse().tocsr(copy=True)
    csr.sum_duplicates()
    csr.sort_indices()
    if scale != 1.0:
        csr.data *= scale
    return [("rows", csr)]


def _csr_pieces(csr: Any) -> list[tuple[str, Any]]:
    """Split materialised rows (canonical CSR) into runs of rows that are a
    constant on a contiguous run of cells ("seg": rows, lo, hi, value) and
    single other rows ("general": row, cells, entries); empty rows are
    dropped (their update changes nothing)."""
    indptr, indices, data = csr.indptr, csr.indices.astype(np.int64), csr.data
    lengths = np.diff(indptr)
    rows = np.flatnonzero(lengths > 0)
    if rows.size == 0:
        return []
    head, tail = indptr[rows], indptr[rows + 1] - 1
    lo, hi, lead = indices[head], indices[tail], data[head]
    constant = np.ones(rows.size, dtype=bool)
    differs = np.flatnonzero(data != np.repeat(lead, lengths[rows]))
    constant[np.searchsorted(head, differs, side="right") - 1] = False
    seg = constant & (hi - lo + 1 == lengths[rows])
    pieces: list[tuple[str, Any]] = []
    cuts = np.flatnonzero(np.diff(seg.astype(np.int8))) + 1
    for part in np.split(np.arange(rows.size), cuts):
        if seg[part[0]]:
            pieces.append(("seg", (rows[part], lo[part], hi[part], lead[part].astype(float))))
        else:
            for i in part:
                cells = slice(indptr[rows[i]], indptr[rows[i] + 1])
                pieces.append(("general", (rows[i], indices[cells], data[cells].copy())))
    return pieces


def mw_steps(rows: list[Rows], weights: list[float], n: int, T: float) -> list[Step]:
    """Every measured row in update order, grouped into disjoint blocks."""
    steps: list[Step] = []
    run: list[tuple[np.ndarray, ...]] = []  # seg pieces of the open block
    covered = np.zeros(n + 1, dtype=np.int64)  # prefix counts of the block's cells

    def close() -> None:
        if run:
            parts = [np.concatenate(c) for c in zip(*run, strict=True)]
            # a block may be cut anywhere (each piece is still exact): cut it
            # where positions decrease, so that every piece is sorted
            cuts = np.flatnonzero(np.diff(parts[0]) < 0) + 1
            for piece in zip(*(np.split(c, cuts) for c in parts), strict=True):
                steps.append(_seg_block(list(piece), n, T))
            run.clear()
            covered[:] = 0

    def add_segs(lo: np.ndarray, hi: np.ndarray, value: np.ndarray, a: np.ndarray, w: float):
        keep = value != 0  # a zero row leaves x unchanged
        lo, hi, value, a = lo[keep], hi[keep], value[keep], a[keep]
        if lo.size == 0:
            return
        order = np.argsort(lo, kind="stable")
        disjoint = bool(np.all(hi[order][:-1] < lo[order][1:]))
        if disjoint:
            if np.any(covered[hi + 1] - covered[lo] > 0):
                close()
            _mark(covered, lo, hi)
            run.append((lo, hi, value, a, np.full(lo.size, w)))
            return
        for i in range(lo.size):  # overlapping rows: grow blocks row by row
            if covered[hi[i] + 1] - covered[lo[i]] > 0:
                close()
            _mark(covered, lo[i : i + 1], hi[i : i + 1])
            run.append(
                (lo[i : i + 1], hi[i : i + 1], value[i : i + 1], a[i : i + 1], np.array([w]))
            )

    for (Q, y), w in zip(rows, weights, strict=True):
        answers = np.asarray(y, dtype=np.float64)
        row = 0
        for kind, piece in _segments_of(Q, 1.0):
            if kind == "seg":
                lo, hi, value = piece
                add_segs(lo, hi, value, answers[row : row + lo.size], w)
                row += lo.size
            elif kind == "box":
                shape, lo, hi, value = piece
                close()
                for i in range(lo.shape[0]):
                    if value[i] != 0:
                        box = tuple(
                            slice(int(a), int(b) + 1) for a, b in zip(lo[i], hi[i], strict=True)
                        )
                        steps.append(
                            _BoxRow(shape, box, float(value[i]), float(answers[row + i]), w)
                        )
                row += lo.shape[0]
            else:
                csr = piece
                for sub_kind, sub in _csr_pieces(csr):
                    if sub_kind == "seg":
                        at, lo, hi, value = sub  # (`at`: the rows within the piece)
                        add_segs(lo, hi, value, answers[row + at], w)
                    else:
                        close()
                        r, idx, q = sub
                        steps.append(_GeneralRow(idx, q, float(answers[row + r]), w))
                row += csr.shape[0]
    close()
    return steps


def _mark(covered: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    """Add the cells lo..hi (disjoint runs) to the prefix counts `covered`."""
    mask = np.diff(covered) > 0
    diff = np.zeros(mask.size + 1, dtype=np.int64)
    np.add.at(diff, lo, 1)
    np.add.at(diff, hi + 1, -1)
    mask |= np.cumsum(diff[:-1]) > 0
    covered[1:] = np.cumsum(mask)


def _seg_block(parts: list[np.ndarray], n: int, T: float) -> SegBlock:
    """A block of disjoint rows sorted by position."""
    lo, hi, value, answer, weight = parts
    block = SegBlock(lo, hi, value, answer, weight)
    if lo.size > _BLOCK_VECTOR_ROWS:
        block.vectorised = True
        block.start, block.stop = int(lo[0]), int(hi[-1]) + 1
        # exponent_r = w v (a − T v p / S) / (2T) = alpha_r − beta_r · p_r / S
        alpha = weight * value * answer / (2.0 * T)
        beta = weight * value * value / 2.0
        width = int(hi[0] - lo[0]) + 1
        chunks = (block.stop - block.start) // width
        offset = lo - block.start
        if np.all(hi - lo + 1 == width) and np.all(offset % width == 0):
            block.width = width
            if chunks > lo.size:  # holes: the rows' chunks only, gathered
                block.chunks = offset // width
            block.alpha, block.beta = alpha, beta
        else:
            cuts = np.empty(2 * lo.size, dtype=np.int64)
            cuts[0::2], cuts[1::2] = offset, hi + 1 - block.start
            block.cuts = cuts[:-1]  # on x[start:stop]
            block.lengths = np.diff(cuts)  # row, gap, row, ..., row
            block.alpha, block.beta = alpha, beta
        block.alpha_range = (float(block.alpha.min()), float(block.alpha.max()))
        block.beta_top = float(block.beta.max())
    return block


def mw_cyclic(
    steps: list[Step], x: np.ndarray, T: float, passes: int, tol: float | None
) -> int:
    """Up to `passes` cycles of the sequential MW update over `steps` (see
    `multiplicative_weights`), on x in place; returns the passes run (fewer
    once a pass moves no entry by more than tol·T). x is kept unnormalised
    with running mass S: the estimate is T·x/S, renormalised after every pass."""
    S = _renormalise(x, T)
    for done in range(1, passes + 1):
        before = None if tol is None else x.copy()
        for step in steps:
            if isinstance(step, SegBlock):
                if step.vectorised:
                    S = _segs_vectorised(step, x, T, S)
                else:
                    S = _segs_literal(step, x, T, S)
            elif isinstance(step, _BoxRow):
                view = x.reshape(step.shape)[step.box]
                S = _constant_update(view, step.value, step.answer, step.weight, x, T, S)
            else:
                S = _general_update(step, x, T, S)
        S = _renormalise(x, T)
        if tol is not None and before is not None and _largest_move(before, x) <= tol * T:
            return done
    return passes


def _largest_move(before: np.ndarray, after: np.ndarray) -> float:
    before -= after
    return max(float(_max(before)), -float(_min(before))) if before.size else 0.0


def _constant_update(
    view: np.ndarray,
    value: float,
    answer: float,
    weight: float,
    x: np.ndarray,
    T: float,
    S: float,
) -> float:
    """The literal update for one row equal to `value` on the cells of
    `view` (a view into x); returns the new running mass."""
    p = float(_add(view, axis=None))
    z = weight * value * (answer - T * value * p / S) / (2.0 * T)
    z = min(max(z, -_MAX_EXPONENT), _MAX_EXPONENT)
    view *= math.exp(z)
    S += p * math.expm1(z)
    if not (T / _MASS_RANGE < S < T * _MASS_RANGE):
        S = _renormalise(x, T)
    return S


def _segs_literal(block: SegBlock, x: np.ndarray, T: float, S: float) -> float:
    """The literal loop over the rows of a block."""
    lo, hi, value, answer, weight = block.lo, block.hi, block.value, block.answer, block.weight
    for r in range(lo.size):
        view = x[int(lo[r]) : int(hi[r]) + 1]
        S = _constant_update(view, float(value[r]), float(answer[r]), float(weight[r]), x, T, S)
    return S


def _segs_vectorised(block: SegBlock, x: np.ndarray, T: float, S0: float) -> float:
    """All rows of a disjoint block at once. The running masses before each
    row solve S_r = S_0 + Σ_{j<r} p_j·expm1(z_j), z_j = alpha_j − beta_j·p_j/S_j;
    they are found by fixed-point iteration started from the previous
    passes' masses (extrapolated, `_predict_masses`), accepted when no
    exponent moves by more than the tolerance; then x is multiplied row by
    row. Falls back to the literal loop if the iteration does not settle or
    the mass leaves the safe range.

    Only the first step evaluates exp: later steps move each exponent by a
    tiny δ (the iteration contracts fast), and e·exp(δ) is e·(1 + δ) when
    |δ| ≤ 2⁻²⁷ (δ²/2 is below half an ulp), e·(1 + δ + δ²/2) when
    |δ| ≤ 10⁻⁵ (δ³/6 below one ulp), else exp(z) afresh. With the
    extrapolated guess, most passes settle at the first check (one exp, one
    cumulative sum)."""
    span = x[block.start : block.stop]
    L = block.width
    chunks = block.chunks
    buf = block.scratch
    if buf is None:
        buf = _scratch(block)
    if chunks is not None and L == 1:
        p = span.take(chunks, out=buf.p, mode="clip")  # (valid: no buffering)
    elif chunks is not None and buf.rows is not None:  # rows cover little of the span
        rows = span.reshape(-1, L).take(chunks, axis=0, out=buf.rows, mode="clip")
        p = np.matmul(rows, buf.ones, out=buf.p)
    elif chunks is not None:  # every chunk's mass (contiguous), then the rows'
        assert buf.masses is not None
        every = np.matmul(span.reshape(-1, L), buf.ones, out=buf.masses)
        p = every.take(chunks, out=buf.p, mode="clip")
    elif L == 1:
        p = span  # read only until the final multiplication
    elif L > 1:
        p = np.matmul(span.reshape(-1, L), buf.ones, out=buf.p)
    else:
        # rows' masses: every other chunk of x's span (a zero-length gap
        # gives a junk entry there, unused)
        p = np.add.reduceat(span, block.cuts)[0::2].copy()
    m = p.size
    alpha = block.alpha
    work = buf.work
    beta = np.multiply(block.beta, p, out=work[0, :m])
    # acc[r] = S_0 + Σ_{j<r} d_j (the mass before row r; acc[m] after the
    # block), summed in the literal loop's order as the cumsum of [S_0, d];
    # the first guess is extrapolated into work[2], and the sums go to the
    # history's free row
    inc = work[1]
    inc[0] = S0
    d = inc[1:]
    acc = _predict_masses(block, S0, work[2])
    history = block.history
    assert history is not None
    target = history[block.history_slot]
    mass = acc[:-1]
    low, high = block.alpha_range
    pull = work[3, :m]  # beta/S of the masses behind the current factors e
    fresh = work[4, :m]
    z, e = work[5, :m], work[6, :m]
    S, settled, last_move, clipped = math.nan, False, math.inf, False
    for step in range(_BLOCK_MAX_STEPS):
        np.divide(beta, mass, out=fresh)
        final, move = False, math.inf
        if step > 0:
            np.subtract(pull, fresh, out=z)  # δ = z_new − z_old
            move = max(float(_max(z)), -float(_min(z)))  # NaN if any is
            if move <= _BLOCK_EXPONENT_TOL:
                settled = True  # e and d (from the previous masses) stand
                break
            # the iteration contracts by q per step: the new masses are within
            # move·q/(1 − q) of the fixed point's, in exponent terms
            q = move / last_move if math.isfinite(last_move) else 1.0
            final = q < 0.5 and move * q / (1.0 - q) <= _BLOCK_EXPONENT_TOL
            last_move = move
        pull, fresh = fresh, pull
        if move <= _TAYLOR_SECOND and not clipped:
            if move > _TAYLOR_FIRST:  # z ← δ(1 + δ/2)
                np.multiply(z, 0.5, out=d)
                d += 1.0
                z *= d
            np.multiply(e, z, out=d)  # e ← e + e·δ(…)
            e += d
        else:
            smallest = float(_min(mass))
            if not smallest > 0:  # (rounding only: the masses are positive)
                break
            np.subtract(alpha, pull, out=z)
            # z ≥ low − max(beta)/smallest, and beta_r = block.beta_r·p_r ≤
            # beta_top·S_0 (a row's mass is at most x's, S_0 up to rounding):
            # that bound spares the pass over beta unless it is near the limit
            clipped = high > _MAX_EXPONENT or (
                low - 2.0 * block.beta_top * S0 / smallest < -_MAX_EXPONENT
                and low - float(beta.max()) / smallest < -_MAX_EXPONENT
            )
            if clipped:
                np.clip(z, -_MAX_EXPONENT, _MAX_EXPONENT, out=z)
            np.exp(z, out=e)  # the factors; exp(z) − 1 is exact enough for the mass:
        np.multiply(p, e, out=d)  # its error p·2⁻⁵² is the literal loop's own
        d -= p
        if final:
            S = S0 + float(_add(d))
            settled = True
            break
        acc = target
        mass = acc[:-1]
        np.add.accumulate(inc, out=acc)
        S = float(acc[-1])
    if not (settled and T / _MASS_RANGE < S < T * _MASS_RANGE) or acc is not target:
        block.history_count = 0  # (a settled block has summed into target)
    if not (settled and T / _MASS_RANGE < S < T * _MASS_RANGE):
        return _segs_literal(block, x, T, S0)
    _remember_masses(block, S0)
    if chunks is not None and L == 1:  # p holds those cells' values
        span[chunks] = np.multiply(p, e, out=p)
        return S
    if chunks is not None and buf.rows is not None:  # the rows' cells only
        np.multiply(buf.rows, e[:, None], out=buf.rows)
        span.reshape(-1, L)[chunks] = buf.rows
        return S
    if chunks is not None:  # every chunk's factor (1 in the holes)
        assert buf.factors is not None
        buf.factors[chunks] = e
        e = buf.factors
    if L == 1:
        span *= e
    elif L > 1 and L <= 4:  # (strided products beat broadcasting here)
        for j in range(L):
            span[j::L] *= e
    elif L > 1:
        view = span.reshape(-1, L)
        view *= e[:, None]
    else:
        factors = np.ones(block.lengths.size)
        factors[0::2] = e
        span *= np.repeat(factors, block.lengths)
    return S


def _scratch(block: SegBlock) -> _Scratch:
    """The block's work arrays and an empty history; kept on the block up to
    _SCRATCH_ROWS rows (beyond, fresh each pass and one history row, as
    memory matters more there than allocation)."""
    m = block.alpha.size
    L = max(block.width, 1)
    chunks = block.chunks
    buf = _Scratch(work=np.empty((7, m + 1)), p=np.empty(m), ones=np.ones(L))
    if chunks is not None and L > 1 and 8 * m * L < block.stop - block.start:
        buf.rows = np.empty((m, L))  # the rows cover little of the span: gather them
    elif chunks is not None and L > 1:  # every chunk's mass, then the rows'
        buf.masses = np.empty((block.stop - block.start) // L)
        buf.factors = np.ones(buf.masses.size)  # stays 1 in the holes
    if block.history is None:
        depth = _HISTORY if m <= _SCRATCH_ROWS else 1
        block.history = np.zeros((depth, m + 1))  # zeros: weight 0 · row is 0
        block.history_starts = np.zeros(depth)
    if m <= _SCRATCH_ROWS:
        block.scratch = buf
    return buf


def _predict_masses(block: SegBlock, S0: float, out: np.ndarray) -> np.ndarray:
    """The first guess of this pass's running masses: the last passes' mass
    profiles (masses minus their start) extrapolated by the polynomial
    through them (order count − 1, at most _HISTORY − 1: weights
    (−1)^i·C(k+1, i+1) on the i-th newest), plus S_0. The profiles change
    smoothly from pass to pass once MW settles, so the guess is typically
    within 1e-13 in exponent terms (one step settles) where the last
    profile alone is ~1e-8 off (three steps)."""
    count = block.history_count
    history, starts = block.history, block.history_starts
    assert history is not None and starts is not None
    if count == 0:
        out.fill(S0)
        return out
    depth = history.shape[0]
    weights = _EXTRAPOLATION[depth][count - 1, block.history_slot]
    np.matmul(weights, history, out=out)
    out += S0 - float(weights @ starts)
    return out


def _remember_masses(block: SegBlock, S0: float) -> None:
    """Record the masses just summed into history[slot] (and their start)."""
    assert block.history is not None and block.history_starts is not None
    depth = block.history.shape[0]
    block.history_starts[block.history_slot] = S0
    block.history_slot = (block.history_slot + 1) % depth
    block.history_count = min(block.history_count + 1, depth)


def _extrapolation_weights(depth: int) -> np.ndarray:
    """weights[k, slot]: the order-k extrapolation's weight on each ring row
    when the next row to write is `slot` (newest at slot − 1)."""
    weights = np.zeros((depth, depth, depth))
    for k in range(depth):
        for slot in range(depth):
            for i in range(k + 1):
                weights[k, slot, (slot - 1 - i) % depth] = (-1) ** i * math.comb(k + 1, i + 1)
    return weights


# Extrapolate the running masses from this many passes (order 5: the guess
# settles ~70% of 2-D mwem_b's blocks at the first check, order 2 ~6%);
# blocks above _SCRATCH_ROWS rows keep one (the last masses, shifted).
_HISTORY = 6
_SCRATCH_ROWS = 1 << 18
_EXTRAPOLATION = {depth: _extrapolation_weights(depth) for depth in (1, _HISTORY)}


def _general_update(row: _GeneralRow, x: np.ndarray, T: float, S: float) -> float:
    old = x[row.idx]
    qx = T * float((row.q * old).sum()) / S
    expo = row.weight * row.q * ((row.answer - qx) / (2.0 * T))
    np.clip(expo, -_MAX_EXPONENT, _MAX_EXPONENT, out=expo)
    new = old * np.exp(expo)
    x[row.idx] = new
    S += float(new.sum() - old.sum())
    if not (T / _MASS_RANGE < S < T * _MASS_RANGE):
        S = _renormalise(x, T)
    return S


def _renormalise(x: np.ndarray, T: float) -> float:
    s = float(x.sum())
    if not (s > 0 and math.isfinite(s)):
        info = SolveInfo("mw", False, 0, 0, "mass underflow", math.nan, math.nan)
        raise ConvergenceError(
            "multiplicative weights lost all mass (noise far larger than the total?)",
            Estimate(x.copy(), info),
        )
    x *= T / s
    return T


def mw_simultaneous(
    rows: list[Rows], weights: list[float], x: np.ndarray, T: float, passes: int,
    tol: float | None,
) -> int:  # fmt: skip
    """As `_mw_cyclic`, all queries of a pass at once."""
    blocks = [Q if w == 1.0 else Weighted(Q, w) for (Q, _), w in zip(rows, weights, strict=True)]
    Qw = blocks[0] if len(blocks) == 1 else VStack(blocks)
    Q = VStack([Q for Q, _ in rows]) if len(rows) > 1 else rows[0][0]
    QwT = Qw.T
    y = np.concatenate([y for _, y in rows])
    for done in range(1, passes + 1):
        before = None if tol is None else x.copy()
        err = y - Q.matvec(x)
        expo = np.clip(QwT.matvec(err) / (2.0 * T), -_MAX_EXPONENT, _MAX_EXPONENT)
        x *= np.exp(expo)
        _renormalise(x, T)
        if tol is not None and before is not None and _largest_move(before, x) <= tol * T:
            return done
    return passes
