"""The analyst's session: named questions over one protected table, answered
as tidy pandas DataFrames with standard errors and confidence intervals
(public layer; the kernel holds the data and the budget).

    s = Session("adult.csv", "adult-domain.json", epsilon=1.0)
    s.histogram("race", epsilon=0.1)            # one row per race
    s.cdf("age", by="sex", where="race == 0", epsilon=0.2)
    s.preview("marginals", ["sex", "race"], epsilon=0.3)   # nothing spent
    s.budget                                     # spent / remaining

One way down: question → `ektelo.planner.choose` (auto or a named plan) →
the plan (`ektelo.plans`) → the kernel, through the handles; `ektelo run` is
a thin shell over this module. Every answer row carries `answer`,
`std_error`, `ci_low`/`ci_high` at level 1 − α and `ci_method`, which says
how the interval was computed (never a silent blank):

* data-independent plans, Laplace noise (ε): the error of query i is
  cᵢ·η with η i.i.d. Laplace(b) and cᵢ = wᵢA⁺ — its variance 2b²‖cᵢ‖² is
  exact (the matrix mechanism, Li et al., VLDB J. 2015; `operators.error`).
  When the answer is one noisy count (a histogram by the identity plan,
  marginals measured directly) the interval is the exact Laplace quantile
  ±b·ln(1/α) ("exact Laplace"). A sum of several Laplace terms is not
  Gaussian and its quantiles have no closed form; the interval is the
  exact quantile of one Laplace term with the sum's exact variance,
  ±(σ/√2)·ln(1/α) ("Laplace-tail width"): the sum's moment generating
  function is bounded by that term's (∏ⱼ 1/(1 − cⱼ²t²) ≤ 1/(1 − Σⱼ cⱼ²t²)),
  its tails are lighter. The normal approximation with the same variance
  under-covers when one term dominates (93.7% for a single term at
  α = 0.05); on HB's CDF answers, over four seeds of 2,000 correlated
  answers, it covered 94.0% on average (92.8–95.3%) and the Laplace-tail
  width 95.7% (94.9–96.5%; tests/session/test_intervals.py);
* Gaussian noise (zCDP, `delta=`): sums of Gaussians are Gaussian — exact
  normal quantiles ("exact Gaussian"; the kernel's discrete Gaussian on a
  fine grid has at most the stated variance);
* data-dependent plans answered by least squares (DAWA, AHP, grids):
  the noise-only interval conditional on the plan's public partition or
  selection (what it released), from the measurements actually taken; it
  leaves out the bias of spreading a group's count over its cells
  ("noise-only | partition");
* plans whose estimate is not linear in the noise (MWEM, PrivBayes,
  NNLS-based ones): no interval, and `ci_method` says so.

Post-processing (`nonnegative=`, `round=`, `consistent=`) works on released
answers only and never touches the budget (post-processing, Dwork & Roth
2014, Prop. 2.1); intervals are intersected with [0, ∞) under
`nonnegative=` (the true counts are non-negative, so coverage is kept).
Rows with invalid values are handled by `on_invalid=` before `protect`
(`Domain.clean`: a 1-stable filter or map, so charged correctly).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _validate as check
from . import wide
from .answers import half_width as _half_width
from .answers import noise_factor, noise_only_std
from .answers import tidy as _tidy
from .columns import Columns
from .domain import Domain, DomainValueError
from .loading import diagnosable as _diagnosable
from .loading import load_domain, load_table
from .wide import DIRECT_MARGINALS, LARGE_VECTOR  # (`vectorize` warns above LARGE_VECTOR)
from .workload import spec as questions

if TYPE_CHECKING:  # pandas is imported where a DataFrame is made (#41)
    import pandas as pd

    from .planner import Choice

__all__ = [
    "AnalystSession",
    "LargeVectorWarning",
    "Preview",
    "Recorder",
    "Session",
    "load_domain",
    "load_table",
    "noise_only_std",
]

# The noise-only interval of a data-dependent plan is computed densely up to
# this many cells (an n×n pseudo-inverse).
_DENSE_CELLS = 4096
# Data-dependent plans whose estimate is least squares over their
# measurements (linear in the noise, given the released partition/selection).
_LS_DEPENDENT = frozenset({"uniform", "uniform_grid", "adaptive_grid", "ahp", "dawa",
                           "dawa_striped"})
# The interval of a sum of several Laplace terms (see the module docstring).
LAPLACE_SUM = "Laplace-tail width (conservative for sums)"


class LargeVectorWarning(UserWarning):
    """A question would build a data vector above `LARGE_VECTOR` cells."""


# -- the recording port ----------------------------------------------------------------
class Recorder:
    """A port that forwards every request to the kernel's port and keeps the
    public Measurements it returns (for error bars from what was measured)."""

    __slots__ = ("_inner", "measurements")

    def __init__(self, inner: Any):
        self._inner = inner
        self.measurements: list[Any] = []

    def submit(self, request: Any) -> Any:
        from .measurement import Measurement

        response = self._inner.submit(request)
        if isinstance(response, Measurement):
            self.measurements.append(response)
        return response


# -- results -------------------------------------------------------------------------
@dataclass(frozen=True)
class Preview:
    """What a question would cost and how accurate it would be, before any
    spending: the plan, why, the expected standard error per query (None:
    no closed form), the interval half-width at `alpha`, and every
    candidate plan considered (`ranking`: the planner's Tier 0 ranking as
    text — free; a preview charges no Tier 1 features)."""

    plan: str
    why: str
    std_error: np.ndarray | None
    ci_half_width: np.ndarray | None
    ci_method: str
    alpha: float
    budget: dict[str, float]
    candidates: pd.DataFrame = field(repr=False)

    @property
    def ranking(self) -> str:
        """The ranking with each candidate's expected error (exact, Monte-Carlo
        or data-dependent) and the choice; "" for a named plan."""
        from .planner import format_choice

        choice = self.candidates.attrs.get("choice")
        return "" if choice is None else format_choice(choice)

    @property
    def rmse(self) -> float | None:
        """Root mean squared error per query (expected)."""
        if self.std_error is None:
            return None
        return float(np.sqrt(np.mean(self.std_error**2)))

    def __str__(self) -> str:
        spend = ", ".join(f"{k}={v:g}" for k, v in self.budget.items())
        if self.std_error is None or self.ci_half_width is None:
            acc = f"no closed-form error ({self.ci_method})"
        else:
            # one word per figure: std error (each query's), RMSE (over the queries:
            # what the planner ranks by), ± (the interval's half-width)
            acc = (f"expected std error {float(np.median(self.std_error)):.3g} per query "
                   f"(median; max {float(self.std_error.max()):.3g}; RMSE {self.rmse:.3g}); "
                   f"{100 * (1 - self.alpha):g}% interval "
                   f"±{float(np.median(self.ci_half_width)):.3g} ({self.ci_method})")
        return f"plan {self.plan} at {spend}: {acc}\n  why: {self.why}"


# A file DuckDB refused is read again by pandas, to name the problem as the
# in-memory reader does, when it is no larger than this (bytes).
# -- the session ---------------------------------------------------------------------
class AnalystSession:
    """One protected table and its budget, with named questions.

    Args:
        table_or_path: a DataFrame, or a CSV/Parquet path (read by the data
            holder's process; only the domain's columns are kept).
        domain: a `Domain`, a JSON domain file, a JSON string or a dict.
        epsilon, delta, rho: the total budget, as in `ektelo.protect`: ε alone
            is pure DP (Laplace); ε with δ, or ρ, is zCDP (Gaussian plans).
        ledger, dataset, analyst: a persistent budget across sessions (an
            SQLite path or PostgreSQL URL, the dataset's name), passed to
            `protect` when the kernel supports it.
        seed: research mode (seeded, NOT secure noise).
        on_invalid: "error" (default), "drop" or "clamp" — see `Domain.clean`.
        progress: show progress on slow questions (stderr; log lines when
            not a terminal).
        engine: where the table's row-level work runs (docs/engines.md):
            None picks DuckDB for a path (memory, with a one-line warning,
            when DuckDB is not installed) and memory for a DataFrame;
            "memory" reads the file here into pandas; "duckdb" or "spark"
            (or an engine object) leave a path where it lies and push the
            work down, with `on_invalid` applied by the engine.
        public_rows: the table's row count, if the custodian declares it
            public (approximate is fine). `plan="auto"` then chooses from
            the planner's declared-rows decision table, for free and before
            anything is spent (docs/planner.md), and `privbayes_pgm` takes it
            as its N (no noisy count spent); questions with `where=` do not
            use it (the filtered count is not declared).
    """

    # the last question planned (`ask`/`preview`): (question, choice, the budget
    # asked of the table) — `ektelo.sql` derives exact errors of summed rows from it
    _last_choice: tuple[questions.ParsedWorkload, Choice, dict[str, float]] | None = None
    _enveloped = False  # inside `_one_charge`

    def __init__(
        self,
        table_or_path: pd.DataFrame | str | Path,
        domain: Domain | str | Path | dict[str, Any],
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        ledger: str | Path | None = None,
        dataset: str | None = None,
        analyst: str | None = None,
        seed: int | None = None,
        on_invalid: str = "error",
        show_bad_values: bool = False,
        progress: bool = True,
        engine: Any = None,
        public_rows: float | None = None,
        privacy_unit: str | None = None,
        max_rows_per_unit: int | None = None,
        max_groups_per_unit: int | None = None,
        max_rows_per_group: int | None = None,
        group_by: Sequence[str] | None = None,
    ):
        from .port import ProtectedTable, protect

        self.public_rows = None if public_rows is None else check.positive(public_rows,
                                                                           "public_rows")

        if on_invalid not in ("error", "drop", "clamp"):
            raise ValueError(f"on_invalid must be 'error', 'drop' or 'clamp', got {on_invalid!r}")
        self.domain = load_domain(domain)
        data: Any
        if engine is None:  # DuckDB for a file, memory for a DataFrame (or without DuckDB)
            from .engines import default_engine, duckdb_installed, fallback_note, is_frame

            engine = default_engine(table_or_path)
            if not is_frame(table_or_path) and not duckdb_installed():
                warnings.warn(fallback_note(table_or_path), stacklevel=2)
        if isinstance(table_or_path, str | Path) and not str(table_or_path).startswith(
            "duckdb://"
        ) and not Path(table_or_path).exists():
            raise FileNotFoundError(f"data file not found: {table_or_path}")
        if engine == "memory":
            data = load_table(table_or_path, self.domain, on_invalid=on_invalid,
                              show_bad_values=show_bad_values)
        else:  # the engine reads the file where it lies (docs/engines.md)
            data = str(table_or_path) if isinstance(table_or_path, Path) else table_or_path
        options: dict[str, Any] = {}
        if ledger is not None or dataset is not None:
            accepted = inspect.signature(protect).parameters
            if "ledger" not in accepted:
                raise NotImplementedError(
                    "this kernel has no persistent ledger yet (protect(ledger=...))"
                )
            if dataset is None:
                if not isinstance(table_or_path, str | Path):
                    raise ValueError("a ledger needs dataset= (the name the budget is kept under)")
                dataset = Path(table_or_path).stem
            options.update(ledger=str(ledger) if ledger is not None else None, dataset=dataset)
            if analyst is not None:
                options["analyst"] = analyst
        if engine != "memory":
            options.update(engine=engine, on_invalid=on_invalid)
        bounds = {"max_rows_per_unit": max_rows_per_unit, "group_by": group_by,
                  "max_groups_per_unit": max_groups_per_unit,
                  "max_rows_per_group": max_rows_per_group}  # fmt: skip
        if privacy_unit is not None or any(v is not None for v in bounds.values()):
            # per-unit budgets (issue #37): the engine bounds each unit's rows
            options.update(privacy_unit=privacy_unit, **bounds)
            if engine == "memory":  # read by the engine, the identifier beside the codes
                # (load_table above has checked the file and named any problem)
                data = str(table_or_path) if isinstance(table_or_path, Path) else table_or_path
                options.update(engine="memory", on_invalid=on_invalid)
        # every question is asked of the bounded table, k-stable from the units:
        # its ε becomes ε/k there (ρ/k²), so the root — the per-unit budget — pays ε
        self.privacy_unit = privacy_unit
        try:
            table = protect(data, self.domain, epsilon=epsilon, delta=delta, rho=rho, seed=seed,
                            show_bad_values=show_bad_values, **options)
        except DomainValueError:
            if engine == "memory" or not _diagnosable(table_or_path):
                raise
            # the data holder's refusal, named as the in-memory reader names it (the
            # kind of bad value, hints, rows with show_bad_values): read once more
            load_table(table_or_path, self.domain, on_invalid=on_invalid,
                       show_bad_values=show_bad_values)
            raise  # pandas found nothing: DuckDB's own summary stands
        assert isinstance(table, ProtectedTable)  # (a table's data is protected as a table)
        # k: the bounded table's stability from the units (1 per row), chosen or given
        self.max_rows_per_unit = int(table.ledger()[table.node].stability)
        # g and group_by when each unit is bounded to g groups (#37): a Gaussian
        # plan whose queries count within groups is charged g·r²·ρ, not (g·r)²·ρ
        self._unit_groups = None if max_groups_per_unit is None else (
            int(max_groups_per_unit),
            (group_by,) if isinstance(group_by, str) else tuple(group_by or ()),
        )  # fmt: skip
        self._recorder = Recorder(table.port)
        self._table = ProtectedTable(self._recorder, table.node)  # every request recorded
        self.dataset = dataset
        self.progress = progress
        self._history: list[dict[str, Any]] = []

    @classmethod
    def over(cls, table: Any, *, progress: bool = False,
             public_rows: float | None = None) -> AnalystSession:
        """A session over a table already protected: a local
        `ektelo.protect(...)` handle or a server's, `ektelo.connect(url,
        token).dataset(name)` — every question then goes through the
        handle's port as the same typed requests (remote = local)."""
        from .port import ProtectedTable

        if not isinstance(table, ProtectedTable):
            raise TypeError(f"Session.over takes a protected table handle, got "
                            f"{type(table).__name__}")
        self = cls.__new__(cls)
        self.public_rows = None if public_rows is None else check.positive(public_rows,
                                                                           "public_rows")
        self.domain = table.domain
        self.privacy_unit = None
        self.max_rows_per_unit = int(table.ledger()[table.node].stability)
        self._unit_groups = None  # a groups bound is not seen here: charged by L1 (#37)
        self._recorder = Recorder(table.port)
        self._table = ProtectedTable(self._recorder, table.node)
        self.dataset = None
        self.progress = progress
        self._history = []
        return self

    # -- budget ----------------------------------------------------------------------
    @property
    def budget(self) -> Any:
        """The kernel's budget: total, spent, remaining (in its unit: ε or ρ)."""
        return self._table.budget

    @property
    def unit(self) -> str:
        return str(self.budget.unit)

    @property
    def spent(self) -> float:
        return float(self.budget.spent)

    @property
    def remaining(self) -> float:
        return float(self.budget.remaining)

    @property
    def history(self) -> pd.DataFrame:
        """Every question answered: what, which plan, what it cost."""
        import pandas as pd

        return pd.DataFrame(self._history)

    @property
    def research_mode(self) -> bool:
        return self._table.research_mode

    # -- the named questions ---------------------------------------------------------
    def histogram(self, attrs: str | Sequence[str], *, where: Any = None,
                  **options: Any) -> pd.DataFrame:
        """The count of every cell of `attrs` (one attribute or several)."""
        return self.ask(questions.histogram(self.domain, attrs), where=where, **options)

    counts = histogram

    def cdf(self, attr: str, *, by: str | Sequence[str] = (), where: Any = None,
            **options: Any) -> pd.DataFrame:
        """The CDF of `attr` (counts of values ≤ each), broken down `by`
        other attributes (each value, and all of them: NA)."""
        return self.ask(questions.cdf(self.domain, attr, by), where=where, **options)

    def sum(self, attr: str, *, by: str | Sequence[str] = (), where: Any = None,
            totals: bool = False, **options: Any) -> pd.DataFrame:
        """The sum of numeric `attr` (each row at its cell's representative
        value, `ektelo.workload.values`) for every cell of the `by`
        attributes (`totals`: every sub-breakdown too, NA rows); one linear
        workload, intervals from its exact noise variance."""
        return self.aggregates(attr, by=by, statistics=("sum",), where=where, totals=totals,
                               **options)

    def mean(self, attr: str, *, by: str | Sequence[str] = (), where: Any = None,
             totals: bool = False, **options: Any) -> pd.DataFrame:
        """The mean of numeric `attr` per cell of `by`: the ratio of a sum and
        a count measured jointly by one plan, with Fieller intervals from
        their joint noise covariance (`ektelo.derived`)."""
        return self.aggregates(attr, by=by, statistics=("mean",), where=where, totals=totals,
                               **options)

    def aggregates(self, attr: str, *, by: str | Sequence[str] = (),
                   statistics: str | Sequence[str] = ("sum", "count", "mean"),
                   where: Any = None, totals: bool = False, **options: Any) -> pd.DataFrame:
        """Sums, counts and means of `attr` by `by` from ONE workload (one
        row per statistic and group: the ``statistic`` column)."""
        return self.ask(questions.aggregates(self.domain, attr, by, statistics, totals=totals),
                        where=where, **options)

    def quantile(self, attr: str, q: float | Sequence[float] = (0.5,), *,
                 by: str | Sequence[str] = (), where: Any = None,
                 **options: Any) -> pd.DataFrame:
        """Quantiles of numeric `attr` at levels `q`, per value of `by` and
        overall, by inverting the noisy CDF (`ektelo.derived`)."""
        return self.ask(questions.quantiles(self.domain, attr, q, by), where=where, **options)

    def ranges(self, attrs: str | Sequence[str], bounds: Sequence[Any], *, where: Any = None,
               **options: Any) -> pd.DataFrame:
        """Counts in ranges: `bounds` holds (lo, hi) per query (per attribute
        when several): labels/codes inclusive, bins half-open at bin edges."""
        return self.ask(questions.ranges(self.domain, attrs, bounds), where=where, **options)

    def marginals(self, attrs_or_k: int | str | Sequence[str], *, k: int | None = None,
                  where: Any = None, **options: Any) -> pd.DataFrame:
        """Marginals: `marginals(["sex", "race"])` the joint counts of those
        attributes (`k=1` their one-way marginals instead); `marginals(2)` all
        2-way marginals of the table."""
        if isinstance(attrs_or_k, int) and not isinstance(attrs_or_k, bool):
            attrs, k = list(self.domain.names), attrs_or_k
        else:
            attrs = [attrs_or_k] if isinstance(attrs_or_k, str) else list(attrs_or_k)  # type: ignore[arg-type]
        return self.ask(questions.marginals(self.domain, attrs, k), where=where, **options)

    def workload(self, W: Any, attrs: str | Sequence[str], *, where: Any = None,
                 **options: Any) -> pd.DataFrame:
        """Any linear workload W (an EMatrix) over the vectorization of `attrs`."""
        return self.ask(questions.custom(self.domain, W, attrs), where=where, **options)

    def sql(self, text: str, *, epsilon: float | None = None, rho: float | None = None,
            plan: str = "auto", alpha: float = 0.05, explain: bool = False
            ) -> list[pd.DataFrame]:
        """SQL statements over the table (docs/sql.md), answered JOINTLY: one
        workload, one plan, one charge of `epsilon` (or `rho`); one tidy
        frame per statement (``select`` names the aggregate). With a leading
        EXPLAIN (or `explain=True`): the plan and each cell's expected
        standard error, nothing spent. Unsupported SQL is a `SqlError`
        naming the clause, before anything is spent."""
        from .sql import answer_sql

        return answer_sql(self, text, epsilon=epsilon, rho=rho, plan=plan, alpha=alpha,
                          explain=explain)

    # -- graphical models and synthetic data (issue #25) -----------------------------
    def model(self, plan: str = "mst", *, epsilon: float | None = None,
              rho: float | None = None, attrs: Sequence[str] | None = None,
              workload: Sequence[Sequence[str]] | None = None, where: Any = None,
              params: dict[str, Any] | None = None) -> Any:
        """A graphical model of the table fitted by a model plan with this
        budget (`ektelo.wide.MODELS`): MST (default) or AIM under zCDP (the
        session needs delta= or rho=), PrivBayes+PGM under pure ε (epsilon=
        alone), HDMM+PGM under either (Gaussian noise at ρ, Laplace at ε).
        A `GraphicalModel` with `.marginal(attrs)`, `.answer(W, attrs)`,
        `.synthetic(rows)` and `.total` — all post-processing, free. `attrs`
        restricts it to some attributes; `workload` is a list of attribute
        tuples for AIM and HDMM+PGM (what they measure for; default every
        pair) or PrivBayes+PGM (the attributes it models). A plan needing
        the other kind of budget is refused with what to do, before
        anything is spent; otherwise it spends exactly the budget.
        privbayes_pgm uses the session's `public_rows` (without `where=`)
        as its declared row count unless `params` gives `rows`."""
        return self._fit_model("model", plan, epsilon, rho, attrs, workload, where, params)

    def synthetic(self, rows: int | None = None, *, plan: str = "mst",
                  epsilon: float | None = None, rho: float | None = None,
                  attrs: Sequence[str] | None = None,
                  workload: Sequence[Sequence[str]] | None = None, where: Any = None,
                  seed: int | None = None, params: dict[str, Any] | None = None
                  ) -> pd.DataFrame:
        """A synthetic table (decoded labels/bins, the domain's columns) drawn
        from `model(plan, ...)` (any of `ektelo.wide.MODEL_PLANS`): `rows`
        records (default: the model's noisy total, rounded; at most
        `wide.MAX_SYNTHETIC_ROWS`, checked with every other argument before
        anything is spent). `seed` seeds the
        drawing of rows only (a post-processing step; the measurements' noise
        stays secure)."""
        # every argument checked before anything is spent (issue #36)
        wanted = None if rows is None else check.positive_int(rows, "rows")
        if wanted is not None and wanted > wide.MAX_SYNTHETIC_ROWS:
            raise ValueError(f"rows must be at most {wide.MAX_SYNTHETIC_ROWS}, got {rows!r} "
                             "(nothing was spent)")
        if seed is not None:
            check.integer(seed, "seed", minimum=0)
        model = self._fit_model("synthetic", plan, epsilon, rho, attrs, workload, where, params)
        # the default: the model's noisy total (public), within the same cap
        n = round(float(model.total)) if wanted is None else wanted
        frame = model.synthetic(min(max(n, 1), wide.MAX_SYNTHETIC_ROWS), seed=seed)
        after = self.budget
        frame.attrs.update(plan=plan, budget={"unit": after.unit, "total": after.total,
                                              "spent": after.spent,
                                              "remaining": after.remaining})
        return frame

    def _fit_model(self, label: str, plan: str, epsilon: float | None, rho: float | None,
                   attrs: Sequence[str] | None, workload: Sequence[Sequence[str]] | None,
                   where: Any, params: dict[str, Any] | None) -> Any:
        names, cliques = wide.check_request(self.domain, plan, attrs, workload, params)
        budget = self._request(epsilon, rho)
        wide.spend(plan, budget)  # the plan's unit: refused before anything is spent
        table = self._filtered(where)
        self._check_remaining(budget)
        table = _envelope(table, budget)  # the question's one charge, all or nothing
        with _Progress(f"{plan} model over {len(names)} attributes", self.progress):
            model = wide.fit(table, names, plan, budget, cliques=cliques, params=params,
                             say=wide.stderr_lines if self.progress else None,
                             rows=self.public_rows if where is None else None)
        self._remember(label, names, where, plan, budget, self.budget)
        return model

    def question(self, name: str, *args: Any, **kwargs: Any) -> questions.ParsedWorkload:
        """A question by name ("histogram", "cdf", "ranges", "marginals",
        "workload") and its arguments, or a spec string ("cdf:age by sex")."""
        if ":" in name and not args:
            return questions.parse(name, self.domain)
        if name in ("histogram", "counts"):
            return questions.histogram(self.domain, *args, **kwargs)
        if name == "cdf":
            return questions.cdf(self.domain, *args, **kwargs)
        if name == "ranges":
            return questions.ranges(self.domain, *args, **kwargs)
        if name == "marginals":
            first = args[0] if args else kwargs.pop("attrs")
            if isinstance(first, int):
                return questions.marginals(self.domain, list(self.domain.names), first)
            return questions.marginals(self.domain, first, *args[1:], **kwargs)
        if name == "workload":
            W, attrs = args
            return questions.custom(self.domain, W, attrs)
        if name in questions.STATISTICS:
            kwargs["statistics"] = (name,)
            return questions.aggregates(self.domain, *args, **kwargs)
        if name == "aggregates":
            return questions.aggregates(self.domain, *args, **kwargs)
        if name == "quantile":
            return questions.quantiles(self.domain, *args, **kwargs)
        raise ValueError(f"unknown question {name!r}: histogram, cdf, ranges, marginals, "
                         "workload, sum, count, mean, aggregates, quantile, or a spec string "
                         "such as 'cdf:age by sex'")

    # -- before spending -------------------------------------------------------------
    def preview(self, question: Any, *args: Any, plan: str = "auto",
                epsilon: float | None = None, rho: float | None = None, alpha: float = 0.05,
                **kwargs: Any) -> Preview:
        """The expected error and interval width of a question WITHOUT spending.

        `question` is a name with its arguments (``"cdf", "age"``), a spec
        string (``"cdf:age by sex"``) or a ParsedWorkload."""
        q = question if isinstance(question, questions.ParsedWorkload) else self.question(
            question, *args, **kwargs)
        alpha = _alpha(alpha)
        budget = self._request(epsilon, rho)
        choice = self._choose(q, plan, budget)
        spend = self._group_gain(q, choice, budget, {})
        self._last_choice = (q, choice, spend)
        std, method = self._expected_std(q, choice, spend)
        half = None if std is None else _half_width(std, method, alpha)
        return Preview(choice.plan, choice.why, std, half, method, float(alpha), budget,
                       self._ranking(choice))

    # -- answering -------------------------------------------------------------------
    def ask(
        self,
        q: questions.ParsedWorkload,
        *,
        where: Any = None,
        epsilon: float | None = None,
        rho: float | None = None,
        plan: str = "auto",
        alpha: float = 0.05,
        nonnegative: bool = False,
        round: bool = False,
        consistent: bool = False,
        params: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Answer question `q` (see the named questions) privately: a tidy
        DataFrame, its plan and budget in ``frame.attrs``."""
        return self._answer(q, where=where, epsilon=epsilon, rho=rho, plan=plan, alpha=alpha,
                            nonnegative=nonnegative, round=round, consistent=consistent,
                            params=params).to_frame()

    def _answer(self, q: questions.ParsedWorkload, *, where: Any = None,
                epsilon: float | None = None, rho: float | None = None, plan: str = "auto",
                alpha: float = 0.05, nonnegative: bool = False, round: bool = False,
                consistent: bool = False, params: dict[str, Any] | None = None) -> Columns:
        """`ask`'s answer as NumPy columns (`Columns.to_frame()`: the DataFrame
        `ask` returns): the command line prints a small one without pandas (#41)."""
        from . import plans

        alpha = _alpha(alpha)
        budget = self._request(epsilon, rho)
        params = dict(params or {})
        choice = self._choose(q, plan, budget, filtered=where is not None)
        name, why = choice.plan, choice.why
        table = self._filtered(where)  # checks the filter before anything is spent
        self._check_remaining(budget)
        if name in wide.MODEL_PLANS:  # a model's options, before its envelope is charged
            wide.check_params(name, params)
        if name != DIRECT_MARGINALS:
            if name not in wide.MODEL_PLANS:
                _check_vector_size(q, name)
            info = plans.get(name)
            unknown = set(params) - set(info.parameters)
            if unknown:
                raise TypeError(f"plan {name!r} has no parameter(s) {sorted(unknown)}; its "
                                f"parameters are {sorted(info.parameters)}")
        table = _envelope(table, budget)  # the question's one charge, all or nothing
        before = len(self._recorder.measurements)
        spend = self._group_gain(q, choice, budget, params)
        self._last_choice = (q, choice, spend)
        with _Progress(f"{name} on {q.kind} over {'×'.join(q.attributes)}", self.progress):
            estimate = self._run(q, choice, table, spend, params,
                                 rows=None if where is not None else self.public_rows)
        taken = self._recorder.measurements[before:]
        std, method = self._observed_std(q, choice, spend, taken, params)
        answers = np.asarray(estimate, dtype=np.float64)
        if q.derived is not None:  # sums, means, quantiles: post-processing (issue #38)
            from .derived import finish

            needs = q.derived.what == "quantile" or "mean" in q.derived.statistics
            factor = self._noise_factor(q, name, taken, params) if needs else None
            derived = finish(q, answers, std, method, alpha, factor, nonnegative=nonnegative,
                             rounded=round)
            method = "; ".join(str(c) for c in derived["ci_method"].cat.categories)
            frame = Columns.of(derived)
        else:
            frame = _tidy(q, answers, std, method, alpha, nonnegative, round, consistent)
        after = self.budget
        frame.attrs.update(plan=name, why=why, alpha=alpha, ci_method=method,
                           budget={"unit": after.unit, "total": after.total,
                                   "spent": after.spent, "remaining": after.remaining})
        self._remember(q.kind, q.attributes, where, name, budget, after)
        return frame

    # -- internals -------------------------------------------------------------------
    def _check_remaining(self, budget: dict[str, float]) -> None:
        """Refuse a question the budget cannot cover before its plan starts: a
        plan's steps are charged one by one, and a refusal half-way would
        leave the first steps spent for nothing. A question costs its budget
        at the table (filters and projections are 1-stable)."""
        from .kernel import BudgetExceeded

        if self._enveloped:  # inside `_one_charge`: its envelope was checked whole
            return
        b = self.budget
        k = self.max_rows_per_unit
        cost = budget["rho"] * k * k if b.unit == "rho" else budget["epsilon"] * k
        if cost > b.remaining * (1 + 1e-9):
            unit = "ρ" if b.unit == "rho" else "ε"
            raise BudgetExceeded(
                f"the question needs {unit}={cost:g} but {unit}={b.remaining:g} of "
                f"{b.total:g} remains; nothing was spent"
            )

    def _request(self, epsilon: float | None, rho: float | None) -> dict[str, float]:
        """The question's budget as the kernel will charge it: {"epsilon": ε}
        on a pure-DP kernel; {"rho": ρ} on a zCDP kernel (ε converted with the
        session's δ, the tight conversion of `ektelo.budget`)."""
        if (epsilon is None) == (rho is None):
            raise TypeError("give the question's budget: epsilon= (or rho= on a zCDP session)")
        b = self.budget
        if rho is not None:
            if b.unit != "rho":
                raise ValueError("rho= needs a zCDP session (Session(..., epsilon=, delta=) "
                                 "or rho=); this one is pure ε-DP")
            return self._per_row({"rho": check.positive(rho, "rho")})
        eps = check.positive(epsilon, "epsilon")
        if b.unit == "rho":
            if b.delta is None:
                raise ValueError("this zCDP session has no delta: give the question rho=")
            from .budget import rho_of_epsilon_delta

            return self._per_row({"rho": rho_of_epsilon_delta(eps, b.delta), "epsilon": eps})
        return self._per_row({"epsilon": eps})

    def _per_row(self, budget: dict[str, float]) -> dict[str, float]:
        """The question's budget at the bounded table: a per-unit ε is ε/k
        there (ρ/k²), as Algorithm 2 charges k·ε (k²·ρ) at the root."""
        k = self.max_rows_per_unit
        if k == 1:
            return budget
        return {n: v / (k * k if n == "rho" else k) for n, v in budget.items()}

    def _group_gain(self, q: questions.ParsedWorkload, choice: Choice,
                    budget: dict[str, float], params: dict[str, Any]) -> dict[str, float]:
        """The budget to ask of the bounded table: ρ·g instead of ρ when each
        unit is bounded to g groups and every query of the plan's Gaussian
        strategy (the planner's, `choice.strategy`) counts within one group
        (`kernel.group_separable`, the kernel's own test). The bounded
        table's ρ is ρ_u/(g·r)² per unit's ρ_u (`_per_row`); asked ρ_u/(g·r²)
        instead, the kernel charges its √g·r bound — ρ_u at the root, the
        question's budget — and the noise is √g times smaller than by L1
        (issue #37). Were the two ever to disagree, the question's envelope
        refuses the larger charge with nothing spent."""
        from .kernel import group_separable

        g = self._marginal_gain(q.attributes, budget)
        if g == 1 or params or not choice.gaussian or choice.strategy is None:
            return budget
        assert self._unit_groups is not None  # (g > 1)
        axes = tuple(q.attributes.index(n) for n in self._unit_groups[1])
        if not group_separable(choice.strategy, tuple(q.shape), axes):
            return budget
        return {**budget, "rho": budget["rho"] * g}

    def _marginal_gain(self, attrs: Sequence[str], budget: dict[str, float]) -> float:
        """g for Gaussian counts over `attrs` that include the unit's group_by
        (an Identity over them counts within groups), else 1."""
        if self._unit_groups is None or "rho" not in budget or not attrs:
            return 1.0
        g, names = self._unit_groups
        return float(g) if set(names) <= set(attrs) else 1.0

    def _choose(self, q: questions.ParsedWorkload, plan: str, budget: dict[str, float],
                filtered: bool = False) -> Choice:
        """The question's plan: `ektelo.planner.choose` (the one place that decides)."""
        from .planner import choose

        return choose(q, budget, plan=plan, rows=None if filtered else self.public_rows)

    @staticmethod
    def _ranking(choice: Choice) -> pd.DataFrame:
        """Tier 0's ranking of an "auto" choice (free, no features); empty otherwise."""
        import pandas as pd

        from .planner import ranking_rows

        if not choice.candidates:
            return pd.DataFrame()
        table = pd.DataFrame(ranking_rows(choice))
        table.attrs["choice"] = choice
        return table

    def _plan(self, q: questions.ParsedWorkload, plan: str, budget: dict[str, float],
              filtered: bool = False) -> tuple[str, str, pd.DataFrame]:
        """(plan, why, ranking) of `_choose` (the form callers had before #35)."""
        choice = self._choose(q, plan, budget, filtered)
        return choice.plan, choice.why, self._ranking(choice)

    def release_keys(self, column: str, *, epsilon: float | None = None,
                     rho: float | None = None) -> tuple[str, ...]:
        """Partition selection (issue #39, docs/sql.md): the keys of open
        column `column` whose noisy count reaches the kernel's threshold —
        set from the δ kept for keys and the contribution bound; keys held
        by one person are released with probability at most that δ — charged
        `epsilon` (converted with the session's δ) or `rho`. From then on the
        column is an attribute of these keys plus `OTHER_KEY` (every other
        key), for every question of the session."""
        if column not in self.domain.open:
            raise ValueError(f"{column!r} is not an open column (open: {list(self.domain.open)})")
        budget = self._request(epsilon, rho)
        if "rho" not in budget:
            raise ValueError("releasing keys needs a zCDP session (delta=): never pure ε-DP")
        self._check_remaining(budget)
        keys = self._table.select_keys(column, rho=budget["rho"])
        self._open_keys(column, keys)
        self._remember("keys", [column], None, "select_keys", budget, self.budget)
        return keys

    def _remember(self, question: str, attributes: Sequence[str], where: Any, plan: str,
                  budget: dict[str, float], after: Any) -> None:
        """One row of `history`: the question, its plan, what it was asked to
        spend and the budget `after` it."""
        self._history.append({
            "question": question, "attributes": ",".join(attributes),
            "where": None if where is None else str(where), "plan": plan,
            **budget, "spent_after": after.spent, "remaining_after": after.remaining,
        })

    def _open_keys(self, column: str, keys: Sequence[str]) -> None:
        """Open column `column` recoded by its released keys (free, public)."""
        self._table = self._table.recode(column, keys)
        self.domain = self._table.domain

    @contextlib.contextmanager
    def _one_charge(self, budget: dict[str, float]) -> Iterator[None]:
        """Every question asked inside spends from ONE envelope of `budget`
        (the kernel charges it once, at its first request, or refuses it
        whole): `ektelo.sql` answers statements one at a time this way when
        that errs less than jointly, still charged once. The remaining
        budget is checked for the whole before anything runs; the questions'
        own envelopes nest inside it."""
        self._check_remaining(budget)
        outer, domain = self._table, self.domain
        self._table = _envelope(self._table, budget)
        self._enveloped = True
        try:
            yield
        finally:
            self._table, self.domain, self._enveloped = outer, domain, False

    def _filtered(self, where: Any) -> Any:
        if where is None:
            return self._table
        if isinstance(where, str):
            from .where import parse_where

            where = parse_where(where, self.domain)
        return self._table.where(where)

    def _run(self, q: questions.ParsedWorkload, choice: Choice, table: Any,
             budget: dict[str, float], params: dict[str, Any],
             rows: float | None = None) -> np.ndarray:
        """The question's answers by the chosen plan (`rows`: a row count
        declared public, for the model plans that use one)."""
        from . import plans

        name = choice.plan
        attrs = list(q.attributes)
        if name == DIRECT_MARGINALS:
            return self._direct_marginals(q, table, budget)
        if name in wide.MODEL_PLANS:
            model = wide.fit(table, attrs, name, budget, cliques=wide.question_cliques(q, name),
                             params=params, say=wide.stderr_lines if self.progress else None,
                             rows=rows)
            if q.kind == "marginals":
                return wide.marginal_answers(q, model)
            return model.answer(q.matrix, attrs)
        info = plans.get(name)
        if choice.gaussian:
            # the data-independent plan with the Gaussian mechanism at ρ (#24)
            x = table.vectorize(attrs)
            result = plans.run(name, x, q.matrix, budget["rho"], mechanism="gaussian", **params)
            result = np.asarray(result, dtype=np.float64).reshape(-1)
            if info.returns == "answers":
                return result
            return np.asarray(q.matrix @ result).reshape(-1)
        eps = budget.get("epsilon") if "rho" not in budget else math.sqrt(2 * budget["rho"])
        assert eps is not None
        if info.input_kind == "table":
            sub = table.select(attrs)
            if name == "cdf_estimator":
                if q.kind != "prefix" or len(attrs) != 1:
                    raise ValueError("cdf_estimator answers a CDF of one attribute")
                params = {"attribute": attrs[0], **params}
            result = plans.run(name, sub, q.matrix, eps, **params)
        else:
            result = plans.run(name, table.vectorize(attrs), q.matrix, eps, **params)
        result = np.asarray(result, dtype=np.float64).reshape(-1)
        if info.returns == "answers":
            return result
        return np.asarray(q.matrix @ result).reshape(-1)

    def _direct_marginals(self, q: questions.ParsedWorkload, table: Any,
                          budget: dict[str, float]) -> np.ndarray:
        """Every marginal on its own vector, Identity, with ε/K (or ρ/K): the
        marginals of one table compose sequentially (K of them)."""
        from .matrix import Identity

        groups = _marginal_groups(q)
        K = len(groups)
        out = []
        for attrs, _ in groups:
            if not attrs:  # the 0-way marginal: the total
                x = table.vectorize([q.attributes[0]])
                from .matrix import Total

                M: Any = Total(x.size)
            else:
                x = table.vectorize(list(attrs))
                M = Identity(x.size)
            if "rho" in budget:
                y = x.gaussian(M, rho=budget["rho"] / K * self._marginal_gain(attrs, budget))
            else:
                y = x.laplace(M, eps=budget["epsilon"] / K)
            out.append(np.asarray(y.answers))
        return np.concatenate(out)

    def _expected_std(self, q: questions.ParsedWorkload, choice: Choice,
                      budget: dict[str, float]) -> tuple[np.ndarray | None, str]:
        """Per-query standard errors known before measuring (data-independent:
        from the strategy the planner chose with the plan)."""
        from . import plans
        from .matrix import Identity
        from .operators import error

        name = choice.plan
        m = q.matrix.shape[0]
        gaussian = "rho" in budget
        if name in wide.MODEL_PLANS:
            return None, wide.model_ci_method(name)
        if name == DIRECT_MARGINALS:
            groups = _marginal_groups(q)
            K = len(groups)
            if gaussian:  # σ² of each marginal's Gaussian at ρ/K (·g within groups)
                sd = [np.full(rows, math.sqrt(K / (2 * budget["rho"] * self._marginal_gain(
                    attrs, budget)))) for attrs, rows in groups]  # fmt: skip
                return np.concatenate(sd), "exact Gaussian"
            return np.full(m, math.sqrt(2) * K / budget["epsilon"]), "exact Laplace"
        info = plans.get(name)
        if info.data_dependent:
            if name in _LS_DEPENDENT:
                return None, ("noise-only | partition: known after measuring (data-dependent "
                              "plan, no closed form before)")
            return None, f"none: {name}'s estimate is not linear in the noise"
        A = choice.strategy
        if A is None:
            return None, f"none: {name} has no fixed strategy"
        try:
            if choice.gaussian:
                var = error.expected_error(q.matrix, A, rho=budget["rho"], per_query=True)
                return np.sqrt(np.asarray(var, dtype=np.float64)), "exact Gaussian"
            eps = budget.get("epsilon") if not gaussian else math.sqrt(2 * budget["rho"])
            var = error.expected_error(q.matrix, A, eps, per_query=True)
        except (ValueError, MemoryError) as exc:
            return None, f"none: {str(exc).splitlines()[0]}"
        single = isinstance(A, Identity) and isinstance(q.matrix, Identity)
        return (np.sqrt(np.asarray(var, dtype=np.float64)),
                "exact Laplace" if single else LAPLACE_SUM)

    def _noise_factor(self, q: questions.ParsedWorkload, name: str, taken: list[Any],
                      params: dict[str, Any]) -> np.ndarray | None:
        """F with the answers' noise covariance F Fᵀ, from the measurements the
        plan took (least-squares plans: a Kronecker strategy on a Kronecker
        workload at any size, others up to `_DENSE_CELLS` cells), else None:
        what a mean's or quantile's interval needs."""
        from . import plans

        if name in wide.MODEL_PLANS or name == DIRECT_MARGINALS or not taken:
            return None
        if plans.get(name).data_dependent and name not in _LS_DEPENDENT:
            return None
        return noise_factor(q.matrix, taken, max_dense=_DENSE_CELLS)

    def _observed_std(self, q: questions.ParsedWorkload, choice: Choice, budget: dict[str, float],
                      taken: list[Any], params: dict[str, Any]) -> tuple[np.ndarray | None, str]:
        from . import plans

        name = choice.plan
        if name in wide.MODEL_PLANS:
            return None, wide.model_ci_method(name)
        if name == DIRECT_MARGINALS or not plans.get(name).data_dependent:
            if params:
                return None, "none: error bars are computed for the plan's default parameters"
            return self._expected_std(q, choice, budget)
        if name not in _LS_DEPENDENT:
            return None, f"none: {name}'s estimate is not linear in the noise"
        if not taken:
            return None, "none: no measurement recorded"
        n = q.matrix.shape[1]
        if n > _DENSE_CELLS:
            return None, (f"none: noise-only interval computed up to {_DENSE_CELLS} cells "
                          f"(this vector has {n:,})")
        return noise_only_std(q.matrix, taken), f"noise-only | partition; {LAPLACE_SUM}"


#: the analyst's session by its short name (the server's is `ServerSession`)
Session = AnalystSession


def _alpha(alpha: float) -> float:
    a = check.positive(alpha, "alpha")
    if not a < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    return a


def _envelope(table: Any, budget: dict[str, float]) -> Any:
    """`table` inside one envelope of the question's budget (issue #41): the
    kernel charges it once, now, or refuses it whole — a plan's steps then
    spend from it, never a part of the question alone."""
    if "rho" in budget:
        return table.envelope(rho=budget["rho"])
    return table.envelope(eps=budget["epsilon"])


def _marginal_groups(q: questions.ParsedWorkload) -> list[tuple[tuple[str, ...], int]]:
    """(attributes, rows) of each marginal of a marginals question, in order."""
    out: list[tuple[tuple[str, ...], int]] = []
    for name, rows in q.rows.groupby("marginal", sort=False).size().items():
        out.append((() if name == "total" else tuple(str(name).split("×")), int(rows)))
    return out


def _check_vector_size(q: questions.ParsedWorkload, name: str) -> None:
    cells = math.prod(q.shape)
    if cells > LARGE_VECTOR:
        warnings.warn(
            f"{name} builds a data vector of {cells:,} cells over {' × '.join(q.attributes)}; "
            f"ask about fewer attributes or coarser bins, or for marginals (measured one by one "
            f"with plan='{DIRECT_MARGINALS}')",
            LargeVectorWarning,
            stacklevel=3,
        )


class _Progress:
    """Progress on a slow step: a tqdm counter of elapsed seconds on a
    terminal, a log line every 10 s otherwise (nothing for fast steps)."""

    def __init__(self, label: str, enabled: bool, delay: float = 1.0, every: float = 10.0):
        import threading

        self.label, self.enabled, self.delay, self.every = label, enabled, delay, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        import logging
        import sys
        import time

        start = time.perf_counter()
        if self._stop.wait(self.delay):
            return
        if sys.stderr.isatty():
            from tqdm import tqdm

            with tqdm(desc=self.label, unit="s", bar_format="{desc}: {elapsed}",
                      leave=False) as bar:
                while not self._stop.wait(0.2):
                    bar.refresh()
            return
        log = logging.getLogger("ektelo")
        while True:
            log.warning("still running %s (%.0f s)", self.label, time.perf_counter() - start)
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

