"""The in-process port, and `protect` (§4.1): a kernel in this process.

`LocalPort` maps each request of `port.py` onto one method of a `Kernel`;
`protect` is the data holder's call that starts a kernel around the data and
hands back the root's handle. A server is the other implementation of the
port: the same handles and plans run unchanged against it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..budget import ZCDP, PureDP
from ..domain import Domain
from ..engines import is_table_source, open_table, rows_per_unit
from ..kernel import Kernel, PrivacyUnit, QueryLimits, Receipt, check_epsilon, check_rho
from . import requests as port
from .handles import ProtectedTable, ProtectedVector

__all__ = ["LocalPort", "budget_of", "protect"]


def unit_relation(
    column: Any, max_rows: Any, max_groups: Any = None, per_group: Any = None,
    group_by: Any = None,
) -> PrivacyUnit | None:  # fmt: skip
    """The neighbouring relation protect was asked for (None: one row), or
    a clear error (also the server's check of a dataset's configuration)."""
    bounds = (max_rows, max_groups, per_group, group_by)
    if column is None and all(b is None for b in bounds):
        return None
    if column is None:
        raise ValueError("max_rows_per_unit=, max_groups_per_unit= and max_rows_per_group= "
                         "bound a privacy unit's rows: name it with privacy_unit=")  # fmt: skip
    if max_groups is None and per_group is None and group_by is None:
        if max_rows is None:
            raise ValueError(
                f"privacy_unit={column!r} needs max_rows_per_unit=k, the most rows one unit "
                "may contribute (ektelo.units.suggest_max_rows proposes one), or "
                "max_groups_per_unit=, max_rows_per_group= and group_by="
            )
        return PrivacyUnit(column, max_rows)
    if max_rows is not None:
        raise ValueError("give max_rows_per_unit= or max_groups_per_unit= (with "
                         "max_rows_per_group= and group_by=), not both")  # fmt: skip
    if max_groups is None or per_group is None or group_by is None:
        raise ValueError("a bound on groups per unit needs max_groups_per_unit=, "
                         "max_rows_per_group= and group_by= together")  # fmt: skip
    names = (group_by,) if isinstance(group_by, str) else group_by
    if not isinstance(names, Sequence):
        raise TypeError(f"group_by must be a list of attribute names, got {type(names).__name__}")
    return PrivacyUnit(column, per_group, max_groups, tuple(names))


def budget_of(
    *, epsilon: float | None = None, delta: float | None = None, rho: float | None = None
) -> PureDP | ZCDP:
    """The typed budget a data holder states with protect's keywords."""
    if rho is not None:
        if epsilon is not None:
            raise TypeError("give the budget as epsilon= (with delta=) or as rho=, not both")
        return ZCDP(check_rho(rho, "rho"), delta=delta)
    if epsilon is None:
        raise TypeError("protect() needs a budget: epsilon= (pure DP; with delta=: zCDP) or rho=")
    eps = check_epsilon(epsilon, "epsilon")
    return PureDP(eps) if delta is None else ZCDP.from_approx(eps, delta)


