"""Naive Bayes plans (εktelo §9.3, Algorithm 8): the 2k+1 histograms a
Naive Bayes classifier needs — the label Y, and each predictor Xᵢ jointly
with Y — estimated under differential privacy. The vector x is the table
vectorized over (X₁, …, X_k, Y), label last. Every plan returns the estimated
workload answers (the stacked histograms, in `workload` row order)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..matrix import EMatrix, Identity, Sparse
from ..operators import partition, selection
from ..port import ProtectedVector
from .budget import Mechanism, PlanBudget, check_budget, check_eps, split
from .common import estimate, measure
from .registry import register

__all__ = ["nb_select_ls", "nb_workload", "nb_workload_ls"]


@register(
    "nb_workload",
    citation="Cormode, PKDD 2011 (as in εktelo §9.3)",
    summary="Laplace noise on the Naive Bayes histograms directly",
    data_dependent=False,
    returns="answers",
)
def nb_workload(
    x: ProtectedVector, workload: EMatrix, budget: PlanBudget, *, mechanism: Mechanism = "laplace"
) -> np.ndarray:
    """Workload: all of the budget (ε, or ρ with mechanism="gaussian") on the
    workload matrix; returns its noisy answers."""
    b = check_budget(budget, mechanism, x)
    return np.array(measure(x, workload, b).answers)  # Private→Public


@register(
    "nb_workload_ls",
    citation="εktelo §9.3",
    summary="noisy Naive Bayes histograms made consistent by least squares",
    data_dependent=False,
    returns="answers",
)
def nb_workload_ls(
    x: ProtectedVector, workload: EMatrix, budget: PlanBudget, *, mechanism: Mechanism = "laplace"
) -> np.ndarray:
    """WorkloadLS: all of the budget (ε, or ρ with mechanism="gaussian") on
    the workload matrix, then LS; returns W·x̂ (histograms with consistent
    totals)."""
    b = check_budget(budget, mechanism, x)
    y = measure(x, workload, b)  # Private→Public
    return workload @ estimate([y])  # Public: LS


@register(
    "nb_select_ls",
    citation="εktelo §9.3, Algorithm 8 (SelectLS)",
    summary="per-histogram choice of Identity or DAWA+GreedyH, joint LS",
    data_dependent=True,
    returns="answers",
)
def nb_select_ls(
    x: ProtectedVector, workload: EMatrix, eps: float, *, threshold: int = 80, ratio: float = 0.25
) -> np.ndarray:
    """SelectLS. Budget: ε/k to each predictor's histogram (Xᵢ, Y), k the
    number of predictors (sequential composition). A histogram with more than
    `threshold` cells is laid out label-major (Y = 0's counts over Xᵢ, then
    Y = 1's, … — so DAWA's intervals never merge different classes) and gets
    DAWA's partition (ratio of its share) and GreedyH for the histogram's own
    queries (Identity) on the groups; a smaller one gets Identity. LS on all
    measurements; returns W·x̂."""
    eps = check_eps(eps)
    label = len(x.shape) - 1
    k = label
    if k < 1:
        raise ValueError("Naive Bayes needs at least one predictor and a label axis")
    ys = []
    for i, eps_i in enumerate(split(eps, *([1 / k] * k))):
        hist = x.reduce_by_partition(partition.marginal(x.shape, (i, label)))  # Private, 1-stable
        if hist.size > threshold:
            hist = hist.transform(_label_major(x.shape[i], x.shape[label]))  # Private, 1-stable
            eps_part, eps_meas = split(eps_i, ratio, 1 - ratio)
            P = hist.dawa_partition(eps=eps_part, ratio=ratio)  # Private→Public
            M = selection.greedy_h_on_partition(P, Identity(hist.size))  # Public
            ys.append(hist.reduce_by_partition(P).laplace(M, eps=eps_meas))  # Private→Public
        else:
            ys.append(hist.laplace(Identity(hist.size), eps=eps_i))  # Private→Public
    return workload @ estimate(ys)  # Public: LS on all histograms


def _label_major(n_x: int, n_y: int) -> Sparse:
    """The permutation taking a (X, Y) histogram in C order (X major) to Y major."""
    n = n_x * n_y
    source = np.arange(n).reshape(n_x, n_y).T.reshape(-1)  # new position j reads old source[j]
    return Sparse(sp.csr_matrix((np.ones(n), (np.arange(n), source)), shape=(n, n)))
