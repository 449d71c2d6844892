"""PrivBayes's private network selection (Zhang, Cormode, Procopiuc,
Srivastava & Xiao, "PrivBayes: private data release via Bayesian networks",
TODS 42(4) 2017, §4 GreedyBayes) — Private→Public.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/privbayes.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .contracts import each_marginal

__all__ = [
    "EM_SENSITIVITY",
    "R_MAX",
    "Scores",
    "candidates",
    "check_options",
    "engine_scores",
    "exact_score",
    "greedy",
    "marginal_sets",
]

_SENSITIVITY = 2.0  # of R on counts under add/remove-one-row (docstring)
R_MAX = 2**32  # the public clamp of the scores (docstring, "Floating-point")
# the exponential mechanism's sensitivity: R's, plus one rounding of a clamped
# score per neighbour (public constants only: issue #36)
EM_SENSITIVITY = _SENSITIVITY + 2.0 * math.ldexp(float(R_MAX), -53)


def check_options(*, degree: int = 2, max_cells: int | None = None) -> dict[str, int]:
    """The options, validated from public values only (before the charge).
    `max_cells` appears only when given (so a request without it reads as
    before the cap existed: same content, same replays)."""
    given = {"degree": degree} if max_cells is None else {"degree": degree, "max_cells": max_cells}
    for name, v in given.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            also = " or None" if name == "max_cells" else ""
            raise ValueError(f"{name} must be a positive integer{also}, got {v!r}")
    return {name: int(v) for name, v in given.items()}


def candidates(
    sizes: tuple[int, ...],
    chosen: list[int],
    *,
    degree: int = 2,
    max_cells: int | None = None,
) -> list[tuple[int, tuple[int, ...]]]:
    """GreedyBayes's (X, Π) pairs at one step, from public facts only: X not
    yet chosen (ascending), Π ⊂ chosen in ascending order.

    max_cells None: every Π of exactly min(degree, |chosen|) attributes (the
    fixed-k rule).  Otherwise (PrivBayes's θ-usefulness, TODS §4.4): per X
    the maximal Π with |Π| ≤ degree and |dom(X)|·Π|dom(p)| ≤ max_cells —
    largest sets first, each in combinations order — or Π = () when no
    nonempty Π fits."""
    d = len(sizes)
    picked = sorted(chosen)
    top = min(degree, len(picked))
    out: list[tuple[int, tuple[int, ...]]] = []
    for child in range(d):
        if child in chosen:
            continue
        if max_cells is None:
            out.extend((child, p) for p in itertools.combinations(picked, top))
            continue
        room = max_cells // sizes[child]  # |dom(Π)| ≤ room ⟺ the clique fits

        def fits(parents: tuple[int, ...], room: int = room) -> bool:
            return math.prod(sizes[p] for p in parents) <= room

        found = [
            p
            for k in range(top, 0, -1)
            for p in itertools.combinations(picked, k)
            if fits(p)
            # fitting is closed under subsets: p is maximal iff no one-attribute
            # extension of it fits (or it already has `degree` attributes)
            and (k == degree or not any(fits((*p, q)) for q in picked if q not in p))
        ]
        out.extend((child, p) for p in (found or [()]))
    return out


def marginal_sets(d: int, degree: int) -> list[tuple[int, ...]]:
    """The attribute sets whose marginals hold every score GreedyBayes may
    need: all min(degree+1, d)-subsets (ascending), a public function of d
    and the degree.  Every candidate (X, Π) has |Π| ≤ degree, so X ∪ Π lies
    in one of them."""
    if d < 2:
        return []
    return list(itertools.combinations(range(d), min(int(degree) + 1, d)))


@dataclass(frozen=True)
class Scores:
    """R(X, Π) for every candidate GreedyBayes may meet, N (the rows) and
    the attributes' domain sizes (public: the capped candidates need them)."""

    values: dict[tuple[int, tuple[int, ...]], float]
    rows: int
    sizes: tuple[int, ...] = ()


def engine_scores(engine: Any, table: Any, sizes: tuple[int, ...], degree: int) -> Scores:
    """R(X, Π) for every X and every Π ∌ X with 1 ≤ |Π| ≤ degree, from a table
    engine's marginals of `marginal_sets` (its GROUP BYs, batched; nonzero
    cells in C order over each set): the kernel runs this before the charge
    (engines/base.py).  Each score is R's arithmetic on the marginal's cells
    (`_joint_score`), bit-identical to the same arithmetic on the rows (the
    row-based reference in tests/privbayes_rows.py)."""
    sets = marginal_sets(len(sizes), degree)
    shapes = [tuple(sizes[a] for a in c) for c in sets]
    marginals = each_marginal(engine, table, sets, shapes)
    values: dict[tuple[int, tuple[int, ...]], float] = {}
    rows = 0
    for attrs, (cells, counts) in zip(sets, marginals, strict=True):
        rows = int(counts.sum())
        codes = np.unravel_index(cells, tuple(sizes[a] for a in attrs))
        position = {a: i for i, a in enumerate(attrs)}
        for k in range(2, len(attrs) + 1):
            for subset in itertools.combinations(attrs, k):
                for child in subset:
                    parents = tuple(a for a in subset if a != child)
                    if len(parents) <= degree and (child, parents) not in values:
                        values[(child, parents)] = _joint_score(
                            codes, counts, position, sizes, child, parents, rows
                        )
    return Scores(values, rows, tuple(int(n) for n in sizes))


def _joint_score(
    codes: tuple[np.ndarray, ...],
    counts: np.ndarray,
    position: dict[int, int],
    sizes: tuple[int, ...],
    child: int,
    parents: tuple[int, ...],
    n_rows: int,
) -> float:
    """R(X, Π) from a marginal's nonzero cells: each (x, π) cell's joint count
    and its row and column sums, then `exact_score`."""
    if n_rows == 0:
        return 0.0
    pi_size = math.prod(sizes[p] for p in parents)
    pi_code = np.zeros(counts.size, dtype=np.int64)
    for p in parents:
        pi_code = pi_code * sizes[p] + codes[position[p]]
    cells, inverse = np.unique(codes[position[child]] * pi_size + pi_code, return_inverse=True)
    # integer sums below 2⁵³ in float64 are exact: the rows' own int64 counts
    joint = np.bincount(inverse, weights=counts).astype(np.int64)
    x_counts = np.bincount(cells // pi_size, joint, minlength=sizes[child]).astype(np.int64)
    pi_counts = np.bincount(cells % pi_size, joint, minlength=pi_size).astype(np.int64)
    return exact_score(joint, x_counts[cells // pi_size], pi_counts[cells % pi_size], n_rows)


def exact_score(joint: np.ndarray, cx: np.ndarray, cpi: np.ndarray, n_rows: int) -> float:
    """R = ½ Σ |c(x,π) − c(x)c(π)/N| over all cells, from the nonzero cells'
    c(x,π), c(x), c(π): 2N·R summed exactly in Python integers, then one
    correctly rounded division, clamped to the public R_MAX (docstring)."""
    n = int(n_rows)
    c, a, b = (np.asarray(v, dtype=np.int64).astype(object) for v in (joint, cx, cpi))
    products = a * b
    twice_nr = int(np.abs(c * n - products).sum()) + (n * n - int(products.sum()))
    # int / int is correctly rounded, and rounding is monotone: fl(min(R, R_MAX))
    return min(twice_nr / (2 * n), float(R_MAX))


def greedy(
    scored: Scores, d: int, eps: float, source: Any, *, degree: int = 2,
    max_cells: int | None = None,
) -> list[tuple[int, ...]]:  # fmt: skip
    """GreedyBayes's network, chosen with eps (an even split over d − 1
    choices), from precomputed scores (`engine_scores`): the first attribute
    uniformly, then d − 1 exponential mechanisms with eps/(d−1) each, over
    `candidates` (a public function of the sizes, the degree, `max_cells` and
    the picks).  The caller (the kernel) has validated eps and the options
    (`check_options`) before its charge.  Reads only `scored` (every key it
    looks up is there by construction, a public fact of d and the degree;
    R(X, ∅) = 0 needs none): nothing here raises or branches on the data.

    Returns one clique per attribute, in network order: (child, *parents)
    with the parents in ascending index order; the first is (X₁,), and for
    the first k+1 attributes each clique is contained in the next (a plan may
    measure only the cliques not contained in another).  Every clique has ≤
    degree+1 attributes; with `max_cells` every clique has ≤ max_cells cells
    or is a lone child, and parent sets may be smaller than the degree."""
    first = _uniform_index(source, d)
    network: list[tuple[int, ...]] = [(first,)]
    if d == 1:
        return network
    chosen = [first]
    eps_step = eps / (d - 1)
    sensitivity = EM_SENSITIVITY  # public: never the row count (issue #36)
    sizes = scored.sizes if max_cells is not None else (1,) * d  # they matter under a cap only
    while len(chosen) < d:
        pairs = candidates(sizes, chosen, degree=degree, max_cells=max_cells)
        scores = np.array([scored.values[c] if c[1] else 0.0 for c in pairs])
        pick = source.exponential_mechanism(scores, sensitivity=sensitivity, epsilon=eps_step)
        child, parents = pairs[int(pick)]
        network.append((child, *parents))
        chosen.append(child)
    return network


def _uniform_index(source: Any, d: int) -> int:
    """A uniform index in [0, d) from the source's secure words (exact, by rejection)."""
    if d == 1:
        return 0
    bits = (d - 1).bit_length()
    while True:
        r = int(source.uint64(1)[0]) >> (64 - bits)
        if r < d:
            return r
