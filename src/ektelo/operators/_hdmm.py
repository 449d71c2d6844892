"""HDMM: strategies optimised for the workload (McKenna, Miklau, Hay &
Machanavajjhala, "Optimizing Error of High-Dimensional Statistical Queries
Under Differential Privacy", PVLDB 11(10), 2018).

Public operator (paper §5.3, query selection): the strategy depends only on
the workload. Under the Laplace matrix mechanism the expected total squared
error of strategy A on workload W at privacy ε is

    Err(W, A) = (2/ε²) · ‖A‖₁² · ‖W A⁺‖_F² = (2/ε²) · ‖A‖₁² · tr((AᵀA)⁺ WᵀW),

and every parametrisation below has ‖A‖₁ = 1, so only the trace is minimised.

* OPT_0 (HDMM §5.1), p-Identity strategies: A(Θ) = [I; Θ]·D⁻¹ with Θ ≥ 0 of
  shape p×n and D = diag(1 + 1ᵀΘ) (every column has L1 norm 1). With
  M = I + ΘᵀΘ, R = I_p + ΘΘᵀ and Ĝ = D G D (G = WᵀW),

      C(Θ) = tr(M⁻¹ Ĝ) = tr(Ĝ) − ⟨R⁻¹Θ, ΘĜ⟩            (Woodbury),
      ∇C   = −2·R⁻¹ (ΘĜ) M⁻¹ + 2·1_p yᵀ,  y_i = (M⁻¹Ĝ)_ii / d_i,
      (ΘĜ)M⁻¹ = ΘĜ − (ΘĜΘᵀ) R⁻¹ Θ,

  minimised over Θ ≥ 0 by a projected L-BFGS (`_minimise_nonnegative`)
  that stops once the objective stalls, from a slightly perturbed hierarchy
  of intervals (`_interval_levels`; further restarts: seeded random starts,
  entries uniform in [0, 1]). ⟨R⁻¹Θ, ΘĜ⟩ = ⟨R⁻¹, ΘĜΘᵀ⟩, so one evaluation
  costs one product Θ̃·G of the p×n matrix Θ̃ = ΘD with the Gram plus three
  or four p×p×n matrix products: O(p²n) — never an n×n inverse. The Gram is
  applied in closed form where one exists: Prefix, G_ij = n − max(i, j);
  all ranges, G_ij = (min(i, j) + 1)(n − max(i, j)); any other set of m
  weighted 1-D ranges (RandomRange, a d-D range's per-attribute factors)
  through prefix sums, O(p(n + m)), which for m < n also give Θ̃GΘ̃ᵀ in
  O(p²m); else densely, or through the workload's own implicit WᵀW. Cells
  of a run that no range splits share their column of Θ, so m ranges leave
  at most p·(2m + 1) variables (`_opt_p_identity`).
* OPT_⊗ (HDMM §5.2), Kronecker workloads W = W₁ ⊗ … ⊗ W_d: for a Kronecker
  strategy A = A₁ ⊗ … ⊗ A_d, ‖A‖₁ = Π‖A_i‖₁ and
  tr((AᵀA)⁻¹ WᵀW) = Π_i tr((A_iᵀA_i)⁻¹ W_iᵀW_i), so each factor is an
  independent OPT_0 problem. For a union of products W = [W⁽¹⁾; …; W⁽ᵏ⁾] the
  error is Σ_j Π_i tr((A_iᵀA_i)⁻¹ G_i⁽ʲ⁾); cyclic block coordinate descent
  optimises A_i by OPT_0 on the weighted Gram Σ_j c_j G_i⁽ʲ⁾ with
  c_j = Π_{i'≠i} tr((A_i'ᵀA_i')⁻¹ G_i'⁽ʲ⁾) held fixed, which is exact for
  the one-attribute subproblem; a d-dimensional `RangeQueries` is treated as
  the union of its m queries, each a product of 1-D intervals. (HDMM's OPT_+,
  several Kronecker strategies side by side, is not implemented.)
* OPT_M (HDMM §5.3), marginal workloads (unions of Kronecker products of
  Identity and Total): the strategy is a weighted set of all 2^d marginals,
  M(θ) = [θ_a·M_a]_{a ⊆ [d]}, with ‖M(θ)‖₁ = Σθ_a. Every Gram in play is a
  combination of Q_a = ⊗_{i∈a} I ⊗_{i∉a} 11ᵀ, and these share one
  eigenbasis: on the eigenspace indexed by s ⊆ [d] (multiplicity
  Π_{i∈s}(n_i − 1)) the eigenvalue of Σ_a u_a Q_a is
  λ_s(u) = Σ_{a ⊇ s} u_a Π_{i∉a} n_i. Hence, with u = θ² and w the
  workload's Gram coefficients, the error has the closed form

      (Σ_a θ_a)² · Σ_s mult_s · λ_s(w) / λ_s(θ²),

  which is minimised over θ ≥ 0 by L-BFGS-B in O(d·2^d) per evaluation.

`hdmm` runs OPT_0 on a workload without Kronecker structure, OPT_⊗ on one
with it, and also OPT_M on marginal workloads, returning the candidate of
least error. Randomness is a NumPy generator seeded by `seed` (public
computation: the seed only makes the selection reproducible). Being a
deterministic function of public inputs, the result is memoised (`hdmm`).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg.lapack import dtrtrs
from scipy.optimize import Bounds, minimize

from ..matrix import (
    Dense,
    EMatrix,
    Identity,
    Kronecker,
    Ones,
    Product,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ..matrix import Diagonal as _Diagonal
from ..matrix.spec import rebuild, to_spec
from ._greedy_h import _dense_gram, _range_form

__all__ = ["hdmm"]

# OPT_0 refuses problems whose Θ would hold more entries than this.
_MAX_THETA_ENTRIES = 2**24
# A workload Gram is materialised (dense) when the workload has more than this
# many rows per column: applying it implicitly would cost more than G·x.
_DENSE_ROWS_PER_COLUMN = 8
# Up to this size a weighted sum of 1-D range Grams may be formed densely (O(n² + m)) ...
_DENSE_RANGE_GRAM_N = 2048
# ... which it is when its sparse core has more than n²/_SPARSE_CORE_FRACTION entries.
_SPARSE_CORE_FRACTION = 16
# Default p: n/16 extra rows (the paper's choice), at most _P_CAP (see `hdmm`).
_P_CAP = 64
# Projected L-BFGS (`_minimise_nonnegative`): stored curvature pairs, the stall
# test (relative decrease of the objective over a window of iterations),
# Armijo constant and backtracking limit.
_LBFGS_MEMORY = 10
_STALL_WINDOW = 10
_STALL_RTOL = 3e-4
_ARMIJO = 1e-4
_MAX_BACKTRACKS = 40
# OPT_0's first start (`_opt_p_identity`): _START_WEIGHT × a hierarchy of
# intervals (`_interval_levels`) plus _START_NOISE × uniform [0, 1] entries.
# From it the optimiser stopped in 50–70 % of the iterations it needed from a
# uniform [0, 1] start, as low or lower, on Prefix(1024), Prefix(4096) and
# RandomRange(1000) over 4096 cells; weights 0.2–0.5 and noise 0–0.1 did alike.
_START_WEIGHT = 0.3
_START_NOISE = 0.01
# Strategies kept by the memo of `hdmm` (least recently used dropped first).
_CACHE_SIZE = 32


def hdmm(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 1,
    seed: int = 0,
    maxiter: int = 1000,
    rounds: int = 4,
) -> EMatrix:
    """HDMM's strategy optimisation (McKenna et al., PVLDB 2018) for `workload`.

    Args:
        workload: the query matrix (public). Kronecker products, unions of them
            (`VStack` of `Kronecker`, possibly `Weighted`), marginal workloads and
            d-dimensional `RangeQueries` are optimised per attribute; anything
            else is optimised as a whole over its n columns.
        p: extra rows of each p-Identity strategy: an int, or one per attribute.
            Default min(max(1, n_i // 16), 64) for an attribute of n_i cells: the
            paper's n/16, capped because an iteration costs O(p²·n) and more
            iterations are needed as p grows. On Prefix(4096), p = 64 errs 8 %
            more than p = 128 in under a third of the time, and p = 32 another
            15 % more (`benchmarks/bench_strategies_opt.py --tradeoff`).
        restarts: starting points per OPT_0 problem (the best is kept): the
            first a perturbed hierarchy of intervals, the others random. One
            by default: a random start as well never did better on
            Prefix(1024), Prefix(4096), AllRange(1024) or RandomRange(1000)
            over 4096 cells, for 2.5–4× the time.
        seed: seed of the starting points; the result is a deterministic
            function of (workload, p, restarts, seed, maxiter, rounds).
        maxiter: iteration limit per OPT_0/OPT_M problem. OPT_0 usually stops
            earlier, once the objective fell by less than 0.03 % over the last
            10 iterations (within 0.9 % of running to 1500 iterations on the
            four workloads above, at an eighth to a sixth of the time).
        rounds: block coordinate descent sweeps for unions of products.

    Returns:
        An implicit strategy with L1 sensitivity 1 (up to rounding) whose row
        space contains the workload's: a p-Identity matrix, a `Kronecker` of
        them, or a `VStack` of weighted marginals.

    Memoised: the strategy is a public, deterministic function of the
    workload's spec and the arguments, so the results of the last 32 distinct
    calls are kept (keyed by a digest of `ektelo.matrix.to_spec(workload)` and
    the arguments) and a repeated call returns at once. Every call returns a
    fresh copy (`ektelo.matrix.rebuild`), so a caller cannot alter the memo.
    Workloads with classes foreign to `ektelo.matrix` are not memoised.
    `hdmm.cache_clear()` empties the memo.
    """
    key = _cache_key(
        workload,
        (p if p is None or isinstance(p, int) else tuple(p), restarts, seed, maxiter, rounds),
    )
    result = None if key is None else _CACHE.get(key)
    if result is None:
        result = _optimise(
            workload, p=p, restarts=restarts, seed=seed, maxiter=maxiter, rounds=rounds
        )
        if key is not None:
            _CACHE.put(key, result)
    return rebuild(result.strategy)


@dataclass(frozen=True)
class _Result:
    strategy: EMatrix
    error: float  # tr((AᵀA)⁺ WᵀW) with ‖A‖₁ = 1
    method: str  # "OPT_0", "OPT_kron" or "OPT_M"


def _optimise(
    workload: EMatrix,
    *,
    p: int | Sequence[int] | None = None,
    restarts: int = 1,
    seed: int = 0,
    maxiter: int = 1000,
    rounds: int = 4,
) -> _Result:
    if not isinstance(workload, EMatrix):
        raise TypeError(f"workload must be an EMatrix, got {type(workload).__name__}")
    restarts = _int_at_least(restarts, "restarts", 1)
    maxiter = _int_at_least(maxiter, "maxiter", 1)
    rounds = _int_at_least(rounds, "rounds", 1)
    rng = np.random.default_rng(_int_at_least(seed, "seed", 0))
    terms = _product_terms(workload)
    if terms is None:
        dims: tuple[int, ...] = (workload.shape[1],)
        families: list[_Family] = [_FactorFamily([workload])]
        coefs = np.ones(1)
    else:
        dims, families, coefs = terms
    ps = _p_per_attribute(p, dims)
    # BLAS threading is the caller's: the optimisation makes thousands of small
    # and mid-sized BLAS calls, and on a busy machine a threaded BLAS can spend
    # more time synchronising than computing (measured 10–40× slower on two
    # shared cores) — callers who see that pin BLAS to one thread themselves
    # (e.g. threadpoolctl's `threadpool_limits(1, "blas")` around the call).
    kron = _opt_kron(families, coefs, ps, rng, restarts=restarts, maxiter=maxiter, rounds=rounds)
    best = kron
    if len(dims) > 1:
        marg = _marginal_coefficients(workload, dims)
        if marg is not None:
            opt_m = _opt_marginals(marg, dims, rng, restarts=restarts, maxiter=maxiter)
            if opt_m.error < best.error:
                best = opt_m
    return best


def _int_at_least(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}")
    return int(value)


def _p_per_attribute(p: int | Sequence[int] | None, dims: tuple[int, ...]) -> tuple[int, ...]:
    if p is None:
        return tuple(max(1, min(n // 16, _P_CAP)) for n in dims)
    if isinstance(p, (int, np.integer)) and not isinstance(p, bool):
        return (_int_at_least(p, "p", 1),) * len(dims)
    values = tuple(p)
    if len(values) != len(dims):
        raise ValueError(f"p has {len(values)} entries; the workload has {len(dims)} attributes")
    return tuple(_int_at_least(v, "p", 1) for v in values)


# -- Memo of strategies ------------------------------------------------------------


class _StrategyCache:
    """A bounded, thread-safe LRU map from a key to an optimisation result."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple[Any, ...], _Result] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> _Result | None:
        with self._lock:
            result = self._items.get(key)
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
                self._items.move_to_end(key)
            return result

    def put(self, key: tuple[Any, ...], result: _Result) -> None:
        with self._lock:
            self._items[key] = result
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


_CACHE = _StrategyCache(_CACHE_SIZE)
# Like functools.lru_cache's: empties the memo (e.g. to time a first optimisation).
hdmm.cache_clear = _CACHE.clear  # type: ignore[attr-defined]


def _cache_key(workload: EMatrix, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """(digest of the workload's spec, arguments), or None when the workload
    has no spec (a class foreign to ektelo.matrix) or an argument is unhashable."""
    try:
        spec = to_spec(workload)
        hash(params)
    except TypeError:
        return None
    h = hashlib.blake2b(digest_size=32)
    for chunk in _spec_chunks(spec):
        h.update(chunk)
    return (h.hexdigest(), *params)


def _spec_chunks(obj: Any) -> Iterator[bytes]:
    """An unambiguous byte serialisation of a spec (arrays by dtype, shape and bytes)."""
    if isinstance(obj, dict):
        yield b"{%d" % len(obj)
        for k, v in obj.items():
            yield from _spec_chunks(k)
            yield from _spec_chunks(v)
    elif isinstance(obj, (list, tuple)):
        yield b"[%d" % len(obj)
        for v in obj:
            yield from _spec_chunks(v)
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        yield f"a{arr.dtype.str}{arr.shape}:".encode()
        yield arr.tobytes()
    else:
        text = repr(obj).encode()
        yield b"s%d:%s" % (len(text), text)


# -- Gram matrices ---------------------------------------------------------------
#
# The optimiser applies G = WᵀW (n×n, symmetric) to the p rows of Θ̃ = ΘD on
# every evaluation, so each representation below computes X ↦ X·G for a row
# block X (k×n) into a given output, reusing its work arrays between calls
# (fresh multi-megabyte temporaries cost page faults that, at p·n ≈ 10⁵–10⁶,
# took longer than the arithmetic).


class _Gram:
    """G = WᵀW through `rows(X, out)` = X·G and its diagonal; `dense` when it
    is materialised."""

    dense: np.ndarray | None = None

    def __init__(self, n: int, diag: np.ndarray):
        self.n = n
        self.diag = diag
        self._work: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def rows(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """X·G for X of shape (k, n), written into `out` (allocated if None)."""
        if out is None:
            out = np.empty(X.shape)
        self._rows(X, out)
        return out

    def rows_quad(self, X: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """X·G into `out`, and X·G·Xᵀ when this representation has it for less
        than the k×k×n product of X with the rows (else None)."""
        self._rows(X, out)
        return out, None

    def segments(self) -> tuple[_Gram, np.ndarray] | None:
        """(G_r, starts) when G = E G_r Eᵀ for the indicator E of r < n runs of
        consecutive cells (the first cells of the runs in `starts`): cells no
        query tells apart. None when unknown or r = n."""
        return None

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def _array(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A work array kept between calls (not thread-safe; one Gram per optimisation)."""
        arr = self._work.get((name, shape))
        if arr is None:
            arr = self._work[(name, shape)] = np.empty(shape)
        return arr

    def scaled(self, c: float) -> _Gram:
        if c == 1.0:
            return self
        if self.dense is not None:
            return _DenseGram(c * self.dense)
        return _SumGram([(self, c)])

    @staticmethod
    def from_dense(G: np.ndarray) -> _Gram:
        return _DenseGram((G + G.T) / 2)

    @staticmethod
    def of(W: EMatrix) -> _Gram:
        n = W.shape[1]
        if isinstance(W, Identity):
            return _IdentityGram(n)
        form = _range_form(W, n)
        if form is not None:
            return _Gram.ranges(n, *form)
        if W.shape[0] > _DENSE_ROWS_PER_COLUMN * n:
            return _Gram.from_dense(_dense_gram(W, n))
        return _OperatorGram(W)

    @staticmethod
    def ranges(n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> _Gram:
        """Σ_q w_q 1_q 1_qᵀ for intervals [a_q, b_q] (w ≥ 0) in the cheapest
        exact form: closed forms for Prefix-like and all-range workloads
        (O(n) per row), prefix sums around a sparse core (O(n + m) per row),
        or dense when that core is nearly full anyway."""
        keep = np.asarray(w) != 0
        a = np.asarray(a, dtype=np.int64)[keep]
        b = np.asarray(b, dtype=np.int64)[keep]
        w = np.asarray(w, dtype=np.float64)[keep]
        cover = np.bincount(a, w, n + 1) - np.bincount(b + 1, w, n + 1)
        diag = np.cumsum(cover[:n])
        uniform = w.size > 0 and bool(np.all(w == w[0]))
        if uniform and a.size == n and not a.any() and np.array_equal(np.sort(b), np.arange(n)):
            return _PrefixGram(n, float(w[0]), diag)
        if uniform and _is_all_range(n, a, b):
            return _AllRangeGram(n, float(w[0]), diag)
        core = _RangeGram(n, a, b, w, diag)
        if n <= _DENSE_RANGE_GRAM_N and core.H.nnz > n * n // _SPARSE_CORE_FRACTION:
            return _Gram.from_dense(_range_gram(n, a, b, w))
        return core

    @staticmethod
    def combine(grams: Sequence[_Gram], coefs: np.ndarray) -> _Gram:
        """Σ_j c_j G_j (terms with c_j = 0 dropped)."""
        pairs = [(g, float(c)) for g, c in zip(grams, coefs, strict=True) if c != 0]
        if not pairs:
            pairs = [(grams[0], 0.0)]
        if len(pairs) == 1:
            return pairs[0][0].scaled(pairs[0][1])
        n = pairs[0][0].n
        dense = [(g.dense, c) for g, c in pairs if g.dense is not None]
        if len(dense) == len(pairs):
            total = np.zeros((n, n))
            for G, c in dense:
                total += c * G
            return _Gram.from_dense(total)
        return _SumGram(pairs)


class _DenseGram(_Gram):
    def __init__(self, G: np.ndarray):
        super().__init__(G.shape[0], np.diag(G).copy())
        self.dense = G

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        np.matmul(X, self.dense, out=out)


class _IdentityGram(_Gram):
    def __init__(self, n: int):
        super().__init__(n, np.ones(n))

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        np.copyto(out, X)


class _OperatorGram(_Gram):
    """G through the workload's own implicit WᵀW."""

    def __init__(self, W: EMatrix):
        super().__init__(W.shape[1], np.asarray(W.column_norms(2), dtype=np.float64))
        self.op = W.gram()

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        out[...] = self.op.matmat(np.ascontiguousarray(X.T)).T


class _SumGram(_Gram):
    """Σ_j c_j G_j."""

    def __init__(self, pairs: Sequence[tuple[_Gram, float]]):
        diag = np.zeros(pairs[0][0].n)
        for g, c in pairs:
            diag += c * g.diag
        super().__init__(pairs[0][0].n, diag)
        self.pairs = list(pairs)

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        part = self._array("part", X.shape)
        out.fill(0.0)
        for g, c in self.pairs:
            g._rows(X, part)
            part *= c
            out += part


def _suffix_sums_after(T: np.ndarray, out: np.ndarray, scratch: np.ndarray) -> None:
    """out[:, j] += Σ_{i > j} T[:, i] (row-wise), using `scratch` (same shape)."""
    n = T.shape[1]
    if n > 1:
        np.cumsum(T[:, :0:-1], axis=1, out=scratch[:, : n - 1])
        out[:, : n - 1] += scratch[:, n - 2 :: -1]


class _PrefixGram(_Gram):
    """Prefix: G_ij = n − max(i, j), so (XG)_j = (n−j)·Σ_{i≤j} x_i + Σ_{i>j} (n−i)·x_i."""

    def __init__(self, n: int, weight: float, diag: np.ndarray):
        super().__init__(n, diag)
        self.weight = weight
        self.right = n - np.arange(n, dtype=np.float64)  # n − j

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        T = self._array("t", X.shape)
        np.cumsum(X, axis=1, out=out)
        out *= self.right
        np.multiply(X, self.right, out=T)
        _suffix_sums_after(T, out, self._array("s", X.shape))
        if self.weight != 1.0:
            out *= self.weight


class _AllRangeGram(_Gram):
    """All ranges: G_ij = (min(i,j) + 1)(n − max(i,j)), so
    (XG)_j = (n−j)·Σ_{i≤j} (i+1)·x_i + (j+1)·Σ_{i>j} (n−i)·x_i."""

    def __init__(self, n: int, weight: float, diag: np.ndarray):
        super().__init__(n, diag)
        self.weight = weight
        self.left = np.arange(1, n + 1, dtype=np.float64)  # i + 1
        self.right = n - np.arange(n, dtype=np.float64)  # n − i

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        T = self._array("t", X.shape)
        U = self._array("u", X.shape)
        np.multiply(X, self.left, out=T)
        np.cumsum(T, axis=1, out=out)
        out *= self.right
        np.multiply(X, self.right, out=T)
        U.fill(0.0)
        _suffix_sums_after(T, U, self._array("s", X.shape))
        U *= self.left
        out += U
        if self.weight != 1.0:
            out *= self.weight


class _RangeGram(_Gram):
    """Σ_q w_q 1_q 1_qᵀ through prefix sums: W = C·P̃ with P̃x = (0, x₀, x₀+x₁, …)
    and C_q = e_{b_q+1} − e_{a_q}, so G = P̃ᵀ Cᵀ diag(w) C P̃. Two ways to apply
    it to a row block X (k×n), both O(k(n + m)):

    * fewer intervals than cells (m < n): the answers U = C P̃ Xᵀ (m×k, U_q =
      X·1_q) are differences of two columns of the running sums of X's rows,
      and X·G is the running sum of the difference array holding +w_q·U_q at
      column a_q and −w_q·U_q at b_q + 1; the same U gives X G Xᵀ =
      Uᵀ diag(w) U (`rows_quad`) in O(k²m) instead of O(k²n);
    * otherwise through the sparse core H = Cᵀ diag(w) C, (n+1)×(n+1) with at
      most min(4m, (n+1)²) entries, applied to the running sums down P̃Xᵀ.
    """

    def __init__(self, n: int, a: np.ndarray, b: np.ndarray, w: np.ndarray, diag: np.ndarray):
        super().__init__(n, diag)
        # Repeated intervals are one term of summed weight.
        key, inverse = np.unique(
            np.asarray(a, dtype=np.int64) * (n + 1) + np.asarray(b, dtype=np.int64),
            return_inverse=True,
        )
        self.w = np.bincount(inverse.ravel(), np.asarray(w, dtype=np.float64), key.size)
        self.lo = key // (n + 1)
        self.hi = key % (n + 1) + 1
        lo, hi, w = self.lo, self.hi, self.w
        self.H = sp.csr_matrix(
            (
                np.concatenate([w, w, -w, -w]),
                (np.concatenate([lo, hi, lo, hi]), np.concatenate([lo, hi, hi, lo])),
            ),
            shape=(n + 1, n + 1),
        )
        self.H.sum_duplicates()
        self._scatter: dict[int, np.ndarray] = {}

    def _rows(self, X: np.ndarray, out: np.ndarray) -> None:
        if self.w.size < self.n:
            self._by_answers(X, out, quad=False)
        else:
            self._by_core(X, out)

    def rows_quad(self, X: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if self.w.size < self.n:
            return out, self._by_answers(X, out, quad=True)
        self._by_core(X, out)
        return out, None

    def _by_core(self, X: np.ndarray, out: np.ndarray) -> None:
        n, k = self.n, X.shape[0]
        Y = self._array("y", (n + 1, k))  # P̃Xᵀ, column-major for the sparse product
        Y[0] = 0.0
        np.cumsum(X.T, axis=0, out=Y[1:])
        Z = self.H @ Y  # symmetric H: (X P̃ᵀ H)ᵀ
        # (P̃ᵀz)_i = Σ_{j > i} z_j
        S = self._array("s", (n, k))
        np.cumsum(Z[:0:-1], axis=0, out=S)
        out[...] = S[::-1].T

    def _by_answers(self, X: np.ndarray, out: np.ndarray, quad: bool) -> np.ndarray | None:
        n, k, m = self.n, X.shape[0], self.w.size
        # Row-major throughout: NumPy's running sum along a row is ~1.7× faster
        # than down the columns, and a transposed copy of a p×n block costs about
        # as much as one sum.
        P = self._array("p", (k, n + 1))
        P[:, 0] = 0.0
        np.cumsum(X, axis=1, out=P[:, 1:])
        U = P[:, self.hi]
        U -= P[:, self.lo]
        E = self._array("e", (k, 2 * m))  # [w·U, −w·U], added into columns a_q and b_q + 1
        np.multiply(U, self.w, out=E[:, :m])
        np.negative(E[:, :m], out=E[:, m:])
        D = self._array("d", (k, n + 1))
        D.fill(0.0)
        np.add.at(D.reshape(-1), self._positions(k), E.reshape(-1))
        np.cumsum(D[:, :n], axis=1, out=out)
        return E[:, :m] @ U.T if quad else None

    def segments(self) -> tuple[_Gram, np.ndarray] | None:
        # Runs between consecutive interval ends: an interval covers whole runs.
        starts = np.unique(np.concatenate([[0], self.lo, self.hi]))
        starts = starts[starts < self.n]
        if starts.size == self.n:
            return None
        a = np.searchsorted(starts, self.lo)  # the run that begins at a_q
        b = np.searchsorted(starts, self.hi) - 1  # the run that ends at b_q
        return _Gram.ranges(starts.size, a, b, self.w), starts

    def _positions(self, k: int) -> np.ndarray:
        """Flat indices into a k×(n+1) array of the entries of E: row r's
        columns a_q, then b_q + 1."""
        pos = self._scatter.get(k)
        if pos is None:
            cols = np.concatenate([self.lo, self.hi])
            pos = self._scatter[k] = (np.arange(k)[:, None] * (self.n + 1) + cols).ravel()
        return pos


def _is_all_range(n: int, a: np.ndarray, b: np.ndarray) -> bool:
    """The intervals are every interval of [0, n), each exactly once."""
    if a.size != n * (n + 1) // 2 or a.size == 0:
        return False
    return bool(np.bincount(a * n + b, minlength=n * n).max() == 1)


def _range_gram(n: int, a: np.ndarray, b: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """Σ_q ω_q 1_q 1_qᵀ for intervals [a_q, b_q], in O(n² + m): for i ≤ j the
    entry counts the queries with a ≤ i and b ≥ j (a 2-D dominance sum)."""
    C = np.zeros((n, n))
    np.add.at(C, (a, b), w2)
    S = np.cumsum(C, axis=0)[:, ::-1].cumsum(axis=1)[:, ::-1]
    upper = np.triu(S)
    return upper + np.triu(S, 1).T


# -- OPT_0: p-Identity strategies ---------------------------------------------


class _PIdentityObjective:
    """C(Θ) = tr((A(Θ)ᵀA(Θ))⁻¹ G) and its gradient (module docstring), with
    the p×n work arrays allocated once. Per evaluation: one product Θ̃·G, three
    p×p×n matrix products (a fourth, Θ̃GΘ̃ᵀ, when the Gram does not give it for
    less, `_Gram.rows_quad`) and never an n×n solve."""

    def __init__(self, gram: _Gram, p: int, sizes: np.ndarray | None = None):
        self.gram, self.p, self.n = gram, p, gram.n
        # √s per merged cell (`_opt_p_identity`), None for single cells (s = 1).
        self.root = None if sizes is None else np.sqrt(sizes)
        self._scaled = np.empty((p, self.n))
        self._product = np.empty((p, self.n))
        self._work = np.empty((p, self.n))

    def __call__(self, x: np.ndarray, grad: np.ndarray, scale: float = 1.0) -> float:
        """scale·C at Θ = x.reshape(p, n); scale·∇C is written into `grad` (same
        size). The scale is folded into p×p factors, saving passes over p×n arrays.

        With `sizes` s (runs of cells merged, `_opt_p_identity`), this Gram is
        G_r with G = E G_r Eᵀ (E the n×r run indicator), and x holds
        Z = Θ_r diag(√s) for the Θ equal to Θ_r[:, c] on every cell of run c.
        Then ΘΘᵀ = ZZᵀ, ΘĜΘᵀ = X G_r Xᵀ with X = Θ_r diag(s·d) = Z diag(e),
        and tr Ĝ = Σ_c (G_r)_cc e_c², where e = √s·d = √s + 1ᵀZ: the expression
        below with Z for Θ and e for d. So is the gradient in Z (∇C summed over
        each run, divided by √s), and the Euclidean metric on Z is the one on
        Θ: the optimiser takes the full problem's steps, restricted to
        run-constant Θ."""
        p = self.p
        theta = x.reshape(p, self.n)
        d = theta.sum(axis=0)
        d += 1.0 if self.root is None else self.root
        np.multiply(theta, d, out=self._scaled)
        B, K = self.gram.rows_quad(self._scaled, self._product)  # Θ̃G, Θ̃GΘ̃ᵀ = ΘĜΘᵀ
        B *= d  # Θ Ĝ, Ĝ = D G D
        if K is None:
            K = theta @ B.T
        R = theta @ theta.T
        R.flat[:: p + 1] += 1.0
        # R = I + ΘΘᵀ has every eigenvalue ≥ 1: its small explicit inverse is accurate.
        R_inv = np.linalg.inv(R)
        diag_hat = self.gram.diag * d**2
        value = float(diag_hat.sum() - np.vdot(R_inv, K))  # tr Ĝ − ⟨R⁻¹Θ, ΘĜ⟩
        c = 2.0 * scale
        V = np.matmul(R_inv * -c, B, out=self._work)  # −c·R⁻¹ΘĜ
        # ∇ = 2(R⁻¹KR⁻¹Θ − R⁻¹ΘĜ) + 2·1yᵀ, y_i = (M⁻¹Ĝ)_ii / d_i.
        y = (c * diag_hat + np.einsum("ij,ij->j", theta, V)) / d
        out = grad.reshape(p, self.n)
        np.matmul((R_inv @ K @ R_inv) * c, theta, out=out)
        out += V
        out += y
        return value * scale


def _p_identity_objective(theta: np.ndarray, gram: _Gram) -> tuple[float, np.ndarray]:
    """C(Θ) and its gradient (allocating; the optimiser reuses one `_PIdentityObjective`)."""
    grad = np.empty(theta.shape)
    value = _PIdentityObjective(gram, theta.shape[0])(np.ascontiguousarray(theta), grad)
    return value, grad


def _p_identity_value(theta: np.ndarray, gram: _Gram) -> float:
    if theta.shape[0] == 0 or not theta.any():
        return float(gram.diag.sum())
    return _p_identity_objective(theta, gram)[0]


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """aᵀb for vectors, by BLAS (a threaded BLAS dot on a busy machine was
    measured at milliseconds: callers may pin BLAS to one thread)."""
    return float(np.dot(a, b))


def _minimise_nonnegative(
    fun: Callable[[np.ndarray, np.ndarray], float],
    x0: np.ndarray,
    *,
    maxiter: int,
    memory: int = _LBFGS_MEMORY,
    window: int = _STALL_WINDOW,
    rtol: float = _STALL_RTOL,
) -> tuple[np.ndarray, float]:
    """Projected L-BFGS for min f(x) subject to x ≥ 0; returns (x, f(x)).

    `fun(x, g)` returns f(x) and writes ∇f(x) into g. The direction is the
    L-BFGS product with the projected gradient, zeroed on the variables held
    at their bound (x = 0 with ∂f > 0); the step is an Armijo backtracking
    search along the projection arc max(x + t·d, 0). It stops after `maxiter`
    iterations, when f fell by no more than rtol·|f| over the last `window`
    iterations, or when no descent step is found.

    Written for this problem instead of SciPy's L-BFGS-B, whose per-iteration
    overhead (≈100–200 ns per variable, Cauchy-point breakpoint search) was
    3–10× the cost of the objective itself here. With 10⁵–10⁶ variables the
    stored pairs outgrow the caches and the iteration is bound by memory
    traffic, so they are kept as the rows of one float32 matrix and the
    product uses the compact form of the inverse Hessian (Byrd, Nocedal &
    Schnabel, Math. Prog. 63, 1994, eq. 3.1): three passes over it per
    iteration instead of the two-loop recursion's 4·memory vector passes at
    twice the width (measured 11 → 5.5 ms per iteration at 64×4096 variables).
    float32 only shapes the direction, which is still checked for descent
    against the float64 gradient, and every step is taken in float64.
    """
    N = x0.size
    m = memory
    x = np.maximum(x0, 0.0)
    g = np.empty(N)
    f = fun(x, g)
    x_new, g_new = np.empty(N), np.empty(N)
    q, u = np.empty(N), np.empty(N)  # projected gradient, then the step s; H·q, then y
    q32, u32 = np.empty(N, dtype=np.float32), np.empty(N, dtype=np.float32)
    positive, free = np.empty(N, dtype=bool), np.empty(N, dtype=bool)
    pairs = np.zeros((2 * m, N), dtype=np.float32)  # s_i in row i, y_i in row m + i
    sy = np.zeros((m, m))  # s_iᵀy_j (used for i ≤ j in storage order)
    yy = np.zeros((m, m))  # y_iᵀy_j
    order: list[int] = []  # rows of the stored pairs, oldest first
    pending = -1  # the newest pair, its products with the others not yet taken
    sy_new = yy_new = 1.0  # that pair's sᵀy and yᵀy, in float64
    history = [f]
    for _ in range(maxiter):
        if not math.isfinite(f):
            break
        np.greater(x, 0.0, out=positive)
        np.less_equal(g, 0.0, out=free)
        np.logical_or(free, positive, out=free)  # may move: x > 0 or ∂f ≤ 0
        np.multiply(g, free, out=q)  # the projected gradient
        if order:
            idx = np.array(order)
            if pending >= 0:  # the newest pair's products with the stored ones
                col = (pairs @ pairs[m + pending]).astype(np.float64)
                sy[idx, pending] = col[idx]
                yy[idx, pending] = yy[pending, idx] = col[m + idx]
                sy[pending, pending], yy[pending, pending] = sy_new, yy_new  # exact
                pending = -1
            np.copyto(q32, q, casting="same_kind")
            prods = (pairs @ q32).astype(np.float64)  # Sᵀq and Yᵀq
            # In storage order: R = the upper triangle of SᵀY (all LAPACK's trtrs
            # reads), D = diag(R), and
            # H = γI + [S γY]·[[R⁻ᵀ(D + γYᵀY)R⁻¹, −R⁻ᵀ], [−R⁻¹, 0]]·[Sᵀ; γYᵀ].
            R = sy[idx][:, idx]
            newest = order[-1]
            gamma = sy[newest, newest] / yy[newest, newest]
            c1 = dtrtrs(R, prods[idx])[0]
            rhs = np.diag(R) * c1 + gamma * (yy[idx][:, idx] @ c1 - prods[m + idx])
            coef = np.zeros(2 * m, dtype=np.float32)
            coef[idx] = dtrtrs(R, rhs, trans=1)[0]
            coef[m + idx] = -gamma * c1
            np.matmul(coef, pairs, out=u32)
            np.multiply(q, gamma, out=u)
            u += u32  # H·q
            u *= free
            slope = _dot(g, u)
        else:
            slope = 0.0
        if not slope > 0.0:  # no pairs, or not a descent direction: −∇, scaled
            order.clear()
            pending = -1
            largest = max(float(q.max()), -float(q.min()))
            if largest == 0.0:
                break
            np.multiply(q, 1.0 / largest, out=u)
        # Step x − t·u on the projection arc; s = x_new − x goes into q.
        t, accepted = 1.0, False
        for _ in range(_MAX_BACKTRACKS):
            if t == 1.0:
                np.subtract(x, u, out=x_new)
            else:
                np.multiply(u, -t, out=x_new)
                x_new += x
            np.maximum(x_new, 0.0, out=x_new)
            f_new = fun(x_new, g_new)
            np.subtract(x_new, x, out=q)
            if f_new <= f + _ARMIJO * _dot(g, q):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            if not order:
                break
            order.clear()  # retry along the projected steepest descent
            pending = -1
            continue
        np.subtract(g_new, g, out=u)  # y
        sy_step, yy_step = _dot(q, u), _dot(u, u)
        if sy_step > 1e-12 * yy_step:  # keep pairs with positive curvature only
            slot = order.pop(0) if len(order) == m else min(set(range(m)) - set(order))
            pairs[slot] = q
            pairs[m + slot] = u
            order.append(slot)
            pending, sy_new, yy_new = slot, sy_step, yy_step
        x, x_new = x_new, x
        g, g_new = g_new, g
        f = f_new
        history.append(f)
        if len(history) > window and history[-1 - window] - f <= rtol * abs(f):
            break
    return x, f


def _opt_p_identity(
    gram: _Gram,
    p: int,
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Θ minimising C(Θ) over Θ ≥ 0: the best of `restarts` starts (the first a
    perturbed hierarchy of intervals, `_interval_levels`; the others with
    entries uniform in [0, 1]), `start` (if given) and Θ = 0 (the Identity).

    When no query tells apart the cells of a run of consecutive cells
    (`_Gram.segments`: the r ≤ 2m + 1 runs between the ends of m ranges), Θ
    is optimised constant on each run, in p×r variables (`_PIdentityObjective`
    with `sizes`). The runs refine the εktelo paper's workload-based partition
    (§"Workload-based partition selection"), but here the strategy stays a
    p-Identity strategy on all n cells. On RandomRange(1000) over 4096 cells
    (r = 1544) the run-constant optimum erred 0.1 % more than the unrestricted
    one after as many iterations, each 2.6× cheaper."""
    n = gram.n
    if p * n > _MAX_THETA_ENTRIES:
        raise ValueError(
            f"OPT_0 with p = {p} on {n} cells needs {p * n} parameters (limit "
            f"{_MAX_THETA_ENTRIES}); give the workload Kronecker structure or a smaller p"
        )
    best = np.zeros((p, n))
    best_value = float(gram.diag.sum())
    if best_value <= 0:
        return best, 0.0
    scale = 1.0 / best_value  # the Identity strategy scores 1
    runs = gram.segments()
    if runs is None:
        objective = _PIdentityObjective(gram, p)
    else:
        merged, first = runs
        length = np.diff(np.append(first, n))
        objective = _PIdentityObjective(merged, p, length.astype(np.float64))
        root = np.sqrt(length)

    def variables(theta: np.ndarray) -> np.ndarray:
        """The optimiser's variables for Θ (Z = run means of Θ times √s, see
        `_PIdentityObjective`; Θ itself without runs)."""
        return theta if runs is None else np.add.reduceat(theta, first, axis=1) / root

    def fun(x: np.ndarray, grad: np.ndarray) -> float:
        return objective(x, grad, scale)

    starts = [] if start is None else [variables(start)]
    for k in range(restarts):
        noise = rng.uniform(0.0, 1.0, size=(p, n))
        if k == 0:  # the first start: a hierarchy of intervals, slightly perturbed
            noise *= _START_NOISE
            noise += _START_WEIGHT * _interval_levels(p, n)
        starts.append(variables(noise))
    for x0 in starts:
        x, f = _minimise_nonnegative(fun, x0.reshape(-1), maxiter=maxiter)
        if f / scale < best_value:
            best_value = f / scale
            z = x.reshape(p, -1)
            best = z.copy() if runs is None else np.repeat(z / root, length, axis=1)
    return best, best_value


def _interval_levels(p: int, n: int) -> np.ndarray:
    """p rows of interval indicators in levels, coarsest first, each level
    cutting [0, n) into equal intervals; from the finest, each level takes
    three quarters of the rows left (p = 64: levels of 1, 3, 12 and 48
    intervals, like a hierarchy of branching 3–4). OPT_0's first start,
    weighted (`_START_WEIGHT`)."""
    counts: list[int] = []
    left = p
    while left > 0:
        k = max(1, left - left // 4)
        counts.append(k)
        left -= k
    rows = np.zeros((p, n))
    r = 0
    for k in reversed(counts):
        edges = np.linspace(0, n, k + 1).round().astype(np.int64)
        for i in range(k):
            rows[r, edges[i] : edges[i + 1]] = 1.0
            r += 1
    return rows


def _p_identity_matrix(theta: np.ndarray) -> EMatrix:
    """A(Θ) = [I; Θ]·D⁻¹ without its all-zero rows (Identity when Θ = 0)."""
    n = theta.shape[1]
    rows = theta[theta.any(axis=1)]
    if rows.shape[0] == 0:
        return Identity(n)
    d = 1.0 + rows.sum(axis=0)
    extra: EMatrix = Sparse(rows) if np.count_nonzero(rows) < 0.25 * rows.size else Dense(rows)
    return Product(VStack([Identity(n), extra]), _Diagonal(1.0 / d))


# -- OPT_⊗: one p-Identity strategy per attribute --------------------------------


class _Family:
    """The k terms' factors on one attribute of n cells."""

    n: int

    def weighted_gram(self, coefs: np.ndarray) -> _Gram:  # pragma: no cover - interface
        raise NotImplementedError

    def values(self, theta: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        """tr((A(Θ)ᵀA(Θ))⁻¹ G_j) for every term j."""
        raise NotImplementedError


class _FactorFamily(_Family):
    """Explicit factor matrices, one per term."""

    def __init__(self, factors: Sequence[EMatrix]):
        cache: dict[EMatrix, _Gram] = {}  # equal factors (value semantics) share a Gram
        for f in factors:
            if f not in cache:
                cache[f] = _Gram.of(f)
        self.grams = [cache[f] for f in factors]
        self.n = self.grams[0].n

    def weighted_gram(self, coefs: np.ndarray) -> _Gram:
        return _Gram.combine(self.grams, coefs)

    def values(self, theta: np.ndarray) -> np.ndarray:
        memo: dict[int, float] = {}
        for g in self.grams:
            if id(g) not in memo:
                memo[id(g)] = _p_identity_value(theta, g)
        return np.array([memo[id(g)] for g in self.grams])


class _RangeFamily(_Family):
    """Term j is the single interval [a_j, b_j] (a d-D range's j-th side)."""

    def __init__(self, n: int, a: np.ndarray, b: np.ndarray):
        self.n, self.a, self.b = n, a, b

    def weighted_gram(self, coefs: np.ndarray) -> _Gram:
        return _Gram.ranges(self.n, self.a, self.b, coefs)

    def values(self, theta: np.ndarray) -> np.ndarray:
        # 1_qᵀ D M⁻¹ D 1_q = ‖D 1_q‖² − (ΘD1_q)ᵀ R⁻¹ (ΘD1_q).
        d = 1.0 + theta.sum(axis=0)
        sq = np.concatenate(([0.0], np.cumsum(d**2)))
        out = sq[self.b + 1] - sq[self.a]
        if theta.shape[0] and theta.any():
            Y = np.hstack([np.zeros((theta.shape[0], 1)), np.cumsum(theta * d, axis=1)])
            Z = Y[:, self.b + 1] - Y[:, self.a]
            R_inv = np.linalg.inv(np.eye(theta.shape[0]) + theta @ theta.T)
            out = out - np.sum(Z * (R_inv @ Z), axis=0)
        return out


def _flatten_kron(M: EMatrix) -> list[EMatrix]:
    if isinstance(M, Kronecker):
        return [g for f in M.factors for g in _flatten_kron(f)]
    return [M]


def _kron_terms(W: EMatrix) -> list[tuple[float, list[EMatrix]]] | None:
    """W = [c₁·K₁; c₂·K₂; …] with Kronecker products K_j (nested ones flattened)
    as [(c_j², factors of K_j)], or None when W is not such a stack."""
    terms: list[tuple[float, list[EMatrix]]] = []

    def collect(M: EMatrix, coef: float) -> bool:
        if isinstance(M, Weighted):
            return collect(M.base, coef * M.weight**2)
        if isinstance(M, VStack):
            return all(collect(b, coef) for b in M.blocks)
        if isinstance(M, Kronecker):
            terms.append((coef, _flatten_kron(M)))
            return True
        return False

    return terms if collect(W, 1.0) else None


def _product_terms(
    W: EMatrix,
) -> tuple[tuple[int, ...], list[_Family], np.ndarray] | None:
    """W as a union of products: (attribute sizes, one family per attribute,
    squared weight per term), or None when W has no usable product structure."""
    if isinstance(W, RangeQueries) and not W.transposed and len(W.domain_shape) > 1:
        fams: list[_Family] = [
            _RangeFamily(n, W.lower[:, i], W.upper[:, i]) for i, n in enumerate(W.domain_shape)
        ]
        return W.domain_shape, fams, np.ones(W.num_queries)
    terms = _kron_terms(W)
    if terms is None:
        return None
    dims = tuple(f.shape[1] for f in terms[0][1])
    if len(dims) < 2 or any(tuple(f.shape[1] for f in t[1]) != dims for t in terms):
        return None
    families: list[_Family] = [_FactorFamily([t[1][i] for t in terms]) for i in range(len(dims))]
    return dims, families, np.array([t[0] for t in terms])


def _opt_kron(
    families: Sequence[_Family],
    coefs: np.ndarray,
    ps: tuple[int, ...],
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
    rounds: int,
) -> _Result:
    d = len(families)
    thetas = [np.zeros((0, f.n)) for f in families]  # Θ with no rows: the Identity
    # values[i, j] = tr((A_iᵀA_i)⁻¹ G_i⁽ʲ⁾) for the current strategies.
    values = np.array([f.values(t) for f, t in zip(families, thetas, strict=True)])
    total = float(np.sum(coefs * values.prod(axis=0)))
    single = coefs.size == 1
    for sweep in range(1 if single else rounds):
        for i, fam in enumerate(families):
            others = np.prod(np.delete(values, i, axis=0), axis=0)
            weights = coefs * others
            start = thetas[i] if sweep > 0 else None
            theta, _ = _opt_p_identity(
                fam.weighted_gram(weights),
                ps[i],
                rng,
                restarts=restarts if sweep == 0 else 0,
                maxiter=maxiter,
                start=start,
            )
            thetas[i] = theta
            values[i] = fam.values(theta)
        new_total = float(np.sum(coefs * values.prod(axis=0)))
        converged = new_total > total * (1 - 1e-6)
        total = new_total
        if converged:
            break
    factors = [_p_identity_matrix(t) for t in thetas]
    strategy = factors[0] if d == 1 else Kronecker(factors)
    return _Result(strategy, total, "OPT_0" if d == 1 else "OPT_kron")


# -- OPT_M: weighted marginals ----------------------------------------------------


def _marginal_factor(M: EMatrix) -> tuple[float, float] | None:
    """(α, β) with MᵀM = α·I + β·11ᵀ, for Identity, Ones/Total and their multiples."""
    if isinstance(M, Identity):
        return 1.0, 0.0
    if isinstance(M, Ones):
        return 0.0, float(M.shape[0])
    if isinstance(M, Weighted):
        inner = _marginal_factor(M.base)
        return None if inner is None else (inner[0] * M.weight**2, inner[1] * M.weight**2)
    return None


def _marginal_coefficients(W: EMatrix, dims: tuple[int, ...]) -> np.ndarray | None:
    """w with WᵀW = Σ_a w_a Q_a (bit i of a set ⇔ Identity on attribute i)."""
    terms = _kron_terms(W)
    if terms is None:
        return None
    d = len(dims)
    w = np.zeros(2**d)
    for coef, factors in terms:
        parts = [pt for pt in map(_marginal_factor, factors) if pt is not None]
        if len(parts) != d or len(factors) != d:
            return None
        for a in range(2**d):
            term = coef
            for i, (alpha, beta) in enumerate(parts):
                term *= alpha if a >> i & 1 else beta
            w[a] += term
    return w


def _superset_sum(v: np.ndarray, d: int) -> np.ndarray:
    """out[s] = Σ_{a ⊇ s} v[a] over bitmasks."""
    out = v.astype(np.float64).copy()
    for i in range(d):
        bit = 1 << i
        idx = np.arange(2**d)
        low = idx[(idx & bit) == 0]
        out[low] += out[low | bit]
    return out


def _subset_sum(v: np.ndarray, d: int) -> np.ndarray:
    """out[a] = Σ_{s ⊆ a} v[s] over bitmasks."""
    out = v.astype(np.float64).copy()
    for i in range(d):
        bit = 1 << i
        idx = np.arange(2**d)
        high = idx[(idx & bit) != 0]
        out[high] += out[high ^ bit]
    return out


@dataclass(frozen=True)
class _MarginalAlgebra:
    d: int
    complement_size: np.ndarray  # Π_{i∉a} n_i per mask a
    multiplicity: np.ndarray  # Π_{i∈s} (n_i − 1) per mask s

    @staticmethod
    def of(dims: tuple[int, ...]) -> _MarginalAlgebra:
        d = len(dims)
        masks = np.arange(2**d)
        comp = np.ones(2**d)
        mult = np.ones(2**d)
        for i, n in enumerate(dims):
            inside = (masks >> i & 1).astype(bool)
            comp = np.where(inside, comp, comp * n)
            mult = np.where(inside, mult * (n - 1), mult)
        return _MarginalAlgebra(d, comp, mult)

    def eigenvalues(self, coef: np.ndarray) -> np.ndarray:
        """λ_s of Σ_a coef_a Q_a."""
        return _superset_sum(coef * self.complement_size, self.d)


def _marginal_objective(
    theta: np.ndarray, weight: np.ndarray, alg: _MarginalAlgebra
) -> tuple[float, np.ndarray]:
    """(Σθ)²·Σ_s c_s / λ_s(θ²) with c_s = mult_s λ_s(w), and its gradient."""
    lam = alg.eigenvalues(theta**2)
    need = weight > 0
    if np.any(lam[need] <= 0):
        return math.inf, np.zeros_like(theta)
    inv = np.zeros_like(lam)
    inv[need] = weight[need] / lam[need]
    trace = float(inv.sum())
    total = float(theta.sum())
    sq = np.zeros_like(lam)
    sq[need] = weight[need] / lam[need] ** 2
    d_trace_du = -alg.complement_size * _subset_sum(sq, alg.d)
    grad = 2.0 * total * trace + total**2 * 2.0 * theta * d_trace_du
    return total**2 * trace, grad


def _opt_marginals(
    w: np.ndarray,
    dims: tuple[int, ...],
    rng: np.random.Generator,
    *,
    restarts: int,
    maxiter: int,
) -> _Result:
    alg = _MarginalAlgebra.of(dims)
    weight = alg.multiplicity * alg.eigenvalues(w)
    best = np.zeros(2**alg.d)
    best[-1] = 1.0  # the full-dimensional marginal: the Identity strategy
    best_value = _marginal_objective(best, weight, alg)[0]
    scale = 1.0 / best_value if best_value > 0 else 1.0

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = _marginal_objective(x, weight, alg)
        return value * scale, grad * scale

    for _ in range(restarts):
        res = minimize(
            fun,
            rng.uniform(0.0, 1.0, size=2**alg.d),
            jac=True,
            method="L-BFGS-B",
            bounds=Bounds(0.0, np.inf),
            options={"maxiter": maxiter},
        )
        theta = np.maximum(res.x, 0.0)
        if theta.sum() <= 0:
            continue
        theta = theta / theta.sum()
        value = _marginal_objective(theta, weight, alg)[0]
        if value < best_value:
            best, best_value = theta, value
    return _Result(_marginals_matrix(best, dims), best_value, "OPT_M")


def _marginals_matrix(theta: np.ndarray, dims: tuple[int, ...]) -> EMatrix:
    blocks: list[EMatrix] = []
    for a in np.nonzero(theta > 0)[0]:
        factors: list[EMatrix] = [
            Identity(n) if a >> i & 1 else Total(n) for i, n in enumerate(dims)
        ]
        blocks.append(Weighted(Kronecker(factors), float(theta[a])))
    return blocks[0] if len(blocks) == 1 else VStack(blocks)
