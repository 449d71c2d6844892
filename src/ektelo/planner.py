"""Automatic plan choice (`ektelo run --plan auto`): a plan from public
facts only — the kind of workload and the domain's shape — never the data,
so choosing costs no budget.

The rules are a small fixed table, read from the accuracy results of the
paper's experiments and DPBench (Hay et al., SIGMOD 2016): in order,

1. marginal workloads → `hdmm` (its strategy is optimised for marginals);
2. 1-D range or prefix workloads → `dawa` up to 2¹⁶ cells (data-adaptive,
   among the most accurate there), else `hb` (scales to large domains);
3. prefix workloads over several attributes (a CDF broken down by the
   others) → `hb_striped_kron` (HB on the CDF attribute ⊗ Identity);
4. 2-D range workloads → `dawa` up to 2¹⁸ cells (via the Hilbert order);
5. other range workloads → `hb`;
6. histograms (any other workload) → `dawa` up to 2¹⁶ cells, else
   `identity`.

A learned planner that weighs more public features belongs here too; this
module holds the rules until then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["RANGE_KINDS", "choose_plan"]

# Workload kinds (`ektelo.workload.spec`) that are sets of range queries.
RANGE_KINDS = ("prefix", "ranges", "random-ranges", "file")


def choose_plan(kind: str, shape: Sequence[int]) -> tuple[str, str]:
    """The plan for a workload of `kind` (a workload spec's kind: "prefix",
    "ranges", "marginals", …) over a domain of `shape`, and why (one line).
    Public facts only: see the module for the rules."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if kind == "marginals":
        return "hdmm", "marginal workloads are answered best by HDMM's optimised strategy"
    if len(shape) == 1 and kind in RANGE_KINDS:
        if n <= 2**16:
            return "dawa", ("DAWA adapts to the data and is among the most accurate for 1-D "
                            "range/prefix workloads in DPBench")
        return "hb", "HB is accurate for 1-D ranges and scales to large domains"
    if kind == "prefix":
        return "hb_striped_kron", ("a CDF broken down by other attributes: HB on the CDF "
                                   "attribute ⊗ identity on the others (§9.2)")
    if len(shape) == 2 and kind in ("ranges", "random-ranges", "file") and n <= 2**18:
        return "dawa", "DAWA (via the Hilbert order) is strong on 2-D range workloads"
    if kind in ("ranges", "random-ranges", "file"):
        return "hb", "a hierarchy of range queries answers range workloads well"
    if n <= 2**16:
        return "dawa", "for a histogram DAWA's partition exploits uniform regions"
    return "identity", "for a large histogram the identity strategy is a robust default"
