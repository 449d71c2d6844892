"""The kernel's own structural rules for a query's sensitivity and integrality.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/sensitivity.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Hierarchy,
    HStack,
    Identity,
    Kronecker,
    Ones,
    Prefix,
    RangeQueries,
    Sparse,
    Suffix,
    Sum,
    Total,
    VStack,
    Wavelet,
    Weighted,
)
from .evaluate import leaf_depths, spread

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from ..matrix.lazy import sparse as sp

__all__ = ["Facts", "facts", "group_separable", "has_rules", "max_abs_entry"]

_VECTOR_LIMIT = 1 << 24  # keep per-column norms as arrays up to this many columns


@dataclass(frozen=True)
class Facts:
    """Public facts about a query that set its noise (upper bounds)."""

    l1: float  # max column L1 norm
    l2: float  # max column L2 norm
    integral: bool  # every entry an integer
    max_column_nnz: int  # non-zeros of any column, at most


@dataclass(frozen=True)
class _Norms:
    """Column norms of one matrix: a scalar when uniform, else a vector (or
    None when only the maximum is known); p=2 norms are squared."""

    top1: float
    top2: float
    col1: np.ndarray | float | None
    col2: np.ndarray | float | None
    integral: bool
    nnz: int


def has_rules(Q: EMatrix) -> bool:
    """True when every node of the expression is covered by a rule here."""
    if type(Q) not in _RULES or (type(Q) is Hierarchy and Q.transposed):
        return False
    children = _children(Q)
    return children is None or all(has_rules(c) for c in children)


def _children(Q: EMatrix) -> list[EMatrix] | None:
    """The operands of a ruled combinator (exact types), or None."""
    t = type(Q)
    if t is Weighted:
        return [cast(Weighted, Q).base]
    if t is VStack or t is HStack:
        return list(cast(VStack | HStack, Q).blocks)
    if t is Kronecker:
        return list(cast(Kronecker, Q).factors)
    if t is Sum:
        return list(cast(Sum, Q).terms)
    return None


def facts(Q: EMatrix) -> Facts:
    """Sensitivities, integrality and a column-nnz bound of a ruled query."""
    n = _norms(Q)
    l1 = _rounded_up(n.top1, n.integral, n.nnz)
    l2 = math.sqrt(_rounded_up(n.top2, n.integral, n.nnz))
    return Facts(l1=l1, l2=l2, integral=n.integral, max_column_nnz=max(1, n.nnz))


def _rounded_up(top: float, integral: bool, nnz: int) -> float:
    """A column sum of non-integers may round down: pad it by its rounding bound."""
    if top > 0 and not integral:
        top *= 1.0 + (nnz + 16) * 2.0**-52
    return float(top)


def _uniform(value: float, integral: bool, nnz: int, value2: float | None = None) -> _Norms:
    v2 = value if value2 is None else value2
    return _Norms(value, v2, value, v2, integral, nnz)


def _from_arrays(col1: np.ndarray, col2: np.ndarray, integral: bool, nnz: int) -> _Norms:
    top1 = float(col1.max()) if col1.size else 0.0
    top2 = float(col2.max()) if col2.size else 0.0
    keep = col1.size <= _VECTOR_LIMIT
    return _Norms(top1, top2, col1 if keep else None, col2 if keep else None, integral, nnz)


def _triangle(Q: Prefix | Suffix) -> _Norms:
    n = int(Q.n)
    if n > _VECTOR_LIMIT:
        return _Norms(float(n), float(n), None, None, True, n)
    col = np.arange(n, 0, -1, dtype=np.float64) if type(Q) is Prefix else np.arange(1.0, n + 1)
    return _from_arrays(col, col, True, n)


def _wavelet(Q: Wavelet) -> _Norms:
    if Q.transposed:  # column j of Wᵀ is row j of W; row 0 covers the whole domain
        return _Norms(float(Q.n), float(Q.n), None, None, True, int(Q.n))
    return _uniform(float(1 + Q.levels), True, 1 + int(Q.levels))


def _dense(Q: Dense) -> _Norms:
    a = np.asarray(Q.array, dtype=np.float64)
    nnz = int((a != 0).sum(axis=0).max(initial=0))
    integral = bool(np.all(a == np.round(a)))
    return _from_arrays(np.abs(a).sum(axis=0), (a * a).sum(axis=0), integral, nnz)


def _diagonal(Q: Diagonal) -> _Norms:
    d = np.asarray(Q.d, dtype=np.float64)
    return _from_arrays(np.abs(d), d * d, bool(np.all(d == np.round(d))), 1)


def _weighted(Q: Weighted) -> _Norms:
    base, w = _norms(Q.base), float(Q.weight)
    if w == 0:
        return _uniform(0.0, True, 0)
    return _Norms(
        abs(w) * base.top1, w * w * base.top2, _map(base.col1, lambda c: c * abs(w)),
        _map(base.col2, lambda c: c * (w * w)), base.integral and w == round(w), base.nnz,
    )  # fmt: skip


def _stacked(Q: VStack | Sum) -> _Norms:
    """Per column the L1 norms add, and so do the squared L2 norms (VStack) or the
    L2 norms themselves (Sum: the triangle inequality, an upper bound)."""
    if isinstance(Q, VStack):
        parts = [_norms(b) for b in Q.blocks]
        return _added(parts, all(p.integral for p in parts), sum(p.nnz for p in parts))
    parts = [_norms(t) for t in Q.terms]
    parts = [replace(p, top2=math.sqrt(p.top2), col2=_map(p.col2, lambda c: c**0.5)) for p in parts]
    nnz = min(sum(p.nnz for p in parts), int(Q.shape[0]))
    total = _added(parts, all(p.integral for p in parts), nnz)
    return replace(total, top2=total.top2**2, col2=_map(total.col2, lambda c: c**2.0))


def _map(col: np.ndarray | float | None, f: Callable[[Any], Any]) -> np.ndarray | float | None:
    return None if col is None else f(col)


def _combined(Q: HStack | Kronecker) -> _Norms:
    """HStack: each column is one block's (the max); Kronecker: the norms multiply."""
    parts, f = [_norms(c) for c in _children(Q) or []], max if type(Q) is HStack else math.prod
    return _Norms(
        f(p.top1 for p in parts), f(p.top2 for p in parts), None, None,
        all(p.integral for p in parts), f(p.nnz for p in parts),
    )  # fmt: skip