class LocalPort:
    """A port to a kernel in this process (one kernel per port)."""

    __slots__ = ("_kernel", "_routes")

    def __init__(self, kernel: Kernel):
        self._kernel = kernel
        k = kernel
        self._routes: dict[type, Callable[[Any], Any]] = {
            port.Describe: lambda r: k.describe(r.source),
            port.GetBudget: lambda r: k.budget,
            port.GetHistory: lambda r: k.history,
            port.GetLedger: lambda r: k.ledger(),
            port.Where: lambda r: port.NewSource(k.where(r.source, r.predicate)),
            port.Select: lambda r: port.NewSource(k.select(r.source, r.attrs)),
            port.GroupBy: lambda r: port.NewSource(
                k.group_by(r.source, r.attrs, count=r.count, count_cap=r.count_cap)
            ),
            port.SplitTable: lambda r: port.NewSources(tuple(k.split_table(r.source, r.attr))),
            port.Vectorize: lambda r: port.NewSource(k.vectorize(r.source, r.attrs)),
            port.ReduceByPartition: lambda r: port.NewSource(
                k.reduce_by_partition(r.source, r.partition)
            ),
            port.SplitVector: lambda r: port.NewSources(
                tuple(k.split_vector(r.source, r.partition))
            ),
            port.Transform: lambda r: port.NewSource(k.transform(r.source, r.matrix)),
            port.Envelope: lambda r: port.NewSource(k.envelope(r.source, eps=r.eps, rho=r.rho)),
            port.Recode: lambda r: port.NewSource(k.recode(r.source, r.column, list(r.keys))),
            port.SelectKeys: lambda r: k.select_keys(
                r.source, r.column, rho=r.rho, request_id=r.request_id
            ),
            port.VectorLaplace: lambda r: k.laplace(
                r.source, r.matrix, eps=r.eps, request_id=r.request_id
            ),
            port.VectorGaussian: lambda r: k.gaussian(
                r.source, r.matrix, rho=r.rho, request_id=r.request_id
            ),
            port.NoisyCount: lambda r: k.noisy_count(r.source, eps=r.eps, request_id=r.request_id),
            port.DAWAPartition: lambda r: k.dawa_partition(
                r.source, eps=r.eps, request_id=r.request_id, **r.options
            ),
            port.WorstApprox: lambda r: k.worst_approx(
                r.source, r.workload, r.x_hat, eps=r.eps, request_id=r.request_id
            ),
            port.PrivBayesSelect: lambda r: k.privbayes_select(
                r.source, eps=r.eps, request_id=r.request_id, **r.options
            ),
            port.SelectMarginal: lambda r: k.select_marginal(
                r.source, r.candidates, r.estimates, eps=r.eps, rho=r.rho, weights=r.weights,
                penalties=r.penalties, request_id=r.request_id, groups=r.groups,
            ),
        }

    def submit(self, request: Any) -> Any:
        """Run one request on the kernel and return its public response."""
        return self._route(request)(request)

    def submit_with_receipt(self, request: Any) -> tuple[Any, Receipt]:
        """Run one request and return its response with the kernel's `Receipt`
        (the nodes it created; its charge): one round trip for a server."""
        route = self._route(request)
        return self._kernel.receipted(lambda: route(request))

    def _route(self, request: Any) -> Callable[[Any], Any]:
        route = self._routes.get(type(request))
        if route is None:
            raise TypeError(f"not a kernel request: {type(request).__name__}")
        return route

    def __repr__(self) -> str:
        return f"LocalPort({self._kernel!r})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a kernel's port cannot be pickled or copied")


