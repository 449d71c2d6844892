"""The privacy budget ledger: Algorithm 2 of the paper (§4.4), exactly, once
for both kinds of budget.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/ledger.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from ..budget import ZCDP, PureDP, describe

__all__ = [
    "EPS_FLOOR",
    "SLACK",
    "Accountant",
    "Budget",
    "BudgetExceeded",
    "BudgetReport",
    "Ledger",
    "NodeState",
    "RequestConflict",
    "Reservation",
    "algorithm2",
    "check_epsilon",
    "check_request_id",
    "check_rho",
    "node_digest",
    "request_digest",
]

SLACK = Fraction(1, 10**9)

Kind = Literal["table", "vector", "partition"]


class BudgetExceeded(Exception):  # noqa: N818 - the name the API promises
    """A Private→Public request would overspend the privacy budget.

    Raised before anything changes: the ledger and the data are as before.
    """


class RequestConflict(ValueError):  # noqa: N818 - names what happened, like BudgetExceeded
    """A request id was used before for a different request, or its earlier
    request was charged but has no stored answer (in flight, or lost in a
    crash: its charge stands; retry under a new id). Raised before any charge."""


# The smallest ε any request may carry: below it (subnormals, 1e-300) the
# mechanisms' exact arithmetic has no room, and no analysis needs it.
EPS_FLOOR = 1e-9
RHO_FLOOR = EPS_FLOOR**2 / 2  # the ρ of an ε-DP request at the floor


def _check(value: object, name: str, floor: float, symbol: str) -> float:
    """`value` as a finite float ≥ `floor`, or TypeError/ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        x = float(value)
    except OverflowError:  # an exact rational beyond any double (a wire '$fraction')
        x = math.inf
    if not math.isfinite(x) or x <= 0:
        shown = text if len(text := repr(value)) <= 60 else text[:57] + "..."  # cut short
        raise ValueError(f"{name} must be a finite positive number, got {shown}")
    if x < floor:
        raise ValueError(f"{name}={value!r} is below the smallest {symbol} accepted ({floor:g})")
    return x


def check_epsilon(value: object, name: str = "eps") -> float:
    """`value` as a finite float ≥ EPS_FLOOR, or TypeError/ValueError naming `name`."""
    return _check(value, name, EPS_FLOOR, "ε")


def check_rho(value: object, name: str = "rho") -> float:
    """`value` as a finite float ≥ EPS_FLOOR²/2, or TypeError/ValueError naming `name`."""
    return _check(value, name, RHO_FLOOR, "ρ")


@dataclass(frozen=True)
class BudgetReport:
    """The budget of a kernel, in floats of its unit ("epsilon" or "rho"):
    total, spent so far, remaining; `delta` is the δ a zCDP budget was stated
    with (then `epsilon()` reports the (ε, δ)-DP that the spent ρ implies)."""

    total: float
    spent: float
    remaining: float
    unit: Literal["epsilon", "rho"] = "epsilon"
    delta: float | None = None
    privacy_unit: str | None = None  # the neighbouring relation when per unit, not per row
    # the δ reserved for releasing open columns' keys (`Kernel.select_keys`): the
    # whole guarantee is (ε at `delta`, delta + key_delta)-DP (issue #39)
    key_delta: float | None = None

    def epsilon(self, delta: float | None = None) -> float:
        """ε of the guarantee so far: the spent ε, or for ρ the (ε, δ)-DP it implies."""
        if self.unit == "epsilon":
            return self.spent
        d = self.delta if delta is None else delta
        if d is None:
            raise ValueError("a zCDP budget needs delta= to be reported as (ε, δ)")
        return ZCDP(max(self.spent, RHO_FLOOR)).epsilon(d)

    def __str__(self) -> str:
        """What the spending so far guarantees, in one line (`budget.describe`):
        the spent ε, or the spent ρ and the (ε, δ)-DP it implies."""
        return describe(self)


