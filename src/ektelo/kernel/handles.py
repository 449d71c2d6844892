"""Opaque handles to protected sources, and `protect` (§4.1).

A handle names one source variable of one kernel. It has no attribute that
exposes data: its methods are requests to the kernel, which checks that the
handle is its own. Operator types (§4.2) are in each docstring:
**Private** methods return new handles and spend nothing;
**Private→Public** methods take a keyword-only `eps`, charge it through
Algorithm 2 and return a public value. Handles cannot be copied or pickled
(a copy of the kernel would be a copy of the budget).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..domain import Domain

if TYPE_CHECKING:
    from ..matrix import EMatrix, Partition
    from .budget import Budget, NodeState
    from .kernel import Kernel, Request
    from .measurement import Measurement

__all__ = ["ProtectedTable", "ProtectedVector", "protect"]


class _Handle:
    __slots__ = ("_kernel", "_node")

    def __init__(self, kernel: Kernel, node: int):
        self._kernel = kernel
        self._node = node

    @property
    def kernel(self) -> Kernel:
        """The kernel that owns this source (for budget and history)."""
        return self._kernel

    @property
    def budget(self) -> Budget:
        """The kernel's total, spent and remaining budget (floats)."""
        return self._kernel.budget

    def history(self) -> tuple[Request, ...]:
        """Every granted Private→Public request of the kernel, in order."""
        return self._kernel.history

    def ledger(self) -> tuple[NodeState, ...]:
        """A snapshot of the kernel's ledger (graph, stabilities, B(sv))."""
        return self._kernel.ledger()

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
        return self._kernel.domain_of(self)

    def where(self, predicate: Any) -> ProtectedTable:
        """Private, 1-stable: the rows satisfying `predicate` (see `ektelo.col`)."""
        return self._kernel.where(self, predicate)

    def select(self, attrs: Any) -> ProtectedTable:
        """Private, 1-stable: projection onto `attrs` (every row kept)."""
        return self._kernel.select(self, attrs)

    def group_by(
        self, attrs: Any, *, count: str | None = None, count_cap: int = 1
    ) -> ProtectedTable:
        """Private, 2-stable (PINQ GroupBy): a table with one row per group key
        of `attrs`; with `count`, an extra attribute min(group size, count_cap)."""
        return self._kernel.group_by(self, attrs, count=count, count_cap=count_cap)

    def split_by_partition(self, attr: str) -> list[ProtectedTable]:
        """Private, 1-stable: one table per value of `attr` (parallel composition)."""
        return self._kernel.split_table(self, attr)

    def vectorize(self, attrs: Any = None) -> ProtectedVector:
        """Private, 1-stable (T-Vectorize): counts over the product domain of
        `attrs` (default: all, in domain order), C-order. A new root vector."""
        return self._kernel.vectorize(self, attrs)

    def noisy_count(self, *, eps: float) -> Measurement:
        """Private→Public (NoisyCount): the number of rows plus Laplace(1/eps)."""
        return self._kernel.noisy_count(self, eps=eps)

    def privbayes_select(self, *, eps: float, **options: Any) -> list[tuple[int, ...]]:
        """Private→Public: PrivBayes's private choice of attribute cliques."""
        return self._kernel.privbayes_select(self, eps=eps, **options)

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
        return self._kernel.shape_of(self)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def root_id(self) -> str:
        """Identifies the root vector this one derives from (for inference)."""
        return self._kernel.root_of(self)[0]

    @property
    def root_shape(self) -> tuple[int, ...]:
        return self._kernel.root_of(self)[1]

    def laplace(self, M: EMatrix, *, eps: float) -> Measurement:
        """Private→Public (Vector Laplace): M·x + Laplace(sens(M)/eps) with the
        sensitivity computed by the kernel."""
        return self._kernel.laplace(self, M, eps=eps)

    def reduce_by_partition(self, P: Partition) -> ProtectedVector:
        """Private, 1-stable: the total of every group of `P`."""
        return self._kernel.reduce_by_partition(self, P)

    def split_by_partition(self, P: Partition) -> list[ProtectedVector]:
        """Private, 1-stable: one vector per group of `P` (its cells in order)."""
        return self._kernel.split_vector(self, P)

    def transform(self, M: EMatrix) -> ProtectedVector:
        """Private: M·x, stability = max column L1 norm of M (computed by the kernel)."""
        return self._kernel.transform(self, M)

    def ahp_partition(self, *, eps: float, **options: Any) -> Partition:
        """Private→Public: AHP's data-dependent partition."""
        return self._kernel.ahp_partition(self, eps=eps, **options)

    def dawa_partition(self, *, eps: float, **options: Any) -> Partition:
        """Private→Public: DAWA's data-dependent partition."""
        return self._kernel.dawa_partition(self, eps=eps, **options)

    def worst_approx(self, workload: EMatrix, x_hat: Any, *, eps: float) -> int:
        """Private→Public: index of the workload query worst approximated by x_hat."""
        return self._kernel.worst_approx(self, workload, x_hat, eps=eps)

    def augmented_worst_approx(
        self, workload: EMatrix, x_hat: Any, *, eps: float, round_index: int
    ) -> EMatrix:
        """Private→Public: the augmented MWEM query selection of round `round_index`."""
        return self._kernel.augmented_worst_approx(
            self, workload, x_hat, eps=eps, round_index=round_index
        )

    def __repr__(self) -> str:
        try:
            return f"ProtectedVector(node={self._node}, shape={self.shape})"
        except (TypeError, ValueError):
            return f"ProtectedVector(node={self._node}, invalid)"


