"""Workload-adaptive query selection by optimisation (paper §5.3): public
operators whose strategy depends only on the workload, never on the data.

* `greedy_h(n, W)` — DAWA's GreedyH (Li, Hay & Miklau, PVLDB 2014): a
  hierarchy of 1-D interval queries with weights chosen greedily, bottom-up,
  to minimise the workload's matrix-mechanism error.
* `hdmm(W)` — HDMM (McKenna, Miklau, Hay & Machanavajjhala, PVLDB 2018):
  p-Identity strategies optimised by L-BFGS-B (OPT_0), per attribute for
  Kronecker workloads and unions of them (OPT_⊗), and weighted marginals for
  marginal workloads (OPT_M).

Both return an implicit `EMatrix` of L1 sensitivity 1 to be measured with the
Vector Laplace operator. The algorithms and their equations are documented in
the implementation modules `_greedy_h` and `_hdmm`.
"""

from ._greedy_h import greedy_h
from ._hdmm import hdmm

__all__ = ["greedy_h", "hdmm"]
