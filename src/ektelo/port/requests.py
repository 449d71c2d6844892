"""The kernel's port: one typed request per operation, and the `Port` protocol.

Handles (`handles.py`) talk to a kernel only by submitting these values to a
`Port`; the in-process implementation is `local.LocalPort`, and a server
(the kernel as a service) is another. A request names source variables by
their integer ids and carries only public values: matrices, partitions'
group arrays, predicates, ε and plain options. Nothing in a request is
code the kernel runs: the kernel rebuilds matrices from the library's
classes and compiles predicates itself.

Every Private→Public request carries an optional `request_id`: the client's
id for idempotent retries (a repeat with the same content returns the stored
answer without a new charge; with other content it is refused); None means
the kernel gives the request a fresh id.

Responses are public values: `NewSource`/`NewSources` for Private
transformations (the ids of the derived sources), a `Measurement`, a
`Partition`, an index or cliques for Private→Public requests, and
`SourceInfo`, `Budget`, the history and the ledger for the public state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..kernel import QueryRecord, SourceInfo

__all__ = [
    "DAWAPartition",
    "Describe",
    "Envelope",
    "GetBudget",
    "GetHistory",
    "GetLedger",
    "GroupBy",
    "NewSource",
    "NewSources",
    "NoisyCount",
    "Port",
    "PrivBayesSelect",
    "QueryRecord",
    "Recode",
    "ReduceByPartition",
    "Select",
    "SelectKeys",
    "SelectMarginal",
    "SourceInfo",
    "SplitTable",
    "SplitVector",
    "Transform",
    "VectorGaussian",
    "VectorLaplace",
    "Vectorize",
    "Where",
    "WorstApprox",
]


class Port(Protocol):
    """Where a handle's requests go: a local kernel or a remote one."""

    def submit(self, request: Any) -> Any: ...


# -- responses -------------------------------------------------------------------


@dataclass(frozen=True)
class NewSource:
    """A derived source variable's id."""

    source: int


@dataclass(frozen=True)
class NewSources:
    """The ids of a partition's children, in group order."""

    sources: tuple[int, ...]


# -- public state -------------------------------------------------------------------


@dataclass(frozen=True)
class Describe:
    source: int


@dataclass(frozen=True)
class GetBudget:
    pass


@dataclass(frozen=True)
class GetHistory:
    pass


@dataclass(frozen=True)
class GetLedger:
    pass


# -- Private: table transformations (§5.1) -----------------------------------------


@dataclass(frozen=True)
class Where:
    source: int
    predicate: Any  # a predicate tree of `ektelo.col` (compiled by the kernel)


@dataclass(frozen=True)
class Select:
    source: int
    attrs: Any


@dataclass(frozen=True)
class GroupBy:
    source: int
    attrs: Any
    count: str | None = None
    count_cap: int = 1


@dataclass(frozen=True)
class SplitTable:
    source: int
    attr: Any


@dataclass(frozen=True)
class Vectorize:
    source: int
    attrs: Any = None


# -- Private: vector transformations (§5.1) ----------------------------------------


@dataclass(frozen=True)
class ReduceByPartition:
    source: int
    partition: Any  # a `Partition` (its group array is copied by the kernel)


@dataclass(frozen=True)
class SplitVector:
    source: int
    partition: Any


@dataclass(frozen=True)
class Transform:
    source: int
    matrix: Any


# -- Private→Public (each carries the ε it asks to spend) --------------------------


@dataclass(frozen=True)
class Envelope:
    """One charge for a question's requests (`Kernel.envelope`): never replayed."""

    source: int
    eps: Any = None
    rho: Any = None


@dataclass(frozen=True)
class VectorLaplace:
    source: int
    matrix: Any
    eps: Any
    request_id: str | None = None  # idempotent retries (None: a fresh id)


@dataclass(frozen=True)
class VectorGaussian:
    source: int
    matrix: Any
    rho: Any
    request_id: str | None = None  # idempotent retries (None: a fresh id)


@dataclass(frozen=True)
class NoisyCount:
    source: int
    eps: Any
    request_id: str | None = None  # idempotent retries (None: a fresh id)


@dataclass(frozen=True)
class DAWAPartition:
    source: int
    eps: Any
    options: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None  # idempotent retries (None: a fresh id)


@dataclass(frozen=True)
class WorstApprox:
    source: int
    workload: Any
    x_hat: Any
    eps: Any
    request_id: str | None = None  # idempotent retries (None: a fresh id)


@dataclass(frozen=True)
class PrivBayesSelect:
    source: int
    eps: Any
    options: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None  # idempotent retries (None: a fresh id)


@dataclass(frozen=True)
class SelectMarginal:
    """MST/AIM's exponential-mechanism choice of one marginal of a table."""

    source: int
    candidates: Any  # attribute tuples
    estimates: Any  # one public array per candidate
    eps: Any = None
    rho: Any = None
    weights: Any = None
    penalties: Any = None
    request_id: str | None = None  # idempotent retries (None: a fresh id)
    groups: Any = None  # per candidate, a public map of its cells to groups (or None)


@dataclass(frozen=True)
class Recode:
    """An open column made a coded attribute of public `keys` (issue #39)."""

    source: int
    column: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class SelectKeys:
    """Partition selection: the keys of an open column released (issue #39)."""

    source: int
    column: str
    rho: Any
    request_id: str | None = None  # idempotent retries (None: a fresh id)
