"""Marginals of a calibrated junction tree on attribute sets no single clique
contains, by variable elimination (Koller & Friedman, "Probabilistic
Graphical Models", §9.3; Private-PGM answers such queries the same way,
McKenna, Sheldon & Miklau, ICML 2019, §4).

The smallest connected subtree of the junction tree covering the attributes
is kept (the rest sums to one); its distribution is the root clique's
marginal times each other clique's conditional given its separator; the
attributes not asked for are summed out one at a time, cheapest first. Every
intermediate table's size is checked against a public limit before it is
built, so a query never materialises more than the caller allows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .junction import Clique, JunctionTree

__all__ = ["subtree", "tree_marginal"]

Factor = tuple[Clique, np.ndarray]


def subtree(tree: JunctionTree, attrs: Sequence[str]) -> list[int]:
    """The cliques of a minimal connected subtree covering `attrs`: leaves
    are pruned while the attributes they hold (of `attrs`) are in their
    neighbour too (running intersection: then they are elsewhere as well)."""
    want = set(attrs)
    nbrs: dict[int, set[int]] = {i: set() for i in range(len(tree.cliques))}
    for e in tree.edges:
        nbrs[e.child].add(e.parent)
        nbrs[e.parent].add(e.child)
    alive = set(nbrs)
    changed = True
    while changed and len(alive) > 1:
        changed = False
        for i in sorted(alive):
            if len(nbrs[i]) != 1:
                continue
            (j,) = nbrs[i]
            if want & set(tree.cliques[i]) <= set(tree.cliques[j]):
                alive.discard(i)
                nbrs[j].discard(i)
                del nbrs[i]
                changed = True
    return sorted(alive)


def _product_sum(factors: Sequence[Factor], keep: Clique) -> np.ndarray:
    """Σ over the attributes not in `keep` of the product of `factors`,
    axes in `keep`'s order (one np.einsum)."""
    labels = {a: i for i, a in enumerate(dict.fromkeys(a for c, _ in factors for a in c))}
    args: list[Any] = []
    for c, table in factors:
        args += [table, [labels[a] for a in c]]
    args.append([labels[a] for a in keep])
    return np.asarray(np.einsum(*args, optimize=True))


def tree_marginal(
    tree: JunctionTree,
    probs: Sequence[np.ndarray],
    attrs: Clique,
    limit: int,
    too_large: Callable[[str], Exception],
) -> np.ndarray:
    """The probability table of `attrs` (axes in `attrs`' order) from the
    calibrated clique probabilities `probs` (each summing to one).
    `too_large(message)` builds the error raised when a table would exceed
    `limit` cells."""
    sizes = {a.name: a.size for a in tree.domain}
    cells = math.prod(sizes[a] for a in attrs)
    if cells > limit:
        raise too_large(f"the marginal on {list(attrs)} has {cells} cells, above the limit {limit}")
    keep = subtree(tree, attrs)
    alive = set(keep)
    root = keep[0]
    factors: list[Factor] = [(tree.cliques[root], probs[root])]
    # Each kept clique but the root enters as P(clique \ sep | sep), its
    # parent in the subtree being the tree parent or (root side) the child.
    nbrs: dict[int, list[int]] = {i: [] for i in keep}
    for e in tree.edges:
        if e.child in alive and e.parent in alive:
            nbrs[e.child].append(e.parent)
            nbrs[e.parent].append(e.child)
    seen = {root}
    frontier = [root]
    while frontier:
        node = frontier.pop()
        for other in nbrs[node]:
            if other in seen:
                continue
            seen.add(other)
            frontier.append(other)
            clique = tree.cliques[other]
            sep_set = set(tree.cliques[node])
            axes = tuple(i for i, a in enumerate(clique) if a not in sep_set)
            table = probs[other]
            sep = table.sum(axis=axes, keepdims=True)
            cond = np.divide(table, sep, out=np.zeros_like(table), where=sep > 0)
            factors.append((clique, cond))
    wanted = set(attrs)
    variables = {a for c, _ in factors for a in c} - wanted
    while variables:
        best: tuple[int, str] | None = None
        for v in sorted(variables):
            touched = {a for c, _ in factors if v in c for a in c} - {v}
            size = math.prod(sizes[a] for a in touched)
            if best is None or (size, v) < best:
                best = (size, v)
        assert best is not None
        size, v = best
        if size > limit:
            raise too_large(
                f"eliminating {v!r} for the marginal on {list(attrs)} needs a table of "
                f"{size} cells, above the limit {limit}"
            )
        inside = [f for f in factors if v in f[0]]
        factors = [f for f in factors if v not in f[0]]
        out = tuple(dict.fromkeys(a for c, _ in inside for a in c if a != v))
        factors.append((out, _product_sum(inside, out)))
        variables.discard(v)
    return _product_sum(factors, attrs)