def protect(
    data: Any,
    domain: Domain | None = None,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    seed: int | None = None,
    integral: bool | None = None,
    show_bad_values: bool = False,
    engine: Any = None,
    on_invalid: str = "error",
    ledger: Any = None,
    dataset: str | None = None,
    analyst: str | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    query_limits: QueryLimits | None = None,
    max_groups_per_unit: int | None = None,
    max_rows_per_group: int | None = None,
    group_by: Sequence[str] | None = None,
    history: int | None = None,
) -> ProtectedTable | ProtectedVector:
    """Start a kernel around `data` with a total privacy budget (§4.1).

    The budget: `epsilon=` alone is pure ε-DP (Laplace and the paper's
    operators); `epsilon=` with `delta=` is the (ε, δ)-DP guarantee kept as a
    zCDP budget ρ (`ZCDP.from_approx`, rounded down), which also admits
    Gaussian requests; `rho=` is a ρ-zCDP budget directly (`delta=` then only
    says how reports convert it).

    * a pandas DataFrame with a `Domain` → a `ProtectedTable` (values encoded
      to codes; any value outside the domain is an error naming the column
      and the kind of problem, never a value, row or count — unless the
      data holder passes `show_bad_values=True` to count them and list the
      first few rows and values, see `Domain.encode`);
    * a numeric numpy array of any shape → a `ProtectedVector` over that shape.

    Where a table lives (issue #28, docs/engines.md): `engine=None` picks the
    in-memory engine for a DataFrame, DuckDB for a CSV/Parquet path (str or
    Path) or a ``"duckdb:///file.db?table=name"`` table, and Spark for a Spark
    DataFrame; ``engine="memory"|"duckdb"|"spark"`` or a configured engine
    (``DuckDBEngine(memory_limit="1GB", threads=2, temp_directory=...)``)
    overrides it. `on_invalid` says what happens to values outside the domain
    and missing values: "error" refuses the table (here, before any kernel
    exists), "drop" removes their rows (a 1-stable filter), "clamp" moves
    numbers to the nearest value of their attribute (a 1-stable map) and
    refuses what has none — see `Domain.clean`.

    `integral` declares whether an array holds counts (integers): by default
    True for integer and bool dtypes, False for floats. The kernel never looks
    at the values to decide it (the noise grid and the partition operators
    depend on it); `integral=True` on a float array checks the values here,
    at protect time, and refuses fractions. Tables are always counts.

    `query_limits=` (a `QueryLimits`) bounds the rows and the work of any
    query the kernel evaluates (default `QueryLimits()`); larger ones are
    refused before anything is charged (issue #36). `history=N` keeps only
    the last N query records in memory (`.history`; None: all) — for a
    long-lived kernel whose durable `ledger=` keeps every request (#40).

    `seed=None` draws secure noise; an int seed is research mode (reproducible,
    NOT secure) and is recorded in every Measurement.

    A durable budget (issue #26, docs/ledger.md): `ledger=` is a SQLite file
    path (created if absent), a `postgresql://` URL or an open store
    (`ektelo.ledger_store.open_store`), and `dataset=` names the budget in
    it. The first protect of a dataset records its total (from epsilon/
    delta/rho); later ones must state the same budget (ValueError naming the
    stored total otherwise: a cap never changes) and share it — every
    session, in any process, charges the dataset's one persistent root, and
    each charge is committed to the database before noise is drawn.
    `analyst=` names an analyst added with `store.add_analyst` (their quota
    applies too); None is the data holder.

    Privacy units (issue #37): by default neighbouring tables differ in one
    row. With `privacy_unit="person_id"` and `max_rows_per_unit=k` they
    differ in all rows of one person (every row sharing a value of that
    column): the engine keeps at most k rows of each person — chosen by a
    keyed hash with a secret key, an order no analyst can influence or see —
    and drops the identifier column, and the kernel records the bound as a
    k-stable transformation from the sealed table of persons, so every
    request on the returned table is charged k times its ε (the budget is
    per person). Counts then carry the bias of the rows dropped (not in any
    interval); `ektelo.units.suggest_max_rows` proposes k privately.
    Instead of k, `max_groups_per_unit=g`, `max_rows_per_group=r` and
    `group_by=[...]` keep at most g groups (values of the group_by
    attributes) of each person and r rows of each: requests are charged
    g·r times their ε, but a Gaussian measurement whose every query counts
    within one group (a histogram or marginal over attributes that include
    group_by) only g·r² times its ρ — the L2 bound √g·r (docs/units.md).

    Guarantee: any sequence of requests on the returned handle and the handles
    derived from it is ε·(1 + 10⁻⁹)-differentially private (Theorem 1; the
    10⁻⁹ is the ledger's documented float slack, see `kernel.ledger`;
    ε·(1 + 10⁻⁹)² with envelopes, which allow the same slack inside); with
    a ledger, so is every request on the dataset, from all sessions together.
    """
    key_delta = None
    if isinstance(domain, Domain) and domain.open:  # open columns (issue #39): half of δ
        if delta is None:                           # is kept for releasing their keys
            raise ValueError(f"open column(s) {list(domain.open)} need an (ε, δ) budget: "
                             "releasing keys nobody declared is never pure ε-DP (give delta=)")
        delta = key_delta = float(delta) / 2
    budget = budget_of(epsilon=epsilon, delta=delta, rho=rho)
    if ledger is None and (dataset is not None or analyst is not None):
        raise TypeError("dataset= and analyst= name a budget in a ledger store: pass ledger=")

    if is_table_source(data) or engine is not None:
        if not isinstance(domain, Domain):
            raise TypeError("protecting a table needs domain=Domain(...)")
        if integral is False:
            raise ValueError("a table is always counts: integral=False does not apply")
        from ..units import SuggestMaxRows

        suggest = max_rows_per_unit if isinstance(max_rows_per_unit, SuggestMaxRows) else None
        if suggest is not None and max_groups_per_unit is not None:
            raise ValueError("suggest_max_rows chooses max_rows_per_unit; it does not combine "
                             "with max_groups_per_unit=")  # fmt: skip
        units = unit_relation(
            privacy_unit, 1 if suggest else max_rows_per_unit, max_groups_per_unit,
            max_rows_per_group, group_by,
        )  # fmt: skip
        key = secrets.token_hex(16) if seed is None else f"research-{seed}"
        sealed = None
        if suggest is not None and units is not None:  # k chosen privately, in this kernel
            sizes = rows_per_unit(data, domain, units.column, engine=engine)
            kernel = _kernel(budget, seed, ledger, dataset, analyst, query_limits, units, history)
            sealed, histogram = kernel.seal_units(units.column, sizes)
            choice = suggest.choose(ProtectedVector(LocalPort(kernel), histogram))
            units = PrivacyUnit(units.column, choice.max_rows)
        table_engine, table = open_table(
            data, domain, engine=engine, on_invalid=on_invalid, show_bad_values=show_bad_values,
            units=units, key=key,
        )  # fmt: skip
        if sealed is None:
            kernel = _kernel(budget, seed, ledger, dataset, analyst, query_limits, units, history,
                             key_delta)  # fmt: skip
        elif key_delta is not None:
            raise ValueError("open columns do not combine with suggest_max_rows yet")
        root = kernel.add_engine_table(table_engine, table, domain, units=units, root=sealed)
        return ProtectedTable(LocalPort(kernel), root)
    if any(b is not None for b in (privacy_unit, max_rows_per_unit, max_groups_per_unit,
                                   max_rows_per_group, group_by)):  # fmt: skip
        raise ValueError("privacy_unit= applies to tables; an array's cells have no units")
    if on_invalid != "error":
        raise ValueError("on_invalid= applies to tables; an array is protected as a vector")
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
    kernel = _kernel(budget, seed, ledger, dataset, analyst, query_limits, None, history)
    return ProtectedVector(LocalPort(kernel), kernel.add_vector(values, integral=declared))


def _kernel(
    budget: PureDP | ZCDP, seed: int | None, ledger: Any, dataset: str | None,
    analyst: str | None, limits: QueryLimits | None = None, units: PrivacyUnit | None = None,
    history: int | None = None, key_delta: float | None = None,
) -> Kernel:  # fmt: skip
    """A kernel over the in-memory ledger, or attached to `dataset` in a store
    (after the data was checked, so a refused protect records nothing)."""
    if ledger is None:
        return Kernel(budget, seed=seed, limits=limits, history=history, key_delta=key_delta)
    if dataset is None:
        raise TypeError("a ledger= needs dataset= naming the budget in it")
    from .. import ledger_store as store  # (a throwaway budget needs no store: #41)

    relation = "row" if units is None else f"unit:{units.column}"
    durable = store.attach(ledger, dataset, budget, analyst=analyst, research=seed is not None,
                           neighbours=relation)  # fmt: skip
    return Kernel(budget, seed=seed, ledger=durable, limits=limits, history=history,
                  key_delta=key_delta)