def protect(
    data: Any,
    domain: Domain | None = None,
    *,
    epsilon: float,
    seed: int | None = None,
    integral: bool | None = None,
    show_bad_values: bool = False,
) -> ProtectedTable | ProtectedVector:
    """Start a kernel around `data` with a total budget `epsilon` (§4.1).

    * a pandas DataFrame with a `Domain` → a `ProtectedTable` (values encoded
      to codes; any value outside the domain is an error naming the column
      and the kind of problem, never a value, row or count — unless the
      data holder passes `show_bad_values=True` to count them and list the
      first few rows and values, see `Domain.encode`);
    * a numeric numpy array of any shape → a `ProtectedVector` over that shape.

    `integral` declares whether an array holds counts (integers): by default
    True for integer and bool dtypes, False for floats. The kernel never looks
    at the values to decide it (the noise grid and the partition operators
    depend on it); `integral=True` on a float array checks the values here,
    at protect time, and refuses fractions. Tables are always counts.

    `seed=None` draws secure noise; an int seed is research mode (reproducible,
    NOT secure) and is recorded in every Measurement.

    Guarantee: any sequence of requests on the returned handle and the handles
    derived from it is ε·(1 + 10⁻⁹)-differentially private (Theorem 1; the
    10⁻⁹ is the ledger's documented float slack, see `kernel.budget`).
    """
    from .budget import check_epsilon
    from .kernel import Kernel

    check_epsilon(epsilon, "epsilon")
    if isinstance(data, pd.DataFrame):
        if not isinstance(domain, Domain):
            raise TypeError("protecting a DataFrame needs domain=Domain(...)")
        codes = domain.encode(data, show_bad_values=show_bad_values)
        return Kernel(epsilon=epsilon, seed=seed)._root_table(codes, domain)
    if domain is not None:
        raise ValueError("domain= applies to DataFrames; an array is protected as a vector")
    if not isinstance(data, np.ndarray):
        raise TypeError(f"protect() takes a DataFrame or a numpy array, got {type(data).__name__}")
    if data.dtype.kind not in "biuf" or data.size == 0:
        raise TypeError(f"a protected vector needs a non-empty numeric array, got {data.dtype}")
    # Integrality is declared, never observed (issue #22): integer and bool
    # arrays are counts; a float array is not, unless the data holder says so.
    declared = data.dtype.kind in "biu" if integral is None else integral
    if not isinstance(declared, bool):
        raise TypeError(f"integral must be None, True or False, got {integral!r}")
    values = data.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("the data vector has non-finite entries")
    if declared and not np.array_equal(values, np.round(values)):
        # the data holder's own call, before any kernel or analyst exists
        raise ValueError("integral=True needs integer values; the array has fractions")
    return Kernel(epsilon=epsilon, seed=seed)._root_vector(values, integral=declared)
