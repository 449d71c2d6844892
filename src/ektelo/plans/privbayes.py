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


def _network_queries(table: Any, eps: float, degree: int) -> tuple[list[tuple[int, ...]], EMatrix]:
    """Cliques chosen privately, and their marginals as one stacked matrix."""
    cliques = [tuple(c) for c in table.privbayes_select(eps=eps, degree=degree)]
    shape = tuple(table.domain.shape)
    return cliques, VStack([marginal(shape, c) for c in cliques])


def _joint_from_marginals(
    shape: tuple[int, ...], cliques: Sequence[tuple[int, ...]], answers: np.ndarray
) -> np.ndarray:
    """The network's joint distribution: Π P(child | parents), each conditional
    read off its noisy marginal (negatives clipped, rows renormalised)."""
    log_joint = np.zeros(shape)
    covered: set[int] = set()
    start = 0
    for clique in cliques:
        axes = sorted(clique)
        sizes = [shape[a] for a in axes]
        block = answers[start : start + math.prod(sizes)].reshape(sizes)
        start += math.prod(sizes)
        child = axes.index(clique[0])
        counts = np.clip(block, 0, None) + 1e-12
        cond = counts / counts.sum(axis=child, keepdims=True)
        view = [1] * len(shape)
        for a, s in zip(axes, sizes, strict=True):
            view[a] = s
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
    cliques, M = _network_queries(table, eps_net, degree)
    y = table.vectorize().laplace(M, eps=eps_meas)
    shape = tuple(table.domain.shape)
    joint = _joint_from_marginals(shape, cliques, y.answers)
    first = sorted(cliques[0])
    rows = max(round(float(y.answers[: math.prod(shape[a] for a in first)].sum())), 0)
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
    _, M = _network_queries(table, eps_net, degree)
    return estimate([table.vectorize().laplace(M, eps=eps_meas)])
