"""The kernel's own evaluation of Q·x for the queries its sensitivity rules cover.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/evaluate.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from ..matrix.lazy import sparse as sp

__all__ = ["Tree", "evaluate", "leaf_depths", "tree"]


def evaluate(Q: EMatrix, X: np.ndarray) -> np.ndarray:
    """Q·X (X of shape (n, k)) by the kernel's own rules; TypeError for a type
    outside them (the kernel materialises those first)."""
    rule = _EVAL.get(type(Q))  # exact types only, as the sensitivity rules
    if rule is None or (isinstance(Q, Hierarchy) and Q.transposed):
        raise TypeError(f"no evaluation rule for {type(Q).__name__}")
    out: np.ndarray = rule(Q, np.asarray(X, dtype=np.float64))
    return out


def _wavelet(Q: Wavelet, X: np.ndarray) -> np.ndarray:
    levels = int(Q.n).bit_length() - 1
    if not Q.transposed:  # row 0 the total, then per level: left half − right half
        parts, sums = [], X
        for _ in range(levels):
            parts.append(sums[0::2] - sums[1::2])
            sums = sums[0::2] + sums[1::2]
        return np.concatenate([sums, *reversed(parts)], axis=0)
    values, start = X[0:1], 1  # Wᵀ: spread each level's coefficients back down
    for level in range(levels):
        coef = X[start : start + (1 << level)]
        nxt = np.empty((2 * values.shape[0], X.shape[1]))
        nxt[0::2], nxt[1::2] = values + coef, values - coef
        values, start = nxt, start + (1 << level)
    return values


def _corners(a: np.ndarray, b: np.ndarray) -> Iterator[tuple[tuple[np.ndarray, ...], int]]:
    """Inclusion–exclusion over the 2^d corners of each box: per corner, each axis'
    column of `b` where the corner's bit is set (else of `a`), and (−1)^(bits set)."""
    for corner in range(1 << a.shape[1]):
        bits = [corner >> axis & 1 for axis in range(a.shape[1])]
        yield tuple((b if bit else a)[:, axis] for axis, bit in enumerate(bits)), (-1) ** sum(bits)


