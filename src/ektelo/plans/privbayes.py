"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava & Xiao, TODS 2017) and
εktelo's PrivBayesLS (§9.2, Algorithm 7): table plans.

Both learn a degree-k Bayesian network privately inside the kernel
(`privbayes_select`), then measure the marginals the network needs
(`selection.network_marginals`). PrivBayes turns the noisy marginals into
conditional distributions (`inference.network_distribution`) and samples a
synthetic table from the network; PrivBayesLS instead runs least squares on
the noisy marginals.
"""

from __future__ import annotations

import numpy as np

from .. import inference
from ..matrix import EMatrix
from ..operators import selection
from ..port import ProtectedTable
from .budget import check_eps, split
from .common import estimate
from .registry import register

__all__ = ["privbayes", "privbayes_ls"]


@register(
    "privbayes",
    citation="Zhang, Cormode, Procopiuc, Srivastava & Xiao, TODS 2017",
    summary="private Bayesian network, noisy marginals, synthetic data",
    data_dependent=True,
    input_kind="table",
)
def privbayes(
    table: ProtectedTable,
    workload: EMatrix | None,
    eps: float,
    *,
    degree: int = 2,
    beta: float = 0.3,
    seed: int | None = None,
) -> np.ndarray:
    """PrivBayes. Budget: β·ε to learn the network, the rest to its marginals.
    Returns the histogram (on the table's vectorized domain) of a synthetic
    table of N rows sampled from the network, N the noisy total (of the
    first measured marginal). `seed` only drives the public synthetic
    sampling."""
    eps_net, eps_meas = split(check_eps(eps), beta, 1 - beta)
    cliques = table.privbayes_select(eps=eps_net, degree=degree)  # Private→Public
    M = selection.network_marginals(table.domain.shape, cliques)  # Public
    y = table.vectorize().laplace(M, eps=eps_meas)  # Private→Public
    joint = inference.network_distribution(y, cliques)  # Public
    rows = round(float(y.answers[: M.blocks[0].shape[0]].sum()))  # Public: N
    return np.random.default_rng(seed).multinomial(max(rows, 0), joint).astype(np.float64)


@register(
    "privbayes_ls",
    citation="εktelo §9.2, Algorithm 7",
    summary="PrivBayes's private network and marginals, least-squares inference",
    data_dependent=True,
    input_kind="table",
)
def privbayes_ls(
    table: ProtectedTable,
    workload: EMatrix | None,
    eps: float,
    *,
    degree: int = 2,
    beta: float = 0.3,
) -> np.ndarray:
    """PrivBayesLS: PrivBayes's selection and measurement (β·ε, (1−β)·ε), then
    LS on the noisy marginals. Returns x̂ on the table's vectorized domain."""
    eps_net, eps_meas = split(check_eps(eps), beta, 1 - beta)
    cliques = table.privbayes_select(eps=eps_net, degree=degree)  # Private→Public
    M = selection.network_marginals(table.domain.shape, cliques)  # Public
    y = table.vectorize().laplace(M, eps=eps_meas)  # Private→Public
    return estimate([y])  # Public: LS
