"""Training the planner's decision table (issue 29, Tier 1): noisy features
measured exactly as the runtime measures them, the candidates' cost from the
grid (`planner_grid`), and a small decision tree per group learnt by our own
few-dozen-line learner (no learning library; Pythia, Kotsogiannis et al.,
SIGMOD 2017, also learns a shallow tree over cheap noisy features).

A training case is one (group, dataset, scale, ε, seed): its features come
from `ektelo.planner.measure_features` on a protected copy of that seed's
vector at share·ε (so the tree learns on noisy features, as it will meet
them), and its cost per choice is the log-regret

    log( mean over seeds of the plan's error at (1 − share)·ε
         / mean error of the best plan in hindsight at the full ε ),

the choice "tier0" costing what Tier 0's best data-independent plan costs.
A plan that gave no answer (inf) in any training case is not a choice (MWEM
at the smallest signals: the held-out data may fail it elsewhere); `FAIL_COST`
prices a failure of Tier 0's plan, should one occur. The tree
(`fit_tree`) splits where the summed cost of the two leaves' best choices
falls most, to depth `MAX_DEPTH`, each leaf holding ≥ `min_leaf` cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .planner_grid import GROUP_DIMS, GROUP_KIND, dataset_vector, workload_for

__all__ = [
    "FAIL_COST",
    "MAX_DEPTH",
    "Cases",
    "best_in_hindsight",
    "build_cases",
    "fit_tree",
    "mean_errors",
    "measure_case_features",
    "predict",
    "tier0_plan",
]

MAX_DEPTH = 3
FAIL_COST = math.log(1e6)  # a plan that returned nothing: worse than any answer seen
TIER0 = "tier0"
CASE_KEYS = ["group", "dataset", "scale", "eps"]


@dataclass(frozen=True)
class Cases:
    """Training cases: feature values (n × F, columns `names`), the cost of
    each choice (n × C, columns `choices`), and the case keys (a DataFrame)."""

    values: np.ndarray
    names: tuple[str, ...]
    cost: np.ndarray
    choices: tuple[str, ...]
    keys: pd.DataFrame

    def subset(self, mask: np.ndarray) -> Cases:
        return Cases(self.values[mask], self.names, self.cost[mask], self.choices,
                     self.keys[mask].reset_index(drop=True))


# -- errors --------------------------------------------------------------------------
def mean_errors(errors: pd.DataFrame) -> pd.DataFrame:
    """Mean error over seeds per (group, dataset, scale, ε) × plan (columns);
    a plan that failed at any seed has mean inf."""
    return errors.pivot_table(index=CASE_KEYS, columns="plan", values="error",
                              aggfunc="mean")


def best_in_hindsight(full: pd.DataFrame) -> pd.DataFrame:
    """Per (group, dataset, scale, ε): the plan with the lowest mean error over
    seeds at the full ε, and that error (columns best_plan, best_error)."""
    means = mean_errors(full)
    filled = means.fillna(np.inf)
    return pd.DataFrame({"best_plan": filled.idxmin(axis=1), "best_error": filled.min(axis=1)})


def tier0_plan(group: str, eps: float) -> str:
    """The plan the runtime's Tier 0 ranks best (data-independent, exact
    expected error) for `group` at `eps` — asked of the runtime itself, so
    the leaf "tier0" is priced as it will run."""
    from ektelo.planner import auto, tier0

    dims = GROUP_DIMS[group]
    shape = (4096,) if dims == 1 else (256, 256)
    best = auto.tier0_best(tier0.rank(workload_for(group), GROUP_KIND[group], shape, eps=eps))
    return "identity" if best is None else best.plan


# -- features --------------------------------------------------------------------------
def measure_case_features(group: str, dataset: str, scale: str, eps: float, seed: int,
                          share: float) -> dict[str, float]:
    """`Features.named()` of one case, measured through the kernel as the
    runtime does: share·ε on the features, plan_eps = (1 − share)·ε."""
    import zlib

    import ektelo
    from ektelo.planner import measure_features
    from ektelo.port import ProtectedVector

    x = dataset_vector(GROUP_DIMS[group], dataset, scale, seed)
    f_eps = share * eps
    noise = zlib.crc32(f"features|{group}|{dataset}|{scale}|{eps}|{seed}|{share}".encode())
    X = ektelo.protect(x, epsilon=f_eps, seed=noise)
    if not isinstance(X, ProtectedVector):
        raise TypeError(f"protect gave {type(X).__name__} for a count vector")
    feats = measure_features(X, f_eps, kind=GROUP_KIND[group], plan_eps=(1 - share) * eps)
    return feats.named()


def build_cases(group: str, features: pd.DataFrame, part: pd.DataFrame, full: pd.DataFrame,
                tier0: dict[float, str]) -> Cases:
    """The cases of `group`: one per row of `features` (keys + seed + the
    named features), costed by the plan-part errors `part` (at (1 − share)ε)
    against the best in hindsight of `full` (at ε); `tier0[eps]` is Tier 0's
    plan at that ε."""
    feats = features[features["group"] == group].reset_index(drop=True)
    best = best_in_hindsight(full[full["group"] == group])
    means = mean_errors(part[part["group"] == group])
    plans = tuple(sorted(means.columns))
    choices = (TIER0, *plans)
    idx = pd.MultiIndex.from_frame(feats[CASE_KEYS])
    ratio = means.reindex(idx).to_numpy(dtype=float) / best["best_error"].reindex(
        idx).to_numpy(dtype=float)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.log(ratio)
    cost = np.where(np.isfinite(cost), cost, FAIL_COST)
    t0 = np.array([plans.index(tier0[float(e)]) for e in feats["eps"]])
    cost = np.column_stack([cost[np.arange(len(feats)), t0], cost])
    # a plan that gave no answer in some training case is no leaf choice: the
    # held-out data may fail it where training did not (tier0 always answers)
    failed = {p for j, p in enumerate(plans) if np.any(~np.isfinite(ratio[:, j]))}
    keep = [0] + [1 + j for j, p in enumerate(plans) if p not in failed]
    choices = tuple(choices[i] for i in keep)
    cost = cost[:, keep]
    names = tuple(c for c in feats.columns if c not in (*CASE_KEYS, "seed", "share"))
    return Cases(feats[list(names)].to_numpy(dtype=float), names, cost, choices,
                 feats[[*CASE_KEYS, "seed"]])


# -- the learner --------------------------------------------------------------------------
def _leaf(cost: np.ndarray) -> tuple[int, float]:
    """The choice with the least summed cost (ties: the first, "tier0")."""
    totals = cost.sum(axis=0)
    best = int(np.argmin(totals))
    return best, float(totals[best])


def _best_split(values: np.ndarray, cost: np.ndarray,
                min_leaf: int) -> tuple[float, int, float] | None:
    """(summed cost of the two leaves, feature, threshold) of the best split
    with ≥ min_leaf cases a side, or None. Prefix sums over each feature's
    order give every threshold's leaves at once."""
    n = len(values)
    best: tuple[float, int, float] | None = None
    total = cost.sum(axis=0)
    for j in range(values.shape[1]):
        order = np.argsort(values[:, j], kind="stable")
        v = values[order, j]
        left = np.cumsum(cost[order], axis=0)  # left[k - 1]: the first k cases
        k = np.arange(min_leaf, n - min_leaf + 1)
        k = k[v[k - 1] < v[np.minimum(k, n - 1)]]  # only between distinct values
        if k.size == 0:
            continue
        score = left[k - 1].min(axis=1) + (total - left[k - 1]).min(axis=1)
        i = int(np.argmin(score))
        if best is None or score[i] < best[0] - 1e-12:
            kk = k[i]
            best = (float(score[i]), j, float((v[kk - 1] + v[kk]) / 2))
    return best


