"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava & Xiao, TODS 2017) and
εktelo's PrivBayesLS (§9.2, Algorithm 7): table plans.

Both learn a degree-k Bayesian network privately inside the kernel
(`privbayes_select`), then measure the marginals the network needs. PrivBayes
turns the noisy marginals into conditional distributions and samples a
synthetic table from the network; PrivBayesLS instead runs least squares on
the noisy marginals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..matrix import EMatrix, VStack
from ..workload import marginal
from ._registry import register
from .budget import check_eps, split
from .common import estimate

__all__ = ["privbayes", "privbayes_ls"]


def _network_queries(
    table: Any, eps: float, degree: int
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], EMatrix]:
    """Cliques chosen privately, the ones to measure, and their marginals as one
    stacked matrix. As in PrivBayes (TODS 2017, §3: NoisyConditionals), only
    the maximal cliques are measured — the first k+1 cliques are nested, and
    the smaller ones' conditionals are read off the largest — so the
    measurement's sensitivity is the number of maximal cliques (d − k), not d."""
    cliques = [tuple(c) for c in table.privbayes_select(eps=eps, degree=degree)]
    measured = [c for c in cliques if not any(set(c) < set(d) for d in cliques)]
    shape = tuple(table.domain.shape)
    return cliques, measured, VStack([marginal(shape, c) for c in measured])


def _joint_from_marginals(
    shape: tuple[int, ...],
    cliques: Sequence[tuple[int, ...]],
    measured: Sequence[tuple[int, ...]],
    answers: np.ndarray,
) -> np.ndarray:
    """The network's joint distribution: Π P(child | parents), each conditional
    read off the noisy marginal of a measured clique containing it
    (negatives clipped, summed down to the clique, rows renormalised)."""
    blocks: dict[tuple[int, ...], np.ndarray] = {}
    start = 0
    for clique in measured:
        axes = tuple(sorted(clique))
        sizes = [shape[a] for a in axes]
        blocks[axes] = np.clip(answers[start : start + math.prod(sizes)], 0, None).reshape(sizes)
        start += math.prod(sizes)
    log_joint = np.zeros(shape)
    covered: set[int] = set()
    for clique in cliques:
        axes = sorted(clique)
        source = next(m for m in blocks if set(axes) <= set(m))
        drop = tuple(i for i, a in enumerate(source) if a not in axes)
        counts = blocks[source].sum(axis=drop) + 1e-12
        child = axes.index(clique[0])
        cond = counts / counts.sum(axis=child, keepdims=True)
        view = [1] * len(shape)
        for a in axes:
            view[a] = shape[a]
        log_joint = log_joint + np.log(cond).reshape(view)
        covered.add(clique[0])
    for a in set(range(len(shape))) - covered:  # attributes the network left out
        log_joint -= math.log(shape[a])
    joint = np.exp(log_joint - log_joint.max()).reshape(-1)
    return joint / joint.sum()


@register(
    "privbayes",
    citation="Zhang, Cormode, Procopiuc, Srivastava & Xiao, TODS 2017",
    summary="private Bayesian network, noisy marginals, synthetic data",
    data_dependent=True,
    input_kind="table",
)
def privbayes(
    table: Any,
    workload: EMatrix | None,
    eps: float,
    *,
    degree: int = 2,
    beta: float = 0.3,
    seed: int | None = None,
) -> np.ndarray:
    """PrivBayes. Budget: β·ε to learn the network, the rest to its marginals.
    Returns the histogram (on the table's vectorized domain) of a synthetic
    table of N rows sampled from the network, N the noisy total. `seed` only
    drives the public synthetic sampling."""
    eps_net, eps_meas = split(check_eps(eps), beta, 1 - beta)
    cliques, measured, M = _network_queries(table, eps_net, degree)
    y = table.vectorize().laplace(M, eps=eps_meas)
    shape = tuple(table.domain.shape)
    joint = _joint_from_marginals(shape, cliques, measured, y.answers)
    first = math.prod(shape[a] for a in measured[0])  # its noisy total is N's estimate
    rows = max(round(float(y.answers[:first].sum())), 0)
    return np.random.default_rng(seed).multinomial(rows, joint).astype(np.float64)


@register(
    "privbayes_ls",
    citation="εktelo §9.2, Algorithm 7",
    summary="PrivBayes's private network and marginals, least-squares inference",
    data_dependent=True,
    input_kind="table",
)
def privbayes_ls(
    table: Any, workload: EMatrix | None, eps: float, *, degree: int = 2, beta: float = 0.3
) -> np.ndarray:
    """PrivBayesLS: PrivBayes's selection and measurement (β·ε, (1−β)·ε), then
    LS on the noisy marginals. Returns x̂ on the table's vectorized domain."""
    eps_net, eps_meas = split(check_eps(eps), beta, 1 - beta)
    _, _, M = _network_queries(table, eps_net, degree)
    return estimate([table.vectorize().laplace(M, eps=eps_meas)])
