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
from fractions import Fraction
from typing import Any, Literal

from ..kernel.ledger import (
    Accountant,
    BudgetExceeded,
    Kind,
    NodeState,
    RequestConflict,
    Reservation,
    check_request_id,
    request_digest,
)
from .records import decode_answer, encode_answer
from .sql import DatasetRef, PathItem, SQLStore

__all__ = ["DurableLedger"]


class DurableLedger(Accountant):
    """Algorithm 2 for one kernel session, persisted in a ledger store: the
    graph in memory (`Accountant`), B along a chain read and written by the store."""

    def __init__(self, store: SQLStore, ref: DatasetRef, *, analyst: str | None, session: str):
        super().__init__()
        self.store = store
        self.ref = ref
        self.unit: Literal["epsilon", "rho"] = ref.unit
        self.total = ref.total
        self.delta = ref.delta
        self.analyst = analyst
        self.session = session
        self._db_ids: dict[int, int] = {}  # variables persisted so far → their row ids

    def add_root(self, kind: Kind, operation: str, digest: str = "") -> int:
        """The dataset's persistent root (shared by every session)."""
        root = super().add_root(kind, operation, self.ref.root_digest)
        self._db_ids[root] = self.ref.root
        return root

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
        chain = self.chain(node)
        path = [
            PathItem(self._db_ids.get(i), n.kind, n.stability, n.operation, n.digest)
            for i, n in ((i, self._nodes[i]) for i in chain)
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
        self._db_ids.update(zip(chain, out.db_ids, strict=True))
        steps = tuple(zip(chain, out.increments, strict=True))
        return Reservation(rid, steps, out.increments[-1], token=out.token)

    def release(self, reservation: Reservation, answer: Mapping[str, Any]) -> None:
        if reservation.token is not None:
            self.store.release(reservation.token, encode_answer(answer))

    # -- public views ----------------------------------------------------------------
    @property
    def spent(self) -> Fraction:
        return self.store.budget_of(self.ref)

    def snapshot(self) -> tuple[NodeState, ...]:
        """This session's variables with B as committed (the root's B is the
        dataset's, shared with every other session)."""
        spent = self.store.spent_of(list(self._db_ids.values()))
        return tuple(
            NodeState(
                i, n.kind, n.parent, n.stability,
                spent.get(self._db_ids[i], Fraction(0)) if i in self._db_ids else Fraction(0),
                n.operation,
            )
            for i, n in enumerate(self._nodes)
        )
