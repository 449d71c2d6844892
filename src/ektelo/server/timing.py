"""When the server releases an answer: at a time set from public facts (issue #36).

A request's response time would otherwise follow the work it caused, and the
work of a free transformation follows the rows it selects: a secret count
was estimated to within 20% from ~35 zero-budget requests by timing alone.
So every `/v1/` response is held until a *release time* fixed by the
request's public class and a public schedule:

* each class has a floor — ``free`` (transformations, descriptions,
  sessions, budgets, refusals of free requests) and ``charged`` (every
  Private→Public request) — configured as
  ``[server] response_floor_ms = {free = 50, charged = 100}`` (the defaults);
* a request whose work outlasts its floor F is released at the next point of
  the doubling grid F·2ᵏ: the release time is then one of a few public
  values and says only which power of two of the floor the work fell in
  (≤ log₂(work / F) + 1 levels), not the row count itself.

Time spent before the request's body has arrived (the client's upload) does
not count towards the floor's start: the clock starts when the body is read.
Set a floor above the slowest request you serve and the release time is
constant; `benchmarks/bench_response_floor.py` measures the latency cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FLOOR_DEFAULTS", "ResponseFloors", "release_after"]

#: the default floors in milliseconds (docs/server.md, "Timing")
FLOOR_DEFAULTS: dict[str, float] = {"free": 50.0, "charged": 100.0}


@dataclass(frozen=True)
class ResponseFloors:
    """The floor of each request class, in milliseconds (0 disables a class)."""

    free: float = FLOOR_DEFAULTS["free"]
    charged: float = FLOOR_DEFAULTS["charged"]

    def of(self, charged: bool) -> float:
        return self.charged if charged else self.free


def release_after(elapsed_ms: float, floor_ms: float) -> float:
    """The release time (ms after the start) of a response whose work took
    `elapsed_ms`: the floor, or the least floor·2ᵏ at or after the work's end.
    A zero floor releases at once (no padding)."""
    if floor_ms <= 0:
        return elapsed_ms
    if elapsed_ms <= floor_ms:
        return floor_ms
    return floor_ms * 2.0 ** math.ceil(math.log2(elapsed_ms / floor_ms))
