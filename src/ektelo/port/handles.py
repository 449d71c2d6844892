"""Opaque handles to protected sources (§4.1), talking to a kernel through a msg.

A handle names one source variable of one kernel by its integer id and holds
the `Port` its requests go to (`local.LocalPort` in this process, a server's
port across processes): it has no attribute that exposes data, and every
method builds one typed request of `msg.py` and submits it. Operator types
(§4.2) are in each docstring: **Private** methods return new handles and
spend nothing; **Private→Public** methods take a keyword-only `eps`, charge it
through Algorithm 2 and return a public value. Handles cannot be copied or
pickled (a copy of the kernel would be a copy of the budget).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..domain import Domain
from . import requests as msg

if TYPE_CHECKING:
    from ..kernel.ledger import BudgetReport, NodeState
    from ..matrix import EMatrix, Partition
    from ..measurement import Measurement

__all__ = ["ProtectedTable", "ProtectedVector"]

_H = TypeVar("_H", bound="_Handle")


class _Handle:
    __slots__ = ("_described", "_node", "_port")

    def __init__(self, kernel_port: msg.Port, node: int):
        self._port = kernel_port
        self._node = node
        self._described: msg.SourceInfo | None = None

    @property
    def node(self) -> int:
        """This source variable's id in its kernel's transformation graph."""
        return self._node

    @property
    def port(self) -> msg.Port:
        """Where this handle's requests go (its kernel)."""
        return self._port

    def _info(self) -> msg.SourceInfo:
        """The source's public description, asked of the kernel once: every
        field of it (shape, domain, declared integrality, root, the kernel's
        seed) is fixed when the source is created."""
        if self._described is None:
            self._described = self._port.submit(msg.Describe(self._node))
        return self._described

    def _new(self, cls: type[_H], response: msg.NewSource) -> _H:
        return cls(self._port, response.source)

    def envelope(self: _H, *, eps: float | None = None, rho: float | None = None) -> _H:
        """Private→Public, one charge for many requests (issue #41): ε (or ρ)
        is charged here now, in one reservation — or BudgetExceeded, and
        nothing changes — and the returned handle (the same rows or values)
        spends from that envelope: every request on it and on what derives
        from it is charged to the envelope, up to what it holds, and to
        nothing else. A question's plan runs in one, so it is charged all
        at once or not at all."""
        return self._new(type(self), self._port.submit(msg.Envelope(self._node, eps, rho)))

    @property
    def budget(self) -> BudgetReport:
        """The kernel's total, spent and remaining budget (floats)."""
        budget: BudgetReport = self._port.submit(msg.GetBudget())
        return budget

    def history(self) -> tuple[msg.QueryRecord, ...]:
        """Every granted Private→Public request of the kernel, in order."""
        history: tuple[msg.QueryRecord, ...] = self._port.submit(msg.GetHistory())
        return history

    def ledger(self) -> tuple[NodeState, ...]:
        """A snapshot of the kernel's ledger (graph, stabilities, B(sv))."""
        ledger: tuple[NodeState, ...] = self._port.submit(msg.GetLedger())
        return ledger

    @property
    def seed(self) -> int | None:
        """The kernel's research-mode seed, or None when its noise is secure."""
        seed: int | None = self._info().seed
        return seed

    @property
    def research_mode(self) -> bool:
        """True when the kernel draws seeded (reproducible, NOT secure) noise."""
        return self.seed is not None

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("protected handles cannot be pickled or copied")

    def __copy__(self) -> Any:
        raise TypeError("protected handles cannot be copied")

    def __deepcopy__(self, memo: Any) -> Any:
        raise TypeError("protected handles cannot be copied")


