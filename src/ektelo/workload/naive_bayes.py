"""The Naive Bayes workload (εktelo §9.3): the 2k+1 one-dimensional
histograms a Naive Bayes classifier of a label Y on predictors X₁, …, X_k
needs — the histogram of Y, and for each predictor the histogram of Xᵢ for
each value of Y, i.e. the 2-way marginal (Xᵢ, Y).

Row layout of `naive_bayes(shape)` (the plans `nb_workload`, `nb_workload_ls`
and `nb_select_ls` return answers in this order, and `split_answers` reads
them back): first the |Y| counts of Y, then for every predictor axis in
increasing order its |Xᵢ|·|Y| counts in C order of the two axes (Xᵢ major
when the label is the last axis, as in the plans).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import _validate as check
from ..matrix import EMatrix, VStack
from .builders import marginal

__all__ = ["naive_bayes", "split_answers"]


def _label_axis(dims: tuple[int, ...], label: int) -> int:
    if len(dims) < 2:
        raise ValueError(f"a Naive Bayes workload needs a label and ≥ 1 predictor; shape {dims}")
    return check.axis(label, len(dims), "label")


def naive_bayes(shape: int | Sequence[int], label: int = -1) -> EMatrix:
    """The 2k+1 Naive Bayes histograms over a domain of `shape` whose axis
    `label` is the class: Y's histogram, then (Xᵢ, Y) for every other axis."""
    dims = check.shape(shape)
    y = _label_axis(dims, label)
    predictors = [i for i in range(len(dims)) if i != y]
    return VStack([marginal(dims, (y,)), *(marginal(dims, (i, y)) for i in predictors)])


def split_answers(
    answers: np.ndarray, shape: int | Sequence[int], label: int = -1
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Answers of `naive_bayes(shape, label)` as (Y counts, [table of Xᵢ × Y
    counts for every predictor axis in order])."""
    dims = check.shape(shape)
    y = _label_axis(dims, label)
    values = np.asarray(answers, dtype=np.float64).reshape(-1)
    predictors = [i for i in range(len(dims)) if i != y]
    expected = dims[y] * (1 + sum(dims[i] for i in predictors))
    if values.size != expected:
        raise ValueError(f"expected {expected} answers for shape {dims}, got {values.size}")
    start = dims[y]
    tables = []
    for i in predictors:
        block = values[start : start + dims[i] * dims[y]]
        tables.append(block.reshape(dims[i], dims[y]) if i < y else block.reshape(dims[y], -1).T)
        start += dims[i] * dims[y]
    return values[: dims[y]], tables
