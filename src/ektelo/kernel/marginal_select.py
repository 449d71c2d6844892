"""Private choice of one marginal by the exponential mechanism — the selection
step shared by MST (JPC 2021, Algorithm 1) and AIM (PVLDB 2022, Algorithm 2
line 8) — Private→Public.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/marginal_select.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import math
import numbers
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..domain import Domain, check_names
from .contracts import MAX_CELLS, Sparse, TableEngine, each_marginal
from .ledger import check_epsilon, check_rho

__all__ = [
    "CACHE_CELLS",
    "CLAMP",
    "MAX_CANDIDATES",
    "WEIGHT_MAX",
    "MarginalCache",
    "SelectionRequest",
    "check_request",
    "em_budget",
    "scores",
    "select_marginal",
]

CLAMP = 2.0**30  # K of M1–M3
WEIGHT_MAX = 2**12  # M4
MAX_CANDIDATES = 2**23 - 1  # the exponential mechanism's exact weights (noise.py E2)
_GRID = 2.0**-10  # M1
_EM_EPS_MIN = 2.0**-33  # noise.py E4: the mechanism needs ε > 2·2⁻³⁴
CACHE_CELLS = 2**26  # the marginal cache's public bound, in cells (proofs/marginal_select.md)


@dataclass(frozen=True)
class SelectionRequest:
    """A validated selection request (public values only)."""

    candidates: tuple[tuple[str, ...], ...]
    columns: tuple[tuple[int, ...], ...]
    shapes: tuple[tuple[int, ...], ...]
    estimates: tuple[np.ndarray, ...]  # flat, on the grid 2⁻¹⁰, in [−K, K] (M1)
    weights: np.ndarray  # int64, 1..WEIGHT_MAX
    penalties: np.ndarray  # float64, on the grid, in [−K, K] (M1)
    groups: tuple[np.ndarray, ...] | None = None  # intp, cell → group (or no grouping)

    @property
    def sensitivity(self) -> float:
        """Δ = max_r w_r."""
        return float(self.weights.max())


def _on_grid(values: np.ndarray) -> np.ndarray:
    """M1: round to the grid 2⁻¹⁰ and clamp into [−K, K] (public values)."""
    out: np.ndarray = np.clip(np.rint(values / _GRID) * _GRID, -CLAMP, CLAMP)
    return out


def _sequence(value: Any, name: str, k: int | None = None, what: str = "") -> list[Any]:
    """`value` as a list; given k, one entry (`what`, default `name`) per candidate."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list, got {type(value).__name__}")
    if k is not None and len(value) != k:
        raise ValueError(f"{len(value)} {what or name} for {k} candidates")
    return list(value)


def check_request(
    domain: Domain,
    candidates: Any,
    estimates: Any,
    weights: Any = None,
    penalties: Any = None,
    groups: Any = None,
) -> SelectionRequest:
    """Validate a selection request from public values alone (before the charge)."""
    cands = _sequence(candidates, "candidates")
    if not cands:
        raise ValueError("candidates is empty: nothing to select")
    if len(cands) > MAX_CANDIDATES:
        raise ValueError(f"{len(cands)} candidates; must be fewer than 2**23")
    names = tuple(check_names(domain, c, "candidates") for c in cands)
    shapes = tuple(domain.project(list(c)).shape for c in names)
    for c, shape in zip(names, shapes, strict=True):
        if math.prod(shape) > MAX_CELLS:
            raise ValueError(f"candidate {list(c)} has too many cells ({math.prod(shape)})")
    ests = _sequence(estimates, "estimates", len(names))
    maps = None if groups is None else _groups(groups, names, shapes)
    sizes = [math.prod(s) for s in shapes] if maps is None else [int(g.max()) + 1 for g in maps]
    flat: list[np.ndarray] = []
    for c, size, e in zip(names, sizes, ests, strict=True):
        try:
            a = np.array(e, dtype=np.float64, copy=True).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the estimate for {list(c)} is not an array of numbers") from exc
        if a.size != size or not np.all(np.isfinite(a)):
            what = "cells" if maps is None else "groups"
            raise ValueError(
                f"the estimate for {list(c)} must be {size} finite numbers (one per {what[:-1]})"
            )
        a = _on_grid(a)
        a.setflags(write=False)
        flat.append(a)
    w = _weights(weights, len(names))
    p = _penalties(penalties, len(names))
    columns = tuple(tuple(domain.index(n) for n in c) for c in names)
    return SelectionRequest(names, columns, shapes, tuple(flat), w, p, maps)


