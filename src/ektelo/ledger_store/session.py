"""One kernel's durable ledger: Algorithm 2 over a store, reserve → release.

A `DurableLedger` is the `ledger.Accountant` of a kernel protected with
`ledger=`: its root (local id 0) is the dataset's persistent root, shared by
every session of the dataset (in this process or any other), and each
variable the session derives is a persisted child (written, with its parent,
stability, kind and structural digest, in the transaction of the first
charge on its chain: a variable never charged changes no budget). The
session keeps only public facts in memory (kinds, parents, stabilities); B
along a chain is read from the database inside the reserving transaction,
so concurrent sessions never overspend together (`sql.SQLStore.reserve`).

Crash semantics: a charge is committed before the kernel draws noise. If
the process dies after the charge, the reservation stays charged with no
answer (never refunded: the noise may have been drawn). A database failure
after the charge (at `release`) raises `StoreError` and leaves the charge
in place; a retry of that request id is then refused (the answer is not
stored) rather than drawn afresh — a fresh draw would spend twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from ..kernel.ledger import (
    Budget,
    BudgetExceeded,
    Kind,
    NodeState,
    RequestConflict,
    Reservation,
    amount_in,
    check_child,
    check_request_id,
    node_digest,
    request_digest,
)
from .records import decode_answer, encode_answer
from .sql import DatasetRef, PathItem, SQLStore

__all__ = ["DurableLedger"]


@dataclass
class _Local:
    kind: Kind
    parent: int | None
    stability: Fraction
    operation: str
    digest: str
    db_id: int | None = None


class DurableLedger:
    """Algorithm 2 for one kernel session, persisted in a ledger store."""

    def __init__(self, store: SQLStore, ref: DatasetRef, *, analyst: str | None, session: str):
        self.store = store
        self.ref = ref
        self.unit: Literal["epsilon", "rho"] = ref.unit
        self.total = ref.total
        self.analyst = analyst
        self.session = session
        self._nodes: list[_Local] = []

    def amount(self, *, eps: float | None = None, rho: float | None = None) -> Fraction:
        return amount_in(self.unit, eps=eps, rho=rho)

    # -- graph (public facts, in memory) -------------------------------------------
    def add_root(self, kind: Kind, operation: str) -> int:
        if self._nodes:
            raise ValueError("the ledger already has a root")
        if kind == "partition":
            raise ValueError("a partition variable cannot be the root")
        self._nodes.append(
            _Local(kind, None, Fraction(1), operation, self.ref.root_digest, self.ref.root)
        )
        return 0

    def add_child(
        self, parent: int, kind: Kind, stability: float | Fraction, operation: str,
        spec: str = "",
    ) -> int:  # fmt: skip
        s = check_child(self._node(parent).kind, kind, stability)
        digest = node_digest(self._nodes[parent].digest, operation, spec)
        self._nodes.append(_Local(kind, parent, s, operation, digest))
        return len(self._nodes) - 1

    def kind(self, node: int) -> Kind:
        return self._node(node).kind

    def _node(self, node: int) -> _Local:
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < len(self._nodes):
            raise ValueError(f"unknown source variable {node!r}")
        return self._nodes[node]

    def __len__(self) -> int:
        return len(self._nodes)

    # -- reserve → release ------------------------------------------------------------
    def reserve(
        self, node: int, amount: Fraction, *, operation: str, request_id: str | None,
        content: Mapping[str, Any],
    ) -> Reservation:  # fmt: skip
        """Check and durably charge one request (or replay its stored answer);
        BudgetExceeded / RequestConflict change nothing but the audit log."""
        rid = check_request_id(request_id) or uuid.uuid4().hex
        if not isinstance(amount, Fraction) or amount <= 0:
            raise ValueError(f"a request must be a positive Fraction, got {amount!r}")
        if self._node(node).kind == "partition":
            raise ValueError("requests are made at tables or vectors, not partition variables")
        chain: list[int] = []
        current: int | None = node
        while current is not None:
            chain.append(current)
            current = self._nodes[current].parent
        path = [
            PathItem(n.db_id, n.kind, n.stability, n.operation, n.digest)
            for n in (self._nodes[i] for i in chain)
        ]
        digest = request_digest(self._nodes[node].digest, {"operation": operation, **content})
        out = self.store.reserve(
            self.ref, session=self.session, analyst=self.analyst, path=path, amount=amount,
            operation=operation, request_id=rid, digest=digest,
        )  # fmt: skip
        if out.status == "refused":
            raise BudgetExceeded(out.message)
        if out.status == "conflict":
            raise RequestConflict(out.message)
        if out.status == "replayed":
            return Reservation(rid, (), Fraction(0), replay=decode_answer(out.answer or "{}"))
        for i, db_id in zip(chain, out.db_ids, strict=True):
            self._nodes[i].db_id = db_id
        steps = tuple(zip(chain, out.increments, strict=True))
        return Reservation(rid, steps, out.increments[-1], token=out.token)

    def release(self, reservation: Reservation, answer: Mapping[str, Any]) -> None:
        if reservation.token is not None:
            self.store.release(reservation.token, encode_answer(answer))

    # -- public views ----------------------------------------------------------------
    def budget(self) -> Budget:
        spent = self.store.budget_of(self.ref)
        return Budget(
            total=float(self.total), spent=float(spent),
            remaining=float(max(self.total - spent, Fraction(0))), unit=self.unit,
            delta=self.ref.delta,
        )  # fmt: skip

    @property
    def spent(self) -> Fraction:
        return self.store.budget_of(self.ref)

    def snapshot(self) -> tuple[NodeState, ...]:
        """This session's variables with B as committed (the root's B is the
        dataset's, shared with every other session)."""
        spent = self.store.spent_of([n.db_id for n in self._nodes if n.db_id is not None])
        return tuple(
            NodeState(
                i, n.kind, n.parent, n.stability,
                spent.get(n.db_id, Fraction(0)) if n.db_id is not None else Fraction(0),
                n.operation,
            )
            for i, n in enumerate(self._nodes)
        )