def fit_tree(cases: Cases, *, max_depth: int = MAX_DEPTH, min_leaf: int = 25,
             min_gain: float = 1e-6) -> dict[str, Any]:
    """A decision-table node (`ektelo.planner.DecisionTable`'s JSON form)
    minimising the summed log-regret of its leaves' choices over `cases`."""
    choice, leaf_cost = _leaf(cases.cost)
    if max_depth > 0 and len(cases.cost) >= 2 * min_leaf:
        split = _best_split(cases.values, cases.cost, min_leaf)
        if split is not None and split[0] < leaf_cost - min_gain * len(cases.cost):
            _, j, t = split
            below = cases.values[:, j] < t
            b = fit_tree(cases.subset(below), max_depth=max_depth - 1, min_leaf=min_leaf,
                         min_gain=min_gain)
            a = fit_tree(cases.subset(~below), max_depth=max_depth - 1, min_leaf=min_leaf,
                         min_gain=min_gain)
            if b == a and "plan" in b:  # both sides choose the same: one leaf says it
                return b
            return {"feature": cases.names[j], "threshold": t, "below": b, "above": a}
    return {"plan": cases.choices[choice]}


def predict(node: dict[str, Any], names: Sequence[str], values: np.ndarray) -> list[str]:
    """The leaf choice of `node` for each row of `values` (columns `names`)."""
    out = []
    col = {n: i for i, n in enumerate(names)}
    for row in values:
        n = node
        while "plan" not in n:
            n = n["below"] if row[col[n["feature"]]] < n["threshold"] else n["above"]
        out.append(str(n["plan"]))
    return out
