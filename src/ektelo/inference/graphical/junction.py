"""Junction trees and belief propagation for the graphical-model estimator.

Private-PGM (McKenna, Sheldon & Miklau, ICML 2019, §4 "Marginal inference")
computes a model's clique marginals by message passing on a junction tree:

* the cliques' graph (an edge between two attributes that share a clique;
  every attribute of the domain is a node) is triangulated by greedy
  elimination — min-fill and min-weight orderings are both tried and the one
  with fewer cells kept (Koller & Friedman, "Probabilistic Graphical Models",
  §9.4.3.2);
* the maximal cliques of the triangulated graph are joined by a maximum
  spanning tree on separator sizes (Koller & Friedman, Thm. 10.4), which has
  the running-intersection property;
* `calibrate` runs sum-product (two passes) on exponentials scaled per
  separator value (exact whatever the potentials' range), giving every
  maximal clique's marginal and the log-partition function; `calibrate_log`
  is the same in log space (logsumexp), kept as its reference.

Every array here is one clique's table, axes in the domain's attribute
order; nothing materialises the full domain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from ...domain import Domain, check_names

__all__ = [
    "JunctionTree",
    "assignment",
    "canonical",
    "clique_potentials",
    "expand",
    "logsumexp",
    "maximal_cliques",
    "model_size",
]

Clique = tuple[str, ...]

# np.add.reduce: np.sum's work without its Python-level dispatch, which is a
# fit's main cost on small cliques (belief propagation runs ~10³ times).
_ADD = np.add.reduce


def canonical(domain: Domain, clique: Sequence[str], what: str = "clique") -> Clique:
    """`clique` as a tuple of distinct attributes of `domain`, in the domain's order."""
    names = check_names(domain, list(clique) if not isinstance(clique, str) else clique, what)
    return tuple(sorted(names, key=domain.index))


def maximal_cliques(cliques: Sequence[Clique]) -> list[Clique]:
    """The cliques no other clique contains (first occurrence kept, order kept)."""
    sets = [frozenset(c) for c in cliques]
    out: list[Clique] = []
    seen: set[frozenset[str]] = set()
    for c, s in zip(cliques, sets, strict=True):
        if s in seen or any(s < t for t in sets):
            continue
        seen.add(s)
        out.append(c)
    return out


def _cells(domain: Domain, attrs: Sequence[str]) -> int:
    return math.prod(domain[a].size for a in attrs)


def _eliminate(domain: Domain, cliques: Sequence[Clique], rule: str) -> list[Clique]:
    """The maximal cliques of the graph triangulated by greedy elimination
    (`rule` "fill": fewest fill edges first, then smallest clique; "weight":
    smallest clique first, then fewest fill edges). Ties go to the earlier
    attribute, so the result is deterministic."""
    adjacent: dict[str, set[str]] = {a: set() for a in domain.names}
    for c in cliques:
        for a in c:
            adjacent[a].update(b for b in c if b != a)
    left = set(domain.names)
    created: list[Clique] = []
    while left:
        best: tuple[int, int, int] | None = None
        pick = ""
        for a in domain.names:
            if a not in left:
                continue
            nbrs = adjacent[a]
            fill = sum(1 for u in nbrs for v in nbrs if u < v and v not in adjacent[u])
            weight = _cells(domain, [a, *nbrs])
            key = (
                (fill, weight, domain.index(a))
                if rule == "fill"
                else (weight, fill, domain.index(a))
            )
            if best is None or key < best:
                best, pick = key, a
        nbrs = adjacent.pop(pick)
        for u in nbrs:
            adjacent[u].discard(pick)
            adjacent[u].update(v for v in nbrs if v != u)
        left.discard(pick)
        created.append(tuple(sorted([pick, *nbrs], key=domain.index)))
    return maximal_cliques(created)


def triangulate(domain: Domain, cliques: Sequence[Clique]) -> list[Clique]:
    """The junction tree's maximal cliques for `cliques` (canonical tuples):
    the cheaper (in cells) of the min-fill and min-weight triangulations."""
    options = [_eliminate(domain, cliques, rule) for rule in ("fill", "weight")]
    return min(options, key=lambda cs: sum(_cells(domain, c) for c in cs))