def _groups(
    groups: Any, names: tuple[tuple[str, ...], ...], shapes: tuple[tuple[int, ...], ...]
) -> tuple[np.ndarray, ...]:
    """Each candidate's cell → group map, checked: integers 0..k−1 over the
    candidate's cells, every group used (public values)."""
    values = _sequence(groups, "groups", len(names), "group maps")
    out = []
    for c, shape, g in zip(names, shapes, values, strict=True):
        try:
            a = np.array(g, copy=True)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the group map for {list(c)} is not an array of integers") from exc
        if a.dtype.kind not in "iu" or a.ndim != 1 or a.size != math.prod(shape):
            raise ValueError(
                f"the group map for {list(c)} must be {math.prod(shape)} integers (one per cell)"
            )
        if a.size and (a.min() < 0 or np.unique(a).size != int(a.max()) + 1):
            raise ValueError(f"the group map for {list(c)} must use every group 0..k−1")
        a = a.astype(np.intp)
        a.setflags(write=False)
        out.append(a)
    return tuple(out)


def _real(v: Any, name: str, what: str) -> Any:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be {what}, got {type(v).__name__}")
    return v


def _weights(weights: Any, k: int) -> np.ndarray:
    out = np.ones(k, dtype=np.int64)
    for i, v in enumerate([] if weights is None else _sequence(weights, "weights", k)):
        f = float(_real(v, "weights", "integers"))
        if not (math.isfinite(f) and f.is_integer() and 1 <= f <= WEIGHT_MAX):
            raise ValueError(
                f"weights must be integers in 1..{WEIGHT_MAX} (exact scores), got {v!r}"
            )
        out[i] = int(f)
    return out