Budget = BudgetReport  # its name before #35 (budget.py's PureDP/ZCDP are the budgets)


@dataclass(frozen=True)
class NodeState:
    """The public ledger state of one source variable (exact values)."""

    node: int
    kind: Kind
    parent: int | None
    stability: Fraction
    spent: Fraction
    operation: str


@dataclass
class _Node:
    kind: Kind
    parent: int | None
    stability: Fraction
    operation: str
    digest: str
    spent: Fraction = Fraction(0)  # B(sv), in the in-memory `Ledger` only


class Accountant(ABC):
    """What the kernel needs of a ledger: the transformation graph of §4.4 —
    each variable's kind, parent, stability, operation and structural digest —
    kept here once, and reserve → release, which the in-memory `Ledger` and
    the durable one (`ledger_store.DurableLedger`) implement. `reserve` checks
    the whole chain (and, durably, the dataset cap and the analyst's quota)
    and commits the charge before the kernel computes; `release` stores the
    public answer with it."""

    unit: Literal["epsilon", "rho"]
    total: Fraction
    delta: float | None  # the δ a zCDP budget was stated with (reports only)

    def __init__(self) -> None:
        self._nodes: list[_Node] = []

    def add_root(self, kind: Kind, operation: str, digest: str = "root") -> int:
        """Create the root source variable (St = 1, B = 0)."""
        if self._nodes:
            raise ValueError("the ledger already has a root")
        if kind == "partition":
            raise ValueError("a partition variable cannot be the root")
        self._nodes.append(_Node(kind, None, Fraction(1), operation, digest))
        return 0

    def add_child(
        self, parent: int, kind: Kind, stability: float | Fraction, operation: str,
        spec: str = "",
    ) -> int:  # fmt: skip
        """Add a variable derived from `parent` by a `stability`-stable
        transformation, or ValueError when the graph rules of §4.4 forbid it;
        `spec` names its public arguments (for its digest)."""
        up, s = self._node(parent), Fraction(stability)
        if s < 0:
            raise ValueError(f"stability must be ≥ 0, got {stability!r}")
        if kind == "partition" and s != 1:
            raise ValueError("a partition variable is 1-stable relative to its parent")
        if up.kind == "partition" and (kind == "partition" or s != 1):
            raise ValueError("children of a partition variable are 1-stable tables or vectors")
        digest = node_digest(up.digest, operation, spec)
        self._nodes.append(_Node(kind, parent, s, operation, digest))
        return len(self._nodes) - 1

    def kind(self, node: int) -> Kind:
        return self._node(node).kind

    def _node(self, node: int) -> _Node:
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < len(self._nodes):
            raise ValueError(f"unknown source variable {node!r}")
        return self._nodes[node]

    def chain(self, node: int) -> list[int]:
        """The variables from a requested `node` up to the root (Algorithm 2's path)."""
        if self._node(node).kind == "partition":
            raise ValueError("requests are made at tables or vectors, not partition variables")
        path = [node]
        while (parent := self._nodes[path[-1]].parent) is not None:
            path.append(parent)
        return path

    def stability_to_root(self, node: int) -> Fraction:
        """The product of the stabilities from `node` up to the root: a change
        of one unit of the root moves at most this many rows of `node`."""
        return math.prod((self._nodes[n].stability for n in self.chain(node)), start=Fraction(1))

    def __len__(self) -> int:
        return len(self._nodes)

    def amount(self, *, eps: float | None = None, rho: float | None = None) -> Fraction:
        """A request's cost in the ledger's unit (exact): ε, or ε²/2 or ρ in ρ.
        Refuses a zCDP request on a pure-ε ledger (before anything changes)."""
        if (eps is None) == (rho is None):
            raise TypeError("a request carries exactly one of eps= and rho=")
        if eps is not None:
            e = Fraction(check_epsilon(eps))
            return e if self.unit == "epsilon" else e * e / 2
        r = Fraction(check_rho(rho))
        if self.unit == "epsilon":
            raise ValueError(
                "this kernel's budget is pure ε-DP: a zCDP request (rho=, Gaussian noise) needs "
                "a kernel protected with rho= or with epsilon= and delta="
            )
        return r

    @property
    @abstractmethod
    def spent(self) -> Fraction:
        """B(root): the budget spent so far."""

    def budget(self) -> BudgetReport:
        spent = self.spent
        left = max(self.total - spent, Fraction(0))
        return BudgetReport(float(self.total), float(spent), float(left), self.unit, self.delta)

    @abstractmethod
    def snapshot(self) -> tuple[NodeState, ...]:
        """The ledger (graph, stabilities, B) as immutable values."""

    @abstractmethod
    def reserve(
        self, node: int, amount: Fraction, *, operation: str, request_id: str | None,
        content: Mapping[str, Any],
    ) -> Reservation:  # fmt: skip
        """Algorithm 2 on the chain from `node`: the charge committed (or a replay)."""

    @abstractmethod
    def release(self, reservation: Reservation, answer: Mapping[str, Any]) -> None:
        """Store the public answer with its charge (for retries)."""


