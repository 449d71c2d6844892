"""The paper's experiments (εktelo §10), reproducible from the repository root:
`python -m experiments <name> [--out DIR] [--trials N] [--quick] [--data-dir DIR]`
(dpbench also takes `--only ALGO[,ALGO]` and `--dims 1|2` to run a subset;
planner takes `--dims`, `--shares S[,S]` and `--write-table`).
They are not part of the installed library: they use ektelo's public API and
need its `experiments` extra (matplotlib, threadpoolctl).

Each experiment module registers a function `(out: Path, trials: int | None,
quick: bool) -> pandas.DataFrame` that shows progress, prints its table next
to the paper's figures, and writes `<name>.csv` and `<name>.png` into `out`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pandas as pd

from .common import EXPERIMENTS, OPTIONS

__all__ = ["EXPERIMENTS", "names", "run"]

_MODULES = {
    "mwem-variants": "mwem_variants",
    "census": "census",
    "naive-bayes": "naive_bayes",
    "plan-scalability": "plan_scalability",
    "inference-scalability": "inference_scalability",
    "workload-reduction": "workload_reduction",
    "dpbench": "dpbench",
    "planner": "planner_regret",
}


def names() -> list[str]:
    """The experiment names."""
    return sorted(_MODULES)


def run(
    name: str, *, out: Path, trials: int | None = None, quick: bool = False, **options: Any
) -> pd.DataFrame:
    """Run experiment `name`, writing its CSV and PNG to `out`.

    options: extra keyword options of that experiment (None values are
    dropped), e.g. dpbench's ``only=("DAWA", "MWEM")`` and ``dims=2``.
    """
    if name not in _MODULES:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(names())}")
    if trials is not None and trials < 1:
        raise ValueError(f"--trials must be a positive integer, got {trials}")
    importlib.import_module(f".{_MODULES[name]}", __name__)
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(given) - set(OPTIONS[name]))
    if unknown:
        raise ValueError(f"experiment {name!r} takes no option {', '.join(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    return EXPERIMENTS[name](out, trials, quick, **given)