def _penalties(penalties: Any, k: int) -> np.ndarray:
    if penalties is None:
        return np.zeros(k)
    values = [_real(v, "penalties", "real numbers") for v in _sequence(penalties, "penalties", k)]
    out = np.array([float(v) for v in values], dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError("penalties must be finite")
    return _on_grid(out)


def em_budget(unit: str, *, eps: Any = None, rho: Any = None) -> tuple[float, dict[str, float]]:
    """(ε the mechanism runs with, the charge for `Kernel._spend`), from public
    values, refusing before any charge what the mechanism cannot run with (note)."""
    if (eps is None) == (rho is None):
        raise TypeError("give exactly one of eps= and rho=")
    if rho is not None:
        r = check_rho(rho)
        if unit != "rho":
            raise ValueError(
                "this kernel's budget is pure ε-DP: a zCDP request (rho=) needs a kernel "
                "protected with rho= or with epsilon= and delta="
            )
        e = math.sqrt(8.0 * r)
        while Fraction(e) ** 2 / 8 > Fraction(r):
            e = math.nextafter(e, 0.0)
        charge = {"rho": r}
    else:
        e = check_epsilon(eps)
        if unit == "rho":
            exact = Fraction(e) ** 2 / 8
            r = float(exact)
            if Fraction(r) < exact:
                r = math.nextafter(r, math.inf)
            charge = {"rho": check_rho(r, "eps²/8")}
        else:
            charge = {"eps": e}
    if not e > _EM_EPS_MIN:
        raise ValueError(f"the exponential mechanism needs ε > 2**-33; this request gives {e!r}")
    return e, charge


def scores(marginals: Iterable[Sparse], request: SelectionRequest) -> np.ndarray:
    """The exact qualities q_r = w_r·(min(‖clamp(M_r(D)) − est_r‖₁, K) − p_r) (M1–M4)
    from each candidate's nonzero marginal cells, in order — before the charge."""
    out = np.empty(len(request.candidates))
    found = iter(marginals)
    for i, (shape, est) in enumerate(zip(request.shapes, request.estimates, strict=True)):
        cells, nonzero = next(found)
        counts = np.zeros(math.prod(shape))
        counts[cells] = nonzero  # exact integers (< 2⁵³), as T-Vectorize's float64 counts
        if request.groups is not None:  # G_r·M_r: sums of integers < 2⁵³, exact
            counts = np.asarray(
                np.bincount(request.groups[i], weights=counts, minlength=est.size), np.float64
            )
        counts = np.clip(counts, 0.0, CLAMP)  # M2
        l1 = np.fmin(np.sum(np.abs(counts - est)), CLAMP)  # M3
        out[i] = float(request.weights[i]) * (l1 - request.penalties[i])  # M4
    return out


def select_marginal(q: np.ndarray, request: SelectionRequest, eps: float, source: Any) -> int:
    """Index of the candidate drawn with P(r) ∝ exp(ε·q_r/(2Δ)) (validated q, request, ε)."""
    return int(source.exponential_mechanism(q, sensitivity=request.sensitivity, epsilon=eps))


_Key = tuple[int, tuple[int, ...]]


class MarginalCache:
    """Marginal counts the kernel has read, per (table node, column set), up to
    `cells` cells (default `CACHE_CELLS`; 0 keeps nothing); least recently used
    first out, never the current request's (proofs/marginal_select.md, the cache)."""

    def __init__(self, cells: int | None = None):
        cells = CACHE_CELLS if cells is None else cells  # read when the kernel starts
        if isinstance(cells, bool) or not isinstance(cells, int) or cells < 0:
            raise ValueError(f"cells must be a non-negative int, got {cells!r}")
        self.cells = cells
        self.held = 0  # cells held: Σ of the kept marginals' public sizes
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[_Key, tuple[int, Sparse]] = OrderedDict()
        self._lock = threading.Lock()

    def each(
        self,
        node: int,
        engine: TableEngine,
        table: Any,
        column_sets: Sequence[tuple[int, ...]],
        shapes: Sequence[tuple[int, ...]],
    ) -> Iterator[Sparse]:
        """The marginals of `column_sets` on table `node` in order, as
        `engines.each_marginal` gives them: held ones from the cache."""
        keys = [(node, tuple(c)) for c in column_sets]
        with self._lock:
            held = {k: self._entries[k][1] for k in keys if k in self._entries}
        wanted = [i for i, k in enumerate(keys) if k not in held]
        fresh = each_marginal(
            engine, table, [column_sets[i] for i in wanted], [shapes[i] for i in wanted]
        )
        read: dict[_Key, tuple[int, Sparse]] = {}
        for i, (key, shape) in enumerate(zip(keys, shapes, strict=True)):
            if key in held:
                found = held[key]
            else:
                found = next(fresh)  # engine work: may raise before the commit
                read[key] = (math.prod(shape), found)
            if i == len(keys) - 1:  # every count read (the caller takes no more)
                self._commit(keys, held, read)
            yield found

    def _commit(
        self, keys: list[_Key], held: dict[_Key, Sparse], read: dict[_Key, tuple[int, Sparse]]
    ) -> None:
        """A completed request: its held keys used, its new marginals kept where they fit."""
        with self._lock:
            self.hits += sum(1 for k in keys if k in held)
            self.misses += sum(1 for k in keys if k not in held)
            current = set(keys)
            for k in keys:
                if k in self._entries:
                    self._entries.move_to_end(k)
            for key, (size, found) in read.items():
                if key in self._entries or size > self.cells:
                    continue
                for old in [k for k in self._entries if k not in current]:
                    if self.held + size <= self.cells:
                        break
                    self.held -= self._entries.pop(old)[0]
                if self.held + size <= self.cells:
                    self._entries[key] = (size, found)
                    self.held += size