class ProtectedTable(_Handle):
    """A protected table (rows over a public `Domain`)."""

    __slots__ = ()

    @property
    def domain(self) -> Domain:
        """The table's public schema."""
        domain = self._info().domain
        if domain is None:  # only a vector's description lacks a domain
            raise TypeError(f"source variable {self._node} is not a table")
        return domain

    def where(self, predicate: Any) -> ProtectedTable:
        """Private, 1-stable: the rows satisfying `predicate` (see `ektelo.col`)."""
        return self._new(ProtectedTable, self._port.submit(msg.Where(self._node, predicate)))

    def select(self, attrs: Any) -> ProtectedTable:
        """Private, 1-stable: projection onto `attrs` (every row kept)."""
        return self._new(ProtectedTable, self._port.submit(msg.Select(self._node, attrs)))

    def group_by(
        self, attrs: Any, *, count: str | None = None, count_cap: int = 1
    ) -> ProtectedTable:
        """Private, 2-stable (PINQ GroupBy): a table with one row per group key
        of `attrs`; with `count`, an extra attribute min(group size, count_cap)."""
        request = msg.GroupBy(self._node, attrs, count, count_cap)
        return self._new(ProtectedTable, self._port.submit(request))

    def split_by_partition(self, attr: str) -> list[ProtectedTable]:
        """Private, 1-stable: one table per value of `attr` (parallel composition)."""
        response: msg.NewSources = self._port.submit(msg.SplitTable(self._node, attr))
        return [ProtectedTable(self._port, s) for s in response.sources]

    def vectorize(self, attrs: Any = None) -> ProtectedVector:
        """Private, 1-stable (T-Vectorize): counts over the product domain of
        `attrs` (default: all, in domain order), C-order. A new root vector."""
        return self._new(ProtectedVector, self._port.submit(msg.Vectorize(self._node, attrs)))

    def select_keys(self, column: str, *, rho: float) -> tuple[str, ...]:
        """Private→Public (partition selection, issue #39): the keys of open
        column `column` whose noisy count of rows reaches the kernel's
        threshold (set from its δ for keys and the table's contribution
        bound), sorted; the rest suppressed. Charged `rho` (zCDP)."""
        keys: tuple[str, ...] = self._port.submit(msg.SelectKeys(self._node, column, rho))
        return tuple(keys)

    def recode(self, column: str, keys: Any) -> ProtectedTable:
        """Private, 1-stable: open column `column` as a coded attribute of the
        public `keys` plus `OTHER_KEY` for every other key (no row lost)."""
        request = msg.Recode(self._node, column, tuple(keys))
        return self._new(ProtectedTable, self._port.submit(request))

    def noisy_count(self, *, eps: float) -> Measurement:
        """Private→Public (NoisyCount): the number of rows plus Laplace(1/eps)."""
        measurement: Measurement = self._port.submit(msg.NoisyCount(self._node, eps))
        return measurement

    def privbayes_select(self, *, eps: float, **options: Any) -> list[tuple[int, ...]]:
        """Private→Public: PrivBayes's private choice of attribute cliques.
        Options (public): `degree` (k, default 2) and `max_cells` (PrivBayes's
        θ-usefulness cap on a clique's cells, TODS §4.4; default None: no cap)."""
        cliques: list[tuple[int, ...]] = self._port.submit(
            msg.PrivBayesSelect(self._node, eps, dict(options))
        )
        return cliques

    def select_marginal(
        self,
        candidates: Any,
        estimates: Any,
        *,
        eps: float | None = None,
        rho: float | None = None,
        weights: Any = None,
        penalties: Any = None,
        groups: Any = None,
    ) -> tuple[str, ...]:
        """Private→Public (MST/AIM selection): one of `candidates` (attribute
        tuples) chosen by the exponential mechanism with quality
        w_r·(‖M_r(D) − est_r‖₁ − penalty_r), est_r = estimates[r] a public array
        over the marginal's cells (C order over r as given), integer weights
        (default 1) and penalties (default 0). With `groups` (one public
        integer array per candidate, mapping each of its cells to a group
        0..k−1; None for no grouping), M_r is the marginal summed by group
        and est_r has k entries (MST scoring on a compressed domain).
        Charged `eps` (pure ε), or on a zCDP kernel `rho` (ε = √(8ρ)) or ε²/8."""
        request = msg.SelectMarginal(
            self._node, candidates, estimates, eps, rho, weights, penalties, groups=groups
        )
        chosen: tuple[str, ...] = self._port.submit(request)
        return chosen

    def __repr__(self) -> str:
        try:
            return f"ProtectedTable(node={self._node}, {self.domain!r})"
        except (TypeError, ValueError):
            return f"ProtectedTable(node={self._node}, invalid)"


class ProtectedVector(_Handle):
    """A protected data vector (counts over a public domain of cells)."""

    __slots__ = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return self._info().shape

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def integral(self) -> bool:
        """Declared counts (at `protect`, kept by integer transforms): public."""
        return self._info().integral

    @property
    def root_id(self) -> str:
        """Identifies the root vector this one derives from (for inference)."""
        return self._info().root_id

    @property
    def root_shape(self) -> tuple[int, ...]:
        return self._info().root_shape

    def laplace(self, M: EMatrix, *, eps: float) -> Measurement:
        """Private→Public (Vector Laplace): M·x + Laplace(sens(M)/eps) with the
        sensitivity computed by the kernel."""
        measurement: Measurement = self._port.submit(msg.VectorLaplace(self._node, M, eps))
        return measurement

    def gaussian(self, M: EMatrix, *, rho: float) -> Measurement:
        """Private→Public (Gaussian mechanism, ρ-zCDP): M·x + N_Z(0, σ²) with
        σ ≥ Δ₂(M)/√(2ρ), the L2 sensitivity computed by the kernel. Needs a
        kernel protected with a zCDP budget (`rho=`, or `epsilon=` and `delta=`)."""
        measurement: Measurement = self._port.submit(msg.VectorGaussian(self._node, M, rho))
        return measurement

    def reduce_by_partition(self, P: Partition) -> ProtectedVector:
        """Private, 1-stable: the total of every group of `P`."""
        request = msg.ReduceByPartition(self._node, P)
        return self._new(ProtectedVector, self._port.submit(request))

    def split_by_partition(self, P: Partition) -> list[ProtectedVector]:
        """Private, 1-stable: one vector per group of `P` (its cells in order)."""
        response: msg.NewSources = self._port.submit(msg.SplitVector(self._node, P))
        return [ProtectedVector(self._port, s) for s in response.sources]

    def transform(self, M: EMatrix) -> ProtectedVector:
        """Private: M·x, stability = max column L1 norm of M (computed by the kernel)."""
        return self._new(ProtectedVector, self._port.submit(msg.Transform(self._node, M)))

    def dawa_partition(self, *, eps: float, **options: Any) -> Partition:
        """Private→Public: DAWA's data-dependent partition."""
        partition: Partition = self._port.submit(
            msg.DAWAPartition(self._node, eps, dict(options))
        )
        return partition

    def worst_approx(self, workload: EMatrix, x_hat: Any, *, eps: float) -> int:
        """Private→Public: index of the workload query worst approximated by x_hat."""
        index: int = self._port.submit(msg.WorstApprox(self._node, workload, x_hat, eps))
        return index

    def __repr__(self) -> str:
        try:
            return f"ProtectedVector(node={self._node}, shape={self.shape})"
        except (TypeError, ValueError):
            return f"ProtectedVector(node={self._node}, invalid)"