def _norms(Q: EMatrix) -> _Norms:
    rule = _RULES.get(type(Q))  # exact types only: a subclass gets no rule
    if rule is None or (isinstance(Q, Hierarchy) and Q.transposed):
        raise TypeError(f"no sensitivity rule for {type(Q).__name__}")  # has_rules() said no
    return rule(Q)


def _added(parts: list[_Norms], integral: bool, nnz: int) -> _Norms:
    """Per-column norms that add up (with the upper bound where unknown)."""
    col1s, col2s = [p.col1 for p in parts], [p.col2 for p in parts]
    if all(isinstance(c, float) for c in col1s + col2s):
        c1 = math.fsum(cast(list[float], col1s))
        c2 = math.fsum(cast(list[float], col2s))
        return _uniform(c1, integral, nnz, c2)
    known1 = [np.asarray(c, dtype=np.float64) for c in col1s if c is not None]
    known2 = [np.asarray(c, dtype=np.float64) for c in col2s if c is not None]
    if len(known1) == len(known2) == len(parts):  # uniform (scalar) norms broadcast
        col1, col2 = sum(known1, np.zeros(1)), sum(known2, np.zeros(1))
        return _from_arrays(col1, col2, integral, nnz)
    top1 = math.fsum(p.top1 for p in parts)  # a safe upper bound: the max of a sum
    top2 = math.fsum(p.top2 for p in parts)
    return _Norms(top1, top2, None, None, integral, nnz)


def _sparse(Q: Sparse) -> _Norms:
    csc = sp.csc_matrix(Q.matrix, dtype=np.float64)
    col1 = np.asarray(abs(csc).sum(axis=0), dtype=np.float64).reshape(-1)
    col2 = np.asarray(csc.multiply(csc).sum(axis=0), dtype=np.float64).reshape(-1)
    counts = np.diff(csc.indptr)
    nnz = int(counts.max()) if counts.size else 0
    return _from_arrays(col1, col2, bool(np.all(csc.data == np.round(csc.data))), nnz)


def _ranges(Q: RangeQueries) -> _Norms:
    """0/1 ranges: a column's norm is its cell's coverage (transposed: a range's size)."""
    lo, hi = np.asarray(Q.lower, dtype=np.int64), np.asarray(Q.upper, dtype=np.int64)
    if Q.transposed:
        sizes = np.prod(hi - lo + 1, axis=1).astype(np.float64)
        top = float(sizes.max(initial=0.0))
        return _Norms(top, top, None, None, True, int(top))
    shape = tuple(int(s) for s in Q.domain_shape)
    cover = spread(shape, lo, hi, np.ones((), np.int64)).astype(np.float64)  # Rᵀ·1, exact
    return _from_arrays(cover, cover, True, int(cover.max(initial=0.0)))