Link = tuple[Kind, Fraction, Fraction]  # (kind, stability to the parent, B) of one variable


def algorithm2(
    path: Sequence[Link], sigma: Fraction, unit: Literal["epsilon", "rho"], total: Fraction,
    limit: Fraction,
) -> list[Fraction]:  # fmt: skip
    """Request(sv, σ) of Algorithm 2 (§4.4) on the chain `path` from the
    requested variable (first) to the root (last): the increment of B at each
    variable, or BudgetExceeded when the root would pass `limit`. Pure: the
    caller commits the increments (in memory, or in one database transaction).
    """
    increments: list[Fraction] = []
    for i, (kind, stability, spent) in enumerate(path):
        if i == len(path) - 1:  # the root
            if spent + sigma > limit:
                raise BudgetExceeded(
                    f"request needs {float(sigma):.6g} more at the root; spent "
                    f"{float(spent):.6g} of {float(total):.6g}"
                )
            increments.append(sigma)
            break
        if kind == "partition":
            if i == 0:  # pragma: no cover - callers refuse requests at partitions
                raise ValueError("partition variables receive requests from children only")
            child_spent = path[i - 1][2]
            r = max(child_spent + sigma - spent, Fraction(0))
            increments.append(r)
            sigma = r
        else:
            increments.append(sigma)
            sigma = (stability if unit == "epsilon" else stability**2) * sigma
    return increments


def check_request_id(request_id: object) -> str | None:
    """A client's request id: None, or a non-empty printable str of ≤ 200 characters."""
    if request_id is None:
        return None
    if not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")
    if not 0 < len(request_id) <= 200 or not request_id.isprintable():
        raise ValueError("request_id must be 1 to 200 printable characters")
    return request_id


def node_digest(parent: str | None, operation: str, spec: str) -> str:
    """A structural name of a source variable: its parent's digest, the
    transformation and its public arguments. Two sessions that derive the same
    source the same way give it the same digest (so a retry from a new session
    matches its first try)."""
    return hashlib.sha256(json.dumps([parent, operation, spec]).encode()).hexdigest()