def model_size(domain: Domain, cliques: Sequence[Sequence[str]]) -> int:
    """The number of cells of the junction tree's maximal cliques for
    `cliques` (any attribute lists of `domain`), computed without fitting:
    AIM's model-size guard (McKenna et al., PVLDB 2022, §4) on hypothetical
    cliques. Attributes in no clique count as cliques of their own."""
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be an ektelo Domain, got {type(domain).__name__}")
    canon = [canonical(domain, c) for c in cliques]
    return sum(_cells(domain, c) for c in triangulate(domain, canon))


def logsumexp(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log Σ exp(a) over `axes` (stable: the maximum is factored out)."""
    if not axes:
        return a
    top = np.max(a, axis=axes, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.sum(np.exp(a - top), axis=axes)) + np.squeeze(top, axis=axes)
    return np.asarray(out)


@dataclass(frozen=True)
class _Edge:
    """How a child clique meets its parent: the separator's axes in each."""

    child: int
    parent: int
    separator: Clique
    child_sum: tuple[int, ...]  # axes of the child summed out for the message up
    parent_sum: tuple[int, ...]  # axes of the parent summed out for the message down
    child_view: tuple[int, ...]  # shape to broadcast a separator table into the child
    parent_view: tuple[int, ...]  # ... into the parent


class JunctionTree:
    """The junction tree of `cliques` over `domain` (every attribute covered).

    Attributes: `cliques` (the maximal cliques, canonical order), `order`
    (a breadth-first order from the root, clique 0), `edges` (one per
    non-root clique, in `order`), `size` (total cells), `component` (for
    each attribute, its independent part of the model: the tree cut at its
    empty separators).
    """

    def __init__(self, domain: Domain, cliques: Sequence[Clique]):
        self.domain = domain
        self.cliques: tuple[Clique, ...] = tuple(triangulate(domain, cliques))
        self.shapes = tuple(tuple(domain[a].size for a in c) for c in self.cliques)
        self.size = sum(math.prod(s) for s in self.shapes)
        k = len(self.cliques)
        self.order: tuple[int, ...] = (0,)
        self.parent: tuple[int, ...] = (-1,)
        self.edges: tuple[_Edge, ...] = ()
        # Which independent part of the model (a connected piece of the tree
        # once the edges with empty separators are cut) holds each attribute.
        part = list(range(k))
        self.component: dict[str, int] = {a: 0 for a in self.cliques[0]}
        if k == 1:
            return
        sets = [set(c) for c in self.cliques]
        # Maximum spanning tree on separator sizes, as a minimum one on
        # (largest + 1 − size) > 0 over the complete graph (zero weights would
        # read as missing edges); empty separators join the components.
        shared = np.array([[len(s & t) for t in sets] for s in sets], dtype=np.float64)
        weights = shared.max() + 1.0 - shared
        np.fill_diagonal(weights, 0.0)
        tree = minimum_spanning_tree(weights)
        order, pred = breadth_first_order(tree, 0, directed=False, return_predecessors=True)
        self.order = tuple(int(i) for i in order)
        parent = [-1] * k
        edges = []
        for c in self.order[1:]:
            p = int(pred[c])
            parent[c] = p
            sep = tuple(a for a in self.cliques[c] if a in sets[p])
            edges.append(
                _Edge(
                    c,
                    p,
                    sep,
                    tuple(i for i, a in enumerate(self.cliques[c]) if a not in sep),
                    tuple(i for i, a in enumerate(self.cliques[p]) if a not in sep),
                    tuple(self.domain[a].size if a in sep else 1 for a in self.cliques[c]),
                    tuple(self.domain[a].size if a in sep else 1 for a in self.cliques[p]),
                )
            )
        self.parent = tuple(parent)
        self.edges = tuple(edges)
        # Edges with empty separators join independent parts of the model.
        for e in self.edges:
            if e.separator:
                part[e.child] = part[e.parent]
        self.component = {a: part[i] for i, c in enumerate(self.cliques) for a in c}

    def home(self, attrs: Sequence[str]) -> int | None:
        """The smallest maximal clique containing `attrs`, or None."""
        want = set(attrs)
        best = None
        for i, c in enumerate(self.cliques):
            if want <= set(c) and (
                best is None or math.prod(self.shapes[i]) < math.prod(self.shapes[best])
            ):
                best = i
        return best

    def calibrate(self, log_potentials: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float]:
        """Sum-product belief propagation: every maximal clique's probability
        table (summing to one) and log Z.

        Upward (leaves first), each clique's log-table — its potential plus
        its children's log-messages — is exponentiated after subtracting its
        maximum *for each value of the separator* with its parent; the sums
        over the rest give the log-message up, and the table divided by them
        is the clique's conditional given the separator. Downward, a clique's
        marginal is that conditional times its parent's marginal on the
        separator. One exp per clique, and nothing that matters can
        underflow: an entry is only ever compared with the others of its
        separator value. (One maximum per clique is not enough: potentials
        can carry large opposite terms on a separator — the fit moves mass
        between cliques along directions that leave the distribution as it
        is — and exp(θ − max θ) then loses whole separator values to
        underflow; AIM on adult at ε = 10 (issue #25) fitted a 333,080-cell
        model on such garbage and came out at TV 0.46.)
        """
        acc = list(log_potentials)
        conditional: dict[int, np.ndarray] = {}
        for e in reversed(self.edges):  # leaves first
            table = acc[e.child]
            top = np.maximum.reduce(table, axis=e.child_sum, keepdims=True)
            scaled = np.exp(table - top)
            sums = _ADD(scaled, axis=e.child_sum, keepdims=True)  # ≥ 1: the maximum is 1
            conditional[e.child] = scaled / sums
            message = np.log(sums) + top
            acc[e.parent] = acc[e.parent] + message.reshape(e.parent_view)
        root = self.order[0]
        top_root = float(acc[root].max())
        scaled_root = np.exp(acc[root] - top_root)
        mass = float(scaled_root.sum())
        if not (math.isfinite(top_root) and math.isfinite(mass) and mass >= 1.0):
            raise FloatingPointError(
                f"belief propagation: the root clique's mass is {mass} (largest log-potential "
                f"{top_root}); the potentials are not finite"
            )
        probs: list[np.ndarray] = list(acc)
        probs[root] = scaled_root / mass
        for e in self.edges:  # parents before children
            sep = _ADD(probs[e.parent], axis=e.parent_sum) if e.parent_sum else probs[e.parent]
            probs[e.child] = conditional[e.child] * sep.reshape(e.child_view)
        return probs, top_root + math.log(mass)

    def calibrate_log(self, log_potentials: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float]:
        """Sum-product belief propagation in log space: every maximal
        clique's log-belief (unnormalised; subtract log Z for the log
        marginal) and log Z. Upward pass leaves → root, then downward."""
        acc = [np.array(p, dtype=np.float64, copy=True) for p in log_potentials]
        up: dict[int, np.ndarray] = {}
        for e in reversed(self.edges):
            msg = logsumexp(acc[e.child], e.child_sum)
            up[e.child] = msg
            acc[e.parent] += msg.reshape(e.parent_view)
        beliefs: list[np.ndarray] = list(acc)
        for e in self.edges:  # parents come before their children in `order`
            outgoing = beliefs[e.parent] - up[e.child].reshape(e.parent_view)
            down = logsumexp(outgoing, e.parent_sum)
            beliefs[e.child] = acc[e.child] + down.reshape(e.child_view)
        root = beliefs[self.order[0]]
        log_z = float(logsumexp(root, tuple(range(root.ndim))))
        return beliefs, log_z


def expand(table: np.ndarray, sub: Clique, clique: Clique, domain: Domain) -> np.ndarray:
    """`table` on `sub` (domain order) broadcast to the shape of `clique` ⊇ sub."""
    view = tuple(domain[a].size if a in sub else 1 for a in clique)
    return np.broadcast_to(table.reshape(view), tuple(domain[a].size for a in clique))


def assignment(tree: JunctionTree, cliques: Sequence[Clique]) -> list[int]:
    """The maximal clique of the junction tree that holds each model clique."""
    out = []
    for c in cliques:
        home = tree.home(c)
        if home is None:  # the triangulation contains every clique
            raise AssertionError(f"no junction-tree clique holds {c}")
        out.append(home)
    return out


def clique_potentials(
    tree: JunctionTree,
    cliques: Sequence[Clique],
    assign: Sequence[int],
    potentials: Sequence[np.ndarray],
) -> list[np.ndarray]:
    """Each maximal clique's log-potential: the sum of the model cliques' it holds."""
    out: list[np.ndarray | None] = [None] * len(tree.cliques)
    for c, home, theta in zip(cliques, assign, potentials, strict=True):
        table = (
            theta if c == tree.cliques[home] else expand(theta, c, tree.cliques[home], tree.domain)
        )
        previous = out[home]
        out[home] = table if previous is None else previous + table
    return [np.zeros(s) if t is None else t for s, t in zip(tree.shapes, out, strict=True)]