def _hierarchy(H: Hierarchy) -> _Norms:
    """The max over leaf depths L of Σ |w_t|^p along the path (proofs/sensitivity.md H1)."""
    depths = sorted(set(leaf_depths(H).tolist()))  # the kernel's own tree
    ws = H.level_weights
    w = [1.0] * (depths[-1] + 1) if ws is None else [float(v) for v in ws]
    first = 0 if bool(H.root) else 1
    paths = [[*w[first:L], w[L]] for L in depths]  # the ancestors' rows and the leaf's
    top1 = max(0.0, *(math.fsum(abs(v) for v in path) for path in paths))
    top2 = max(0.0, *(math.fsum(v * v for v in path) for path in paths))
    nnz = max(0, *(sum(1 for v in path if v != 0) for path in paths))
    return _Norms(top1, top2, None, None, ws is None or all(v.is_integer() for v in w), nnz)


def max_abs_entry(Q: EMatrix) -> float:
    """max_ij |Q_ij|, exactly or as an upper bound, from the same rules."""
    t, M = type(Q), cast(Any, Q)
    if t in (Identity, Ones, Total, Prefix, Suffix, Wavelet, RangeQueries):
        return 1.0
    if t in (Dense, Sparse, Diagonal):
        a = M.array if t is Dense else M.d if t is Diagonal else sp.csr_matrix(M.matrix).data
        return float(np.abs(np.asarray(a)).max(initial=0.0))
    if t is Hierarchy and not M.transposed:
        return 1.0 if M.level_weights is None else max(abs(float(v)) for v in M.level_weights)
    if t is Weighted:
        return abs(float(M.weight)) * max_abs_entry(M.base)
    children = _children(Q)
    if children is None:
        raise TypeError(f"no rule for {t.__name__}")
    if t is Kronecker:
        return math.prod(max_abs_entry(f) for f in children)
    if t is Sum:
        return math.fsum(max_abs_entry(term) for term in children)
    return max(max_abs_entry(b) for b in children)  # VStack, HStack


_RULES: dict[type, Callable[[Any], _Norms]] = {
    Identity: lambda Q: _uniform(1.0, True, 1),
    Ones: lambda Q: _uniform(float(Q.m), True, int(Q.m)),
    Total: lambda Q: _uniform(float(Q.m), True, int(Q.m)),
    Prefix: _triangle,
    Suffix: _triangle,
    Wavelet: _wavelet,
    RangeQueries: _ranges,
    Dense: _dense,
    Sparse: _sparse,
    Diagonal: _diagonal,
    Hierarchy: _hierarchy,
    Weighted: _weighted,
    VStack: _stacked,
    Sum: _stacked,
    HStack: _combined,
    Kronecker: _combined,
}


def group_separable(Q: EMatrix, shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """True only when every row of `Q` (over cells of `shape`, row-major) weights cells
    of one value of the attributes on `axes` (proofs/sensitivity.md G1); else False."""
    t = type(Q)
    if t is Identity or t is Diagonal:
        return True
    if t is Weighted:
        return group_separable(cast(Weighted, Q).base, shape, axes)
    if t is VStack:
        return all(group_separable(b, shape, axes) for b in cast(VStack, Q).blocks)
    if t is Kronecker:
        fs = cast(Kronecker, Q).factors  # one factor per axis, of its size
        sizes = tuple(int(f.shape[1]) for f in fs)
        return sizes == tuple(shape) and all(_one_per_row(fs[a]) for a in axes)
    if t is Sparse or t is Dense:
        return _rows_in_one_group(Q, shape, axes)
    return False


def _one_per_row(F: EMatrix) -> bool:
    """At most one non-zero in every row of a Kronecker factor."""
    if type(F) is Identity or type(F) is Diagonal:
        return True
    if type(F) in (Ones, Total):
        return int(F.shape[1]) == 1
    if type(F) is Weighted:
        return _one_per_row(F.base)
    if type(F) is Sparse or type(F) is Dense:
        return _rows_in_one_group(F, (int(F.shape[1]),), (0,))
    return False


def _rows_in_one_group(Q: EMatrix, shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """The explicit test: each row's non-zeros share their `axes` coordinates."""
    if isinstance(Q, Dense) and Q.array.size > _VECTOR_LIMIT:
        return False
    m = sp.coo_matrix(Q.matrix if isinstance(Q, Sparse) else cast(Dense, Q).array)
    if m.nnz > _VECTOR_LIMIT or m.shape[1] != math.prod(shape):
        return False
    nonzero = m.data != 0
    rows, cols = m.row[nonzero], m.col[nonzero]
    coords = np.unravel_index(cols, shape)
    group = np.ravel_multi_index(tuple(coords[a] for a in axes), tuple(shape[a] for a in axes))
    first = np.full(m.shape[0], -1, dtype=np.int64)
    first[rows] = group  # any one group of each row; all must equal it
    return bool(np.all(first[rows] == group))