def box_sums(shape: tuple[int, ...], lo: np.ndarray, hi: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Σ of X (shape (N, k)) over each box [lo_i, hi_i] (inclusive), from prefix sums."""
    P = np.zeros((*[s + 1 for s in shape], X.shape[1]))
    P[tuple(slice(1, None) for _ in shape)] = X.reshape(*shape, X.shape[1])
    for axis in range(len(shape)):
        np.cumsum(P, axis=axis, out=P)
    out = np.zeros((lo.shape[0], X.shape[1]))
    for index, sign in _corners(hi + 1, lo):
        out += sign * P[index]
    return out


def spread(shape: tuple[int, ...], lo: np.ndarray, hi: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Rᵀ·Y for the 0/1 boxes R (Y of shape (m, …)): each box adds its row of Y to its
    cells, by a difference array."""
    diff = np.zeros((*[s + 1 for s in shape], *Y.shape[1:]), dtype=Y.dtype)
    for index, sign in _corners(lo, hi + 1):
        np.add.at(diff, index, sign * Y)
    for axis in range(len(shape)):
        np.cumsum(diff, axis=axis, out=diff)
    return diff[tuple(slice(0, s) for s in shape)].reshape(-1, *Y.shape[1:])


def _ranges(Q: RangeQueries, X: np.ndarray) -> np.ndarray:
    lo, hi = np.asarray(Q.lower, dtype=np.int64), np.asarray(Q.upper, dtype=np.int64)
    return (spread if Q.transposed else box_sums)(tuple(int(s) for s in Q.domain_shape), lo, hi, X)


@dataclass(frozen=True)
class Tree:
    """A `Hierarchy`'s rows as the kernel rebuilt them from its public fields."""

    leaf_depth: np.ndarray  # per cell (C order), the depth where it is a leaf
    lower: np.ndarray  # inner nodes' boxes (rows after the N leaves), inclusive
    upper: np.ndarray
    depth: np.ndarray  # each inner node's depth


def _axis_parts(side: int, b: int, height: int) -> list[tuple[np.ndarray, ...]]:
    """Per depth 0..height: the parts of one axis as (start, size, parent,
    position among the parent's children, the parent's number of children)."""
    start, size = np.zeros(1, np.int64), np.full(1, side, np.int64)
    none = np.zeros(1, np.int64)
    levels: list[tuple[np.ndarray, ...]] = [(start, size, none, none, np.ones(1, np.int64))]
    for _ in range(height):
        k = np.minimum(size, b)  # a part of one cell stays itself (one child)
        parent = np.repeat(np.arange(size.size), k)
        pos = np.arange(parent.size) - np.repeat(np.cumsum(k) - k, k)
        q, r = size[parent] // k[parent], size[parent] % k[parent]
        child_size = q + (pos < r)  # larger parts first
        child_start = start[parent] + pos * q + np.minimum(pos, r)
        levels.append((child_start, child_size, parent, pos, k[parent]))
        start, size = child_start, child_size
    return levels


def _tree_axes(H: Hierarchy) -> tuple[tuple[int, ...], int, list[list[tuple[np.ndarray, ...]]]]:
    shape = tuple(int(s) for s in H.domain_shape)
    b, height = int(H.branching), 0
    while b**height < max(shape):
        height += 1
    return shape, height, [_axis_parts(s, b, height) for s in shape]


def leaf_depths(H: Hierarchy) -> np.ndarray:
    """Per cell (C order), the depth where it becomes a leaf: the first depth at
    which every axis' part holding it has one cell."""
    _, height, axes = _tree_axes(H)
    leaf = np.zeros(1, np.int64)
    for parts in axes:
        depth_of = np.full(int(parts[0][1][0]), height, np.int64)
        for t in range(height, -1, -1):
            one = parts[t][1] == 1
            depth_of[parts[t][0][one]] = t
        leaf = np.maximum.outer(leaf, depth_of).reshape(-1)
    return leaf


def tree(H: Hierarchy) -> Tree:
    """The rows of `H` (not transposed) from its fields (module docstring)."""
    shape, height, axes = _tree_axes(H)
    leaf = leaf_depths(H)
    first = 0 if H.root else 1
    empty = np.zeros((0, len(shape)), np.int64)
    lowers, uppers, depths = [empty], [empty], [np.zeros(0, np.int64)]
    for t in range(first, height):
        grids = np.meshgrid(*(np.arange(parts[t][0].size) for parts in axes), indexing="ij")
        index = [g.reshape(-1) for g in grids]
        inner = np.zeros(index[0].size, dtype=bool)
        for a, parts in enumerate(axes):
            inner |= parts[t][1][index[a]] > 1
        index = [i[inner] for i in index]
        keys = []  # per depth u ≤ t, the node's child index (C order) within its parent
        chain = list(index)
        for u in range(t, 0, -1):
            lin = np.zeros(chain[0].size, np.int64)
            for a, parts in enumerate(axes):
                lin = lin * parts[u][4][chain[a]] + parts[u][3][chain[a]]
            keys.append(lin)
            chain = [parts[u][2][chain[a]] for a, parts in enumerate(axes)]
        order = np.lexsort(keys) if keys else np.arange(index[0].size)  # last key: depth 1
        lo = np.stack([axes[a][t][0][index[a][order]] for a in range(len(shape))], axis=1)
        size = np.stack([axes[a][t][1][index[a][order]] for a in range(len(shape))], axis=1)
        lowers.append(lo)
        uppers.append(lo + size - 1)
        depths.append(np.full(lo.shape[0], t, np.int64))
    return Tree(leaf, np.concatenate(lowers), np.concatenate(uppers), np.concatenate(depths))


def _hierarchy(H: Hierarchy, X: np.ndarray) -> np.ndarray:
    T = tree(H)
    weights = None if H.level_weights is None else np.asarray(H.level_weights, np.float64)
    leaves = X if weights is None else X * weights[T.leaf_depth][:, None]
    inner = box_sums(tuple(int(s) for s in H.domain_shape), T.lower, T.upper, X)
    if weights is not None:
        inner = inner * weights[T.depth][:, None]
    return np.concatenate([leaves, inner], axis=0)


def _kronecker(Q: Kronecker, X: np.ndarray) -> np.ndarray:
    """(A₁ ⊗ … ⊗ A_d)·x: apply each factor along its axis of x as a tensor."""
    k = X.shape[1]
    T = X.reshape(*(int(f.shape[1]) for f in Q.factors), k)
    for axis, factor in enumerate(Q.factors):
        moved = np.moveaxis(T, axis, 0)
        rest = moved.shape[1:]
        applied = evaluate(factor, moved.reshape(moved.shape[0], -1))
        T = np.moveaxis(applied.reshape(applied.shape[0], *rest), 0, axis)
    return T.reshape(-1, k)


def _hstack(Q: HStack, X: np.ndarray) -> np.ndarray:
    bounds = np.cumsum([int(b.shape[1]) for b in Q.blocks])[:-1]
    parts = np.split(X, bounds, axis=0)
    out: np.ndarray = np.sum([evaluate(b, p) for b, p in zip(Q.blocks, parts, strict=True)], axis=0)
    return out


_EVAL: dict[type, Callable[[Any, np.ndarray], np.ndarray]] = {
    Identity: lambda Q, X: np.array(X, copy=True),
    Ones: lambda Q, X: np.repeat(X.sum(axis=0, keepdims=True), int(Q.m), axis=0),
    Total: lambda Q, X: np.repeat(X.sum(axis=0, keepdims=True), int(Q.m), axis=0),
    Prefix: lambda Q, X: np.cumsum(X, axis=0),
    Suffix: lambda Q, X: np.cumsum(X[::-1], axis=0)[::-1],
    Diagonal: lambda Q, X: np.asarray(Q.d, np.float64)[:, None] * X,
    Dense: lambda Q, X: np.asarray(Q.array, np.float64) @ X,
    Sparse: lambda Q, X: np.asarray(sp.csr_matrix(Q.matrix, dtype=np.float64) @ X),
    Wavelet: _wavelet,
    RangeQueries: _ranges,
    Hierarchy: _hierarchy,
    Weighted: lambda Q, X: float(Q.weight) * evaluate(Q.base, X),
    VStack: lambda Q, X: np.concatenate([evaluate(b, X) for b in Q.blocks], axis=0),
    HStack: _hstack,
    Sum: lambda Q, X: np.sum([evaluate(t, X) for t in Q.terms], axis=0),
    Kronecker: _kronecker,
}
