"""The audit trail's hash chain: one append-only chain per dataset.

Each entry records who asked what of which dataset and what happened — the
analyst, the session, the operation, the request id, the request's digest
(`ledger.request_digest`: a hash of its public content), the amount asked,
the charge at the root and the outcome — never a data value or an answer.
Entry k stores h_k = SHA-256(h_{k−1} ‖ canonical JSON of its fields), with
h_0 = 64 zeros, so editing, deleting or reordering any entry breaks every
later hash; `verify_chain` recomputes it. (A plain chain proves integrity
against edits, not against someone who rewrites the whole chain: anchor the
latest hash elsewhere, e.g. in the custodian's own records, for that.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["GENESIS", "OUTCOMES", "AuditEntry", "entry_hash", "verify_chain"]

GENESIS = "0" * 64

# what an entry can record: the dataset's creation, an analyst added, a
# session attached (a protect), and each Private→Public request's outcome
OUTCOMES = (
    "created",
    "analyst_added",
    "attached",
    "granted",
    "refused",
    "replayed",
    "conflict",
)


@dataclass(frozen=True)
class AuditEntry:
    """One entry of a dataset's chain (everything but the hashes)."""

    dataset: str
    seq: int
    time: str
    analyst: str
    session: str | None
    operation: str
    request_id: str | None
    spec_hash: str | None
    amount: str | None  # exact rational text, in the dataset's unit
    charge: str | None
    outcome: str

    def canonical(self) -> str:
        return json.dumps(
            [
                self.dataset, self.seq, self.time, self.analyst, self.session, self.operation,
                self.request_id, self.spec_hash, self.amount, self.charge, self.outcome,
            ],
            ensure_ascii=True, separators=(",", ":"),
        )  # fmt: skip


def entry_hash(prev: str, entry: AuditEntry) -> str:
    """h_k = SHA-256(h_{k−1} ‖ "\\n" ‖ canonical(entry_k))."""
    return hashlib.sha256((prev + "\n" + entry.canonical()).encode("utf-8")).hexdigest()


def verify_chain(rows: Iterable[tuple[AuditEntry, str, str]]) -> tuple[int, int | None, str]:
    """Recompute one dataset's chain from (entry, prev, hash) rows in seq
    order: (entries checked, first broken seq or None, why)."""
    expected_prev, count = GENESIS, 0
    for entry, prev, digest in rows:
        count += 1
        if entry.seq != count:
            return count, entry.seq, f"sequence number {entry.seq} where {count} was expected"
        if entry.outcome not in OUTCOMES:
            return count, entry.seq, f"unknown outcome {entry.outcome!r}"
        if prev != expected_prev:
            return count, entry.seq, "its previous hash is not the hash of the entry before"
        if entry_hash(prev, entry) != digest:
            return count, entry.seq, "its hash does not match its contents"
        expected_prev = digest
    return count, None, ""


def last_of(rows: Sequence[tuple[int, str]]) -> tuple[int, str]:
    """The (seq, hash) to chain the next entry to, from the latest row if any."""
    return rows[0] if rows else (0, GENESIS)
