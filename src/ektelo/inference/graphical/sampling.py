"""Synthetic rows from a calibrated junction tree (Private-PGM's synthetic
data, McKenna, Sheldon & Miklau, ICML 2019, §5; MST, McKenna, Miklau &
Sheldon, JPC 2021, §3).

Forward sampling through the tree: the root clique's attributes are drawn
from its marginal, then each clique's new attributes given its separator
with its parent (already drawn), in breadth-first order. Two ways to draw:

* ``"sample"`` — independent draws (inverse CDF, one `searchsorted` over all
  rows at once);
* ``"round"`` — Private-PGM's rounding: among the rows sharing a separator
  value, the counts of the new values are the expected counts rounded down,
  the remainder going to values drawn without replacement in proportion to
  the fractional parts (Gumbel top-k); the values are then shuffled within
  the group. Marginals match the model's more closely than with
  independent draws.

Decoding back to the Domain's values: labels for labelled attributes, a bin's
lower edge for binned ones (it encodes back to the same bin), the code for
integer-coded ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...domain import Attribute
from .junction import JunctionTree

__all__ = ["decode", "sample_codes"]

# Cells per block of the rounding's (groups × values) tables.
_BLOCK = 1 << 20


def _conditional(table: np.ndarray, sep_axes: Sequence[int]) -> np.ndarray:
    """`table` (a clique's probabilities) as rows P(new | separator value):
    separator axes first (flattened), the others after; all-zero rows are
    uniform."""
    new_axes = [i for i in range(table.ndim) if i not in sep_axes]
    moved = np.transpose(table, (*sep_axes, *new_axes))
    n_sep = int(np.prod([table.shape[i] for i in sep_axes], dtype=np.int64))
    cond = moved.reshape(n_sep, -1).astype(np.float64)
    row = cond.sum(axis=1, keepdims=True)
    uniform = np.full_like(cond, 1.0 / cond.shape[1])
    return np.where(row > 0, cond / np.where(row > 0, row, 1.0), uniform)


def _draw(cond: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One independent draw per row from row `group[r]` of `cond`: the CDF
    rows are offset by their index so one sorted array serves every row."""
    n_sep, n_new = cond.shape
    cdf = np.cumsum(cond, axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    flat = (cdf + np.arange(n_sep)[:, None]).ravel()
    u = rng.random(group.size)
    idx = np.searchsorted(flat, group + u, side="right") - group * n_new
    return np.clip(idx, 0, n_new - 1)


def _round(cond: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Counts per group rounded as the module says, values shuffled within groups."""
    n_new = cond.shape[1]
    ids, sizes = np.unique(group, return_counts=True)
    values: list[np.ndarray] = []
    step = max(1, _BLOCK // n_new)
    for lo in range(0, ids.size, step):
        g, n = ids[lo : lo + step], sizes[lo : lo + step]
        expected = n[:, None] * cond[g]
        counts = np.floor(expected)
        frac = expected - counts
        extra = np.clip(np.round(n - counts.sum(axis=1)), 0, n_new).astype(np.int64)
        with np.errstate(divide="ignore"):
            keys = np.log(frac) + rng.gumbel(size=frac.shape)
        ranked = np.argsort(-keys, axis=1)
        chosen = np.arange(n_new)[None, :] < extra[:, None]
        rows = np.repeat(np.arange(g.size), n_new).reshape(g.size, n_new)
        counts[rows[chosen], ranked[chosen]] += 1
        counts = counts.astype(np.int64)
        # Rows whose rounding drifted by one (float sums) give or take a
        # unit at their most likely value, so each group gets exactly n rows.
        short = n - counts.sum(axis=1)
        if np.any(short):
            top = np.argmax(cond[g], axis=1)
            counts[np.arange(g.size), top] += short
        values.append(np.repeat(np.tile(np.arange(n_new), g.size), counts.ravel()))
    drawn = np.concatenate(values)
    order = np.lexsort((rng.random(group.size), group))  # by group, shuffled inside
    out = np.empty(group.size, dtype=np.int64)
    out[order] = drawn
    return out


def sample_codes(
    tree: JunctionTree,
    probs: Sequence[np.ndarray],
    rows: int,
    rng: np.random.Generator,
    method: str,
) -> np.ndarray:
    """A (rows × attributes) code matrix drawn from the calibrated clique
    probabilities `probs`, columns in the domain's order."""
    domain = tree.domain
    codes = np.zeros((rows, len(domain)), dtype=np.int64)
    draw = _round if method == "round" else _draw
    for node in tree.order:
        clique = tree.cliques[node]
        parent = tree.parent[node]
        done = set(tree.cliques[parent]) if parent >= 0 else set()
        sep_axes = [i for i, a in enumerate(clique) if a in done]
        new = [a for a in clique if a not in done]
        if not new:
            continue
        table = probs[node]
        cond = _conditional(table, sep_axes)
        if sep_axes:
            sep_cols = [domain.index(clique[i]) for i in sep_axes]
            sep_shape = tuple(table.shape[i] for i in sep_axes)
            group = np.ravel_multi_index(tuple(codes[:, c] for c in sep_cols), sep_shape)
        else:
            group = np.zeros(rows, dtype=np.int64)
        flat = draw(cond, np.asarray(group, dtype=np.int64), rng)
        new_shape = tuple(domain[a].size for a in new)
        for a, col in zip(new, np.unravel_index(flat, new_shape), strict=True):
            codes[:, domain.index(a)] = col
    return codes


def decode(attribute: Attribute, codes: np.ndarray) -> pd.Series:
    """The values of `codes` for `attribute` (see the module docstring)."""
    if attribute.values is not None:
        labels = np.empty(attribute.size, dtype=object)
        labels[:] = list(attribute.values)
        return pd.Series(labels[codes], name=attribute.name, dtype=object)
    if attribute.bins is not None:
        edges = np.asarray(attribute.bins[:-1], dtype=np.float64)
        return pd.Series(edges[codes], name=attribute.name)
    return pd.Series(codes, name=attribute.name)
