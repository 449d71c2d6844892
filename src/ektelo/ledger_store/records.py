"""The public records a ledger store reports, and the codecs it stores with.

`DatasetRecord` (a dataset's budget: unit, total, spent, remaining, δ and the
(ε, δ) a ρ budget implies), `AnalystRecord`, `HistoryEntry` (one charged
request), `AuditReport` (the outcome of `verify_audit`), and `StoreError`.
Exact rationals are stored as the `Fraction`'s string ("3/8"), never as
floats; released answers as JSON with arrays base64-encoded (exact float64).
None of these values carries private data: the ledger is public state
(paper §4.3), and answers are the released public values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal

from ..budget import ZCDP
from ..codec import decode_tree, encode_tree, parse_fraction
from ..errors import StoreError
from ..kernel.ledger import RHO_FLOOR

__all__ = [
    "AnalystRecord",
    "AuditReport",
    "DatasetRecord",
    "HistoryEntry",
    "StoreError",
    "decode_answer",
    "encode_answer",
    "frac",
    "now",
]


def frac(text: str | None) -> Fraction:
    """A stored exact rational ("3/8") back as a `Fraction`."""
    return parse_fraction(text) if text is not None else Fraction(0)


def now() -> str:
    """The current time in UTC, ISO 8601 with microseconds (stored as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class DatasetRecord:
    """A dataset's budget. `epsilon` is the ε of the guarantee so far: the
    spent ε, or for a ρ budget with a δ the (ε, δ)-DP that the spent ρ implies
    (None without a δ). `total_epsilon` likewise for the whole budget."""

    name: str
    unit: Literal["epsilon", "rho"]
    total: Fraction
    spent: Fraction
    delta: float | None
    created: str
    analysts: tuple[AnalystRecord, ...] = ()

    @property
    def remaining(self) -> Fraction:
        return max(self.total - self.spent, Fraction(0))

    @property
    def epsilon(self) -> float | None:
        return self._eps(self.spent)

    @property
    def total_epsilon(self) -> float | None:
        return self._eps(self.total)

    def _eps(self, amount: Fraction) -> float | None:
        if self.unit == "epsilon":
            return float(amount)
        if self.delta is None:
            return None
        return ZCDP(max(float(amount), RHO_FLOOR)).epsilon(self.delta)


@dataclass(frozen=True)
class AnalystRecord:
    """An analyst of one dataset: a quota beneath the dataset's cap (None: only
    the cap), and what their granted requests charged at the root."""

    name: str
    quota: Fraction | None
    spent: Fraction

    @property
    def remaining(self) -> Fraction | None:
        return None if self.quota is None else max(self.quota - self.spent, Fraction(0))


@dataclass(frozen=True)
class HistoryEntry:
    """One charged request: `status` is "released" (its answer is stored) or
    "reserved" (charged; no answer — in flight, or lost in a crash)."""

    time: str
    analyst: str | None
    operation: str
    amount: Fraction  # asked at the requested variable, in the dataset's unit
    charge: Fraction  # added at the root (the dataset's spent)
    request_id: str
    status: Literal["reserved", "released"]
    session: str | None


@dataclass(frozen=True)
class AuditReport:
    """`verify_audit`'s outcome. `ok` when every dataset's hash chain
    recomputes and the ledger agrees with it; otherwise `first_broken` names
    the first entry (dataset, sequence number) that does not, and `problems`
    lists what was found."""

    ok: bool
    entries: int
    first_broken: tuple[str, int] | None
    problems: tuple[str, ...]

    def __bool__(self) -> bool:
        return self.ok


def encode_answer(answer: Mapping[str, Any]) -> str:
    """A released answer as JSON text (arrays exact, base64 little-endian)."""
    return json.dumps(encode_tree(answer), sort_keys=True, allow_nan=False)


def decode_answer(text: str) -> dict[str, Any]:
    """`encode_answer`'s text back as a dict (arrays as numpy arrays)."""
    try:
        out = decode_tree(json.loads(text))
    except ValueError as err:
        raise StoreError(f"a stored answer does not decode: {err}") from err
    if not isinstance(out, dict):
        raise StoreError("a stored answer is not a JSON object")
    return out
