"""A Bayesian network's distribution from its noisy marginals (PrivBayes,
Zhang, Cormode, Procopiuc, Srivastava & Xiao, TODS 2017, §3:
NoisyConditionals): `network_distribution`, a **Public** operator.

PrivBayes learns a network privately (the kernel's `privbayes_select`:
cliques (child, parent₁, …, parent_k)), measures the marginals of the
network's maximal cliques (`selection.network_marginals`) and reads every
conditional P(child | parents) off a measured marginal containing its
clique; the joint is their product, from which PrivBayes samples its
synthetic table. (PrivBayesLS, εktelo §9.2, runs least squares on the same
marginals instead.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..measurement import Measurement

__all__ = ["network_distribution"]


def network_distribution(y: Measurement, cliques: Sequence[Sequence[int]]) -> np.ndarray:
    """The network's joint distribution Π P(child | parents) on the root's
    cells (flattened, C order; sums to 1), each conditional read off the
    noisy marginal of a measured clique containing it: negatives clipped,
    summed down to the clique, rows renormalised (+1e-12, so an all-zero
    row is uniform). Attributes the network leaves out are uniform.

    `y` measures the marginals of the maximal cliques of `cliques`, stacked
    in their order (`selection.network_marginals`); ``cliques[i][0]`` is the
    child of clique i.
    """
    shape = tuple(y.root_shape)
    network = [tuple(int(a) for a in c) for c in cliques]
    measured = [c for c in network if not any(set(c) < set(d) for d in network)]
    if sum(math.prod(shape[a] for a in c) for c in measured) != y.answers.size:
        raise ValueError("y does not measure the marginals of the network's maximal cliques")
    blocks: dict[tuple[int, ...], np.ndarray] = {}
    start = 0
    for clique in measured:
        axes = tuple(sorted(clique))
        sizes = [shape[a] for a in axes]
        block = y.answers[start : start + math.prod(sizes)]
        blocks[axes] = np.clip(block, 0, None).reshape(sizes)
        start += math.prod(sizes)
    log_joint = np.zeros(shape)
    covered: set[int] = set()
    for clique in network:
        kept = sorted(clique)
        source = next(m for m in blocks if set(kept) <= set(m))
        drop = tuple(i for i, a in enumerate(source) if a not in kept)
        counts = blocks[source].sum(axis=drop) + 1e-12
        child = kept.index(clique[0])
        cond = counts / counts.sum(axis=child, keepdims=True)
        view = [1] * len(shape)
        for a in kept:
            view[a] = shape[a]
        log_joint = log_joint + np.log(cond).reshape(view)
        covered.add(clique[0])
    for a in set(range(len(shape))) - covered:  # attributes the network left out
        log_joint -= math.log(shape[a])
    joint = np.exp(log_joint - log_joint.max()).reshape(-1)
    return joint / joint.sum()