def request_digest(node: str, content: Mapping[str, Any]) -> str:
    """The digest of a Private→Public request: the source's digest and the
    request's public content (operation, ε/ρ, the query's spec, options)."""
    text = json.dumps([node, dict(content)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Reservation:
    """A granted (or replayed) charge. `steps` are the increments of B from the
    requested variable to the root; `replay` is the stored answer when the
    request repeats an earlier one (nothing was charged then); `token` is the
    store's reservation id."""

    request_id: str
    steps: tuple[tuple[int, Fraction], ...]
    charged: Fraction
    replay: Mapping[str, Any] | None = None
    token: int | None = None


class Ledger(Accountant):
    """Transformation graph, stabilities and B(sv) for one kernel (Algorithm 2)."""

    def __init__(self, budget: PureDP | ZCDP | float):
        super().__init__()
        if not isinstance(budget, (PureDP, ZCDP)):
            budget = PureDP(check_epsilon(budget, "epsilon"))
        self.unit = budget.unit
        self.total = Fraction(budget.total)
        self.delta = budget.delta if isinstance(budget, ZCDP) else None
        self.limit = self.total * (1 + SLACK)
        # explicit request ids → (request digest, stored answer); a request
        # without an id gets a fresh one and nothing is kept
        self._requests: dict[str, tuple[str, Mapping[str, Any] | None]] = {}

    @classmethod
    def envelope(cls, unit: Literal["epsilon", "rho"], cap: Fraction, kind: Kind) -> Ledger:
        """The ledger of one envelope (`Kernel.envelope`): its root stands for
        the envelope's variable, whose requests add up to `cap` there — what
        the kernel's ledger charged for it — within the same float slack."""
        ledger = cls(PureDP(float(cap)) if unit == "epsilon" else ZCDP(float(cap)))
        ledger.total, ledger.limit = cap, cap * (1 + SLACK)
        ledger.add_root(kind, "envelope")
        return ledger

    # -- Algorithm 2 -----------------------------------------------------------
    def plan(self, node: int, amount: float | Fraction) -> list[tuple[int, Fraction]]:
        """The increments of B along the chain from `node` to the root for a
        request of `amount` (in the ledger's unit) at `node`, or
        BudgetExceeded. Changes nothing."""
        sigma = amount if isinstance(amount, Fraction) else Fraction(check_epsilon(amount))
        if sigma <= 0:
            raise ValueError(f"a request must be positive, got {float(sigma)!r}")
        path = self.chain(node)
        links = [
            (self._nodes[i].kind, self._nodes[i].stability, self._nodes[i].spent) for i in path
        ]
        increments = algorithm2(links, sigma, self.unit, self.total, self.limit)
        return list(zip(path, increments, strict=True))

    def commit(self, steps: list[tuple[int, Fraction]]) -> Fraction:
        """Apply a plan from `plan`; returns the amount charged at the root."""
        for node, inc in steps:
            self._nodes[node].spent += inc
        return steps[-1][1]

    def request(self, node: int, amount: float | Fraction) -> Fraction:
        """Algorithm 2: check the whole chain, then commit. Returns the root charge."""
        return self.commit(self.plan(node, amount))

    def reserve(
        self, node: int, amount: Fraction, *, operation: str, request_id: str | None,
        content: Mapping[str, Any],
    ) -> Reservation:  # fmt: skip
        rid = check_request_id(request_id)
        digest = "" if rid is None else request_digest(  # (used only to match a retry)
            self._node(node).digest, {"operation": operation, **content}
        )
        if rid is not None and rid in self._requests:
            first, answer = self._requests[rid]
            if first != digest:
                raise RequestConflict(f"request_id {rid!r} was used for a different request")
            if answer is None:
                raise RequestConflict(f"request {rid!r} was charged but has no released answer")
            return Reservation(rid, (), Fraction(0), replay=answer)
        steps = self.plan(node, amount)
        charged = self.commit(steps)
        if rid is not None:
            self._requests[rid] = (digest, None)
        return Reservation(rid or uuid.uuid4().hex, tuple(steps), charged)

    def release(self, reservation: Reservation, answer: Mapping[str, Any]) -> None:
        held = self._requests.get(reservation.request_id)
        if held is not None and held[1] is None:
            self._requests[reservation.request_id] = (held[0], dict(answer))

    # -- public views ----------------------------------------------------------
    @property
    def spent(self) -> Fraction:
        return self._nodes[0].spent if self._nodes else Fraction(0)

    def snapshot(self) -> tuple[NodeState, ...]:
        return tuple(
            NodeState(i, n.kind, n.parent, n.stability, n.spent, n.operation)
            for i, n in enumerate(self._nodes)
        )
