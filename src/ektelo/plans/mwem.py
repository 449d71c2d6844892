"""MWEM and the paper's variants (Hardt, Ligett & McSherry, NeurIPS 2012;
εktelo §6 Algorithm 2, §9.1, Table 4).

One plan, `mwem`, runs T rounds of: query selection (Private→Public, inside
the kernel), Vector Laplace, inference over all measurements so far. The
variants swap one operator each, and are `mwem` registered with the
published choices: `mwem_b` the selection (``select="augmented"``: the worst
query plus the disjoint dyadic ranges of length 2^(k−1) in round k, free by
parallel composition), `mwem_c` the inference (``infer="nnls"``: NNLS with a
high-confidence total instead of multiplicative weights), `mwem_d` both.

Choices (stated because the sources differ):
* the total: MWEM assumes it is known. Pass it as `total` (public side
  information, as DPBench and Table 4 do), or leave `total=None` and the plan
  buys a noisy one with `total_ratio`·ε;
* budget: ε/T per round, `ratio` of it to selection, the rest to measuring
  (Algorithm 2: ε/2T each);
* MW inference cycles all measurements `passes` times per round from the
  last estimate: 100 in `mwem` (DPBench's MWEM, `updateround`, whose errors
  are the reference), 50 in `mwem_b` (εktelo's MwemVariantB,
  `update_rounds`, the code behind Table 4);
* NNLS refits all measurements each round (the original εktelo code fitted
  only the latest one, which throws away data), on the groups of cells the
  measured queries cannot tell apart, to the optimum, warm-started from the
  last estimate where that reaches it (``nnls(groups="columns")``);
* augmented selection adds unit ranges in round 1, as §9.1 says (the
  original code started at width 2). On an n-D domain the dyadic ranges run
  over the flattened (C-order) vector, as in the original;
* limits, checked before anything is spent: `rounds` is an int in
  1..`MAX_ROUNDS` (1,000) and `passes` an int in 1..`MAX_PASSES` (1,000).
  A round costs more than the last (inference refits every measurement so
  far: 200 rounds of `mwem` on 256 cells take about a minute, 1,000 about
  half an hour) and gets only ε/T, so larger values are refused rather than
  left to run for hours; floats (`1e8` from the command line) are refused
  too. `ratio` (and `total_ratio` when the total is bought) lie strictly
  between 0 and 1;
* `workload_reduction=True` (§8) selects and measures on the workload's
  groups of cells (W = W'·P, so the scores W'·(P x̂) equal W·x̂); MW keeps
  x̂ uniform within groups, so its inference runs on the k groups
  (``groups=P``), and NNLS's own grouping finds the same structure. `mwem`
  and `mwem_c` then return the same estimate as without it (W x̂ is
  unchanged, so are the scores, the noise and the fits: Prop. 1); `mwem_b`
  and `mwem_d` draw their free dyadic ranges over the groups instead of the
  cells, so they measure other queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import inference
from ..matrix import EMatrix, Sparse
from ..operators import selection
from ..port import ProtectedVector
from .budget import check_eps, split
from .common import (
    check_choice,
    check_count,
    check_flag,
    check_share,
    check_total,
    known_total,
    reduce_for_workload,
)
from .registry import register, register_variant

__all__ = ["MAX_PASSES", "MAX_ROUNDS", "mwem", "mwem_b", "mwem_c", "mwem_d"]

# Upper limits of the iteration counts (module notes): refused above these.
MAX_ROUNDS = 1_000
MAX_PASSES = 1_000


@register(
    "mwem",
    citation="Hardt, Ligett & McSherry, NeurIPS 2012",
    summary="worst-approximated query per round, multiplicative weights",
    data_dependent=True,
)
def mwem(
    x: ProtectedVector,
    workload: EMatrix,
    eps: float,
    *,
    rounds: int = 10,
    ratio: float = 0.5,
    total: float | None = None,
    total_ratio: float = 0.05,
    select: str = "worst",
    infer: str = "mw",
    passes: int = 100,
    workload_reduction: bool = False,
) -> np.ndarray:
    """MWEM (Algorithm 2). Budget: ε/T per round, `ratio` of it to the
    exponential-mechanism selection, the rest to measuring the selection.
    The total is public (`total`) or bought with `total_ratio`·ε.

    `select`: "worst" (the worst-approximated workload query) or
    "augmented" (§9.1: plus the disjoint dyadic ranges of round k's length,
    free by parallel composition). `infer`: "mw" (`passes` cycles of
    multiplicative weights over all measurements per round: 100, DPBench's
    MWEM; εktelo's used 50) or "nnls" (NNLS with the total, §9.1).
    Returns the final estimate x̂ (flattened). `workload_reduction`: see the
    module notes. Limits (checked before any spending): `rounds` an int ≤
    `MAX_ROUNDS` (1,000), `passes` an int ≤ `MAX_PASSES` (1,000)."""
    _check(eps, rounds, ratio, total, total_ratio, select, infer, passes, workload_reduction)
    x_run, W, P = reduce_for_workload(x, workload, workload_reduction)  # Private, 1-stable
    W = W if P is None else Sparse(W.sparse())  # scored every round: materialised once
    total, ys, eps = known_total(x_run, eps, total, total_ratio, at_least=1.0)
    x_hat = np.full(x.size, total / x.size)  # uniform
    last: np.ndarray | inference.Estimate = x_hat  # where inference continues from
    for k, eps_round in enumerate(split(eps, *[1 / rounds] * rounds), start=1):
        eps_select, eps_measure = split(eps_round, ratio, 1 - ratio)
        seen = x_hat if P is None else P.reduce(x_hat)
        i = x_run.worst_approx(W, seen, eps=eps_select)  # Private→Public
        # Public: the chosen query, or it and the free dyadic ranges of round k
        M = selection.workload_row(W, i) if select == "worst" else selection.augmented_row(W, i, k)
        ys.append(x_run.laplace(M, eps=eps_measure))  # Private→Public
        if infer == "mw":  # Public
            fit = inference.multiplicative_weights(
                ys, total=total, start=last, maxiter=passes, groups=P
            )
        else:
            fit = inference.nnls(ys, total=total, start=last, groups="columns")
        last, x_hat = fit, fit.x.reshape(-1)
    return x_hat


def _check(
    eps: Any, rounds: Any, ratio: Any, total: Any, total_ratio: Any, select: Any, infer: Any,
    passes: Any, workload_reduction: Any,
) -> None:  # fmt: skip
    """MWEM's hyper-parameters checked (module notes), before any spending."""
    check_eps(eps)
    check_count(rounds, "rounds", MAX_ROUNDS)
    check_count(passes, "passes", MAX_PASSES)
    check_share(ratio, "ratio")
    if total is None:
        check_share(total_ratio, "total_ratio")
    else:
        check_total(total)
    check_choice(select, "select", ("worst", "augmented"))
    check_choice(infer, "infer", ("mw", "nnls"))
    check_flag(workload_reduction, "workload_reduction")


mwem_b = register_variant(
    "mwem_b",
    mwem,
    select="augmented",
    passes=50,
    citation="εktelo §9.1 (plan 14), after Hardt et al. 2012",
    summary="MWEM with augmented selection (disjoint H2 queries for free)",
    doc="""MWEM variant (b): `mwem` with ``select="augmented"`` — per round the
    worst query plus the disjoint dyadic queries of length 2^(k−1), all
    measured at the cost of one (parallel composition) — and multiplicative
    weights with `passes` = 50 cycles per round (εktelo's MwemVariantB,
    `update_rounds`). Budget as `mwem`.""",
)

mwem_c = register_variant(
    "mwem_c",
    mwem,
    infer="nnls",
    citation="εktelo §9.1 (plan 15), after Hardt et al. 2012",
    summary="MWEM with NNLS inference and a high-confidence total",
    doc="""MWEM variant (c): `mwem` with ``infer="nnls"`` — MWEM's selection,
    NNLS inference with the total as a (near-)exact constraint. Budget as
    `mwem`.""",
)

mwem_d = register_variant(
    "mwem_d",
    mwem,
    select="augmented",
    infer="nnls",
    citation="εktelo §9.1 (plan 16), after Hardt et al. 2012",
    summary="MWEM with augmented selection and NNLS inference",
    doc="""MWEM variant (d): `mwem` with ``select="augmented"`` and
    ``infer="nnls"``. Budget as `mwem`.""",
)
